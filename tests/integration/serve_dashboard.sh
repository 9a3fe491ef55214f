# serve_dashboard: a vLLM-style Grafana dashboard's 20 PromQL queries, run
# by a real Prometheus server (Debian's `prometheus`) that scrapes `fp4serve
# serve` every second while clients load it. Each panel's query is written
# here in our own words after the panels of vLLM's example dashboard (E2E
# latency, token throughput, inter-token latency, scheduler state, TTFT, KV
# cache use, prompt and generation length heatmaps, finish reasons, queue,
# prefill and decode time, prefix-cache hit rate, preemptions), with vLLM's
# prefix renamed to ours and the model picked by model_name, as Grafana's
# $model_name variable does. Each is asked as Grafana asks (a range query,
# 1 s steps, over the load) and must return a series with at least one
# number (not NaN); each query and its result are printed. Issue 29.
. tests/lib.sh
need jq prometheus

model=$(tiny_model)
start_serve "$model" --threads 2 --max-batch 2 || {
    fail "server start"
    finish
    exit 1
}
sel='model_name="tiny"'

# ---- Prometheus on loopback, scraping the server every second ----
PROM_PORT=$(free_port)
PROM_URL="http://127.0.0.1:$PROM_PORT"
cat >"$T_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: fp4serve
    static_configs:
      - targets: ["127.0.0.1:$SRV_PORT"]
EOF
prometheus --config.file="$T_TMP/prometheus.yml" --storage.tsdb.path="$T_TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$T_TMP/prometheus.log" 2>&1 &
track_pid $!
if ! wait_http "$PROM_URL/-/ready" 30; then
    fail "prometheus did not become ready"
    tail -n 10 "$T_TMP/prometheus.log"
    finish
    exit 1
fi
# promq PATH ARGS...: Prometheus's HTTP API, the JSON answer on stdout
promq() {
    path=$1
    shift
    curl -s -G "$PROM_URL$path" "$@"
}
# wait_scrapes N: until the server has been scraped N times (30 s at most)
wait_scrapes() {
    n=0
    while [ $n -lt 300 ]; do
        got=$(promq /api/v1/query --data-urlencode "query=count_over_time(up{job=\"fp4serve\"}[5m])" |
            jq -r '.data.result[0].value[1] // 0')
        [ "${got:-0}" -ge "$1" ] && return 0
        sleep 0.1
        n=$((n + 1))
    done
    return 1
}
check "prometheus scrapes fp4serve" wait_scrapes 2
check_eq "the target is up" "$(promq /api/v1/query --data-urlencode 'query=up{job="fp4serve"}' |
    jq -r '.data.result[0].value[1]')" "1"

# ---- load: 8 clients on 2 slots for about 12 s (400 requests each at most) ----
t_start=$(date +%s)
deadline=$((t_start + 12))
worker() {
    i=0
    while [ "$i" -lt 400 ] && [ "$(date +%s)" -lt "$deadline" ]; do
        case $((i % 3)) in
        0) post /v1/completions "{\"prompt\":\"The same long shared prefix for the cache, then $1 $i\",
            \"max_tokens\":16,\"ignore_eos\":true,\"stream\":true}" >/dev/null ;;
        1) post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"hi $1 $i\"}],
            \"max_tokens\":8}" >/dev/null ;;
        2) post /v1/completions "{\"prompt\":\"The same long shared prefix for the cache, then $i\",
            \"max_tokens\":12}" >/dev/null ;;
        esac
        i=$((i + 1))
    done
}
# 8 clients on 2 slots: 6 requests queue at almost every moment, so a
# 1 s scrape sees some waiting (with 4, a freed slot was often taken at
# once and the scrapes could all miss the queue)
pids=""
for w in a b c d e f g h; do
    worker $w &
    pids="$pids $!"
done
wait $pids
t_end=$(date +%s)
n0=$(promq /api/v1/query --data-urlencode 'query=count_over_time(up{job="fp4serve"}[5m])' |
    jq -r '.data.result[0].value[1]')
check "prometheus scraped during the load and twice after it" wait_scrapes $((n0 + 2))

