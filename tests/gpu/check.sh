#!/bin/bash
# check.sh (`make check-gpu`): everything a session with a GPU checks of the
# CUDA backend (issue 18, part 2), in one go, in about 8 minutes on one
# H200 with 16 cores. Not part of `make test` or `make bench`.
#
#   tests/gpu/check.sh                   build here, then run every step
#   tests/gpu/check.sh --prebuilt DIR    no build: the binaries in DIR, laid
#                                        out as $BUILD (bin/, tests/, gen/),
#                                        with DIR/solib on LD_LIBRARY_PATH
#   tests/gpu/check.sh --bundle DIR      (on the build machine; no GPU needed)
#                                        make, then copy into DIR what
#                                        --prebuilt needs, and into DIR/solib
#                                        the shared libraries it links (not
#                                        glibc's), which a bare machine may lack
#
# Steps, each with its own time limit (never past the whole budget, BUDGET
# seconds) and its log in $OUT/NAME.log; a summary table ends the output:
#   device     nvidia-smi: name, compute capability, driver, memory
#   build      make -j all and the four engine_cuda* tests (not with --prebuilt)
#   arch       the GPU's sm_XY is one of the CUDA_ARCHS the binary was built
#              for ($BUILD/gen/cuda-archs), else the driver JITs the PTX
#   cudadec    the device decoders on the host (engine_cudadec)
#   parity     engine_cuda: logits of every weight type (MXFP4 and NVFP4
#              included) against the CPU backend within its stated
#              tolerance (TOL in tests/unit/engine_cuda.c, 2% of the largest
#              logit), batched = alone, greedy tokens against the CPU
#   qwen3, gptoss
#              engine_cuda_qwen3, engine_cuda_gptoss: the qwen3, qwen3moe and
#              gpt-oss kernels against the CPU backend (their tolerances in
#              the tests' top comments), greedy tokens, invariances, expert
#              counters
#   greedy     `fp4serve generate`: the same greedy ids on --device cpu and
#              cuda for native weights, MXFP4 and NVFP4, on MODEL
#   batch16-Q  tests/integration/serve_greedy.sh through --device cuda (and
#              --quant Q): each request alone and in a batch of 16 gives
#              the text of `fp4serve generate` (needs curl and jq)
#   bench-batched, bench-per-request
#              `fp4serve bench --device cuda` at B = 1,16,64,256 for
#              native (Q4_1), MXFP4 and NVFP4
#   sweep      `sweep run experiments/decode-modes-cuda.yaml` (batched vs
#              per-request, C = 1, 4, 16, 64) into $OUT/sweep-run
#   memcheck-T compute-sanitizer --tool memcheck on two engine_cuda tests
#   bench-cpu  the CPU backend at B = 1, 16 for the ratio
# The summary adds, per weight type, the batch-1 decode step against the
# launch-free roofline (weight bytes per step / GPU_BW_GBS), and the fits of
# the sweep (per-request b should be >= 10x batched b).
#
# Without a GPU (no nvidia-smi, or it lists none), or when fp4serve was
# built without CUDA, it prints one "check-gpu: skipped: WHY" line and
# exits 0. Exit status: 0 every step passed, 1 some step failed or ran out
# of time, 2 usage error.
# Knobs (environment): OUT (logs; default a new temp folder), BUILD (build),
# JOBS (nproc), BUDGET (480 s), MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf,
# else a synthetic model of its shape), PP (128), TG (64), GPU_BW_GBS (4800,
# an H200's), SANITIZE_TESTS ("parity_native_q4_1 parity_mxfp4").
# shellcheck disable=SC2317 # the step functions run through step(), in a child bash
set -u
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
BUDGET=${BUDGET:-480}
PP=${PP:-128}
TG=${TG:-64}
GPU_BW_GBS=${GPU_BW_GBS:-4800}
SANITIZE_TESTS=${SANITIZE_TESTS:-parity_native_q4_1 parity_mxfp4}
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PREBUILT=${PREBUILT:-}
BUNDLE=""

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die_usage() {
    echo "check.sh: $*" >&2
    echo "usage: tests/gpu/check.sh [--prebuilt DIR | --bundle DIR] (--help for more)" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --prebuilt | --bundle)
        if [ $# -lt 2 ] || [ -z "$2" ]; then die_usage "$1 needs a folder"; fi
        if [ "$1" = --prebuilt ]; then PREBUILT=$2; else BUNDLE=$2; fi
        shift 2
        ;;
    --prebuilt=* | --bundle=*)
        v=${1#*=}
        [ -n "$v" ] || die_usage "${1%%=*} needs a folder"
        case "$1" in --prebuilt=*) PREBUILT=$v ;; *) BUNDLE=$v ;; esac
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die_usage "unknown argument '$1'" ;;
    esac
