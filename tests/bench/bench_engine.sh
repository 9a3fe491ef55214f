#!/bin/sh
# bench_engine.sh: fp4serve's CPU decode throughput on SmolLM2-135M Q4_1, side
# by side in one run: `fp4serve bench` at batch 1, 4, 16, 64 with --decode
# batched and --decode per-request (aggregate tok/s should rise with B for
# batched and stay flat for per-request), the achieved bandwidth at B=1
# against the machine's measured memcpy/read bandwidth, and llama.cpp's
# single-stream decode (llama-cpp-python) on the same file and threads; and
# Q4_1 vs MXFP4 vs NVFP4 (requantized at load) at batch 1 and 16. It names the
# kernel table the CPU gets; on an AVX-512 machine it also runs --isa avx2
# side by side (what an AVX2-only CPU would run).
# Knobs: THREADS (2), PP (128), TG (64), BATCHES (1,4,16,64), ROUNDS (3), MODEL.
set -u
BUILD=${BUILD:-build}
FP4SERVE=${FP4SERVE:-$BUILD/bin/fp4serve}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
PP=${PP:-128}
TG=${TG:-64}
BATCHES=${BATCHES:-1,4,16,64}
ROUNDS=${ROUNDS:-3}
if [ ! -f "$MODEL" ]; then
    echo "bench_engine: skipped: model not present ($MODEL; run make models)"
    exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-engine.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "== fp4serve bench: decode batched (threads $THREADS, PP $PP, TG $TG)"
"$FP4SERVE" bench --model "$MODEL" --batch "$BATCHES" --prompt-len "$PP" --gen "$TG" \
    --threads "$THREADS" --decode batched 2>&1 | tee "$out/batched.txt"
echo
# The kernel table this CPU gets, and (on an AVX-512 machine) what an
# AVX2-only one would run: --isa avx2 against auto, alternating, best of ROUNDS.
kern=$(sed -n 's/.*kernels = \([a-z0-9]*\).*/\1/p' "$out/batched.txt" | head -n 1)
echo "== kernels: $kern (CPU flags: $(grep -m1 -o -w 'avx2\|fma\|f16c\|avx512f\|avx512bw\|avx512vl\|avx512_vnni\|avx_vnni' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' '))"
if [ "$kern" = avx512 ]; then
    echo "   --isa avx2 vs $kern, same file and threads, S_TG per batch and S_PP (prefill), best of $ROUNDS"
    for i in $(seq "$ROUNDS"); do
        for isa in avx2 auto; do
            "$FP4SERVE" bench --model "$MODEL" --batch "$BATCHES" --prompt-len "$PP" --gen "$TG" \
                --threads "$THREADS" --isa "$isa" --no-probe 2>/dev/null >>"$out/isa-$isa.txt"
        done
    done
    printf '%6s %12s %12s %7s %12s %12s %7s\n' B tg-avx2 "tg-$kern" ratio pp-avx2 "pp-$kern" ratio
    for b in $(echo "$BATCHES" | tr ',' ' '); do
        col() { awk -F'|' -v b="$b" -v c="$2" '$4+0 == b && $2+0 > 0 { gsub(/ /, "", $c); print $c }' "$1" |
            sort -g | tail -n 1; }
        t2=$(col "$out/isa-avx2.txt" 9) t5=$(col "$out/isa-auto.txt" 9)
        p2=$(col "$out/isa-avx2.txt" 7) p5=$(col "$out/isa-auto.txt" 7)
        printf '%6s %12s %12s %7s %12s %12s %7s\n' "$b" "$t2" "$t5" \
            "$(echo "$t2 $t5" | awk '{ printf "%.2f", $1 / $2 }')" "$p2" "$p5" \
            "$(echo "$p2 $p5" | awk '{ printf "%.2f", $1 / $2 }')"
    done
fi
echo

echo "== fp4serve bench: decode per-request"
"$FP4SERVE" bench --model "$MODEL" --batch "$BATCHES" --prompt-len "$PP" --gen "$TG" \
    --threads "$THREADS" --decode per-request --no-probe 2>&1 | tee "$out/perreq.txt"
echo
echo "== batch 1, fp4serve vs llama.cpp (llama-cpp-python), same file and threads,"
echo "   alternating, best of $ROUNDS rounds each (the machine is shared: best-of damps the noise)"
for i in $(seq "$ROUNDS"); do
    "$FP4SERVE" bench --model "$MODEL" --batch 1 --prompt-len "$PP" --gen "$TG" \
        --threads "$THREADS" --no-probe 2>/dev/null | awk -F'|' '$4+0 == 1 { gsub(/ /, "", $9); print $9 }' \
        >>"$out/ours1.txt"
    python3 tests/bench/llama_cpp_decode.py "$MODEL" --threads "$THREADS" --prompt-len "$PP" \
        --gen "$TG" 2>&1 | tee -a "$out/llama.txt" | sed 's/^/   /'
done
echo "   fp4serve B=1 rounds: $(tr '\n' ' ' <"$out/ours1.txt")"
echo

echo "== fp4serve bench: Q4_1 (native) vs MXFP4 vs NVFP4 requantized at load, batch 1 and 16"
"$FP4SERVE" bench --model "$MODEL" --batch 1,16 --prompt-len "$PP" --gen "$TG" \
    --threads "$THREADS" --quant native,mxfp4,nvfp4 --no-probe 2>&1 | sed -n '/side by side/,$p'
echo

# Summary: S_TG (column 9 of the table) per batch size, and the B=1 ratio.
stg() { awk -F'|' -v b="$2" '$4+0 == b && $2+0 > 0 { gsub(/ /, "", $9); print $9 }' "$1"; }
echo "== summary: decode tok/s (S_TG)"
printf '%6s %12s %12s\n' B batched per-request
for b in $(echo "$BATCHES" | tr ',' ' '); do
    printf '%6s %12s %12s\n' "$b" "$(stg "$out/batched.txt" "$b")" "$(stg "$out/perreq.txt" "$b")"
done
best() { sort -g | tail -n 1; }
ours=$(best <"$out/ours1.txt")
theirs=$(sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$out/llama.txt" | best)
if [ -n "$ours" ] && [ -n "$theirs" ]; then
    echo "B=1 best of $ROUNDS: fp4serve $ours tok/s, llama.cpp $theirs tok/s, ratio $(echo "$ours $theirs" |
        awk '{ printf "%.2f", $1 / $2 }')"
fi
