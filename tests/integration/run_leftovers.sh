# run_leftovers.sh: cgroup v2 containment (docs/reliability.md R15, R16).
# The server and the client each start a helper with setsid, out of reach
# of killpg. In a normal run a client's helper dies when its point ends and
# the server's when the server stops. After `kill -9` of sweep the helpers
# live on (the parent-death signal reaches only the direct children, and
# the subreaper dies with sweep); the next `sweep run` names them (pid,
# command line, the log in the old run folder), kills them and removes the
# dead sweep's cgroups. Skipped, with the reason, when no writable cgroup2
# hierarchy holds this shell's cgroup. Also: SIGINT leaves no helper and no
# cgroup; a leftover that holds a fixed port is gone before the next run's
# preflight checks the port. Without cgroup2 (unmounted in a private mount
# namespace, where unshare works) sweep says so once and runs as before.
. tests/lib.sh
need pgrep
cd "$T_TMP" || exit 1

if ! cgroup_dir_writable; then
    echo "skip: no writable cgroup2 hierarchy at '$CGDIR' - cgroup containment not tested"
    finish
    exit
fi
cgdir=$CGDIR mnt=$CGMNT

# Copies of sleep with names of their own, so procs_with counts exactly them.
sleep_bin=$(command -v sleep)
cp "$sleep_bin" "$T_TMP/server-helper"
cp "$sleep_bin" "$T_TMP/client-helper"

# write_exp FILE OUTPUT_LEN GRID: the server wrapper and the client wrapper
# each start a setsid'd helper (the client's argument names its
# concurrency: 1001, 1002) and exec the real program.
write_exp() {
    cat >"$1" <<EOF
name: leftovers
server:
  engine: command
  command: [sh, -c, 'setsid "\$0" 1000 & exec "\$@"', "$T_TMP/server-helper", "$FAKESERVER", --port, "\${port}", --pid-file, "$T_TMP/$1.pid", --step-a-ms, "5", --step-b-ms, "1", --prefill-ms, "5"]
  port: auto
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
  tool: command
  command: [sh, -c, 'setsid "\$0" 100\$5 & exec "\$@"', "$T_TMP/client-helper", "$MINICLIENT", --url, "\${url}", -c, "\${concurrency}", -n, "\${prompts}", --input-len, "\${input_len}", --output-len, "\${output_len}"]
  input_len: 8
  output_len: $2
  warmup: 0
  timeout_s: 60
  grid: $3
EOF
}

