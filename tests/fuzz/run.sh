#!/bin/sh
# tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]: runs each libFuzzer target (default: all) for
# SECONDS in one process (one core), one after the other, starting from its committed seed corpus
# tests/fuzz/corpus/<target>/ (read only: new inputs go to BUILD_DIR/corpus/<target>/) with
# its dictionary tests/fuzz/<target>.dict when there is one. Prints one line per target
# (executions, crashes); a crash, leak, timeout or out-of-memory input is saved as
# BUILD_DIR/findings/<target>/crash-* (or leak-, timeout-, oom-) and makes the script exit 1.
set -u
B=${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
SECS=${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
[ $# -gt 0 ] || set -- config idx text ckpt safetensors
status=0
for t in "$@"; do
    bin="$B/fuzz_$t"
    [ -x "$bin" ] || { echo "fuzz_$t: not built ($bin)"; status=1; continue; }
    work="$B/corpus/$t"
    out="$B/findings/$t"
    mkdir -p "$work" "$out"
    dict=""
    [ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
    log="$B/fuzz_$t.log"
    # shellcheck disable=SC2086
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HYDRA_THREADS=1 \
        "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/" $dict \
        "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(grep -E '^stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}')
    found=$(find "$out" -type f | wc -l)
    echo "fuzz_$t: ${execs:-?} executions in ${SECS} s, $found finding(s), exit $rc (log $log)"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        status=1
        grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -n 5
    fi
done
exit $status
