# lib.sh: the shell side of the test harness, sourced by tests/integration/*.sh.
# check DESC CMD... counts a pass or a failure; finish prints the
# "N passed, N failed" line that tests/run.sh adds up. T_TMP is a scratch
# folder removed at exit; processes recorded with track_pid are killed then.
T_PASS=0
T_FAIL=0
T_PIDS=""
: "${BUILD:=build}"
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac # absolute, so tests may cd
: "${SWEEP:=$BUILD/bin/sweep}" "${FP4SERVE:=$BUILD/bin/fp4serve}"
: "${FAKESERVER:=$BUILD/bin/fakeserver}" "${TOPDIR:=$(pwd)}"
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweep-test.XXXXXX")

t_cleanup() {
    for p in $T_PIDS; do { kill -KILL "$p" && wait "$p"; } 2>/dev/null; done
    rm -rf "$T_TMP"
}
trap t_cleanup EXIT

ok() { T_PASS=$((T_PASS + 1)); echo "ok: $*"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL: $*"; }
check() {
    desc=$1
    shift
    if "$@"; then ok "$desc"; else fail "$desc"; fi
}
# check_eq DESC GOT WANT
check_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi
}
track_pid() { T_PIDS="$T_PIDS $1"; }
# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() { "$BUILD/bin/freeport"; }
# wait_http URL [SECONDS]: wait until URL answers 200.
wait_http() {
    n=0
    while [ $n -lt $(( ${2:-10} * 20 )) ]; do
        curl -fs -o /dev/null "$1" && return 0
        sleep 0.05
        n=$((n + 1))
    done
    return 1
}
finish() {
    echo "$T_PASS passed, $T_FAIL failed"
    [ "$T_FAIL" -eq 0 ]
}
