# serve_stream: the wire format of `fp4serve serve` as `curl -N` sees it:
# SSE headers, one `data: <json>` event per token with no empty event before
# the first token, finish_reason on the last token, a usage event with
# "choices": [] when asked, then `data: [DONE]`; valid UTF-8 on every line;
# non-streaming answers are single JSON objects with usage; stop strings,
# max_tokens and end-of-generation end generations as documented.
. tests/lib.sh
need jq

model=$(tiny_model)
start_serve "$model" --threads 2 || { fail "server start"; finish; exit 1; }

# events FILE: one JSON payload per line (the [DONE] marker as the word DONE)
events() { sed -n 's/^data: //p' "$1" | sed 's/^\[DONE\]$/"DONE"/'; }

body='{"prompt":"Hello world","max_tokens":20,"ignore_eos":true,"temperature":0,
       "stream":true,"stream_options":{"include_usage":true}}'
curl -s -N -D "$T_TMP/h" -H 'Content-Type: application/json' --data-binary "$body" \
    "$SRV_URL/v1/completions" >"$T_TMP/s"
check "stream: status 200" grep -q '^HTTP/1.1 200' "$T_TMP/h"
check "stream: Content-Type text/event-stream" grep -qi '^Content-Type: text/event-stream' "$T_TMP/h"
check "stream: Cache-Control no-cache" grep -qi '^Cache-Control: no-cache' "$T_TMP/h"
check "stream: chunked transfer" grep -qi '^Transfer-Encoding: chunked' "$T_TMP/h"
check "stream: every line is 'data: ...' or blank" \
    sh -c "! grep -v -e '^data: ' -e '^\$' '$T_TMP/s'"
check "stream: events separated by blank lines" \
    sh -c "[ \$(grep -c '^data: ' '$T_TMP/s') -eq \$(grep -c '^\$' '$T_TMP/s') ]"
check "stream: every event is JSON" sh -c "events() { sed -n 's/^data: //p' \"\$1\" | sed 's/^\\[DONE\\]\$/\"DONE\"/'; }; events '$T_TMP/s' | jq -e . >/dev/null"
events "$T_TMP/s" >"$T_TMP/ev"
n_ev=$(wc -l <"$T_TMP/ev")
check_eq "stream: the last event is [DONE]" "$(tail -n 1 "$T_TMP/ev")" '"DONE"'
check "stream: the first event carries text" \
    sh -c "head -n 1 '$T_TMP/ev' | jq -e '.choices[0].text | length > 0' >/dev/null"
check_eq "stream: no event before the first token is empty" \
    "$(head -n $((n_ev - 2)) "$T_TMP/ev" | jq -s '[.[] | select(.choices[0].finish_reason == null and .choices[0].text == "")] | length')" "0"
usage=$(sed -n "$((n_ev - 1))p" "$T_TMP/ev")
check_eq "stream: usage event has choices []" "$(echo "$usage" | jq -c .choices)" "[]"
check_eq "stream: usage completion_tokens = max_tokens" "$(echo "$usage" | jq .usage.completion_tokens)" "20"
check_eq "stream: usage total = prompt + completion" \
    "$(echo "$usage" | jq '.usage.total_tokens == .usage.prompt_tokens + .usage.completion_tokens')" "true"
check_eq "stream: finish_reason length on the last token event" \
    "$(sed -n "$((n_ev - 2))p" "$T_TMP/ev" | jq -r '.choices[0].finish_reason')" "length"
check_eq "stream: one event per token" "$((n_ev - 2))" "20"
check_eq "stream: object text_completion" "$(head -n 1 "$T_TMP/ev" | jq -r .object)" "text_completion"
check_eq "stream: one id for the whole stream" \
    "$(head -n $((n_ev - 1)) "$T_TMP/ev" | jq -r .id | sort -u | wc -l)" "1"

# without include_usage: no usage event
post /v1/completions '{"prompt":"Hello","max_tokens":5,"ignore_eos":true,"stream":true}' >"$T_TMP/s2"
check_eq "stream without include_usage: no usage event" "$(grep -c '"usage"' "$T_TMP/s2")" "0"
check_eq "stream without include_usage: ends with [DONE]" "$(grep '^data: ' "$T_TMP/s2" | tail -n 1)" "data: [DONE]"

# chat: the first chunk carries the role together with the first content
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,
    "ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' >"$T_TMP/c"