done
[ -n "$PREBUILT" ] && [ -n "$BUNDLE" ] && die_usage "--prebuilt and --bundle exclude each other"
cd "$(dirname "$0")/../.." || exit 2

# ---- --bundle DIR: the binaries and their non-glibc shared libraries ----
if [ -n "$BUNDLE" ]; then
    make -j"$JOBS" BUILD="$BUILD" all "$BUILD/tests/engine_cuda" "$BUILD/tests/engine_cudadec" \
        "$BUILD/tests/engine_cuda_qwen3" "$BUILD/tests/engine_cuda_gptoss" || exit 1
    mkdir -p "$BUNDLE/bin" "$BUNDLE/tests" "$BUNDLE/gen" "$BUNDLE/solib" || exit 1
    cp "$BUILD/bin/fp4serve" "$BUILD/bin/sweep" "$BUILD/bin/freeport" "$BUNDLE/bin/" || exit 1
    [ -x "$BUILD/bin/csvget" ] && cp "$BUILD/bin/csvget" "$BUNDLE/bin/"
    cp "$BUILD/tests/engine_cuda" "$BUILD/tests/engine_cudadec" "$BUILD/tests/engine_cuda_qwen3" \
        "$BUILD/tests/engine_cuda_gptoss" "$BUNDLE/tests/" || exit 1
    cp "$BUILD/gen/cuda-archs" "$BUNDLE/gen/" || exit 1
    # debug info out (half the size); every library ldd resolves, less
    # glibc's and the C++ runtime, which every Linux has in its own version
    strip --strip-debug "$BUNDLE"/bin/* "$BUNDLE"/tests/* 2>/dev/null
    ldd "$BUNDLE"/bin/* "$BUNDLE"/tests/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
        sort -u |
        grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl|libnsl|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' |
        while read -r lib; do cp -L "$lib" "$BUNDLE/solib/"; done
    echo "check-gpu: bundle in $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)); on the GPU machine:"
    echo "  tests/gpu/check.sh --prebuilt $BUNDLE"
    exit 0
fi

if [ -n "$PREBUILT" ]; then
    [ -x "$PREBUILT/bin/fp4serve" ] || die_usage "--prebuilt $PREBUILT: no bin/fp4serve there"
    BUILD=$PREBUILT
fi
MAKE_BUILD=$BUILD # as given: make's flags name it, an absolute path would rebuild everything
case "$BUILD" in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
[ -d "$BUILD/solib" ] && export LD_LIBRARY_PATH="$BUILD/solib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
FP4SERVE=$BUILD/bin/fp4serve

# skip WHY: say why nothing runs, in one line, and exit 0.
skip() {
    echo "check-gpu: skipped: $*"
    exit 0
}
command -v nvidia-smi >/dev/null || skip "no GPU (no nvidia-smi on PATH)"
gpus=$(nvidia-smi -L 2>&1) || skip "no GPU (nvidia-smi -L: $(echo "$gpus" | head -n 1))"
echo "$gpus" | grep -q '^GPU ' || skip "no GPU (nvidia-smi -L lists none)"

OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/check-gpu.XXXXXX")}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
failed=0
echo "check-gpu: logs in $OUT; budget ${BUDGET} s"

# step NAME LIMIT_S CMD...: run CMD with its output in $OUT/NAME.log, under
# the smaller of LIMIT_S and what is left of the budget; its last lines
# are shown, and one summary row kept. Returns CMD's status.
step() {
    local name=$1 limit=$2 left start rc secs result
    shift 2
    left=$((T0 + BUDGET - $(date +%s)))
    echo
    echo "== $name"
    if [ "$left" -lt 15 ]; then
        printf '%-28s %-24s %5s  %s\n' "$name" "NOT RUN (budget spent)" - - >>"$SUMMARY"
        failed=1
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    export STEP=$name
    # a function of this script runs in a child bash (exported below)
    [ "$(type -t "$1")" = function ] && set -- bash -c '"$@"' _ "$@"
    start=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    tail -n "${TAIL:-12}" "$OUT/$name.log"
    case $rc in
    0) result=ok ;;
    124 | 137) result="TIMEOUT (${limit} s)" ;;
    *) result="FAIL (exit $rc)" ;;
    esac
    [ $rc -eq 0 ] || failed=1
    printf '%-28s %-24s %5s  %s\n' "$name" "$result" "$secs" "$OUT/$name.log" >>"$SUMMARY"
    return "$rc"
}
# note NAME TEXT: a summary row for a step that did not run, and why.
note() { printf '%-28s %-24s %5s  %s\n' "$1" "skipped" - "$2" >>"$SUMMARY"; }

device_info() {
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm,clocks.max.memory \
        --format=csv
    nvidia-smi -L
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    command -v compute-sanitizer >/dev/null && compute-sanitizer --version | tail -n 1
    return 0
}
export -f device_info
step device 30 device_info
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')

if [ -z "$PREBUILT" ]; then
    if ! step build 360 make -j"$JOBS" BUILD="$MAKE_BUILD" all "$MAKE_BUILD/tests/engine_cuda" \
        "$MAKE_BUILD/tests/engine_cudadec" "$MAKE_BUILD/tests/engine_cuda_qwen3" \
        "$MAKE_BUILD/tests/engine_cuda_gptoss"; then
        if "$FP4SERVE" --version >/dev/null 2>&1 && [ -x "$BUILD/tests/engine_cuda" ]; then
            echo "build failed here; going on with the binaries found in $BUILD"
        else
            echo "build failed and no runnable binaries in $BUILD:"
            ldd "$FP4SERVE" 2>&1 | grep -i "not found"
            echo "(build elsewhere with --bundle DIR and pass --prebuilt DIR here)"
            cat "$SUMMARY"
            exit 1
        fi
    fi
else
    note build "--prebuilt $PREBUILT"
fi
"$FP4SERVE" --version || {
    ldd "$FP4SERVE" 2>&1 | grep -i "not found"
    echo "check-gpu: $FP4SERVE does not run here"
    exit 1
}
tiny=$OUT/tiny.gguf
"$FP4SERVE" synth --preset tiny --seed 1 -o "$tiny" >/dev/null 2>&1
probe=$("$FP4SERVE" generate --model "$tiny" --device cuda --prompt hi -n 1 2>&1)
rc=$?
case "$probe" in *"built without CUDA"*) skip "fp4serve was built without CUDA (no nvcc at build time)" ;; esac
if [ $rc -ne 0 ]; then
    # a GPU that the CUDA backend cannot use: every later step would fail
    echo "$probe" | tail -n 3
    printf '%-28s %-24s %5s  %s\n' cuda "FAIL (exit $rc)" - "fp4serve generate --device cuda" >>"$SUMMARY"
    cat "$SUMMARY"
    echo "check-gpu: the CUDA backend cannot run on this GPU; logs in $OUT"
    exit 1
fi

# arch: the GPU's architecture is in the build, or PTX of an older one is.
arch_check() {
    local CUDA_ARCHS='' CUDA_PTX='' p
    # shellcheck disable=SC1091
    . "$BUILD/gen/cuda-archs" || return 1
    echo "GPU sm_$cap; built for: $CUDA_ARCHS; PTX: $CUDA_PTX"
    case " $CUDA_ARCHS " in *" sm_$cap "*)
        echo "machine code for sm_$cap is in the binary"
        return 0
        ;;
    esac
    p=${CUDA_PTX#compute_}
    if [ -n "$p" ] && [ "${p%%[!0-9]*}" -le "$cap" ]; then
        echo "no machine code for sm_$cap: the driver compiles the $CUDA_PTX PTX (slower start)"
        return 0
    fi
    echo "neither machine code nor PTX for sm_$cap: rebuild with CUDA_ARCHS=sm_$cap"
    return 1
}
export BUILD FP4SERVE cap OUT
export -f arch_check
step arch 10 arch_check

# unit TEST_BINARY [ARGS]: a unit test binary that must run (a "skipped"
# here, where there is a GPU, is a failure).
unit() {
    "$@"
    local rc=$?
    grep -q "^skipped" "$OUT/$STEP.log" && { echo "check-gpu: the test skipped where a GPU is"; return 1; }
    return "$rc"
}
export -f unit
step cudadec 120 unit "$BUILD/tests/engine_cudadec"
step parity 300 unit "$BUILD/tests/engine_cuda"
step qwen3 120 unit "$BUILD/tests/engine_cuda_qwen3"
step gptoss 120 unit "$BUILD/tests/engine_cuda_gptoss"

MODEL=${MODEL:-$SMOL}
if [ ! -f "$MODEL" ]; then
    MODEL=$OUT/smollm2-135m-synth-q4_1.gguf
    echo
    echo "== model: $SMOL absent; a synthetic model of its shape, Q4_1 ($MODEL)"
    "$FP4SERVE" synth --preset smollm2-135m --type q4_1 -o "$MODEL" >/dev/null || exit 1
    note model "$SMOL absent: synthetic SmolLM2 shape"
fi

# greedy: the same generated ids on both devices, per weight type.
greedy() {
    local q p bad=0 n=0 c g
    for q in native mxfp4 nvfp4; do
        for p in "The capital of France is" "Once upon a time" "def fibonacci(n):" "1, 2, 3, 4,"; do
            c=$("$FP4SERVE" generate --model "$MODEL" --quant "$q" --prompt "$p" -n 32 --ignore-eos \
                --device cpu 2>&1 | grep '^ids:')
            g=$("$FP4SERVE" generate --model "$MODEL" --quant "$q" --prompt "$p" -n 32 --ignore-eos \
                --device cuda 2>&1 | grep '^ids:')
            n=$((n + 1))
            if [ -n "$c" ] && [ "$c" = "$g" ]; then
                echo "same   $q '$p'"
            else
                bad=$((bad + 1))
                echo "DIFFER $q '$p'"
                echo "  cpu:  $c"
                echo "  cuda: $g"
            fi
        done
    done
    echo "greedy: $((n - bad)) of $n identical (32 tokens each)"
    [ "$bad" -eq 0 ]
}
export MODEL PP TG SMOL
export -f greedy
step greedy 180 greedy

# batch16: serve_greedy.sh with every fp4serve call on the GPU (a shim adds
# --device cuda and --quant Q to serve and generate).
batch16() {
    local q=$1 shim=$OUT/shim-$1
    mkdir -p "$shim"
    # shellcheck disable=SC2016 # $1 and $@ are the shim's
    printf '#!/bin/sh\ncase "$1" in serve|generate) exec "%s" "$@" --device cuda --quant %s ;; esac\nexec "%s" "$@"\n' \
        "$FP4SERVE" "$q" "$FP4SERVE" >"$shim/fp4serve"
    chmod +x "$shim/fp4serve"
    BUILD=$BUILD FP4SERVE=$shim/fp4serve TOPDIR=$PWD bash tests/integration/serve_greedy.sh
}
export -f batch16
if command -v curl >/dev/null && command -v jq >/dev/null; then
    [ -f "$SMOL" ] || echo "(serve_greedy runs SmolLM2 only when $SMOL is present)"
    step batch16-native 150 batch16 native
else
    note batch16-native "no curl or jq"
fi

bench() { # fp4serve bench arguments
    "$FP4SERVE" bench --model "$MODEL" --prompt-len "$PP" --gen "$TG" --no-probe --device cuda \
        --batch 1,16,64,256 --quant native,mxfp4,nvfp4 "$@"
}
export -f bench
step bench-batched 150 bench
step bench-per-request 200 bench --decode per-request

sweep_run() {
    DECODE_MODES_MODEL=$MODEL "$BUILD/bin/sweep" run experiments/decode-modes-cuda.yaml \
        --out "$OUT/sweep-run"
    local rc=$?
    echo "manifest.json gpu: $(grep -o '"gpus*": *\[[^]]*\]' "$OUT/sweep-run/manifest.json" 2>/dev/null)"
    return "$rc"
}
export -f sweep_run
TAIL=30 step sweep 240 sweep_run

if command -v compute-sanitizer >/dev/null; then
    for t in $SANITIZE_TESTS; do
        step "memcheck-$t" 150 unit compute-sanitizer --tool memcheck \
            --error-exitcode 9 "$BUILD/tests/engine_cuda" "$t"
    done
else
    note memcheck "no compute-sanitizer on PATH"
fi

if command -v curl >/dev/null && command -v jq >/dev/null; then
    step batch16-mxfp4 120 batch16 mxfp4
    step batch16-nvfp4 120 batch16 nvfp4
fi
step bench-cpu 90 "$FP4SERVE" bench --model "$MODEL" --prompt-len "$PP" --gen 32 --no-probe \
    --device cpu --batch 1,16

# ---- summary ----
{
    echo
    echo "== summary ($(($(date +%s) - T0)) s of $BUDGET; GPU $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), sm_$cap; model $MODEL)"
    printf '%-28s %-24s %5s  %s\n' step result s log
    cat "$SUMMARY"
    for f in "$OUT/parity.log" "$OUT/greedy.log"; do
        [ -f "$f" ] && grep -E '^parity |greedy:|tolerance|passed, [0-9]+ failed' "$f" | sed 's/^/  /'
    done
    for mode in batched per-request; do
        f=$OUT/bench-$mode.log
        [ -f "$f" ] || continue
        echo "bench --decode $mode: B=1 decode step vs the launch-free roofline (weights / $GPU_BW_GBS GB/s)"
        # "== --quant Q", "...weights read per step X MB", then the step table (B, step ms, ...)
        awk -v bw="$GPU_BW_GBS" '
            /^== --quant / { q = $3 }
            /weights read per step/ { for (i = 1; i <= NF; i++) if ($i == "MB") mb = $(i - 1) }
            /^ +B +step ms/ { tab = 1; next }
            tab && $1 == 1 && NF >= 2 { roof = mb / bw; printf "  %-8s %8.2f MB  step %7.3f ms  roofline %6.3f ms  ratio %5.1fx\n", q, mb, $2, roof, (roof > 0 ? $2 / roof : 0); tab = 0 }
        ' "$f"
        grep -A 5 '^== side by side' "$f" | sed 's/^/  /'
    done
    if [ -f "$OUT/sweep-run/fit.json" ]; then
        echo "sweep fits, $OUT/sweep-run/fit.json (per-request b should be >= 10x batched b):"
        python3 -c '
import json, sys
def walk(o, path):
    if isinstance(o, dict):
        if "a" in o and "b" in o:
            print("  %-40s a %s  b %s" % ("/".join(path) or "-", o["a"], o["b"]))
        for k, v in o.items():
            walk(v, path + [str(o.get("variant", k)) if k != "variant" else k])
    elif isinstance(o, list):
        for i, v in enumerate(o):
            walk(v, path + [str(v.get("variant", v.get("name", i))) if isinstance(v, dict) else str(i)])
walk(json.load(open(sys.argv[1])), [])' "$OUT/sweep-run/fit.json" 2>&1 | head -n 12
    fi
    echo "check-gpu: $([ $failed -eq 0 ] && echo "all steps passed" || echo "some steps FAILED"); logs in $OUT"
} | tee "$OUT/summary-final.txt"
exit $failed
