# serve_guard: who may use `fp4serve serve` and how (docs/reliability.md
# G1-G5): --api-key (and FP4SERVE_API_KEY) refuses requests without the
# bearer token with 401 in OpenAI's error shape, before any 404, while
# /health and /metrics stay open unless --api-key-all; CORS headers and
# the preflight follow --allowed-origins (vLLM's default "*"); the model
# answers to every --served-model-name (vLLM's "a b c" form) and to
# --alias; HTTPS with a self-made certificate (--ssl-keyfile,
# --ssl-certfile), and one-line refusals of a bad key pair or origin list.
. tests/lib.sh
need jq

model=$(tiny_model)
# code [CURL ARGS...]: the status of a request to $SRV_URL (path last)
code() {
    _p=$1
    shift
    curl -s -o "$T_TMP/body" -D "$T_TMP/head" -w '%{http_code}' "$@" "$SRV_URL$_p"
}
hdr() { tr -d '\r' <"$T_TMP/head" | awk -v h="$1" 'tolower($0) ~ "^" tolower(h) ":" { sub(/^[^:]*: */, ""); print; exit }'; }
body='{"prompt":"hi","max_tokens":2}'

# ---- G1: the key, from the environment ----
FP4SERVE_API_KEY=sk-test-1 start_serve "$model" --threads 1 --served-model-name first second \
    --alias third || { fail "server start with FP4SERVE_API_KEY"; finish; exit 1; }
check "log says a key is required" grep -q "API key required" "$SRV_LOG"
check_eq "/health without the key: 200" "$(code /health)" "200"
check_eq "/metrics without the key: 200" "$(code /metrics)" "200"
check_eq "/v1/models without the key: 401" "$(code /v1/models)" "401"
check_eq "401: OpenAI's code" "$(jq -r .error.code "$T_TMP/body")" "invalid_api_key"
check_eq "401: OpenAI's type" "$(jq -r .error.type "$T_TMP/body")" "invalid_request_error"
check "401: says what to send" jq -e '.error.message | test("Authorization: Bearer")' "$T_TMP/body"
check_eq "401: WWW-Authenticate: Bearer" "$(hdr WWW-Authenticate)" "Bearer"
check_eq "completions without the key: 401" "$(code /v1/completions --data-binary "$body")" "401"
check_eq "a wrong key: 401" "$(code /v1/completions -H 'Authorization: Bearer sk-test-2' --data-binary "$body")" "401"
check_eq "a wrong key: says so" "$(jq -r .error.message "$T_TMP/body")" "incorrect API key provided"
check_eq "a prefix of the key: 401" "$(code /v1/models -H 'Authorization: Bearer sk-test-')" "401"
check_eq "basic auth: 401" "$(code /v1/models -u user:sk-test-1)" "401"
check_eq "an unknown route without the key: 401, not 404" "$(code /no/such)" "401"
check_eq "an unknown route with the key: 404" "$(code /no/such -H 'Authorization: Bearer sk-test-1')" "404"
AUTH='Authorization: Bearer sk-test-1'
check_eq "completions with the key: 200" "$(code /v1/completions -H "$AUTH" --data-binary "$body")" "200"
check_eq "tokenize with the key: 200" "$(code /tokenize -H "$AUTH" --data-binary '{"prompt":"hi"}')" "200"
check_eq "tokenize without the key: 401" "$(code /tokenize --data-binary '{"prompt":"hi"}')" "401"

# ---- G4: served names ----
check_eq "/v1/models lists every served name" \
    "$(curl -s -H "$AUTH" "$SRV_URL/v1/models" | jq -c '[.data[].id]')" '["first","second","third"]'
for m in first second third; do
    check_eq "model '$m' accepted" \
        "$(code /v1/completions -H "$AUTH" --data-binary "{\"model\":\"$m\",\"prompt\":\"hi\",\"max_tokens\":1}")" "200"
    check_eq "model '$m': the answer names the first" "$(jq -r .model "$T_TMP/body")" "first"
    check_eq "GET /v1/models/$m: 200" "$(code "/v1/models/$m" -H "$AUTH")" "200"