# ---- the dashboard: title|query, 20 rows ----
cat >"$T_TMP/queries" <<EOF
E2E latency p99|histogram_quantile(0.99, sum by (le) (rate(fp4serve_e2e_request_latency_seconds_bucket{$sel}[10s])))
E2E latency p50|histogram_quantile(0.50, sum by (le) (rate(fp4serve_e2e_request_latency_seconds_bucket{$sel}[10s])))
E2E latency mean|rate(fp4serve_e2e_request_latency_seconds_sum{$sel}[10s]) / rate(fp4serve_e2e_request_latency_seconds_count{$sel}[10s])
prompt tokens/s|rate(fp4serve_prompt_tokens_total{$sel}[10s])
generation tokens/s|rate(fp4serve_generation_tokens_total{$sel}[10s])
inter-token latency p95|histogram_quantile(0.95, sum by (le) (rate(fp4serve_inter_token_latency_seconds_bucket{$sel}[10s])))
inter-token latency mean|rate(fp4serve_inter_token_latency_seconds_sum{$sel}[10s]) / rate(fp4serve_inter_token_latency_seconds_count{$sel}[10s])
requests running|fp4serve_num_requests_running{$sel}
requests waiting|fp4serve_num_requests_waiting{$sel}
TTFT p99|histogram_quantile(0.99, sum by (le) (rate(fp4serve_time_to_first_token_seconds_bucket{$sel}[10s])))
TTFT mean|rate(fp4serve_time_to_first_token_seconds_sum{$sel}[10s]) / rate(fp4serve_time_to_first_token_seconds_count{$sel}[10s])
KV cache usage|fp4serve_kv_cache_usage_perc{$sel}
prompt length heatmap|sum by (le) (increase(fp4serve_request_prompt_tokens_bucket{$sel}[10s]))
generation length heatmap|sum by (le) (increase(fp4serve_request_generation_tokens_bucket{$sel}[10s]))
finish reasons|sum by (finished_reason) (increase(fp4serve_request_success_total{$sel}[10s]))
queue time|rate(fp4serve_request_queue_time_seconds_sum{$sel}[10s])
prefill time|rate(fp4serve_request_prefill_time_seconds_sum{$sel}[10s])
decode time|rate(fp4serve_request_decode_time_seconds_sum{$sel}[10s])
prefix cache hit rate|rate(fp4serve_prefix_cache_hits_total{$sel}[10s]) / rate(fp4serve_prefix_cache_queries_total{$sel}[10s])
preemptions/s|rate(fp4serve_num_preemptions_total{$sel}[10s])
EOF
check_eq "the dashboard has 20 queries" "$(wc -l <"$T_TMP/queries" | tr -d ' ')" "20"
now=$(date +%s)
k=0
while IFS='|' read -r title q; do
    k=$((k + 1))
    promq /api/v1/query_range --data-urlencode "query=$q" --data-urlencode "start=$((t_start - 2))" \
        --data-urlencode "end=$now" --data-urlencode "step=1" >"$T_TMP/r$k.json"
    # series, points, numeric points, the last number and the largest
    summary=$(jq -r '[.data.result[] | .values[] | .[1]] as $all
        | [$all[] | select(. != "NaN" and . != "+Inf" and . != "-Inf") | tonumber] as $num
        | "\(.status) series=\(.data.result | length) points=\($all | length) numbers=\($num | length) last=\($num[-1] // "none") max=\($num | max // "none")"' \
        "$T_TMP/r$k.json")
    echo "query $k ($title): $q"
    echo "    -> $summary"
    case $summary in
    "success series=0 "* | *" numbers=0 "* | "") fail "query $k ($title) returns no data" ;;
    success*) ok "query $k ($title) returns data" ;;
    *) fail "query $k ($title): $summary" ;;
    esac
done <"$T_TMP/queries"

# a few values the load must have made
jqe() { jq -e "$@" >/dev/null; }
maxof() { jq -r '[.data.result[] | .values[] | .[1] | select(. != "NaN") | tonumber] | max // 0' "$T_TMP/r$1.json"; }
check "requests running: some during the load ($(maxof 8))" awk -v v="$(maxof 8)" 'BEGIN { exit !(v >= 1) }'
check "requests waiting: some, with 8 clients on 2 slots ($(maxof 9))" awk -v v="$(maxof 9)" 'BEGIN { exit !(v >= 1) }'
check "KV cache usage: above 0, at most 1 ($(maxof 12))" awk -v v="$(maxof 12)" 'BEGIN { exit !(v > 0 && v <= 1) }'
check "finish reasons: 'length' among them" \
    jqe '[.data.result[].metric.finished_reason] | index("length") != null' "$T_TMP/r15.json"
check "prefix cache: some hits ($(maxof 19))" awk -v v="$(maxof 19)" 'BEGIN { exit !(v > 0 && v <= 1) }'
check "preemptions: none ($(maxof 20))" awk -v v="$(maxof 20)" 'BEGIN { exit !(v == 0) }'
echo "load: $((t_end - t_start)) s; served: $(metric 'fp4serve_request_success_total{finished_reason="length"}') by length, $(metric 'fp4serve_request_success_total{finished_reason="stop"}') by stop"
stop_serve
finish
