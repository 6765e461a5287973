#!/bin/sh
# tests/slurm/run.sh: `hydra sweep --launcher slurm` against a real Slurm (make test-slurm;
# .ci/run).
# Installs Debian's slurm-wlm and munge when missing (as root), writes a single-node slurm.conf
# in a temp folder (this host, 2 CPUs, no cgroups, private ports, state and spool in the temp
# folder), starts munged, slurmctld and slurmd, then:
#   1. a step array (--array=0-2:2) and a 1-based array run `hydra sweep --shard auto --list`:
#      every point is listed by exactly one task (the `got '2/2'` regression, on real Slurm);
#   2. a 4-point sweep (quick profile shrunk to synthetic data, 1 epoch) through the launcher
#      with --wait: every run folder complete, each run on 1 thread (SLURM_CPUS_PER_TASK=1 on a
#      2-core machine), the report written by the dependent job, scripts and logs in slurm/;
#   3. a second sweep submitted, cancelled (scancel) once a point is complete, and the same
#      command resubmitted with --wait: only the missing points are submitted, the complete
#      run is untouched, every point is complete and reported.
# The daemons it started are stopped by pid on exit. Exit 0 ok, 1 failed, 77 skipped (no root to
# install or start Slurm, or the daemons cannot start here): the reason is printed, never a
# silent pass.
set -u
HYDRA=${HYDRA:-./hydra}
case "$HYDRA" in /*) ;; *) HYDRA="$(pwd)/$HYDRA" ;; esac
HOME_DIR=$(pwd)
t_start=$(date +%s)
skip() { echo "test-slurm: skipped: $*"; exit 77; }

need_install=0
for c in munged slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
    command -v "$c" >/dev/null 2>&1 || need_install=1
done
if [ "$(id -u)" -ne 0 ]; then
    skip "needs root to start slurmctld/slurmd (and to install slurm-wlm and munge)"
fi
if [ $need_install -eq 1 ]; then
    echo "test-slurm: installing slurm-wlm and munge (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge \
        > /tmp/hydra-slurm-apt.log 2>&1 \
        || { tail -n 5 /tmp/hydra-slurm-apt.log; skip "cannot install slurm-wlm and munge"; }
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/hydra-slurm-XXXXXX")
chmod 755 "$T"
pids=""
cleanup() {
    if [ -n "$pids" ]; then
        SLURM_CONF="$T/slurm.conf" scancel --me >/dev/null 2>&1
        i=0
        while [ $i -lt 50 ] && [ -n "$(SLURM_CONF="$T/slurm.conf" squeue -h --me 2>/dev/null)" ]; do
            sleep 0.2; i=$((i + 1))
        done
        for p in $pids; do kill "$p" 2>/dev/null; done
        for p in $pids; do wait "$p" 2>/dev/null; done
    fi
    [ -n "${KEEP:-}" ] && echo "test-slurm: kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "test-slurm: FAIL: $*"
    for f in "$T"/*.log "$T"/results/*/slurm/*.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
    done
    exit 1
}

# ===== the cluster: munged, slurmctld, slurmd =====
host=$(hostname -s)
base_port=$((20000 + ($$ % 2000) * 2))
mkdir -p "$T/state" "$T/spool" "$T/munge"
chmod 700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$T/munge/munge.key"
cat > "$T/slurm.conf" <<EOF
ClusterName=hydratest
SlurmctldHost=$host
SlurmctldPort=$base_port
SlurmdPort=$((base_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.sock
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=600
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

munged --foreground --force --socket="$T/munge/munge.sock" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" \
    >> "$T/munged.log" 2>&1 &
pids="$!"
i=0
while [ ! -S "$T/munge/munge.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$T/munge/munge.sock" ] || { tail -n 5 "$T/munged.log"; skip "munged does not start here"; }
slurmctld -D -f "$SLURM_CONF" >> "$T/slurmctld.log" 2>&1 &
pids="$! $pids"
slurmd -D -f "$SLURM_CONF" >> "$T/slurmd.log" 2>&1 &
pids="$! $pids"
i=0
state=""
while [ $i -lt 150 ]; do
    state=$(sinfo -h -o %t 2>/dev/null | head -n 1)
    [ "$state" = "idle" ] && break
    sleep 0.2
    i=$((i + 1))
done
if [ "$state" != "idle" ]; then
    tail -n 8 "$T/slurmctld.log" "$T/slurmd.log"
    skip "slurmctld/slurmd did not bring the node up here (node state '$state')"
fi
echo "test-slurm: Slurm $(sinfo -V | cut -d' ' -f2) up on $host in $(( $(date +%s) - t_start )) s"

# ===== a tiny sweep on synthetic data =====
unset HYDRA_THREADS OMP_NUM_THREADS OPENBLAS_NUM_THREADS
export HYDRA_CACHE_DIR="$T/cache" HYDRA_SLURM_POLL=1
mkdir -p "$T/data"
cat > "$T/mk.lua" <<'LUA'
local hydra = require("hydra")
hydra.model.write_synthetic(arg[1] .. "/tiny.h5", { train = 256, val = 64, test = 64 })
hydra.model.write_synthetic(arg[1] .. "/tinyood.h5", { train = 8, val = 8, test = 64, seed = 5,
                                                       name = "tinyood" })
LUA
"$HYDRA" run "$T/mk.lua" "$T/data" || fail "cannot write the synthetic data"
cat > "$T/tiny.yaml" <<EOF
results_dir: $T/results
data: {id: tiny, ood: [tinyood], shift: [], dir: $T/data, train_subset: 0, test_subset: 0}
train: {epochs: 1, batch_size: 32, eval_batch_size: 64}
methods: [single]
EOF
for name in one two; do
    cat > "$T/$name.yaml" <<EOF
base: [$HOME_DIR/configs/experiments/quick.yaml, tiny.yaml]
set: {experiment: $name}
grid:
  seed: [0, 1]
  eval.score: [msp, entropy]
EOF
done
cd "$T" || fail "cd $T"

# 1. step and 1-based arrays with --shard auto: each point listed by exactly one task
cat > "$T/list.sh" <<EOF
#!/bin/sh
exec '$HYDRA' sweep '$T/one.yaml' --shard auto --list
EOF
a=$(sbatch --parsable --array=0-2:2 --output="$T/step-%a.out" "$T/list.sh") || fail "sbatch"
b=$(sbatch --parsable --array=1-4%2 --output="$T/base1-%a.out" "$T/list.sh") || fail "sbatch"
i=0
while [ -n "$(squeue -h -j "$a,$b" 2>/dev/null)" ] && [ $i -lt 300 ]; do
    sleep 0.2; i=$((i + 1))
done
for f in step-0 step-2 base1-1 base1-2 base1-3 base1-4; do
    [ -f "$T/$f.out" ] || fail "no output of array task $f"
    grep -q "^sweep one: 4 points" "$T/$f.out" || { cat "$T/$f.out"; fail "array task $f failed"; }
done
n=$(cat "$T"/step-*.out | grep -cE '^ +[0-9]+  [0-9a-f]{12}  ')
[ "$n" -eq 4 ] || { cat "$T"/step-*.out; fail "the step array listed $n points, want 4"; }
n=$(cat "$T"/base1-*.out | grep -E '^ +[0-9]+  [0-9a-f]{12}  ' | sort -u | wc -l)
[ "$n" -eq 4 ] || fail "the 1-based array listed $n distinct points, want 4"
echo "test-slurm: --array=0-2:2 and --array=1-4%2 cover every point once"
# an irregular list has no shard map (Slurm 22.05 sets MIN 1, MAX 4, STEP 1, COUNT 3): refused
c=$(sbatch --parsable --array=1,3,4 --output="$T/list-%a.out" "$T/list.sh") || fail "sbatch"
i=0
while [ -n "$(squeue -h -j "$c" 2>/dev/null)" ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
grep -q "task ids are not evenly spaced (SLURM_ARRAY_TASK_ID 3, MIN 1, MAX 4, STEP 1, COUNT 3)" \
    "$T/list-3.out" || { cat "$T"/list-*.out; fail "the list array was not refused"; }

# 2. the launcher with --wait
t0=$(date +%s)
"$HYDRA" sweep one.yaml --launcher slurm --slurm-cpus 1 --slurm-time 10 --wait \
    > "$T/one.out" 2>&1 || { cat "$T/one.out"; fail "hydra sweep --launcher slurm --wait failed"; }
cat "$T/one.out"
grep -q "submitted array job [0-9]* (4 tasks: 0-3, 1 cpu each) for 4 of 4 points" "$T/one.out" \
    || fail "not one task per point"
n=$(ls "$T"/results/one/*/result.h5 2>/dev/null | wc -l)
[ "$n" -eq 4 ] || fail "expected 4 complete runs, found $n"
"$HYDRA" sweep one.yaml --list > "$T/one.list" || fail "--list"
grep -q "4 points (profile -), 4 complete" "$T/one.list" || { cat "$T/one.list"; fail "list"; }
for d in "$T"/results/one/*/; do
    [ -f "$d/result.h5" ] || continue
    grep -q "seed [0-9]*, 1 thread(s)" "$d/log.txt" \
        || { grep thread "$d/log.txt"; fail "a run in a 1-CPU task did not run 1 thread"; }
done
table="$T/results/one/report/table.md"
[ -f "$table" ] || fail "no report $table"
grep -q "| Single (eval.score=msp) (n=2) |" "$table" || { cat "$table"; fail "no msp row"; }
grep -q "| Single (eval.score=entropy) (n=2) |" "$table" || fail "no entropy row"
[ -f "$T/results/one/slurm/one.sbatch" ] || fail "no sbatch script"
[ -f "$T/results/one/slurm/one.report.sbatch" ] || fail "no report script"
ls "$T"/results/one/slurm/one-*_*.log >/dev/null 2>&1 || fail "no task logs"
ls "$T"/results/one/slurm/one-report-*.log >/dev/null 2>&1 || fail "no report log"
echo "test-slurm: 4-point sweep with --wait in $(( $(date +%s) - t0 )) s"

# 3. cancel, then resubmit the same command: only the missing points run
t0=$(date +%s)
"$HYDRA" sweep two.yaml --launcher slurm --slurm-cpus 1 --slurm-array-parallelism 1 \
    train.epochs=3 > "$T/two.out" 2>&1 || { cat "$T/two.out"; fail "submit of sweep two"; }
cat "$T/two.out"
array=$(sed -n 's/.*submitted array job \([0-9]*\).*/\1/p' "$T/two.out")
report=$(sed -n 's/.*report job \([0-9]*\) after it.*/\1/p' "$T/two.out")
[ -n "$array" ] && [ -n "$report" ] || fail "no job ids printed"
i=0
first=""
while [ $i -lt 600 ]; do
    first=$(ls "$T"/results/two/*/result.h5 2>/dev/null | head -n 1)
    [ -n "$first" ] && break
    sleep 0.2
    i=$((i + 1))
done
[ -n "$first" ] || fail "no point of sweep two completed"
# cancel while the next task is running (its run in progress is lost, nothing else)
i=0
# (a point is running when its run folder exists without result.h5 while Slurm runs a task;
# the folder slurm/ and a task still completing after its point do not count)
in_progress() {
    for d in "$T"/results/two/*/; do
        case $(basename "$d") in slurm | report) continue ;; esac
        [ -f "$d/result.h5" ] || { echo "$d"; return; }
    done
}
while [ $i -lt 300 ]; do
    [ -n "$(squeue -h -j "$array" -t RUNNING 2>/dev/null)" ] && [ -n "$(in_progress)" ] && break
    sleep 0.1
    i=$((i + 1))