events "$T_TMP/c" >"$T_TMP/cev"
first=$(head -n 1 "$T_TMP/cev")
check_eq "chat stream: object chat.completion.chunk" "$(echo "$first" | jq -r .object)" "chat.completion.chunk"
check_eq "chat stream: first chunk has role assistant" "$(echo "$first" | jq -r .choices[0].delta.role)" "assistant"
# (read from the file: dash's echo would turn a "\n" in the JSON into a newline)
check "chat stream: first chunk has content" \
    sh -c "head -n 1 '$T_TMP/cev' | jq -e '.choices[0].delta.content | length > 0' >/dev/null"
check_eq "chat stream: later chunks have no role" \
    "$(sed -n '2,$p' "$T_TMP/cev" | grep -c '"role"')" "0"
check_eq "chat stream: usage completion_tokens" \
    "$(grep -v DONE "$T_TMP/cev" | tail -n 1 | jq .usage.completion_tokens)" "6"

# non-streaming: one JSON object with usage
post /v1/completions '{"prompt":"Hello world","max_tokens":7,"ignore_eos":true}' >"$T_TMP/j"
check "non-stream: valid JSON" sh -c "jq -e . '$T_TMP/j' >/dev/null"
check_eq "non-stream: object" "$(jq -r .object "$T_TMP/j")" "text_completion"
check_eq "non-stream: usage.completion_tokens" "$(jq .usage.completion_tokens "$T_TMP/j")" "7"
check_eq "non-stream: usage.prompt_tokens" "$(jq .usage.prompt_tokens "$T_TMP/j")" "6"
check_eq "non-stream: finish_reason" "$(jq -r .choices[0].finish_reason "$T_TMP/j")" "length"
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":3,"ignore_eos":true}' >"$T_TMP/cj"
check_eq "chat non-stream: message role" "$(jq -r .choices[0].message.role "$T_TMP/cj")" "assistant"
check_eq "chat non-stream: usage" "$(jq .usage.completion_tokens "$T_TMP/cj")" "3"
check_eq "non-stream: Content-Type" \
    "$(curl -s -o /dev/null -w '%{content_type}' --data-binary '{"prompt":"a","max_tokens":1}' "$SRV_URL/v1/completions")" \
    "application/json"

# stop strings: the text ends right before the first occurrence, finish_reason stop
post /v1/completions '{"prompt":"the cat","max_tokens":40,"ignore_eos":true,"temperature":0.8,"seed":3}' |
    jq -j .choices[0].text >"$T_TMP/full"
# the stop string: characters 3 and 4 of that text; the answer: what precedes them
python3 - "$T_TMP" <<'PY'
import sys
d = sys.argv[1]
t = open(d + "/full", encoding="utf-8").read()
open(d + "/stop", "w", encoding="utf-8").write(t[3:5])
open(d + "/want", "w", encoding="utf-8").write(t[:t.find(t[3:5])])
PY
want=$(cat "$T_TMP/want")
for stream in false true; do
    body=$(jq -cn --rawfile s "$T_TMP/stop" --argjson st $stream \
        '{prompt:"the cat",max_tokens:40,ignore_eos:true,temperature:0.8,seed:3,stop:[$s],stream:$st}')
    post /v1/completions "$body" >"$T_TMP/stopped"
    if [ $stream = true ]; then
        got=$(stream_text <"$T_TMP/stopped")
        fr=$(events "$T_TMP/stopped" | grep -v DONE | tail -n 1 | jq -r .choices[0].finish_reason)
    else
        got=$(jq -j .choices[0].text "$T_TMP/stopped")
        fr=$(jq -r .choices[0].finish_reason "$T_TMP/stopped")
    fi
    check_eq "stop string (stream $stream): text before it" "$got" "$want"
    check_eq "stop string (stream $stream): finish_reason" "$fr" "stop"
done

# end of generation: finish_reason stop exactly when fewer than max_tokens came
post /v1/completions '{"prompt":[10,20,30,2],"max_tokens":50,"temperature":1.5,"seed":11}' >"$T_TMP/e"
fr=$(jq -r .choices[0].finish_reason "$T_TMP/e")
ct=$(jq .usage.completion_tokens "$T_TMP/e")
check "finish_reason '$fr' agrees with $ct of 50 tokens" \
    sh -c "[ '$fr' = stop ] && [ $ct -lt 50 ] || [ '$fr' = length ] && [ $ct -eq 50 ]"

