#!/bin/bash
# check.sh (`make check-gpu`): everything a session with a GPU checks of the
# CUDA backend, in one go: build with nvcc (or fall back to binaries carried
# from a build machine), the host decoder tests, the CPU-parity tests, a
# compute-sanitizer pass over two of them, then `fp4serve bench --device
# cuda` at batch 1, 16, 64, 256 (native Q4_1, then NVFP4 and MXFP4
# requantized at load), --decode per-request, and the CPU backend at
# batch 1 and 16 in the same run for ratios. Not part of `make test` or
# `make bench`. Without a GPU (`nvidia-smi -L` fails or lists none), or when
# fp4serve was built without CUDA, it prints one "check-gpu: skipped" line
# and exits 0. Uses models/SmolLM2-135M-Instruct.Q4_1.gguf when present,
# else a synthetic model of the same shape (fp4serve synth).
# Knobs: BUILD (build), JOBS (nproc), PP (128), TG (64), LOGDIR ($OUT or
# $BUILD/gpu-logs: the build log), SANITIZE (1). Exit status: non-zero when
# the build or a test fails. A machine without the build's Debian packages
# (and no network) cannot run make; carry build/bin/fp4serve,
# build/tests/engine_cuda and build/tests/engine_cudadec from a machine with
# nvcc and they are used.
set -u
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
PP=${PP:-128}
TG=${TG:-64}
LOGDIR=${LOGDIR:-${OUT:-$BUILD/gpu-logs}}
SANITIZE=${SANITIZE:-1}
FP4SERVE=$BUILD/bin/fp4serve
status=0

# skip LINE: say why nothing runs, in one line, and exit 0.
skip() { echo "check-gpu: skipped: $*"; exit 0; }
command -v nvidia-smi >/dev/null || skip "no GPU (no nvidia-smi on PATH)"
gpus=$(nvidia-smi -L 2>&1) || skip "no GPU (nvidia-smi -L: $(echo "$gpus" | head -n 1))"
echo "$gpus" | grep -q '^GPU ' || skip "no GPU (nvidia-smi -L lists none)"
mkdir -p "$LOGDIR"

section() { echo; echo "== $*"; }

section "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv ||
    echo "nvidia-smi failed"
command -v nvcc >/dev/null && nvcc --version | tail -n 2

section "build (make -j$JOBS, log in $LOGDIR/build.log)"
start=$(date +%s)
if make -j"$JOBS" BUILD="$BUILD" all "$BUILD/tests/engine_cuda" "$BUILD/tests/engine_cudadec" \
    >"$LOGDIR/build.log" 2>&1; then
    echo "built in $(($(date +%s) - start)) s"
else
    tail -n 20 "$LOGDIR/build.log"
    if "$FP4SERVE" --version >/dev/null 2>&1 && [ -x "$BUILD/tests/engine_cuda" ]; then
        echo "build failed here; going on with the binaries found in $BUILD"
    else
        echo "build failed and no runnable binaries in $BUILD"
        ldd "$FP4SERVE" 2>&1 | grep -i "not found"
        exit 1
    fi
fi
"$FP4SERVE" --version
tiny=${TMPDIR:-/tmp}/check-gpu-tiny-$$.gguf
"$FP4SERVE" synth --preset tiny --seed 1 -o "$tiny" >/dev/null 2>&1
probe=$("$FP4SERVE" generate --model "$tiny" --device cuda --prompt hi -n 1 2>&1)
rm -f "$tiny"
case "$probe" in *"built without CUDA"*) skip "fp4serve was built without CUDA (no nvcc at build time)" ;; esac

section "decoders on the host (engine_cudadec)"
"$BUILD/tests/engine_cudadec" || status=1

section "CPU parity and invariances (engine_cuda)"
start=$(date +%s)
"$BUILD/tests/engine_cuda" || status=1
echo "($(($(date +%s) - start)) s)"

if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for t in parity_native_q4_1 parity_q6_k; do
        section "compute-sanitizer memcheck: engine_cuda $t"
        timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$BUILD/tests/engine_cuda" "$t" 2>&1 | tail -n 15
        rc=${PIPESTATUS[0]}
        [ "$rc" -eq 0 ] || { echo "memcheck exit $rc"; status=1; }
    done
fi

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$MODEL" ]; then
    MODEL=${TMPDIR:-/tmp}/smollm2-135m-synth-q4_1.gguf
    section "model: synthetic SmolLM2-135M shape, Q4_1 ($MODEL)"
    "$FP4SERVE" synth --preset smollm2-135m --type q4_1 -o "$MODEL" || exit 1
fi

bench() { # label, then fp4serve bench arguments
    local label=$1
    shift
    section "bench: $label"
    "$FP4SERVE" bench --model "$MODEL" --prompt-len "$PP" --gen "$TG" --no-probe "$@" 2>&1 ||
        status=1
}
bench "cuda, native weights" --device cuda --batch 1,16,64,256
bench "cuda, NVFP4 requantized (head Q8_0)" --device cuda --quant nvfp4 --batch 1,16,64,256
bench "cuda, MXFP4 requantized (head Q8_0)" --device cuda --quant mxfp4 --batch 1,64,256
bench "cuda, --decode per-request (weights read once per sequence)" --device cuda \
    --decode per-request --batch 1,16
bench "cpu, $(nproc) threads, for the ratio" --device cpu --batch 1,16 --gen 32

section "done: status $status"
exit $status
