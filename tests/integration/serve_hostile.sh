# serve_hostile: fp4serve against clients that trickle, half-close, ask
# for answers too big to hold, or frame their bodies badly, and values at
# the edge of a field's range (docs/reliability.md W3-M5, W3-N1, W3-N2,
# W3-N3, W3-N20, W3-N22, W3-N23). Raw sockets come from python3.
. tests/lib.sh

command -v python3 >/dev/null || { echo "skip: python3 not found"; finish; exit 0; }
model=$(tiny_model)

# raw PORT REQUEST [SHUT_WR] [RECV_TIMEOUT_S]: send REQUEST (Python escapes
# such as \r\n are read) on a new connection, half-close it when SHUT_WR is
# 1, and print everything read until the server closes (or the timeout
# passes: then a last line "<timeout>"), as Python's repr of the bytes.
raw() {
    python3 - "$@" <<'PY'
import socket, sys
port, req = int(sys.argv[1]), sys.argv[2].encode().decode("unicode_escape").encode("latin1")
shut = len(sys.argv) > 3 and sys.argv[3] == "1"
s = socket.create_connection(("127.0.0.1", port))
s.sendall(req)
if shut:
    s.shutdown(socket.SHUT_WR)
s.settimeout(float(sys.argv[4]) if len(sys.argv) > 4 else 10)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except OSError:
    out += b"<timeout>"
sys.stdout.write(out.decode("latin1"))
PY
}
# post_req PATH BODY [VERSION]: an HTTP request with a Content-Length.
post_req() {
    printf 'POST %s HTTP/%s\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s' \
        "$1" "${3:-1.1}" "${#2}" "$2"
}

start_serve "$model" --threads 1 --ctx 2048 --max-body 65536 --max-connections 8 \
    --request-timeout 2 --timeout 60 || { fail "server start"; finish; exit 1; }

# ---- W3-N2: a client that half-closes after a whole request gets its answer ----
# (a non-stream answer comes only after all 200 tokens: 60 s to wait, not the
# default 10, which two test suites side by side on 2 cores once ran past)
body='{"prompt":"hi","max_tokens":200,"ignore_eos":true}'
raw "$SRV_PORT" "$(post_req /v1/completions "$body")" 1 60 >"$T_TMP/half"
check "half-close, non-stream (HTTP/1.1): a 100 Continue, then the 200" \
    grep -q '^HTTP/1.1 100 Continue' "$T_TMP/half"
check "half-close, non-stream: the whole answer (200 tokens)" \
    sh -c "sed -n '/^{/,\$p' '$T_TMP/half' | jq -s -e 'length == 1 and .[0].usage.completion_tokens == 200' >/dev/null"
raw "$SRV_PORT" "$(post_req /v1/completions "$body" 1.0)" 1 60 >"$T_TMP/half10"
check "half-close, non-stream (HTTP/1.0): no interim answer" sh -c "! grep -q ' 100 ' '$T_TMP/half10'"
check "half-close, non-stream (HTTP/1.0): the whole answer" \
    sh -c "sed -n '/^{/,\$p' '$T_TMP/half10' | jq -s -e 'length == 1 and .[0].usage.completion_tokens == 200' >/dev/null"
sbody='{"prompt":"hi","max_tokens":200,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}'
raw "$SRV_PORT" "$(post_req /v1/completions "$sbody")" 1 60 >"$T_TMP/halfs"
check_eq "half-close, stream: every token (usage: 200)" "$(grep '^data: {.*"usage":{' "$T_TMP/halfs" |
    tail -n 1 | sed 's/^data: //' | jq -c '.usage.completion_tokens' 2>&1)" "200"
check "half-close, stream: ends with finish_reason and [DONE]" \
    sh -c "grep -q '\"finish_reason\":\"length\"' '$T_TMP/halfs' && grep -q '^data: \[DONE\]' '$T_TMP/halfs'"
# a client that gives up (closes) while waiting is still noticed and cancelled
c0=$(metric 'fp4serve_requests_finished_total{reason="cancelled"}')
curl -s --max-time 0.3 --data-binary '{"prompt":"x","max_tokens":2000,"ignore_eos":true,"n":8}' \
    "$SRV_URL/v1/completions" >/dev/null
