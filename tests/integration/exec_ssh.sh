# exec_ssh.sh: executor: {kind: ssh} against a real sshd that this test
# starts on 127.0.0.1 (a free port, host and user keys made here). A
# two-variant fakeserver experiment run through ssh into a separate remote
# work folder gives the same rows (keys included) as the same file run
# locally, with every log back in the local run folder; the builtin client's
# per-request records come back too; a remote model is fingerprinted whole
# (cached in the work folder) and a finished or partly finished folder
# resumes to what is missing (W3-H1, W3-S1); killing the ssh master mid-point
# leaves no fakeserver (nor wrapper, nor ssh) running; a missing remote
# model, a missing remote program and an unreachable host are exit 3 before
# any server starts.
. tests/lib.sh
cd "$T_TMP" || exit 1
mkdir tmp
export TMPDIR="$T_TMP/tmp" # where sweep makes its ssh control folder

# on any exit, a failed check included: nothing of this test may outlive it
# (the remote side is this machine, so its processes are findable here)
ssh_cleanup() {
    for f in /proc/[0-9]*/cmdline; do
        pid=${f#/proc/} pid=${pid%/cmdline}
        [ "$pid" = "$$" ] && continue
        line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
        case "$line" in *"$T_TMP/"*) kill -KILL "$pid" 2>/dev/null ;; esac
    done
    t_cleanup
}
trap ssh_cleanup EXIT

SSHD=/usr/sbin/sshd # sshd re-executes itself, so it wants an absolute path
if [ ! -x "$SSHD" ] || ! command -v ssh >/dev/null 2>&1 || ! command -v ssh-keygen >/dev/null 2>&1; then
    echo "skipped: sshd or ssh is not installed (scripts/deps.sh installs openssh-server and openssh-client)"
    finish
    exit
fi
# sshd checks for its privilege separation folder even in this test setup
[ -d /run/sshd ] || mkdir -p /run/sshd 2>/dev/null
if [ ! -d /run/sshd ]; then
    echo "skipped: /run/sshd (sshd's privilege separation folder) is missing and cannot be made"
    finish
    exit
fi

# ---- an sshd of our own ----
mkdir keys remote
ssh-keygen -q -t ed25519 -N '' -C sweep-test-host -f keys/host
ssh-keygen -q -t ed25519 -N '' -C sweep-test-user -f keys/user
cp keys/user.pub keys/authorized_keys
PORT=$(free_port)
USER_AT="$(id -un)@127.0.0.1"
cat >sshd_config <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $T_TMP/keys/host
PidFile $T_TMP/sshd.pid
AuthorizedKeysFile $T_TMP/keys/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
LogLevel ERROR
EOF
"$SSHD" -D -e -f "$T_TMP/sshd_config" 2>sshd.log &
track_pid $!
# our client side: only this known_hosts, no user or system configuration
echo "[127.0.0.1]:$PORT $(cat keys/host.pub)" >known_hosts
cat >ssh_config <<EOF
UserKnownHostsFile $T_TMP/known_hosts
GlobalKnownHostsFile /dev/null
StrictHostKeyChecking yes
EOF
if ! wait_up sshd 30 sshd.log ssh -F ssh_config -i keys/user -o BatchMode=yes -o ConnectTimeout=4 \
    -p "$PORT" "$USER_AT" true; then
    finish
    exit
fi
ok "the test's sshd accepts our key"

