# serve_sweep: sweep drives the bundled engine. `sweep bench` against
# `fp4serve serve` sees a conforming stream (every request ok, usage
# present, at most one chunk per token); `sweep run` on a decode-modes experiment
# starts fp4serve per variant, runs the grid and fits a marginal cost per
# request (b) for per-request decode a multiple of the batched one, with
# per-request throughput flat and batched throughput rising; every
# experiments/*.yaml of the engine passes `sweep check`.
#
# The fit runs on a seeded synthetic model of SmolLM2-135M's shape: the
# tiny model's step (about 30 us) is below the noise of HTTP and the
# client, so its two regimes cannot be told apart by timing.
. tests/lib.sh

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

# The regimes' signatures, with margins for a machine shared by many:
# per-request throughput stays flat with concurrency (weights read once per
# sequence), batched throughput rises, and the fitted marginal cost b of
# per-request decode is a multiple of the batched one. On a 2-core CPU the
# batched kernels are compute-bound, so that multiple is 2-4x for this
# shape (not the 10x of a bandwidth-bound GPU); the test asks for 1.5x,
# and 1.25x for the throughput signatures. Throughputs are the best of the
# three repeats (other load only ever slows a point down). Load from other
# processes comes in bursts that can last a whole variant, so when the
# signatures fail the sweep runs once more and the second run decides.
best_col() { # RUN VARIANT C METRIC: the best of the repeats in points.csv
    awk -F, -v v="$2" -v c="$3" -v m="$4" 'NR == 1 { for (i = 1; i <= NF; i++) k[$i] = i; next }
        $1 == v && $2 == c && $k[m] > best { best = $k[m] } END { print best }' "$1/points.csv"
}
ge() { awk -v a="${1:-0}" -v b="${2:-0}" -v r="$3" 'BEGIN { exit !(b > 0 && a >= r * b) }'; }
# signatures RUN: prints the numbers, fails when a signature is missing
signatures() {
    local r=$1 bat1 bat8 per1 per8 b_bat b_per
    bat1=$(best_col "$r" batched 1 output_throughput) bat8=$(best_col "$r" batched 8 output_throughput)
    per1=$(best_col "$r" per-request 1 output_throughput) per8=$(best_col "$r" per-request 8 output_throughput)
    b_bat=$(jq -r '.variants.batched.b' "$r/fit.json")
    b_per=$(jq -r '.variants["per-request"].b' "$r/fit.json")
    echo "output tok/s: batched C=1 $bat1, C=8 $bat8; per-request C=1 $per1, C=8 $per8"
    echo "fit: b batched $b_bat ms, b per-request $b_per ms"
    SIG="batched $bat1 -> $bat8 tok/s, per-request $per1 -> $per8, b $b_bat vs $b_per ms"
    ge "$bat8" "$bat1" 1.25 && ! ge "$per8" "$per1" 1.25 && ge "$bat8" "$per8" 1.25 &&
        awk -v p="${b_per:-0}" -v b="${b_bat:-1e9}" 'BEGIN { exit !(p > 0.5 && p >= 1.5 * b) }'
}
sig_ok=no
if signatures "$T_TMP/run"; then
    sig_ok=yes
else
    echo "signatures missing on the first run (machine load?); running the sweep again"
    "$SWEEP" run "$T_TMP/decode-modes.yaml" --out "$T_TMP/run2" >"$T_TMP/run2.log" 2>&1
    signatures "$T_TMP/run2" && sig_ok=yes
fi
check_eq "decode regimes: batched throughput rises >= 1.25x from C=1 to 8, per-request stays flat
    (< 1.25x), batched >= 1.25x per-request at C=8, per-request b >= 1.5x batched b ($SIG)" \
    "$sig_ok" "yes"

# ---- the engine's experiment files are valid ----
for f in experiments/quickstart.yaml experiments/decode-modes.yaml experiments/fp4-compare.yaml; do
    QUICKSTART_MODEL="$synth" DECODE_MODES_MODEL="$synth" FP4_COMPARE_MODEL="$synth" \
        "$SWEEP" check "$f" >/dev/null 2>&1
    check_eq "sweep check $f" "$?" "0"
done
finish
