#!/bin/sh
# bench_fp4.sh: decode throughput of SmolLM2-135M in its native Q4_1 and
# requantized at load to MXFP4 and NVFP4, side by side in ONE run of
# `fp4serve bench --quant native,mxfp4,nvfp4` (one process, the same
# prompts; for each batch size the formats take turns, ROUNDS times, and
# each keeps its fastest decode, so a busy spell of the shared machine hits
# them alike), at batch 1 and 16 with 2 threads, and the weight bytes each
# format reads per generated token (weights per step / batch). The head
# stays Q8_0 in every format.
# Knobs: THREADS (2), PP (64), TG (64), BATCHES (1,16), ROUNDS (3), QUANTS, MODEL.
set -u
BUILD=${BUILD:-build}
FP4SERVE=${FP4SERVE:-$BUILD/bin/fp4serve}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
PP=${PP:-64}
TG=${TG:-64}
BATCHES=${BATCHES:-1,16}
QUANTS=${QUANTS:-native,mxfp4,nvfp4}
ROUNDS=${ROUNDS:-3}
if [ ! -f "$MODEL" ]; then
    echo "bench_fp4: skipped: model not present ($MODEL; run make models)"
    exit 0
fi
echo "== fp4serve bench --quant $QUANTS (threads $THREADS, PP $PP, TG $TG, batches $BATCHES, best of $ROUNDS)"
echo "   native = the file's own Q4_1 layers (Q8_0 head); mxfp4/nvfp4 requantized from it at load"
"$FP4SERVE" bench --model "$MODEL" --quant "$QUANTS" --batch "$BATCHES" --prompt-len "$PP" \
    --gen "$TG" --threads "$THREADS" --rounds "$ROUNDS" 2>&1
