# exec_slurm.sh: executor: {kind: slurm} against a one-node SLURM cluster
# that this test starts and stops (munged, slurmctld, slurmd with a
# slurm.conf written here: NodeName=localhost, CPUs from nproc, one
# partition, proctrack/linuxproc, no accounting). A two-variant fakeserver
# experiment becomes a job array whose tasks both end ok, merged into the
# layout of a local run, exit 0, and a --resume of it submits nothing (the
# submitter's point keys, model fingerprint included, are the tasks');
# scancel of one task mid-run gives that variant failed rows naming the
# state while the other is ok; --resume submits only the missing variant; Ctrl-C of the submitter cancels the array (squeue
# empty, exit 130); `sweep status` prints the tasks.
. tests/lib.sh
cd "$T_TMP" || exit 1

for prog in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd; do
    if [ ! -x "$prog" ]; then
        skip "$prog is not installed (scripts/deps.sh installs munge, slurmctld, slurmd, slurm-client)"
        finish
        exit
    fi
done
for prog in sbatch squeue scancel scontrol sinfo munge; do
    if ! command -v $prog >/dev/null 2>&1; then
        skip "$prog is not installed (scripts/deps.sh installs slurm-client and munge)"
        finish
        exit
    fi
done

# on any exit, a failed check included: no daemon, job or server outlives the test
sl_cleanup() {
    scancel -u "$(id -un)" --name=sweep-slurmt >/dev/null 2>&1
    for f in slurmctld.pid slurmd.pid munged.pid; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 0.5
    for f in /proc/[0-9]*/cmdline; do
        pid=${f#/proc/} pid=${pid%/cmdline}
        [ "$pid" = "$$" ] && continue
        line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
        case "$line" in *"$T_TMP/"*) kill -KILL "$pid" 2>/dev/null ;; esac
    done
    t_cleanup
}
trap sl_cleanup EXIT
[ -n "${KEEP_TMP:-}" ] && trap - EXIT

# ---- a one-node cluster of our own ----
mkdir state spool log
head -c 1024 /dev/urandom >munge.key
chmod 600 munge.key
/usr/sbin/munged -f --key-file="$T_TMP/munge.key" -S "$T_TMP/munge.sock" \
    --log-file="$T_TMP/log/munged.log" --pid-file="$T_TMP/munged.pid" --seed-file="$T_TMP/munged.seed"
cat >slurm.conf <<EOF
ClusterName=sweeptest
SlurmctldHost=localhost
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$T_TMP/munge.sock
CredType=cred/munge
StateSaveLocation=$T_TMP/state
SlurmdSpoolDir=$T_TMP/spool
SlurmctldPidFile=$T_TMP/slurmctld.pid
SlurmdPidFile=$T_TMP/slurmd.pid
SlurmctldLogFile=$T_TMP/log/slurmctld.log
SlurmdLogFile=$T_TMP/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
KillWait=5
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=sweeptest Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T_TMP/slurm.conf"
# Each daemon within a deadline, or the test fails at once naming it with
# its log (sinfo against a dead controller waits out its own timeouts, so a
# loop of tries without a clock took over 1,000 s to give up).
up=no
if wait_up munged 30 "log/munged.log" sh -c "munge -n -S '$T_TMP/munge.sock' | unmunge -S '$T_TMP/munge.sock'"; then
    /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >log/slurmctld.out 2>&1 &
    /usr/sbin/slurmd -D -f "$SLURM_CONF" >log/slurmd.out 2>&1 &
    wait_up slurmctld 40 "log/slurmctld.out log/slurmctld.log" sh -c "scontrol ping | grep -q UP" &&
        wait_up "slurmd (node idle)" 40 "log/slurmd.out log/slurmd.log" \
            sh -c "sinfo -h -o %T | grep -q idle" && up=yes
fi
if [ "$up" != yes ]; then
    finish
    exit