EXECUTOR="executor:
  kind: ssh
  host: \"$USER_AT\"
  port: $PORT
  identity: \"$T_TMP/keys/user\"
  workdir: \"$T_TMP/remote\"
  sweep: \"$SWEEP\"
  options: [-F, \"$T_TMP/ssh_config\"]"
VARIANTS="variants:
  - {name: a}
  - {name: b, server: {flags: {step-a-ms: 6}}}"

# ---- the same two-variant experiment, here and over ssh ----
make_experiment fakeserver local.yaml NAME=ssh PIDFILE="$T_TMP/pid.\${variant}" STEP_A=3 PREFILL=1 \
    OUTPUT_LEN=8 GRID='["1:2", "2:4"]' EXTRA="$VARIANTS"
make_experiment fakeserver ssh.yaml NAME=ssh PIDFILE="$T_TMP/pid.\${variant}" STEP_A=3 PREFILL=1 \
    OUTPUT_LEN=8 GRID='["1:2", "2:4"]' EXTRA="$VARIANTS
$EXECUTOR"
"$SWEEP" check ssh.yaml >check.txt 2>&1
check_eq "sweep check accepts the ssh executor" "$?" 0
check "sweep check names the host" grep -q "ssh to $USER_AT port $PORT" check.txt

"$SWEEP" run local.yaml --out lrun >lout.txt 2>lerr.txt
check_eq "local run: exit 0" "$?" 0
rm -f pid.a pid.b
"$SWEEP" run ssh.yaml --out srun >sout.txt 2>serr.txt
rc=$?
check_eq "ssh run: exit 0" "$rc" 0
[ "$rc" = 0 ] || cat serr.txt
check_eq "ssh run: all rows ok" "$(col srun status | tr '\n' ' ')" "ok ok ok ok "
for c in variant concurrency prompts key log; do
    check_eq "ssh run: column $c as in the local run" "$(col srun $c | tr '\n' ' ')" \
        "$(col lrun $c | tr '\n' ' ')"
done
check "ssh run: the servers ran (their pid files, written remotely)" test -s pid.a -a -s pid.b
check "ssh run: server logs came back while it ran" grep -q "starting server for variant 'b'" srun/b/server.log
check "ssh run: the server's own output is in the local server.log" \
    sh -c "test \$(grep -vc '^==== sweep' srun/a/server.log) -gt 0"
check "ssh run: client logs came back (metrics were read from them)" test -s srun/a/c2-n4.log
check "ssh run: the server's /metrics scraped through the forward, as locally" \
    test -s lrun/a/c1-n2.metrics-after.txt -a -s srun/a/c1-n2.metrics-after.txt
check "ssh run: no 'no server metrics' note" sh -c "! grep -q 'no server metrics' serr.txt"
check "ssh run: variant b's server got its own flags" grep -q "starting server for variant 'b'.*--step-a-ms 6" srun/b/server.log
check_eq "ssh run: no log was left in the remote work folder" "$(find remote -name '*.log' | wc -l)" 0
check "ssh run: manifest records the executor" grep -q '"kind": "ssh"' srun/manifest.json
check_eq "ssh run: no fakeserver, wrapper or ssh left" "$(procs_with "$T_TMP/pid.")" 0
check_eq "ssh run: no ssh master left" "$(procs_with "$T_TMP/ssh_config")" 0
check_eq "ssh run: the control socket folder is gone" "$(ls tmp | wc -l)" 0

"$SWEEP" check srun/experiment.yaml >/dev/null 2>&1
check_eq "ssh run: experiment.yaml (executor included) reads back" "$?" 0
check "ssh run: experiment.yaml keeps the executor" grep -q "kind: ssh" srun/experiment.yaml

# resuming the complete run starts nothing
rm -f pid.a pid.b
"$SWEEP" run ssh.yaml --resume srun >sout.txt 2>serr.txt
check_eq "ssh resume of a complete run: exit 0" "$?" 0
check "ssh resume of a complete run: no server started" test ! -e pid.a -a ! -e pid.b

# ---- the builtin client: its records come back from the remote run folder ----
cat >b.yaml <<YAML
name: sshb
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 2, step-b-ms: 1, prefill-ms: 1}
bench: {input_len: 8, output_len: 8, warmup: 0, grid: ["1:3"]}
$EXECUTOR
YAML
"$SWEEP" run b.yaml --out brun >bout.txt 2>berr.txt
rc=$?
check_eq "builtin client over ssh: exit 0" "$rc" 0
[ "$rc" = 0 ] || cat berr.txt
check_eq "builtin client over ssh: its 3 request records came back" "$(wc -l <brun/default/c1-n3.jsonl 2>/dev/null)" 3

