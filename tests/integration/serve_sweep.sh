# serve_sweep: sweep drives the bundled engine. `sweep bench` against
# `fp4serve serve` sees a conforming stream (every request ok, usage
# present, at most one chunk per token); `sweep run` on a decode-modes experiment
# starts fp4serve per variant, runs the grid, fits and draws, and the
# server's counters show each regime's mechanism (batched: one pass over the
# weights per step of several sequences; per-request: one pass per
# sequence); every experiments/*.yaml of the engine passes `sweep check`.
# Speed is not asserted here: `make bench` (tests/bench/bench_serve.sh)
# measures the two regimes' throughput and fitted b side by side.
. tests/lib.sh
need jq

# ---- sweep bench against fp4serve: the stream as a benchmark client reads it ----
start_serve "$(tiny_model)" --threads 2 --ctx 512 || { fail "server start"; finish; exit 1; }
"$SWEEP" bench --url "$SRV_URL" -c 8 -n 32 --input-len 24 --output-len 16 \
    --jsonl "$T_TMP/b.jsonl" >"$T_TMP/b.log" 2>&1
check_eq "sweep bench: exit status" "$?" "0"
check "sweep bench: 32 successful requests" grep -qE '^Successful requests: +32 *$' "$T_TMP/b.log"
check "sweep bench: 0 failed" grep -qE '^Failed requests: +0 *$' "$T_TMP/b.log"
check "sweep bench: 512 generated tokens (usage)" grep -qE '^Total generated tokens: +512 *$' "$T_TMP/b.log"
check "sweep bench: model id from /v1/models" grep -q '^#model: tiny$' "$T_TMP/b.log"
# a token whose bytes end inside a UTF-8 character sends no event of its own
jq -c 'select((.status == "ok" and .usage_missing == false and .output_tokens == 16
        and .chunks >= 1 and .chunks <= 16 and .prompt_tokens == 24 and .ttft_ms > 0
        and .ttft_ms <= .e2e_ms) | not)' "$T_TMP/b.jsonl" >"$T_TMP/b.bad"
check_eq "sweep bench: every record ok, usage present, at most one chunk per token" \
    "$(wc -l <"$T_TMP/b.bad") $(head -c 400 "$T_TMP/b.bad")" "0 "
stop_serve

# ---- sweep run: batched vs per-request decode ----
synth="$T_TMP/smol-synth.gguf"
"$FP4SERVE" synth --preset smollm2-135m --type q4_1 --seed 3 -o "$synth" >/dev/null 2>&1
check_eq "synthetic SmolLM2-shaped model" "$?" "0"
cat >"$T_TMP/decode-modes.yaml" <<EOF
name: decode-modes-test
description: batched vs per-request decode on a synthetic SmolLM2-shaped model
server:
  engine: bundled
  model: $synth
  flags: {threads: 2, max-batch: 8, ctx: 128, prefill-chunk: 64}
  ready: {timeout_s: 60}
  stop: {grace_s: 5}
bench:
  input_len: 8
  output_len: 32
  warmup: 2
  repeat: 3
  timeout_s: 300
  grid: ["1:4", "2:4", "4:8", "8:16"]
variants:
  - {name: batched, server: {flags: {decode: batched}}}
  - {name: per-request, server: {flags: {decode: per-request}}}
EOF
"$SWEEP" check "$T_TMP/decode-modes.yaml" >/dev/null 2>&1
check_eq "sweep check: decode-modes test experiment" "$?" "0"
"$SWEEP" run "$T_TMP/decode-modes.yaml" --out "$T_TMP/run" >"$T_TMP/run.log" 2>&1
check_eq "sweep run: exit status 0 (all points ok)" "$?" "0"
tail -n 5 "$T_TMP/run.log"
check_eq "sweep run: 24 ok points (8 x 3 repeats)" "$(grep -c ',ok,' "$T_TMP/run/points.csv")" "24"
for f in fit.json REPORT.md manifest.json batched/server.log per-request/server.log \
    batched/c8-n16-r3.log per-request/c8-n16-r3.jsonl; do
    check "sweep run: $f" test -s "$T_TMP/run/$f"
