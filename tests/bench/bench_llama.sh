#!/bin/sh
# bench_llama.sh: fp4serve against llama.cpp on this machine, side by side in
# one run: decode tok/s (S_TG) at B = 1, 4, 16, 64 (PP 32, TG 32:
# llama-batched-bench against `fp4serve bench`) and prefill PP512 (llama-bench
# -p 512 against `fp4serve bench --prompt-len 512`), same file and threads,
# alternating, best of ROUNDS, with the ratio fp4serve / llama.cpp.
#
# llama.cpp is built from the llama-cpp-python sdist's vendored tree (pip
# download into $LLAMA_DIR, default build/llama), with the ISA flags of the
# kernel table fp4serve picks here (GGML_NATIVE=OFF; avx2 -> AVX2+FMA+F16C,
# avx512 -> also AVX512+VNNI), targets llama-batched-bench and llama-bench
# only; the build is cached per ISA and flags in $LLAMA_DIR/b-ISA-HASH. Skipped, with the
# reason, when pip, cmake or the download are not available. On an AVX-512
# machine ISAS=avx2,auto also builds an AVX2 llama.cpp and compares
# `fp4serve --isa avx2` with it (what an AVX2-only CPU gets).
# Before each round it counts the other runnable tasks (/proc/loadavg's
# running count, sampled 10 times over 1 s, median, less this shell) and
# prints them; when they and THREADS exceed the CPUs it warns that the
# ratios do not mean anything: llama.cpp's OpenMP threads spin at every
# barrier and lose their core to the other tasks, which fp4serve's threads
# (asleep on a futex after 25 us) do far less, so a busy machine inflates
# the ratio, most at B=1 (README.md "Decode speed").
# Knobs: THREADS (2), ROUNDS (3), BATCHES (1,4,16,64), ISAS (auto), MODEL, CMAKE, PIP,
# LLAMA_DIR (build/llama), LLAMA_SRC (an unpacked llama-cpp-python sdist, to
# skip the download), LLAMA_BIN (a folder holding both llama.cpp binaries,
# to skip the build; used for every ISA), LOADAVG (/proc/loadavg), NCPU
# (online CPUs).
set -u
BUILD=${BUILD:-build}
FP4SERVE=${FP4SERVE:-$BUILD/bin/fp4serve}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-1,4,16,64}
ISAS=${ISAS:-auto}
LLAMA_DIR=${LLAMA_DIR:-$BUILD/llama}
LLAMA_SRC=${LLAMA_SRC:-}
LLAMA_BIN=${LLAMA_BIN:-}
CMAKE=${CMAKE:-cmake}
PIP=${PIP:-pip}
LOADAVG=${LOADAVG:-/proc/loadavg}
NCPU=${NCPU:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}

skip() {
    echo "bench_llama: skipped: $*"
    exit 0
}
[ -f "$MODEL" ] || skip "model not present ($MODEL; run make models)"
[ -x "$FP4SERVE" ] || skip "$FP4SERVE not built"

# Other runnable tasks now: the median of 10 samples of the running count
# (field 4 of /proc/loadavg, "running/total") over 1 s, less this shell.
others() {
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        read -r _a _b _c _rt _rest <"$LOADAVG" 2>/dev/null || _rt=1/0
        echo $((${_rt%/*} - 1))
        sleep 0.1
    done | sort -n | sed -n 5p
}

# The table fp4serve picks for --isa auto (or the one asked), from its banner.
pick_isa() {
    "$FP4SERVE" bench --model "$MODEL" --isa "$1" --batch 1 --prompt-len 1 --gen 1 \
        --threads 1 --no-probe 2>/dev/null | sed -n 's/.*kernels = \([a-z0-9]*\).*/\1/p' | head -n 1
}

# cmake flags for llama.cpp matching fp4serve's table: every extension named,
# ON or OFF, never -march=native (GGML_NATIVE=OFF below) and never AMX, which
# fp4serve has no kernel for and which dies with SIGILL on VMs that list it
# without granting the tile permission.
ggml_flags() {
    echo "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF" \
        "-DGGML_AVX512_BF16=OFF -DGGML_AVX512_VBMI=OFF"
    case "$1" in
    avx512)
        echo "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
            "-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON"
        ;;
    avx2) echo "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF" ;;
    portable) echo "-DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF" ;;
    *) echo "" ;; # neon: the compiler's defaults for the target
    esac
}

# The vendored llama.cpp tree, downloaded once.
llama_src() {
    if [ -n "$LLAMA_SRC" ]; then
        echo "$LLAMA_SRC/vendor/llama.cpp"
        return
    fi
    for d in "$LLAMA_DIR"/llama_cpp_python-*/vendor/llama.cpp; do
        [ -f "$d/CMakeLists.txt" ] && { echo "$d"; return; }
    done
    command -v "$PIP" >/dev/null 2>&1 || return 1
    mkdir -p "$LLAMA_DIR" || return 1
    echo "bench_llama: downloading the llama-cpp-python sdist into $LLAMA_DIR" >&2
    "$PIP" download --quiet --no-deps --no-binary :all: llama-cpp-python -d "$LLAMA_DIR" >&2 || return 1
    tgz=$(ls "$LLAMA_DIR"/llama_cpp_python-*.tar.gz 2>/dev/null | tail -n 1)
    [ -n "$tgz" ] && tar -xzf "$tgz" -C "$LLAMA_DIR" || return 1
    for d in "$LLAMA_DIR"/llama_cpp_python-*/vendor/llama.cpp; do
        [ -f "$d/CMakeLists.txt" ] && { echo "$d"; return; }
    done
    return 1
}

