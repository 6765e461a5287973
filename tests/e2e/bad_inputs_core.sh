#!/bin/sh
# tests/e2e/bad_inputs_core.sh: bad inputs and faults caught by the C core (issue 11). Each case
# runs one hydra command that must fail cleanly: exit status 1 or 2 (never a signal), every
# expected fragment in its message, no Lua traceback, no sanitizer report, and no file left
# behind under the output's name or as a temporary file.
#   - disk full (a 200 KiB tmpfs): model init, train, predict, eval --out onto it;
#   - thread counts above HY_MAX_THREADS (1024): the config key, 2^32 + 1 (no int truncation),
#     sweep --threads, HYDRA_THREADS;
#   - config files over 64 MiB: /dev/zero as a config and as an include;
#   - batch sizes near 2^62 (train.batch_size, predict --batch-size): refused naming the key; a
#     batch larger than the data trains (it is the whole data);
# The disk-full cases need `mount -t tmpfs` (root); without it they are skipped and the script
# exits 77 after running the others.
set -u
HYDRA=${HYDRA:-./hydra}
DATA=datasets/prepared/fashion-mnist.h5
if [ ! -f "$DATA" ]; then
    if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
        echo "dataset-fashion-mnist is not installed (make deps)"
        exit 77
    fi
    "$HYDRA" data prepare fashion-mnist >/dev/null || exit 1
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/hydra-bad-core-XXXXXX")
FULL="$T/full"
mounted=0
cleanup() {
    [ "$mounted" -eq 1 ] && umount "$FULL" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fails=0
cases=0

# expect NAME 'FRAGMENT|FRAGMENT...' CMD...: CMD must fail cleanly with every fragment
# (case-insensitive, fixed strings) in its output.
expect() {
    name=$1; frags=$2; shift 2
    cases=$((cases + 1))
    "$@" >"$T/out" 2>&1
    rc=$?
    bad=""
    if [ $rc -eq 0 ]; then bad="exit status 0"
    elif [ $rc -gt 2 ]; then bad="exit status $rc"
    fi
    if grep -qE 'stack traceback|Sanitizer|runtime error|HDF5-DIAG|internal error' "$T/out"; then
        bad="$bad; traceback or sanitizer text"
    fi
    rest=$frags
    while [ -n "$rest" ]; do
        frag=${rest%%|*}
        case $rest in *"|"*) rest=${rest#*|} ;; *) rest="" ;; esac
        grep -qiF -- "$frag" "$T/out" || bad="$bad; no '$frag'"
    done
    if [ -n "$bad" ]; then
        echo "FAIL $name:${bad#;}"; sed 's/^/    /' "$T/out" | head -n 20
        fails=$((fails + 1))
    else
        echo "ok   $name: $(head -n 1 "$T/out")"
    fi
}

# no_leftover NAME DIR: DIR holds no file but the ones named after it (ls -A)
no_leftover() {
    cases=$((cases + 1))
    left=$(cd "$2" && ls -A | grep -v '^filler$' | tr '\n' ' ')
    if [ -n "$left" ]; then
        echo "FAIL $1: left behind in $2: $left"; fails=$((fails + 1))
    else
        echo "ok   $1: nothing left behind"
    fi
}

# ===== thread counts =====
TRAIN="configs/models/vit-fm-tiny.yaml data.train_subset=64 data.test_subset=64 train.epochs=1"
# shellcheck disable=SC2086
expect "threads=100000" "threads=100000|<= 1024" \
    "$HYDRA" train $TRAIN threads=100000 --quiet --out "$T/x.h5"
# shellcheck disable=SC2086
expect "threads=2^32+1" "threads=4294967297|<= 1024" \
    "$HYDRA" train $TRAIN threads=4294967297 --quiet --out "$T/x.h5"
expect "sweep --threads 200000" "--threads expects an integer in [1, 1024]|200000" \
    "$HYDRA" sweep configs/sweeps/ablation_heads.yaml --threads 200000 --list
# shellcheck disable=SC2086
expect "HYDRA_THREADS=5000" "HYDRA_THREADS must be an integer in [1, 1024] (got '5000')" \
    env HYDRA_THREADS=5000 "$HYDRA" train $TRAIN --quiet --out "$T/x.h5"


# ===== config size =====
# (a device or FIFO is refused before it is read; the 64 MiB limit itself: tests/c/test_config.c)
expect "config /dev/zero" "cannot read '/dev/zero': it is not a regular file" "$HYDRA" config --check /dev/zero
printf 'include: /dev/zero\n' >"$T/inc.yaml"
expect "include: /dev/zero" "(/dev/zero: it is not a regular file)" "$HYDRA" config --check "$T/inc.yaml"

# ===== batch sizes =====
# shellcheck disable=SC2086
expect "train.batch_size=2^62+16" "train.batch_size|1048576" \
    "$HYDRA" train $TRAIN train.batch_size=4611686018427387920 --quiet --out "$T/x.h5"
# shellcheck disable=SC2086
expect "train.eval_batch_size=2^63-1" "train.eval_batch_size|1048576" \
    "$HYDRA" train $TRAIN train.eval_batch_size=9223372036854775807 --quiet --out "$T/x.h5"
"$HYDRA" model init configs/models/vit-fm-tiny.yaml --out "$T/m0.h5" >/dev/null || exit 1
expect "predict --batch-size 2^62" "--batch-size must be in [1, 1048576]" \
    "$HYDRA" predict "$T/m0.h5" --data "$DATA" --split test --batch-size 4611686018427387904 \
    --out "$T/p0.h5"
cases=$((cases + 1))
# shellcheck disable=SC2086
if "$HYDRA" train $TRAIN train.batch_size=1048576 train.eval_batch_size=1048576 --quiet \
    --out "$T/big.h5" >"$T/out" 2>&1; then
    echo "ok   batch 2^20 on 64 samples: trains (one batch of the whole split)"
else
    echo "FAIL batch 2^20 on 64 samples"; sed 's/^/    /' "$T/out" | head; fails=$((fails + 1))
fi

# ===== disk full =====
mkdir -p "$FULL"
if mount -t tmpfs -o size=200k tmpfs "$FULL" 2>/dev/null; then
    mounted=1
    "$HYDRA" model init configs/models/vit-fm-tiny.yaml --out "$T/init.h5" >/dev/null || exit 1
    "$HYDRA" predict "$T/init.h5" --data "$DATA" --split test --subset 200 --out "$T/p.h5" \
        >/dev/null || exit 1
    nospace="no space left on device"
    expect "disk full: model init" "h5: cannot write '$FULL/init.h5'|$nospace" \
        "$HYDRA" model init configs/models/vit-fm-tiny.yaml --out "$FULL/init.h5"
    no_leftover "disk full: model init" "$FULL"
    expect "disk full: train" "h5: cannot write '$FULL/t.h5'|$nospace" \
        "$HYDRA" train configs/models/vit-fm-tiny.yaml data.train_subset=64 data.test_subset=64 \
        train.epochs=1 --quiet --out "$FULL/t.h5"
    no_leftover "disk full: train" "$FULL"
    expect "disk full: predict" "h5: cannot write '$FULL/p.h5'|$nospace" \
        "$HYDRA" predict "$T/init.h5" --data "$DATA" --split test --out "$FULL/p.h5"
    no_leftover "disk full: predict" "$FULL"
    head -c 190000 /dev/zero >"$FULL/filler"
    expect "disk full: eval" "h5: cannot write '$FULL/r.h5'|$nospace" \
        "$HYDRA" eval --id "$T/p.h5" --out "$FULL/r.h5"
    no_leftover "disk full: eval" "$FULL"
    rm -f "$FULL/filler"
else
    echo "skip disk full: mount -t tmpfs is not permitted"
fi

echo "bad_inputs_core: $cases cases, $fails failed"
[ "$fails" -eq 0 ] || exit 1
[ "$mounted" -eq 1 ] || { echo "disk-full cases skipped: mount -t tmpfs not permitted"; exit 77; }
exit 0
