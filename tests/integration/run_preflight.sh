# run_preflight.sh: what `sweep run` refuses before it starts anything: a
# missing model path, a missing server binary, a fixed port already in use,
# a results folder that cannot be written (exit 3 each, no server spawned);
# bad usage (exit 2); and --dry-run, which prints the plan and starts nothing.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE [EXTRA_SERVER_LINES [KEY=VALUE...]]
    local f=$1 lines=${2:-}
    shift
    [ $# -gt 0 ] && shift
    make_experiment fakeserver "$f" NAME=preflight PIDFILE="$T_TMP/started.pid" SERVER_LINES="$lines" \
        OUTPUT_LEN=4 GRID='["1:1"]' "$@"
}

# missing model path
write_exp model.yaml "  model: $T_TMP/no-such-model.gguf"
"$SWEEP" run model.yaml --out run-model >out.txt 2>err.txt
check_eq "missing model: exit 3" "$?" 3
check "missing model: the message names the path" grep -q "$T_TMP/no-such-model.gguf" err.txt
check "missing model: no server was started" test ! -e started.pid
check "missing model: no results folder" test ! -e run-model

# an empty model file
: >empty.bin
write_exp empty.yaml "  model: $T_TMP/empty.bin"
"$SWEEP" run empty.yaml --out run-empty >out.txt 2>err.txt
check_eq "empty model file: exit 3" "$?" 3
check "empty model file: no server was started" test ! -e started.pid

# missing server binary
write_exp bin.yaml "" FAKESERVER="$T_TMP/no-such-server"
"$SWEEP" run bin.yaml --out run-bin >out.txt 2>err.txt
check_eq "missing binary: exit 3" "$?" 3
check "missing binary: the message names it" grep -q "no-such-server" err.txt
check "missing binary: no results folder" test ! -e run-bin

# fixed port already in use
port=$(free_port)
"$FAKESERVER" --port "$port" 2>/dev/null &
track_pid $!
wait_http "http://127.0.0.1:$port/health" 5 || fail "the squatter did not come up"
write_exp port.yaml "  port: $port"
start=$(date +%s%N)
"$SWEEP" run port.yaml --out run-port >out.txt 2>err.txt
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
check_eq "port in use: exit 3" "$rc" 3
check "port in use: says so" grep -q "port $port in use" err.txt
check "port in use: no server was started" test ! -e started.pid
check "port in use: refused in $ms ms (< 1000)" test "$ms" -lt 1000

# results folder not writable (a path under a regular file)
: >afile
write_exp out.yaml
"$SWEEP" run out.yaml --out afile/run >out.txt 2>err.txt
check_eq "results folder not writable: exit 3" "$?" 3
check "results folder not writable: says so" grep -q "results folder not writable" err.txt
check "results folder not writable: no server was started" test ! -e started.pid

# --dry-run prints the plan and starts nothing
"$SWEEP" run out.yaml --dry-run >out.txt 2>err.txt
check_eq "dry run: exit 0" "$?" 0
check "dry run: prints the server argv" grep -q -- "--pid-file" out.txt
check "dry run: no server was started" test ! -e started.pid
check "dry run: no results folder" test ! -e results

# usage errors
"$SWEEP" run >out.txt 2>err.txt
check_eq "no experiment: exit 2" "$?" 2
"$SWEEP" run out.yaml --resum x >out.txt 2>err.txt
check_eq "unknown flag: exit 2" "$?" 2
check "unknown flag: suggests --resume" grep -q -- "--resume" err.txt
"$SWEEP" run out.yaml --resume "$T_TMP/not-a-run" >out.txt 2>err.txt
check_eq "--resume of a folder that is not a run: exit 2" "$?" 2
"$SWEEP" run --help >out.txt 2>err.txt
check_eq "--help: exit 0" "$?" 0
check "--help lists --only" grep -q -- "--only VARIANT" out.txt
check_eq "no process left" "$(procs_with "$T_TMP/started.pid")" 0
finish
