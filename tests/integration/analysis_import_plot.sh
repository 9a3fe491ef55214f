# analysis_import_plot.sh: issue 4's must-show on the fixture logs in
# SGLang's format (step 71, 286, 533 ms at C = 1, 8, 16): `sweep import` +
# `sweep plot` report a ~ 40 ms, b ~ 31 ms, ceiling ~ 32 tok/s (each within
# 5%); deleting points.csv, fit.json and plots/ and running `sweep plot`
# restores identical metric values; the charts are valid PNG and SVG with
# axis labels, units, legend and the fit equation; a changed pattern takes
# effect and a log that stops matching is named.
. tests/lib.sh

fix=tests/fixtures/logs/scaling-a
run="$T_TMP/runA"
out=$("$SWEEP" import "$fix/sweep_c1-n8.log" "$fix/sweep_8_24.log" "$fix/sweep_16:48.log" \
    --out "$run" --no-preview 2>"$T_TMP/import.err")
check_eq "import exits 0" "$?" 0
check "import names the fit on stdout" sh -c "echo '$out' | grep -q 'fit default: median_tpot_ms = 40.0 + 30.80'"
for f in points.csv fit.json REPORT.md manifest.json default/c1-n8.log default/c8-n24.log default/c16-n48.log; do
    check "import wrote $f" test -s "$run/$f"
done
check "C and P from the log's lines (C=8 from 'Max request concurrency')" \
    grep -q '^default,8,24,1,ok,' "$run/points.csv"
check "C from the tag where the log says 'not set' (sweep_16:48.log)" \
    grep -q '^default,16,48,1,ok,' "$run/points.csv"

# "a": 39.98..., "b": 30.80..., "ceiling_tok_s": 32.46...
jget() { awk -v k="\"$1\":" '$1 == k { gsub(/,/, "", $2); print $2; exit }' "$2"; }
"$SWEEP" plot "$run" --no-preview >"$T_TMP/plot.out" 2>&1
check_eq "plot exits 0" "$?" 0
a=$(jget a "$run/fit.json"); b=$(jget b "$run/fit.json"); ceil=$(jget ceiling_tok_s "$run/fit.json")
echo "fit after import + plot: a=$a ms b=$b ms ceiling=$ceil tok/s"
check "a = $a is 40 ms within 5%" within "$a" 40 0.05 rel
check "b = $b is 31 ms within 5%" within "$b" 31 0.05 rel
check "ceiling = $ceil is 32 tok/s within 5%" within "$ceil" 32 0.05 rel
check "REPORT.md states the fit in words" \
    grep -q 'Each added request adds 30.8 ms per decode step; decode-only ceiling 32.5 tok/s (1000/b: leaves time to first token out); R² 1.000' "$run/REPORT.md"
check "REPORT.md embeds the charts" grep -q '!\[.*\](plots/throughput.png)' "$run/REPORT.md"
check "points.csv.bak keeps the previous table" cmp -s "$run/points.csv" "$run/points.csv.bak"

# charts: valid images with labels, units, legend and the equation
for c in throughput tpot ttft; do
    for e in dat gp png svg; do check "plots/$c.$e exists" test -s "$run/plots/$c.$e"; done
    check "plots/$c.png is a PNG" sh -c "head -c 8 '$run/plots/$c.png' | od -An -tx1 | tr -d ' \n' | grep -q '^89504e470d0a1a0a$'"
    check "plots/$c.svg is an SVG" grep -q '<svg' "$run/plots/$c.svg"
    check "plots/$c.svg has the x axis label with its unit" \
        grep -q 'concurrency (requests in flight, log2 scale)' "$run/plots/$c.svg"
    check "plots/$c.gp uses a log2 x axis" grep -q 'set logscale x 2' "$run/plots/$c.gp"
done
check "throughput y label with unit" grep -q 'output throughput (tok/s)' "$run/plots/throughput.svg"
check "throughput legend has the curve from E2E" grep -q 'default: N·[0-9]*·1000/E2E(N) tok/s, E2E = .* ms (TTFT included)' "$run/plots/throughput.svg"
check "throughput legend has the decode-only ceiling" grep -q 'default decode-only ceiling 1000/b = 32.5 tok/s (no TTFT)' "$run/plots/throughput.svg"
check "TPOT y label with unit" grep -q 'median TPOT (ms)' "$run/plots/tpot.svg"
check "TPOT legend has the fit equation" grep -q 'default fit: 40.0 + 30.80·N ms (R² 1.000)' "$run/plots/tpot.svg"
check "TTFT y label with unit" grep -q 'median TTFT (ms)' "$run/plots/ttft.svg"

