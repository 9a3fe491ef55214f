# run_server_message: a point whose client printed the server's error
# message says it in its cause (points.csv), not only in the log (issue 29
# item 6). `sweep run` starts `fp4serve serve` on the tiny model; the
# clients ask for more tokens than its context holds, fp4serve refuses with
# 400 and a message naming max_tokens. A scripted client prints the body as
# the openai client's exception does, then a last line without it; a client
# that exits 0 but measured nothing fails its point with the message too;
# the real lm-evaluation-harness (local-completions, when `make pyclients`
# installed it) prints the body in its retry warnings and dies on
# requests' "400 Client Error" line. A point that passes quotes nothing.
. tests/lib.sh
cd "$T_TMP" || exit 1
model=$(tiny_model)

# exp NAME CLIENT-COMMAND (a YAML list) [METRICS]: an experiment of one point
exp() {
    cat >"$1.yaml" <<YAML
name: $1
server:
  engine: command
  command: ["$FP4SERVE", serve, --model, "$model", --port, "\${port}", --ctx, "128", --threads, "1"]
  ready: {path: /health, timeout_s: 60}
  stop: {grace_s: 5}
bench:
  tool: command
  command: $2
  input_len: 8
  output_len: 8
  warmup: 0
  timeout_s: 120
  grid: ["1:1"]
${3:-}
YAML
}
# a client in Python's manner: the exception with the body, then a last line
cat >client.sh <<'EOF'
url=$1
body=$(curl -s -H 'Content-Type: application/json' \
    -d '{"prompt":"hello","max_tokens":4000}' "$url/v1/completions")
echo "Traceback (most recent call last):"
echo "openai.BadRequestError: Error code: 400 - $body"
echo "1 of 1 requests failed; see above"
exit 1
EOF
exp scripted '["sh", "'"$T_TMP"'/client.sh", "${url}"]'
"$SWEEP" run scripted.yaml --out run1 >out1.txt 2>err1.txt
check_eq "scripted client: the point failed" "$(col run1 status 1)" "failed"
cause=$(col run1 cause 1)
printf "cause: %s\n" "$cause"
check "scripted client: the cause keeps the client's last line" \
    sh -c "printf '%s\\n' \"\$1\" | grep -q \"client exited with code 1 ('1 of 1 requests failed\"" _ "$cause"
check "scripted client: the cause quotes fp4serve's message" \
    sh -c "printf '%s\\n' \"\$1\" | grep -q \"; the server said: '.*max_tokens\"" _ "$cause"

# exit 0 but nothing measured: the judge's reason, then the message
cat >quiet.sh <<'EOF'
curl -s -H 'Content-Type: application/json' -d '{"prompt":"hello","max_tokens":4000}' "$1/v1/completions"
echo
EOF
exp quiet '["sh", "'"$T_TMP"'/quiet.sh", "${url}"]' "metrics:
  preset: sglang"
"$SWEEP" run quiet.yaml --out run2 >out2.txt 2>err2.txt
check_eq "client exits 0, nothing measured: the point failed" "$(col run2 status 1)" "failed"
cause=$(col run2 cause 1)
printf "cause: %s\n" "$cause"
check "exit 0: the cause quotes fp4serve's message after the judge's reason" \
    sh -c "printf '%s\\n' \"\$1\" | grep -q \"missing required metric.*; the server said: '.*max_tokens\"" _ "$cause"

# a point that passes: its log has no message, its cause quotes none
exp fine '["sh", "-c", "curl -s -d \"{\\\"prompt\\\":\\\"hi\\\",\\\"max_tokens\\\":2}\" ${url}/v1/completions >/dev/null; echo \"Median TPOT (ms): 1.0\"; echo \"Successful requests: 1\""]' "metrics:
  patterns: {median_tpot_ms: 'Median TPOT \\(ms\\):\\s+([0-9.]+)', completed: 'Successful requests:\\s+([0-9]+)'}
  require: [median_tpot_ms]"
"$SWEEP" run fine.yaml --out run3 >out3.txt 2>err3.txt
check_eq "a passing point: ok" "$(col run3 status 1)" "ok"
check "a passing point: no quote" sh -c "! grep -q 'the server said' run3/points.csv"

# the real lm-eval: its retry warnings carry the body
py=$BUILD/venv/bin/python3
if [ -x "$py" ] && "$py" -c 'import lm_eval' 2>/dev/null; then
    mkdir -p tasks
    cat >tasks/fp4long.yaml <<EOF
task: fp4long
dataset_path: json
dataset_kwargs:
  data_files:
    test: $TOPDIR/tests/fixtures/mc/items.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{context}}"
doc_to_target: "{{choices[answer]}}"
generation_kwargs:
  until: ["."]
  max_gen_toks: 1000
metric_list:
  - metric: exact_match
EOF
    exp lmeval '["env", "HF_HUB_OFFLINE=1", "HF_DATASETS_OFFLINE=1", "'"$BUILD"'/venv/bin/lm_eval", --model, local-completions, --model_args, "model=tiny,base_url=${url}/v1/completions,max_retries=2", --tasks, fp4long, --include_path, "'"$T_TMP"'/tasks", --limit, "1"]'
    "$SWEEP" run lmeval.yaml --out run4 >out4.txt 2>err4.txt
    check_eq "lm_eval: the point failed" "$(col run4 status 1)" "failed"
    cause=$(col run4 cause 1)
    printf "cause: %s\n" "$cause"
    check "lm_eval: the cause quotes fp4serve's message" \
        sh -c "printf '%s\\n' \"\$1\" | grep -q \"the server said: '.*max_tokens\"" _ "$cause"
else
    skip "lm-eval is not in $BUILD/venv (make pyclients installs it) - the real client's case not run"
fi
finish
