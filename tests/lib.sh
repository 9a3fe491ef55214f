# lib.sh: the one shell library of the tests. Every tests/integration/*.sh
# (and tests/bench/bench_loadgen.sh) starts with `. tests/lib.sh`, run from
# the repository root. Sections: counting checks; programs and scratch
# space; processes and waiting; `sweep run` results and experiment fixtures;
# fp4serve under test; fakeserver under `sweep bench`.

# ---- counting: check ... finish prints the line tests/run.sh adds up ----
T_PASS=0
T_FAIL=0

# ok DESC: count a pass.
ok() { T_PASS=$((T_PASS + 1)); echo "ok: $*"; }
# fail DESC: count a failure.
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL: $*"; }
# check DESC CMD...: a pass when CMD succeeds, else a failure.
check() {
    desc=$1
    shift
    if "$@"; then ok "$desc"; else fail "$desc"; fi
}
# check_eq DESC GOT WANT: a pass when GOT is WANT.
check_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi
}
# within GOT WANT TOL [rel]: |GOT - WANT| <= TOL (absolute), or TOL * WANT with rel.
within() {
    awk -v g="$1" -v w="$2" -v t="$3" -v r="${4:-abs}" 'BEGIN {
        d = g - w; if (d < 0) d = -d; lim = (r == "rel") ? t * w : t; exit !(g != "" && d <= lim) }'
}
# skip REASON: say on one line that a check (or the rest of the test) did
# not run and why; tests/run.sh counts these lines and prints them.
skip() { echo "skip: $*"; }
# need NAME...: programs this test cannot do without. Each must be listed in
# scripts/deps.list (what scripts/deps.sh installs): an unlisted name fails
# the test, so the list cannot fall behind the tests; a listed one that is
# not installed ends the test here as skipped, naming its package.
need() {
    for n in "$@"; do
        row=$(awk -v n="$n" '$1 !~ /^#/ && $2 == n { print $1, $3; exit }' "$TOPDIR/scripts/deps.list")
        if [ -z "$row" ]; then
            fail "this test needs '$n', which scripts/deps.list does not list"
            finish
            exit 1
        fi
        case ${row%% *} in
        sbin) [ -x "/usr/sbin/$n" ] ;;
        *) command -v "$n" >/dev/null 2>&1 ;;
        esac && continue
        skip "$n is not installed (scripts/deps.sh installs ${row#* })"
        finish
        exit 0
    done
}
# ref_py OUT LOG ARGS...: run the Python script on stdin with ARGS, stdout to
# OUT and stderr to LOG: a cross-check against a reference implementation
# (llama.cpp through llama-cpp-python, gguf-py). A reference killed by a
# signal is one failure that names it ("llama.cpp reference crashed:
# SIGILL"), with the log's tail, and OUT then holds that line, so the checks
# that read OUT show it instead of failing to parse an empty value. Returns
# the script's status.
ref_py() {
    _out=$1 _log=$2
    shift 2
    python3 - "$@" >"$_out" 2>"$_log"
    _rc=$?
    if [ "$_rc" -gt 128 ]; then
        _sig=SIG$(kill -l $((_rc - 128)) 2>/dev/null || echo $((_rc - 128)))
        echo "reference crashed: $_sig" >"$_out"
        fail "llama.cpp reference crashed: $_sig (last lines of $_log below)"
        tail -n 5 "$_log" | sed 's/^/    /'
    fi
    return "$_rc"
}
# finish: print "N passed, N failed"; the status is 0 when nothing failed.
finish() {
    echo "$T_PASS passed, $T_FAIL failed"
    [ "$T_FAIL" -eq 0 ]
}

