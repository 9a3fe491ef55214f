# run_fit.sh: the whole chain on a server whose truth is known. fakeserver
# steps take a + b*N ms with a = 20, b = 2; `sweep run` over the grid 1:8,
# 4:16, 16:48 with 32 output tokens must give 3 ok rows, valid PNG and SVG
# charts, and a fit of median TPOT against concurrency with a and b within
# 10% of the truth: once with `sweep bench` as an external command client,
# once with the builtin client.
. tests/lib.sh
need jq
cd "$T_TMP" || exit 1

write_exp() { # FILE TOOL_LINES
    cat >"$1" <<YAML
name: fit
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 20, step-b-ms: 2, prefill-ms: 10}
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
$2
  input_len: 16
  output_len: 32
  warmup: 1
  timeout_s: 120
  grid: ["1:8", "4:16", "16:48"]
metrics:
  preset: sglang
  require: [output_throughput, median_tpot_ms, median_ttft_ms]
analysis:
  fit: {x: concurrency, y: median_tpot_ms}
YAML
}

check_run() { # LABEL RUN_DIR
    check_eq "$1: 3 rows" "$(rows "$2")" 3
    check_eq "$1: all ok" "$(col "$2" status | tr '\n' ' ')" "ok ok ok "
    tpots=$(col "$2" median_tpot_ms | tr '\n' ' ')
    echo "$1: median TPOT per point: $tpots (truth 22 28 52)"
    for png in "$2"/plots/*.png; do
        check "$1: $(basename "$png") is a PNG" test "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
    done
    for svg in "$2"/plots/*.svg; do
        check "$1: $(basename "$svg") is an SVG" grep -q "<svg" "$svg"
    done
    check "$1: at least one PNG and one SVG chart" test -n "$(ls "$2"/plots/*.png 2>/dev/null)" -a -n "$(ls "$2"/plots/*.svg 2>/dev/null)"
    a=$(jq -r '.variants.default.a' "$2/fit.json")
    b=$(jq -r '.variants.default.b' "$2/fit.json")
    check "$1: fitted a = $a ms within 10% of 20" within "$a" 20 0.10 rel
    check "$1: fitted b = $b ms within 10% of 2" within "$b" 2 0.10 rel
    check "$1: REPORT.md written" test -s "$2/REPORT.md"
}

write_exp cmd.yaml "  tool: command
  command: [\"$SWEEP\", bench, --url, \"\${url}\", -c, \"\${concurrency}\", -n, \"\${prompts}\", --output-len, \"\${output_len}\", --input-len, \"\${input_len}\"]"
"$SWEEP" run cmd.yaml --out run-cmd >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "command client: exit 0" "$rc" 0
check_run "command client" run-cmd

write_exp builtin.yaml "  tool: builtin"
"$SWEEP" run builtin.yaml >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "builtin client: exit 0" "$rc" 0
check "builtin client: results/fit/latest points to the run" test -L results/fit/latest -a -f results/fit/latest/points.csv
check_run "builtin client" results/fit/latest
check "builtin client: the manifest names this sweep" grep -q '"sweep_version"' results/fit/latest/manifest.json
check "builtin client: experiment.yaml is kept" test -s results/fit/latest/experiment.yaml
finish
