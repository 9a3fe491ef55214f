# run_crash.sh: the server is SIGKILLed during point 2 of 3. The point is
# recorded failed with the signal named, the server is restarted (a new pid),
# point 3 runs ok, nothing is lost, and no process is left behind.
. tests/lib.sh
cd "$T_TMP" || exit 1

make_experiment fakeserver crash.yaml NAME=crash PIDFILE="$T_TMP/server.pid" EXTRA="metrics:
  preset: sglang"

"$SWEEP" run crash.yaml --out run >out.txt 2>err.txt &
sp=$!
track_pid $sp
if wait_file run/default/c2-n8.log 60; then
    sleep 0.5
    pid1=$(cat server.pid)
    kill -KILL "$pid1"
else
    fail "point 2 never started"
fi
wait $sp
rc=$?
cat err.txt

check_eq "exit status 1: one point failed, the rest kept" "$rc" 1
check_eq "3 rows in points.csv" "$(rows run)" 3
check_eq "statuses" "$(col run status | tr '\n' ' ')" "ok failed ok "
cause=$(col run cause 2)
check "point 2's cause names the signal: $cause" sh -c "echo '$cause' | grep -q 'server killed by SIGKILL during the point'"
pid2=$(cat server.pid)
check "the server was restarted with a new pid ($pid1 -> $pid2)" test "$pid1" != "$pid2"
check_eq "server.log shows two starts" "$(grep -c '^==== sweep .* starting server' run/default/server.log)" 2
check "point 3 has metrics" test -n "$(col run median_tpot_ms 3)"
check "point 1 has metrics" test -n "$(col run output_throughput 1)"
check "every point kept its client log" test -s run/default/c1-n4.log -a -e run/default/c2-n8.log -a -s run/default/c4-n8.log
check "the manifest records both server starts" test "$(grep -c '"ready_s"' run/manifest.json)" -ge 2
check_eq "no fakeserver left" "$(procs_with "$T_TMP/server.pid")" 0
check_eq "no client left" "$(procs_with "$MINICLIENT")" 0
finish
