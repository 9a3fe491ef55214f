#!/bin/sh
# bench_kernels.sh: q_matmul GB/s and GFLOP/s per weight type, shape (SmolLM2's
# FFN matrices and its 49152 x 576 head), batch size 1/4/16/64 and 256 (a
# prompt chunk: the prefill path), 1 and 2
# threads, portable vs AVX2 vs AVX-512 side by side; then matmul-only tok/s
# for a SmolLM2-shaped model at batch 1. KERNELS_ARGS adds or overrides flags
# (see the usage line in tests/bench/kernels.c).
set -eu
BUILD=${BUILD:-build}
bin="$BUILD/bench/kernels"
[ -x "$bin" ] || { echo "bench_kernels: $bin is missing (make bench builds it)"; exit 1; }
echo "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
# the main table: the types a decode step streams most
"$bin" --types q4_1,q8_0,mxfp4,nvfp4 --batch 1,4,16,64,256 --model 1 ${KERNELS_ARGS:-}
echo
# every other weight type, one layer shape, single thread
"$bin" --types f16,bf16,q4_0,q5_0,q5_1,q4_k,q6_k --shapes ffn_down --batch 1,16,256 --threads 1 \
    --model 0 ${KERNELS_ARGS:-}
