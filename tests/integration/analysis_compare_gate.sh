# analysis_compare_gate.sh: `sweep compare A B C --gate ...`, the regression
# gate for CI, on run folders whose values differ by known amounts. A
# candidate 6% slower in TPOT at C=8 breaks 'median_tpot_ms<=+5%' (exit 1,
# naming metric, concurrency, series and ratio) and passes '<=+7%' (exit 0);
# a failed point breaks its gates; with repeats, the same 4% difference
# breaks a 2% gate only when the repeats' intervals do not overlap; a bad
# gate is exit 2 with a one-line error naming the argument. Then two real
# runs on the fakeserver with TPOT 22 and 25 ms: exit 1 at +5%, 0 at +20%.
. tests/lib.sh

h=variant,concurrency,prompts,repeat,status,key,cause,log,started,wall_s,output_throughput,median_tpot_ms
mkdir -p "$T_TMP/base" "$T_TMP/slow" "$T_TMP/crash" "$T_TMP/nb" "$T_TMP/nc" "$T_TMP/tb" "$T_TMP/tc"
{
    echo "$h"
    echo "default,1,8,1,ok,,,default/c1-n8.log,,,100,20"
    echo "default,8,24,1,ok,,,default/c8-n24.log,,,400,40"
} >"$T_TMP/base/points.csv"
# slow: TPOT +4% at C=1, +6% at C=8; throughput -1% and -5%
{
    echo "$h"
    echo "default,1,8,1,ok,,,default/c1-n8.log,,,99,20.8"
    echo "default,8,24,1,ok,,,default/c8-n24.log,,,380,42.4"
} >"$T_TMP/slow/points.csv"
# crash: equal at C=1, the C=8 point failed
{
    echo "$h"
    echo "default,1,8,1,ok,,,default/c1-n8.log,,,100,20"
    echo "default,8,24,1,failed,,server killed by SIGKILL,default/c8-n24.log,,,,"
} >"$T_TMP/crash/points.csv"

"$SWEEP" compare "$T_TMP/base" "$T_TMP/slow" --gate 'median_tpot_ms<=+7%' \
    --gate 'output_throughput>=-6%' >"$T_TMP/pass.out" 2>"$T_TMP/pass.err"
check_eq "gates that hold: exit 0" "$?" 0
check "says every check held" grep -q '^  0 checks broken, 4 held$' "$T_TMP/pass.out"
check "nothing on stderr" [ ! -s "$T_TMP/pass.err" ]

"$SWEEP" compare "$T_TMP/base" "$T_TMP/slow" "$T_TMP/crash" --gate 'median_tpot_ms<=+5%' \
    --gate 'output_throughput>=-3%' >"$T_TMP/fail.out" 2>"$T_TMP/fail.err"
check_eq "a broken gate: exit 1" "$?" 1
cat "$T_TMP/fail.out" "$T_TMP/fail.err"
check "names metric, concurrency, series and ratio (TPOT +6%)" grep -qF \
    '  BROKEN median_tpot_ms<=+5% at concurrency 8: slow 42.40 against base 40.00, ratio 1.060 (+6.0%)' \
    "$T_TMP/fail.out"
check "throughput -5% breaks >=-3%" grep -qF \
    '  BROKEN output_throughput>=-3% at concurrency 8: slow 380.00 against base 400.00, ratio 0.950 (-5.0%)' \
    "$T_TMP/fail.out"
check "the failed point of the third run breaks both gates" \
    [ "$(grep -c 'BROKEN .* at concurrency 8: crash failed against base' "$T_TMP/fail.out")" = 2 ]
check "C=1 (+4% TPOT, -1% throughput) holds" sh -c "! grep -q 'at concurrency 1:' '$T_TMP/fail.out'"
check "the count" grep -q '^  4 checks broken, 4 held$' "$T_TMP/fail.out"
"$SWEEP" compare "$T_TMP/base" "$T_TMP/slow" --gate 'median_tpot_ms<=+5%' --out "$T_TMP/cmp" \
    >/dev/null 2>&1
check_eq "with --out: exit 1 too" "$?" 1
check "compare.md has the gates' verdict" sh -c "sed -n '/^## Gates/,/^---/p' '$T_TMP/cmp/compare.md' |
    grep -qF 'BROKEN median_tpot_ms<=+5% at concurrency 8: slow 42.40 against base 40.00, ratio 1.060'"
check "... before its closing line" sh -c "tail -n 2 '$T_TMP/cmp/compare.md' | grep -q '^Written by sweep'"
check "REPORT.html carries the same verdict" \
    grep -qF 'BROKEN median_tpot_ms&lt;=+5% at concurrency 8: slow 42.40 against base 40.00' "$T_TMP/cmp/REPORT.html"
