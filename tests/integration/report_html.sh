# report_html.sh: REPORT.html in a real browser (issue 28). `sweep run`,
# `sweep plot`, `sweep import` and `sweep compare --out` each write one
# self-contained REPORT.html; headless Chromium, without a network (its own
# network namespace, and the browser's network emulated offline), loads each
# from disk and tests/tools/html_check.py checks the DOM (every chart, every
# ok point in the Points table, tooltips, the legend toggle, sorting, no
# console message) and screenshots of each chart region (colours, not
# fonts). One screenshot of the charts is kept in the test logs and named.
. tests/lib.sh
cd "$T_TMP" || exit 1

make_experiment fakeserver h.yaml NAME=html PIDFILE="$T_TMP/\${variant}.pid" STEP_A=3 PREFILL=2 \
    OUTPUT_LEN=16 GRID='["1:2", "2:4", "4:8", "8:16"]' EXTRA="variants:
  - {name: fast}
  - {name: slow, server: {flags: {step-a-ms: 8}}}"
"$SWEEP" run h.yaml --out run >o.txt 2>e.txt
check_eq "run: exit 0" "$?" 0
check "run: REPORT.html beside REPORT.md" test -s run/REPORT.html -a -s run/REPORT.md
check "run: the summary names REPORT.html" grep -q "run/REPORT.html and" o.txt
check "run: the Pareto chart drawn by gnuplot too" test -s run/plots/pareto.svg -a -s run/plots/pareto.gp
check "run: REPORT.md has the Pareto section" grep -q "^## Pareto frontier" run/REPORT.md

# self-contained: nothing that loads (src, link, import, url() other than
# the charts' own clip paths); hrefs only to files beside it
selfcontained() {
    ! grep -Eiq '<(img|link|iframe|object|embed)\b|\bsrc=|@import|url\((["'"'"']?)[^#]' "$1" &&
        ! grep -Eo 'href="[^"]*"' "$1" | grep -Eq 'href="[a-zA-Z][a-zA-Z0-9+.-]*:'
}
check "run: REPORT.html is self-contained" selfcontained run/REPORT.html
charts=$(cd run/plots && ls *.gp | sed 's/\.gp$//' | tr '\n' ' ')
for c in $charts; do
    check "run: chart '$c' inline in REPORT.html" grep -q "<figure id=\"chart-$c\"" run/REPORT.html
done
grep '^## ' run/REPORT.md | sed 's/^## //' >sections.txt
check "run: REPORT.md has sections" test "$(wc -l <sections.txt)" -ge 5
while IFS= read -r s; do
    check "run: section '$s' in REPORT.html" grep -qF ">$s</h2>" run/REPORT.html
done <sections.txt

# plot rewrites it; import writes one for logs made elsewhere; compare --out too
rm run/REPORT.html
"$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "plot: exit 0" "$?" 0
check "plot: REPORT.html written again" test -s run/REPORT.html
mkdir logs && cp run/fast/c*.log logs/
"$SWEEP" import logs --out imp --preset sglang --no-preview >o.txt 2>e.txt
check_eq "import: exit 0" "$?" 0
check "import: REPORT.html" test -s imp/REPORT.html
check "import: self-contained" selfcontained imp/REPORT.html
"$SWEEP" compare run:fast run:slow --out cmp >o.txt 2>e.txt
check_eq "compare --out: exit 0" "$?" 0
check "compare --out: REPORT.html" test -s cmp/REPORT.html
check "compare --out: self-contained" selfcontained cmp/REPORT.html
check "compare --out: compare.md has the Pareto section" grep -q "^## Pareto frontier" cmp/compare.md

# ---- in the browser ----
need chromium python3
if unshare -n true 2>/dev/null; then
    offline="unshare -n"
else
    offline=""
    skip "no network namespace here (unshare -n): the browser's network is only emulated offline"
fi
shots="$BUILD/test-logs/report_html"
mkdir -p "$shots"
$offline python3 "$TOPDIR/tests/tools/html_check.py" --points run/points.csv \
    --shot "$shots/run-charts.png" run/REPORT.html $charts >b.txt 2>&1
check_eq "browser, run report: every check passed" "$?" 0
sed 's/^/    /' b.txt
check "browser, run report: a screenshot of the charts" test -s "$shots/run-charts.png"
$offline python3 "$TOPDIR/tests/tools/html_check.py" --points imp/points.csv imp/REPORT.html \
    throughput tpot pareto >b.txt 2>&1
check_eq "browser, imported report: every check passed" "$?" 0
sed 's/^/    /' b.txt
$offline python3 "$TOPDIR/tests/tools/html_check.py" cmp/REPORT.html throughput tpot ttft ratio \
    pareto >b.txt 2>&1
check_eq "browser, comparison: every check passed" "$?" 0
sed 's/^/    /' b.txt

# the checker can fail: a chart gone from the page, and a page whose script throws
sed 's/id="chart-tpot"/id="chart-gone"/' run/REPORT.html >broken.html
$offline python3 "$TOPDIR/tests/tools/html_check.py" broken.html tpot >b.txt 2>&1
check "browser: a missing chart fails the check" grep -q "^FAIL: chart 'tpot' present" b.txt
sed 's|</script>|undefined_call();</script>|' run/REPORT.html >throws.html
$offline python3 "$TOPDIR/tests/tools/html_check.py" throws.html >b.txt 2>&1
check "browser: an error in the page fails the check" grep -q "^FAIL: no console message" b.txt
check_eq "no process left" "$(procs_with "$T_TMP/")" 0
finish
