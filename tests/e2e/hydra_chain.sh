#!/bin/sh
# tests/e2e/hydra_chain.sh: the Hydra CLI chain on the quick profile (DESIGN §3): train a tiny
# ViT on a Fashion-MNIST subset -> prune (taylor, 3 members, keep 4 of 8) -> finetune (two
# training-free members, one fine-tuned for an epoch) -> fuse -> predict (with /member_probs)
# -> eval. Prepares fashion-mnist first when missing; skips (77) when the Debian package
# dataset-fashion-mnist is not installed.
set -eu
HYDRA=${HYDRA:-./hydra}
DATA=datasets/prepared/fashion-mnist.h5
if [ ! -f "$DATA" ]; then
    if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
        echo "dataset-fashion-mnist is not installed (make deps)"
        exit 77
    fi
    "$HYDRA" data prepare fashion-mnist
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/quick.yaml" <<YAML
include: $(pwd)/configs/models/vit-fm-tiny.yaml
data:
  train_subset: 1000
  test_subset: 200
train:
  epochs: 1
  batch_size: 64
prune:
  calib_size: 128
YAML
$HYDRA train "$T/quick.yaml" --out "$T/base.h5" --quiet
$HYDRA prune "$T/base.h5" --method taylor --members 3 --keep 4 --out "$T/gates.h5"
$HYDRA finetune "$T/base.h5" --gates "$T/gates.h5" --member 1 --out "$T/m1.h5" finetune.epochs=0
$HYDRA finetune "$T/base.h5" --gates "$T/gates.h5" --member 2 --out "$T/m2.h5" finetune.epochs=0
$HYDRA finetune "$T/base.h5" --gates "$T/gates.h5" --member 3 --out "$T/m3.h5" --quiet \
    finetune.epochs=1 data.train_subset=256
$HYDRA fuse "$T/m1.h5" "$T/m2.h5" "$T/m3.h5" --out "$T/fused.h5"
$HYDRA predict "$T/fused.h5" --data "$DATA" --split test --subset 200 --out "$T/p.h5"
$HYDRA info "$T/p.h5" | grep -q "/member_probs *float32 \[3,200,10\]"
$HYDRA info "$T/fused.h5" | grep -q "/members/2/head_gates"
$HYDRA eval --id "$T/p.h5" --out "$T/r.h5"
echo "hydra chain ok"
