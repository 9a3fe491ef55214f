# serve_openai: JSON mode (response_format json_object, the any-object
# json_schema) through the token mask (docs/reliability.md G9, G10), read
# with curl and jq, then the official `openai` Python client (`make pydeps`
# installs it; skipped, saying so, when it cannot be imported) against a
# server with --api-key and several --served-model-name: models, completions,
# chat, streaming, JSON mode, and the refusals as the client's exceptions.
. tests/lib.sh
need jq

model=$(tiny_model)
start_serve "$model" --threads 1 --api-key sk-openai --served-model-name tiny-a tiny-b ||
    { fail "server start"; finish; exit 1; }
AUTH='Authorization: Bearer sk-openai'
apost() { curl -s -N -H "$AUTH" -H 'Content-Type: application/json' --data-binary "$2" "$SRV_URL$1"; }

# ---- G9: every answer that ends is one JSON object; one that is cut is a prefix ----
stops=0
bad=""
for seed in $(seq 1 16); do
    apost /v1/completions "{\"prompt\":\"hi\",\"max_tokens\":64,\"seed\":$seed,\"response_format\":{\"type\":\"json_object\"}}" >"$T_TMP/j.$seed"
    fin=$(jq -r '.choices[0].finish_reason' "$T_TMP/j.$seed")
    [ "$fin" = stop ] || [ "$fin" = length ] || bad="$bad $seed:$fin"
    if [ "$fin" = stop ]; then
        stops=$((stops + 1))
        jq -e '.choices[0].text | fromjson | type == "object"' "$T_TMP/j.$seed" >/dev/null || bad="$bad $seed:not-json"
    else # cut: at least it opened an object and holds no text outside it
        jq -e '.choices[0].text | test("^[ \t\r\n]*[{]")' "$T_TMP/j.$seed" >/dev/null || bad="$bad $seed:no-brace"
    fi
done
check_eq "json_object: 16 answers, each a JSON object or a cut prefix of one" "$bad" ""
check "json_object: some answers closed their object ($stops of 16 ended by stop)" [ "$stops" -ge 1 ]
apost /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":64,"seed":3,"stream":true,"response_format":{"type":"json_object"}}' >"$T_TMP/js"
fin=$(sed -n 's/^data: //p' "$T_TMP/js" | grep -v '^\[DONE\]$' | jq -r '.choices[0].finish_reason // empty' | tail -n 1)
text=$(stream_text <"$T_TMP/js")
if [ "$fin" = stop ]; then
    check "json_object stream: the text is one JSON object" sh -c "printf '%s' '$(printf '%s' "$text" | sed "s/'/'\\\\''/g")' | jq -e 'type == \"object\"' >/dev/null"
else
    check_eq "json_object stream: ended by stop or length" "$fin" "length"
fi
check_eq "json_object stream: [DONE] last" "$(tail -n 2 "$T_TMP/js" | head -n 1)" "data: [DONE]"
schema='{"type":"json_schema","json_schema":{"name":"any","schema":{"type":"object"}}}'
apost /v1/completions "{\"prompt\":\"hi\",\"max_tokens\":64,\"seed\":3,\"response_format\":$schema}" >"$T_TMP/s3"
check_eq "json_schema of any object: the same answer as json_object (seed 3)" \
    "$(jq -c .choices[0].text "$T_TMP/s3")" "$(jq -c .choices[0].text "$T_TMP/j.3")"
apost /v1/completions '{"prompt":"hi","response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}' >"$T_TMP/e"
check_eq "json_schema with properties: refused naming the keyword" "$(jq -r .error.param "$T_TMP/e")" \
    "response_format.json_schema.schema.properties"
check_eq "... code unsupported_parameter" "$(jq -r .error.code "$T_TMP/e")" "unsupported_parameter"
apost /v1/completions '{"prompt":"hi","response_format":{"type":"regex"}}' >"$T_TMP/e"
check_eq "an unknown response_format type: 400 naming response_format" "$(jq -r .error.param "$T_TMP/e")" "response_format"

# ---- the official openai client ----
if ! python3 -c 'import openai' 2>/dev/null; then
    skip "the openai Python package is not installed (make pydeps installs it)"
    stop_serve
    finish
    exit $?
fi
python3 - "$SRV_URL" >"$T_TMP/py" 2>&1 <<'PY'
import json, sys
import openai
url = sys.argv[1] + "/v1"
c = openai.OpenAI(base_url=url, api_key="sk-openai", max_retries=0)
print("version", openai.__version__)
print("models", ",".join(m.id for m in c.models.list()))
print("retrieve", c.models.retrieve("tiny-b").id)
r = c.completions.create(model="tiny-b", prompt="hello", max_tokens=4, temperature=0)
print("completion", r.model, r.usage.completion_tokens, r.choices[0].finish_reason)
r = c.chat.completions.create(model="tiny-a", messages=[{"role": "user", "content": "hi"}],
                              max_tokens=4, seed=1)
print("chat", r.usage.completion_tokens, r.choices[0].message.role)
n = sum(1 for ch in c.chat.completions.create(
    model="tiny-a", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True,
    stream_options={"include_usage": True}) if ch.usage)
print("stream_usage_chunks", n)
ok = stops = 0
for seed in range(1, 9):
    r = c.chat.completions.create(model="tiny-a", messages=[{"role": "user", "content": "hi"}],
                                  max_tokens=64, seed=seed, response_format={"type": "json_object"})
    ch = r.choices[0]
    if ch.finish_reason == "stop":
        stops += 1
        ok += isinstance(json.loads(ch.message.content), dict)
print("json_object", stops, ok)
try:
    c.chat.completions.create(model="tiny-a", messages=[{"role": "user", "content": "hi"}],
                              response_format={"type": "json_schema", "json_schema": {
                                  "name": "p", "schema": {"type": "object", "required": ["a"]}}})
    print("json_schema accepted")
except openai.BadRequestError as e:
    print("json_schema", e.status_code, e.body.get("param"))
try:
    openai.OpenAI(base_url=url, api_key="sk-wrong", max_retries=0).models.list()
    print("wrong_key accepted")
except openai.AuthenticationError as e:
    print("wrong_key", e.status_code, e.body.get("code"))
try:
    c.completions.create(model="tiny-c", prompt="x", max_tokens=1)
    print("unknown_model accepted")
except openai.NotFoundError as e:
    print("unknown_model", e.status_code)
PY
cat "$T_TMP/py"
val() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$T_TMP/py"; }
check_eq "openai: models.list" "$(val models)" "tiny-a,tiny-b"
check_eq "openai: models.retrieve" "$(val retrieve)" "tiny-b"
check_eq "openai: completions (model, tokens, finish)" "$(val completion)" "tiny-a 4 length"
check_eq "openai: chat" "$(val chat)" "4 assistant"
check_eq "openai: stream with include_usage" "$(val stream_usage_chunks)" "1"
js=$(val json_object)
check "openai: json_object answers that stop parse as objects ($js)" \
    sh -c "[ -n '$js' ] && [ '${js% *}' = '${js#* }' ]"
check_eq "openai: json_schema with required: BadRequestError naming it" "$(val json_schema)" \
    "400 response_format.json_schema.schema.required"
check_eq "openai: a wrong key: AuthenticationError" "$(val wrong_key)" "401 invalid_api_key"
check_eq "openai: another model: NotFoundError" "$(val unknown_model)" "404"
stop_serve
finish
