# loadgen_faults.sh: every way a request can fail is counted by kind and
# kept out of the latencies and throughput, and no fault hangs the run
# (each run has a hard limit far above its expected time).
. tests/lib.sh

fast="--prefill-ms 5 --step-a-ms 5 --step-b-ms 0"

# Stalled stream: request 3 sends one token, then nothing. The run ends and
# that request failed within idle timeout + 1 s of its last byte.
start_fake $fast --stall-request 3
start=$(date +%s%N)
bench -c 4 -n 12 --output-len 8 --warmup 0 --idle-timeout 1 --jsonl "$T_TMP/stall.jsonl"
secs=$(( ($(date +%s%N) - start) / 1000000 ))
check_eq "stall: exit status 0 (failures are data)" "$rc" 0
check_eq "stall: one idle-timeout failure" "$(bench_value 'Failed (idle timeout):' "$T_TMP/out")" 1
check_eq "stall: the others succeeded" "$(bench_value 'Successful requests:' "$T_TMP/out")" 11
check "stall: the run ended in $secs ms (< 4 s)" test "$secs" -lt 4000
check "stall: failed within idle timeout + 1 s of its first token" python3 -c "
import json
r = [json.loads(l) for l in open('$T_TMP/stall.jsonl') if '\"idle_timeout\"' in l][0]
quiet = r['e2e_ms'] - r['ttft_ms']
assert 1000 <= quiet <= 2000, quiet
assert r['chunks'] == 1
"
stop_fake

# In-band error after 3 tokens: every request failed, no token counted, exit 3.
start_fake $fast --error-after 3
bench -c 2 -n 6 --output-len 8
check_eq "error event: exit status 3 (every request failed)" "$rc" 3
check_eq "error event: counted by kind" "$(bench_value 'Failed (error event):' "$T_TMP/out")" 6
check_eq "error event: its tokens excluded" "$(bench_value 'Total generated tokens:' "$T_TMP/out")" 0
check_eq "error event: no TTFT from failed streams" "$(bench_value 'Median TTFT (ms):' "$T_TMP/out")" "n/a"
check "error event: the server's message is shown" grep -q 'error event' "$T_TMP/err"
stop_fake

# Connection closed after 3 tokens without finish_reason or [DONE]: truncated.
start_fake $fast --close-after 3
bench -c 2 -n 6 --output-len 8
check_eq "close: failed as truncated" "$(bench_value 'Failed (truncated stream):' "$T_TMP/out")" 6
check_eq "close: none successful" "$(bench_value 'Successful requests:' "$T_TMP/out")" 0
stop_fake

# No usage chunk: tokens are counted from the text events, and flagged.
start_fake $fast --no-usage
bench -c 2 -n 6 --output-len 8
check_eq "no usage: success" "$(bench_value 'Successful requests:' "$T_TMP/out")" 6
check_eq "no usage: flagged" "$(bench_value 'Requests without usage:' "$T_TMP/out")" 6
check_eq "no usage: tokens counted from events" "$(bench_value 'Total generated tokens:' "$T_TMP/out")" 48
stop_fake

# Chat with a role-only first chunk at admission: TTFT is the first text.
start_fake --prefill-ms 50 --step-a-ms 5 --step-b-ms 0 --role-chunk-first
curl -s -X POST "$url/stats/reset" >/dev/null
bench -c 2 -n 6 --output-len 8 --warmup 0 --endpoint /v1/chat/completions
ttft=$(bench_value 'Median TTFT (ms):' "$T_TMP/out")
check_eq "role chunk: success" "$(bench_value 'Successful requests:' "$T_TMP/out")" 6
check "role chunk: median TTFT $ttft ms is the 50 ms prefill, not ~0" within "$ttft" "$(truth median_ttft_ms)" 2
stop_fake

