#!/bin/bash
# bench_summary: the summary table of tests/bench/bench_serve.sh (make bench)
# over a fixture run folder whose fits sweep rejected (a negative intercept,
# one level only): each is printed as "no linear fit" with sweep's reason,
# the other rows keep their numbers, and the script exits 0 (W3-N24; it
# used to stop at `printf: null: invalid number` with exit 1).
. tests/lib.sh
fx=tests/cases/bench-summary
bash tests/bench/bench_serve.sh --summary "$fx" >"$T_TMP/out" 2>"$T_TMP/err"
check_eq "summary exits 0" "$?" 0
check_eq "nothing on stderr" "$(cat "$T_TMP/err")" ""
check "the law's row keeps a, b and the ceiling" \
    grep -Eq '^bench-summary/batched +21\.5 +1\.87 +533\.6 +42\.5 +140\.2 +300\.7$' "$T_TMP/out"
check "the negative intercept is 'no linear fit', throughputs kept" \
    grep -Eq '^bench-summary/per-request +no linear fit +41\.0 +50\.3 +51\.0$' "$T_TMP/out"
check "sweep's reason follows it" grep -q '(the linear model does not describe these points: negative intercept (a = -3.2);' "$T_TMP/out"
check "a one-level variant too, with its note" \
    grep -q '(one concurrency level: a line needs two)' "$T_TMP/out"
check_eq "one row per variant" "$(grep -c '^bench-summary/' "$T_TMP/out")" 3
finish
