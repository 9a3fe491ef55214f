# tokenizer_export: POST /tokenize and /detokenize in vLLM's shapes give
# llama.cpp's ids on our tokenizer fixtures (tests/fixtures/tokenizer) and
# the text back; `fp4serve export-tokenizer MODEL --out DIR` writes Hugging
# Face tokenizer files that the `tokenizers` package loads and that give
# the server's ids on every fixture and on seeded random text (Python part:
# tests/tools/tokenizer_check.py); the command's usage and I/O errors have
# their exit statuses. On the tiny synthetic model, and on SmolLM2 when it
# is present. The export checks skip, saying why, only when pip cannot
# install `tokenizers` (make pydeps, into $BUILD/venv).
. tests/lib.sh
need jq

PY=python3
if ! [ -x "$BUILD/venv/bin/python" ]; then
    make --no-print-directory -s -C "$TOPDIR" BUILD="$BUILD" pydeps >"$T_TMP/pydeps.log" 2>&1 ||
        echo "note: make pydeps failed: $(tail -n 1 "$T_TMP/pydeps.log")"
fi
[ -x "$BUILD/venv/bin/python" ] && PY="$BUILD/venv/bin/python"

# run_model MODEL FIXTURE RANDOM [ARGS...]: the endpoint and export checks
# for one model (ARGS go to tokenizer_check.py).
run_model() {
    local model=$1 fixture=$2 nrand=$3 name out
    shift 3
    name=$(basename "$model" .gguf)
    out="$T_TMP/export-$name"
    "$FP4SERVE" export-tokenizer "$model" --out "$out" 2>"$T_TMP/export.err"
    check_eq "$name: export-tokenizer exits 0" "$?" "0"
    for f in tokenizer.json tokenizer_config.json special_tokens_map.json; do
        check "$name: $f is JSON" jq -e . "$out/$f" >/dev/null
    done
    check_eq "$name: tokenizer.json is byte-level BPE" \
        "$(jq -c '[.model.type, .decoder.type, .model.byte_fallback, .model.ignore_merges]' "$out/tokenizer.json")" \
        '["BPE","ByteLevel",false,false]'
    check_eq "$name: every token is in the vocabulary" \
        "$(jq '.model.vocab | length' "$out/tokenizer.json")" \
        "$(curl -s "$SRV_URL/v1/models" | jq '.data[0].meta.n_vocab')"
    check_eq "$name: tokenizer_config's model_max_length is the training context" \
        "$(jq .model_max_length "$out/tokenizer_config.json")" \
        "$(curl -s "$SRV_URL/v1/models" | jq '.data[0].meta.n_ctx_train')"
    "$PY" "$TOPDIR/tests/tools/tokenizer_check.py" "$SRV_URL" "$fixture" "$out" \
        --random "$nrand" --seed 1 "$@" >"$T_TMP/check.out" 2>&1
    rc=$?
    while IFS= read -r line; do
        case "$line" in
        ok:*) ok "$name: ${line#ok: }" ;;
        FAIL:*) fail "$name: ${line#FAIL: }" ;;
        skip:*) echo "skip: $name: ${line#skip: }" ;;
        esac
    done <"$T_TMP/check.out"
    check "$name: tokenizer_check.py exits 0" [ "$rc" -eq 0 ] || tail -n 5 "$T_TMP/check.out"
}

model=$(tiny_model)
# while the model loads, both routes answer 503 like completions
SRV_PORT=$(free_port)
SRV_URL="http://127.0.0.1:$SRV_PORT"
"$FP4SERVE" serve --model "$model" --port "$SRV_PORT" --threads 1 --load-delay-ms 3000 \
    >"$T_TMP/loading.log" 2>&1 &
SRV_PID=$!
track_pid $SRV_PID
n=0
while [ $n -lt 100 ] && ! curl -s -o /dev/null "$SRV_URL/health"; do sleep 0.02; n=$((n + 1)); done
for r in tokenize detokenize; do
    check_eq "/$r while loading: 503" \
        "$(curl -s -o /dev/null -w '%{http_code}' -d '{"prompt":"x","tokens":[1]}' "$SRV_URL/$r")" "503"
done
stop_serve

start_serve "$model" --threads 2 || { fail "server start"; finish; exit 1; }
run_model "$model" "$TOPDIR/tests/fixtures/tokenizer/synth-tiny.jsonl" 500

