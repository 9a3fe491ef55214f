# serve_embed: POST /v1/embeddings (docs/reliability.md G11, G12): OpenAI's
# list shape and usage, unit-length vectors, base64 equal to the floats,
# token ids equal to their text, last-token and mean pooling apart, the
# refusals by field; a stream running beside an embedding is untouched;
# the vectors of SmolLM2 against llama.cpp's (llama-cpp-python, the same
# pooling) and through the official openai client (skipped, saying so,
# without the model or the package).
. tests/lib.sh
need jq

model=$(tiny_model)
start_serve "$model" --threads 1 || { fail "server start"; finish; exit 1; }
emb() { curl -s -H 'Content-Type: application/json' --data-binary "$1" "$SRV_URL/v1/embeddings"; }

emb '{"input":["hello world","a second input","x"]}' >"$T_TMP/f"
check_eq "3 inputs: 3 embeddings, indexed" "$(jq -c '[.data[] | .object + ":" + (.index | tostring)]' "$T_TMP/f")" \
    '["embedding:0","embedding:1","embedding:2"]'
check_eq "the list's shape" "$(jq -r '.object + " " + .model' "$T_TMP/f")" "list tiny"
dim=$(jq '.data[0].embedding | length' "$T_TMP/f")
check "a vector per input of the model's width ($dim)" [ "$dim" -gt 0 ]
check_eq "every vector has that width" "$(jq "[.data[].embedding | length == $dim] | all" "$T_TMP/f")" "true"
toks=$(curl -s --data-binary '{"prompt":"hello world"}' "$SRV_URL/tokenize" | jq .count)
toks2=$(curl -s --data-binary '{"prompt":"a second input"}' "$SRV_URL/tokenize" | jq .count)
toks3=$(curl -s --data-binary '{"prompt":"x"}' "$SRV_URL/tokenize" | jq .count)
check_eq "usage: the tokens of every input" "$(jq -c .usage "$T_TMP/f")" \
    "{\"prompt_tokens\":$((toks + toks2 + toks3)),\"total_tokens\":$((toks + toks2 + toks3))}"
check "every vector has unit length" jq -e \
    '[.data[].embedding | (map(. * .) | add | sqrt) - 1 | fabs < 1e-5] | all' "$T_TMP/f"
ids=$(curl -s --data-binary '{"prompt":"hello world"}' "$SRV_URL/tokenize" | jq -c .tokens)
emb "{\"input\":$ids}" >"$T_TMP/ids"
check "token ids give their text's vector" \
    jq -e --slurpfile t "$T_TMP/f" '.data[0].embedding == $t[0].data[0].embedding' "$T_TMP/ids"