done
check "sweep run: charts drawn" sh -c "ls '$T_TMP/run/plots/'*.gp >/dev/null 2>&1"
check "server log: fp4serve ran per-request decode" grep -q 'decode per-request' "$T_TMP/run/per-request/server.log"

# The regimes' mechanism, from the server's own counters in the scrapes saved
# beside each point (not from timings, which a loaded machine bends; the
# speed ratio is measured by `make bench`, tests/bench/bench_serve.sh):
# at C = 8 both modes run several sequences per decode step, and batched
# decode reads the weights once per step while per-request decode reads
# them once per sequence of the step. At C = 1 every step carries one
# sequence.
# delta RUN VARIANT POINT NAME: the counter's rise over the point (NAME
# without the model_name label every sample carries)
delta() {
    _b=$(awk -v n="$4" '{ k = $1; sub(/\{model_name="[^"]*"\}$/, "", k) } k == n { print $2 }' "$1/$2/$3.metrics-before.txt")
    _a=$(awk -v n="$4" '{ k = $1; sub(/\{model_name="[^"]*"\}$/, "", k) } k == n { print $2 }' "$1/$2/$3.metrics-after.txt")
    awk -v a="$_a" -v b="$_b" 'BEGIN { if (a == "" || b == "") print "missing"; else printf "%d\n", a - b }'
}
for v in batched per-request; do
    steps=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_steps_total)
    seqs=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_step_sequences_total)
    do_steps=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_decode_only_steps_total)
    do_seqs=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_decode_only_step_sequences_total)
    passes=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_weight_passes_total)
    gen=$(delta "$T_TMP/run" "$v" c8-n16-r3 fp4serve_generation_tokens_total)
    echo "$v C=8: steps $steps, sequences $seqs, decode-only steps $do_steps with $do_seqs sequences, weight passes $passes, tokens $gen"
    # the client saved the "before" scrape after its 2 warm-up requests
    check_eq "$v C=8: 16 measured requests x 32 tokens generated (the warm-up's left out)" "$gen" "512"
    check "$v C=8: decode steps carry several sequences (mean >= 4: $do_seqs / $do_steps)" \
        awk -v s="$do_seqs" -v n="$do_steps" 'BEGIN { exit !(n > 0 && s >= 4 * n) }'
    if [ "$v" = batched ]; then
        check_eq "batched C=8: one pass over the weights per step" "$passes" "$steps"
    else
        check_eq "per-request C=8: one pass over the weights per sequence of a step" "$passes" "$seqs"
    fi
    steps1=$(delta "$T_TMP/run" "$v" c1-n4-r3 fp4serve_steps_total)
    seqs1=$(delta "$T_TMP/run" "$v" c1-n4-r3 fp4serve_step_sequences_total)
    passes1=$(delta "$T_TMP/run" "$v" c1-n4-r3 fp4serve_weight_passes_total)
    check "$v C=1: one sequence and one pass per step ($steps1 steps)" \
        sh -c "[ '$steps1' -gt 0 ] && [ '$seqs1' = '$steps1' ] && [ '$passes1' = '$steps1' ]"
    # alone, a request is one prompt step and 31 decode steps; the warm-up's
    # 2 x 31 would be counted too if the scrape had been taken before them
    check_eq "$v C=1: 4 requests x 31 decode-only steps (the warm-up's left out)" \
        "$(delta "$T_TMP/run" "$v" c1-n4-r3 fp4serve_decode_only_steps_total)" "124"
done
b_bat=$(jq -r '.variants.batched.b' "$T_TMP/run/fit.json")
b_per=$(jq -r '.variants["per-request"].b' "$T_TMP/run/fit.json")
echo "fit (not asserted; make bench measures it): b batched $b_bat ms, per-request $b_per ms"

# ---- the engine's experiment files are valid ----
for f in experiments/quickstart.yaml experiments/decode-modes.yaml experiments/fp4-compare.yaml; do
    QUICKSTART_MODEL="$synth" DECODE_MODES_MODEL="$synth" FP4_COMPARE_MODEL="$synth" \
        "$SWEEP" check "$f" >/dev/null 2>&1
    check_eq "sweep check $f" "$?" "0"
done
finish