# ---- programs and scratch space ----
# abs_path PATH: PATH made absolute against the current folder (it need not exist).
abs_path() { case "$1" in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
# Absolute, so tests may cd (the run_* tests run sweep inside $T_TMP).
: "${BUILD:=build}" "${TOPDIR:=$(pwd)}"
BUILD=$(abs_path "$BUILD")
: "${SWEEP:=$BUILD/bin/sweep}" "${FP4SERVE:=$BUILD/bin/fp4serve}" "${FAKESERVER:=$BUILD/bin/fakeserver}"
: "${CSVGET:=$BUILD/bin/csvget}" "${MINICLIENT:=$BUILD/bin/miniclient}"
SWEEP=$(abs_path "$SWEEP") FP4SERVE=$(abs_path "$FP4SERVE") FAKESERVER=$(abs_path "$FAKESERVER")
CSVGET=$(abs_path "$CSVGET") MINICLIENT=$(abs_path "$MINICLIENT") TOPDIR=$(abs_path "$TOPDIR")
# Python: the test venv of `make pydeps` (tokenizers, transformers, gguf, llama-cpp-python;
# it also sees the system's packages) comes first when it exists.
[ -x "$BUILD/venv/bin/python3" ] && PATH="$BUILD/venv/bin:$PATH" && export PATH
# T_TMP: this test's scratch folder, removed at exit.
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweep-test.XXXXXX")
# each test's own cache of model fingerprints (runner/config/modelfp.h)
export SWEEP_CACHE_DIR="$T_TMP/cache"
T_PIDS=""

# t_cleanup: at exit, kill what track_pid recorded and remove $T_TMP.
t_cleanup() {
    for p in $T_PIDS; do { kill -KILL "$p" && wait "$p"; } 2>/dev/null; done
    rm -rf "$T_TMP"
}
trap t_cleanup EXIT

# ---- processes and waiting ----
# track_pid PID: kill PID at exit if it still runs.
track_pid() { T_PIDS="$T_PIDS $1"; }
# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() { "$BUILD/bin/freeport"; }
# wait_http URL [SECONDS]: wait until URL answers 200 (default 10 s).
wait_http() {
    n=0
    while [ $n -lt $(( ${2:-10} * 20 )) ]; do
        curl -fs -o /dev/null "$1" && return 0
        sleep 0.05
        n=$((n + 1))
    done
    return 1
}
# wait_up NAME SECONDS "LOG..." CMD...: wait for a daemon the test started
# until CMD succeeds (each try limited to 5 s, so a client that hangs on a
# dead daemon cannot stretch the wait), at most SECONDS (60 at most: a
# daemon that does not come up fails the test within a minute). Then one
# failure naming NAME, with the last lines of each LOG, and status 1.
wait_up() {
    _name=$1 _secs=$2 _logs=$3
    shift 3
    [ "$_secs" -gt 60 ] && _secs=60
    _end=$(($(date +%s) + _secs))
    while :; do
        timeout -k 1 5 "$@" >/dev/null 2>&1 && return 0
        [ "$(date +%s)" -ge "$_end" ] && break
        sleep 0.2
    done
    fail "$_name did not come up within ${_secs}s ($*: no success)"
    for _l in $_logs; do
        [ -f "$_l" ] || { echo "    ($_l: not written)"; continue; }
        echo "    last lines of $_l:"
        tail -n 8 "$_l" | sed 's/^/    | /'
    done
    return 1
}
# cgroup_dir_writable: set CGMNT to the cgroup2 mount and CGDIR to this
# shell's cgroup2 folder, and succeed
# when a cgroup can be made below it (the tests of sweep's cgroup
# containment skip, saying so, otherwise).
cgroup_dir_writable() {
    CGMNT=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
    _own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    CGDIR="$CGMNT${_own%/}"
    [ -n "$CGMNT" ] && mkdir "$CGDIR/sweep-probe-$$" 2>/dev/null && rmdir "$CGDIR/sweep-probe-$$"
}
# wait_file PATH [SECONDS]: wait until PATH exists (default 30 s).
wait_file() {
    n=0
    while [ ! -e "$1" ] && [ $n -lt $(( ${2:-30} * 20 )) ]; do
        sleep 0.05
        n=$((n + 1))
    done
    [ -e "$1" ]
}
# procs_with MARKER: how many live processes have MARKER (a path under
# $T_TMP, so only this test's count) in their command line; zombies have none.
procs_with() {
    n=0
    for f in /proc/[0-9]*/cmdline; do
        [ "$f" = "/proc/$$/cmdline" ] && continue
        line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
        case "$line" in *"$1"*) n=$((n + 1)) ;; esac
    done
    echo "$n"
}

