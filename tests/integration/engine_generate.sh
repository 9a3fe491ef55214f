# engine_generate: `fp4serve generate` and `fp4serve bench` end to end.
# On SmolLM2-135M Q4_1 (when models/ has it): a factual prompt gives the
# expected words; the ids line is machine-readable and the same with 1 and
# 2 threads and with split or serial attention; --quant requantizes at load
# and says so in one log line; bench prints the batched-bench table for
# batched and per-request decode. Usage errors are checked always.
. tests/lib.sh

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf

# Usage and I/O errors (no model needed).
"$FP4SERVE" generate --prompt hi 2>"$T_TMP/err"
check_eq "generate without --model: exit status" "$?" "2"
check "generate without --model: says what is missing" grep -q -- "--model PATH" "$T_TMP/err"
"$FP4SERVE" generate --model "$T_TMP/none.gguf" --prompt hi 2>"$T_TMP/err"
check_eq "missing model: exit status" "$?" "3"
"$FP4SERVE" bench --model "$T_TMP/none.gguf" --batch 1,x 2>"$T_TMP/err"
check_eq "bench bad --batch: exit status" "$?" "2"
check "bench bad --batch: names the value" grep -q "'x'" "$T_TMP/err"
"$FP4SERVE" generate --help >"$T_TMP/out"
check "generate --help lists --quant" grep -q -- "--quant" "$T_TMP/out"

# The tiny synthetic model: always available, so these always run.
TINY="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --seed 3 -o "$TINY" 2>/dev/null
check_eq "synth tiny: exit status" "$?" "0"
"$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 12 -t 2 >"$T_TMP/t2" 2>/dev/null
check_eq "tiny generate: exit status" "$?" "0"
check "tiny generate: ids line" grep -q '^ids: [0-9]' "$T_TMP/t2"
"$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 12 -t 1 --attention serial \
    >"$T_TMP/t1" 2>/dev/null
check_eq "tiny generate: 1 thread, serial attention, same output" "$(cat "$T_TMP/t1")" \
    "$(cat "$T_TMP/t2")"
"$FP4SERVE" generate --model "$TINY" --prompt "hello" -n 2 --quant nvfp4 >/dev/null 2>"$T_TMP/te"
check "tiny --quant nvfp4: logged" grep -q "requantized 14 tensors to nvfp4 (head q8_0)" "$T_TMP/te"
# --chat renders as the server does: the tiny model's ChatML template has no
# default system prompt (SmolLM2's must not be added), and the user's text
# is tokenized as text, so "<|im_end|>" in it cannot end the turn.
"$FP4SERVE" generate --model "$TINY" --prompt "hi<|im_end|>" --chat -n 1 -t 1 \
    >"$T_TMP/tc" 2>/dev/null
"$FP4SERVE" generate --model "$TINY" --prompt "user"$'\n'"hi<|im_end|>" --no-special -n 1 -t 1 \
    >"$T_TMP/tu" 2>/dev/null
"$FP4SERVE" generate --model "$TINY" --prompt "<|im_end|>"$'\n'"<|im_start|>assistant"$'\n' \
    -n 1 -t 1 >"$T_TMP/ta" 2>/dev/null
want="prompt ids: 1 $(sed -n 's/^prompt ids: //p' "$T_TMP/tu") $(sed -n 's/^prompt ids: //p' "$T_TMP/ta")"
check_eq "tiny --chat: the model's own ChatML, the prompt as text" \
    "$(grep '^prompt ids:' "$T_TMP/tc")" "$want"
"$FP4SERVE" generate --model "$TINY" --prompt "hello world hello world" --ctx 2 -n 1 -t 1 \
    >/dev/null 2>"$T_TMP/err"
check_eq "prompt longer than --ctx: a usage error" "$?" "2"
check "prompt longer than --ctx: says so" grep -q "prompt has [0-9]* tokens.*--ctx 2" "$T_TMP/err"
"$FP4SERVE" generate --model "$TINY" --prompt "hi" --ctx 3 -n 4 -t 1 --ignore-eos \
    >"$T_TMP/out" 2>"$T_TMP/err"
check_eq "-n cut short by --ctx: 2 ids" "$(grep -c '^ids: [0-9]* [0-9]*$' "$T_TMP/out")" "1"
check "-n cut short by --ctx: says so" grep -q -- "--ctx 3 leaves room for 2 of the 4 tokens" \
    "$T_TMP/err"
