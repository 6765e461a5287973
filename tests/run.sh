#!/bin/sh
# tests/run.sh BUILD_DIR: runs every test of hydra and prints one closing line
# "N passed, N failed" (N = tests, summed over the C test binaries, the Lua suite and the e2e
# scripts), after a line "N skipped" when some test was skipped (a Lua test calling check.skip,
# an e2e script exiting 77): skipped tests count as neither. Exits non-zero when anything
# failed. Called by `make test` and `make asan`.
B=${1:-build/release}
HYDRA="$B/bin/hydra"
passed=0
failed=0
skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# count "name: N passed, N failed" from the last such line of a run's output
tally() {
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(printf '%s\n' "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/')
    f=$(printf '%s\n' "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    [ -n "$line" ] || { p=0; f=0; }
    if [ "$1" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or exited non-zero
    s=$(printf '%s\n' "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + ${s:-0}))
    [ "$1" -ne 0 ] && echo "FAILED: $2 (exit status $1)"
}

# the include direction of core/ and lua/bind/ (layers, no Lua headers in core/, no circles)
if sh tests/layers.sh; then
    passed=$((passed + 1))
else
    echo "FAILED: tests/layers.sh"
    failed=$((failed + 1))
fi

for t in "$B"/bin/test_*; do
    [ -x "$t" ] || continue
    "$t" >"$log" 2>&1
    rc=$?
    cat "$log"
    tally $rc "$t"
done

# The prepared sets of the text tests (the corpus-overlap check, table_text_quick.sh,
# training_free_quick.sh) and of the MNIST setting (table_mnist_quick.sh): with HYDRA_DATA_DIR
# (SST-2, the sentence sets, MNIST and notMNIST are raw data files)
# they are prepared here first (each in seconds, up-to-date files are kept), so a fresh clone
# runs them too; without it, or when a source is missing, those tests skip and say which file.
if [ -n "${HYDRA_DATA_DIR:-}" ]; then
    if ! "$HYDRA" data prepare sst2 pretrain-text yelp-sentences amazon-sentences imdb-sentences \
            agnews trec multi30k reuters fortunes ood-val-text fashion-mnist glyphs opencv-digits \
            ood-val-image fashion-mnist-c mnist-id notmnist fashion-mnist-ood ood-val-mnist-id \
            >"$log" 2>&1; then
        tail -n 3 "$log"
        echo "tests/run.sh: not every data set could be prepared; the tests that need one skip"
    fi
fi

HYDRA="$HYDRA" "$HYDRA" run tests/lua/run.lua >"$log" 2>&1
rc=$?
cat "$log"
tally $rc "tests/lua/run.lua"

for e in tests/e2e/*.sh; do
    [ -f "$e" ] || continue
    HYDRA="$HYDRA" sh "$e" >"$log" 2>&1
    rc=$?
    name=$(basename "$e")
    if [ $rc -eq 0 ]; then
        echo "$name: ok"; passed=$((passed + 1))
    elif [ $rc -eq 77 ]; then
        echo "$name: skipped ($(tail -n 1 "$log"))"; skipped=$((skipped + 1))
    else
        cat "$log"; echo "$name: FAIL (exit status $rc)"; failed=$((failed + 1))
    fi
done

[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
