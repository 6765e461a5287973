#!/bin/sh
# tests/e2e/table_mnist_quick.sh: the second image setting (MNIST in distribution,
# configs/data/mnist.yaml) end to end through `hydra repro table_mnist` on tiny sizes (300
# training digits, 60 per test set, 1 epoch, M = 2; Single, Deep Ensembles and Hydra (Circ)):
# the run reads mnist-id and its own OOD groups, the circuit search reads ood-val-mnist-id, and
# the report has each row and group. First checks the prepared sets: mnist-id's train / val /
# test are disjoint rows of the MNIST file with 700 / 100 / 200 per digit; ood-val-mnist-id's
# flipped and inverted images are mnist-id train images (never val or test). Exit 77 (skip) when
# a prepared set is missing (`hydra data prepare mnist-id notmnist glyphs fashion-mnist-ood
# ood-val-mnist-id`, with HYDRA_DATA_DIR).
set -u
HYDRA=${HYDRA:-./hydra}
for s in mnist-id notmnist glyphs fashion-mnist-ood ood-val-mnist-id; do
    [ -f "datasets/prepared/$s.h5" ] || { echo "datasets/prepared/$s.h5 missing"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HYDRA_CACHE_DIR="$tmp/cache"
fail=0
cat > "$tmp/sets.lua" <<'LUA'
local hydra = require("hydra")
local core, h5 = require("hydra.core"), require("hydra.h5")
local bad = function(m) io.stderr:write("FAIL: ", m, "\n"); os.exit(1) end
local g <close> = h5.open("datasets/prepared/mnist-id.h5")
local split_of, want = {}, { train = 7000, val = 1000, test = 2000 }
for split, n in pairs(want) do
  local rows, labels = g:read("/" .. split .. "/source_rows"), g:read("/" .. split .. "/labels")
  if rows:numel() ~= n then bad(("mnist-id %s has %d rows, expected %d"):format(split, rows:numel(), n)) end
  local per = {}
  for i = 1, n do
    local r, c = rows:get(i), labels:get(i)
    if split_of[r] then bad(("MNIST row %d in both %s and %s"):format(r, split_of[r], split)) end
    split_of[r] = split
    per[c] = (per[c] or 0) + 1
  end
  if split ~= "train" then
    for c = 0, 9 do
      if per[c] ~= n // 10 then bad(("mnist-id %s: digit %d has %s rows"):format(split, c, per[c])) end
    end
  end
end
local train = g:read("/train/images")
local v <close> = h5.open("datasets/prepared/ood-val-mnist-id.h5")
local kind, src, im = v:read("/val/kind"), v:read("/val/source_rows"), v:read("/val/images")
local seen = 0
for i = 1, kind:numel() do
  local k, r = kind:get(i), src:get(i)
  if k >= 2 then   -- every pixel against the train row it names, flipped or inverted
    if r < 0 or r >= train:size(1) then bad(("ood-val-mnist-id row %d names train row %d"):format(i, r)) end
    for y = 1, 28 do
      for x = 1, 28 do
        local want_px = k == 2 and train:get(r + 1, 29 - y, x) or 255 - train:get(r + 1, y, x)
        if im:get(i, y, x) ~= want_px then
          bad(("ood-val-mnist-id row %d is not mnist-id train row %d %s"):format(i, r,
            k == 2 and "flipped" or "inverted"))
        end
      end
    end
    seen = seen + 1
  end
end
if seen ~= 1000 then bad(("ood-val-mnist-id has %d flipped/inverted rows, expected 1000"):format(seen)) end
print("sets ok")
LUA
"$HYDRA" run "$tmp/sets.lua" > "$tmp/sets.txt" 2>&1 || { cat "$tmp/sets.txt"; fail=1; }
run() {
    "$HYDRA" repro table_mnist results_dir="$tmp/results" data.train_subset=300 \
        data.test_subset=60 train.epochs=1 finetune.train_subset=150 prune.calib_size=64 \
        prune.val_size=60 deep_ensemble.members=2 hydra.members=2 \
        "methods=[single, deep_ensemble, hydra_circ]" > "$tmp/out$1.txt" 2>&1
}
run 1 || { cat "$tmp/out1.txt"; echo "FAIL: table_mnist did not run"; exit 1; }
log=$(ls "$tmp"/results/table_mnist/*/log.txt | head -1)
want() { grep -q -- "$2" "$1" || { echo "FAIL: $1 lacks '$2'"; fail=1; }; }
want "$log" "sets: ID mnist-id, 3 OOD, 0 shift"
want "$log" "searching circuits"
rep="$tmp/results/table_mnist/report/table.md"
want "$rep" "Near OOD: notmnist, glyphs; far OOD: fashion-mnist-ood"
for m in "Single" "Deep Ensembles" "Hydra (Circ)"; do want "$rep" "| $m |"; done
want "$tmp/out1.txt" "OOD avg AUROC: Hydra (Circ) [0-9.]* vs Deep Ensembles"
grep -q "ood_val: ood-val-mnist-id" "$(dirname "$log")/config.resolved.yaml" ||
    { echo "FAIL: the run's circuit search is not on ood-val-mnist-id"; fail=1; }
run 2 || { cat "$tmp/out2.txt"; echo "FAIL: second run"; exit 1; }
want "$tmp/out2.txt" "1 complete, 0 to run"
[ $fail -eq 0 ] && echo "table_mnist_quick: ok"
exit $fail
