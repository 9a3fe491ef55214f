# serve_robust: `fp4serve serve` under hostile or unlucky clients
# (docs/reliability.md S1, S9, S11, S12, S14): clients that vanish
# mid-stream leave no slot, KV position or file descriptor behind; /health
# says 503 while loading and answers fast beside slowloris and idle
# keep-alive connections, which are closed at the timeout; a second server
# on the same port exits at once; SIGTERM ends streams and exits 0.
. tests/lib.sh
need jq

model=$(tiny_model)

# ---- S11: listen first, load second ----
SRV_PORT=$(free_port)
SRV_URL="http://127.0.0.1:$SRV_PORT"
SRV_LOG="$T_TMP/loading.log"
"$FP4SERVE" serve --model "$model" --port "$SRV_PORT" --threads 1 --load-delay-ms 1500 \
    --max-batch 16 --ctx 2048 >"$SRV_LOG" 2>&1 &
SRV_PID=$!
track_pid $SRV_PID
n=0
while [ $n -lt 100 ] && ! curl -s -o /dev/null "$SRV_URL/health"; do sleep 0.02; n=$((n + 1)); done # listening
code=$(curl -s -o "$T_TMP/h" -w '%{http_code}' "$SRV_URL/health")
check_eq "health while loading: 503" "$code" "503"
check_eq "health while loading: unavailable_error" "$(jq -r .error.type "$T_TMP/h")" "unavailable_error"
check_eq "health while loading: message" "$(jq -r .error.message "$T_TMP/h")" "loading model"
check_eq "completions while loading: 503" \
    "$(curl -s -o /dev/null -w '%{http_code}' --data-binary '{"prompt":"x"}' "$SRV_URL/v1/completions")" "503"
check "health after loading: 200" wait_http "$SRV_URL/health" 30
check_eq "health: pid is the server's" "$(curl -s "$SRV_URL/health" | jq .pid)" "$SRV_PID"

# ---- S12: a second server on the same port exits at once ----
t0=$(date +%s%N)
"$FP4SERVE" serve --model "$model" --port "$SRV_PORT" >"$T_TMP/second.log" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check_eq "second server on the port: exit status 6" "$rc" "6"
check "second server: exits within 1 s ($ms ms)" [ $ms -lt 1000 ]
check "second server: says the address is in use" grep -q "cannot listen on 127.0.0.1:$SRV_PORT: Address already in use" "$T_TMP/second.log"
check_eq "first server: still healthy" "$(curl -s -o /dev/null -w '%{http_code}' "$SRV_URL/health")" "200"

# ---- S9: 100 clients vanish mid-stream, three times over ----
fds0=$(ls /proc/$SRV_PID/fd | wc -l)
body='{"prompt":"Hello world","max_tokens":2000,"ignore_eos":true,"stream":true}'
for round in 1 2 3; do
    pids=""
    for i in $(seq 1 100); do
        # head takes two events' worth and exits; curl then dies on SIGPIPE
        { curl -s -N --data-binary "$body" "$SRV_URL/v1/completions" | head -c 400 >/dev/null; } &
        pids="$pids $!"
    done
    wait $pids
    n=0
    while [ $n -lt 100 ] && [ "$(metric fp4serve_running_sequences)" != 0 ]; do sleep 0.05; n=$((n + 1)); done
    check_eq "round $round: no sequence left running" "$(metric fp4serve_running_sequences)" "0"
    check_eq "round $round: no KV position held" "$(metric fp4serve_kv_positions_used)" "0"
    check_eq "round $round: all 16 slots free" "$(metric fp4serve_kv_slots_free)" "16"
    check_eq "round $round: nothing queued" "$(metric fp4serve_queue_length)" "0"
done
# a client starved of CPU may die only after its 2000 tokens sat in the
# socket buffers: that generation ends by length, its resources freed alike
cancelled=$(metric 'fp4serve_requests_finished_total{reason="cancelled"}')
lengthed=$(metric 'fp4serve_requests_finished_total{reason="length"}')
check_eq "300 generations ended, cancelled ($cancelled) or by length ($lengthed)" \
    "$((cancelled + lengthed))" "300"
check "disconnects were noticed: $cancelled cancelled" [ "$cancelled" -ge 1 ]
# non-streaming clients that give up while their connection waits, suspended
pids=""
for i in $(seq 1 20); do
    curl -s --max-time 0.5 --data-binary '{"prompt":"x","max_tokens":2000,"ignore_eos":true}' \
        "$SRV_URL/v1/completions" >/dev/null &
    pids="$pids $!"
done
wait $pids
n=0
while [ $n -lt 100 ] && [ "$(metric fp4serve_running_sequences)" != 0 ]; do sleep 0.05; n=$((n + 1)); done
check_eq "non-streaming clients gone: no sequence left running" "$(metric fp4serve_running_sequences)" "0"
check_eq "non-streaming clients gone: 20 more cancelled" \
    "$(metric 'fp4serve_requests_finished_total{reason="cancelled"}')" "$((cancelled + 20))"
