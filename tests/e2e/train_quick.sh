#!/bin/sh
# tests/e2e/train_quick.sh: `hydra train` on real Fashion-MNIST (quick: vit-fm-tiny, the first
# 6,000 training images, 1 epoch), then `hydra predict` on 2,000 test images; the test accuracy
# must be well above chance (10 %): at least 50 %. Prepares fashion-mnist first when missing.
# Exit 77 (skip) when the Debian package dataset-fashion-mnist is not installed.
set -u
HYDRA=${HYDRA:-./hydra}
DATA=datasets/prepared/fashion-mnist.h5
if [ ! -f "$DATA" ]; then
    if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
        echo "dataset-fashion-mnist is not installed (make deps)"
        exit 77
    fi
    "$HYDRA" data prepare fashion-mnist || exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$HYDRA" train configs/models/vit-fm-tiny.yaml data.train_subset=6000 data.test_subset=1000 \
    train.epochs=1 train.batch_size=32 optim.learning_rate=4e-3 train.warmup_epochs=0 \
    --quiet --out "$tmp/m.h5" || exit 1
"$HYDRA" predict "$tmp/m.h5" --data "$DATA" --split test --subset 2000 --out "$tmp/p.h5" || exit 1

cat > "$tmp/acc.lua" <<'LUA'
local h5 = require("hydra").h5
local f <close> = h5.open(arg[1])
local probs, labels = f:read("/probs"), f:read("/labels")
local n, C, correct = labels:size(1), probs:size(2), 0
for i = 1, n do
  local best = 1
  for c = 2, C do if probs:get(i, c) > probs:get(i, best) then best = c end end
  if best - 1 == labels:get(i) then correct = correct + 1 end
end
local acc = correct / n
print(("test accuracy %.2f%% on %d images"):format(100 * acc, n))
return acc >= 0.5 and 0 or 1
LUA
"$HYDRA" run "$tmp/acc.lua" "$tmp/p.h5"
