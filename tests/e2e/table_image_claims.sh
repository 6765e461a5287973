#!/bin/sh
# tests/e2e/table_image_claims.sh: the claim line `hydra repro table_image` prints at the end
# (hydra.experiment.claim_line: the rule of results/README.md, "Verdicts"), on the quick profile
# shrunk to tiny sizes (300 training images, 60 per test set, 1 epoch, M = 2), 2 seeds. First
# methods=[single, hydra_circ]: Deep Ensembles left out, so the line is left out and the exit
# status is 0 (no error about the missing method). Then with Deep Ensembles added (Single and
# Hydra (Circ) from the stage cache): the line names both means, the claim, the seeds, the
# difference, the t-test's p, the bootstrap interval and the verdict, and says "as in the paper"
# only with "holds". Exit 77 (skip) when a prepared set is missing (`hydra data prepare
# fashion-mnist glyphs opencv-digits ood-val-image fashion-mnist-c`).
set -u
HYDRA=${HYDRA:-./hydra}
missing=$(for s in fashion-mnist glyphs opencv-digits ood-val-image fashion-mnist-c; do
    [ -f "datasets/prepared/$s.h5" ] || echo "datasets/prepared/$s.h5"; done)
[ -z "$missing" ] || { echo "not prepared:" $missing; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run() {
    HYDRA_CACHE_DIR="$tmp/cache" "$HYDRA" repro table_image --seeds 2 results_dir="$tmp/results$1" data.train_subset=300 \
        data.test_subset=60 data.shift_subset=5 train.epochs=1 finetune.train_subset=150 \
        prune.calib_size=64 prune.val_size=60 deep_ensemble.members=2 hydra.members=2 \
        "methods=[$2]" > "$tmp/out$1.txt" 2>&1
}
fail=0
run 1 "single, hydra_circ" ||
    { cat "$tmp/out1.txt"; echo "FAIL: table_image without Deep Ensembles exited non-zero"; exit 1; }
grep -q "| Hydra (Circ) |" "$tmp/out1.txt" || { echo "FAIL: no report printed"; fail=1; }
if grep -q "OOD avg AUROC:\|accuracy: Hydra" "$tmp/out1.txt"; then
    echo "FAIL: a claim line without Deep Ensembles:"; grep "OOD avg AUROC:" "$tmp/out1.txt"; fail=1
fi
run 2 "single, deep_ensemble, hydra_circ" ||
    { cat "$tmp/out2.txt"; echo "FAIL: table_image with Deep Ensembles did not run"; exit 1; }
line=$(grep "^OOD avg AUROC: " "$tmp/out2.txt")
n='[0-9][0-9]*\.[0-9][0-9]'
d='[+−][0-9][0-9]*\.[0-9][0-9]'
printf '%s\n' "$line" | grep -q "^OOD avg AUROC: Hydra (Circ) $n vs Deep Ensembles $n (claim: Hydra (Circ) higher; seeds 0, 1): $d (p\( <\)* [0-9.]*; CI $d, $d): \(holds\|within noise\|fails\) (.*)" ||
    { echo "FAIL: claim line '$line'"; fail=1; }
case "$line" in
    *"): holds ("*", as in the paper") ;;
    *"): fails ("*", unlike the paper") ;;
    *"): within noise ("*")") ;;
    *) echo "FAIL: the line says more than its verdict: '$line'"; fail=1 ;;
esac
[ $fail -eq 0 ] && echo "table_image_claims: ok"
exit $fail