done
[ -n "$(in_progress)" ] || fail "no point of sweep two was running within 30 s"
"$HYDRA" sweep two.yaml --status train.epochs=3 > "$T/two.status" 2>&1 || fail "--status"
scancel "$array" "$report" || fail "scancel"
cat "$T/two.status"
grep -q "(Slurm array job $array, report job $report)" "$T/two.status" || fail "--status job ids"
grep -qE "  running  " "$T/two.status" || fail "--status shows no running point"
grep -qE "  pending  " "$T/two.status" || fail "--status shows no pending point"
i=0
while [ -n "$(squeue -h -j "$array,$report" 2>/dev/null)" ] && [ $i -lt 200 ]; do
    sleep 0.2; i=$((i + 1))
done
[ $i -lt 200 ] || fail "the cancelled jobs did not leave the queue"
sum=$(cksum < "$first")
done_before=$(ls "$T"/results/two/*/result.h5 | wc -l)
echo "test-slurm: cancelled with $done_before of 4 points complete"
grep -q "sweep: interrupted (signal 15); stopping 1 worker" \
    "$T"/results/two/slurm/two-"$array"_*.log \
    || fail "no task of the cancelled array stopped its worker on SIGTERM"
[ "$done_before" -lt 4 ] || fail "every point finished before the cancel (make them slower)"
"$HYDRA" sweep two.yaml --launcher slurm --slurm-cpus 1 --wait train.epochs=3 \
    > "$T/two2.out" 2>&1 || { cat "$T/two2.out"; fail "the resubmitted sweep failed"; }
cat "$T/two2.out"
grep -q "for $((4 - done_before)) of 4 points" "$T/two2.out" \
    || fail "the resubmission did not submit only the $((4 - done_before)) missing points"
n=$(ls "$T"/results/two/*/result.h5 | wc -l)
[ "$n" -eq 4 ] || fail "expected 4 complete runs after the resubmission, found $n"
[ "$(cksum < "$first")" = "$sum" ] || fail "a run complete before the cancel was rewritten"
[ -f "$T/results/two/report/table.md" ] || fail "no report after the resubmission"
"$HYDRA" sweep two.yaml --launcher slurm train.epochs=3 > "$T/two3.out" 2>&1 \
    || fail "third submission"
grep -q "all 4 points complete; nothing to submit" "$T/two3.out" \
    || fail "a complete sweep was submitted again"
echo "test-slurm: cancel + resubmit in $(( $(date +%s) - t0 )) s"
echo "test-slurm: ok ($(( $(date +%s) - t_start )) s)"
