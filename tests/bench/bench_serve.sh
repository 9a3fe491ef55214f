#!/bin/bash
# bench_serve.sh: fp4serve behind HTTP, measured by sweep itself. Runs
# experiments/decode-modes.yaml (batched vs per-request decode, C = 1, 2, 4,
# 8, 16; 16 prompt tokens, 128 generated) on SmolLM2-135M Q4_1 with THREADS
# threads, and prints each regime's fit (a ms per step, b ms per added
# request, ceiling 1000/b tok/s) and the output throughput at C = 1, 4, 16.
# When llama.cpp's `llama-server` is on PATH (or LLAMA_SERVER names it), the
# same grid runs against it as an external command with --parallel 16, and
# its row is printed beside ours. Knobs: MODEL, THREADS (2), LLAMA_SERVER.
# `bench_serve.sh --summary RUN_FOLDER...` prints the table alone from
# finished run folders (fit.json, points.csv).
#
# llama-server is not in llama-cpp-python's wheel (its Python server serves
# one request at a time, so it cannot show continuous batching). It builds
# from the llama.cpp tree vendored in the package's sdist, e.g. 0.3.36:
#   pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: && tar xzf llama_cpp_python-0.3.36.tar.gz
#   cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B llama-build -DCMAKE_BUILD_TYPE=Release \
#       -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
#   cmake --build llama-build --target llama-server -j2     # 17.5 min on 2 shared cores
#   LLAMA_SERVER=llama-build/bin/llama-server make bench
set -u
if [ "${1:-}" = "--summary" ]; then # the table alone, over finished run folders
    shift
    SUMMARY_ONLY=1
fi
BUILD=${BUILD:-build}
SWEEP=${SWEEP:-$BUILD/bin/sweep}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
LLAMA_SERVER=${LLAMA_SERVER:-$(command -v llama-server || true)}

# One table: per run and variant, the fit and the throughput at C = 1, 4, 16.
# A fit that sweep rejects (fit.json "unfit", or no a/b/ceiling) is printed
# as "no linear fit" with sweep's reason, and the table goes on.
summary() {
    echo
    echo "== summary (median TPOT = a + b*C; throughput = output tok/s at C)"
    printf '%-26s %8s %8s %8s %10s %10s %10s\n' "engine/variant" "a ms" "b ms" "ceiling" "tok/s C=1" "C=4" "C=16"
    for r in "$@"; do
        for v in $(jq -r '.variants | keys[]' "$r/fit.json"); do
            # "a b ceiling" when all three are numbers and the fit is a law, else empty
            fit=$(jq -r --arg v "$v" '.variants[$v]
                | if (.unfit == null) and ([.a, .b, .ceiling_tok_s] | all(type == "number"))
                  then "\(.a) \(.b) \(.ceiling_tok_s)" else "" end' "$r/fit.json")
            why=$(jq -r --arg v "$v" '.variants[$v] | .unfit // .note // "no fit"' "$r/fit.json")
            thr() {
                awk -F, -v v="$v" -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) k[$i] = i; next }
                    $1 == v && $2 == c && $5 == "ok" { print $k["output_throughput"] }' "$r/points.csv"
            }
            if [ -n "$fit" ]; then
                # shellcheck disable=SC2086
                printf '%-26s %8.1f %8.2f %8.1f %10s %10s %10s\n' "$(basename "$r")/$v" $fit \
                    "$(thr 1)" "$(thr 4)" "$(thr 16)"
            else
                printf '%-26s %26s %10s %10s %10s\n' "$(basename "$r")/$v" "no linear fit" \
                    "$(thr 1)" "$(thr 4)" "$(thr 16)"
                printf '%-26s (%s)\n' "" "$why"
            fi
        done
    done
}
if [ -n "${SUMMARY_ONLY:-}" ]; then
    summary "$@"
    exit $?
fi
if [ ! -f "$MODEL" ]; then
    echo "bench_serve: skipped: model not present ($MODEL; run make models)"
    exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-serve.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "== sweep run experiments/decode-modes.yaml (model $MODEL, threads $THREADS)"
DECODE_MODES_MODEL="$MODEL" FP4SERVE_THREADS="$THREADS" \
    "$SWEEP" run experiments/decode-modes.yaml --out "$out/fp4serve" 2>&1 | grep -E '^(fit|sweep: [0-9]+ ok)'
runs="$out/fp4serve"

if [ -n "$LLAMA_SERVER" ]; then
    # the same load against llama-server: 16 slots of 512 positions, same threads
    sed -e '/^variants:/,$d' -e 's/^name: decode-modes$/name: decode-modes-llamacpp/' \
        experiments/decode-modes.yaml | sed '/^server:/,/^bench:/{/^bench:/!d}' >"$out/llama.yaml.tmp"
    {
        echo "server:"
        echo "  engine: command"
        echo "  command: [\"$LLAMA_SERVER\", --model, \"\${model}\", --host, \"\${host}\", --port, \"\${port}\"]"
        echo "  model: $MODEL"
        echo "  flags: {parallel: 16, ctx-size: 8192, threads: $THREADS, threads-batch: $THREADS, cont-batching: true}"
        echo "  ready: {path: /health, timeout_s: 120}"
        echo "  stop: {grace_s: 10}"
        cat "$out/llama.yaml.tmp"
    } >"$out/llama.yaml"
    echo
    echo "== the same grid against llama.cpp: $LLAMA_SERVER --parallel 16 --threads $THREADS"
    "$SWEEP" run "$out/llama.yaml" --out "$out/llamacpp" 2>&1 | grep -E '^(fit|sweep: [0-9]+ ok)'
    runs="$runs $out/llamacpp"
else
    echo
    echo "== llama.cpp: skipped: no llama-server on PATH (set LLAMA_SERVER); see the README section fp4serve"
fi

# shellcheck disable=SC2086 # runs is a list of folders without spaces (mktemp)
summary $runs