# 10% of requests get HTTP 503.
start_fake $fast --error-rate 0.1
bench -c 8 -n 100 --output-len 4 --warmup 0
check_eq "503s: exit status 0" "$rc" 0
check_eq "503s: error rate" "$(bench_value 'Error rate:' "$T_TMP/out")" 0.10
check_eq "503s: counted as HTTP status" "$(bench_value 'Failed (HTTP status):' "$T_TMP/out")" 10
check_eq "503s: failed requests" "$(bench_value 'Failed requests:' "$T_TMP/out")" 10
check_eq "503s: the rest succeeded" "$(bench_value 'Successful requests:' "$T_TMP/out")" 90
check_eq "503s: tokens of successes only" "$(bench_value 'Total generated tokens:' "$T_TMP/out")" 360
stop_fake

# Every event written in two pieces cut inside "é".
start_fake $fast --split-utf8
bench -c 3 -n 6 --output-len 8
check_eq "split utf-8: success" "$(bench_value 'Successful requests:' "$T_TMP/out")" 6
check_eq "split utf-8: tokens" "$(bench_value 'Total generated tokens:' "$T_TMP/out")" 48
stop_fake

# A usage chunk 200 ms after the last token adds no ITL sample.
start_fake $fast --usage-delay-ms 200
bench -c 1 -n 3 --output-len 6 --warmup 0 --jsonl "$T_TMP/ud.jsonl"
maxitl=$(bench_value 'Max ITL (ms):' "$T_TMP/out")
check "usage delay: Max ITL $maxitl ms excludes the 200 ms pause" awk -v v="$maxitl" 'BEGIN { exit !(v < 100) }'
check "usage delay: 5 ITL samples per request" python3 -c "
import json
assert all(len(json.loads(l)['itl_ms']) == 5 for l in open('$T_TMP/ud.jsonl'))"
stop_fake

# Open loop: Poisson arrivals, the queue-delay and from-schedule sections.
start_fake $fast
bench -c 64 -n 40 --output-len 4 --request-rate 50
check_eq "open loop: traffic rate row" "$(bench_value 'Traffic request rate:' "$T_TMP/out")" 50.00
check_eq "open loop: all succeeded" "$(bench_value 'Successful requests:' "$T_TMP/out")" 40
q=$(bench_value 'Median Queue Delay (ms):' "$T_TMP/out")
check "open loop: median client queue delay $q ms < 2" awk -v v="$q" 'BEGIN { exit !(v < 2) }'
check "open loop: latency from the intended send" grep -q '^Median Scheduled E2E (ms):' "$T_TMP/out"

# SIGINT mid-run: the block covers what was measured, exit 130.
"$SWEEP" bench --url "$url" -c 2 -n 50 --output-len 400 --warmup 0 >"$T_TMP/out" 2>"$T_TMP/err" &
bp=$!
sleep 1
kill -INT "$bp"
wait "$bp"
check_eq "interrupt: exit status 130" "$?" 130
check "interrupt: the block is printed" grep -q '^Successful requests:' "$T_TMP/out"
check "interrupt: the cancelled requests are named" grep -q '^Failed (interrupted):' "$T_TMP/out"
stop_fake

# Nobody listening: exit 3 at once, saying so.
bench -c 1 -n 1
check_eq "unreachable: exit status 3" "$rc" 3
check "unreachable: says why" grep -q 'cannot reach the server' "$T_TMP/err"

# Usage errors: exit 2, and --help documents the exit statuses.
"$SWEEP" bench -c 1 -n 1 >/dev/null 2>"$T_TMP/err"
check_eq "no --url: exit status 2" "$?" 2
check "no --url: names the option" grep -q "'--url'" "$T_TMP/err"
"$SWEEP" bench --url "$url" -c 1 -n 1 --concurency 3 >/dev/null 2>"$T_TMP/err"
check_eq "typo: exit status 2" "$?" 2
check "typo: did you mean" grep -q "did you mean '--concurrency'" "$T_TMP/err"
"$SWEEP" bench --help >"$T_TMP/help"
check "help: exit statuses" grep -q 'exit status: 0 the run completed' "$T_TMP/help"
finish
