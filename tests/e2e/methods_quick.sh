#!/bin/sh
# tests/e2e/methods_quick.sh: `hydra exp` runs all seven methods (Single, Deep Ensembles, MC
# Dropout, Taylor, CircAvg, Hydra (Taylor), Hydra (Circ)) end to end on a tiny synthetic
# configuration (a 2-layer ViT on generated textures; OOD test, OOD validation and a
# Fashion-MNIST-C style shift file with corruption/severity splits are generated too), then checks
# the run folder: result.h5 complete, one table row per method (Markdown and CSV), the three
# plots, stage reuse logged, and that a second `hydra exp` is a no-op.
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
hydra.model.write_synthetic(d .. "/synood.h5", { train = 8, val = 8, test = 32, seed = 8,
                                                  classes = 4 })
hydra.model.write_synthetic(d .. "/synoodval.h5", { train = 8, val = 32, test = 8, seed = 9,
                                                     classes = 4 })
local f <close> = hydra.h5.open(d .. "/tiny.h5")
local im, lb = f:read("/test/images"), f:read("/test/labels")
local g <close> = hydra.h5.create(d .. "/synshift.h5")
for _, c in ipairs({ "gaussian_noise", "contrast", "pixelate" }) do
  for s = 1, 3 do
    g:write(("/%s/%d/images"):format(c, s), core.corrupt(im, c, s, 7))
    g:write(("/%s/%d/labels"):format(c, s), lb)
  end
end
g:set_attr("/meta", "mean", 0.3)
g:set_attr("/meta", "std", 0.35)
g:commit()
LUA
"$HYDRA" run "$tmp/mk.lua" "$tmp/data" || exit 1

cat > "$tmp/exp.yaml" <<EOF2
include: $PWD/configs/data/tiny.yaml
experiment: e2e
results_dir: $tmp/results
model: { d_model: 16, n_heads: 4, depth: 2, d_mlp: 32 }
data:
  dir: $tmp/data
  ood: [synood]
  ood_val: synoodval
  shift: [synshift]
  shift_subset: 16
train: { epochs: 1, batch_size: 32, eval_batch_size: 32 }
prune: { calib_size: 32 }
hydra: { members: 2, keep_heads: 2 }
deep_ensemble: { members: 2 }
mc_dropout: { samples: 3 }
EOF2
HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" exp "$tmp/exp.yaml" --no-progress >"$tmp/out.txt" 2>&1 \
    || { cat "$tmp/out.txt"; exit 1; }
dir=$(sed -n 's/^results: *//p' "$tmp/out.txt")
[ -n "$dir" ] && [ -f "$dir/result.h5" ] || { cat "$tmp/out.txt"; echo "no result.h5"; exit 1; }
fail=0
for label in "Single" "Deep Ensembles" "MC Dropout" "Taylor" "CircAvg" "Hydra (Taylor)" \
             "Hydra (Circ)"; do
    grep -q "^| $label |" "$dir/table.md" || { echo "table.md: no row '$label'"; fail=1; }
    grep -q "^$label,1," "$dir/table.csv" || { echo "table.csv: no row '$label'"; fail=1; }
done
rows=$(grep -c '^| ' "$dir/table.md")
[ "$rows" -eq 32 ] || { echo "table.md: $rows table lines, expected 32 (4 blocks x 8)"; fail=1; }
for col in "synood AUROC" "synshift-s1 Acc" "synshift-s3 ECE" "OOD avg AUROC" "ECE +TS" \
           "NLL +TS"; do
    head -n 1 "$dir/table.md" | grep -q "$col" || { echo "table.md: no column '$col'"; fail=1; }
done
for block in "OOD detection by score" "Misclassification detection" "Post-hoc calibration"; do
    grep -q "^\*\*$block" "$dir/table.md" || { echo "table.md: no block '$block'"; fail=1; }
done
for p in reliability ood-hist risk-coverage; do
    [ -s "$dir/plots/$p.png" ] || { echo "missing plot $p.png"; fail=1; }
    [ -s "$dir/plots/$p.gp" ] && [ -s "$dir/plots/$p.dat" ] || { echo "no $p.gp/.dat"; fail=1; }
done
grep -q "stage base [0-9a-f]*: cache hit" "$dir/log.txt" || { echo "no base-model reuse logged"; fail=1; }
for m in single deep_ensemble mc_dropout taylor circavg hydra_taylor hydra_circ; do
    [ -s "$dir/methods/$m.h5" ] || { echo "missing methods/$m.h5"; fail=1; }
done
HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" exp "$tmp/exp.yaml" >"$tmp/again.txt" 2>&1 || fail=1
grep -q "is complete" "$tmp/again.txt" || { cat "$tmp/again.txt"; echo "rerun was not a no-op"; fail=1; }
[ $fail -eq 0 ] || { cat "$tmp/out.txt"; exit 1; }
echo "methods_quick: 7 methods, table and plots in $dir"
