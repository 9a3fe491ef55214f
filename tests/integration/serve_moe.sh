# serve_moe: `fp4serve serve` on the synthetic qwen3moe (4 layers, 16
# experts, 4 per token, MXFP4 experts) reports the experts its steps read.
# Batched decode groups a step's tokens by expert, so 16 sequences in a
# step read each touched expert once (at most 16 per layer, 64 per step,
# fewer than 4 x 4 = 16 per sequence); per-request decode reads 16 per
# sequence of a step. The weight bytes a step read follow: never above the
# all-experts bound (fp4serve_model_weight_bytes) when batched, and the
# last step's gauge agrees with the counters; the decode-only series
# (fp4serve_decode_only_expert_activations_total, ..._weight_bytes_read_total)
# count a part of those reads, the prompt steps left out. Mechanism, not speed.
. tests/lib.sh
need jq

model="$T_TMP/moe.gguf"
"$FP4SERVE" synth --arch qwen3moe --type mxfp4 -o "$model" 2>/dev/null
check_eq "synth qwen3moe mxfp4" "$?" "0"

# load MODE: 16 concurrent requests of 12 tokens, then the counters
load() {
    pids=""
    for i in $(seq 1 16); do
        post /v1/completions "{\"prompt\":\"the river $i\",\"max_tokens\":12,\"ignore_eos\":true}" \
            >"$T_TMP/r.$i" &
        pids="$pids $!"
    done
    wait $pids
    check_eq "$1: 16 requests answered" "$(cat "$T_TMP"/r.* | grep -o '"finish_reason":"length"' | wc -l)" "16"
    curl -s "$SRV_URL/metrics" >"$T_TMP/m.$1"
}
val() { metric_in "$T_TMP/m.$1" "$2"; }

for mode in batched per-request; do
    start_serve "$model" --threads 2 --max-batch 16 --ctx 64 --decode "$mode" ||
        { fail "server start ($mode)"; finish; exit 1; }
    load "$mode"
    stop_serve
    acts=$(val "$mode" fp4serve_expert_activations_total)
    seqs=$(val "$mode" fp4serve_step_sequences_total)
    steps=$(val "$mode" fp4serve_steps_total)
    ebytes=$(val "$mode" fp4serve_expert_weight_bytes_total)
    rbytes=$(val "$mode" fp4serve_weight_bytes_read_total)
    bound=$(val "$mode" fp4serve_model_weight_bytes)
    last=$(val "$mode" fp4serve_last_step_weight_bytes)
    lastx=$(val "$mode" fp4serve_last_step_experts)
    dsteps=$(val "$mode" fp4serve_decode_only_steps_total)
    dacts=$(val "$mode" fp4serve_decode_only_expert_activations_total)
    dbytes=$(val "$mode" fp4serve_decode_only_weight_bytes_read_total)
    echo "$mode: $steps steps, $seqs sequences, $acts expert reads ($ebytes bytes), $rbytes weight bytes read, bound $bound per step"
    check "$mode: experts counted" awk -v a="$acts" 'BEGIN { exit !(a > 0) }'
    # every expert of this model has the same size: bytes = reads x one expert's
    check "$mode: expert bytes = reads x one expert's bytes" \
        awk -v a="$acts" -v b="$ebytes" 'BEGIN { exit !(a > 0 && b % a == 0) }'
    check "$mode: weight bytes read include the experts" \
        awk -v r="$rbytes" -v b="$ebytes" 'BEGIN { exit !(r > b) }'
    check "$mode: last step's gauges set" awk -v l="$last" -v x="$lastx" 'BEGIN { exit !(l > 0 && x >= 16) }'
    # the decode-only series count a part of the steps: the prompt steps
    # (16 prompts of a few tokens each) add to the all-steps series only
    echo "$mode: $dsteps decode-only steps, $dacts expert reads, $dbytes weight bytes read"
    check "$mode: decode-only steps, expert reads and bytes are a part of all steps'" \
        awk -v ds="$dsteps" -v s="$steps" -v da="$dacts" -v a="$acts" -v db="$dbytes" -v b="$rbytes" \
        'BEGIN { exit !(ds > 0 && ds < s && da > 0 && da < a && db > 0 && db < b) }'
    if [ "$mode" = batched ]; then
        check "batched: at most 64 expert reads per step ($acts / $steps)" \
            awk -v a="$acts" -v s="$steps" 'BEGIN { exit !(a > 0 && s > 0 && a <= 64 * s) }'
        check "batched: fewer than 16 expert reads per sequence ($acts / $seqs)" \
            awk -v a="$acts" -v s="$seqs" 'BEGIN { exit !(a > 0 && a < 16 * s) }'
        check "batched: bytes read per step within the all-experts bound" \
            awk -v r="$rbytes" -v s="$steps" -v b="$bound" 'BEGIN { exit !(r > 0 && r <= s * b) }'
        check "batched: at most 64 expert reads per decode-only step ($dacts / $dsteps)" \
            awk -v a="$dacts" -v s="$dsteps" 'BEGIN { exit !(a > 0 && s > 0 && a <= 64 * s) }'
    else
        check "per-request: at least 16 expert reads per sequence of a step ($acts / $seqs)" \
            awk -v a="$acts" -v s="$seqs" 'BEGIN { exit !(a >= 16 * s) }'
    fi
done
finish
