# run_roofline.sh: REPORT.md places a and b against the roofline the server
# reports. fakeserver's step law is exact (20 + 2·N ms); its saved scrapes
# get fp4serve's roofline gauges appended (1.6 GB of weights per step,
# 2 GFLOP per token, 100 GB/s measured), and `sweep plot` rebuilds the
# report from the saved files: a is 1.25x the 16 ms weight read
# (bandwidth-bound), b is 9% of the one-request step (compute-bound). Without
# the bandwidth gauge, a is not placed and the missing number is named; a
# server that reports none of them gets no Roofline section.
. tests/lib.sh
cd "$T_TMP" || exit 1

cat >exp.yaml <<YAML
name: roof
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 20, step-b-ms: 2}
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
  tool: builtin
  input_len: 16
  output_len: 16
  warmup: 1
  timeout_s: 120
  grid: ["1:4", "4:8", "8:16"]
YAML
"$SWEEP" run exp.yaml --out run >out.txt 2>err.txt
check_eq "run exits 0" "$?" 0
check "no roofline numbers from fakeserver: no Roofline section" sh -c "! grep -q '^## Roofline' run/REPORT.md"
check "server fit present" grep -q '^## Client and server step time' run/REPORT.md

# the gauges fp4serve exports (constants: only the scrape after counts)
for f in run/default/*.metrics-after.txt; do
    printf '%s\n' 'fp4serve_model_weight_bytes 1.6e9' 'fp4serve_model_flops_per_token 2e9' \
        'fp4serve_memory_read_bytes_per_second 1e11' >>"$f"
done
"$SWEEP" plot run --no-preview >plot.out 2>&1
check_eq "plot exits 0" "$?" 0
check_eq "server_weight_bytes rebuilt from the scrapes" "$(col run server_weight_bytes | sort -u)" 1600000000
check_eq "server_mem_gbs in GB/s" "$(col run server_mem_gbs | sort -u)" 100
sed -n '/^## Roofline/,/^## Charts/p' run/REPORT.md
line=$(grep '^\*\*default\*\*: 1600 MB of weights per step, 2 GFLOP per token, 100.0 GB/s measured, from the server step law, ' run/REPORT.md)
check "the numbers and the server law named" test -n "$line"
check "a: bandwidth-bound, 1.2x-1.3x the 16 ms weight read" sh -c \
    "echo '$line' | grep -qE 'a is 1\.(19|2[0-9]|3[01])x the time to read the weights once \(16 ms\): bandwidth-bound'"
check "b: compute-bound, about 9% of the one-request step" sh -c \
    "echo '$line' | grep -qE 'b is (8|9|10)% of the one-request step a \+ b: an added token runs its FLOPs at .*: compute-bound\.$'"

# the server's law as the main fit (analysis.fit.y: server_step_ms): the same placement
cp run/experiment.yaml exp-client.yaml
sed -e 's/^    x: concurrency$/    x: server_batch/' -e 's/^    "y": median_tpot_ms$/    "y": server_step_ms/' \
    exp-client.yaml >run/experiment.yaml
check "experiment.yaml: the fit is on the server's axes" grep -q '"y": server_step_ms' run/experiment.yaml
"$SWEEP" plot run --no-preview >plot1.out 2>&1 || cat plot1.out
check_eq "plot (server fit as the main one) exits 0" "$?" 0
check "the main fit is the server's" grep -q '^## Scaling fit: server_step_ms = a + b·server_batch' run/REPORT.md
check "server fit as the main one: placed the same" grep -qE \
    '^\*\*default\*\*: .*from the server step law, a is 1\.(19|2[0-9]|3[01])x .*: bandwidth-bound; b is .*: compute-bound\.$' run/REPORT.md
cp exp-client.yaml run/experiment.yaml

# no bandwidth measured (fp4serve without --probe-bandwidth): a not placed, said why
for f in run/default/*.metrics-after.txt; do
    grep -v '^fp4serve_memory_read_bytes_per_second' "$f" >tmp && mv tmp "$f"
done
"$SWEEP" plot run --no-preview >plot2.out 2>&1
check_eq "plot (no bandwidth) exits 0" "$?" 0
check "no bandwidth: column empty" sh -c "! head -n 1 run/points.csv | grep -q server_mem_gbs"
check "no bandwidth: a not placed, the missing number named" grep -q \
    'a not placed (missing: a measured memory bandwidth (fp4serve serve --probe-bandwidth)); b is' run/REPORT.md
check "no bandwidth: no bandwidth verdict" sh -c "! grep '^\*\*default' run/REPORT.md | grep -q 'bandwidth-bound'"
finish
