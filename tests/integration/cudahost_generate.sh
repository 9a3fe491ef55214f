# cudahost_generate: `fp4serve generate --device cuda` end to end with the
# CUDA kernels run on the CPU by the host harness (tests/cudahost/,
# docs/cudahost.md; the binary is $BUILD/cudahost/bin/fp4serve, built by
# `make test` and `make cuda-host`). The greedy ids of the tiny synthetic
# model, natively (Q4_1 from synth) and requantized to MXFP4 and NVFP4,
# are those of --device cpu, and so are those of qwen3 and qwen3moe
# (synth --arch, NVFP4 experts) on a prompt short enough (<= 8 tokens) for
# the GEMV regime, where the two backends round alike (the tensor cores'
# f16 activations move these sharp models' logits by percents, see
# tests/unit/engine_cuda_qwen3.c); so are those of gpt-oss (synth --arch
# gpt-oss, natively and with --quant mxfp4) for 24 tokens, past its
# 20-key sliding window. Any finding of the harness's memory checks ends
# the process with status 86 and fails the check. --kv f32, which the
# CUDA backend does not run (its cache is f16), is refused at load with
# one line (status 5).
. tests/lib.sh

FH="$BUILD/cudahost/bin/fp4serve"
if [ ! -x "$FH" ]; then
    echo "skipped: $FH is not built (make cuda-host)"
    finish
    exit
fi
# same_ids NAME MODEL PROMPT N [ARGS...]: generate N greedy tokens on
# --device cpu and --device cuda (both through the harness binary); each
# exits 0, the cuda run went through the harness, and the ids are equal.
same_ids() {
    name=$1 model=$2 prompt=$3 n=$4
    shift 4
    for d in cpu cuda; do
        "$FH" generate --model "$model" --prompt "$prompt" -n "$n" --ignore-eos --device "$d" \
            "$@" >"$T_TMP/$name-$d" 2>"$T_TMP/$name-$d.err"
        rc=$?
        check_eq "$name: --device $d: exit status" "$rc" "0"
        [ "$rc" -eq 0 ] || sed 's/^/    /' "$T_TMP/$name-$d.err" | tail -n 5
    done
    check "$name: the harness ran the kernels" grep -q "cuda: cudahost" "$T_TMP/$name-cuda.err"
    check_eq "$name: greedy ids equal those of --device cpu" \
        "$(grep '^ids:' "$T_TMP/$name-cuda")" "$(grep '^ids:' "$T_TMP/$name-cpu")"
}

TINY="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --seed 5 -o "$TINY" 2>/dev/null
check_eq "synth tiny: exit status" "$?" "0"
same_ids native "$TINY" "hello world, the harness" 10
for q in mxfp4 nvfp4; do
    same_ids "$q" "$TINY" "hello world, the harness" 10 --quant "$q"
done
for arch in qwen3 qwen3moe; do
    m="$T_TMP/$arch.gguf"
    "$FP4SERVE" synth --arch "$arch" --type nvfp4 -o "$m" 2>/dev/null
    check_eq "synth --arch $arch: exit status" "$?" "0"
    same_ids "$arch" "$m" "the river ran" 8
done
OSS="$T_TMP/gpt-oss.gguf"
"$FP4SERVE" synth --arch gpt-oss -o "$OSS" 2>/dev/null
check_eq "synth --arch gpt-oss: exit status" "$?" "0"
same_ids "gpt-oss native" "$OSS" "the river ran" 24
same_ids "gpt-oss mxfp4" "$OSS" "the river ran" 24 --quant mxfp4
"$FH" generate --model "$TINY" --prompt "hi" -n 2 --device cuda --kv f32 >/dev/null 2>"$T_TMP/err"
check_eq "--kv f32 on --device cuda: refused (status 5)" "$?" "5"
check_eq "--kv f32 on --device cuda: one line saying so" "$(cat "$T_TMP/err")" \
    "fp4serve: error: $T_TMP/tiny.gguf: --kv f32 is not supported by the cuda backend (its cache is f16)"
finish
