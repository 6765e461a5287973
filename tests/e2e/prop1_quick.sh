#!/bin/sh
# tests/e2e/prop1_quick.sh: experiments/prop1.lua on the quick profile end to end, with the data
# and model cut down to a synthetic world (a 2-layer ViT with 8 heads on generated textures, a
# Fashion-MNIST-C style shift file with corruption/severity splits, a validation OOD set for the
# circuit search): every sweep point (Taylor / circuit x fine-tuning x 8, 6, 4, 2, 1 heads) gets
# its prop1.h5, the report has every table, verdict and plot, the unpruned control point has
# dtheta = 0, and a second run measures nothing again.
# Exit 77 (skip) when gnuplot is not installed (the plots need it).
set -u
HYDRA=${HYDRA:-./hydra}
command -v gnuplot >/dev/null 2>&1 || { echo "gnuplot is not installed (make deps)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"

cat > "$tmp/mk.lua" <<'LUA'
local hydra = require("hydra")
local core = require("hydra.core")
local d = arg[1]
hydra.model.write_synthetic(d .. "/tiny.h5", { train = 128, val = 32, test = 48, seed = 3 })
hydra.model.write_synthetic(d .. "/synoodval.h5", { train = 8, val = 32, test = 8, seed = 9,
                                                     classes = 4 })
local f <close> = hydra.h5.open(d .. "/tiny.h5")
local im, lb = f:read("/test/images"), f:read("/test/labels")
local g <close> = hydra.h5.create(d .. "/synshift.h5")
for _, c in ipairs({ "gaussian_noise", "contrast" }) do
  for s = 1, 2 do
    g:write(("/%s/%d/images"):format(c, s), core.corrupt(im, c, s, 7))
    g:write(("/%s/%d/labels"):format(c, s), lb)
  end
end
g:set_attr("/meta", "mean", 0.3)
g:set_attr("/meta", "std", 0.35)
g:commit()
LUA
"$HYDRA" run "$tmp/mk.lua" "$tmp/data" || exit 1

run() {
    HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" run experiments/prop1.lua profile=quick \
        data.dir="$tmp/data" data.id=tiny data.ood_val=synoodval "data.shift=[synshift]" \
        data.shift_subset=16 data.train_subset=0 data.test_subset=0 model.d_model=16 \
        model.n_heads=8 model.depth=2 model.d_mlp=32 train.epochs=1 train.batch_size=32 \
        train.eval_batch_size=32 prune.calib_size=32 prune.val_size=32 prop1.rows=48 \
        results_dir="$tmp/results"
}
run >"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
fail=0
rep="$tmp/results/prop1/report"
n=$(ls "$tmp"/results/prop1/*/prop1.h5 2>/dev/null | wc -l)
[ "$n" -eq 20 ] || { echo "expected 20 points with prop1.h5, got $n"; fail=1; }
for t in "DeltaL(theta) = L_Dn - L_Dt" "DeltaL(theta + dtheta)" "Condition 1" "Condition 2" \
         "Condition 3" "second-order prediction" "ECE (%) at theta + dtheta" "NLL at theta" \
         "Verdicts"; do
    grep -q "$t" "$rep/table.md" || { echo "table.md: no '$t'"; fail=1; }
done
grep -q "^| Conclusion (DeltaL(theta) <= DeltaL(theta + dtheta)) | [a-z ]*: [0-9]* of 36 " \
    "$rep/table.md" || { echo "table.md: no verdict over 18 points x 2 severities"; fail=1; }
grep -q "^| Taylor, no fine-tuning | 8 | 1\.[0-9]* | 0\.0000 | 0\.0000 | 0\.0000 |" \
    "$rep/table.md" || { echo "the unpruned point has dtheta != 0"; fail=1; }
for p in gap gap_pred gdot curvature grad_train ece_gap nll_gap; do
    [ -s "$rep/plots/$p.png" ] && [ -s "$rep/plots/$p.gp" ] || { echo "missing plot $p"; fail=1; }
done
lines=$(wc -l < "$rep/prop1.csv")
[ "$lines" -eq 61 ] || { echo "prop1.csv: $lines lines, expected 61 (20 points x 3 sets + header)"; fail=1; }
# the result summary (hydra.paper's layout): 18 pruned points x 6 keys + 7 statements, 1 seed
[ "$(grep -c '^"[a-z]*\[finetune.epochs=' "$rep/values.csv")" -eq 108 ] \
    || { echo "values.csv: expected 18 pruned points x 6 keys"; fail=1; }
[ "$(grep -c ',share,' "$rep/values.csv")" -eq 7 ] \
    || { echo "values.csv: expected a share per statement"; fail=1; }
grep -q '^a,b,key,resamples,boot_seed,seeds,diff,lo,hi$' "$rep/bootstrap.csv" \
    || { echo "bootstrap.csv: no header"; fail=1; }
[ -e "$tmp/results/paper" ] && { echo "the quick profile wrote a paper summary"; fail=1; }
run >"$tmp/again.txt" 2>&1 || fail=1
grep -q "prop1: point" "$tmp/again.txt" && { echo "the second run measured again"; fail=1; }
[ $fail -eq 0 ] || { cat "$tmp/out.txt"; exit 1; }
echo "prop1_quick: 20 points, tables, verdicts and plots in $rep"
