# loadgen_accuracy.sh: `sweep bench` against the fakeserver's exact timing.
# At C = 1, 16 and 64 (closed loop, n = 4C so every wave is full), the
# client's median TPOT must be within 3% and its median TTFT within 2 ms of
# what the server measured itself (GET /stats, reset before the run), and
# the achieved Concurrency within 5% of C. Step time a + b*N with a = 20 ms,
# b = 0.5 ms keeps C = 64 at 52 ms per step.
. tests/lib.sh

start_fake --prefill-ms 15 --step-a-ms 20 --step-b-ms 0.5
for c in 1 16 64; do
    n=$((4 * c))
    [ "$c" -eq 1 ] && n=8
    curl -s -X POST "$url/stats/reset" >/dev/null
    bench -c "$c" -n "$n" --input-len 64 --output-len 32 --warmup 0 --jsonl "$T_TMP/c$c.jsonl"
    check_eq "c=$c: exit status" "$rc" 0
    check_eq "c=$c: all $n requests succeeded" "$(bench_value 'Successful requests:' "$T_TMP/out")" "$n"
    check_eq "c=$c: server saw exactly the measured requests" "$(truth completed)" "$n"
    tpot=$(bench_value 'Median TPOT (ms):' "$T_TMP/out")
    ttft=$(bench_value 'Median TTFT (ms):' "$T_TMP/out")
    conc=$(bench_value 'Concurrency:' "$T_TMP/out")
    t_tpot=$(truth median_tpot_ms)
    t_ttft=$(truth median_ttft_ms)
    check "c=$c: median TPOT $tpot ms within 3% of the server's $t_tpot" within "$tpot" "$t_tpot" 0.03 rel
    check "c=$c: median TTFT $ttft ms within 2 ms of the server's $t_ttft" within "$ttft" "$t_ttft" 2
    check "c=$c: Concurrency $conc within 5% of $c" within "$conc" "$c" 0.05 rel
    check_eq "c=$c: peak concurrent requests" "$(bench_value 'Peak concurrent requests:' "$T_TMP/out")" "$c"
    check_eq "c=$c: tokens from usage" "$(bench_value 'Total generated tokens:' "$T_TMP/out")" $((n * 32))
    check_eq "c=$c: one JSON line per request" "$(wc -l <"$T_TMP/c$c.jsonl")" "$n"
done

# The block is what the sglang preset expects: 40-column labels, 50-column rules.
check "every row's value starts at column 42" awk 'NF && !/^[=-]/ && !/^#/ && substr($0, 41, 1) != " " { exit 1 }' "$T_TMP/out"
check "rules are 50 wide" awk '/^[=-]/ && length($0) != 50 { exit 1 }' "$T_TMP/out"
check "header as SGLang prints it" grep -qx '============ Serving Benchmark Result ============' "$T_TMP/out"
check "TPOT section title" grep -qx -- '-----Time per Output Token (excl. 1st token)------' "$T_TMP/out"
check "ITL section title" grep -qx -- '---------------Inter-Token Latency----------------' "$T_TMP/out"
check "JSONL lines are JSON" python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$T_TMP/c64.jsonl')]
assert all(r['status'] == 'ok' and r['output_tokens'] == 32 and len(r['itl_ms']) == 31 for r in rows)
"
stop_fake
finish
