# serve_badinput: every kind of bad request gets its 4xx with an
# OpenAI-style error body that names the field, is logged, and leaves the
# server answering /health (docs/reliability.md S2-S8).
. tests/lib.sh
need jq

model=$(tiny_model)
start_serve "$model" --threads 1 --max-body 65536 || { fail "server start"; finish; exit 1; }

# bad STATUS TYPE PARAM MESSAGE PATH [CURL_ARGS...]: send, then check the
# status, the error body, and that /health still answers.
bad() {
    local status=$1 type=$2 param=$3 msg=$4 path=$5
    shift 5
    got=$(curl -s -o "$T_TMP/body" -w '%{http_code}' "$@" "$SRV_URL$path")
    check_eq "$msg: status" "$got" "$status"
    if [ -n "$type" ]; then
        N_OURS=$((N_OURS + 1))
        check_eq "$msg: error.type" "$(jq -r .error.type "$T_TMP/body" 2>&1)" "$type"
        check "$msg: error.code is OpenAI's (a string or null, never the status)" \
            jq -e '.error.code | type == "string" or type == "null"' "$T_TMP/body"
        check_eq "$msg: error.param" "$(jq -r '.error.param // ""' "$T_TMP/body" 2>&1)" "$param"
        check "$msg: message says '$msg'" grep -qF -- "$msg" "$T_TMP/body"
    fi
    check_eq "$msg: /health still 200" "$(curl -s -o /dev/null -w '%{http_code}' "$SRV_URL/health")" "200"
}
J=(-H 'Content-Type: application/json')
N_OURS=0 # refusals answered with our error body (each must be logged)
C=/v1/completions

bad 400 invalid_request_error "" "malformed JSON at line 1, column 2" $C "${J[@]}" --data-binary '{:'
bad 400 invalid_request_error "" "the request body is empty" $C "${J[@]}" --data-binary ''
bad 400 invalid_request_error "" "must be a JSON object (got an array)" $C "${J[@]}" --data-binary '[1]'
bad 400 invalid_request_error max_tokens "'max_tokens' must be an integer (got a string)" $C \
    "${J[@]}" --data-binary '{"prompt":"hi","max_tokens":"x"}'
bad 400 invalid_request_error messages "'messages' must be an array of messages (got an object)" \
    /v1/chat/completions "${J[@]}" --data-binary '{"messages":{}}'
bad 400 invalid_request_error temperature "'temperature' must be a number" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","temperature":"hot"}'
bad 400 invalid_request_error stream "'stream' must be a boolean" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","stream":"yes"}'
bad 404 not_found_error model "model 'gpt-4' does not exist" $C "${J[@]}" \
    --data-binary '{"model":"gpt-4","prompt":"hi"}'
printf '{"prompt":"caf\xc3 x"}' >"$T_TMP/utf8"
bad 400 invalid_request_error "" "not valid UTF-8" $C "${J[@]}" --data-binary "@$T_TMP/utf8"
bad 400 invalid_request_error max_tokens "'max_tokens' is 0; it must be at least 1" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","max_tokens":0}'
bad 400 invalid_request_error max_tokens "'max_tokens' is -5; it must be at least 1" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","max_tokens":-5}'
bad 400 invalid_request_error max_tokens \
    "this model's context is 256 tokens; the request has 1 prompt tokens plus 2147483647 max_tokens" \
    $C "${J[@]}" --data-binary '{"prompt":"hi","max_tokens":2147483647}'
bad 400 invalid_request_error max_tokens "plus 256 max_tokens (at most 255 fit)" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","max_tokens":256}'
# huge values are quoted as sent (not clamped to 2^40), under the name they came with
bad 400 invalid_request_error max_tokens "plus 1099511627777 max_tokens (at most 255 fit)" $C \
    "${J[@]}" --data-binary '{"prompt":"hi","max_tokens":1099511627777}'
bad 400 invalid_request_error max_completion_tokens \
    "plus 9223372036854775807 max_completion_tokens (at most" /v1/chat/completions "${J[@]}" \
    --data-binary '{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":9223372036854775807}'
bad 400 invalid_request_error top_k "'top_k' is 2147483648; it must be at most 2147483647" $C \
    "${J[@]}" --data-binary '{"prompt":"hi","top_k":2147483648}'
bad 400 invalid_request_error seed "'seed' is 18446744073709551616, out of range" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","seed":18446744073709551616}'
long=$(printf 'tokens and more %.0s' $(seq 1 120))
for stream in false true; do
    bad 400 invalid_request_error prompt "which leaves no room in the context of 256 tokens" $C \
        "${J[@]}" -D "$T_TMP/h" --data-binary "{\"prompt\":\"$long\",\"stream\":$stream}"
    check_eq "prompt too long (stream $stream): code" "$(jq -r .error.code "$T_TMP/body")" context_length_exceeded
    check "prompt too long (stream $stream): JSON error, not an event stream" \
        grep -qi '^Content-Type: application/json' "$T_TMP/h"
    check "prompt too long (stream $stream): no SSE byte" sh -c "! grep -q '^data:' '$T_TMP/body'"
