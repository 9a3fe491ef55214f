#!/bin/sh
# run.sh: run every test of `make test` and add up their "N passed, N failed"
# lines. Unit tests (build/tests/*), fuzz corpus replays (build/fuzz/*) and
# integration scripts (tests/integration/*.sh) each print such a line last;
# a test that crashes or prints none counts as one failure. A line "skip:
# WHY" (or "skipped: WHY") in a test's output is a check that did not run:
# each is shown under its test, and the last line counts them. Each test's
# output is kept in build/test-logs/. TESTS=substring runs a subset.
set -u
BUILD=${BUILD:-build}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd) # absolute, so tests may cd
export BUILD
export SWEEP="$BUILD/bin/sweep" FP4SERVE="$BUILD/bin/fp4serve" FAKESERVER="$BUILD/bin/fakeserver"
export TOPDIR="$(pwd)"
# model fingerprints (runner/config/modelfp.h) are cached here, not in ~/.cache
export SWEEP_CACHE_DIR="$BUILD/test-cache"
logs="$BUILD/test-logs"
mkdir -p "$logs"
total_pass=0
total_fail=0
total_skip=0
skip_re='^([A-Za-z0-9_-]+: )?skip(ped)?: '
failed_names=""

run_one() { # name timeout_s command...
    name=$1; limit=$2; shift 2
    case "$name" in *"${TESTS:-}"*) ;; *) return 0 ;; esac
    log="$logs/$name.log"
    mkdir -p "$(dirname "$log")"
    start=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -n 1)
    # skips: lines "skip: WHY", "skipped: WHY" or "PROG: skipped: WHY"
    s=$(grep -cE "$skip_re" "$log")
    p=0; f=0
    if [ -n "$line" ]; then
        p=${line%% passed*}
        f=${line#*passed, }; f=${f%% failed*}
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        [ "$rc" -eq 124 ] && echo "(timed out after ${limit}s)" >>"$log"
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    total_skip=$((total_skip + s))
    if [ "$f" -eq 0 ]; then
        printf 'ok    %-34s %4d passed  %4ds\n' "$name" "$p" "$secs"
        grep -E "$skip_re" "$log" | sed -E "s/$skip_re//" | while IFS= read -r why; do
            printf 'skip  %-34s %s\n' "$name" "$why"
        done
    else
        printf 'FAIL  %-34s %4d passed %3d failed (exit %d)  %4ds\n' "$name" "$p" "$f" "$rc" "$secs"
        sed 's/^/      | /' "$log" | grep -v -E '^      \| ok' | tail -n 40
        failed_names="$failed_names $name"
    fi
}

for t in "$BUILD"/tests/*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    case "$t" in *.d) continue ;; esac
    run_one "unit/$(basename "$t")" 600 "$t"
done
for t in "$BUILD"/fuzz/*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    n=$(basename "$t")
    run_one "fuzz/$n" 600 "$t" "tests/fuzz/corpus/$n"
done
for s in tests/integration/*.sh; do
    [ -f "$s" ] || continue
    run_one "integration/$(basename "$s" .sh)" 1800 bash "$s"
done

[ -n "$failed_names" ] && echo "failed:$failed_names (logs in $logs/)"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