fi
ok "the test's cluster has an idle node"

EXECUTOR="executor: {kind: slurm, partition: sweeptest, time: \"00:10:00\"}"
# variants STEP_B GRID_B: a quick variant a and a variant b with its own step and grid
variants() {
    printf 'variants:\n  - {name: a}\n  - {name: b, server: {flags: {step-a-ms: %s}}, bench: {grid: %s}}\n' "$1" "$2"
}

# a model file (the fakeserver ignores it): its fingerprint is in every
# point key, computed alike by the submitter and the tasks (W3-S1)
head -c 1500000 /dev/urandom >model.bin
MODEL="  model: $T_TMP/model.bin"

# ---- a two-variant array: both tasks ok, merged like a local run ----
make_experiment fakeserver s.yaml NAME=slurmt PIDFILE="$T_TMP/pid.\${variant}" STEP_A=3 PREFILL=1 \
    OUTPUT_LEN=8 GRID='["1:2", "2:4"]' SERVER_LINES="$MODEL" EXTRA="$(variants 6 '["1:2", "1:4"]')
$EXECUTOR"
"$SWEEP" check s.yaml >/dev/null 2>check.txt
check_eq "sweep check accepts the slurm executor" "$?" 0
"$SWEEP" run s.yaml --out run >out.txt 2>err.txt
rc=$?
check_eq "array run: exit 0" "$rc" 0
[ "$rc" = 0 ] || { cat err.txt; tail -n 20 run/tasks/slurm-*.out; }
check_eq "array run: 4 ok rows, both variants" "$(col run status | tr '\n' ' ')/$(col run variant | tr '\n' ' ')" \
    "ok ok ok ok /a a b b "
check "array run: said it submitted a job array" grep -q "submitted slurm job array" err.txt
check "array run: logs in the run folder as for a local run" \
    test -s run/a/c2-n4.log -a -s run/b/c1-n4.log -a -s run/a/server.log -a -s run/b/server.log
check "array run: REPORT.md over both variants" sh -c "grep -q \"'a'\\|a\" run/REPORT.md && grep -q b run/REPORT.md"
job=$(sed -n 's/.*"job": "\([0-9]*\)".*/\1/p' run/manifest.json | head -n 1)
check "array run: manifest.json records the job id ($job)" test -n "$job"
check "array run: manifest.json records each variant's task" grep -q "\"b\": \"${job}_1\"" run/manifest.json
"$SWEEP" status run >status.txt 2>&1
check_eq "sweep status: exit 0" "$?" 0
check "sweep status: each variant's task and its end state" \
    sh -c "grep -q 'a .*${job}_0  *COMPLETED' status.txt && grep -q 'b .*${job}_1  *COMPLETED' status.txt"
check_eq "array run: squeue is empty" "$(squeue -h | wc -l)" 0
"$SWEEP" plot run --no-preview >plot.txt 2>&1
check_eq "array run: sweep plot rebuilds it from the merged logs" "$?" 0
check_eq "array run: sweep plot keeps the 4 rows" "$(rows run)" 4
# W3-S1: the submitter's keys are the tasks': a finished folder resumes to nothing
"$SWEEP" run s.yaml --resume run >rsout.txt 2>rserr.txt
rc=$?
check_eq "resume of the finished array run: exit 0" "$rc" 0
[ "$rc" = 0 ] || cat rserr.txt
check "resume of the finished array run: every point already ok" grep -q "4 of 4 points already ok" rserr.txt
check "resume of the finished array run: nothing submitted" sh -c "! grep -q 'submitted slurm job' rserr.txt"
check_eq "array run: the rows' keys are the plan's" "$(col run key | sort | tr '\n' ' ')" \
    "$("$SWEEP" check s.yaml 2>/dev/null | sed -n 's/.* key \([0-9a-f]*\) .*/\1/p' | sort | tr '\n' ' ')"