done
bad 400 invalid_request_error messages "more than the context of 256 tokens can hold" \
    /v1/chat/completions "${J[@]}" --data-binary "$(jq -cn --arg c "$(head -c 30000 /dev/zero | tr '\0' x)" \
    '{messages: [{role: "user", content: $c}]}')"
bad 400 invalid_request_error prompt "'prompt[1]' is token id 512, outside [0, 512)" $C "${J[@]}" \
    --data-binary '{"prompt":[1,512]}'
bad 400 invalid_request_error n "'n' is 200; it must be in [1, 128]" $C "${J[@]}" \
    --data-binary '{"prompt":"hi","n":200}'
bad 400 invalid_request_error prompt "the prompt[1] is 300 tokens, which leaves no room" $C "${J[@]}" \
    --data-binary "$(jq -cn '{prompt: [[1, 2], [range(300) | 5]]}')"
# fields that change the answer are refused by name, not ignored
bad 400 invalid_request_error typical_p "field 'typical_p' is not supported by this server (only 1)" \
    $C "${J[@]}" --data-binary '{"prompt":"hi","typical_p":0.5}'
bad 400 invalid_request_error tool_choice "field 'tool_choice' is not supported by this server" \
    /v1/chat/completions "${J[@]}" \
    --data-binary '{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}'
# unknown fields are ignored (as vLLM does) and named in the log
check_eq "an unknown field is ignored" \
    "$(post $C '{"prompt":"hi","max_tokens":1,"frobnicate":7}' | jq .usage.completion_tokens)" "1"
check "the ignored field is named in the log" grep -q "ignored unknown fields 'frobnicate'" "$SRV_LOG"
bad 400 invalid_request_error messages "'messages' is missing" /v1/chat/completions "${J[@]}" \
    --data-binary '{"prompt":"hi"}'
bad 400 invalid_request_error "messages[0].role" "'messages[0].role' is 'robot'" /v1/chat/completions \
    "${J[@]}" --data-binary '{"messages":[{"role":"robot","content":"x"}]}'
bad 400 invalid_request_error prompt "'prompt' has no tokens" $C "${J[@]}" --data-binary '{"prompt":""}'

# sizes: body, headers, request target
head -c 70000 /dev/zero | tr '\0' ' ' >"$T_TMP/big"
bad 413 invalid_request_error "" "the request body is 70000 bytes (at most 65536; --max-body)" $C \
    "${J[@]}" --data-binary "@$T_TMP/big"
bad 413 invalid_request_error "" "the request body passed 65536 bytes" $C "${J[@]}" \
    -H 'Transfer-Encoding: chunked' --data-binary "@$T_TMP/big"
hdrs=()
for i in $(seq 1 101); do hdrs+=(-H "X-Filler-$i: v"); done
bad 431 invalid_request_error "" "header fields (at most 100)" /health "${hdrs[@]}"
bad 431 invalid_request_error "" "header field 'X-Long' is" /health -H "X-Long: $(head -c 9000 /dev/zero | tr '\0' a)"
bad 431 "" "" "a 64 KiB header line" /health -H "X-Huge: $(head -c 65536 /dev/zero | tr '\0' a)"
bad 414 invalid_request_error "" "the request target is too long" "/v1/$(head -c 16384 /dev/zero | tr '\0' a)"
bad 414 invalid_request_error "" "the request target is too long" \
    "/health?a=$(head -c 9000 /dev/zero | tr '\0' a)"
# a 4 KiB query of three arguments is well under the 8 KiB limit
check_eq "a 4 KiB request target is served" "$(curl -s -o /dev/null -w '%{http_code}' \
    "$SRV_URL/health?a=$(head -c 4000 /dev/zero | tr '\0' a)&b=1&c=1")" "200"

# body framing (RFC 9112 §6): raw requests, since curl will not send these.
# raw NAME: send the bytes printf makes of the rest of the arguments, print
# the status code, the error message and whether the server closed the
# connection after answering; "none" when no answer came within 20 s.
cat >"$T_TMP/raw.py" <<'PY'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(20)
s.sendall(sys.stdin.buffer.read())
data = b""
try:
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(
            ([l.split(b":")[1] for l in data.split(b"\r\n") if l.lower().startswith(b"content-length:")] or [b"0"])[0]):
        d = s.recv(65536)
        if not d:
            break
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        msg = json.loads(body)["error"]["message"]
    except Exception:
        msg = "-"
    s.settimeout(5)
    closed = "closed" if s.recv(1) == b"" else "open"
