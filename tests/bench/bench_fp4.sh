#!/bin/sh
# bench_fp4.sh: decode throughput of SmolLM2-135M in its native Q4_1 and
# requantized at load to MXFP4 and NVFP4, side by side in one run of
# `fp4serve bench --quant native,mxfp4,nvfp4` (one process, the same
# prompts), at batch 1 and 16 with 2 threads, and the weight bytes each
# format reads per generated token (weights per step / batch; the head
# stays Q8_0 in every format). The machine is shared, so the run is
# repeated ROUNDS times and each (format, batch) keeps its best decode
# rate; every round's numbers are printed too.
# Knobs: THREADS (2), PP (64), TG (64), BATCHES (1,16), ROUNDS (3), QUANTS, MODEL.
set -u
BUILD=${BUILD:-build}
FP4SERVE=${FP4SERVE:-$BUILD/bin/fp4serve}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
PP=${PP:-64}
TG=${TG:-64}
BATCHES=${BATCHES:-1,16}
ROUNDS=${ROUNDS:-3}
QUANTS=${QUANTS:-native,mxfp4,nvfp4}
if [ ! -f "$MODEL" ]; then
    echo "bench_fp4: skipped: model not present ($MODEL; run make models)"
    exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-fp4.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "== fp4serve bench --quant $QUANTS --batch $BATCHES (threads $THREADS, PP $PP, TG $TG), $ROUNDS rounds"
echo "   native = the file's own Q4_1 layers; mxfp4/nvfp4 requantized from them at load"
for i in $(seq "$ROUNDS"); do
    "$FP4SERVE" bench --model "$MODEL" --quant "$QUANTS" --batch "$BATCHES" --prompt-len "$PP" \
        --gen "$TG" --threads "$THREADS" --no-probe >"$out/round$i.txt" 2>&1 ||
        { cat "$out/round$i.txt"; exit 1; }
    # the closing "side by side" block: quant, MB/step, tok/s per batch size
    sed -n '/^== side by side/,$p' "$out/round$i.txt" | sed '1,2d' >"$out/side$i.txt"
    echo "-- round $i"
    cat "$out/side$i.txt"
done

echo
echo "== best of $ROUNDS: decode tok/s and weight MB read per generated token"
cat "$out"/side*.txt | awk -v batches="$BATCHES" '
    BEGIN { nb = split(batches, B, ",") }
    NF >= 2 + nb {
        q = $1
        if (!(q in mb)) { order[++nq] = q }
        mb[q] = $2
        for (i = 1; i <= nb; i++) if ($(2 + i) + 0 > best[q, i]) best[q, i] = $(2 + i) + 0
    }
    END {
        printf "%-8s %9s", "quant", "MB/step"
        for (i = 1; i <= nb; i++) printf " | B=%-4s tok/s  MB/tok  ratio", B[i]
        printf "\n"
        for (k = 1; k <= nq; k++) {
            q = order[k]
            printf "%-8s %9.2f", q, mb[q]
            for (i = 1; i <= nb; i++)
                printf " | %12.2f %7.2f %6.3f", best[q, i], mb[q] / B[i], best[q, i] / best[order[1], i]
            printf "\n"
        }
        printf "(ratio: tok/s relative to %s)\n", order[1]
    }'
