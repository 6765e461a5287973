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
#   - sizes and counts from files (issue 36, H-d1 / H-a1): a checkpoint /config depth of 2^31 or
#     2^40 (used to hang predict, prune and fuse), a depth above the blocks stored, a fused
#     file's /fuse members of 2 over 3 member groups (used to run as 2 members) or 2^40;
#   - member provenance (H-a2 / H-a5): fusing members of different gates files or the same
#     member twice, fine-tuning with the gates of another checkpoint, all refused without
#     --allow-mixed (and accepted with it);
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

# ===== sizes and counts read from files (crafted with tests/e2e/h5edit.lua) =====
EDIT="$HYDRA run tests/e2e/h5edit.lua"
SPLIT="--data $DATA --split test --subset 8"
$EDIT "$T/m0.h5" "$T/d40.h5" /config depth 1099511627776 || exit 1
$EDIT "$T/m0.h5" "$T/d31.h5" /config depth 2147483648 || exit 1
# shellcheck disable=SC2086
expect "predict: /config depth 2^40" "d40.h5': /config depth = 1099511627776 is out of range|0 to 1024" \
    timeout 30 "$HYDRA" predict "$T/d40.h5" $SPLIT --out "$T/p.h5"
# shellcheck disable=SC2086
expect "predict: /config depth 2^31" "/config depth = 2147483648 is out of range" \
    timeout 30 "$HYDRA" predict "$T/d31.h5" $SPLIT --out "$T/p.h5"
expect "prune: /config depth 2^40" "/config depth = 1099511627776 is out of range" \
    timeout 30 "$HYDRA" prune "$T/d40.h5" --members 2 --keep 4 --out "$T/g.h5"
expect "fuse: /config depth 2^40" "/config depth = 1099511627776 is out of range" \
    timeout 30 "$HYDRA" fuse "$T/d40.h5" --out "$T/f.h5"
$EDIT "$T/m0.h5" "$T/d6.h5" /config depth 6 || exit 1
# shellcheck disable=SC2086
expect "predict: /config depth 6 over 4 blocks" "/config depth = 6 but /params holds 4 blocks" \
    "$HYDRA" predict "$T/d6.h5" $SPLIT --out "$T/p.h5"

# ===== Hydra members: counts and provenance =====
"$HYDRA" model init configs/models/vit-fm-tiny.yaml --seed 1 --out "$T/b1.h5" >/dev/null || exit 1
"$HYDRA" prune "$T/m0.h5" --method taylor --members 3 --keep 4 --out "$T/g3.h5" \
    prune.calib_size=32 >/dev/null || exit 1
"$HYDRA" prune "$T/m0.h5" --method taylor --members 2 --keep 4 --seed 1 --out "$T/g2.h5" \
    prune.calib_size=32 >/dev/null || exit 1
for i in 1 2 3; do
    "$HYDRA" finetune "$T/m0.h5" --gates "$T/g3.h5" --member $i --out "$T/m$i.h5" \
        finetune.epochs=0 >/dev/null || exit 1
done
"$HYDRA" finetune "$T/m0.h5" --gates "$T/g2.h5" --member 1 --out "$T/m1of2.h5" \
    finetune.epochs=0 >/dev/null || exit 1
"$HYDRA" fuse "$T/m1.h5" "$T/m2.h5" "$T/m3.h5" --out "$T/f3.h5" >/dev/null || exit 1
$EDIT "$T/f3.h5" "$T/f3_m2.h5" /fuse members 2 || exit 1
$EDIT "$T/f3.h5" "$T/f3_m40.h5" /fuse members 1099511627776 || exit 1
# shellcheck disable=SC2086
expect "predict: /fuse members 2 of 3 stored" \
    "f3_m2.h5': /fuse members = 2 but the file holds 3 member groups" \
    "$HYDRA" predict "$T/f3_m2.h5" $SPLIT --out "$T/p.h5"
# shellcheck disable=SC2086
expect "predict: /fuse members 2^40" "/fuse members = 1099511627776 is out of range|1 to 64" \
    "$HYDRA" predict "$T/f3_m40.h5" $SPLIT --out "$T/p.h5"
expect "fuse: members of different gates files" "come from different gates files|--allow-mixed" \
    "$HYDRA" fuse "$T/m1.h5" "$T/m2.h5" "$T/m1of2.h5" --out "$T/fx.h5"
expect "fuse: the same member twice" "#1 '$T/m1.h5' and #2 are the same member|--allow-mixed" \
    "$HYDRA" fuse "$T/m1.h5" "$T/m1.h5" --out "$T/fx.h5"
expect "finetune: gates of another checkpoint" \
    "'$T/g2.h5' were pruned from another checkpoint|--allow-mixed" \
    "$HYDRA" finetune "$T/b1.h5" --gates "$T/g2.h5" --member 1 --out "$T/ob.h5" finetune.epochs=0
cases=$((cases + 1))
if "$HYDRA" finetune "$T/b1.h5" --gates "$T/g2.h5" --member 1 --out "$T/ob.h5" \
        finetune.epochs=0 --allow-mixed >"$T/out" 2>&1 &&
    "$HYDRA" fuse "$T/m1.h5" "$T/m1.h5" --out "$T/fx.h5" --allow-mixed >>"$T/out" 2>&1; then
    echo "ok   --allow-mixed: finetune and fuse proceed"
else
    echo "FAIL --allow-mixed"; sed 's/^/    /' "$T/out" | head; fails=$((fails + 1))
fi
expect "fuse: a member with gates of another checkpoint" \
    "'$T/ob.h5' applies gates pruned from another checkpoint" \
    "$HYDRA" fuse "$T/ob.h5" --out "$T/fy.h5"
expect "fuse: members of one gates file twice" "both member 1 of the gates file" \
    "$HYDRA" fuse "$T/m1of2.h5" "$T/ob.h5" --out "$T/fy.h5"
cases=$((cases + 1))
if [ -e "$T/fy.h5" ] || [ -e "$T/p.h5" ]; then
    echo "FAIL refused commands left an output"; fails=$((fails + 1))
else
    echo "ok   refused commands left no output"
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