# ---- the builtin client's scrape after its warmup, taken remotely, comes back ----
# (docs/benchmarks.md section 8): 3 requests x 8 tokens, the 2 warm-up
# requests' 16 left out of the deltas; the local before file is the client's
sed -e 's/^name: sshb$/name: sshw/' -e 's/warmup: 0/warmup: 2/' b.yaml >w.yaml
"$SWEEP" run w.yaml --out wrun >wout.txt 2>werr.txt
rc=$?
check_eq "builtin client with warmup over ssh: exit 0" "$rc" 0
[ "$rc" = 0 ] || cat werr.txt
check_eq "builtin client with warmup over ssh: 3 x 8 tokens, the warmup left out" \
    "$(col wrun server_decode_tokens)" 24
check_eq "builtin client with warmup over ssh: the before scrape came back from the client" \
    "$(metric_in wrun/default/c1-n3.metrics-before.txt fp4serve_generation_tokens_total | cut -d. -f1)" 16
check "builtin client with warmup over ssh: its log says it saved the scrape" \
    grep -q '^#metrics: server metrics saved after the 2 warmup requests: sweep-runs/sshw/' wrun/default/c1-n3.log
check "builtin client with warmup over ssh: no copy warning" sh -c "! grep -q 'cannot copy' werr.txt"

# ---- the bundled engine: executor.engine and a model relative to the work folder ----
mkdir -p remote/models
"$FP4SERVE" synth --preset tiny --seed 1 -o remote/models/tiny.gguf >/dev/null 2>&1
cat >e.yaml <<YAML
name: sshe
server:
  engine: bundled
  model: models/tiny.gguf
  flags: {device: cpu, threads: 1, ctx: 256}
  stop: {grace_s: 5}
bench: {input_len: 8, output_len: 4, warmup: 0, grid: ["1:2"]}
$EXECUTOR
  engine: "$FP4SERVE"
YAML
"$SWEEP" run e.yaml --out erun >eout.txt 2>eerr.txt
rc=$?
check_eq "bundled engine over ssh: exit 0" "$rc" 0
[ "$rc" = 0 ] || tail -n 20 eerr.txt erun/default/server.log
check_eq "bundled engine over ssh: the row is ok" "$(col erun status)" ok
check "bundled engine over ssh: fp4serve's own log came back" grep -q "fp4serve\|listening\|model" erun/default/server.log
# the remote model's fingerprint is in the keys: the same as a local run
# of the same file, and a changed remote model is refused by --resume
sed '/^executor:/,$d' e.yaml >el.yaml
(cd remote && "$SWEEP" run ../el.yaml --out ../elrun >../elout.txt 2>../elerr.txt)
check_eq "bundled engine here: exit 0" "$?" 0
check_eq "bundled engine: the same key over ssh as here (remote model fingerprinted)" \
    "$(col erun key)" "$(col elrun key)"
# W3-H1: the fingerprint is the remote file's whole sha256, cached in the
# remote work folder; W3-S1: a finished ssh folder resumes to nothing, a
# partly finished one runs only what it lacks
sha=$(sha256sum <remote/models/tiny.gguf | cut -c1-64)
check "bundled engine over ssh: the manifest has the remote model's whole-file sha256" \
    grep -q "\"sha256\": \"$sha\"" erun/manifest.json
check "bundled engine over ssh: cached in the remote work folder" \
    grep -q "^$sha .* models/tiny.gguf\$" remote/.sweep-cache/model-sha256
# the cached entry is what a later run uses (a forged digest shows), while
# the file's size, mtime, inode... hold
cp remote/.sweep-cache/model-sha256 cache.good
sed -i "s/^$sha /$(echo "$sha" | tr 0-9a-f f-f0-9a-e | cut -c1-64) /" remote/.sweep-cache/model-sha256
"$SWEEP" run e.yaml --resume erun >eout1.txt 2>eerr1.txt
check_eq "bundled engine over ssh: a forged cache entry is used (resume refused)" "$?" 2
cp cache.good remote/.sweep-cache/model-sha256
"$SWEEP" run e.yaml --resume erun >eout1.txt 2>eerr1.txt
check_eq "bundled engine over ssh: resume of the finished folder: exit 0" "$?" 0
check "bundled engine over ssh: resume of the finished folder runs nothing" \
    grep -q "1 of 1 points already ok" eerr1.txt
