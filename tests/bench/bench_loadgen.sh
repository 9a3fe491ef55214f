#!/bin/bash
# bench_loadgen.sh: how accurate and how cheap is `sweep bench`? Against the
# fakeserver (exact server-side truth from GET /stats), at several
# concurrencies, for each client: the error of its median TPOT and of its
# median and P99 TTFT against the server's own numbers, and its CPU time per
# streamed token. SGLang's bench_serving and vLLM's bench serve run in the
# same script against the same server when a Python environment with them
# exists (tests/bench/setup_python_clients.sh makes one in build/bench-venv).
#
# CPU per token is marginal, so that start-up, imports and exit cancel out:
# each client runs twice, with n = C and n = 4C requests (8 and 32 at C=1),
# and CPU(4C) - CPU(C) is divided by the extra output tokens. Each run's CPU
# counts from the line that starts its measured phase (sampled from
# /proc/PID/stat, 10 ms ticks) to its exit (bash's `time`). Accuracy comes
# from the 4C run, with the server's statistics reset just before it.
#
# Environment: BENCH_CONCS (default "1 64 256 1000"), BENCH_TOOLS (default
# "sweep sglang vllm"), BENCH_PYTHON (default build/bench-venv/bin/python).
# C = 1000 rather than 1024: the fakeserver's libmicrohttpd refuses sockets
# numbered FD_SETSIZE (1024) or higher, which 1024 client connections reach.
. tests/lib.sh

concs=${BENCH_CONCS:-1 64 256 1000}
tools=${BENCH_TOOLS:-sweep sglang vllm}
py=${BENCH_PYTHON:-$BUILD/bench-venv/bin/python}
out_len=32
in_len=64
tok_dir="$BUILD/bench-tokenizer"
here=tests/bench

have_py() { # have_py MODULE
    [ -x "$py" ] && "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)" 2>/dev/null
}
runnable=""
for t in $tools; do
    case $t in
    sweep) runnable="$runnable sweep" ;;
    sglang | vllm)
        if have_py "$t"; then
            runnable="$runnable $t"
        else
            echo "skipped $t: no $t in $py (run tests/bench/setup_python_clients.sh)"
        fi
        ;;
    esac
done
if [ "$runnable" != " sweep" ] && [ ! -f "$tok_dir/tokenizer.json" ]; then
    "$py" "$here/make_tokenizer.py" "$tok_dir" || { echo "cannot make the tokenizer"; exit 1; }
fi

# tree_cpu PID: user + system CPU so far of PID's descendants (not PID
# itself, the timing subshell), in seconds (10 ms ticks).
tree_cpu() {
    local kids k total=0
    kids=$(pgrep -P "$1")
    for k in $kids; do
        total=$(awk -v t="$total" -v hz="$(getconf CLK_TCK)" -v sub_="$(tree_cpu "$k")" \
            '{ sub(/.*\) /, ""); print t + ($12 + $13) / hz + sub_ }' "/proc/$k/stat" 2>/dev/null || echo "$total")
    done
    echo "$total"
}

# run_tool TOOL C N LOG: run one client; sets cpu_run (s, from its start
# marker to its exit) and rc.
run_tool() {
    local tool=$1 c=$2 n=$3 log=$4 marker
    local -a cmd
    case $tool in
    sweep)
        marker='^#load:'
        cmd=("$SWEEP" bench --url "$url" -c "$c" -n "$n" --input-len "$in_len" --output-len "$out_len"
            --warmup 1) ;;
    sglang)
        marker='Starting main benchmark run'
        cmd=("$py" "$here/sglang_client.py" --backend sglang-oai --base-url "$url" --model fake-model
            --tokenizer "$tok_dir" --dataset-name random-ids --random-input-len "$in_len"
            --random-output-len "$out_len" --random-range-ratio 1.0 --num-prompts "$n"
            --max-concurrency "$c" --warmup-requests 1 --disable-tqdm
            --output-file "$T_TMP/sglang.jsonl") ;;
    vllm)
        marker='Starting main benchmark run'
        cmd=("$py" "$here/vllm_client.py" --base-url "$url" --model fake-model --tokenizer "$tok_dir"
            --dataset-name random --random-input-len "$in_len" --random-output-len "$out_len"
            --num-prompts "$n" --max-concurrency "$c" --ignore-eos --num-warmups 1 --temperature 0
            --ready-check-timeout-sec 0 --disable-tqdm) ;;
    esac
    : >"$log" # the marker must not be found in an older log
    # `time` runs in a background subshell, so it accounts for the client
    # alone, not for the polling below
    (
        TIMEFORMAT='%3U %3S'
        time HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 timeout -k 5 600 "${cmd[@]}" >"$log" 2>&1
    ) 2>"$T_TMP/time" &
    local wrapper=$! start_cpu=0 seen=""
    while kill -0 "$wrapper" 2>/dev/null; do
        if [ -z "$seen" ] && grep -q "$marker" "$log" 2>/dev/null; then
            seen=1
            start_cpu=$(tree_cpu "$wrapper")
        fi
        sleep 0.02
    done
    wait "$wrapper"
    rc=$?
    cpu_run=$(awk -v s="$start_cpu" 'NF == 2 { print $1 + $2 - s }' "$T_TMP/time" | tail -n 1)
}

