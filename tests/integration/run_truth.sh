# run_truth.sh: issue 13 on a server whose step law is exact. fakeserver
# runs each prompt inside a decode step (--prefill-in-steps: a step that
# admits a 128-token prompt lasts 20 + 2·N + 0.2·128 ms, a decode step alone
# 20 + 2·N ms), so the client's TPOT carries prefill while the server's
# /metrics count the decode steps exactly. `sweep run` must save the
# scrapes beside each log, fill server_step_ms and server_batch, fit the
# server's law within 3% of the truth where the TPOT fit is not, draw a
# throughput curve (TTFT included) within 10% of every measured point, show
# the ETA as a lower bound until two levels ran, and `sweep plot` must
# rebuild the columns and charts from the saved files alone. A server
# without /metrics leaves the columns empty and is said once.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE EXTRA_FLAGS GRID
    cat >"$1" <<YAML
name: truth
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"$2]
  flags: {step-a-ms: 20, step-b-ms: 2, prefill-in-steps: true, prefill-ms-per-token: 0.2}
  ready: {path: /health, timeout_s: 30}
  stop: {grace_s: 5}
bench:
  tool: builtin
  input_len: 128
  output_len: 32
  warmup: 1
  timeout_s: 120
  grid: $3
analysis:
  fit: {x: concurrency, y: median_tpot_ms}
YAML
}
# fitcsv FILE COLUMN: the first data row's cell of fit.csv (no quoted cells before it)
fitcsv() { awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i } NR == 2 { print $k }' "$1"; }

write_exp exp.yaml "" '["1:8", "4:16", "8:32", "16:48"]'
"$SWEEP" run exp.yaml --out run >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "run exits 0" "$rc" 0
check_eq "4 rows, all ok" "$(col run status | tr '\n' ' ')" "ok ok ok ok "
for p in c1-n8 c4-n16 c8-n32 c16-n48; do
    check "$p: scrape before the point saved" grep -q '^fp4serve_steps_total{' "run/default/$p.metrics-before.txt"
    check "$p: scrape after the point saved" grep -q '^fp4serve_steps_total{' "run/default/$p.metrics-after.txt"
done
steps=$(col run server_step_ms | tr '\n' ' ')
batches=$(col run server_batch | tr '\n' ' ')
echo "server_step_ms: $steps; server_batch: $batches; median TPOT: $(col run median_tpot_ms | tr '\n' ' ')"
check "every row has server_step_ms" test "$(col run server_step_ms | grep -c .)" -eq 4
check "every row has server_batch" test "$(col run server_batch | grep -c .)" -eq 4
check "server_prefill_tokens counts 128 per measured request (the warm-up's left out)" \
    test "$(col run server_prefill_tokens 1)" = 1024
check "the ETA is a lower bound after one level" grep -q '^sweep: point 1/4: default c=1 n=8 ok in .*(ETA >= ' err.txt
check "the ETA is a plain estimate after two levels" grep -q '^sweep: point 2/4: default c=4 n=16 ok in .*(ETA [0-9]' err.txt