# UTF-8: random bytes from a hot sampler still stream as valid UTF-8 lines
post /v1/completions '{"prompt":"x","max_tokens":200,"ignore_eos":true,"temperature":2,
    "seed":5,"stream":true}' >"$T_TMP/u"
check "utf-8: every streamed line is valid UTF-8" iconv -f UTF-8 -t UTF-8 "$T_TMP/u" -o /dev/null
check "utf-8: every event is JSON" sh -c "sed -n 's/^data: //p' '$T_TMP/u' | grep -v '^\\[DONE\\]' | jq -e . >/dev/null"

# /v1/models and /metrics
check_eq "models: id" "$(curl -s "$SRV_URL/v1/models" | jq -r '.data[0].id')" "tiny"
check_eq "models: meta.n_vocab" "$(curl -s "$SRV_URL/v1/models" | jq '.data[0].meta.n_vocab')" "512"
check_eq "models: meta.n_ctx" "$(curl -s "$SRV_URL/v1/models" | jq '.data[0].meta.n_ctx')" "256"
# GET /v1/models/{id}: the same object as in the list; another id is a 404 naming it
check_eq "models/{id}: the list's object" "$(curl -s "$SRV_URL/v1/models/tiny" | jq -cS .)" \
    "$(curl -s "$SRV_URL/v1/models" | jq -cS '.data[0]')"
check_eq "models/{id}: unknown id is 404" \
    "$(curl -s -o "$T_TMP/mnf" -w '%{http_code}' "$SRV_URL/v1/models/nosuch")" "404"
check_eq "models/{id}: the error names the model" "$(jq -r '.error.param + ": " + .error.message' "$T_TMP/mnf")" \
    "model: model 'nosuch' does not exist (this server serves 'tiny')"
check_eq "models/{id}: OpenAI's code" "$(jq -r .error.code "$T_TMP/mnf")" model_not_found
check_eq "models/: an empty id is no route" \
    "$(curl -s -o /dev/null -w '%{http_code}' "$SRV_URL/v1/models/")" "404"
check_eq "models/{id}: POST is 405" \
    "$(curl -s -o /dev/null -w '%{http_code}' -d x "$SRV_URL/v1/models/tiny")" "405"
curl -s "$SRV_URL/metrics" >"$T_TMP/m"
for name in fp4serve_requests_total fp4serve_prompt_tokens_total fp4serve_generation_tokens_total \
    fp4serve_steps_total fp4serve_step_sequences_total fp4serve_step_phase_seconds_total \
    fp4serve_queue_length fp4serve_running_sequences fp4serve_kv_slots_free \
    fp4serve_open_connections; do
    check "metrics: $name" grep -q "^$name" "$T_TMP/m"
done
check "metrics: attention time counted" \
    sh -c "awk '/phase=\"attention\"/ { exit !(\$2 > 0) }' '$T_TMP/m'"

# "\u0000" is valid JSON: a prompt holding it is taken (not a 400), and
# tokenized to its full length, not cut at the NUL
ptok() { post /v1/completions "{\"prompt\":\"$1\",\"max_tokens\":1}" | jq .usage.prompt_tokens; }
n_a=$(ptok 'a')
n_nul=$(ptok 'a\u0000\u0000\u0000')
check "a prompt with NUL is tokenized to its end ($n_nul tokens, 'a' alone $n_a)" \
    [ "${n_nul:-0}" -gt "${n_a:-99}" ]
post /v1/chat/completions '{"messages":[{"role":"user","content":"x\u0000y"}],"max_tokens":2,
    "stream":true,"stop":"\u0000"}' >"$T_TMP/nul"
check_eq "a chat stream with NUL in content and stop ends with [DONE]" "$(tail -n 2 "$T_TMP/nul" | head -n 1)" \
    "data: [DONE]"

# keep-alive: GET answers leave the connection open for the next request
# (an answer queued with the headers would make libmicrohttpd close it)
curl -s -D "$T_TMP/kh" -o /dev/null -o /dev/null -w '%{num_connects}\n' \
    "$SRV_URL/health" "$SRV_URL/metrics" >"$T_TMP/kc"
check_eq "keep-alive: /health then /metrics on one connection" "$(tr '\n' ' ' <"$T_TMP/kc")" "1 0 "
check "keep-alive: /health does not say Connection: close" \
    sh -c "! grep -qi '^Connection: close' '$T_TMP/kh'"

stop_serve
check_eq "server exits 0 on SIGTERM" "$?" "0"
finish
