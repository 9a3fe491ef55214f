# cudahost_generate: `fp4serve generate --device cuda` end to end with the
# CUDA kernels run on the CPU by the host harness (tests/cudahost/,
# docs/cudahost.md; the binary is $BUILD/cudahost/bin/fp4serve, built by
# `make test` and `make cuda-host`). The greedy ids of the tiny synthetic
# model, natively (Q4_1 from synth) and requantized to MXFP4 and NVFP4,
# are those of --device cpu; any finding of the harness's memory checks
# ends the process with status 86 and fails the check. The CUDA kernels
# run llama only: qwen3, qwen3moe and gpt-oss are refused at load with one line
# (status 5) before any device memory is taken.
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
for a in qwen3 qwen3moe gpt-oss; do
    "$FP4SERVE" synth --arch $a -o "$T_TMP/$a.gguf" 2>/dev/null
    "$FH" generate --model "$T_TMP/$a.gguf" --prompt "hi" -n 2 --device cuda >/dev/null \
        2>"$T_TMP/err"
    check_eq "$a on --device cuda: refused (status 5)" "$?" "5"
    check_eq "$a on --device cuda: one line saying so" "$(cat "$T_TMP/err")" \
        "fp4serve: error: $T_TMP/$a.gguf: --device cuda runs llama models only; '$a' runs on --device cpu"
done
finish