# a partition the cluster does not have: sbatch's refusal is exit 3
sed 's/partition: sweeptest/partition: nosuchpartition/' s.yaml >bad.yaml
"$SWEEP" run bad.yaml --out badrun >bout.txt 2>berr.txt
check_eq "sbatch refuses: exit 3" "$?" 3
check "sbatch refuses: its message is shown" grep -q "sbatch refused the job array.*partition" berr.txt

# ---- scancel of one task mid-run: its variant fails naming the state ----
make_experiment fakeserver c.yaml NAME=slurmt PIDFILE="$T_TMP/pid.\${variant}" STEP_A=3 PREFILL=1 \
    OUTPUT_LEN=8 GRID='["1:2", "2:4"]' SERVER_LINES="$MODEL" EXTRA="$(variants 40 '["1:2", "1:40"]')
$EXECUTOR"
rm -f pid.a pid.b
"$SWEEP" run c.yaml --out crun >cout.txt 2>cerr.txt &
sweep_pid=$!
track_pid $sweep_pid
wait_file crun/tasks/b/b/c1-n40.log 60
cjob=$(sed -n 's/.*"job": "\([0-9]*\)".*/\1/p' crun/manifest.json | head -n 1)
scancel "${cjob}_1"
wait $sweep_pid
check_eq "one task cancelled: exit 1 (some points failed)" "$?" 1
check_eq "one task cancelled: variant a all ok" "$(awk -F, 'NR > 1 && $1 == "a" { print $5 }' crun/points.csv | tr '\n' ' ')" "ok ok "
check "one task cancelled: b's unfinished point is failed, naming the state" \
    grep -q "b,1,40,1,failed,.*slurm task ${cjob}_1 ended CANCELLED during the point" crun/points.csv
grep -q "b,1,40,1,failed,.*slurm task ${cjob}_1 ended CANCELLED during the point" crun/points.csv || {
    cut -d, -f1-8 crun/points.csv
    tail -n 5 cerr.txt crun/tasks/slurm-*.out
}
check_eq "one task cancelled: squeue is empty" "$(squeue -h | wc -l)" 0
check_eq "one task cancelled: no fakeserver left" "$(procs_with "$T_TMP/pid.")" 0

# ---- --resume: only the missing variant is submitted ----
"$SWEEP" run c.yaml --resume crun >rout.txt 2>rerr.txt
rc=$?
check_eq "resume: b finished now (exit 0)" "$rc" 0
[ "$rc" = 0 ] || { cat rerr.txt; tail -n 20 crun/tasks/slurm-*.out; }
check "resume: a one-task array, for b only" grep -q "submitted slurm job array .* (1 task;" rerr.txt
check "resume: a's points were not rerun" test ! -e crun/a/c1-n2.log.1
check_eq "resume: every row ok" "$(col crun status | sort -u | tr '\n' ' ')" "ok "

# ---- Ctrl-C of the submitter: the array is cancelled ----
make_experiment fakeserver i.yaml NAME=slurmt PIDFILE="$T_TMP/pid.\${variant}" STEP_A=40 PREFILL=1 \
    OUTPUT_LEN=8 GRID='["1:300"]' EXTRA="$EXECUTOR"
"$SWEEP" run i.yaml --out irun >iout.txt 2>ierr.txt &
sweep_pid=$!
track_pid $sweep_pid
wait_file irun/tasks/default/default/c1-n300.log 60
kill -INT $sweep_pid
wait $sweep_pid
check_eq "Ctrl-C: exit 130" "$?" 130
check "Ctrl-C: says it cancelled the job" grep -q "cancelled slurm job" ierr.txt
check "Ctrl-C: prints the resume command" grep -q -- "--resume" iout.txt
check_eq "Ctrl-C: squeue is empty" "$(squeue -h | wc -l)" 0
check_eq "Ctrl-C: no fakeserver left" "$(procs_with "$T_TMP/pid.")" 0
finish