# --- a normal run: each helper dies with its point / its server ---
write_exp a.yaml 200 '["1:2", "2:4"]'
"$SWEEP" run a.yaml --out runa >outa.txt 2>erra.txt &
sp=$!
track_pid $sp
wait_file runa/default/c2-n4.log 60 || fail "point 2 never started"
n=0
while [ "$(procs_with "$T_TMP/client-helper 1002")" = 0 ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "normal run: the server's setsid helper runs" "$(procs_with "$T_TMP/server-helper")" 1
check_eq "normal run: point 2's client helper runs" "$(procs_with "$T_TMP/client-helper 1002")" 1
check_eq "normal run: point 1's client helper died with its point" \
    "$(procs_with "$T_TMP/client-helper 1001")" 0
hp=$(pgrep -f "^$T_TMP/server-helper")
check "normal run: the server's helper is in a cgroup of this sweep" \
    grep -q "^0::${own%/}/sweep-$sp-[0-9]*-ns[0-9]*-server-1\$" "/proc/$hp/cgroup"
wait $sp
rc=$?
cat erra.txt
check_eq "normal run: exit status 0" "$rc" 0
check_eq "normal run: no server helper left" "$(procs_with "$T_TMP/server-helper")" 0
check_eq "normal run: no client helper left" "$(procs_with "$T_TMP/client-helper")" 0
check "normal run: its cgroups were removed" sh -c "! ls -d '$cgdir'/sweep-$sp-* 2>/dev/null"
check "normal run: no warning about leftovers" sh -c "! grep -q 'no longer running' erra.txt"

# --- sweep SIGKILLed mid-point: the helpers outlive it; the next run names
# --- and kills them, and removes the dead sweep's cgroups ---
write_exp b.yaml 2000 '["1:4", "2:8"]'
"$SWEEP" run b.yaml --out runb >outb.txt 2>errb.txt &
sp=$!
track_pid $sp
wait_file runb/default/c1-n4.log 60 || fail "point 1 never started"
n=0
while [ "$(procs_with "$T_TMP/client-helper 1001")" = 0 ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done
kill -KILL $sp
wait $sp 2>/dev/null
n=0
while [ "$(procs_with "$T_TMP/b.yaml.pid")" != 0 ] && [ $n -lt 60 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "sweep killed: its server is gone (parent-death signal)" "$(procs_with "$T_TMP/b.yaml.pid")" 0
check_eq "sweep killed: the server's setsid helper outlived it" "$(procs_with "$T_TMP/server-helper")" 1
check_eq "sweep killed: the client's setsid helper outlived it" "$(procs_with "$T_TMP/client-helper")" 1
helper=$(pgrep -f "^$T_TMP/server-helper 1000")

write_exp c.yaml 16 '["1:1"]'
"$SWEEP" run c.yaml --out runc >outc.txt 2>errc.txt
rc=$?
cat errc.txt
check_eq "next run: exit status 0" "$rc" 0
check "next run: names the dead sweep" grep -q "left by sweep pid $sp, which is no longer running; killing them" errc.txt
check "next run: names the server helper's pid and command line" \
    grep -qF "pid $helper: $T_TMP/server-helper 1000" errc.txt
check "next run: says which run folder's log it wrote to" \
    grep -qF "(output to $T_TMP/runb/default/server.log)" errc.txt
check "next run: names the client helper" grep -qF "$T_TMP/client-helper 1001" errc.txt
check "next run: says it killed them" grep -q "sweep-$sp-.*: killed and removed" errc.txt
check_eq "next run: no helper of the killed sweep left" \
    "$(procs_with "$T_TMP/server-helper 1000")$(procs_with "$T_TMP/client-helper 1001")" 00
check "next run: the dead sweep's cgroups are gone" sh -c "! ls -d '$cgdir'/sweep-$sp-* 2>/dev/null"
check_eq "next run: no helper of its own left" "$(procs_with "$T_TMP/server-helper")" 0

# --- SIGINT: the helpers go with their point and server, the cgroups too ---
write_exp e.yaml 2000 '["1:4"]'
"$SWEEP" run e.yaml --out rune >oute.txt 2>erre.txt &
sp=$!
track_pid $sp
n=0
while [ "$(procs_with "$T_TMP/client-helper 1001")" = 0 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "SIGINT: both helpers run" \
    "$(procs_with "$T_TMP/server-helper 1000")$(procs_with "$T_TMP/client-helper 1001")" 11
kill -INT $sp
wait $sp
check_eq "SIGINT: exit status 130" "$?" 130
check_eq "SIGINT: no helper left" \
    "$(procs_with "$T_TMP/server-helper")$(procs_with "$T_TMP/client-helper")" 00
check "SIGINT: its cgroups were removed" sh -c "! ls -d '$cgdir'/sweep-$sp-* 2>/dev/null"

# --- a leftover that holds a fixed port: the server's wrapper starts the
# --- real server with setsid; after kill -9 it keeps the port. The next run
# --- kills it before its preflight, which would refuse the port otherwise ---
port=$(free_port)
write_port_exp() { # OUTPUT_LEN
    cat >d.yaml <<EOF
name: leftport
server:
  engine: command
  command: [sh, -c, 'setsid "\$0" "\$@" & exec sleep 1000', "$FAKESERVER", --port, "\${port}", --pid-file, "$T_TMP/d.yaml.pid"]
  port: $port
  ready: {path: /health, timeout_s: 30}
bench:
  tool: command
  command: ["$MINICLIENT", --url, "\${url}", -c, "\${concurrency}", -n, "\${prompts}", --input-len, "\${input_len}", --output-len, "\${output_len}"]
  input_len: 8
  output_len: $1
  warmup: 0
  grid: ["1:1"]
EOF
}
write_port_exp 2000
"$SWEEP" run d.yaml --out rund1 >outd1.txt 2>errd1.txt &
sp=$!
track_pid $sp
wait_file rund1/default/c1-n1.log 60 || fail "port: the point never started"
kill -KILL $sp
wait $sp 2>/dev/null
check_eq "port: after kill -9 the setsid'd server still runs" "$(procs_with "$T_TMP/d.yaml.pid")" 1
check "port: and still listens on $port" curl -fs -o /dev/null "http://127.0.0.1:$port/health"
write_port_exp 16
"$SWEEP" run d.yaml --out rund2 >outd2.txt 2>errd2.txt
rc=$?
cat errd2.txt
check_eq "port: the next run is not refused (exit status 0)" "$rc" 0
check "port: it named the old server" grep -qF "(output to $T_TMP/rund1/default/server.log)" errd2.txt
check "port: no 'port in use'" sh -c "! grep -q 'in use' errd2.txt"
check "port: the setsid'd server is known as ours (its cgroup), not 'another server'" \
    sh -c "! grep -q 'not in the process group' errd2.txt"
check_eq "port: no server left" "$(procs_with "$T_TMP/d.yaml.pid")" 0

# --- no cgroup2 (unmounted in a mount namespace of its own): said once, and
# --- the run works as before, process groups and the subreaper only ---
write_exp f.yaml 16 '["1:1", "2:2"]'
if unshare -m sh -c 'umount -l "$1"' sh "$mnt" 2>/dev/null; then
    # every cgroup2 mount, not only ours: another root that bind-mounts /sys
    # (a fresh-check running beside this test) shows its own in mountinfo
    unshare -m sh -c 'umount -l "$1" || exit 1
        for m in $(awk "\$3 == \"cgroup2\" { print \$2 }" /proc/self/mounts | sort -r); do
            umount -l "$m" 2>/dev/null
        done
        exec "$2" run f.yaml --out runf' sh "$mnt" "$SWEEP" >outf.txt 2>errf.txt
    rc=$?
    cat errf.txt
    check_eq "no cgroup2: exit status 0" "$rc" 0
    check_eq "no cgroup2: said once" \
        "$(grep -c 'cgroup v2 not usable (no cgroup2 file system is mounted)' errf.txt)" 1
    check_eq "no cgroup2: the subreaper still kills the helpers" \
        "$(procs_with "$T_TMP/server-helper")$(procs_with "$T_TMP/client-helper")" 00
else
    echo "skip: cannot unmount cgroup2 in a mount namespace (unshare -m) - fallback not tested"
fi

# a failing run may leave helpers: kill them by pid, as the fixed sweep would
for p in $(pgrep -f "^$T_TMP/(server|client)-helper |$T_TMP/d.yaml.pid"); do kill -KILL "$p"; done
finish