# ---- `sweep run`: results and experiment fixtures ----
# col RUN_DIR COLUMN [ROW]: a points.csv cell (or the whole column).
col() { "$CSVGET" "$1/points.csv" "$2" ${3:+"$3"}; }
# rows RUN_DIR: number of rows in points.csv.
rows() { "$CSVGET" "$1/points.csv"; }
# miniclient_cmd: a bench.command list for the scripted client (fakeserver only).
miniclient_cmd() {
    echo "[\"$MINICLIENT\", --url, \"\${url}\", -c, \"\${concurrency}\", -n, \"\${prompts}\", --input-len, \"\${input_len}\", --output-len, \"\${output_len}\"]"
}
# make_experiment FIXTURE OUT [KEY=VALUE...]: write OUT from
# tests/fixtures/experiments/FIXTURE.yaml, its "#" lines dropped and each
# ${KEY} or ${KEY:-default} (upper case; sweep's own ${port}... are lower
# case) replaced by VALUE, literally. FAKESERVER, MINICLIENT and T_TMP are
# given; a line that was only a placeholder and became empty is dropped; a
# placeholder without a value or default is a failure.
make_experiment() {
    local fixture="$TOPDIR/tests/fixtures/experiments/$1.yaml" out=$2 kv
    shift 2
    for kv in "$@"; do
        case "${kv%%=*}" in "" | *[!A-Z0-9_]*) fail "make_experiment: bad key in '$kv'"; return 1 ;; esac
    done
    (
        export MX_FAKESERVER="$FAKESERVER" MX_MINICLIENT="$MINICLIENT" MX_T_TMP="$T_TMP"
        for kv in "$@"; do export "MX_${kv%%=*}=${kv#*=}"; done
        exec awk '
        /^#/ { next }
        {
            rest = $0; line = ""; only = ($0 ~ /^[ \t]*\$\{[A-Z][A-Z0-9_]*(:-[^}]*)?\}[ \t]*$/)
            while (match(rest, /\$\{[A-Z][A-Z0-9_]*(:-[^}]*)?\}/)) {
                ph = substr(rest, RSTART + 2, RLENGTH - 3)
                key = ph; sub(/:-.*/, "", key)
                if (("MX_" key) in ENVIRON) val = ENVIRON["MX_" key]
                else if (index(ph, ":-")) val = substr(ph, index(ph, ":-") + 2)
                else { print FILENAME ": no value for ${" key "}" > "/dev/stderr"; bad = 1; val = "" }
                line = line substr(rest, 1, RSTART - 1) val
                rest = substr(rest, RSTART + RLENGTH)
            }
            line = line rest
            if (!(only && line ~ /^[ \t]*$/)) print line
        }
        END { exit bad }' "$fixture"
    ) >"$out" || { fail "make_experiment: $out from $fixture"; return 1; }
}

# ---- fp4serve under test: a server on a free loopback port, read with curl and jq ----
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf

