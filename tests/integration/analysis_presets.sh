# analysis_presets.sh: the presets for the clients people use (issue 13
# item 5). `sweep check --metrics` prints the glossary and the README
# carries exactly that; `sweep extract --preset` reads each captured export
# (tests/fixtures/logs/exports/) and the aiperf console; a broken export is
# a clear failure; `sweep run` with an export preset reads the export the
# client wrote beside its log (a client that wrote none fails its point,
# naming the file), each repeat its own (`${point}` in the client's argv),
# `sweep plot` rebuilds the same from the run folder, and `sweep import`
# puts an export where its point reads it, taking C and P from its keys.
. tests/lib.sh

fix=tests/fixtures/logs

# the glossary and the README block are one table
"$SWEEP" check --metrics >"$T_TMP/gloss"
check_eq "sweep check --metrics exits 0" "$?" 0
sed -n '/^<!-- metrics:begin -->$/,/^<!-- metrics:end -->$/p' README.md | sed '1d;$d' >"$T_TMP/readme"
if [ -s "$T_TMP/readme" ] && cmp -s "$T_TMP/gloss" "$T_TMP/readme"; then
    ok "README metrics block matches sweep check --metrics"
else
    fail "README metrics block differs from sweep check --metrics (regenerate it):"
    diff "$T_TMP/readme" "$T_TMP/gloss" | head -n 10
fi
check "AIPerf's and GuideLLM's inter token latency are our TPOT" \
    grep -q '^| TPOT |.*`inter_token_latency` |.*`inter_token_latency_ms` |' "$T_TMP/gloss"
"$SWEEP" check --metrics x.yaml >/dev/null 2>&1
check_eq "--metrics with a file: usage error" "$?" 2

# each captured export, read by its preset at full precision
x() { "$SWEEP" extract --preset "$1" "$fix/$2" >"$T_TMP/x.json" 2>"$T_TMP/x.err"; }
x aiperf-json exports/aiperf_profile_export_aiperf.json
check_eq "aiperf-json: exit 0" "$?" 0
check "aiperf-json: TPOT from inter_token_latency.p50" grep -q '"median_tpot_ms": 28.235305366666665,' "$T_TMP/x.json"
check "aiperf-json: ITL from inter_chunk_latency.p50" grep -q '"median_itl_ms": 28.023594499999998,' "$T_TMP/x.json"
x aiperf-csv exports/aiperf_profile_export_aiperf.csv
check "aiperf-csv: the same at two decimals" grep -q '"median_tpot_ms": 28.24,' "$T_TMP/x.json"
x aiperf aiperf_captured.log
check "aiperf console: the table's p50 column" grep -q '"median_tpot_ms": 28.24,' "$T_TMP/x.json"
x guidellm-json exports/guidellm_benchmarks.json
check "guidellm-json: request_latency seconds as ms" grep -q '"median_e2e_ms": 434.4668388366699' "$T_TMP/x.json"
check "guidellm-json: a long one-line report needs no note" sh -c "! test -s '$T_TMP/x.err'"
x vllm-json exports/vllm_save_result.json
check "vllm-json: e2el as e2e" grep -q '"p99_e2e_ms": 453.13427469959606' "$T_TMP/x.json"
x sglang-jsonl exports/sglang_output.jsonl
check "sglang-jsonl: the run's line, Infinity request rate and all" grep -q '"median_tpot_ms": 28.527267166646197,' "$T_TMP/x.json"
printf '{"completed": 3,\n "duration": }\n' >"$T_TMP/bad.json"
"$SWEEP" extract --preset vllm-json "$T_TMP/bad.json" >/dev/null 2>"$T_TMP/bad.err"
check_eq "a broken export: exit 1" "$?" 1
check "names file, line and column" grep -q "bad.json:2:14: not JSON: " "$T_TMP/bad.err"

# sweep run: the client writes vLLM's --save-result file beside its log
export_cmd="[sh, -c, 'cp \"\$1\" \"\$2\" && echo wrote \"\$2\"', sh, '$TOPDIR/$fix/exports/vllm_save_result.json', '\${run_dir}/\${variant}/\${point}.json']"
make_experiment fakeserver "$T_TMP/run.yaml" NAME=presets PIDFILE="$T_TMP/fs.pid" GRID='["4:16"]' EXTRA="$(cat <<YAML
metrics: {preset: vllm-json, require: [output_throughput, median_tpot_ms]}
variants:
  - {name: wrote, bench: {command: $export_cmd, repeat: 2}}
  - {name: silent, bench: {command: [sh, -c, 'echo no export']}}
YAML
)"
"$SWEEP" run "$T_TMP/run.yaml" --out "$T_TMP/out" >"$T_TMP/run.out" 2>"$T_TMP/run.err"
check_eq "one point without its export: exit 1" "$?" 1
check "each repeat read its own export (\${point})" sh -c "test -f '$T_TMP/out/wrote/c4-n16-r2.json' && grep '^wrote,4,16,1,ok' '$T_TMP/out/points.csv' | grep -q 28.54705939998894 && grep '^wrote,4,16,2,ok' '$T_TMP/out/points.csv' | grep -q 28.54705939998894"
check "the point without an export names the file and where to write it" grep -q "silent,4,16,1,failed,.*no export '.*silent/c4-n16.json': the vllm-json preset reads the client's export there (have the client write \"\"\${run_dir}/\${variant}/\${point}.json\"\")" "$T_TMP/out/points.csv"
cp "$fix/exports/vllm_save_result.json" "$T_TMP/out/silent/c4-n16.json"
"$SWEEP" plot "$T_TMP/out" --no-preview >"$T_TMP/plot.out" 2>"$T_TMP/plot.err"
check_eq "sweep plot, the export now there: exit 0" "$?" 0
check "sweep plot rebuilds the points from the exports" sh -c "grep '^wrote,4,16,2,ok' '$T_TMP/out/points.csv' | grep -q 28.54705939998894"
check "a point that lacked its export is read again" sh -c "grep '^silent,4,16,1,ok' '$T_TMP/out/points.csv' | grep -q 28.54705939998894"

# sweep import of an export: placed where its point reads it, C and P from
# the export's own keys (no tag in these names)
for p in vllm-json:vllm_save_result.json:c4-n16.json sglang-jsonl:sglang_output.jsonl:c4-n16.jsonl \
    guidellm-json:guidellm_benchmarks.json:c4-n16.json \
    aiperf-json:aiperf_profile_export_aiperf.json:c4-n16/profile_export_aiperf.json; do
    preset=${p%%:*} rest=${p#*:}
    file=${rest%%:*} placed=${rest#*:}
    mkdir -p "$T_TMP/src-$preset"
    cp "$fix/exports/$file" "$T_TMP/src-$preset/$file"
    "$SWEEP" import "$T_TMP/src-$preset/$file" --preset "$preset" --out "$T_TMP/imp-$preset" >/dev/null 2>"$T_TMP/imp.err"
    check_eq "import of a $preset export: exit 0" "$?" 0
    check "$preset: placed where its point reads it ($placed)" test -f "$T_TMP/imp-$preset/default/$placed"
    check "$preset: C=4 and P=16 from the export, the point ok" grep -q '^default,4,16,1,ok' "$T_TMP/imp-$preset/points.csv"
done
check "vllm-json import: the export's values" sh -c "grep '^default,4,16,1,ok' '$T_TMP/imp-vllm-json/points.csv' | grep -q 28.54705939998894"
finish