"$FP4SERVE" bench --model "$TINY" --batch 1,2,5 --prompt-len 6 --gen 3 -t 2 --no-probe \
    >"$T_TMP/tb" 2>/dev/null
check_eq "tiny bench: exit status" "$?" "0"
check_eq "tiny bench: three rows" "$(grep -c '^|     6 |      3 |' "$T_TMP/tb")" "3"
check "tiny bench: phase split" grep -q '^    5 ' "$T_TMP/tb"
# --isa forces a kernel table: every table the CPU has gives the same logits,
# bit for bit (the portable one always runs; exit 7 is a CPU without the ISA)
"$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 4 -t 2 \
    --logits "$T_TMP/isa-auto.f32" >/dev/null 2>&1
for isa in portable avx2 avx512 neon; do
    "$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 4 -t 2 --isa "$isa" \
        --logits "$T_TMP/isa-$isa.f32" >/dev/null 2>"$T_TMP/err"
    rc=$?
    if [ "$rc" = 7 ] && [ "$isa" != portable ]; then
        check "--isa $isa on a CPU without it: says so" grep -q -- "--isa $isa: this CPU lacks" \
            "$T_TMP/err"
        continue
    fi
    echo "$isa" >>"$T_TMP/isas"
    check_eq "--isa $isa: exit status" "$rc" "0"
    check "--isa $isa: the same logits as auto" cmp -s "$T_TMP/isa-auto.f32" "$T_TMP/isa-$isa.f32"
done
# The refusal path of every SIMD table, on any CPU: FP4SERVE_ISA_DISABLE
# withholds a table as a CPU (or an OS that does not enable its state)
# would; --isa then refuses with exit 7, and auto falls back to the next
# table with the same logits.
for isa in avx2 avx512; do
    FP4SERVE_ISA_DISABLE=$isa "$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 4 -t 2 \
        --isa "$isa" >/dev/null 2>"$T_TMP/err"
    check_eq "--isa $isa withheld: exit 7" "$?" "7"
    check "--isa $isa withheld: says so" grep -q -- \
        "--isa $isa: this CPU lacks the instructions it needs (or FP4SERVE_ISA_DISABLE withholds them)" \
        "$T_TMP/err"
    FP4SERVE_ISA_DISABLE=$isa "$FP4SERVE" bench --model "$TINY" --batch 2 --prompt-len 6 --gen 3 -t 2 \
        --no-probe >"$T_TMP/tb" 2>/dev/null
    want=portable
    [ "$isa" = avx512 ] && grep -q avx2 "$T_TMP/isas" && want=avx2
    check "auto with $isa withheld: the $want table" grep -q "kernels = $want" "$T_TMP/tb"
    FP4SERVE_ISA_DISABLE=$isa "$FP4SERVE" generate --model "$TINY" --prompt "hello world" -n 4 -t 2 \
        --logits "$T_TMP/isa-no-$isa.f32" >/dev/null 2>&1
    check "auto with $isa withheld: the same logits" cmp -s "$T_TMP/isa-auto.f32" "$T_TMP/isa-no-$isa.f32"
done
"$FP4SERVE" generate --model "$TINY" --prompt "hi" -n 1 --isa sse2 >/dev/null 2>"$T_TMP/err"
check_eq "--isa sse2: a usage error" "$?" "2"
check "--isa sse2: names the flag and the value" grep -q -- "--isa: unknown kernels 'sse2'" \
    "$T_TMP/err"
"$FP4SERVE" bench --model "$TINY" --batch 2 --prompt-len 6 --gen 3 -t 2 --no-probe \
    --isa portable >"$T_TMP/tb" 2>/dev/null
check "bench --isa portable: reports the kernels" grep -q "kernels = portable" "$T_TMP/tb"

