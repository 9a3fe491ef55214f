# run_argv.sh: hostile values in flags, args and the model path reach the
# server as single, verbatim argv elements (fakeserver --print-argv writes
# them to server.log) and nothing is ever run by a shell.
. tests/lib.sh
cd "$T_TMP" || exit 1

hostile='$(id); touch pwned1'
model="$T_TMP/model \$(id); touch pwned2 \`id\` 'q'"
printf 'not a gguf, just bytes\n' >"$model"
cat >argv.yaml <<YAML
name: argv
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}", --print-argv, --model, "\${model}"]
  model: "$T_TMP/model \$(id); touch pwned2 \`id\` 'q'"
  flags: {host: 127.0.0.1, model: '$hostile'}
  args: ["--vocab", "32000", "--model", "a b; touch pwned3 | cat > pwned4"]
  ready: {path: /health, timeout_s: 30}
bench:
  tool: command
  command: $(miniclient_cmd)
  output_len: 4
  warmup: 0
  grid: ["1:2"]
YAML
SWEEP_TEST_API_TOKEN=hunter2-secret-value SWEEP_TEST_PLAIN=plain-value \
    "$SWEEP" run argv.yaml --out run >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "the run succeeds" "$rc" 0
log=run/default/server.log
# has_arg VALUE: some "argv[i]=" line of server.log carries exactly VALUE
has_arg() {
    while IFS= read -r line; do
        case "$line" in argv\[*\]=*) [ "${line#*]=}" = "$1" ] && return 0 ;; esac
    done <"$log"
    return 1
}
check "the model path arrives whole" has_arg "$model"
check "the flag value arrives whole" has_arg "$hostile"
check "an args value arrives whole" has_arg "a b; touch pwned3 | cat > pwned4"
check "a plain flag too" has_arg "127.0.0.1"
check "nothing was executed" test ! -e pwned1 -a ! -e pwned2 -a ! -e pwned3 -a ! -e pwned4
check "nothing was executed in the repository either" test ! -e "$TOPDIR/pwned1" -a ! -e "$TOPDIR/pwned2"
check "the manifest has the argv" grep -qF 'touch pwned1' run/manifest.json
check "the manifest keeps the environment" grep -qF '"SWEEP_TEST_PLAIN": "plain-value"' run/manifest.json
check "the manifest drops secrets" sh -c "! grep -q 'hunter2-secret-value\|SWEEP_TEST_API_TOKEN' run/manifest.json"
finish