n=0
while [ $n -lt 100 ] && [ "$(metric fp4serve_running_sequences)" != 0 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "a closed non-stream client: its generation cancelled" \
    "$(metric 'fp4serve_requests_finished_total{reason="cancelled"}')" "$((c0 + 1))"

# ---- W3-N1: top_p below the smallest float keeps only the likeliest token ----
greedy=$(post /v1/completions '{"prompt":"hello","max_tokens":24,"temperature":0}' | jq -r '.choices[0].text')
for seed in 1 2 3; do
    got=$(post /v1/completions "{\"prompt\":\"hello\",\"max_tokens\":24,\"temperature\":1,\"top_p\":1e-300,\"seed\":$seed}" |
        jq -r '.choices[0].text')
    check_eq "top_p 1e-300, seed $seed: the greedy text (not top_p 1)" "$got" "$greedy"
done

# ---- W3-N3: an answer too big for a body is refused before any work ----
t0=$(date +%s%N)
code=$(curl -s --max-time 5 -o "$T_TMP/big" -w '%{http_code}' --data-binary \
    '{"prompt":["a","b","c","d","e","f","g","h"],"n":128,"max_tokens":1500,"logprobs":20,"ignore_eos":true}' \
    "$SRV_URL/v1/completions")
ms=$((($(date +%s%N) - t0) / 1000000))
check_eq "answer over 64 MiB: 400 at once ($ms ms)" "$code" "400"
check_eq "answer over 64 MiB: param logprobs" "$(jq -r .error.param "$T_TMP/big" 2>&1)" "logprobs"
check "answer over 64 MiB: says why" grep -q 'more than the 64 MiB a body may hold' "$T_TMP/big"
check_eq "answer over 64 MiB: no generation ran" "$(metric fp4serve_running_sequences)" "0"
code=$(curl -s -o "$T_TMP/big" -w '%{http_code}' --data-binary \
    '{"messages":[{"role":"user","content":"a"}],"n":128,"max_tokens":1500,"logprobs":true,"top_logprobs":20}' \
    "$SRV_URL/v1/chat/completions")
check_eq "chat answer over 64 MiB: 400, param top_logprobs" \
    "$code $(jq -r .error.param "$T_TMP/big" 2>&1)" "400 top_logprobs"
check_eq "the same, streamed (nothing held): accepted" "$(curl -s -o /dev/null -w '%{http_code}' \
    --max-time 60 --data-binary '{"prompt":"a","n":2,"max_tokens":20,"logprobs":20,"stream":true}' \
    "$SRV_URL/v1/completions")" "200"

# ---- W3-N20: /generate errors name the fields as sent ----
gen_err() { post /generate "$1" | jq -r '[.error.param, .error.message] | join(" | ")'; }
check_eq "/generate: input_ids[1][1] named" "$(gen_err '{"input_ids":[[1,2],[3,99999]]}')" \
    "input_ids | 'input_ids[1][1]' is token id 99999, outside [0, 512)"
check_eq "/generate: text[1] named" "$(gen_err '{"text":["a",""]}')" "text | 'text[1]' has no tokens"
check_eq "/generate: max_new_tokens 0 named" \
    "$(gen_err '{"text":"hi","sampling_params":{"max_new_tokens":0}}')" \
    "sampling_params.max_new_tokens | 'sampling_params.max_new_tokens' is 0; it must be at least 1 (0 only with echo)"
check "/generate: max_new_tokens past the context named" sh -c \
    "curl -s --data-binary '{\"text\":\"hi\",\"sampling_params\":{\"max_new_tokens\":5000}}' '$SRV_URL/generate' |
     jq -e '.error.param == \"sampling_params.max_new_tokens\" and (.error.message | test(\"plus 5000 sampling_params.max_new_tokens\"))' >/dev/null"

# ---- W3-N22: a malformed Content-Length: libmicrohttpd's own 400, exactly ----
# libmicrohttpd 0.9.75 refuses it while parsing the headers, before any
# handler of ours runs, and writes its status line and headers twice before
# its HTML body (a library defect); the bytes are pinned here so that a
# library change is noticed. The status is right and the connection closes.
raw "$SRV_PORT" 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n{}' 0 5 |
    sed 's/^Date: .*$/Date: -/' >"$T_TMP/cl"
printf 'HTTP/1.1 400 Bad Request\r\nDate: -\r\nConnection: close\r\nContent-Length: 138\r\n\r\nHTTP/1.1 400 Bad Request\r\nDate: -\r\nConnection: close\r\nContent-Length: 138\r\n\r\n<html><head><title>Request malformed</title></head><body>Your HTTP request has wrong value for <b>Content-Length</b> header.</body></html>' |
    sed 's/^Date: .*$/Date: -/' >"$T_TMP/cl.want"
check "malformed Content-Length: exactly libmicrohttpd's documented bytes, then close" \
    cmp -s "$T_TMP/cl" "$T_TMP/cl.want"

# ---- W3-N23: a chunk announced past --max-body, then silence: 408 at the request deadline ----
t0=$(date +%s%N)
raw "$SRV_PORT" 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFF\r\nab' 0 10 >"$T_TMP/chunk"
ms=$((($(date +%s%N) - t0) / 1000000))
check "huge chunk then silence: 408 at --request-timeout 2, not the 60 s idle timeout ($ms ms)" \
    sh -c "head -n 1 '$T_TMP/chunk' | grep -q '^HTTP/1.1 408 Request Timeout' && [ $ms -lt 5000 ]"
check "huge chunk: the 408 names --request-timeout" grep -q 'within 2 s (--request-timeout)' "$T_TMP/chunk"

# ---- W3-M5: trickling clients fill --max-connections 8; the deadline frees them ----
python3 - "$SRV_PORT" >"$T_TMP/trickle" 2>&1 <<'PY'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
def health():
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1) as r:
            return r.status
    except Exception:
        return 0