# the endpoints' own refusals and shapes over HTTP
check_eq "/tokenize: vLLM's keys" \
    "$(post /tokenize '{"prompt":"Hello world"}' | jq -c 'keys')" '["count","max_model_len","token_strs","tokens"]'
check_eq "/tokenize: max_model_len is the server's context" \
    "$(post /tokenize '{"prompt":"x"}' | jq .max_model_len)" "256"
check_eq "/tokenize: messages give the chat completion's prompt tokens" \
    "$(post /tokenize '{"messages":[{"role":"user","content":"hi there"}]}' | jq .count)" \
    "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi there"}],"max_tokens":1}' | jq .usage.prompt_tokens)"
check_eq "/tokenize: a prompt's count is the completion's prompt_tokens" \
    "$(post /tokenize '{"prompt":"The quick brown fox 123"}' | jq .count)" \
    "$(post /v1/completions '{"prompt":"The quick brown fox 123","max_tokens":1}' | jq .usage.prompt_tokens)"
check_eq "/tokenize: an unknown model is 404" \
    "$(curl -s -o /dev/null -w '%{http_code}' -d '{"prompt":"x","model":"nope"}' "$SRV_URL/tokenize")" "404"
check_eq "/detokenize: an id outside the vocabulary is 400 naming it" \
    "$(post /detokenize '{"tokens":[1,512]}' | jq -r .error.param)" "tokens[1]"
check_eq "/tokenize: GET is 405" "$(curl -s -o /dev/null -w '%{http_code}' "$SRV_URL/tokenize")" "405"
# counted exactly: three more answered requests add three (how many came
# before depends on whether tokenizer_check.py could run)
c0=$(metric 'fp4serve_requests_total{route="tokenize",status="200"}')
for _ in 1 2 3; do post /tokenize '{"prompt":"count me"}' >/dev/null; done
check_eq "/metrics counts the tokenizer routes" \
    "$(metric 'fp4serve_requests_total{route="tokenize",status="200"}')" "$((c0 + 3))"
stop_serve

# the command's errors: usage 2, I/O 3, format 4
"$FP4SERVE" export-tokenizer "$model" 2>"$T_TMP/e"
check_eq "export-tokenizer without --out: exit 2" "$?" "2"
check "... and says --out is required" grep -q -- "--out DIR is required" "$T_TMP/e"
"$FP4SERVE" export-tokenizer --out "$T_TMP/x" 2>/dev/null
check_eq "export-tokenizer without a model: exit 2" "$?" "2"
"$FP4SERVE" export-tokenizer "$T_TMP/missing.gguf" --out "$T_TMP/x" 2>/dev/null
check_eq "export-tokenizer of a missing file: exit 3" "$?" "3"
printf 'not a gguf file at all' >"$T_TMP/bad.gguf"
"$FP4SERVE" export-tokenizer "$T_TMP/bad.gguf" --out "$T_TMP/x" 2>/dev/null
check_eq "export-tokenizer of a non-GGUF file: exit 4" "$?" "4"
: >"$T_TMP/file"
"$FP4SERVE" export-tokenizer "$model" --out "$T_TMP/file/sub" 2>/dev/null
check_eq "export-tokenizer into a path under a file: exit 3" "$?" "3"
"$FP4SERVE" export-tokenizer --help >/dev/null
check_eq "export-tokenizer --help: exit 0" "$?" "0"

if [ -f "$SMOL" ]; then
    start_serve "$SMOL" --threads 2 --ctx 512 || { fail "SmolLM2 server start"; finish; exit 1; }
    run_model "$SMOL" "$TOPDIR/tests/fixtures/tokenizer/smollm2.jsonl" 2000 \
        --gpt2pre "$TOPDIR/tests/fixtures/tokenizer/smollm2-gpt2pre.jsonl"
    check_eq "SmolLM2: the chat template is exported" \
        "$(jq -r '.chat_template | contains("<|im_start|>")' "$T_TMP/export-SmolLM2-135M-Instruct.Q4_1/tokenizer_config.json")" "true"
    check_eq "SmolLM2: eos_token" \
        "$(jq -r .eos_token "$T_TMP/export-SmolLM2-135M-Instruct.Q4_1/special_tokens_map.json")" "<|im_end|>"
    stop_serve
else
    echo "skip: $SMOL not present (make models) - SmolLM2 checks not run"
fi
finish