done
check_eq "another model name: 404" \
    "$(code /v1/completions -H "$AUTH" --data-binary '{"model":"fourth","prompt":"hi"}')" "404"

# ---- G3: CORS, vLLM's default "*" ----
check_eq "a cross-origin request: 200" "$(code /v1/models -H "$AUTH" -H 'Origin: https://app.example')" "200"
check_eq "... with Access-Control-Allow-Origin: *" "$(hdr Access-Control-Allow-Origin)" "*"
code /v1/models -H "$AUTH" >/dev/null
check_eq "no Origin: no CORS header" "$(hdr Access-Control-Allow-Origin)" ""
check_eq "a 401 carries the CORS header too (the page can read why)" \
    "$(code /v1/models -H 'Origin: https://app.example')/$(hdr Access-Control-Allow-Origin)" "401/*"
pre() {
    code /v1/chat/completions -X OPTIONS -H "Origin: $1" -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: authorization, content-type'
}
check_eq "preflight without the key: 200 (browsers send none)" "$(pre https://app.example)" "200"
check_eq "preflight: origin" "$(hdr Access-Control-Allow-Origin)" "*"
check "preflight: POST allowed" sh -c "echo '$(hdr Access-Control-Allow-Methods)' | grep -q POST"
check_eq "preflight: the asked headers allowed" "$(hdr Access-Control-Allow-Headers)" "authorization, content-type"
check_eq "OPTIONS that is not a preflight: 405 as before" "$(code /v1/models -X OPTIONS -H "$AUTH")" "405"
stop_serve

# ---- G2, G3: --api-key-all (the flag beats the environment), listed origins ----
# (started by hand: start_serve's readiness poll has no key)
SRV_PORT=$(free_port)
SRV_URL="http://127.0.0.1:$SRV_PORT"
SRV_LOG="$T_TMP/all.log"
FP4SERVE_API_KEY=sk-env "$FP4SERVE" serve --model "$model" --port "$SRV_PORT" --threads 1 \
    --api-key sk-flag --api-key-all \
    --allowed-origins '["https://a.example", "http://b.example:8080"]' >"$SRV_LOG" 2>&1 &
SRV_PID=$!
track_pid $SRV_PID
wait_up "fp4serve --api-key-all" 30 "$SRV_LOG" curl -fs -H 'Authorization: Bearer sk-flag' "$SRV_URL/health" ||
    { finish; exit 1; }
check_eq "--api-key-all: /health without the key: 401" "$(code /health)" "401"
check_eq "--api-key-all: /metrics without the key: 401" "$(code /metrics)" "401"
check_eq "--api-key-all: /health with the key: 200" "$(code /health -H 'Authorization: Bearer sk-flag')" "200"
check_eq "--api-key wins over FP4SERVE_API_KEY" "$(code /health -H 'Authorization: Bearer sk-env')" "401"
AUTH='Authorization: Bearer sk-flag'
check_eq "a listed origin: 200" "$(code /v1/models -H "$AUTH" -H 'Origin: http://b.example:8080')" "200"
check_eq "... echoed" "$(hdr Access-Control-Allow-Origin)" "http://b.example:8080"
check_eq "... with Vary: Origin" "$(hdr Vary)" "Origin"
check_eq "an unlisted origin: served" "$(code /v1/models -H "$AUTH" -H 'Origin: https://evil.example')" "200"
check_eq "... without a CORS header" "$(hdr Access-Control-Allow-Origin)" ""
check_eq "preflight from a listed origin: 200" "$(pre https://a.example)" "200"
check_eq "preflight from an unlisted origin: 400" "$(pre https://evil.example)" "400"
check "... naming the origin" jq -e '.error.message | test("https://evil.example")' "$T_TMP/body"
stream=$(curl -s -N -D "$T_TMP/head" -H "$AUTH" -H 'Origin: https://a.example' \
    --data-binary '{"prompt":"hi","max_tokens":2,"stream":true}' "$SRV_URL/v1/completions")
check_eq "a stream carries the CORS header" "$(hdr Access-Control-Allow-Origin)" "https://a.example"
check "... and its events" sh -c "echo '$stream' | grep -q '^data: \[DONE\]'"
stop_serve

