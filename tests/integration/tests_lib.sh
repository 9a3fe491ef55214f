# tests_lib: the test machinery itself. tests/lib.sh's `need` fails a test
# that needs a program scripts/deps.list does not list, and skips (naming
# the package) when a listed one is missing; `ref_py` turns a reference
# that dies by a signal into one failure naming it; `wait_up` gives up on a
# daemon at its deadline, naming it with its log; tests/run.sh counts skip
# lines and ends with "N passed, N failed, N skipped".
. tests/lib.sh

BASH_BIN=$(command -v bash)
# run_lib SCRIPT: run SCRIPT (shell text) after sourcing lib.sh, in a child.
run_lib() {
    (cd "$TOPDIR" && PATH="${LIBPATH:-$PATH}" "$BASH_BIN" -c ". tests/lib.sh; $1") >"$T_TMP/out" 2>&1
}

run_lib 'need jq; ok "went on"; finish'
check_eq "need of a listed, installed program: goes on" "$(tail -n 1 "$T_TMP/out")" "1 passed, 0 failed"

run_lib 'need no-such-tool-xyz; ok "went on"; finish'
check_eq "need of an unlisted program: exit 1" "$?" "1"
check "need of an unlisted program: says the list lacks it" \
    grep -qx "FAIL: this test needs 'no-such-tool-xyz', which scripts/deps.list does not list" "$T_TMP/out"
check "need of an unlisted program: stops there" sh -c "! grep -q 'went on' '$T_TMP/out'"

# a PATH that has the tools lib.sh itself uses, but not promtool
mkdir -p "$T_TMP/bin"
for t in awk mktemp rm cat dirname basename sed grep tail head; do
    ln -s "$(command -v "$t")" "$T_TMP/bin/$t"
done
LIBPATH="$T_TMP/bin" run_lib 'need promtool; ok "went on"; finish'
check_eq "need of a listed program that is missing: exit 0" "$?" "0"
check "need of a listed program that is missing: one skip line naming the package" \
    grep -qx "skip: promtool is not installed (scripts/deps.sh installs prometheus)" "$T_TMP/out"
check "need of a listed program that is missing: stops there" sh -c "! grep -q 'went on' '$T_TMP/out'"

# a reference that dies by a signal
cat >"$T_TMP/crash.sh" <<'EOF'
ref_py "$T_TMP/ref.out" "$T_TMP/ref.log" <<'PY'
import os, signal, sys
print("about to die", file=sys.stderr)
sys.stderr.flush()
os.kill(os.getpid(), signal.SIGILL)
PY
echo "status $?"
check_eq "the reference's answer" "$(cat "$T_TMP/ref.out")" "512 1 2"
finish
EOF
run_lib ". '$T_TMP/crash.sh'"
check "a crashed reference: named with its signal" \
    grep -q "^FAIL: llama.cpp reference crashed: SIGILL" "$T_TMP/out"
check "a crashed reference: its log's tail shown" grep -q "^    about to die" "$T_TMP/out"
check "a crashed reference: the status is the signal's" grep -qx "status 132" "$T_TMP/out"
check "a crashed reference: the next check shows the crash, not a parse error" \
    grep -q "got 'reference crashed: SIGILL', want '512 1 2'" "$T_TMP/out"

# a daemon that never comes up: a failure within the deadline, naming it and its log
printf 'starting\nbind: address in use\n' >"$T_TMP/d.log"
t0=$(date +%s)
run_lib "wait_up food 2 '$T_TMP/d.log $T_TMP/none.log' false; echo \"status \$?\"; finish"
t1=$(date +%s)
check "wait_up: gives up at its deadline (2 s; took $((t1 - t0)) s)" [ $((t1 - t0)) -le 5 ]
check "wait_up: one failure naming the daemon" grep -q "^FAIL: food did not come up within 2s" "$T_TMP/out"
check "wait_up: the log's last lines" grep -q "^    | bind: address in use" "$T_TMP/out"
check "wait_up: a log never written is said" grep -q "none.log: not written" "$T_TMP/out"
check "wait_up: status 1" grep -qx "status 1" "$T_TMP/out"
run_lib "wait_up food 999 '' true; echo \"status \$?\"; finish"
check "wait_up: a daemon that is up: status 0" grep -qx "status 0" "$T_TMP/out"

# tests/run.sh: skip lines counted and shown, the last line with skips
mkdir -p "$T_TMP/tree/tests/integration" "$T_TMP/tree/build"
cp "$TOPDIR/tests/run.sh" "$T_TMP/tree/tests/"
printf 'echo "skip: no widget here"\necho "ok: a"\necho "1 passed, 0 failed"\n' \
    >"$T_TMP/tree/tests/integration/a.sh"
printf 'echo "tool: skipped: no gadget"\necho "skipped: nothing"\necho "2 passed, 0 failed"\n' \
    >"$T_TMP/tree/tests/integration/b.sh"
(cd "$T_TMP/tree" && BUILD=build TESTS= sh tests/run.sh) >"$T_TMP/run" 2>&1
check_eq "run.sh: exit 0 with skips" "$?" "0"
check_eq "run.sh: last line counts skips" "$(tail -n 1 "$T_TMP/run")" "3 passed, 0 failed, 3 skipped"
check "run.sh: a skip shown under its test with the reason" \
    grep -Eq '^skip  integration/a +no widget here$' "$T_TMP/run"
check "run.sh: a program's 'skipped:' line counted too" \
    grep -Eq '^skip  integration/b +no gadget$' "$T_TMP/run"
finish