except (socket.timeout, ConnectionError):
    head, msg, closed = b"", "", ""
print(head.split(b" ")[1].decode() if head else "none", msg, closed, sep="|")
PY
raw() { printf "$@" | python3 "$T_TMP/raw.py" "$SRV_PORT"; }
rq='{"prompt":"hi","max_tokens":2}' # 30 bytes
P="POST $C HTTP/1.1\r\nHost: x\r\n"
check_eq "two different Content-Length fields: 400, closed" \
    "$(raw "${P}Content-Length: 30\r\nContent-Length: 5\r\n\r\n$rq")" \
    "400|the request has 2 Content-Length fields with different values|closed"
check_eq "the same Content-Length twice is one length" \
    "$(raw "${P}Content-Length: 30\r\nContent-Length: 30\r\nConnection: close\r\n\r\n$rq" | cut -d'|' -f1)" "200"
check_eq "Content-Length with Transfer-Encoding: 400, closed" \
    "$(raw "${P}Content-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n1e\r\n$rq\r\n0\r\n\r\n")" \
    "400|the request has both Content-Length and Transfer-Encoding (send one)|closed"
check_eq "Transfer-Encoding twice: 400" \
    "$(raw "${P}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n1e\r\n$rq\r\n0\r\n\r\n")" \
    "400|the request has 2 Transfer-Encoding fields (send one: chunked)|closed"
check_eq "an unknown transfer coding: 501 at once" \
    "$(raw "${P}Transfer-Encoding: gzip, chunked\r\n\r\n1e\r\n$rq\r\n0\r\n\r\n")" \
    "501|transfer coding 'gzip, chunked' is not supported (only chunked)|closed"
check_eq "Transfer-Encoding in HTTP/1.0: 400" \
    "$(raw "POST $C HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n1e\r\n$rq\r\n0\r\n\r\n")" \
    "400|Transfer-Encoding in an HTTP/1.0 request|closed"
check_eq "an HTTP/1.0 POST without a length: 411" "$(raw "POST $C HTTP/1.0\r\n\r\n$rq")" \
    "411|the request has no body length (send Content-Length or Transfer-Encoding: chunked)|closed"
# libmicrohttpd refuses these itself, before our handler: the status is its own
check_eq "a negative Content-Length: 400" "$(raw "${P}Content-Length: -5\r\n\r\n$rq" | cut -d'|' -f1)" "400"
check_eq "a garbage Content-Length: 400" "$(raw "${P}Content-Length: 3x\r\n\r\n$rq" | cut -d'|' -f1)" "400"
check_eq "an absolute-form request target is served (RFC 9112 3.2.2)" \
    "$(raw "POST http://127.0.0.1:$SRV_PORT$C HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\nConnection: close\r\n\r\n$rq" |
        cut -d'|' -f1)" "200"
# a chunked body that passes --max-body is answered as soon as it does, not
# when the client ends it: three 32 KiB chunks and no last chunk
head -c 32768 /dev/zero | tr '\0' ' ' >"$T_TMP/32k"
chunk="8000\r\n$(cat "$T_TMP/32k")\r\n"
check_eq "a chunked body over the limit, not ended: 413 and closed at once" \
    "$(raw "${P}Transfer-Encoding: chunked\r\n\r\n$chunk$chunk$chunk")" \
    "413|the request body passed 65536 bytes (--max-body)|closed"

# routes and methods
bad 404 not_found_error "" "no route for GET '/v2/nothing'" /v2/nothing
bad 405 invalid_request_error "" "method GET is not allowed on '/v1/completions' (use POST)" $C
bad 405 invalid_request_error "" "method POST is not allowed on '/health' (use GET)" /health \
    --data-binary x
check "405 names the allowed method" sh -c "curl -s -D - -o /dev/null '$SRV_URL$C' | grep -qi '^Allow: POST'"

# every refusal was logged; the counters saw them
check "each of the $N_OURS refusals is logged" sh -c "[ \$(grep -c 'warning: ' '$SRV_LOG') -ge $N_OURS ]"
check "log names the field" grep -q "400 invalid_request_error param max_tokens: 'max_tokens' is 0" "$SRV_LOG"
n400=$(metric 'fp4serve_requests_total{route="completions",status="400"}')
check "metrics count the 400s on /v1/completions ($n400)" [ "${n400:-0}" -ge 15 ]
# and the server still serves
check_eq "a good request after all that" \
    "$(post $C '{"prompt":"hi","max_tokens":3,"ignore_eos":true}' | jq .usage.completion_tokens)" "3"
stop_serve
check_eq "server exits 0 on SIGTERM" "$?" "0"
finish