emb "{\"input\":[$ids,$ids]}" >"$T_TMP/ids2"
check_eq "a list of id lists: one vector each" "$(jq '.data | length' "$T_TMP/ids2")" "2"
emb '{"input":"hello world","encoding_format":"base64"}' >"$T_TMP/b"
python3 - "$T_TMP/b" "$T_TMP/f" >"$T_TMP/b64" 2>&1 <<'PY'
import base64, json, struct, sys
b = json.load(open(sys.argv[1]))["data"][0]["embedding"]
f = json.load(open(sys.argv[2]))["data"][0]["embedding"]
raw = base64.b64decode(b)
v = struct.unpack("<%df" % (len(raw) // 4), raw)
print("same" if len(v) == len(f) and all(abs(x - y) <= 1e-7 * max(1, abs(y)) for x, y in zip(v, f)) else "differ %d %d" % (len(v), len(f)))
PY
check_eq "base64: little-endian float32 of the same vector" "$(cat "$T_TMP/b64")" "same"
# refusals
code() { curl -s -o "$T_TMP/e" -w '%{http_code}' --data-binary "$1" "$SRV_URL/v1/embeddings"; }
check_eq "no input: 400" "$(code '{}')/$(jq -r .error.param "$T_TMP/e")" "400/input"
check_eq "an empty input: 400 naming it" "$(code '{"input":["a",""]}')/$(jq -r .error.param "$T_TMP/e")" "400/input[1]"
check_eq "a token id out of range: 400" "$(code '{"input":[1,999999]}')/$(jq -r .error.param "$T_TMP/e")" "400/input[0]"
check_eq "encoding_format other: 400" "$(code '{"input":"a","encoding_format":"int8"}')/$(jq -r .error.param "$T_TMP/e")" "400/encoding_format"
check_eq "dimensions other than the model's: 400" \
    "$(code '{"input":"a","dimensions":3}')/$(jq -r .error.code "$T_TMP/e")" "400/unsupported_parameter"
check_eq "dimensions equal to the model's: 200" "$(code "{\"input\":\"a\",\"dimensions\":$dim}")" "200"
check_eq "another model: 404" "$(code '{"input":"a","model":"nope"}')/$(jq -r .error.code "$T_TMP/e")" "404/model_not_found"
long=$(awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d,", i % 100; printf "1" }')
check_eq "an input longer than the context: 400" \
    "$(code "{\"input\":[$long]}")/$(jq -r .error.code "$T_TMP/e")" "400/context_length_exceeded"
# beside a stream: the stream gets every token, the embedding its answer
curl -s -N --data-binary '{"prompt":"hi","max_tokens":200,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' \
    "$SRV_URL/v1/completions" >"$T_TMP/st" &
cpid=$!
sleep 0.05
for i in 1 2 3 4 5; do emb '{"input":["beside a stream","again"]}' >"$T_TMP/side.$i"; done
wait $cpid
check_eq "embeddings beside a stream: all answered" \
    "$(cat "$T_TMP"/side.* | jq -s '[.[] | .data | length == 2] | all')" "true"
check_eq "... and the stream got all 200 tokens" \
    "$(sed -n 's/^data: //p' "$T_TMP/st" | grep usage | jq .usage.completion_tokens)" "200"
stop_serve
start_serve "$model" --threads 1 --pooling mean || { fail "server start --pooling mean"; finish; exit 1; }
emb '{"input":"hello world"}' >"$T_TMP/m"
check "--pooling mean: another vector than last" \
    jq -e --slurpfile t "$T_TMP/f" '.data[0].embedding != $t[0].data[0].embedding' "$T_TMP/m"
check "--pooling mean: unit length" jq -e '.data[0].embedding | (map(. * .) | add | sqrt) - 1 | fabs < 1e-5' "$T_TMP/m"
stop_serve
"$FP4SERVE" serve --model "$model" --pooling max >"$T_TMP/o" 2>&1
check_eq "--pooling max: exit 2" "$?" "2"

# ---- G12: SmolLM2 against llama.cpp, and through the openai client ----
if [ ! -f "$SMOL" ]; then
    skip "$SMOL not present (make models): the llama.cpp and openai checks did not run"
    finish
    exit $?
fi
for pool in last mean; do
    start_serve "$SMOL" --threads 2 --ctx 512 --pooling $pool || { fail "SmolLM2 start"; continue; }
    if python3 -c 'import llama_cpp' 2>/dev/null; then
        ref_py "$T_TMP/ref.$pool" "$T_TMP/ref.log" "$SRV_URL" "$SMOL" "$pool" <<'PY'
import json, math, sys, urllib.request
import llama_cpp
url, path, pool = sys.argv[1:4]
texts = ["The capital of France is Paris.", "hello",
         "A much longer sentence about the quantization of neural network weights to four bits."]
pt = llama_cpp.LLAMA_POOLING_TYPE_LAST if pool == "last" else llama_cpp.LLAMA_POOLING_TYPE_MEAN
ref = llama_cpp.Llama(path, embedding=True, pooling_type=pt, verbose=False, n_ctx=512)
req = urllib.request.Request(url + "/v1/embeddings", data=json.dumps({"input": texts}).encode())
ours = [d["embedding"] for d in json.load(urllib.request.urlopen(req))["data"]]
worst = 1.0
for t, a in zip(texts, ours):
    b = ref.embed(t, normalize=True)
    b = b[0] if isinstance(b[0], list) else b
    worst = min(worst, sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in b)))
print("%.6f" % worst)
PY
        cos=$(cat "$T_TMP/ref.$pool")
        check "SmolLM2 $pool pooling: cosine to llama.cpp's vectors >= 0.999 (worst $cos)" \
            awk -v c="$cos" 'BEGIN { exit !(c + 0 >= 0.999) }'
    else
        skip "llama_cpp is not importable (make pydeps): the llama.cpp comparison did not run"
    fi
    if [ $pool = last ] && python3 -c 'import openai' 2>/dev/null; then
        python3 - "$SRV_URL" >"$T_TMP/oa" 2>&1 <<'PY'
import math, sys
import openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="x", max_retries=0)
a = c.embeddings.create(model="SmolLM2-135M-Instruct.Q4_1", input=["cat", "kitten"])
b = c.embeddings.create(model="SmolLM2-135M-Instruct.Q4_1", input=["cat", "kitten"],
                        encoding_format="float")
same = all(abs(x - y) < 1e-6 for p, q in zip(a.data, b.data) for x, y in zip(p.embedding, q.embedding))
print("n", len(a.data), len(a.data[0].embedding), a.usage.prompt_tokens > 1, "same", same)
PY
        check_eq "openai: embeddings.create (its default base64, and float)" \
            "$(sed -n 's/^n //p' "$T_TMP/oa")" "2 576 True same True"
    elif [ $pool = last ]; then
        skip "the openai Python package is not installed (make pydeps installs it)"
    fi
    stop_serve
done
finish
