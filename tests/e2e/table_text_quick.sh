#!/bin/sh
# tests/e2e/table_text_quick.sh: the text table end to end on the prepared text sets, shrunk
# below the quick profile (200 corpus sentences pretrained 1 epoch, 300 SST-2 training
# sentences, 60 per test set, M = 2): the pretraining stage is built once and found again, every
# method fine-tunes from it (train.init), Deep Ensembles (scratch) does not, and the run folder
# holds a complete result with every method's row. Exit 77 (skip) when a prepared set or
# gnuplot is missing (`hydra data prepare pretrain-text` prepares them all, with HYDRA_DATA_DIR).
set -u
HYDRA=${HYDRA:-./hydra}
command -v gnuplot >/dev/null 2>&1 || { echo "gnuplot is not installed (make deps)"; exit 77; }
for s in sst2 pretrain-text agnews trec multi30k reuters fortunes ood-val-text yelp-sentences \
         amazon-sentences imdb-sentences; do
    [ -f "datasets/prepared/$s.h5" ] || { echo "datasets/prepared/$s.h5 missing"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HYDRA_CACHE_DIR="$tmp/cache"
run() {
    "$HYDRA" run experiments/table_text.lua results_dir="$tmp/results" data.train_subset=300 \
        data.test_subset=60 pretrain.train_subset=200 pretrain.val_subset=60 pretrain.epochs=1 \
        train.epochs=1 finetune.train_subset=150 prune.calib_size=64 prune.val_size=60 \
        mc_dropout.samples=2 deep_ensemble.members=2 hydra.members=2 > "$tmp/out$1.txt" 2>&1
}
run 1 || { cat "$tmp/out1.txt"; echo "FAIL: table_text did not run"; exit 1; }
fail=0
want() { grep -q -- "$2" "$tmp/$1" || { echo "FAIL: $1 lacks '$2'"; fail=1; }; }
want out1.txt "stage pretrain [0-9a-f]*: cache miss, building"
want out1.txt "pretrained encoder .*held-out MLM loss"
want out1.txt "fine-tuned Single on SST-2 (GLUE dev)"
log=$(ls "$tmp"/results/table_text/*/log.txt | head -1)
grep -q "training base model (seed 0, dropout 0, 1 epochs, from $tmp/cache/pretrain/" "$log" ||
    { echo "FAIL: the Single is not fine-tuned from the pretrained encoder"; fail=1; }
grep -q "training base model (seed 1, dropout 0, 1 epochs) \.\.\." "$log" ||
    { echo "FAIL: no scratch member trained without train.init"; fail=1; }
for m in "Single" "Deep Ensembles" "Deep Ensembles (scratch)" "MC Dropout" "Taylor" "CircAvg" \
         "Hydra (Taylor)" "Hydra (Circ)"; do
    grep -q "| $m |" "$(dirname "$log")/table.md" || { echo "FAIL: no row '$m'"; fail=1; }
done
[ -f "$(dirname "$log")/result.h5" ] || { echo "FAIL: no result.h5"; fail=1; }
# pruning is real: a pruned single model costs fewer FLOPs than the Single (quick: 2 of 4 heads)
flops() { awk -F'|' -v m=" $1 " '$2 == m && $4 ~ / M *$/ { f = $4 } END { print f + 0 }' \
    "$tmp/results/table_text/report/table.md"; }
[ "$(awk -v a="$(flops Taylor)" -v b="$(flops Single)" 'BEGIN { print (a > 0 && a < b) }')" = 1 ] ||
    { echo "FAIL: Taylor's FLOPs $(flops Taylor) not below the Single's $(flops Single)"; fail=1; }
run 2 || { cat "$tmp/out2.txt"; echo "FAIL: second run"; exit 1; }
want out2.txt "stage pretrain [0-9a-f]*: cache hit"
want out2.txt "1 complete, 0 to run"
[ $fail -eq 0 ] && echo "table_text_quick: ok"
exit $fail