# rebuild from the logs alone
metrics() { cut -d, -f1-5,8,11- "$1"; }
metrics "$run/points.csv" >"$T_TMP/before.csv"
rm -rf "$run/points.csv" "$run/points.csv.bak" "$run/fit.json" "$run/plots"
"$SWEEP" plot "$run" --no-preview >"$T_TMP/replot.out" 2>&1
check_eq "plot without points.csv exits 0" "$?" 0
check "it says it rebuilt 3 points from the logs" grep -q '3 added from logs on disk' "$T_TMP/replot.out"
metrics "$run/points.csv" >"$T_TMP/after.csv"
check "points.csv restored with identical metric values" cmp "$T_TMP/before.csv" "$T_TMP/after.csv"
check "fit.json restored" test "$(jget b "$run/fit.json")" = "$b"
check "plots/ restored" test -s "$run/plots/throughput.png"

# a changed pattern takes effect; a log that no longer matches is named
"$SWEEP" plot "$run" --no-preview --pattern 'median_tpot_ms=Median ITL \(ms\):\s+(\S+)' >/dev/null 2>&1
check_eq "plot with an equivalent pattern exits 0" "$?" 0
"$SWEEP" plot "$run" --no-preview --pattern 'median_tpot_ms=Median TPOX \(ms\):\s+(\S+)' >/dev/null 2>"$T_TMP/nomatch.err"
check_eq "plot with a pattern that matches nothing exits 1" "$?" 1
check "the log that no longer matches is named" \
    grep -q "default/c8-n24.log: no longer matches: missing required metric 'median_tpot_ms' (tried /Median TPOX" "$T_TMP/nomatch.err"
check "its point is failed in points.csv" grep -q '^default,8,24,1,failed,' "$run/points.csv"
check "REPORT.md lists the failure with its cause" grep -q "C=8 n=24 repeat 1: \*\*failed\*\*: missing required metric 'median_tpot_ms'" "$run/REPORT.md"
"$SWEEP" plot "$run" --no-preview >/dev/null 2>&1
check_eq "the override is kept for later plots (still exit 1)" "$?" 1
"$SWEEP" plot "$run" --no-preview --reset >/dev/null 2>&1
check_eq "--reset restores the run's own patterns" "$?" 0
metrics "$run/points.csv" >"$T_TMP/reset.csv"
check "values are back" cmp "$T_TMP/before.csv" "$T_TMP/reset.csv"

# without gnuplot the fit and the report are still written, exit 3
rm -f "$run/fit.json" "$run/REPORT.md"
SWEEP_GNUPLOT=/nonexistent/gnuplot "$SWEEP" plot "$run" --no-preview >/dev/null 2>"$T_TMP/nognu.err"
check_eq "plot without gnuplot exits 3" "$?" 3
check "and says charts were skipped" grep -q "gnuplot not found ('/nonexistent/gnuplot'): charts skipped" "$T_TMP/nognu.err"
check "fit.json still written" test -s "$run/fit.json"
check "REPORT.md still written and says why charts are missing" grep -q 'Charts missing: gnuplot not found' "$run/REPORT.md"

# import errors name the file
echo "no numbers here" >"$T_TMP/sweep_x.log"
"$SWEEP" import "$T_TMP/sweep_x.log" --out "$T_TMP/bad" 2>"$T_TMP/bad.err"
check_eq "a log with no concurrency anywhere: exit 2" "$?" 2
check "and the message names it" grep -q "sweep_x.log: cannot tell the concurrency" "$T_TMP/bad.err"
check "nothing was written" test ! -e "$T_TMP/bad"

# a folder stands for the *.log files in it: the same run as the files named
"$SWEEP" import "$fix" --out "$T_TMP/byfolder" --no-preview >/dev/null 2>&1
check_eq "import of the folder exits 0" "$?" 0
"$SWEEP" import "$fix/sweep_16:48.log" "$fix/sweep_c1-n8.log" "$fix/sweep_8_24.log" \
    --out "$T_TMP/byfiles" --no-preview >/dev/null 2>&1
check_eq "the same points.csv as importing the files" \
    "$(cat "$T_TMP/byfolder/points.csv")" "$(cat "$T_TMP/byfiles/points.csv")"
check_eq "three points" "$(grep -c '^default,' "$T_TMP/byfolder/points.csv")" 3
mkdir "$T_TMP/nologs" && touch "$T_TMP/nologs/notes.txt"
"$SWEEP" import "$T_TMP/nologs" --out "$T_TMP/bad2" 2>"$T_TMP/bad2.err"
check_eq "a folder without logs: exit 2" "$?" 2
check "and the message names it" grep -q "nologs: a folder without any \*.log file" "$T_TMP/bad2.err"
finish
