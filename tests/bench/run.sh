#!/bin/sh
# run.sh: `make bench` runs every tests/bench/bench_*.sh in turn. Benchmarks
# print measurements (ratios measured side by side in one run); they never
# pass or fail on speed. BENCH=substring runs a subset.
set -u
BUILD=${BUILD:-build}
export BUILD
status=0
for s in tests/bench/bench_*.sh; do
    [ -f "$s" ] || continue
    case "$s" in *"${BENCH:-}"*) ;; *) continue ;; esac
    echo "== $(basename "$s" .sh)"
    sh "$s" || { echo "$(basename "$s"): exit $?"; status=1; }
    echo
done
exit $status
