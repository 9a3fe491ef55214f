# gguf_info: `fp4serve info` on the real SmolLM2-135M-Instruct Q4_1 file
# (when `make models` has fetched it) reports its known shape, tokenizer,
# end-of-generation set and tensor-type mix (docs/formats.md
# §2.1, §2.5, §2.6: Q4_1 layers, a Q8_0 tied embedding, F32 norms).
. tests/lib.sh

model=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$model" ]; then
    echo "skip: $model missing (make models)"
    finish
    exit $?
fi
"$FP4SERVE" info "$model" >"$T_TMP/info" 2>&1
check_eq "info: exit status" "$?" "0"
for want in "architecture  llama" "layers        30" "embedding     576" "heads         9" \
    "kv heads      3" "feed-forward  1536" "context       8192" "rope dims     64" \
    "rope base     100000" "rms eps       1e-05" "vocab         49152" \
    "tokenizer     gpt2, pre 'smollm', 49152 tokens, 48900 merges" \
    "eog           0 '<|endoftext|>', 2 '<|im_end|>', 4 '<reponame>'"; do
    check "info: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "info: 61 f32 norms" grep -qE '^f32 +61 +35136 +140544 ' "$T_TMP/info"
check "info: 210 q4_1 matrices" grep -qE '^q4_1 +210 +106168320 +66355200 ' "$T_TMP/info"
check "info: q8_0 tied embedding" grep -qE '^q8_0 +1 +28311552 +30081024 ' "$T_TMP/info"
check "info: 272 tensors, 134515008 weights" grep -qE '^total +272 +134515008 +96576768 ' "$T_TMP/info"
"$FP4SERVE" info --all "$model" >"$T_TMP/all" 2>&1
check "info --all: token_embd is q8_0 [576, 49152]" \
    grep -qE '^  token_embd.weight +q8_0 +\[576, 49152\] 30081024 bytes' "$T_TMP/all"
check "info --all: no output.weight (tied)" sh -c "! grep -q '^  output.weight ' '$T_TMP/all'"
check_eq "info --all: 33 metadata pairs listed" "$(grep -c '^  [a-z].* = ' "$T_TMP/all")" "33"
finish
