# run_progress.sh: what `sweep run` shows during a long point. The builtin
# client reports requests done and output tokens through its progress file
# (runner/client/loadgen.h); not on a terminal, a plain line repeats them at
# most every SWEEP_PROGRESS_EVERY_S seconds (default 30: a 6 s point gets
# none); on a terminal (through script(1)) the live line carries them. The
# fakeserver at C=2 runs 22 ms steps: about 91 output tok/s. A command
# client's tqdm bar on stderr gives requests done of total.
. tests/lib.sh

cat >"$T_TMP/e.yaml" <<YAML
name: progress
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 20, step-b-ms: 1, prefill-ms: 5}
  ready: {path: /health, timeout_s: 30}
bench:
  tool: builtin
  input_len: 8
  output_len: 64
  warmup: 0
  grid: ["2:8"]
YAML

SWEEP_PROGRESS_EVERY_S=1 "$SWEEP" run "$T_TMP/e.yaml" --out "$T_TMP/r1" >"$T_TMP/r1.out" 2>"$T_TMP/r1.err"
check_eq "run exits 0" "$?" 0
cat "$T_TMP/r1.err"
grep ' running ' "$T_TMP/r1.err" >"$T_TMP/lines"
check "plain lines while the point runs (every 1 s here)" [ "$(wc -l <"$T_TMP/lines")" -ge 3 ]
check "each names the point, requests done of 8 and the output tok/s" \
    awk '!/^sweep: point 1\/1: default c=2 n=8 running [0-9]+s, [0-8]\/8 req, [0-9]+ tok\/s \(ETA [^)]*\)$/ { bad = 1 } END { exit bad }' "$T_TMP/lines"
check "requests done never go back" awk '{ split($0, a, ", "); split(a[2], b, "/"); if (b[1] + 0 < last) bad = 1; last = b[1] + 0 } END { exit bad }' "$T_TMP/lines"
rate=$(sed -n 's/.* \([0-9]*\) tok\/s .*/\1/p' "$T_TMP/lines" | tail -n 1)
check "the rate is output tokens per second (~91 at 2 x 1000/22 ms; got $rate)" within "$rate" 91 0.5 rel
check "no carriage returns in a log" sh -c "! grep -q \"\$(printf '\r')\" '$T_TMP/r1.err'"
check "the progress file is removed with the point" sh -c "! ls -A '$T_TMP/r1/default' | grep -q progress"

"$SWEEP" run "$T_TMP/e.yaml" --out "$T_TMP/r2" >/dev/null 2>"$T_TMP/r2.err"
check_eq "run exits 0 (default interval)" "$?" 0
check "a point shorter than 30 s gets no plain progress line" sh -c "! grep -q ' running ' '$T_TMP/r2.err'"

# a command client that draws a tqdm bar on stderr (as vLLM's and SGLang's
# benchmark clients do): the plain lines show its requests, without tok/s
cat >"$T_TMP/tqdm.sh" <<'SH'
i=0
while [ $i -le 3 ]; do
    printf '\r%3d%%|####      | %d/8 [00:0%d<00:03,  2.0it/s]' $((i * 25)) $((i * 2)) $i >&2
    sleep 1
    i=$((i + 1))
done
printf '\n' >&2
exec "$@"
SH
cat >"$T_TMP/c.yaml" <<YAML
name: progress-command
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  ready: {path: /health, timeout_s: 30}
bench:
  tool: command
  command: [sh, "$T_TMP/tqdm.sh", "$MINICLIENT", --url, "\${url}", -c, "\${concurrency}", -n, "\${prompts}", --input-len, "\${input_len}", --output-len, "\${output_len}"]
  input_len: 8
  output_len: 8
  warmup: 0
  grid: ["2:8"]
YAML
SWEEP_PROGRESS_EVERY_S=1 "$SWEEP" run "$T_TMP/c.yaml" --out "$T_TMP/rc" >/dev/null 2>"$T_TMP/rc.err"
check_eq "command client run exits 0" "$?" 0
grep ' running ' "$T_TMP/rc.err"
check "a command client's tqdm bar gives requests done of total (no tok/s)" \
    grep -Eq '^sweep: point 1/1: default c=2 n=8 running [0-9]+s, [2-6]/8 req \(ETA [^)]*\)$' "$T_TMP/rc.err"

if script -qfec true /dev/null >/dev/null 2>&1; then
    script -qfec "'$SWEEP' run '$T_TMP/e.yaml' --out '$T_TMP/r3'" "$T_TMP/tty.txt" >/dev/null 2>&1
    check_eq "run on a terminal exits 0" "$?" 0
    tr '\r' '\n' <"$T_TMP/tty.txt" | grep -a 'req,' | head -n 3
    check "the live line shows requests done and tok/s" sh -c \
        "tr '\r' '\n' <'$T_TMP/tty.txt' | grep -aEq '^.\[K\[1/1\] default c=2 n=8  [0-9]+s [0-8]/8 req, [0-9]+ tok/s  ETA '"
else
    skip "script(1) cannot run here: the terminal path is checked by unit/runner_progress.c only"
fi
finish