sed 's/grid: \["1:2"\]/grid: ["1:2", "2:2"]/' e.yaml >e2.yaml
"$SWEEP" run e2.yaml --resume erun >eout1.txt 2>eerr1.txt
rc=$?
check_eq "bundled engine over ssh: resume with a point added: exit 0" "$rc" 0
[ "$rc" = 0 ] || tail -n 5 eerr1.txt
check "bundled engine over ssh: only the added point ran" \
    sh -c "grep -q '1 of 2 points already ok' eerr1.txt && test ! -e erun/default/c1-n2.log.1"
check_eq "bundled engine over ssh: two ok rows" "$(col erun status | tr '\n' ' ')" "ok ok "
"$FP4SERVE" synth --preset tiny --seed 2 -o remote/models/tiny.gguf >/dev/null 2>&1
"$SWEEP" run e.yaml --resume erun >eout2.txt 2>eerr2.txt
check_eq "remote model changed: --resume refused (exit 2)" "$?" 2
check "remote model changed: the key differs, naming the model" grep -q "key.*models/tiny.gguf" eerr2.txt

# ---- killing the ssh master mid-point: nothing is left on the remote side ----
make_experiment fakeserver k.yaml NAME=sshkill PIDFILE="$T_TMP/pid.k" STEP_A=20 PREFILL=1 \
    OUTPUT_LEN=64 GRID='["1:400"]' SERVER_LINES="  env: {SWEEP_TEST_TOKEN: \"tok-s3cr3t 'x'\"}" \
    EXTRA="$EXECUTOR"