gen=$(metric fp4serve_generation_tokens_total)
check "cancelled early: $gen tokens made, far fewer than 320 x 2000" [ "$gen" -lt 100000 ]
n=0
while [ $n -lt 100 ] && [ "$(ls /proc/$SRV_PID/fd | wc -l)" -gt "$fds0" ]; do sleep 0.05; n=$((n + 1)); done
check_eq "no file descriptor left behind" "$(ls /proc/$SRV_PID/fd | wc -l)" "$fds0"
check "connections closed (open: $(metric fp4serve_open_connections))" \
    [ "$(metric fp4serve_open_connections)" -le 1 ]

# ---- S1, S14: slowloris and idle keep-alive beside /health ----
if command -v python3 >/dev/null; then
    kill -TERM $SRV_PID
    wait $SRV_PID
    start_serve "$model" --threads 1 --timeout 2 --ctx 4096 --drain-timeout 0
    python3 - "$SRV_PORT" >"$T_TMP/py" 2>&1 <<'PY'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
url = "http://127.0.0.1:%d/health" % port
def health_ms():
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=5) as r:
        r.read()
        assert r.status == 200
    return (time.monotonic() - t) * 1000
slow = []
for _ in range(200):        # slowloris: one header byte, then silence
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"G"); slow.append(s)
idle = []
for _ in range(1024):       # keep-alive connections left idle after one request
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); idle.append(s)
for s in idle:
    s.recv(4096)
lat = sorted(health_ms() for _ in range(50))
print("health_median_ms %.1f" % lat[25])
print("health_max_ms %.1f" % lat[-1])
time.sleep(3.5)             # past --timeout 2
closed = 0
for s in slow + idle:
    s.settimeout(1)
    try:
        closed += s.recv(16) == b""
    except OSError:
        closed += 1
print("closed %d of %d" % (closed, len(slow) + len(idle)))
print("health_after_ms %.1f" % health_ms())
PY
    cat "$T_TMP/py"
    med=$(awk '$1 == "health_median_ms" { print $2 }' "$T_TMP/py")
    check "slowloris + 1024 idle: /health median ${med:-?} ms <= 100" \
        awk -v m="${med:-1e9}" 'BEGIN { exit !(m <= 100) }'
    check_eq "slow and idle connections closed at the timeout" \
        "$(awk '$1 == "closed" { print $2 " of " $4 }' "$T_TMP/py")" "1224 of 1224"
    check "/health after they closed" grep -q '^health_after_ms' "$T_TMP/py"
else
    echo "skip: python3 not found - slowloris and keep-alive checks not run"
fi

# ---- SIGTERM with streams in flight and --drain-timeout 0: an error event, [DONE], exit 0
# (the default drain, which lets them finish, is serve_drain.sh's) ----
pids=""
for i in $(seq 1 8); do
    curl -s -N --data-binary '{"prompt":"x","max_tokens":3000,"ignore_eos":true,"stream":true}' \
        "$SRV_URL/v1/completions" >"$T_TMP/term.$i" &
    pids="$pids $!"
done
n=0
while [ $n -lt 100 ] && [ "$(metric fp4serve_running_sequences)" != 8 ]; do sleep 0.02; n=$((n + 1)); done
t0=$(date +%s%N)
kill -TERM $SRV_PID
wait $SRV_PID
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
wait $pids
check_eq "SIGTERM: exit status 0" "$rc" "0"
check "SIGTERM: exits within 2 s ($ms ms)" [ $ms -lt 2000 ]
ended=0
for i in $(seq 1 8); do
    if grep -q '"finish_reason":"length"' "$T_TMP/term.$i" ||
        { grep -q '^data: {"error":{"message":"the server is shutting down' "$T_TMP/term.$i" && tail -n 2 "$T_TMP/term.$i" | grep -q '^data: \[DONE\]'; }; then
        ended=$((ended + 1))
    fi
done
check_eq "SIGTERM: every stream ended with an error event and [DONE] (or had finished)" "$ended" "8"
check "SIGTERM: logged" grep -q 'SIGTERM: stopping' "$SRV_LOG"

# ---- --ctx above the model's training context (tiny: 256) is served, with a warning ----
start_serve "$(tiny_model)" --threads 1 --ctx 512 || fail "server start with --ctx 512"
check "--ctx 512 > training 256: one warning naming both" \
    grep -q "warning: --ctx 512 is above the model's training context of 256 tokens" "$SRV_LOG"
check_eq "--ctx 512: served as asked" "$(curl -s "$SRV_URL/v1/models" | jq .data[0].meta.n_ctx)" "512"
stop_serve
start_serve "$(tiny_model)" --threads 1 --ctx 256 || fail "server start with --ctx 256"
check "--ctx 256 = training 256: no warning" sh -c "! grep -q 'training context' '$SRV_LOG'"
stop_serve
finish
