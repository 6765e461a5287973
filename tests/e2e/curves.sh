#!/bin/sh
# tests/e2e/curves.sh: learning curves of every training stage. A tiny run (Single and Hydra
# (Taylor) with one epoch of member fine-tuning, synthetic data written here) gathers the curves
# of its base model and of each fine-tuned member into <run>/curves.csv (step rows and epoch rows
# with the validation NLL), one plot per stage under <run>/curves/ and /curves/<stage>-<key> in
# result.h5; `hydra train --out X.h5` writes X.curves.csv beside the checkpoint.
set -u
. "$(dirname "$0")/tiny.inc"
tiny_setup curves
cat > "$tmp/tiny.yaml" <<EOF
include: $HOME_DIR/configs/experiments/quick.yaml
experiment: curves
results_dir: $tmp/results
data: {id: tiny, ood: [tinyood], shift: [], dir: $tmp/data, train_subset: 0, test_subset: 0}
train: {epochs: 2, batch_size: 32, eval_batch_size: 64}
prune: {calib_size: 64, val_size: 32}
finetune: {epochs: 1}
hydra: {members: 2}
methods: [single, hydra_taylor]
EOF
"$HYDRA" exp "$tmp/tiny.yaml" --quiet > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "the run failed"; }
run=$(ls -d "$tmp"/results/curves/*/ | head -n 1)
csv="$run/curves.csv"
[ -s "$csv" ] || fail "no curves.csv"
head -n 1 "$csv" | grep -qx "method,stage,key,kind,epoch,step,loss,acc,lr,grad_norm,val_nll,val_acc,seconds" \
    || { head -n 1 "$csv"; fail "unexpected header"; }
# the base model: 2 epochs of 8 steps -> step rows 1..16 and 2 epoch rows with a val NLL
nb=$(grep -c '^single,base,[0-9a-f]*,step,' "$csv")
[ "$nb" -eq 16 ] || fail "expected 16 step rows of the base model, got $nb"
ne=$(grep '^single,base,[0-9a-f]*,epoch,' "$csv" | awk -F, '$11 != ""' | wc -l)
[ "$ne" -eq 2 ] || fail "expected 2 epoch rows with val_nll of the base model, got $ne"
# two fine-tuned members, one epoch each
nm=$(grep '^hydra_taylor,member,' "$csv" | cut -d, -f3 | sort -u | wc -l)
[ "$nm" -eq 2 ] || fail "expected the curves of 2 members, got $nm"
# loss and learning rate are numbers in every step row
if grep ',step,' "$csv" | awk -F, '$7 == "" || $9 == "" { bad = 1 } END { exit !bad }'; then
    fail "a step row without loss or lr"
fi
npng=$(ls "$run"/curves/*.png 2>/dev/null | wc -l)
[ "$npng" -eq 3 ] || fail "expected 3 curve plots (base, 2 members), got $npng"
h5ls -r "$run/result.h5" | grep -q "^/curves/member-[0-9a-f]*/val_nll" || fail "no /curves in result.h5"
# a standalone training writes its curve beside the checkpoint
"$HYDRA" train "$tmp/tiny.yaml" train.epochs=1 --out "$tmp/ck.h5" --quiet > "$tmp/train.log" 2>&1 \
    || { cat "$tmp/train.log"; fail "hydra train failed"; }
[ "$(grep -c ',epoch,' "$tmp/ck.curves.csv")" -eq 1 ] || fail "ck.curves.csv lacks its epoch row"
echo "curves: ok"
