# analysis_extract_rebuild.sh: `sweep extract` prints canonical metrics as
# JSON per log (exit statuses for no match, a missing --require, a bad
# regex, an unreadable file); `sweep plot` rebuilds a run folder that has
# only experiment.yaml and client logs, using the experiment's preset,
# patterns and require (a log lacking a required metric becomes a failed
# row naming it), with the variants overlaid on each chart.
. tests/lib.sh

fix=tests/fixtures/logs
"$SWEEP" extract $fix/sglang_captured.log $fix/vllm_old.log >"$T_TMP/x.json" 2>"$T_TMP/x.err"
check_eq "extract exits 0" "$?" 0
check "keyed by file" grep -q "^  \"$fix/sglang_captured.log\": {" "$T_TMP/x.json"
check "canonical names and exact values" grep -q '"median_tpot_ms": 27.53,' "$T_TMP/x.json"
check "vllm's 'Total Token throughput' read by the sglang preset too" grep -q '"total_throughput": 3731.17' "$T_TMP/x.json"
"$SWEEP" extract $fix/sglang_inf_notset.log >"$T_TMP/inf.json"
check "inf prints as the string \"inf\"" grep -q '"output_throughput": "inf",' "$T_TMP/inf.json"
check "'not set' is left out" sh -c "! grep -q '\"concurrency\"' '$T_TMP/inf.json'"
"$SWEEP" extract $fix/vllm_new.log --preset vllm --pattern 'peak_output_throughput=^Peak output token throughput \(tok/s\):\s+(\S+)' >"$T_TMP/v.json"
check "a user pattern adds a name" grep -q '"peak_output_throughput": 256' "$T_TMP/v.json"
check "vllm E2EL maps to e2e" grep -q '"p99_e2e_ms": 11020.55' "$T_TMP/v.json"
"$SWEEP" extract $fix/sglang_mid2025.log --require median_tpot_ms >/dev/null 2>"$T_TMP/req.err"
check_eq "a missing --require'd metric: exit 1" "$?" 1
check "names the metric and the regex tried" grep -q "missing required metric 'median_tpot_ms' (tried /^Median TPOT" "$T_TMP/req.err"
"$SWEEP" extract $fix/vllm_new.log --pattern 'x=(a' >/dev/null 2>"$T_TMP/re.err"
check_eq "a bad regex: exit 2" "$?" 2
check "names the pattern and the offset" grep -q "pattern 'x': bad regex: missing closing parenthesis at offset 2" "$T_TMP/re.err"
"$SWEEP" extract "$T_TMP/nope.log" >/dev/null 2>&1
check_eq "an unreadable log: exit 3" "$?" 3
printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\n' >"$T_TMP/evil.log"
"$SWEEP" extract "$T_TMP/evil.log" --pattern 'evil=^(a+)+$' >/dev/null 2>"$T_TMP/evil.err"
check_eq "a runaway regex fails (exit 2) instead of hanging" "$?" 2
check "and is named" grep -qF "pattern 'evil' (^(a+)+\$): match limit exceeded" "$T_TMP/evil.err"

# a run folder with only experiment.yaml and logs
run="$T_TMP/run"
mkdir -p "$run/mxfp4" "$run/nvfp4"
make_experiment offline "$run/experiment.yaml" NAME=rebuild GRID='["1:8", "8:24", "16:48"]' EXTRA="$(cat <<'YAML'
description: two variants, rebuilt from their logs
metrics:
  preset: sglang
  patterns:
    input_count: '^#Input tokens: (\d+)'
  require: [output_throughput, median_tpot_ms]
variants:
  - {name: mxfp4}
  - {name: nvfp4}
YAML
)"
cp $fix/scaling-a/sweep_c1-n8.log "$run/mxfp4/c1-n8.log"
cp $fix/scaling-a/sweep_8_24.log "$run/mxfp4/c8-n24.log"
cp $fix/scaling-a/sweep_16:48.log "$run/mxfp4/c16-n48.log"
cp $fix/scaling-b/measure_c8-n24.log "$run/nvfp4/c8-n24.log"
cp $fix/scaling-b/measure_c32-n96.log "$run/nvfp4/c32-n96.log"
cp $fix/sglang_mid2025.log "$run/nvfp4/c8-n24-r2.log"
"$SWEEP" plot "$run" --no-preview >"$T_TMP/rb.out" 2>"$T_TMP/rb.err"
check_eq "rebuild with a failed point: exit 1" "$?" 1
check "rows in experiment variant order" sh -c "cut -d, -f1-5 '$run/points.csv' | tr '\n' ' ' | grep -q 'mxfp4,1,8,1,ok mxfp4,8,24,1,ok mxfp4,16,48,1,ok nvfp4,8,24,1,ok nvfp4,8,24,2,failed nvfp4,32,96,1,ok'"
check "the failed row names the missing metric" grep -q "nvfp4,8,24,2,failed,,missing required metric 'median_tpot_ms'" "$run/points.csv"
check "the warning names the log" grep -q "nvfp4/c8-n24-r2.log: missing required metric 'median_tpot_ms'" "$T_TMP/rb.err"
check "the experiment's own pattern was used" grep -q 'input_count' "$run/points.csv"
check "both variants fitted" sh -c "grep -q 'fit mxfp4: median_tpot_ms = 40.0 + 30.80' '$T_TMP/rb.out' && grep -q 'fit nvfp4: median_tpot_ms = 60.0 + 20.00' '$T_TMP/rb.out'"
check "REPORT.md has the description" grep -q 'two variants, rebuilt from their logs' "$run/REPORT.md"
check "REPORT.md lists the failure" grep -q 'nvfp4 C=8 n=24 repeat 2: \*\*failed\*\*' "$run/REPORT.md"
check "variants overlaid on one chart" sh -c "grep -q 'index 1' '$run/plots/tpot.gp' && grep -q 'nvfp4 fit: 60.0 + 20.00·N ms' '$run/plots/tpot.svg'"
finish
