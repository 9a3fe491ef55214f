# serve_clients: the real clients' defaults against `fp4serve serve` on
# SmolLM2 (issue 29). GuideLLM 0.8 sends stream_options.continuous_usage_stats
# on every request (vLLM's usage in every chunk): fp4serve streams usage in
# each chunk, and GuideLLM's benchmark finishes with every request
# successful. lm-evaluation-harness's local-completions asks GET
# /tokenizer_info, then tokenizes through /tokenize (its "remote" tokenizer,
# tokenized_requests on): a multiple-choice and a generation task, read from
# a local JSON file, run to the end. The clients come from `make pyclients`
# (build/venv); without them, or without SmolLM2, the test says it skipped.
# No network: the hub is told to stay offline, and GuideLLM's tokenizer is
# the folder `fp4serve export-tokenizer` writes (it cannot fetch one).
. tests/lib.sh
need jq
# jqe FILTER FILE: jq's truth of FILTER on FILE, quietly
jqe() { jq -e "$@" >/dev/null; }

# The protocol checks first: they need no Python client.
[ -f "$SMOL" ] || {
    skip "$SMOL not present (make models) - the clients' checks not run"
    finish
    exit 0
}
start_serve "$SMOL" --threads 2 --max-batch 4 || {
    fail "server start"
    finish
    exit 1
}
model_id=SmolLM2-135M-Instruct.Q4_1

# ---- continuous_usage_stats: usage in every chunk, each choice's so far ----
post /v1/completions '{"prompt":"Hello","max_tokens":4,"ignore_eos":true,"stream":true,"n":2,
    "stream_options":{"include_usage":true,"continuous_usage_stats":true}}' >"$T_TMP/cu.sse"
sed -n 's/^data: //p' "$T_TMP/cu.sse" | grep -v '^\[DONE\]$' >"$T_TMP/cu.json"
check_eq "continuous usage: 8 text chunks and the usage event" "$(wc -l <"$T_TMP/cu.json" | tr -d ' ')" "9"
check_eq "continuous usage: every text chunk carries usage" \
    "$(jq -s '[.[] | select(.choices | length > 0) | select(.usage == null)] | length' "$T_TMP/cu.json")" "0"
check_eq "continuous usage: each choice's completion_tokens count 1, 2, 3, 4" \
    "$(jq -sc '[.[] | select(.choices | length > 0) | {i: .choices[0].index, c: .usage.completion_tokens}]
        | group_by(.i) | map(map(.c))' "$T_TMP/cu.json")" "[[1,2,3,4],[1,2,3,4]]"
check_eq "continuous usage: total = prompt + completion in every chunk" \
    "$(jq -s '[.[] | select(.usage.total_tokens != .usage.prompt_tokens + .usage.completion_tokens)] | length' "$T_TMP/cu.json")" "0"
check_eq "continuous usage: the last event still sums both choices" \
    "$(tail -n 1 "$T_TMP/cu.json" | jq -c '[(.choices | length), .usage.completion_tokens]')" "[0,8]"
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,
    "stream_options":{"include_usage":true,"continuous_usage_stats":true}}' |
    sed -n 's/^data: //p' | grep -v '^\[DONE\]$' >"$T_TMP/cuchat.json"
check "continuous usage: chat chunks carry usage too" \
    jqe -s 'map(select(.choices | length > 0)) | length > 0 and all(.usage.completion_tokens >= 1)' "$T_TMP/cuchat.json"
# vLLM's rule: continuous_usage_stats counts only with include_usage
post /v1/completions '{"prompt":"Hello","max_tokens":2,"stream":true,
    "stream_options":{"continuous_usage_stats":true}}' >"$T_TMP/cu0.sse"
check_eq "continuous usage without include_usage: no usage anywhere" "$(grep -c '"usage"' "$T_TMP/cu0.sse")" "0"
post /v1/completions '{"prompt":"Hello","max_tokens":2,"stream":true,
    "stream_options":{"include_usage":true,"continuous_usage_stats":"yes"}}' >"$T_TMP/cubad.json"
check_eq "continuous_usage_stats must be a boolean (400 naming it)" \
    "$(jq -r .error.param "$T_TMP/cubad.json")" "stream_options.continuous_usage_stats"

# ---- GET /tokenizer_info, vLLM's shape ----
curl -s "$SRV_URL/tokenizer_info" >"$T_TMP/ti.json"
check_eq "tokenizer_info: class, eos, bos, context" \
    "$(jq -c '[.tokenizer_class, .eos_token, .bos_token, .model_max_length, .add_bos_token]' "$T_TMP/ti.json")" \
    '["PreTrainedTokenizerFast","<|im_end|>","<|im_start|>",2048,false]'
check "tokenizer_info: the GGUF's chat template" jqe '.chat_template | startswith("{% for message in messages %}")' "$T_TMP/ti.json"
check_eq "tokenizer_info: its eos text tokenizes to the eos id (lm-eval's eot_token)" \
    "$(post /tokenize '{"prompt":"<|im_end|>","add_special_tokens":false}' | jq -c .tokens)" "[2]"
