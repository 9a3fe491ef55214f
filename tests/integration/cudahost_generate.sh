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
TINY="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --seed 5 -o "$TINY" 2>/dev/null
check_eq "synth tiny: exit status" "$?" "0"
for q in native mxfp4 nvfp4; do
    qa=
    [ "$q" = native ] || qa="--quant $q"
    # shellcheck disable=SC2086 # qa is empty or two words
    "$FH" generate --model "$TINY" --prompt "hello world, the harness" -n 10 --ignore-eos \
        --device cpu $qa >"$T_TMP/cpu-$q" 2>"$T_TMP/cpu-$q.err"
    # shellcheck disable=SC2086
    "$FH" generate --model "$TINY" --prompt "hello world, the harness" -n 10 --ignore-eos \
        --device cuda $qa >"$T_TMP/cuda-$q" 2>"$T_TMP/cuda-$q.err"
    rc=$?
    check_eq "$q: --device cuda through the harness: exit status" "$rc" "0"
    [ "$rc" -eq 0 ] || sed 's/^/    /' "$T_TMP/cuda-$q.err" | tail -n 5
    check "$q: the harness ran the kernels" grep -q "cuda: cudahost" "$T_TMP/cuda-$q.err"
    check_eq "$q: greedy ids equal those of --device cpu" \
        "$(grep '^ids:' "$T_TMP/cuda-$q")" "$(grep '^ids:' "$T_TMP/cpu-$q")"
done
for arch in qwen3 qwen3moe; do
    m="$T_TMP/$arch.gguf"
    "$FP4SERVE" synth --arch "$arch" --type nvfp4 -o "$m" 2>/dev/null
    check_eq "synth --arch $arch: exit status" "$?" "0"
    for d in cpu cuda; do
        "$FH" generate --model "$m" --prompt "the river ran" -n 8 --ignore-eos --device "$d" \
            >"$T_TMP/$arch-$d" 2>"$T_TMP/$arch-$d.err"
        rc=$?
        check_eq "$arch: --device $d: exit status" "$rc" "0"
        [ "$rc" -eq 0 ] || sed 's/^/    /' "$T_TMP/$arch-$d.err" | tail -n 5
    done
    check "$arch: the harness ran the kernels" grep -q "cuda: cudahost" "$T_TMP/$arch-cuda.err"
    check_eq "$arch: greedy ids equal those of --device cpu" \
        "$(grep '^ids:' "$T_TMP/$arch-cuda")" "$(grep '^ids:' "$T_TMP/$arch-cpu")"
done
OSS="$T_TMP/gpt-oss.gguf"
"$FP4SERVE" synth --arch gpt-oss -o "$OSS" 2>/dev/null
check_eq "synth --arch gpt-oss: exit status" "$?" "0"
for q in native mxfp4; do
    qa=
    [ "$q" = native ] || qa="--quant $q"
    for d in cpu cuda; do
        # shellcheck disable=SC2086 # qa is empty or two words
        "$FH" generate --model "$OSS" --prompt "the river ran" -n 24 --ignore-eos --device "$d" \
            $qa >"$T_TMP/oss-$q-$d" 2>"$T_TMP/oss-$q-$d.err"
        rc=$?
        check_eq "gpt-oss $q: --device $d: exit status" "$rc" "0"
        [ "$rc" -eq 0 ] || sed 's/^/    /' "$T_TMP/oss-$q-$d.err" | tail -n 5
    done
    check "gpt-oss $q: the harness ran the kernels" grep -q "cuda: cudahost" "$T_TMP/oss-$q-cuda.err"
    check_eq "gpt-oss $q: greedy ids equal those of --device cpu" \
        "$(grep '^ids:' "$T_TMP/oss-$q-cuda")" "$(grep '^ids:' "$T_TMP/oss-$q-cpu")"
done
"$FH" generate --model "$TINY" --prompt "hi" -n 2 --device cuda --kv f32 >/dev/null 2>"$T_TMP/err"
check_eq "--kv f32 on --device cuda: refused (status 5)" "$?" "5"
check_eq "--kv f32 on --device cuda: one line saying so" "$(cat "$T_TMP/err")" \
    "fp4serve: error: $T_TMP/tiny.gguf: --kv f32 is not supported by the cuda backend (its cache is f16)"
finish