"$SWEEP" run k.yaml --out krun >kout.txt 2>kerr.txt &
sweep_pid=$!
track_pid $sweep_pid
wait_file pid.k 30
wait_file krun/default/c1-n400.log 30
sleep 0.5
fpid=$(cat pid.k 2>/dev/null)
master=""
for f in /proc/[0-9]*/cmdline; do
    line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
    case "$line" in *ControlMaster=yes*"$T_TMP/ssh_config"*) master=${f#/proc/} master=${master%/cmdline} ;; esac
done
check "the fakeserver runs mid-point (pid $fpid)" kill -0 "$fpid"
check "server.env reached the remote server" grep -qa "SWEEP_TEST_TOKEN=tok-s3cr3t 'x'" "/proc/$fpid/environ"
check_eq "server.env values are in no command line (ps)" "$(procs_with tok-s3cr3t)" 0
check "the ssh master was found (pid $master)" test -n "$master"
kill -KILL "$master" 2>/dev/null
gone=no
for _ in $(seq 150); do
    if ! kill -0 "$fpid" 2>/dev/null; then
        gone=yes
        break
    fi
    sleep 0.1
done
check_eq "master killed: the remote fakeserver is gone" "$gone" yes
wait $sweep_pid
check_eq "master killed: the point failed (exit 1)" "$?" 1
check_eq "master killed: its row is failed" "$(col krun status)" failed
check_eq "master killed: no fakeserver, wrapper or ssh left" "$(procs_with "$T_TMP/pid.")" 0

# ---- a link that dies silently (the master frozen: no end of file, no
# bytes): the heartbeat timeout stops the remote server all the same ----
rm -f pid.k
"$SWEEP" run k.yaml --out frozen >zout.txt 2>zerr.txt &
sweep_pid=$!
track_pid $sweep_pid
wait_file pid.k 30
wait_file frozen/default/c1-n400.log 30
sleep 0.5
fpid=$(cat pid.k 2>/dev/null)
master=""
for f in /proc/[0-9]*/cmdline; do
    line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
    case "$line" in *ControlMaster=yes*"$T_TMP/ssh_config"*) master=${f#/proc/} master=${master%/cmdline} ;; esac
done
kill -STOP "$master"
gone=no
for _ in $(seq 300); do
    if ! kill -0 "$fpid" 2>/dev/null; then
        gone=yes
        break
    fi
    sleep 0.1
done
check_eq "frozen link: the remote fakeserver is gone within the heartbeat timeout" "$gone" yes
kill -KILL "$master"
wait $sweep_pid
check_eq "frozen link: the point failed (exit 1)" "$?" 1
check_eq "frozen link: no fakeserver, wrapper or ssh left" "$(procs_with "$T_TMP/pid.")" 0

# ---- Ctrl-C mid-point: exit 130, the remote server and client stopped ----
rm -f pid.k
"$SWEEP" run k.yaml --out irun >iout.txt 2>ierr.txt &
sweep_pid=$!
track_pid $sweep_pid
wait_file pid.k 30
wait_file irun/default/c1-n400.log 30
sleep 0.5
fpid=$(cat pid.k 2>/dev/null)
kill -INT $sweep_pid
wait $sweep_pid
check_eq "Ctrl-C: exit 130" "$?" 130
check_eq "Ctrl-C: the point is interrupted" "$(col irun status)" interrupted
check "Ctrl-C: the remote fakeserver is gone once sweep has exited" sh -c "! kill -0 $fpid 2>/dev/null"
check_eq "Ctrl-C: no fakeserver, wrapper or ssh left" "$(procs_with "$T_TMP/pid.")" 0
check_eq "Ctrl-C: no ssh master left" "$(procs_with "$T_TMP/ssh_config")" 0

# ---- preflight on the remote host: exit 3 before any server starts ----
rm -f pid.a pid.b
make_experiment fakeserver m.yaml NAME=sshmodel PIDFILE="$T_TMP/pid.\${variant}" \
    SERVER_LINES="  model: models/missing.gguf" EXTRA="$EXECUTOR"
"$SWEEP" run m.yaml --out mrun >mout.txt 2>merr.txt
check_eq "missing remote model: exit 3" "$?" 3
check "missing remote model: names host and path" \
    grep -q "on host '$USER_AT': model path 'models/missing.gguf': not found" merr.txt
check "missing remote model: no server started, no run folder" test ! -e pid.default -a ! -e mrun
mkdir -p remote/models
: >remote/models/present.gguf
# W3-N19: the bundled engine with a folder as its model, refused by the
# remote preflight (the folder exists there only), exit 3, nothing started
mkdir -p remote/models/folder.gguf
printf 'name: sshdir\nserver: {model: models/folder.gguf}\nbench: {grid: ["1:1"]}\n%s\n' \
    "$EXECUTOR" >d.yaml
"$SWEEP" run d.yaml --out drun >dout.txt 2>derr.txt
check_eq "bundled engine, remote model is a folder: exit 3" "$?" 3
check "bundled engine, remote model is a folder: says so" grep -q \
    "on host '$USER_AT': server.model 'models/folder.gguf' is a folder; the bundled engine (fp4serve) loads a GGUF file" derr.txt
check "bundled engine, remote model is a folder: no run folder" test ! -e drun
make_experiment fakeserver p.yaml NAME=sshprog PIDFILE="$T_TMP/pid.\${variant}" \
    WRAP='"/nonexistent/wrapper", ' EXTRA="$EXECUTOR"
"$SWEEP" run p.yaml --out prun >pout.txt 2>perr.txt
check_eq "missing remote program: exit 3" "$?" 3
check "missing remote program: names host and program" \
    grep -q "on host '$USER_AT': program '/nonexistent/wrapper'" perr.txt
# a fixed port that a server on the host answers on already
other=$(free_port)
"$FAKESERVER" --port "$other" --pid-file "$T_TMP/other.pid" >other.log 2>&1 &
track_pid $!
wait_http "http://127.0.0.1:$other/health" 10
make_experiment fakeserver f.yaml NAME=sshport PIDFILE="$T_TMP/pid.\${variant}" \
    SERVER_LINES="  port: $other" EXTRA="$EXECUTOR"
"$SWEEP" run f.yaml --out frun >fout.txt 2>ferr.txt
check_eq "fixed port taken on the host: exit 3" "$?" 3
check "fixed port taken on the host: says so, naming the host" \
    grep -q "port $other in use on 127.0.0.1 on host '$USER_AT' (server.port is fixed)" ferr.txt
check "fixed port taken on the host: our server never started" test ! -e pid.default
sed "s/port: $PORT/port: $(free_port)/" ssh.yaml >down.yaml
"$SWEEP" run down.yaml --out drun >dout.txt 2>derr.txt
check_eq "unreachable host: exit 3" "$?" 3
check "unreachable host: says it cannot connect" grep -q "cannot connect" derr.txt
check_eq "no process left" "$(procs_with "$T_TMP/pid.")" 0
finish
