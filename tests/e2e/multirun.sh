#!/bin/sh
# tests/e2e/multirun.sh: `hydra exp CONFIG -m key=a,b ...` (FB Hydra's multirun). On tiny
# synthetic data (written here), `-m seed=0,1 hydra.members=2,3 --jobs 2` runs the 4 points of
# the cartesian product as a sweep: 4 complete run folders with overrides.yaml beside
# config.resolved.yaml, the aggregated table; the same command again runs nothing (resume);
# range(), commas inside brackets and the refusals (no multi-valued key, --force, a bad range).
set -u
. "$(dirname "$0")/tiny.inc"
tiny_setup multirun
cat > "$tmp/tiny.yaml" <<EOF
include: $HOME_DIR/configs/experiments/quick.yaml
experiment: mr
results_dir: $tmp/results
data: {id: tiny, ood: [tinyood], shift: [], dir: $tmp/data, train_subset: 0, test_subset: 0}
train: {epochs: 1, batch_size: 32, eval_batch_size: 64}
prune: {calib_size: 64, val_size: 32}
finetune: {epochs: 0}
methods: [single, hydra_taylor]
EOF

"$HYDRA" exp "$tmp/tiny.yaml" -m seed=0,1 hydra.members=2,3 --jobs 2 --threads 2 \
    > "$tmp/first.log" 2>&1 || { cat "$tmp/first.log"; fail "the multirun failed"; }
n=$(ls "$tmp"/results/mr/*/result.h5 2>/dev/null | wc -l)
[ "$n" -eq 4 ] || { cat "$tmp/first.log"; fail "expected 4 complete runs, found $n"; }
grep -q "4 of 4 points complete" "$tmp/first.log" || { cat "$tmp/first.log"; fail "no summary"; }
[ -f "$tmp/results/mr/report/table.md" ] || { cat "$tmp/first.log"; fail "no aggregated table"; }
grep -q "±" "$tmp/results/mr/report/table.md" || fail "the table has no mean ± std"
ls "$tmp"/results/mr/multirun/multirun-*.yaml > /dev/null 2>&1 || fail "no multirun sweep file"
found=0
for d in "$tmp"/results/mr/*/; do
    [ -f "$d/result.h5" ] || continue
    [ -f "$d/config.resolved.yaml" ] || fail "$d has no config.resolved.yaml"
    [ -f "$d/overrides.yaml" ] || fail "$d has no overrides.yaml"
    if grep -qx -- "- seed=1" "$d/overrides.yaml" && grep -qx -- "- hydra.members=3" "$d/overrides.yaml"; then
        found=1
    fi
done
[ $found -eq 1 ] || fail "no run's overrides.yaml lists seed=1 and hydra.members=3"

# the same command again: every point is complete, nothing runs
"$HYDRA" exp "$tmp/tiny.yaml" -m seed=0,1 hydra.members=2,3 --jobs 2 --threads 2 \
    > "$tmp/second.log" 2>&1 || { cat "$tmp/second.log"; fail "the rerun failed"; }
grep -q "(0 run now, 4 already complete)" "$tmp/second.log" || { cat "$tmp/second.log"; fail "the rerun ran points again"; }

# range() and commas inside brackets: 3 x 2 points, listed in cartesian order
"$HYDRA" exp "$tmp/tiny.yaml" --multirun 'prune.calib_size=range(32,128,32)' \
    'methods=[single,hydra_taylor],[single]' --list > "$tmp/list.log" 2>&1 || { cat "$tmp/list.log"; fail "--list failed"; }
grep -q "6 points" "$tmp/list.log" || { cat "$tmp/list.log"; fail "expected 6 points"; }
grep -q "^   0 .*prune.calib_size=32 methods=\[single, hydra_taylor\]" "$tmp/list.log" \
    || { cat "$tmp/list.log"; fail "point 0 is not calib 32 with both methods"; }
grep -q "prune.calib_size=96" "$tmp/list.log" || { cat "$tmp/list.log"; fail "range(32,128,32) lacks 96"; }
if grep -q "prune.calib_size=128" "$tmp/list.log"; then fail "range() includes its stop"; fi

# data stays data in the generated sweep file: quotes, '#', ': ', '$()' and ';' in values
"$HYDRA" exp "$tmp/tiny.yaml" -m 'train.init="/a b: #c",'"'"'/d"e$(touch PWN);f'"'" --list \
    > "$tmp/inj.log" 2>&1 || { cat "$tmp/inj.log"; fail "--list of quoted values failed"; }
grep -q '2 points' "$tmp/inj.log" || { cat "$tmp/inj.log"; fail "expected 2 points of quoted values"; }
grep -qF '/a b: #c' "$tmp/inj.log" || { cat "$tmp/inj.log"; fail "value '/a b: #c' not kept"; }
grep -qF '/d\"e$(touch PWN);f' "$tmp/inj.log" || { cat "$tmp/inj.log"; fail "value with \$() not kept"; }
[ ! -e PWN ] && [ ! -e "$tmp/PWN" ] || fail "a value was executed"

refuse() {   # refuse PATTERN ARGS...: the command fails with a message matching PATTERN
    pat=$1; shift
    if "$HYDRA" exp "$tmp/tiny.yaml" "$@" > "$tmp/r.log" 2>&1; then fail "accepted: $*"; fi
    grep -q -- "$pat" "$tmp/r.log" || { cat "$tmp/r.log"; fail "'$*': no message matching '$pat'"; }
    if grep -q "traceback" "$tmp/r.log"; then cat "$tmp/r.log"; fail "traceback for: $*"; fi
}
refuse "no key has several values" -m seed=0 --list
refuse "applies to a single run" -m seed=0,1 --force
refuse "is empty" -m 'seed=range(3,1)' --list
refuse "not a finite number" -m 'seed=range(0,x)' --list
refuse "cannot take several values" -m seed=0,1 "results_dir=$tmp/a,$tmp/b" --list
echo "multirun: ok"