# Quantized offline (synth writes MXFP4/NVFP4 from the same f32 values) and
# requantized at load from f32: the same logits, bit for bit.
"$FP4SERVE" synth --preset tiny --type f32 --seed 9 -o "$T_TMP/s32.gguf" 2>/dev/null
for q in mxfp4 nvfp4; do
    "$FP4SERVE" synth --preset tiny --type "$q" --seed 9 -o "$T_TMP/s-$q.gguf" 2>/dev/null
    "$FP4SERVE" generate --model "$T_TMP/s32.gguf" --prompt "hello world" -n 1 --quant "$q" \
        --logits "$T_TMP/load-$q.f32" >/dev/null 2>&1
    "$FP4SERVE" generate --model "$T_TMP/s-$q.gguf" --prompt "hello world" -n 1 \
        --logits "$T_TMP/file-$q.f32" >/dev/null 2>&1
    check "$q: offline-quantized file == requantized at load (logits)" \
        cmp -s "$T_TMP/load-$q.f32" "$T_TMP/file-$q.f32"
done

if [ ! -f "$MODEL" ]; then
    echo "skipped: model not present ($MODEL)"
    finish
    exit $?
fi

gen() { "$FP4SERVE" generate --model "$MODEL" "$@"; }
gen --prompt "The capital of France is" -n 8 -t 2 >"$T_TMP/a" 2>"$T_TMP/a.err"
check_eq "generate: exit status" "$?" "0"
check "generate: knows Paris" grep -q "Paris" "$T_TMP/a"
check_eq "generate: prompt ids" "$(grep '^prompt ids:' "$T_TMP/a")" "prompt ids: 504 3575 282 4649 314"
check_eq "generate: 8 ids" "$(grep '^ids:' "$T_TMP/a" | wc -w | tr -d ' ')" "9"
check "generate: logs the kv cache" grep -q "kv cache: 1 slots" "$T_TMP/a.err"
gen --prompt "The capital of France is" -n 8 -t 1 --attention serial >"$T_TMP/b" 2>/dev/null
check_eq "1 thread + serial attention: same ids" "$(grep '^ids:' "$T_TMP/b")" \
    "$(grep '^ids:' "$T_TMP/a")"
gen --prompt "What is 2+2?" --chat -n 16 -t 2 >"$T_TMP/c" 2>/dev/null
check "chat: answers 4" grep -q "4" "$T_TMP/c"
check "chat: starts with <|im_start|>" grep -q "^prompt ids: 1 " "$T_TMP/c"

for q in q8_0 mxfp4 nvfp4; do
    gen --prompt "The capital of France is" -n 4 -t 2 --ignore-eos --quant "$q" >"$T_TMP/q" 2>"$T_TMP/q.err"
    check_eq "--quant $q: exit status" "$?" "0"
    check "--quant $q: one log line" grep -q "requantized 210 tensors to $q (head q8_0)" "$T_TMP/q.err"
    check "--quant $q: 4 ids" [ "$(grep '^ids:' "$T_TMP/q" | wc -w)" -eq 5 ]
done
gen --prompt "x" -n 1 --quant nvfp4 --head same >/dev/null 2>"$T_TMP/q.err"
check "--head same: the head follows" grep -q "requantized 211 tensors to nvfp4 (head nvfp4)" "$T_TMP/q.err"
gen --prompt "x" --quant q3 2>"$T_TMP/q.err"
check_eq "--quant q3: usage error" "$?" "2"

for d in batched per-request; do
    "$FP4SERVE" bench --model "$MODEL" --batch 1,3 --prompt-len 8 --gen 4 -t 2 --decode "$d" \
        --no-probe >"$T_TMP/bench" 2>/dev/null
    check_eq "bench $d: exit status" "$?" "0"
    check "bench $d: table header" grep -q '^|    PP |     TG |    B |   N_KV |' "$T_TMP/bench"
    check "bench $d: row for B=3" grep -q '^|     8 |      4 |    3 |     36 |' "$T_TMP/bench"
    check "bench $d: mode shown" grep -q "decode = $d" "$T_TMP/bench"
done
# --ctx above the training context (tiny: 256) warns in every command that loads a model
"$FP4SERVE" generate --model "$TINY" --prompt "hello" -n 2 --ctx 512 >/dev/null 2>"$T_TMP/err"
check_eq "generate --ctx 512: exit status" "$?" "0"
check "generate --ctx 512 > training 256: warning naming both" \
    grep -q "warning: --ctx 512 is above the model's training context of 256 tokens" "$T_TMP/err"
"$FP4SERVE" generate --model "$TINY" --prompt "hello" -n 2 --ctx 256 >/dev/null 2>"$T_TMP/err"
check "generate --ctx 256: no warning" sh -c "! grep -q 'training context' '$T_TMP/err'"
finish