# ---- G4: the --flag=value spelling of several names; a stray word is still refused ----
start_serve "$model" --threads 1 --served-model-name=x y || fail "server start with --served-model-name=x y"
check_eq "--served-model-name=x y: both served" "$(curl -s "$SRV_URL/v1/models" | jq -c '[.data[].id]')" '["x","y"]'
stop_serve
"$FP4SERVE" serve --model "$model" --threads 1 stray >"$T_TMP/o" 2>&1
check_eq "a stray word without the flag: exit 2" "$?" "2"

# ---- bad flags: one line each, usage status ----
"$FP4SERVE" serve --model "$model" --allowed-origins 'https://a.example,,x' >"$T_TMP/o" 2>&1
check_eq "--allowed-origins with an empty item: exit 2" "$?" "2"
check "... one line naming it" sh -c "[ \$(wc -l <'$T_TMP/o') = 1 ] && grep -q 'allowed-origins: an empty origin' '$T_TMP/o'"
"$FP4SERVE" serve --model "$model" --ssl-keyfile "$T_TMP/nope.pem" >"$T_TMP/o" 2>&1
check_eq "--ssl-keyfile alone: exit 2" "$?" "2"
check "... naming the missing flag" grep -q -- '--ssl-keyfile needs --ssl-certfile' "$T_TMP/o"

# ---- G5: HTTPS with a self-made certificate ----
need openssl
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T_TMP/key.pem" -out "$T_TMP/cert.pem" \
    -days 2 -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    >"$T_TMP/openssl.log" 2>&1 || fail "openssl made no certificate"
openssl genrsa -out "$T_TMP/other.pem" 2048 >>"$T_TMP/openssl.log" 2>&1
"$FP4SERVE" serve --model "$model" --port 0 --ssl-keyfile "$T_TMP/other.pem" \
    --ssl-certfile "$T_TMP/cert.pem" >"$T_TMP/o" 2>&1
check_eq "a key that is not the certificate's: exit 2" "$?" "2"
check "... GnuTLS's reason in the one line" grep -q 'cannot start HTTPS: .*do not match' "$T_TMP/o"
"$FP4SERVE" serve --model "$model" --port 0 --ssl-keyfile "$T_TMP/cert.pem" \
    --ssl-certfile "$T_TMP/key.pem" >"$T_TMP/o" 2>&1
check_eq "files swapped: exit 2" "$?" "2"
SRV_PORT=$(free_port)
SRV_LOG="$T_TMP/tls.log"
"$FP4SERVE" serve --model "$model" --port "$SRV_PORT" --threads 1 --ssl-keyfile "$T_TMP/key.pem" \
    --ssl-certfile "$T_TMP/cert.pem" >"$SRV_LOG" 2>&1 &
SRV_PID=$!
track_pid $SRV_PID
SRV_URL="https://127.0.0.1:$SRV_PORT"
wait_up "fp4serve over HTTPS" 30 "$SRV_LOG" curl -fs --cacert "$T_TMP/cert.pem" "$SRV_URL/health"
check "log says https" grep -q "listening on https://127.0.0.1:$SRV_PORT" "$SRV_LOG"
check_eq "HTTPS /health, the certificate verified: 200" "$(code /health --cacert "$T_TMP/cert.pem")" "200"
out=$(curl -s -N --cacert "$T_TMP/cert.pem" --data-binary \
    '{"prompt":"hi","max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' \
    "$SRV_URL/v1/completions")
check_eq "HTTPS stream: 4 tokens" \
    "$(echo "$out" | sed -n 's/^data: //p' | grep usage | jq -c .usage.completion_tokens)" "4"
check "HTTPS stream: [DONE]" sh -c "echo '$out' | tail -n 1 | grep -q '^data: \[DONE\]'"
check_eq "HTTPS non-streaming: 200" "$(code /v1/completions --cacert "$T_TMP/cert.pem" --data-binary "$body")" "200"
check_eq "plain HTTP to the HTTPS port: no answer" \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$SRV_PORT/health")" "000"
check_eq "still serving HTTPS after that" "$(code /health --cacert "$T_TMP/cert.pem")" "200"
stop_serve
check_eq "HTTPS server exits 0 on SIGTERM" "$?" "0"
finish
