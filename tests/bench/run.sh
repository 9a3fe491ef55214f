#!/bin/sh
# run.sh: `make bench` runs every tests/bench/bench_*.sh in name order. Each
# prints its own table; benchmarks report ratios measured side by side in
# one run and never pass or fail on speed.
set -u
BUILD=${BUILD:-build}
export BUILD SWEEP="$BUILD/bin/sweep" FP4SERVE="$BUILD/bin/fp4serve" FAKESERVER="$BUILD/bin/fakeserver"
status=0
for b in tests/bench/bench_*.sh; do
    [ -f "$b" ] || continue
    echo "== $b"
    bash "$b" || { echo "bench: $b exited with $?"; status=1; }
done
exit $status