printf '\nsweep bench and Python clients against the fakeserver: prefill 20 ms, step 20 + 0.05*N ms,\n'
printf '%d-token prompts, %d output tokens (ignore_eos), n = 4C requests (32 at C=1), 1 warmup each.\n' "$in_len" "$out_len"
printf 'CPU per token: marginal, (CPU at n=4C - CPU at n=C) / extra tokens (see the header).\n' 
printf 'Errors are client minus server truth (server: admission -> token handed to the socket).\n\n'
printf '%-6s %-12s %6s %6s  %9s %8s  %9s %8s  %9s %8s  %9s\n' conc client reqs ok \
    "TPOT ms" "err %" "TTFT ms" "err ms" "P99 TTFT" "err ms" "CPU us/tok"
declare -A cpu_of
for c in $concs; do
    start_fake --prefill-ms 20 --step-a-ms 20 --step-b-ms 0.05
    nreq=$((4 * c)) # after start_fake: lib.sh's wait_http uses $n
    nsmall=$c
    [ "$c" -eq 1 ] && nreq=32 nsmall=8
    for t in $runnable; do
        log="$BUILD/bench-logs/loadgen-$t-c$c.log"
        mkdir -p "$(dirname "$log")"
        run_tool "$t" "$c" "$nsmall" "$log.half"
        cpu_half=$cpu_run
        ok_half=$(bench_value 'Successful requests:' "$log.half")
        curl -s -X POST "$url/stats/reset" >/dev/null
        run_tool "$t" "$c" "$nreq" "$log"
        ok=$(bench_value 'Successful requests:' "$log")
        if [ -z "$ok" ]; then
            printf '%-6s %-12s %6s  failed (exit %s), see %s\n' "$c" "$t" "$nreq" "$rc" "$log"
            continue
        fi
        s_tpot=$(truth median_tpot_ms)
        s_ttft=$(truth median_ttft_ms)
        s_p99=$(truth p99_ttft_ms)
        tpot=$(bench_value 'Median TPOT (ms):' "$log")
        ttft=$(bench_value 'Median TTFT (ms):' "$log")
        p99=$(bench_value 'P99 TTFT (ms):' "$log")
        cpu_tok=$(awk -v a="$cpu_half" -v b="$cpu_run" -v t="$(( (ok - ${ok_half:-0}) * out_len ))" \
            'BEGIN { printf "%.1f", (t > 0 ? (b - a) * 1e6 / t : 0) }')
        cpu_of[$t,$c]=$cpu_tok
        awk -v c="$c" -v t="$t" -v n="$nreq" -v ok="$ok" -v st="$s_tpot" -v ct="$tpot" -v sf="$s_ttft" \
            -v cf="$ttft" -v sp="$s_p99" -v cp="$p99" -v cpu="$cpu_tok" 'BEGIN {
            printf "%-6s %-12s %6d %6d  %9.2f %+7.2f%%  %9.2f %+8.2f  %9.2f %+8.2f  %9s\n",
                c, t, n, ok, st, (ct - st) / st * 100, sf, cf - sf, sp, cp - sp, cpu }'
    done
    stop_fake
done

echo
for t in $runnable; do
    [ "$t" = sweep ] && continue
    line="CPU per token, $t / sweep bench:"
    for c in $concs; do
        a=${cpu_of[$t,$c]:-} b=${cpu_of[sweep,$c]:-}
        [ -n "$a" ] && [ -n "$b" ] &&
            line="$line $(awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf "C=%s %.0fx ", c, (b > 0 ? a / b : 0) }')"
    done
    echo "$line"
done
echo "logs: $BUILD/bench-logs/loadgen-*.log"