# the server's law (fit.csv alt_*) is the truth; the client's TPOT fit is not
sa=$(fitcsv run/fit.csv alt_a) sb=$(fitcsv run/fit.csv alt_b)
ca=$(fitcsv run/fit.csv a) cb=$(fitcsv run/fit.csv b)
echo "server fit: $sa + $sb·B; client TPOT fit: $ca + $cb·C; truth 20 + 2·N"
check_eq "fit.csv names the server fit" "$(fitcsv run/fit.csv alt_y)" server_step_ms
check "server a = $sa within 3% of 20" within "$sa" 20 0.03 rel
check "server b = $sb within 3% of 2" within "$sb" 2 0.03 rel
check "client TPOT b = $cb is not within 3% of 2 (prefill in the steps)" sh -c "! awk -v b='$cb' 'BEGIN { exit !(b >= 1.94 && b <= 2.06) }'"
check "REPORT.md sets the two fits side by side" grep -q '^| default | .*·C | .* | 20.0 + 2.00·B | 1.000 |$' run/REPORT.md
check "REPORT.md explains the difference" grep -q "other requests' prompts (prefill inside the decode steps)" run/REPORT.md
check "REPORT.md: the server counted decode-only steps" grep -q "over steps that ran no prompt, is the one to read a and b from" run/REPORT.md
check "every row has server_decode_steps" test "$(col run server_decode_steps | grep -c .)" -eq 4
rel=$(fitcsv run/fit.csv throughput_max_rel_error)
check "throughput curve within 10% of every measured point ($rel)" awk -v r="$rel" 'BEGIN { exit !(r != "" && r < 0.10) }'
check "the curve includes TTFT" grep -q 'N·32·1000/E2E(N) tok/s, E2E = .* (TTFT included)' run/plots/throughput.gp
check "the decode-only ceiling is labelled" grep -q 'decode-only ceiling 1000/b = .* tok/s (no TTFT)' run/plots/throughput.gp
check "Pareto chart drawn" test -s run/plots/pareto.svg
check "Pareto data: per-user tok/s against total" grep -q "^# index 0: default" run/plots/pareto.dat

# sweep plot rebuilds the server columns and the charts from the saved files
cp run/points.csv before.csv
rm -f run/points.csv run/fit.json run/fit.csv run/REPORT.md run/plots/*
"$SWEEP" plot run --no-preview >plot.out 2>&1
check_eq "plot exits 0" "$?" 0
check_eq "server_step_ms rebuilt" "$(col run server_step_ms | tr '\n' ' ')" "$steps"
check_eq "server_batch rebuilt" "$(col run server_batch | tr '\n' ' ')" "$batches"
check "fit.csv rebuilt" test -s run/fit.csv
check "Pareto chart redrawn" test -s run/plots/pareto.svg

# a server without /metrics: columns empty, said once
write_exp nomet.yaml ", --no-metrics" '["1:4", "2:4"]'
"$SWEEP" run nomet.yaml --out nomet >out2.txt 2>err2.txt
check_eq "no /metrics: run exits 0" "$?" 0
cat err2.txt
check_eq "no /metrics: said once" "$(grep -c "no server metrics at .*/metrics (HTTP 404)" err2.txt)" 1
check "no /metrics: no server column" sh -c "! head -n 1 nomet/points.csv | grep -q server_"
check "no /metrics: no scrape saved" sh -c "! ls nomet/default | grep -q metrics-"

# metrics.server: false asks nothing; a fit on the server's columns is accepted
write_exp off.yaml "" '["1:4"]'
printf 'metrics:\n  server: false\n' >>off.yaml
"$SWEEP" run off.yaml --out off >out3.txt 2>err3.txt
check_eq "metrics.server false: run exits 0" "$?" 0
check "metrics.server false: no scrape saved" sh -c "! ls off/default | grep -q metrics-"
check "metrics.server false: nothing said" sh -c "! grep -q 'server metrics' err3.txt"
sed 's/fit: {x: concurrency, y: median_tpot_ms}/fit: {x: server_batch, y: server_step_ms}/' exp.yaml >srvfit.yaml
check "analysis.fit on server_batch and server_step_ms passes sweep check" "$SWEEP" check srvfit.yaml

# sweep compare prints no ceiling from a fit with a negative intercept (TPOT = -43 + 42·N)
for r in negA negB; do
    mkdir -p $r
    {
        echo "variant,concurrency,prompts,repeat,status,key,cause,log,started,wall_s,median_tpot_ms,output_throughput"
        echo "default,1,4,1,ok,,,,,1,0.5,10"
        echo "default,4,8,1,ok,,,,,1,125,30"
        echo "default,16,32,1,ok,,,,,1,629,25"
    } >$r/points.csv
done
"$SWEEP" compare negA negB --out cmp >cmp.out 2>&1
cat cmp.out
check "compare: no 'nan' ceiling" sh -c "! grep -qi nan cmp.out cmp/compare.md"
check "compare: no ceiling sentence from an unfit line" sh -c "! grep -q 'tok/s' cmp/compare.md || ! grep -q 'ceiling .* against' cmp/compare.md"
finish