# tiny_model: path of a seeded tiny synthetic model (made once per test).
tiny_model() {
    [ -f "$T_TMP/tiny.gguf" ] || "$FP4SERVE" synth --preset tiny --seed 1 -o "$T_TMP/tiny.gguf" >/dev/null 2>&1
    echo "$T_TMP/tiny.gguf"
}
# start_serve MODEL [FLAGS...]: start `fp4serve serve`; sets SRV_PID, SRV_PORT,
# SRV_URL and SRV_LOG. Returns 1 (with the log's tail) if it is not healthy in 60 s.
start_serve() {
    local model=$1
    shift
    SRV_PORT=$(free_port)
    SRV_LOG="$T_TMP/serve-$SRV_PORT.log"
    SRV_URL="http://127.0.0.1:$SRV_PORT"
    "$FP4SERVE" serve --model "$model" --port "$SRV_PORT" "$@" >"$SRV_LOG" 2>&1 &
    SRV_PID=$!
    track_pid "$SRV_PID"
    if ! wait_http "$SRV_URL/health" 60; then
        echo "server did not become healthy:"
        tail -n 20 "$SRV_LOG"
        return 1
    fi
}
# stop_serve: SIGTERM, then wait; prints nothing, returns the exit status.
stop_serve() {
    kill -TERM "$SRV_PID" 2>/dev/null
    wait "$SRV_PID"
}
# metric NAME: the value of a sample in the server's /metrics (NAME may include
# labels). The model_name label every fp4serve series carries may be left out
# of NAME: `metric fp4serve_steps_total` reads fp4serve_steps_total{model_name="m"}.
metric() {
    curl -s "$SRV_URL/metrics" | metric_in - "$1"
}
# metric_in FILE NAME: the same from a saved /metrics text (FILE - : stdin).
metric_in() {
    awk -v n="$2" '
        /^#/ { next }
        { k = $1; sub(/model_name="([^"\\]|\\.)*",?/, "", k); sub(/\{\}$/, "", k) }
        $1 == n || k == n { print $2; exit }' "$1"
}
# gen_text MODEL PROMPT N [FLAGS...]: the exact text `fp4serve generate` prints
# (everything before its "prompt ids:" line, without the newline it adds).
gen_text() {
    local model=$1 prompt=$2 n=$3 off
    shift 3
    "$FP4SERVE" generate --model "$model" --prompt "$prompt" -n "$n" "$@" >"$T_TMP/gen.out" 2>/dev/null
    off=$(grep -b '^prompt ids:' "$T_TMP/gen.out" | tail -n 1 | cut -d: -f1)
    head -c $((off - 1)) "$T_TMP/gen.out"
}
# post PATH BODY: POST a JSON body to the server, print the response body.
post() {
    curl -s -N -H 'Content-Type: application/json' --data-binary "$2" "$SRV_URL$1"
}
# stream_text: the concatenated text of an SSE stream on stdin
# (completions' "text" or chat's "delta.content").
stream_text() {
    sed -n 's/^data: //p' | grep -v '^\[DONE\]$' |
        jq -j '.choices[0] | (.text // .delta.content // empty)'
}

# ---- fakeserver under `sweep bench` ----
# start_fake ARGS...: a fakeserver on a free port; sets $port, $url and $fake_pid.
start_fake() {
    port=$(free_port)
    url="http://127.0.0.1:$port"
    "$FAKESERVER" --port "$port" "$@" 2>>"$T_TMP/fakeserver.log" &
    track_pid $!
    fake_pid=$!
    wait_http "$url/health" 10 || fail "fakeserver $* did not come up"
}
# stop_fake: stop the last fakeserver started.
stop_fake() {
    kill "$fake_pid" 2>/dev/null
    wait "$fake_pid" 2>/dev/null
}
# truth KEY: a number from the fakeserver's GET /stats.
truth() {
    curl -s "$url/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}
# bench ARGS...: sweep bench against $url with a hard limit; output in $T_TMP/out,
# exit status in $rc.
bench() {
    timeout -k 5 "${BENCH_LIMIT:-120}" "$SWEEP" bench --url "$url" "$@" >"$T_TMP/out" 2>"$T_TMP/err"
    rc=$?
}
# bench_value LABEL FILE: the value of a "{:<40} {:<10}" row of sweep bench's result block.
bench_value() {
    awk -v l="$1" 'index($0, l) == 1 { v = substr($0, 42); gsub(/ +$/, "", v); print v; exit }' "$2"
}
