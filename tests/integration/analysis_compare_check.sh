# analysis_compare_check.sh: `sweep compare` of two imported runs with one
# common point (C=8) and points only one run has: ratios for the common one,
# "missing" for the others, compare.md and charts; `sweep check --from` on
# the grid 1:8, 16:48, 64:96 at output 128 estimates C=64 at 391 s +- 10%
# and prints a total.
. tests/lib.sh

fix=tests/fixtures/logs
"$SWEEP" import $fix/scaling-a/*.log --out "$T_TMP/runA" --no-preview >/dev/null 2>&1
check_eq "import run A" "$?" 0
"$SWEEP" import $fix/scaling-b/*.log --out "$T_TMP/runB" --variant nvfp4 --no-preview >/dev/null 2>&1
check_eq "import run B" "$?" 0

"$SWEEP" compare "$T_TMP/runA" "$T_TMP/runB" --out "$T_TMP/cmp" >"$T_TMP/cmp.out" 2>&1
check_eq "compare exits 0" "$?" 0
cat "$T_TMP/cmp.out"
row() { awk -v c="$1" 'f && $1 == c { print; exit } /^output throughput/ { f = 1 }' "$T_TMP/cmp.out"; }
check "C=8 is common: both values and the ratio 36.43/28.05" \
    sh -c "echo '$(row 8)' | grep -Eq '^ +8 +28.05 +36.43 +1.299$'"
check "C=1 only in A: B is missing, no ratio" sh -c "echo '$(row 1)' | grep -Eq '^ +1 +14.05 +missing +-$'"
check "C=32 only in B: A is missing" sh -c "echo '$(row 32)' | grep -Eq '^ +32 +missing +45.82 +-$'"
check "fits side by side with ratios" grep -Eq '^runB +60.00 +20.00 +50.0 +1.000 +0.649 +1.540$' "$T_TMP/cmp.out"
check "compare.md written" test -s "$T_TMP/cmp/compare.md"
"$SWEEP" compare "$T_TMP/runA" "$T_TMP/runB" --out "$T_TMP/cmp2/" >"$T_TMP/cmp2.out" 2>&1
check "--out DIR/: says where it wrote, with one '/'" \
    grep -qx "wrote $T_TMP/cmp2/compare.md, REPORT.html and charts in $T_TMP/cmp2/plots/" "$T_TMP/cmp2.out"
check "compare.md says it in words" grep -q "at concurrency 8, runB's output throughput is 1.30× runA's (+30%)" "$T_TMP/cmp/compare.md"
check "compare.md marks the missing point" grep -q '| 32 | missing | 45.82 | - |' "$T_TMP/cmp/compare.md"
for c in throughput tpot ttft ratio; do
    check "chart $c.png is a PNG" sh -c "head -c 4 '$T_TMP/cmp/plots/$c.png' | od -An -c | grep -q 'P   N   G'"
    check "chart $c.svg is an SVG" grep -q '<svg' "$T_TMP/cmp/plots/$c.svg"
done
check "ratio chart has its reference line" grep -q 'equal (1.0)' "$T_TMP/cmp/plots/ratio.svg"

"$SWEEP" compare "$T_TMP/runA:nosuch" "$T_TMP/runB" 2>"$T_TMP/cmp.err"
check_eq "an unknown variant: exit 2" "$?" 2
check "names the variant and what the run has" grep -q "no variant 'nosuch' in points.csv (it has 'default')" "$T_TMP/cmp.err"
"$SWEEP" compare "$T_TMP/runA" 2>/dev/null
check_eq "one series only: exit 2" "$?" 2
"$SWEEP" compare "$T_TMP/runA:default" "$T_TMP/runB:nvfp4" >/dev/null 2>&1
check_eq "RUN_DIR:VARIANT specs work" "$?" 0
# a --metric no run has is a usage error, not a table of n/a with exit 0
"$SWEEP" compare "$T_TMP/runA" "$T_TMP/runB" --metric median_tpot >"$T_TMP/m.out" 2>"$T_TMP/m.err"
check_eq "--metric no run has: exit 2" "$?" 2
check "names it and the closest column" grep -q "\-\-metric 'median_tpot': no run has it (did you mean 'median_tpot_ms'?)" "$T_TMP/m.err"
check "prints no table" sh -c "! grep -q 'n/a' '$T_TMP/m.out'"

# values with a spread ("1267.38±46.49": '±' is two bytes, one column) and a
# run named in wide characters: every row of each terminal table is as wide
# on screen as its header, and has as many columns
h=variant,concurrency,prompts,repeat,status,key,cause,log,started,wall_s,output_throughput,median_tpot_ms
mkdir -p "$T_TMP/rep-a" "$T_TMP/测试"
{
    echo "$h"
    echo "default,1,8,1,ok,,,default/c1-n8.log,,,14.05,71"
    echo "default,1,8,2,ok,,,default/c1-n8-r2.log,,,14.85,70"
    echo "default,8,24,1,ok,,,default/c8-n24.log,,,1234.5,286"
    echo "default,8,24,2,ok,,,default/c8-n24-r2.log,,,1300.25,280"
} >"$T_TMP/rep-a/points.csv"
sed 's/,14\./,15./; s/,12/,22/; s/,13/,23/' "$T_TMP/rep-a/points.csv" >"$T_TMP/测试/points.csv"
"$SWEEP" compare "$T_TMP/rep-a" "$T_TMP/测试" >"$T_TMP/rep.out" 2>&1
check_eq "compare of repeated runs exits 0" "$?" 0
cat "$T_TMP/rep.out"
check "cells carry a spread" grep -q '1267.38±46.49' "$T_TMP/rep.out"
# one column per character: '±' and each CJK character (two columns on
# screen) replaced by that many ASCII bytes
sed 's/±/+/g; s/测/WW/g; s/试/WW/g' "$T_TMP/rep.out" | awk '
    /^ +C +/ { hw = length($0); hn = NF; next }
    hw && /^ +[0-9]+ / { rows++; if (length($0) != hw || NF != hn) { bad++; print "misaligned: " $0 } }
    /^$/ { hw = 0 }
    END { exit !(rows >= 4 && bad == 0) }'
check "every table row lines up with its header" [ $? -eq 0 ]

make_experiment offline "$T_TMP/exp.yaml" NAME=estimate GRID='["1:8", "16:48", "64:96"]'
"$SWEEP" check "$T_TMP/exp.yaml" --from "$T_TMP/runA" >"$T_TMP/check.out" 2>&1
check_eq "check --from exits 0" "$?" 0
sed -n '/time estimate/,$p' "$T_TMP/check.out"
c64=$(awk '$2 == "c64-n96.log" { print $3 }' "$T_TMP/check.out")
check "C=64 estimate $c64 s is 391 s +- 10%" awk -v v="$c64" 'BEGIN { exit !(v >= 351.9 && v <= 430.1) }'
check "a total is printed" grep -Eq '^  total +[0-9.]+ s' "$T_TMP/check.out"
"$SWEEP" check "$T_TMP/exp.yaml" --from "$T_TMP/nowhere" >/dev/null 2>"$T_TMP/check.err"
check_eq "check --from a folder without points.csv: exit 3" "$?" 3
check "names the folder" grep -q "nowhere: no points.csv there" "$T_TMP/check.err"

# a run whose step time falls with concurrency: the formula reads "a - b·N"
# (never "+ -"), the slope is flagged, and a point where the line is below
# zero is "?" (not "0.0 s"), left out of a total printed as a lower bound
csv_head=variant,concurrency,prompts,repeat,status,key,cause,log,started,wall_s,median_tpot_ms,median_ttft_ms
mkdir -p "$T_TMP/falling" "$T_TMP/allfailed"
{
    echo "$csv_head"
    echo "default,1,8,1,ok,,,default/c1-n8.log,,,50,100"
    echo "default,8,24,1,ok,,,default/c8-n24.log,,,40,90"
    echo "default,16,48,1,ok,,,default/c16-n48.log,,,30,80"
} >"$T_TMP/falling/points.csv"
"$SWEEP" check "$T_TMP/exp.yaml" --from "$T_TMP/falling" >"$T_TMP/fall.out" 2>&1
check_eq "check --from a falling fit exits 0" "$?" 0
sed -n '/time estimate/,$p' "$T_TMP/fall.out"
check "the formula reads 51.1 - 1.33·N" grep -q 'step = 51.1 - 1.33·N ms, TTFT = 101.1 - 1.33·N ms' "$T_TMP/fall.out"
check "no '+ -' anywhere" sh -c "! grep -q '+ -' '$T_TMP/fall.out'"
check "the falling slope is flagged" grep -q "the step time falls as concurrency rises" "$T_TMP/fall.out"
check "C=64 (line below zero) is '?', not 0.0 s" grep -Eq '^  default +c64-n96.log +\? +\(the fit predicts a step time <= 0 at C=64\)' "$T_TMP/fall.out"
check "no point is estimated at 0.0 s" sh -c "! grep -q ' 0.0 s' '$T_TMP/fall.out'"
check "the total is a lower bound" grep -Eq '^  total +>= +[0-9.]+ s .*1 point\(s\) not estimated' "$T_TMP/fall.out"

# no ok point: said in words, exit 3 like a folder without points.csv, and
# no half-printed estimate
{
    echo "$csv_head"
    echo "default,1,8,1,failed,,server died,default/c1-n8.log,,,,"
    echo "default,8,24,1,failed,,server died,default/c8-n24.log,,,,"
} >"$T_TMP/allfailed/points.csv"
"$SWEEP" check "$T_TMP/exp.yaml" --from "$T_TMP/allfailed" >"$T_TMP/nook.out" 2>"$T_TMP/nook.err"
check_eq "check --from a run without ok points: exit 3" "$?" 3
cat "$T_TMP/nook.err"
check "says there is no ok point" grep -q "allfailed: no ok point in points.csv (2 rows), so there is no time estimate" "$T_TMP/nook.err"
check "prints no empty estimate" sh -c "! grep -q 'time estimate from' '$T_TMP/nook.out'"
finish