check "one stderr line lists every broken check" grep -qxF \
    'sweep: error: gate broken: median_tpot_ms<=+5% at C=8 for slow: 1.060; median_tpot_ms<=+5% at C=8 for crash: failed; output_throughput>=-3% at C=8 for slow: 0.950; output_throughput>=-3% at C=8 for crash: failed' \
    "$T_TMP/fail.err"

# repeats: means 40 and 41.6 (+4%) under a 2% gate. Noisy repeats (+-4 ms)
# give overlapping intervals: held; tight ones (+-0.1 ms): broken.
rep() { # DIR V1 V2 V3
    {
        echo "$h"
        echo "default,8,24,1,ok,,,default/c8-n24.log,,,400,$2"
        echo "default,8,24,2,ok,,,default/c8-n24-r2.log,,,400,$3"
        echo "default,8,24,3,ok,,,default/c8-n24-r3.log,,,400,$4"
    } >"$1/points.csv"
}
rep "$T_TMP/nb" 36 40 44
rep "$T_TMP/nc" 37.6 41.6 45.6
rep "$T_TMP/tb" 39.9 40 40.1
rep "$T_TMP/tc" 41.5 41.6 41.7
"$SWEEP" compare "$T_TMP/nb" "$T_TMP/nc" --gate 'median_tpot_ms<=+2%' >"$T_TMP/noisy.out" 2>&1
check_eq "noisy repeats, +4% under a 2% gate: intervals overlap, exit 0" "$?" 0
"$SWEEP" compare "$T_TMP/tb" "$T_TMP/tc" --gate 'median_tpot_ms<=+2%' >"$T_TMP/tight.out" 2>&1
check_eq "tight repeats, +4% under a 2% gate: exit 1" "$?" 1
cat "$T_TMP/tight.out"
check "the broken line shows both intervals" grep -Eq \
    'BROKEN median_tpot_ms<=\+2% at concurrency 8: tc 41.60 \[41\.[0-9]+, 41\.[0-9]+\] against tb 40.00 \[(39|40)\.[0-9]+, 40\.[0-9]+\], ratio 1.040' \
    "$T_TMP/tight.out"

# bad gates: exit 2, one line naming the argument, no table
for g in 'median_tpot_ms=+5%' 'median_tpot_ms<=5' '<=5%' 'median_tpot<=5%' 'output_throughput>=-150%'; do
    "$SWEEP" compare "$T_TMP/base" "$T_TMP/slow" --gate "$g" >"$T_TMP/bad.out" 2>"$T_TMP/bad.err"
    check_eq "--gate '$g': exit 2" "$?" 2
    check "--gate '$g': one line naming it ($(cat "$T_TMP/bad.err"))" \
        sh -c "[ \$(wc -l <'$T_TMP/bad.err') = 1 ] && grep -qF -- \"--gate '$g': \" '$T_TMP/bad.err'"
    check "--gate '$g': no table" [ ! -s "$T_TMP/bad.out" ]
done
"$SWEEP" compare "$T_TMP/base" "$T_TMP/slow" --gate 'median_tpot<=5%' 2>&1 >/dev/null |
    grep -q "no run has the metric 'median_tpot' (did you mean 'median_tpot_ms'?)"
check_eq "an unknown metric gets the closest column" "$?" 0

# two real runs against the fakeserver, whose decode step is exactly
# a + b*N ms (tests/fakeserver/README.md): at C=2, a = 20 gives 22 ms per
# token and a = 23 gives 25 ms, TPOT +13.6%; the gate at +5% breaks, at +20%
# it holds
for a in 20 23; do
    make_experiment fakeserver "$T_TMP/f$a.yaml" NAME="gate$a" PIDFILE="$T_TMP/f$a.pid" STEP_A=$a \
        GRID='["2:4"]' OUTPUT_LEN=64
    "$SWEEP" run "$T_TMP/f$a.yaml" --out "$T_TMP/f$a" >"$T_TMP/f$a.out" 2>&1
    check_eq "fakeserver run with a = $a ms: exit 0" "$?" 0
done
"$SWEEP" compare "$T_TMP/f20" "$T_TMP/f23" --gate 'median_tpot_ms<=+5%' >"$T_TMP/f.out" 2>&1
check_eq "TPOT 25 ms against 22 ms under a 5% gate: exit 1" "$?" 1
ratio=$(sed -n 's/.*BROKEN median_tpot_ms<=+5% at concurrency 2: f23 .* ratio \([0-9.]*\) .*/\1/p' "$T_TMP/f.out")
check "the broken check's ratio $ratio is 25/22 = 1.136 (5%)" within "$ratio" 1.136 0.05 rel
"$SWEEP" compare "$T_TMP/f20" "$T_TMP/f23" --gate 'median_tpot_ms<=+20%' >"$T_TMP/f2.out" 2>&1
check_eq "... under a 20% gate: exit 0" "$?" 0
finish