check_eq "tokenizer_info: POST is a 405" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$SRV_URL/tokenizer_info")" "405"

# ---- the real clients ----
py=$BUILD/venv/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import guidellm, lm_eval' 2>/dev/null; then
    skip "GuideLLM or lm-eval is not in $BUILD/venv (make pyclients installs them) - the clients not run"
    finish
    exit 0
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 # no network here
"$FP4SERVE" export-tokenizer "$SMOL" --out "$T_TMP/tok" >/dev/null 2>&1 || fail "export-tokenizer"

# GuideLLM: its chat completions, streamed, with its usage options; the
# stand-in for torch's DataLoader only when torch cannot be imported
shim=
"$py" -c 'import torch' 2>/dev/null || shim=$TOPDIR/tests/tools/torchshim
(cd "$T_TMP" && USE_TORCH=0 PYTHONPATH=$shim timeout 300 "$BUILD/venv/bin/guidellm" run \
    --backend "kind=openai_http,target=$SRV_URL" \
    --data kind=synthetic_text,prompt_tokens=32,output_tokens=8 \
    --tokenizer "kind=hf_auto,model=$T_TMP/tok" \
    --profile kind=synchronous --constraint kind=max_requests,count=4 \
    --output "kind=json,path=$T_TMP/guidellm.json" >"$T_TMP/guidellm.log" 2>&1)
rc=$?
check_eq "guidellm run: exit status" "$rc" "0"
[ "$rc" = 0 ] || tail -n 15 "$T_TMP/guidellm.log"
check_eq "guidellm: 4 requests successful, none errored or incomplete" \
    "$(jq -c '.benchmarks[-1].metrics.request_totals | [.successful, .errored, .incomplete]' "$T_TMP/guidellm.json")" \
    "[4,0,0]"
check_eq "guidellm: 8 output tokens per request (from the chunks' usage)" \
    "$(jq '.benchmarks[-1].metrics.output_token_count.successful.mean' "$T_TMP/guidellm.json")" "8"
check "guidellm: a time to first token was measured" \
    jqe '.benchmarks[-1].metrics.time_to_first_token_ms.successful.mean > 0' "$T_TMP/guidellm.json"

# lm-eval: local-completions with its defaults (tokenizer_backend auto,
# tokenized_requests on), two tasks over tests/fixtures/mc
mkdir -p "$T_TMP/tasks"
cat >"$T_TMP/tasks/fp4mc.yaml" <<EOF
task: fp4mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: $TOPDIR/tests/fixtures/mc/items.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{context}}"
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
target_delimiter: ""
metric_list:
  - metric: acc
EOF
sed -e 's/^task: fp4mc/task: fp4gen/' -e 's/^output_type: .*/output_type: generate_until/' \
    -e 's/^doc_to_target: .*/doc_to_target: "{{choices[answer]}}"/' -e '/^doc_to_choice/d' \
    -e 's/metric: acc/metric: exact_match/' "$T_TMP/tasks/fp4mc.yaml" >"$T_TMP/tasks/fp4gen.yaml"
printf 'generation_kwargs:\n  until: ["\\n", "."]\n  max_gen_toks: 8\n' >>"$T_TMP/tasks/fp4gen.yaml"
(cd "$T_TMP" && timeout 300 "$BUILD/venv/bin/lm_eval" --model local-completions \
    --model_args "model=$model_id,base_url=$SRV_URL/v1/completions" \
    --tasks fp4mc,fp4gen --include_path "$T_TMP/tasks" --output_path "$T_TMP/lmout" \
    >"$T_TMP/lmeval.log" 2>&1)
rc=$?
check_eq "lm_eval local-completions: exit status" "$rc" "0"
[ "$rc" = 0 ] || tail -n 15 "$T_TMP/lmeval.log"
check "lm_eval: found the remote tokenizer through /tokenizer_info" grep -q 'Using tokenizer remote' "$T_TMP/lmeval.log"
res=$(find "$T_TMP/lmout" -name 'results_*.json' | head -n 1)
items=$(wc -l <tests/fixtures/mc/items.jsonl | tr -d ' ')
check_eq "lm_eval: every item scored in both tasks" \
    "$(jq -c '[.["n-samples"].fp4mc.effective, .["n-samples"].fp4gen.effective]' "${res:-/dev/null}")" "[$items,$items]"
# better than chance (1 in 4) says the scores are the model's, not noise
check "lm_eval: multiple-choice accuracy above chance" \
    jqe '.results.fp4mc["acc,none"] > 0.25' "${res:-/dev/null}"
check "lm_eval: the generation task got answers" jqe '.results.fp4gen["exact_match,none"] >= 0' "${res:-/dev/null}"
stop_serve
finish