# The folder holding llama-batched-bench and llama-bench for ISA $1, built once.
llama_bin() {
    if [ -n "$LLAMA_BIN" ]; then
        echo "$LLAMA_BIN"
        return
    fi
    # the folder names the flags, so a build with other flags is never reused
    b="$LLAMA_DIR/b-$1-$(ggml_flags "$1" | cksum | cut -d' ' -f1)"
    if [ -x "$b/bin/llama-batched-bench" ] && [ -x "$b/bin/llama-bench" ]; then
        echo "$b/bin"
        return
    fi
    src=$(llama_src) || return 1
    mkdir -p "$LLAMA_DIR" || return 1
    echo "bench_llama: building llama.cpp ($1) in $b (once; log $b.log)" >&2
    # shellcheck disable=SC2046 # the flags are words
    "$CMAKE" -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF $(ggml_flags "$1") \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >"$b.log" 2>&1 &&
        "$CMAKE" --build "$b" -j "$(nproc)" --target llama-batched-bench llama-bench >>"$b.log" 2>&1 ||
        return 1
    echo "$b/bin"
}

if [ -z "$LLAMA_BIN" ]; then
    command -v "$CMAKE" >/dev/null 2>&1 || skip "$CMAKE not installed (needed to build llama.cpp)"
    if [ -z "$LLAMA_SRC" ] && ! ls "$LLAMA_DIR"/llama_cpp_python-*/vendor/llama.cpp/CMakeLists.txt \
        >/dev/null 2>&1; then
        command -v "$PIP" >/dev/null 2>&1 || skip "$PIP not installed (needed to fetch llama.cpp)"
    fi
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/bench-llama.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1);" \
    "flags: $(grep -m1 -o -w 'avx2\|fma\|f16c\|avx512f\|avx512bw\|avx512vl\|avx512_vnni\|avx_vnni\|asimddp' \
        /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

for want in $(echo "$ISAS" | tr ',' ' '); do
    isa=$(pick_isa "$want")
    [ -n "$isa" ] || {
        echo "bench_llama: fp4serve has no '$want' table here"
        continue
    }
    bin=$(llama_bin "$isa") || {
        echo "bench_llama: skipped $isa: llama.cpp could not be fetched or built (see $LLAMA_DIR)"
        continue
    }
    echo "== fp4serve --isa $isa vs llama.cpp ($isa build: $bin), $THREADS threads, $MODEL," \
        "best of $ROUNDS alternating rounds"
    r="$out/$isa"
    busy=
    for i in $(seq "$ROUNDS"); do
        o=$(others)
        busy="$busy ${o:-?}"
        "$bin/llama-batched-bench" -m "$MODEL" -t "$THREADS" -c 8192 -b 2048 -ub 512 -npp 32 -ntg 32 \
            -npl "$BATCHES" >"$r.llama-out" 2>/dev/null
        grep '^| *32 ' "$r.llama-out" >>"$r.llama-tg"
        [ "$i" = 1 ] && sed -n 's/^llama_batched_bench: \(n_kv_max = .*\)/llama.cpp settings: \1/p' \
            "$r.llama-out"
        "$FP4SERVE" bench --model "$MODEL" --isa "$isa" --threads "$THREADS" --prompt-len 32 \
            --gen 32 --batch "$BATCHES" --no-probe 2>/dev/null | grep '^| *32 ' >>"$r.fp4-tg"
        "$bin/llama-bench" -m "$MODEL" -t "$THREADS" -p 512 -n 0 2>/dev/null | grep 'pp512' >>"$r.llama-pp"
        "$FP4SERVE" bench --model "$MODEL" --isa "$isa" --threads "$THREADS" --prompt-len 512 \
            --gen 1 --batch 1 --no-probe 2>/dev/null | grep '^| *512 ' >>"$r.fp4-pp"
    done
    # best S_TG (column 9) at batch $2 in file $1
    stg() { awk -F'|' -v b="$2" '$4+0 == b { gsub(/ /, "", $9); print $9 }' "$1" | sort -g | tail -n 1; }
    ratio() { echo "$1 $2" | awk '$1 > 0 && $2 > 0 { printf "%.2f", $1 / $2; next } { print "-" }'; }
    printf '%-14s %12s %12s %7s\n' "tok/s" llama.cpp "fp4serve" ratio
    for b in $(echo "$BATCHES" | tr ',' ' '); do
        l=$(stg "$r.llama-tg" "$b") f=$(stg "$r.fp4-tg" "$b")
        printf '%-14s %12s %12s %7s\n' "decode B=$b" "${l:--}" "${f:--}" "$(ratio "$f" "$l")"
    done
    # llama-bench: "... | pp512 | 346.21 ± 3.20 |"; fp4serve: S_PP (column 7)
    l=$(awk -F'|' '{ n = split($(NF - 1), a, " "); print a[1] }' "$r.llama-pp" | sort -g | tail -n 1)
    f=$(awk -F'|' '{ gsub(/ /, "", $7); print $7 }' "$r.fp4-pp" | sort -g | tail -n 1)
    printf '%-14s %12s %12s %7s\n' "prefill PP512" "${l:--}" "${f:--}" "$(ratio "$f" "$l")"
    echo "other runnable tasks before each round:$busy ($NCPU CPUs, $THREADS threads)"
    worst=$(echo "$busy" | tr ' ' '\n' | grep -x '[0-9]*' | sort -n | tail -n 1)
    if [ -n "$worst" ] && [ $((worst + THREADS)) -gt "$NCPU" ]; then
        echo "bench_llama: warning: busy machine ($worst other runnable tasks + $THREADS threads >" \
            "$NCPU CPUs): these ratios are not meaningful (llama.cpp's spinning OpenMP barriers" \
            "suffer far more than fp4serve's); rerun on a quiet machine (THREADS=1 suffers least)"
    fi
    echo
done
