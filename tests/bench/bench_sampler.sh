#!/bin/sh
# bench_sampler.sh: the cost of one sampling draw per setting (greedy, OpenAI's
# defaults, top-k, top-p at two temperatures), as a multiple of one softmax pass
# over SmolLM2's 49152-token vocabulary measured in the same run.
set -eu
BUILD=${BUILD:-build}
bin="$BUILD/bench/sampler"
[ -x "$bin" ] || { echo "bench_sampler: $bin is missing (make bench builds it)"; exit 1; }
"$bin" ${SAMPLER_ARGS:-}
