# run_interrupt.sh: SIGINT during point 2 stops the client and the server
# (and the server's helper processes), keeps point 1, records point 2 as
# interrupted, prints the resume command and exits 130; --resume then runs
# only the missing points. The hint and server.log's start marker end their
# lines. A second SIGINT skips the stop grace period. A
# SIGKILLed sweep takes its server down with it (parent-death signal).
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE EXTRA_FAKESERVER_FLAGS GRACE_S
    make_experiment fakeserver "$1" NAME=interrupt PIDFILE="$T_TMP/$1.pid" SERVER_ARGS="$2" GRACE_S="$3"
}

# --- one SIGINT, then resume ---
write_exp a.yaml ", --fork-helpers, \"2\"" 5
"$SWEEP" run a.yaml --out runa >out.txt 2>err.txt &
sp=$!
track_pid $sp
wait_file runa/default/c2-n8.log 60 || fail "point 2 never started"
sleep 0.3
check_eq "server and its 2 helpers are running" "$(procs_with "$T_TMP/a.yaml.pid")" 3
kill -INT $sp
wait $sp
rc=$?
cat err.txt
check_eq "exit status 130" "$rc" 130
check_eq "no server or helper left" "$(procs_with "$T_TMP/a.yaml.pid")" 0
check_eq "no client left" "$(procs_with "$MINICLIENT")" 0
check_eq "2 rows kept" "$(rows runa)" 2
check_eq "statuses" "$(col runa status | tr '\n' ' ')" "ok interrupted "
check "the resume command is printed" grep -qF -- "$SWEEP run a.yaml --resume runa" out.txt
check_eq "the resume command ends its line" "$(tail -c 1 out.txt | od -An -c | tr -d ' ')" '\n'
check "server.log: the start marker is a line of its own" \
    grep -q -- '--step-b-ms 1 --prefill-ms 5$' runa/default/server.log
check "a report was built on what was measured" test -s runa/REPORT.md
check "the report says the run was interrupted" grep -q '^- \*\*interrupted\*\*: ' runa/REPORT.md

"$SWEEP" run a.yaml --resume runa >out2.txt 2>err2.txt
rc=$?
cat err2.txt
check_eq "resume: exit status 0" "$rc" 0
check_eq "resume: 3 rows" "$(rows runa)" 3
check_eq "resume: all ok" "$(col runa status | tr '\n' ' ')" "ok ok ok "
check "resume: point 1 was not rerun" test ! -e runa/default/c1-n4.log.1
check "resume: the interrupted log of point 2 was kept" test -e runa/default/c2-n8.log.1
check "resume: says what it skipped" grep -q "1 of 3 points already ok" err2.txt
check_eq "resume: no server left" "$(procs_with "$T_TMP/a.yaml.pid")" 0
check "resume: the report no longer says interrupted" sh -c "! grep -q 'interrupted' runa/REPORT.md"

# --- a second SIGINT kills at once: the server ignores SIGTERM, grace is 60 s ---
write_exp b.yaml ", --ignore-sigterm" 60
"$SWEEP" run b.yaml --out runb >outb.txt 2>errb.txt &
sp=$!
track_pid $sp
wait_file runb/default/c1-n4.log 60 || fail "point 1 never started"
sleep 0.3
start=$(date +%s%N)
kill -INT $sp
sleep 0.5
kill -INT $sp
wait $sp
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
check_eq "second SIGINT: exit status 130" "$rc" 130
check "second SIGINT: done in $ms ms (< 5000, grace was 60 s)" test "$ms" -lt 5000
check_eq "second SIGINT: no server left" "$(procs_with "$T_TMP/b.yaml.pid")" 0
cat errb.txt
check "second SIGINT: says the server was killed for it" \
    grep -q "second interrupt: server (pid [0-9]*) killed without waiting" errb.txt
check "second SIGINT: no claim that the server ignored SIGTERM" \
    sh -c "! grep -q 'ignored SIGTERM' errb.txt"

# --- sweep SIGKILLed: the server gets SIGTERM from the parent-death signal ---
write_exp c.yaml "" 5
"$SWEEP" run c.yaml --out runc >outc.txt 2>errc.txt &
sp=$!
track_pid $sp
wait_file runc/default/c1-n4.log 60 || fail "point 1 never started"
kill -KILL $sp
wait $sp 2>/dev/null
n=0
while [ "$(procs_with "$T_TMP/c.yaml.pid")" != 0 ] && [ $n -lt 60 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "sweep killed: its server is gone within 3 s" "$(procs_with "$T_TMP/c.yaml.pid")" 0
check_eq "sweep killed: its client is gone" "$(procs_with "$MINICLIENT")" 0
check "sweep killed: points.csv is still a whole file" test "$(head -c 8 runc/points.csv)" = "variant,"
finish
