# run_warmup_scrape.sh: a point's server_* columns leave the builtin
# client's warmup out (docs/benchmarks.md section 8, docs/reliability.md
# W3-SCRAPE-WARMUP). The client saves the
# server's /metrics once its warmup has drained, over the scrape sweep took
# before it started, so the deltas count the measured requests alone. On
# fakeserver (exact counters: tests/fakeserver/README.md) a request of
# output_len 16 generates 16 tokens, 15 of them in decode steps, so a point
# of P requests must show exactly 16 P tokens and, at C = 1, 15 P decode
# steps; with the warmup folded in they would be 16 (P + 2) and 15 (P + 2).
# When the client cannot scrape (its GET answered 500) the runner's scrape
# stays, the warmup is in that point's deltas again, and the client's log
# says so once. Without warmup, or with metrics.server false, nothing
# changes.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE WARMUP EXTRA_SERVER_ARGS [EXTRA_LINES]
    cat >"$1" <<YAML
name: warmscrape
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"$3]
  flags: {step-a-ms: 5, step-b-ms: 1, prefill-ms: 5}
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
  tool: builtin
  input_len: 8
  output_len: 16
  warmup: $2
  timeout_s: 120
  grid: ["1:4", "8:8"]
$4
YAML
}
# counter FILE NAME: a counter's value in a saved scrape, as an integer
counter() { metric_in "$1" "$2" | awk '{ printf "%d\n", $1 }'; }

# ---- warmup 2: the deltas are the measured requests' alone ----
write_exp w.yaml 2 ""
"$SWEEP" run w.yaml --out w >o.txt 2>e.txt
rc=$?
check_eq "warmup 2: run exits 0" "$rc" 0
[ "$rc" = 0 ] || cat e.txt
check_eq "warmup 2: both rows ok" "$(col w status | tr '\n' ' ')" "ok ok "
check_eq "warmup 2, C=1: 4 requests x 16 tokens, the warmup's 32 left out" \
    "$(col w server_decode_tokens 1)" 64
check_eq "warmup 2, C=1: 4 x 15 decode steps, the warmup's 30 left out" \
    "$(col w server_decode_steps 1)" 60
check_eq "warmup 2, C=1: every step a batch of 1" "$(col w server_batch 1)" 1
check_eq "warmup 2, C=8: 8 requests x 16 tokens" "$(col w server_decode_tokens 2)" 128
b8=$(col w server_batch 2)
check "warmup 2, C=8: batch near 8, not pulled down by batch-1 warmup steps ($b8)" \
    awk -v b="$b8" 'BEGIN { exit !(b >= 6) }'
# the saved "before" scrape is the client's: it holds the warmup's tokens
check_eq "warmup 2, C=1: the before scrape was taken after the 2 warmup requests" \
    "$(counter w/default/c1-n4.metrics-before.txt fp4serve_generation_tokens_total)" 32
check_eq "warmup 2, C=8: the before scrape holds point 1, and both warmups" \
    "$(counter w/default/c8-n8.metrics-before.txt fp4serve_generation_tokens_total)" 128
check_eq "warmup 2: each client log says where it saved the scrape, once" \
    "$(cat w/default/c1-n4.log w/default/c8-n8.log | grep -c '^#metrics: server metrics saved after the 2 warmup requests: ')" 2
check "warmup 2: no temporary scrape left beside the logs" \
    sh -c "! ls -a w/default | grep -q 'metrics-before.txt.'"
# sweep plot rebuilds the same columns from the saved files
"$SWEEP" plot w >/dev/null 2>&1
check_eq "sweep plot: the same server_decode_tokens" "$(col w server_decode_tokens | tr '\n' ' ')" "64 128 "

# ---- the client cannot scrape: the runner's scrape stays, and the log says so ----
# /metrics GET number 2 is the client's of point 1 (1: sweep's before it, 3: after)
write_exp f.yaml 2 ', --metrics-fail, "2"'
"$SWEEP" run f.yaml --out f >o.txt 2>e.txt
rc=$?
check_eq "client scrape fails: run exits 0" "$rc" 0
[ "$rc" = 0 ] || cat e.txt
check_eq "client scrape fails: the point keeps its columns, warmup included (6 x 16)" \
    "$(col f server_decode_tokens 1)" 96
check_eq "client scrape fails: 6 x 15 decode steps" "$(col f server_decode_steps 1)" 90
check_eq "client scrape fails: the before scrape is sweep's (taken before any request)" \
    "$(counter f/default/c1-n4.metrics-before.txt fp4serve_generation_tokens_total)" 0
check_eq "client scrape fails: the client's log says so once" \
    "$(grep -c '^sweep bench: warning: no metrics from http://127.0.0.1:[0-9]*/metrics: HTTP 500.*include the 2 warmup requests$' f/default/c1-n4.log)" 1
check "client scrape fails: no 'saved' line in that log" \
    sh -c "! grep -q '^#metrics:' f/default/c1-n4.log"
check "client scrape fails: sweep's own scrapes worked (no note)" \
    sh -c "! grep -q 'no server metrics' e.txt"
check_eq "client scrape fails: the next point is exact again" "$(col f server_decode_tokens 2)" 128

# ---- no warmup: sweep's scrape is the window, as before; the client asks nothing ----
write_exp z.yaml 0 ""
"$SWEEP" run z.yaml --out z >o.txt 2>e.txt
check_eq "warmup 0: run exits 0" "$?" 0
check_eq "warmup 0: 4 x 16 tokens" "$(col z server_decode_tokens 1)" 64
check "warmup 0: the client scrapes nothing" sh -c "! grep -q '^#metrics:' z/default/c1-n4.log"

# ---- metrics.server false: nothing is scraped, by sweep or its client ----
write_exp off.yaml 2 "" "metrics:
  server: false"
"$SWEEP" run off.yaml --out off >o.txt 2>e.txt
check_eq "metrics.server false: run exits 0" "$?" 0
check "metrics.server false: no scrape saved" sh -c "! ls off/default | grep -q metrics-"
check "metrics.server false: the client scrapes nothing" \
    sh -c "! grep -q -e '^#metrics:' -e 'no metrics from' off/default/c1-n4.log"
finish
