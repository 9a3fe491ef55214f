# serve_drain: SIGTERM drains `fp4serve serve` (docs/reliability.md G6, G7):
# the listening socket closes and a new request on an open connection gets
# 503, while a stream in flight runs to its last token and [DONE]; past
# --drain-timeout the rest end with an error event; a second SIGTERM ends
# them at once. Each exit is 0. The tiny model with a long context makes
# streams that last seconds (attention grows with the position).
. tests/lib.sh
need jq

model=$(tiny_model)
# long N: a streamed completion of exactly N tokens (with usage), into $T_TMP/FILE
long() {
    curl -s -N --data-binary "{\"prompt\":\"hi\",\"max_tokens\":$1,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
        "$SRV_URL/v1/completions" >"$T_TMP/$2"
}
# started FILE: wait until the stream in FILE has its first event (5 s at most)
started() {
    n=0
    while [ $n -lt 250 ] && ! grep -q '"text"' "$T_TMP/$1" 2>/dev/null; do sleep 0.02; n=$((n + 1)); done
    grep -q '"text"' "$T_TMP/$1"
}
# logged TEXT: wait until the server's log holds TEXT (5 s at most)
logged() {
    n=0
    while [ $n -lt 250 ] && ! grep -q "$1" "$SRV_LOG"; do sleep 0.02; n=$((n + 1)); done
    grep -q "$1" "$SRV_LOG"
}
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ---- G6: a stream in flight at SIGTERM completes; new work is turned away ----
start_serve "$model" --threads 1 --ctx 16384 --max-batch 2 || { fail "server start"; finish; exit 1; }
long 12000 drained &
cpid=$!
check "the stream started" started drained
# a keep-alive connection opened before the signal, used after it
python3 - "$SRV_PORT" "$SRV_LOG" >"$T_TMP/py" 2>&1 <<'PY' &
import http.client, os, sys, time
port, log = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/health"); r = c.getresponse(); r.read()
print("before", r.status, flush=True)
open(os.path.join(os.path.dirname(log), "ka.ready"), "w").close()
for _ in range(500):                       # until the server says it drains
    if "draining:" in open(log).read():
        break
    time.sleep(0.01)
c.request("POST", "/v1/completions", body='{"prompt":"x","max_tokens":1}')
r = c.getresponse(); b = r.read()
print("completion", r.status, b.decode()[:120], flush=True)
c.request("GET", "/health"); r = c.getresponse(); r.read()
print("health", r.status, flush=True)
PY
pypid=$!
wait_file "$T_TMP/ka.ready" 10
t0=$(date +%s%N)
kill -TERM "$SRV_PID"
check "the log says it drains 1 request" logged "draining: 1 request in flight, up to 30 s"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$SRV_URL/health")
check_eq "a new connection during the drain is refused" "$code" "000"
wait $pypid
check_eq "keep-alive connection before the signal: 200" "$(awk '$1 == "before" { print $2 }' "$T_TMP/py")" "200"
check_eq "a completion on it during the drain: 503" "$(awk '$1 == "completion" { print $2 }' "$T_TMP/py")" "503"
check "... saying the server is shutting down" grep -q 'completion 503 .*shutting down' "$T_TMP/py"
check_eq "/health on it during the drain: 503" "$(awk '$1 == "health" { print $2 }' "$T_TMP/py")" "503"
wait "$SRV_PID"
check_eq "exit status 0 after the drain" "$?" "0"
wait $cpid
check "the drained stream ended by length" grep -q '"finish_reason":"length"' "$T_TMP/drained"
check_eq "... with all 12000 tokens" \
    "$(sed -n 's/^data: //p' "$T_TMP/drained" | grep usage | jq -c '.usage.completion_tokens')" "12000"
check "... no error event" sh -c "! grep -q '\"error\"' '$T_TMP/drained'"
check_eq "... and [DONE] last" "$(tail -n 2 "$T_TMP/drained" | head -n 1)" "data: [DONE]"
check "the log says the drain ended" grep -q "drained: every request in flight ended" "$SRV_LOG"

# ---- G7: past --drain-timeout the rest end with an error event ----
start_serve "$model" --threads 1 --ctx 32768 --max-batch 2 --drain-timeout 1 ||
    { fail "server start"; finish; exit 1; }
long 30000 cut &
cpid=$!
check "the long stream started" started cut
t0=$(date +%s%N)
kill -TERM "$SRV_PID"
wait "$SRV_PID"
rc=$?
ms=$(ms_since "$t0")
wait $cpid
check_eq "--drain-timeout 1: exit status 0" "$rc" "0"
check "--drain-timeout 1: exits after 1 s and within 4 s ($ms ms)" [ "$ms" -ge 1000 -a "$ms" -lt 4000 ]
check "the log names what was cut" grep -q "drain: 1 request still in flight after 1 s: ending them" "$SRV_LOG"
check "the stream ended with the shutdown error event" \
    grep -q '^data: {"error":{"message":"the server is shutting down' "$T_TMP/cut"
check_eq "... then [DONE]" "$(tail -n 2 "$T_TMP/cut" | head -n 1)" "data: [DONE]"

# ---- G7: a second SIGTERM ends the drain at once ----
start_serve "$model" --threads 1 --ctx 32768 --max-batch 2 || { fail "server start"; finish; exit 1; }
long 30000 twice.1 &
c1=$!
long 30000 twice.2 &
c2=$!
started twice.1 && started twice.2
check "two long streams started" [ $? = 0 ]
kill -TERM "$SRV_PID"
check "the log says it drains 2 requests" logged "draining: 2 requests in flight"
t0=$(date +%s%N)
kill -TERM "$SRV_PID"
wait "$SRV_PID"
rc=$?
ms=$(ms_since "$t0")
wait $c1 $c2
check_eq "second SIGTERM: exit status 0" "$rc" "0"
check "second SIGTERM: exits within 2 s ($ms ms)" [ "$ms" -lt 2000 ]
check "second SIGTERM: logged" grep -q "SIGTERM again: stopping now" "$SRV_LOG"
for i in 1 2; do
    check "stream $i: the shutdown error event" \
        grep -q '^data: {"error":{"message":"the server is shutting down' "$T_TMP/twice.$i"
    check_eq "stream $i: [DONE] last" "$(tail -n 2 "$T_TMP/twice.$i" | head -n 1)" "data: [DONE]"
done

# ---- idle: SIGTERM with nothing in flight exits at once ----
start_serve "$model" --threads 1 || { fail "server start"; finish; exit 1; }
t0=$(date +%s%N)
stop_serve
rc=$?
ms=$(ms_since "$t0")
check_eq "idle: exit status 0" "$rc" "0"
check "idle: exits within 1 s ($ms ms)" [ "$ms" -lt 1000 ]
check "idle: no drain message" sh -c "! grep -q 'draining' '$SRV_LOG'"
finish
