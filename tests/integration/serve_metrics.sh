# serve_metrics: /metrics as Prometheus tools read it. `promtool check
# metrics` (Debian's prometheus package) finds nothing to say; the
# per-request histograms (TTFT, end-to-end, queue time, prompt and
# generation lengths) each count exactly the requests served, streamed or
# not, completions or chat, concurrent or not; the inter-token histogram
# counts every generated token after each request's first; sums agree with
# the token counters; KV usage is a ratio; no since-start mean gauges.
. tests/lib.sh

model=$(tiny_model)
start_serve "$model" --threads 2 --max-batch 4 || { fail "server start"; finish; exit 1; }

# hist NAME: the _count of histogram NAME (its model_name label is the model id)
hcount() { metric "fp4serve_$1_count{model_name=\"tiny\"}"; }
hsum() { metric "fp4serve_$1_sum{model_name=\"tiny\"}"; }

check_eq "before any request: TTFT count 0" "$(hcount time_to_first_token_seconds)" "0"

# 3 completions (one streamed), 2 chats (one streamed), then 6 at once
post /v1/completions '{"prompt":"Hello","max_tokens":5,"ignore_eos":true}' >/dev/null
post /v1/completions '{"prompt":"Hello world","max_tokens":3,"ignore_eos":true,"stream":true}' >/dev/null
post /v1/completions '{"prompt":"a b c d e f","max_tokens":1}' >/dev/null
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' >/dev/null
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}' >/dev/null
pids=""
for i in 1 2 3 4 5 6; do
    st=$([ $((i % 2)) = 0 ] && echo true || echo false)
    post /v1/completions "{\"prompt\":\"x$i\",\"max_tokens\":$((i + 1)),\"stream\":$st}" >"$T_TMP/many.$i" &
    pids="$pids $!"
done
wait $pids
check_eq "6 concurrent requests answered" "$(cat "$T_TMP"/many.* | grep -c '"finish_reason":"\(stop\|length\)"')" "6"
# a refused request is not served: no observation
post /v1/completions '{"prompt":"x","max_tokens":0}' >/dev/null

served=11
curl -s "$SRV_URL/metrics" >"$T_TMP/m"
finished=$(awk '/^fp4serve_requests_finished_total\{model_name="tiny",reason="(stop|length)"\}/ { n += $2 } END { print n + 0 }' "$T_TMP/m")
check_eq "requests finished by stop or length" "$finished" "$served"
for h in time_to_first_token_seconds e2e_request_latency_seconds request_queue_time_seconds \
    request_prompt_tokens request_generation_tokens; do
    check_eq "$h: count = requests served" "$(hcount $h)" "$served"
    check_eq "$h: +Inf bucket = count" \
        "$(metric "fp4serve_${h}_bucket{model_name=\"tiny\",le=\"+Inf\"}")" "$served"
done
gen=$(metric fp4serve_generation_tokens_total)
prompt=$(metric fp4serve_prompt_tokens_total)
check_eq "generation lengths sum to the generated tokens" "$(hsum request_generation_tokens)" "$gen"
check_eq "prompt lengths sum to the prompt tokens" "$(hsum request_prompt_tokens)" "$prompt"
check_eq "inter-token latency: one per token after each request's first" \
    "$(hcount inter_token_latency_seconds)" "$((gen - served))"
check "end-to-end sum >= TTFT sum" awk -v e="$(hsum e2e_request_latency_seconds)" \
    -v t="$(hsum time_to_first_token_seconds)" 'BEGIN { exit !(e >= t && t > 0) }'