hdr = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
socks, data, pos = [], [], []
for i in range(8):  # half trickle their headers, half their bodies, a byte each 0.3 s
    socks.append(socket.create_connection(("127.0.0.1", port)))
    data.append(hdr + b"x" * 100 if i % 2 else hdr)
    pos.append(0)
t0, first_ok = time.monotonic(), None
while time.monotonic() - t0 < 6:
    for i, s in enumerate(socks):
        if pos[i] < len(data[i]) - 1:
            try:
                s.send(data[i][pos[i]:pos[i] + 1])
                pos[i] += 1
            except OSError:
                pass
    if first_ok is None and health() == 200:
        first_ok = time.monotonic() - t0
    time.sleep(0.3)
n408 = 0
for s in socks:
    s.settimeout(1)
    try:
        n408 += s.recv(64).startswith(b"HTTP/1.1 408 ")
    except OSError:
        pass
print("health_ok_after_s %s" % ("none" if first_ok is None else "%.1f" % first_ok))
print("answered_408 %d" % n408)
PY
cat "$T_TMP/trickle"
check_eq "8 trickling clients: each answered 408 at the deadline" \
    "$(awk '$1 == "answered_408" { print $2 }' "$T_TMP/trickle")" "8"
check "8 trickling clients: /health answers once the deadline freed them" \
    awk '$1 == "health_ok_after_s" && $2 != "none" && $2 < 5 { ok = 1 } END { exit !ok }' "$T_TMP/trickle"
# an idle keep-alive connection is not a request: no 408 after the deadline
python3 - "$SRV_PORT" >"$T_TMP/idle" 2>&1 <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.3)
s.recv(4096)
time.sleep(3)  # past --request-timeout 2, within --timeout 60
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(3)
print(s.recv(4096).split(b"\r\n")[0].decode())
PY
check_eq "an idle keep-alive connection outlives the request deadline" "$(cat "$T_TMP/idle")" "HTTP/1.1 200 OK"
check_eq "408s counted in /metrics" \
    "$(metric 'fp4serve_requests_total{route="other",status="408"}')" "9"
stop_serve
finish
