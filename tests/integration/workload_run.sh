# workload_run.sh: datasets, chat, length distributions and goodput end to
# end in `sweep run` with the builtin client on fakeserver: the points.csv
# columns against what the server knows (it honours max_tokens exactly and
# counts prompt words), SLO targets that every request meets and one that
# none can (TPOT >= step-a-ms = 20 ms > 5 ms), and a bad dataset entry
# named before anything starts.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE BENCH_LINES ANALYSIS_LINES
    cat >"$1" <<YAML
name: wl
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 20, step-b-ms: 0, prefill-ms: 5}
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
  warmup: 1
  timeout_s: 120
  grid: ["4:12"]
$2
analysis:
$3
YAML
}

# jsonl prompts over chat, an output-length distribution for entries without one
printf '%s\n' '{"prompt": "one two three four"}' \
    '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]}' \
    '{"prompt": "five six", "output_len": 3}' >data.jsonl
write_exp ok.yaml "  endpoint: chat
  output_len: {dist: uniform, min: 2, max: 9}
  dataset: {kind: jsonl, path: $T_TMP/data.jsonl, seed: 3}" "  slo: {ttft_ms: 5000, tpot_ms: 5000}"
"$SWEEP" run ok.yaml --out run-ok >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "dataset + chat + slo: exit 0" "$rc" 0
check_eq "one ok row" "$(col run-ok status)" ok
check "the client streamed chat" grep -q "^#sweep bench .*/v1/chat/completions$" run-ok/default/c4-n12.log
check "the client read the dataset" grep -q "^#prompt: dataset .*data.jsonl (jsonl): 3 entries" run-ok/default/c4-n12.log
check_eq "requested output tokens = served (fakeserver honours max_tokens)" \
    "$(col run-ok requested_output_tokens)" "$(col run-ok total_output_tokens)"
check_eq "every request meets generous targets" "$(col run-ok slo_attainment)" 1
g=$(col run-ok goodput_req_s)
t=$(col run-ok request_throughput)
check "goodput $g req/s = request throughput $t when all meet" within "$g" "$t" 0.01 rel
check_eq "the jsonl is kept" "$(grep -c '"warmup":false' run-ok/default/c4-n12.jsonl)" 12
# the dataset's own length wins where it gives one: entry 3 asks 3 tokens
check "an entry's output_len is sent" grep -q '"output_requested":3' run-ok/default/c4-n12.jsonl

check "REPORT.md has the goodput columns" grep -q "goodput_req_s\|Goodput" run-ok/REPORT.md
check "a goodput chart is drawn" test -s run-ok/plots/goodput.dat
# a target nobody meets: goodput 0, and the point is still ok (a measurement)
write_exp tight.yaml "  input_len: {dist: normal, mean: 20, sd: 5}
  output_len: 8" "  slo: {tpot_ms: 5}"
"$SWEEP" run tight.yaml --out run-tight >out.txt 2>err.txt
check_eq "tight slo: exit 0" "$?" 0
check_eq "tight slo: attainment 0" "$(col run-tight slo_attainment)" 0
check_eq "tight slo: goodput 0" "$(col run-tight goodput_req_s)" 0
check "tight slo: random prompts of drawn lengths" grep -q "^#prompt: normal:20:5:1:1048576 random token ids" run-tight/default/c4-n12.log
check_eq "requested input tokens = prompt tokens the server counted" \
    "$(col run-tight requested_input_tokens)" "$(col run-tight total_input_tokens)"

# sweep plot re-reads the point: the goodput columns come back from the records
"$SWEEP" plot run-tight >out.txt 2>err.txt
check_eq "replot: attainment still 0" "$(col run-tight slo_attainment)" 0

# rate points: open loop at offered rates, one row each (the same C and P:
# the log names tell them apart), achieved within 3%
write_exp rates.yaml "  output_len: 4
  rate_kind: constant
  grid: [\"r20:41\", \"r50:41\"]" "  slo: {ttft_ms: 5000}"
sed -i '/grid: \["4:12"\]/d' rates.yaml
"$SWEEP" run rates.yaml --out run-rates >out.txt 2>err.txt
check_eq "rates: exit 0" "$?" 0
check_eq "rates: two ok rows" "$(col run-rates status | tr '\n' ' ')" "ok ok "
check_eq "rates: offered" "$(col run-rates offered_rate | tr '\n' ' ')" "20 50 "
for r in 20 50; do
    a=$(col run-rates achieved_rate | sed -n "$([ $r = 20 ] && echo 1 || echo 2)p")
    check "rates: achieved $a within 3% of $r" within "$a" "$r" 0.03 rel
done
check "rates: logs named by rate" test -s run-rates/default/rate20-n41.log -a -s run-rates/default/rate50-n41.log
"$SWEEP" plot run-rates >out.txt 2>err.txt
check_eq "rates: replot keeps the offered rates" "$(col run-rates offered_rate | tr '\n' ' ')" "20 50 "

# a bad entry is named (file:line) before any server starts: exit 2
printf '%s\n' '{"prompt": "fine"}' '{"prompt": ""}' >bad.jsonl
write_exp bad.yaml "  dataset: {kind: jsonl, path: $T_TMP/bad.jsonl}" "  slo: {ttft_ms: 1}"
"$SWEEP" run bad.yaml --out run-bad >out.txt 2>err.txt
check_eq "bad dataset: exit 2" "$?" 2
check "bad dataset: names file:line" grep -q "bad.jsonl:2: \"prompt\" wants a non-empty string" err.txt
check "bad dataset: no run folder" test ! -e run-bad/points.csv
# sweep bench's own flags: each mistake is a usage error (2) naming it,
# before anything is sent (the URL is never contacted)
u=http://127.0.0.1:9
bflag() { # WANT_TEXT ARGS...: exit 2 and WANT_TEXT on stderr
    want=$1
    shift
    "$SWEEP" bench --url "$u" -c 1 -n 1 "$@" >out.txt 2>err.txt
    rc=$?
    check_eq "bench $*: exit 2" "$rc" 2
    check "bench $*: says '$want'" grep -qF -- "$want" err.txt
}
bflag "option '--input-len' wants a length (256), uniform:MIN:MAX" --input-len zipf:1:2
bflag "option '--output-len': 'uniform:9:2' needs 1 <= MIN <= MAX" --output-len uniform:9:2
bflag "option '--dataset-kind' needs '--dataset FILE'" --dataset-kind jsonl
bflag "option '--dataset-kind' wants jsonl, sharegpt, shared-prefix, multi-turn or trace, got 'csv'" --dataset data.jsonl --dataset-kind csv
bflag "options '--dataset' and '--prompt-text' exclude each other" --dataset data.jsonl --prompt-text hi
bflag "bad.jsonl:2: \"prompt\" wants a non-empty string" --dataset bad.jsonl
bflag "nothere.jsonl" --dataset nothere.jsonl
bflag "data.jsonl:2:1: not JSON" --dataset data.jsonl --dataset-kind sharegpt
finish
