#!/bin/sh
# tests/e2e/b2_quick.sh: experiments/b2_circuit_knockout.lua (the paper's Appendix B.2 test,
# training-free after the base) on the quick profile end to end, 3 seeds, on synthetic stand-ins
# (tiny.inc's ID and near OOD set, a far OOD set and an OOD validation set written here): the
# summary holds 4 knockout settings x 3 seeds, the bootstrap the comparisons (circuit against
# random, lowest-Taylor and no knockout), and the report their verdicts. Then `hydra repro` on a list
# of experiments prints the budget first and records each section's wall time, and --budget
# runs nothing.
set -u
. "$(dirname "$0")/tiny.inc"
tiny_setup b2_quick
# a far OOD test set and the circuit search's OOD validation set beside tiny.inc's two files
cat > "$tmp/mk2.lua" <<'LUA'
local hydra = require("hydra")
hydra.model.write_synthetic(arg[1] .. "/tinyfar.h5", { train = 8, val = 8, test = 48, seed = 11,
                                                       classes = 3 })
hydra.model.write_synthetic(arg[1] .. "/tinyval.h5", { train = 8, val = 32, test = 8, seed = 9,
                                                       classes = 4 })
LUA
"$HYDRA" run "$tmp/mk2.lua" "$tmp/data" || fail "cannot write the synthetic data"
set -- data.dir="$tmp/data" data.id=tiny "data.ood={near: [tinyood], far: [tinyfar]}" \
    data.ood_val=tinyval data.train_subset=96 model.depth=2 prune.calib_size=32 \
    prune.val_size=24 train.batch_size=32 train.eval_batch_size=32 results_dir="$tmp/results"

"$HYDRA" repro b2_circuit_knockout --profile quick "$@" >"$tmp/out.txt" 2>&1 \
    || { cat "$tmp/out.txt"; exit 1; }
fail=0
rep="$tmp/results/b2_circuit_knockout/report"
for f in values.csv bootstrap.csv table.md; do
    [ -s "$rep/$f" ] || { echo "no $f"; fail=1; }
done
# 4 settings x 3 seeds x 5 keys
n=$(grep -c '^[a-z_]*,[^,]*,[0-2],' "$rep/values.csv")
[ "$n" -eq 60 ] || { echo "values.csv: $n values, expected 60"; fail=1; }
for r in none circuit low_importance random; do
    [ "$(grep -c "^$r,.*,ood_avg_auroc_msp," "$rep/values.csv")" -eq 3 ] \
        || { echo "values.csv: not 3 seeds of '$r'"; fail=1; }
done
grep -q '^circuit,random,ood_avg_auroc_msp,1000,0,3,' "$rep/bootstrap.csv" \
    || { echo "bootstrap.csv: no circuit vs random comparison"; fail=1; }
grep -q '^circuit,low_importance,ood_avg_auroc_msp,1000,0,3,' "$rep/bootstrap.csv" \
    || { echo "bootstrap.csv: no circuit vs low-importance comparison"; fail=1; }
n=$(grep -cE '^\| Circuit heads knocked out \| .* \| (holds|within noise|fails) \|$' \
    "$rep/table.md")
[ "$n" -ge 2 ] || { echo "table.md: $n verdict rows, expected 2 or more"; fail=1; }
grep -q 'Seeds 0, 1, 2' "$rep/table.md" || { echo "table.md: seeds not stated"; fail=1; }
# no training beyond the base models: one base stage per seed, no member or fused stage
[ "$(ls "$tmp/cache/base" | grep -c '\.h5$')" -eq 3 ] || { echo "expected 3 base models"; fail=1; }
[ ! -d "$tmp/cache/member" ] || { echo "a member was fine-tuned"; fail=1; }
# make repro's bookkeeping on a list of experiments: the budget first (the seeds' base models
# are cached now), then each section's wall time beside its estimate
"$HYDRA" repro b2_circuit_knockout,b2_circuit_knockout --profile quick "$@" \
    >"$tmp/out2.txt" 2>&1 || { cat "$tmp/out2.txt"; exit 1; }
head -n 1 "$tmp/out2.txt" | grep -q '^budget (estimate before the run' \
    || { echo "no budget before the run"; fail=1; }
grep -Eq '^  b2_circuit_knockout +3 +0 +3 of 3 ' "$tmp/out2.txt" \
    || { echo "budget: not 3 runs with 3 of 3 base models cached"; fail=1; }
times="$tmp/results/repro/quick-times.csv"
[ "$(head -n 1 "$times")" = "experiment,estimate_seconds,wall_seconds" ] \
    || { echo "no times file $times"; fail=1; }
[ "$(grep -c '^b2_circuit_knockout,[0-9.]*,[0-9.]*$' "$times")" -eq 2 ] \
    || { echo "times: not one line per section"; fail=1; }
"$HYDRA" repro b2_circuit_knockout --profile quick --budget "$@" >"$tmp/out3.txt" 2>&1 \
    || { cat "$tmp/out3.txt"; exit 1; }
grep -Eq '^  b2_circuit_knockout +3 +0 +3 of 3 ' "$tmp/out3.txt" \
    || { echo "--budget: not the cached base models"; fail=1; }
grep -q '^== ' "$tmp/out3.txt" && { echo "--budget ran the experiment"; fail=1; }
[ $fail -eq 0 ] || { cat "$tmp/out.txt"; cat "$tmp/out2.txt"; cat "$rep/table.md"; exit 1; }
echo "b2_circuit_knockout quick: 3 seeds, 4 knockout settings, verdicts in $rep/table.md"
