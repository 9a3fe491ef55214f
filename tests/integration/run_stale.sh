# run_stale.sh: reliability R9. The next server starts only once the last
# server's processes are gone and off the GPU. A fake nvidia-smi (first in
# PATH) lists variant a's server pid with a GPU context for its first 50
# queries (about 12 s at one query per 250 ms), plus pid 1, which is not
# ours and never counts. So variant b's first point waits 10 s and fails
# with "stale server process PID <a's pid>", and its second point waits
# for the rest of those queries and runs. The variants have the same
# settings, so the same point keys: b still gets rows of its own.
# ($$$$ in the YAML is the shell's $$: sweep reads $$ as a literal $.)
. tests/lib.sh
cd "$T_TMP" || exit 1

mkdir bin
cat >bin/nvidia-smi <<SH
#!/bin/sh
case "\$*" in
*--query-compute-apps=pid*)
    echo x >>"$T_TMP/queries"
    if [ "\$(wc -l <"$T_TMP/queries")" -le 50 ]; then
        echo 1
        head -n 1 "$T_TMP/pids"
    fi ;;
esac
exit 0
SH
chmod +x bin/nvidia-smi

# sh records each server's pid in $T_TMP/pids, then becomes the fakeserver
make_experiment fakeserver stale.yaml NAME=stale PIDFILE="$T_TMP/server.pid" \
    WRAP="sh, -c, 'echo \$\$\$\$ >>\"\$0\"; exec \"\$@\"', \"$T_TMP/pids\", " \
    STEP_A=2 PREFILL=2 OUTPUT_LEN=8 GRID='["1:2", "2:4"]' EXTRA="metrics:
  preset: sglang
variants:
  - name: a
    bench: {grid: [\"1:2\"]}
  - name: b"

t0=$(date +%s)
PATH="$T_TMP/bin:$PATH" "$SWEEP" run stale.yaml --out run >out.txt 2>err.txt
rc=$?
t1=$(date +%s)
cat err.txt
pida=$(head -n 1 pids)

check_eq "exit status 3: an environment problem failed a point" "$rc" 3
check_eq "statuses a, b c1, b c2" "$(col run status | tr '\n' ' ')" "ok failed ok "
cause=$(col run cause 2)
check_eq "b's first point names a's server process" "$cause" \
    "not run: stale server process PID $pida (still listed by nvidia-smi 10 s after the server was stopped)"
check "sweep said it was waiting" grep -q "waiting up to 10 s for the last server's process $pida" err.txt
check "b's second point has metrics" test -n "$(col run median_tpot_ms 3)"
check "b's second point waited for the GPU, then ran (50 queries used up)" \
    test "$(wc -l <queries)" -gt 50
check "the run took the 10 s wait and no more than 30 s" test $((t1 - t0)) -ge 10 -a $((t1 - t0)) -le 30
check_eq "two servers started (b not while a lingered)" "$(wc -l <pids)" 2
check_eq "no fakeserver left" "$(procs_with "$T_TMP/server.pid")" 0
finish