check "buckets are cumulative (never decrease)" awk '
    /_bucket\{/ { split($1, a, ",le="); if (a[1] == last && $2 < prev) bad = 1; last = a[1]; prev = $2 }
    END { exit bad }' "$T_TMP/m"
check "histograms are typed" grep -q '^# TYPE fp4serve_time_to_first_token_seconds histogram$' "$T_TMP/m"
check "KV usage is a ratio in [0, 1]" awk '/^fp4serve_kv_cache_usage_perc\{model_name="tiny"\} / { found = 1; bad = ($2 < 0 || $2 > 1) } END { exit !(found && !bad) }' "$T_TMP/m"
check "no since-start mean gauge" sh -c "! grep -q '_mean' '$T_TMP/m'"
check "issue 13's counters are there, labelled with the model only" sh -c "for n in steps_total \
    step_seconds_total step_sequences_total prefill_tokens_total decode_tokens_total \
    prompt_tokens_total generation_tokens_total; do
    grep -q \"^fp4serve_\$n{model_name=\\\"tiny\\\"} [0-9]\" '$T_TMP/m' || exit 1; done"
check "every sample carries model_name (issue 29)" awk '!/^#/ && $1 !~ /\{model_name="tiny"/ { print "no model_name: " $0; bad = 1 } END { exit bad }' "$T_TMP/m"
# decode-only steps (no prompt token in them): sweep's server_step_ms reads
# these so the step law leaves prefill out
steps=$(metric fp4serve_steps_total)
do_steps=$(metric fp4serve_decode_only_steps_total)
check "decode-only steps: some, and fewer than all steps (prompts ran in the others)" \
    awk -v d="$do_steps" -v s="$steps" 'BEGIN { exit !(d > 0 && d < s) }'
check "decode-only step time and sequences within the totals" awk \
    -v dt="$(metric fp4serve_decode_only_step_seconds_total)" -v t="$(metric fp4serve_step_seconds_total)" \
    -v dq="$(metric fp4serve_decode_only_step_sequences_total)" -v q="$(metric fp4serve_step_sequences_total)" \
    -v d="$do_steps" 'BEGIN { exit !(dt > 0 && dt < t && dq >= d && dq < q) }'

if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$T_TMP/m" >"$T_TMP/lint" 2>&1
    rc=$?
    check_eq "promtool check metrics: clean (exit status)" "$rc" "0"
    check_eq "promtool check metrics: nothing to say" "$(cat "$T_TMP/lint")" ""
else
    echo "skip: promtool not installed (apt-get install prometheus; make does it as root) - lint not run"
fi

# the prefix cache over HTTP: after a reset, a prompt sent twice is cached
# whole but its last token the second time, and nothing after a reset; the
# counters move by exactly those tokens
cached() { sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' "$1"; }
ptoks() { sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$1"; }
check_eq "POST /reset_prefix_cache: 200" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$SRV_URL/reset_prefix_cache")" "200"
h0=$(metric fp4serve_prefix_cache_hits_total)
q0=$(metric fp4serve_prefix_cache_queries_total)
body='{"prompt":"one two three four five six seven eight","max_tokens":3,"ignore_eos":true,"temperature":0}'
post /v1/completions "$body" >"$T_TMP/p1"
post /v1/completions "$body" >"$T_TMP/p2"
n=$(ptoks "$T_TMP/p1")
check_eq "first time: nothing cached" "$(cached "$T_TMP/p1")" "0"
check_eq "second time: all but the last prompt token cached" "$(cached "$T_TMP/p2")" "$((n - 1))"
check_eq "same answer cached and uncached" "$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//; s/"cached_tokens":[0-9]*//' "$T_TMP/p1")" \
    "$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//; s/"cached_tokens":[0-9]*//' "$T_TMP/p2")"
curl -s -X POST "$SRV_URL/reset_prefix_cache" >/dev/null
post /v1/completions "$body" >"$T_TMP/p3"
check_eq "after a reset: nothing cached" "$(cached "$T_TMP/p3")" "0"
check_eq "prefix_cache_hits_total moved by the cached tokens" \
    "$(($(metric fp4serve_prefix_cache_hits_total) - h0))" "$((n - 1))"
check_eq "prefix_cache_queries_total moved by the prompt tokens" \
    "$(($(metric fp4serve_prefix_cache_queries_total) - q0))" "$((3 * n))"

stop_serve
finish
