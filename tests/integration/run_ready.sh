# run_ready.sh: readiness and stopping through `sweep run`: a server that
# exits at start is reported at once with its status and log tail (not at
# the 600 s deadline); one that stays 503 fails at the deadline; a CUDA
# out-of-memory at start is named; a server that ignores SIGTERM is killed
# after the grace period; a point past bench.timeout_s is marked timeout.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE EXTRA_FAKESERVER_ARGS READY_TIMEOUT_S GRACE_S POINT_TIMEOUT_S OUTPUT_LEN
    make_experiment fakeserver "$1" NAME=ready PIDFILE="$T_TMP/$1.pid" SERVER_ARGS="$2" \
        READY_S="$3" GRACE_S="$4" TIMEOUT_S="$5" OUTPUT_LEN="$6" GRID='["1:2"]'
}
elapsed_ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# exit with code 2 at start: reported fast, with the status and the log tail
write_exp exit.yaml ", --exit-at-start, \"2\"" 600 5 60 4
start=$(date +%s%N)
"$SWEEP" run exit.yaml --out run-exit >out.txt 2>err.txt
rc=$?
ms=$(elapsed_ms "$start")
cat err.txt
check_eq "exit at start: exit status 3" "$rc" 3
check "exit at start: noticed in $ms ms (< 3000, deadline 600 s)" test "$ms" -lt 3000
check "exit at start: the status is named" grep -q "server exited with code 2" err.txt
check "exit at start: the log tail is shown" grep -q "| fakeserver: exiting with status 2 as asked" err.txt
check_eq "exit at start: the point is recorded failed" "$(col run-exit status 1)" failed

# CUDA out of memory at start: the cause is read from the log
write_exp oom.yaml ", --oom-at-start" 600 5 60 4
"$SWEEP" run oom.yaml --out run-oom >out.txt 2>err.txt
check_eq "oom at start: exit status 3" "$?" 3
check "oom at start: out of memory is named" grep -q "server exited with code 1: out of memory" err.txt

# /health stays 503 until the deadline
write_exp busy.yaml ", --unavailable-s, \"100\"" 2 5 60 4
start=$(date +%s%N)
"$SWEEP" run busy.yaml --out run-busy >out.txt 2>err.txt
rc=$?
ms=$(elapsed_ms "$start")
check_eq "503 forever: exit status 3" "$rc" 3
check "503 forever: gave up at the 2 s deadline ($ms ms)" test "$ms" -ge 2000 -a "$ms" -lt 6000
check "503 forever: says what the last probe saw" grep -q "HTTP 503" err.txt
check_eq "503 forever: no server left" "$(procs_with "$T_TMP/busy.yaml.pid")" 0

# a server that ignores SIGTERM: SIGKILL after the grace period, group empty
write_exp term.yaml ", --ignore-sigterm, --fork-helpers, \"1\"" 30 1.5 60 4
start=$(date +%s%N)
"$SWEEP" run term.yaml --out run-term >out.txt 2>err.txt
rc=$?
ms=$(elapsed_ms "$start")
cat err.txt
check_eq "ignores SIGTERM: the point still counts (exit 0)" "$rc" 0
check "ignores SIGTERM: killed after the 1.5 s grace" grep -Eq "ignored SIGTERM for (1\.[5-9]|[23]\.[0-9]) s; killed" err.txt
check_eq "ignores SIGTERM: no server or helper left" "$(procs_with "$T_TMP/term.yaml.pid")" 0

# a point longer than bench.timeout_s: status timeout, client killed, run goes on
write_exp slow.yaml "" 30 5 1 400
start=$(date +%s%N)
"$SWEEP" run slow.yaml --out run-slow >out.txt 2>err.txt
rc=$?
ms=$(elapsed_ms "$start")
check_eq "point timeout: exit status 1" "$rc" 1
check_eq "point timeout: status" "$(col run-slow status 1)" timeout
check "point timeout: stopped near 1 s (run took $ms ms)" test "$ms" -lt 4000
check_eq "point timeout: no client left" "$(procs_with "$MINICLIENT")" 0
check_eq "point timeout: no server left" "$(procs_with "$T_TMP/slow.yaml.pid")" 0
finish
