#!/bin/sh
# tests/e2e/condition_quick.sh: experiments/ablation_condition.lua on the quick profile end to
# end, on synthetic stand-ins for the prepared files it reads (fashion-mnist, the four OOD test
# sets, ood-val-image and the four leave-one-out ood-val-<set> files, written under their real
# names in a temporary data.dir): all 14 points run (Deep Ensembles and Hydra (Circ)), the report
# has one row per setting with the gap columns, the leave-one-out rows the same-sets reference,
# the plots of the gap against each axis exist, and the member points reuse the reference's base
# models and members (M = 1..6: 6 members fine-tuned in all).
# Exit 77 (skip) when gnuplot is not installed (the plots need it).
set -u
HYDRA=${HYDRA:-./hydra}
command -v gnuplot >/dev/null 2>&1 || { echo "gnuplot is not installed (make deps)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"

cat > "$tmp/mk.lua" <<'LUA'
local hydra = require("hydra")
local d = arg[1]
hydra.model.write_synthetic(d .. "/fashion-mnist.h5", { train = 96, val = 32, test = 40, seed = 3 })
for i, n in ipairs({ "mnist", "notmnist", "glyphs", "opencv-digits" }) do
  hydra.model.write_synthetic(d .. "/" .. n .. ".h5", { train = 8, val = 8, test = 24,
                                                         seed = 10 + i, classes = 3 })
  hydra.model.write_synthetic(d .. "/ood-val-" .. n .. ".h5", { train = 8, val = 24, test = 8,
                                                                 seed = 20 + i, classes = 3 })
end
hydra.model.write_synthetic(d .. "/ood-val-image.h5", { train = 8, val = 24, test = 8, seed = 9,
                                                         classes = 4 })
LUA
"$HYDRA" run "$tmp/mk.lua" "$tmp/data" || exit 1

HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" run experiments/ablation_condition.lua profile=quick \
    data.dir="$tmp/data" model.depth=2 prune.calib_size=32 prune.val_size=24 train.batch_size=32 \
    train.eval_batch_size=32 results_dir="$tmp/results" >"$tmp/out.txt" 2>&1 \
    || { cat "$tmp/out.txt"; exit 1; }
fail=0
rep="$tmp/results/ablation_condition/report"
[ -s "$rep/condition.md" ] || { echo "no condition.md"; fail=1; }
rows=$(grep -c '^| [a-z_]* | ' "$rep/condition.md")
[ "$rows" -eq 15 ] || { echo "condition.md: $rows rows, expected 15 (header + 14 settings)"; fail=1; }
for a in reference heads width epochs augment ood_val members; do
    grep -q "^| $a | " "$rep/condition.md" || { echo "condition.md: no axis '$a'"; fail=1; }
done
# leave-one-out rows carry the reference on the same sets and their search against the
# reference's by the rule (one seed here: within noise, no seed test); the other rows do not
n=$(grep '^| ood_val | ' "$rep/condition.md" | grep -c '| [^|]*within noise (fewer than 2 seeds: no seed test) |$')
[ "$n" -eq 4 ] || { echo "leave-one-out rows without their search's verdict"; fail=1; }
n=$(grep '^| [a-z_]* | ' "$rep/condition.md" | grep -v '^| axis \|^| ood_val ' | grep -vc ' – | – |$')
[ "$n" -eq 0 ] || { echo "$n rows other than the leave-one-out ones with a same-sets value"; fail=1; }
for p in heads width epochs augment members ood_val; do
    [ -s "$rep/plots/gap-vs-$p.png" ] || { echo "missing plot gap-vs-$p.png"; fail=1; }
done
# every setting's Hydra (Circ) against Deep Ensembles, by the rule
n=$(grep -c '^- .*: Hydra (Circ) [0-9.]* vs Deep Ensembles [0-9.]* (claim: Hydra (Circ) higher; seed 0): .*: \(holds\|within noise\|fails\)' "$rep/condition.md")
[ "$n" -eq 14 ] || { echo "condition.md: $n verdict lines, expected 14"; fail=1; }
n=$(ls "$tmp/cache/member" | grep -c '\.h5$')
# 5 base configurations x 3 members + 4 leave-one-out searches x 3 + M = 1..6 beyond the
# reference's 3 (members 4, 5, 6): 15 + 12 + 3 = 30 at most (fewer when gate rows coincide;
# 45 if every M fine-tuned its own members)
[ "$n" -le 30 ] || { echo "member stages: $n, expected at most 30"; fail=1; }
[ $fail -eq 0 ] || { cat "$tmp/out.txt"; cat "$rep/condition.md"; exit 1; }
echo "ablation_condition quick: 14 settings, gap table and plots in $rep ($n member stages)"
