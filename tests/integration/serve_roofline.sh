# serve_roofline: fp4serve reports its roofline constants. /v1/models meta
# and /metrics gauges carry the weight bytes a decode step reads, the matmul
# FLOPs per token and the attention FLOPs per position, equal to what
# `fp4serve bench` computes for the same model; the measured memory
# bandwidth appears only with --probe-bandwidth (CPU only: with another
# device the flag is a usage error). `sweep run` against it records the
# numbers per point (points.csv server_weight_bytes, server_flops_per_token,
# server_mem_gbs; server_weight_bytes_per_step, the bytes its steps read,
# but no expert columns for this dense model) and REPORT.md has a Roofline
# section.
. tests/lib.sh
need jq

model=$(tiny_model)
"$FP4SERVE" bench --model "$model" --batch 1 --gen 2 --prompt-len 4 --threads 1 --no-probe \
    >"$T_TMP/bench.txt" 2>&1
check_eq "bench: exit status" "$?" "0"
# "roofline: W weight bytes per step, F matmul FLOPs per token, A attention FLOPs per position"
bw=$(awk '/^roofline:/ { print $2 }' "$T_TMP/bench.txt")
bf=$(awk '/^roofline:/ { print $7 }' "$T_TMP/bench.txt")
ba=$(awk '/^roofline:/ { print $12 }' "$T_TMP/bench.txt")
check "bench printed the roofline numbers ($bw, $bf, $ba)" test -n "$bw" -a -n "$bf" -a -n "$ba"
# the tiny preset: 2 layers, n_embd 64, q_dim 64, kv_dim 32, n_ff 128, vocab 512
check_eq "bench: FLOPs per token = 2 x (2 x (2·64·64 + 2·32·64 + 3·128·64) + 512·64)" "$bf" \
    "$((2 * (2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64) + 512 * 64)))"
check_eq "bench: attention FLOPs per position = 4 x q_dim x layers" "$ba" "$((4 * 64 * 2))"

start_serve "$model" --threads 2 || { fail "server start"; finish; exit 1; }
curl -s "$SRV_URL/v1/models" >"$T_TMP/models.json"
check_eq "/v1/models meta.weight_bytes_per_step = bench's" \
    "$(jq -r '.data[0].meta.weight_bytes_per_step' "$T_TMP/models.json")" "$bw"
check_eq "/v1/models meta.flops_per_token = bench's" \
    "$(jq -r '.data[0].meta.flops_per_token' "$T_TMP/models.json")" "$bf"
check_eq "/v1/models meta.attn_flops_per_position = bench's" \
    "$(jq -r '.data[0].meta.attn_flops_per_position' "$T_TMP/models.json")" "$ba"
check_eq "no --probe-bandwidth: no mem_read_gbs" \
    "$(jq -r '.data[0].meta | has("mem_read_gbs")' "$T_TMP/models.json")" "false"
check_eq "/metrics fp4serve_model_weight_bytes" "$(metric fp4serve_model_weight_bytes)" "$bw"
check_eq "/metrics fp4serve_model_flops_per_token" "$(metric fp4serve_model_flops_per_token)" "$bf"
check_eq "no --probe-bandwidth: no bandwidth gauge" \
    "$(curl -s "$SRV_URL/metrics" | grep -c '^fp4serve_memory_read_bytes_per_second')" "0"
stop_serve

start_serve "$model" --threads 2 --probe-bandwidth || { fail "server start (probe)"; finish; exit 1; }
curl -s "$SRV_URL/v1/models" >"$T_TMP/models2.json"
gbs=$(jq -r '.data[0].meta.mem_read_gbs' "$T_TMP/models2.json")
bps=$(metric fp4serve_memory_read_bytes_per_second)
check "--probe-bandwidth: mem_read_gbs > 0 ($gbs)" awk -v g="$gbs" 'BEGIN { exit !(g + 0 > 0) }'
check "--probe-bandwidth: the gauge is the same number in bytes/s ($bps)" \
    awk -v g="$gbs" -v b="$bps" 'BEGIN { exit !(b > 0 && (b / 1e9 - g) < 0.001 && (g - b / 1e9) < 0.001) }'
check "--probe-bandwidth: logged" grep -q 'memory: read .* GB/s' "$SRV_LOG"
stop_serve

"$FP4SERVE" serve --model "$model" --device cuda --probe-bandwidth --port 0 >"$T_TMP/cuda.txt" 2>&1
check_eq "--probe-bandwidth with --device cuda: usage error" "$?" "2"
check "... naming the flag" grep -q -- '--probe-bandwidth measures host memory' "$T_TMP/cuda.txt"

# ---- sweep run on fp4serve: the numbers per point and a Roofline section ----
cat >"$T_TMP/roof.yaml" <<YAML
name: roofline-test
server:
  engine: bundled
  model: $model
  flags: {threads: 2, max-batch: 4, probe-bandwidth: true}
  ready: {timeout_s: 60}
  stop: {grace_s: 5}
bench:
  input_len: 8
  output_len: 16
  warmup: 1
  timeout_s: 120
  grid: ["1:4", "2:4", "4:8"]
YAML
"$SWEEP" run "$T_TMP/roof.yaml" --out "$T_TMP/run" >"$T_TMP/run.log" 2>&1
check_eq "sweep run: exit status" "$?" "0"
check_eq "points.csv server_weight_bytes = the server's" \
    "$(col "$T_TMP/run" server_weight_bytes | sort -u)" "$bw"
check_eq "points.csv server_flops_per_token = the server's" \
    "$(col "$T_TMP/run" server_flops_per_token | sort -u)" "$bf"
check "points.csv server_mem_gbs set on every row" \
    test "$(col "$T_TMP/run" server_mem_gbs | grep -c '^[0-9]')" -eq 3
check "REPORT.md: a Roofline section" grep -q '^## Roofline$' "$T_TMP/run/REPORT.md"
# a dense model: the bytes its steps read, but no expert columns and no experts table
check "dense: server_weight_bytes_per_step on every row" \
    test "$(col "$T_TMP/run" server_weight_bytes_per_step | grep -c '^[0-9]')" -eq 3
check "dense: no server_experts_per_step or server_model_experts column" sh -c \
    "! head -n 1 '$T_TMP/run/points.csv' | grep -qE 'server_experts_per_step|server_model_experts'"
check "dense: REPORT.md has no experts table" sh -c "! grep -q 'experts per step' '$T_TMP/run/REPORT.md'"
# the tiny model's step is within the noise of a shared machine: the line is
# either placed (a against the weight read, b against a token's FLOPs) or
# said to be no law; never a verdict without its numbers
check "REPORT.md: the variant placed, or why not" \
    grep -qE '^\*\*default\*\*: 0.0809 MB of weights per step, 0.000213 GFLOP per token, [0-9.]+ GB/s measured, (from the (server step law|client.s [a-z_]+ fit \(no server step law\)), a is [0-9.]+x the time to read the weights once .*; b is [0-9]+% of the one-request step|not placed: no step law)' \
    "$T_TMP/run/REPORT.md"
sed -n '/^## Roofline/,/^## /p' "$T_TMP/run/REPORT.md" | head -n 8
finish
