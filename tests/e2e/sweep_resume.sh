#!/bin/sh
# tests/e2e/sweep_resume.sh: `hydra sweep` killed and resumed. A sweep on the quick profile
# (configs/experiments/quick.yaml) shrunk to tiny sizes on synthetic data (written here): 4 points
# (eval.score x seed, method single, 1 epoch) with 2 jobs. The sweep is killed with SIGKILL as
# soon as the first point is complete, then the same command is run again. Checks: every run is
# complete, the first run's files are untouched (same bytes, same mtime), the resumed runs hit
# the stage cache (base models built before the kill, or by the point sharing their seed), the
# aggregated table is present with mean ± std rows; then a SIGINT stops a sweep cleanly (exit
# 130, the message says how to resume) and the rerun finishes it; after a sweep returns, SIGTERM
# kills the process again.
set -u
HYDRA=${HYDRA:-./hydra}
case "$HYDRA" in /*) ;; *) HYDRA="$(pwd)/$HYDRA" ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-sweep-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "sweep_resume: $*"; exit 1; }
HOME_DIR=$(pwd)
export HYDRA_CACHE_DIR="$tmp/cache"

mkdir -p "$tmp/data"
cat > "$tmp/mk.lua" <<'LUA'
local hydra = require("hydra")
hydra.model.write_synthetic(arg[1] .. "/tiny.h5", { train = 256, val = 64, test = 64 })
hydra.model.write_synthetic(arg[1] .. "/tinyood.h5", { train = 8, val = 8, test = 64, seed = 5,
                                                       name = "tinyood" })
LUA
"$HYDRA" run "$tmp/mk.lua" "$tmp/data" || fail "cannot write the synthetic data"

cat > "$tmp/tiny.yaml" <<EOF
experiment: resume
results_dir: $tmp/results
data: {id: tiny, ood: [tinyood], shift: [], dir: $tmp/data, train_subset: 0, test_subset: 0}
train: {epochs: 1, batch_size: 32, eval_batch_size: 64}
methods: [single]
EOF
cat > "$tmp/s.yaml" <<EOF
base: [$HOME_DIR/configs/experiments/quick.yaml, tiny.yaml]
grid:
  seed: [0, 1]
  eval.score: [msp, entropy]
EOF

# 1. start, kill -9 as soon as the first run is complete
"$HYDRA" sweep "$tmp/s.yaml" --jobs 2 --threads 2 > "$tmp/first.log" 2>&1 &
pid=$!
i=0
first=""
while [ $i -lt 600 ]; do
    first=$(ls "$tmp"/results/resume/*/result.h5 2>/dev/null | head -n 1)
    [ -n "$first" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
[ -n "$first" ] || { cat "$tmp/first.log"; fail "no run completed before the kill"; }
sleep 0.3   # the workers die with their parent (PR_SET_PDEATHSIG)
first_dir=$(dirname "$first")
sum_before=$(cksum < "$first")
mtime_before=$(stat -c %Y "$first")
n_before=$(ls "$tmp"/results/resume/*/result.h5 | wc -l)
echo "killed with $n_before of 4 runs complete"
[ "$n_before" -lt 4 ] || echo "note: every run finished before the kill landed"

# 2. resume
"$HYDRA" sweep "$tmp/s.yaml" --jobs 2 --threads 2 > "$tmp/second.log" 2>&1 \
    || { cat "$tmp/second.log"; fail "the resumed sweep failed"; }
cat "$tmp/second.log"
grep -q "4 points, $n_before complete, $((4 - n_before)) to run; 2 jobs x 1 threads" \
    "$tmp/second.log" || fail "the resumed sweep did not skip the $n_before complete runs"
grep -q "sweep s: 4 of 4 points complete" "$tmp/second.log" || fail "not every point complete"
n=$(ls "$tmp"/results/resume/*/result.h5 | wc -l)
[ "$n" -eq 4 ] || fail "expected 4 complete runs, found $n"
[ "$(cksum < "$first")" = "$sum_before" ] || fail "the first run's result.h5 changed"
[ "$(stat -c %Y "$first")" = "$mtime_before" ] || fail "the first run's result.h5 was rewritten"
grep -q "^== run" "$first_dir/log.txt" || fail "no log.txt in the first run"
[ "$(grep -c '^== run' "$first_dir/log.txt")" -eq 1 ] || fail "the first run was run again"
# every base model was built once: 2 seeds -> 2 builds, all other lookups are hits
built=$(cat "$tmp"/results/resume/*/log.txt | grep -c "stage base [0-9a-f]*: built")
hits=$(cat "$tmp"/results/resume/*/log.txt | grep -c "stage base [0-9a-f]*: cache hit")
[ "$built" -le 2 ] || fail "base models built $built times (expected at most 2, one per seed)"
[ "$hits" -ge 2 ] || fail "expected at least 2 base-model cache hits, got $hits"
table="$tmp/results/resume/report/table.md"
[ -f "$table" ] || fail "no aggregated table $table"
grep -q "| Single (eval.score=msp) (n=2) |" "$table" || { cat "$table"; fail "no msp row"; }
grep -q "| Single (eval.score=entropy) (n=2) |" "$table" || fail "no entropy row"
grep -q " ± " "$table" || fail "no mean ± std in the table"
[ -f "$tmp/results/resume/report/table.csv" ] || fail "no table.csv"
[ -f "$tmp/results/resume/report/plots/auroc-vs-eval_score.png" ] || fail "no ablation plot"

# 3. a third run has nothing to do
"$HYDRA" sweep "$tmp/s.yaml" --jobs 2 --threads 2 --no-report > "$tmp/third.log" 2>&1 \
    || fail "the third sweep failed"
grep -q "4 points, 4 complete, 0 to run" "$tmp/third.log" || { cat "$tmp/third.log"; fail "rerun"; }

# 4. SIGINT stops the workers cleanly and says how to resume; the rerun finishes
"$HYDRA" sweep "$tmp/s.yaml" --jobs 2 --threads 2 train.epochs=2 > "$tmp/int.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 300 ]; do
    [ "$(ls -d "$tmp"/results/resume/*/ | wc -l)" -gt 5 ] && break   # a worker has started
    sleep 0.05
    i=$((i + 1))
done
kill -INT $pid
wait $pid
rc=$?
cat "$tmp/int.log"
if [ $rc -ne 0 ]; then
    [ $rc -eq 130 ] || fail "SIGINT: expected exit status 130, got $rc"
    grep -q "rerun the same command to finish the rest" "$tmp/int.log" || fail "no resume hint"
    sleep 0.2
    pgrep -f "sweep $tmp/s.yaml --point" >/dev/null && fail "workers still running after SIGINT"
fi
"$HYDRA" sweep "$tmp/s.yaml" --jobs 2 --threads 2 train.epochs=2 > "$tmp/int2.log" 2>&1 \
    || { cat "$tmp/int2.log"; fail "the sweep after SIGINT failed"; }
grep -q "sweep s: 4 of 4 points complete" "$tmp/int2.log" || fail "not finished after SIGINT"

# 5. after a sweep returns, SIGTERM kills again: an experiment's own work after its sweep (a
# pretraining stage, the report) must not swallow the signal the sweep trapped
cat > "$tmp/after.lua" <<'LUA'
local core = require("hydra.core")
local sweep = require("hydra.sweep")
sweep.run(sweep.load(arg[1], {}), { quiet = true })
io.stdout:write("after the sweep\n"); io.stdout:flush()
local t0 = core.now()
while core.now() - t0 < 20 do end   -- busy, as a training loop
print("survived SIGTERM")
LUA
"$HYDRA" run "$tmp/after.lua" "$tmp/s.yaml" > "$tmp/after.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 400 ] && ! grep -q "after the sweep" "$tmp/after.log"; do sleep 0.05; i=$((i + 1)); done
grep -q "after the sweep" "$tmp/after.log" || { cat "$tmp/after.log"; fail "the script did not get past its sweep"; }
kill -TERM $pid
wait $pid
rc=$?
grep -q "survived" "$tmp/after.log" && fail "SIGTERM after a sweep was swallowed (the work ran on)"
[ $rc -eq 143 ] || { cat "$tmp/after.log"; fail "SIGTERM after a sweep: expected exit status 143, got $rc"; }
echo "sweep_resume: ok"
