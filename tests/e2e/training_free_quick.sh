#!/bin/sh
# tests/e2e/training_free_quick.sh: `hydra repro table_training_free --profile quick` end to end
# on both backbones (image: vit-fm-tiny on Fashion-MNIST; text: quick_text's encoder pretrained
# on 200 corpus sentences for 1 epoch, then fine-tuned on SST-2), shrunk for the test suite (600
# training samples, 1 epoch, the first 100 samples of every test set, the heads trained 2
# epochs on 600 validation rows). Checks the table: both backbones, the ten rows
# (Single x 3 scores, the four training-free pruned methods, the two trained heads), every cell
# a number, the verdict lines; that the heads changed no prediction of the Single (same Acc and
# ECE); and that a rerun reuses every run (no point runs again).
# Exit 77 (skip) when a prepared dataset the two sweeps need is missing from datasets/prepared
# (the data_dir sets need HYDRA_DATA_DIR: `hydra data prepare sst2 pretrain-text yelp-sentences
# amazon-sentences imdb-sentences agnews trec multi30k reuters fortunes ood-val-text
# fashion-mnist glyphs opencv-digits ood-val-image fashion-mnist-c`).
set -u
HYDRA=${HYDRA:-./hydra}
for d in fashion-mnist glyphs opencv-digits ood-val-image fashion-mnist-c sst2 pretrain-text \
         yelp-sentences amazon-sentences imdb-sentences agnews trec multi30k reuters fortunes \
         ood-val-text; do
    if [ ! -f "datasets/prepared/$d.h5" ]; then
        echo "datasets/prepared/$d.h5 is not prepared (hydra data prepare $d)"
        exit 77
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HYDRA_CACHE_DIR="$tmp/cache"

run() {
    "$HYDRA" repro table_training_free --profile quick results_dir="$tmp/results" \
        data.train_subset=600 data.test_subset=100 data.shift_subset=5 train.epochs=1 \
        prune.calib_size=32 prune.val_size=50 vilu.epochs=2 vilu.rows=600 \
        train.eval_batch_size=50 pretrain.train_subset=200 pretrain.val_subset=60 \
        pretrain.epochs=1 \
        > "$tmp/out$1.txt" 2>&1
}
run 1 || { cat "$tmp/out1.txt"; echo "repro failed"; exit 1; }
# the text Single is fine-tuned from the pretrained encoder (table_text's stages)
grep -q "stage pretrain [0-9a-f]*: cache miss, building" "$tmp/out1.txt" ||
    { cat "$tmp/out1.txt"; echo "no pretraining stage"; exit 1; }
md="$tmp/results/table_training_free/report/training_free.md"
[ -f "$md" ] || { echo "no $md"; exit 1; }
fail=0
for part in "### Image (Fashion-MNIST)" "### Text (SST-2)"; do
    grep -qF "$part" "$md" || { echo "missing table: $part"; fail=1; }
done
rows=$(grep -c '^| [A-Z].*[0-9]\.[0-9][0-9] |' "$md")
[ "$rows" -eq 20 ] || { echo "expected 20 table rows (10 per backbone), got $rows"; fail=1; }
if grep '^| [A-Z]' "$md" | grep -q '–'; then
    echo "a cell has no value:"; grep '^| [A-Z]' "$md" | grep '–'; fail=1
fi
# two verdicts (Hydra (Circ) vs ViLU-style; best training-free vs best trained row) per metric
# (failure AUROC, OOD-all AUROC) and backbone
for b in "Image (Fashion-MNIST)" "Text (SST-2)"; do
    for m in "failure-prediction AUROC" "OOD-all AUROC"; do
        for v in "Hydra (Circ) MSP" "best training-free row"; do
            grep -qF -- "- $b, $m: $v" "$md" || { echo "missing verdict: $b, $m: $v"; fail=1; }
        done
    done
done
# the heads keep the Single's predictions: their Acc and ECE cells equal the Single's
awk -F'|' '/^### /{t=$0} /^\| Single \(MSP\)/{s[t]=$3 "|" $4}
           /^\| (ViLU|ConfidNet)-style/{
               if ($3 "|" $4 != s[t]) { print "differs from the Single: " $0; bad=1 } }
           END{exit bad}' "$md" || fail=1
run 2 || { cat "$tmp/out2.txt"; echo "second repro failed"; exit 1; }
[ "$(grep -c ', 0 to run;' "$tmp/out2.txt")" -eq 2 ] ||
    { echo "the rerun ran points again:"; cat "$tmp/out2.txt"; fail=1; }
[ $fail -eq 0 ] || { cat "$md"; exit 1; }
echo "training_free_quick: ok"
