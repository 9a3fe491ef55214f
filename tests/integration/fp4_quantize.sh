# fp4_quantize: `fp4serve quantize` end to end on the synthetic tiny model
# (made here), and on the real SmolLM2 file when models/ has it. The files
# must be read by `fp4serve info`, by gguf-py's gguf-dump and by llama.cpp
# (llama-cpp-python), give the same logits as requantizing at load, and
# survive quantize -> dequantize -> quantize unchanged. Python checks are
# skipped, with a message, when their package is missing.
. tests/lib.sh

tiny="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --type f16 -o "$tiny" 2>/dev/null
check_eq "synth tiny (f16 weights, so the head moves to q8_0 too)" "$?" "0"
PROMPT="the river ran past the mill"

for q in mxfp4 nvfp4; do
    out="$T_TMP/tiny-$q.gguf"
    "$FP4SERVE" quantize "$tiny" "$out" --type "$q" >"$T_TMP/q.out" 2>&1
    check_eq "$q: quantize exit status" "$?" "0"
    check "$q: summary line" grep -q "15 requantized to $q (head q8_0)" "$T_TMP/q.out"
    "$FP4SERVE" info "$out" >"$T_TMP/info" 2>&1
    check_eq "$q: info reads it" "$?" "0"
    check "$q: 14 $q tensors" grep -qE "^$q +14 " "$T_TMP/info"
    check "$q: token_embd stays q8_0" grep -qE '^q8_0 +1 ' "$T_TMP/info"
    check "$q: 5 f32 norms (+ scales)" grep -qE '^f32 +(5|19) ' "$T_TMP/info"

    # Offline == at load: the first step's logits, bit for bit.
    "$FP4SERVE" generate --model "$out" --prompt "$PROMPT" -n 1 --logits "$T_TMP/off.f32" \
        >/dev/null 2>&1
    "$FP4SERVE" generate --model "$tiny" --quant "$q" --prompt "$PROMPT" -n 1 \
        --logits "$T_TMP/load.f32" >/dev/null 2>"$T_TMP/gen.err"
    check "$q: --quant says so in the log" grep -q "requantized 15 tensors to $q" "$T_TMP/gen.err"
    check "$q: offline file == --quant $q at load (logits bit for bit)" \
        cmp -s "$T_TMP/off.f32" "$T_TMP/load.f32"
    check "$q: logits written" test -s "$T_TMP/off.f32"

    # quantize -> dequantize (f32) -> quantize: the same file.
    "$FP4SERVE" quantize "$out" "$T_TMP/deq.gguf" --type f32 >/dev/null 2>&1
    "$FP4SERVE" quantize "$T_TMP/deq.gguf" "$T_TMP/again.gguf" --type "$q" >/dev/null 2>&1
    check "$q: quantize -> f32 -> quantize is byte-identical" cmp -s "$out" "$T_TMP/again.gguf"
done
# A Q4_1 model with a Q8_0 head, as SmolLM2's file: 14 requantized, the head kept.
"$FP4SERVE" synth --preset tiny --type q4_1 -o "$T_TMP/q41.gguf" 2>/dev/null
for q in mxfp4 nvfp4; do
    "$FP4SERVE" quantize "$T_TMP/q41.gguf" "$T_TMP/q41-$q.gguf" --type "$q" >"$T_TMP/q.out" 2>&1
    check "q4_1 -> $q: 14 requantized, head kept" \
        grep -q "14 requantized to $q (head q8_0).* 1 weights kept" "$T_TMP/q.out"
    "$FP4SERVE" generate --model "$T_TMP/q41-$q.gguf" --prompt "$PROMPT" -n 1 \
        --logits "$T_TMP/off.f32" >/dev/null 2>&1
    "$FP4SERVE" generate --model "$T_TMP/q41.gguf" --quant "$q" --prompt "$PROMPT" -n 1 \
        --logits "$T_TMP/load.f32" >/dev/null 2>&1
    check "q4_1 -> $q: offline == at load (logits bit for bit)" cmp -s "$T_TMP/off.f32" "$T_TMP/load.f32"
done

# A qwen3moe: the 3-D expert tensors are requantized expert by expert (NVFP4:
# one scale per expert, [16]), the F32 router stays; offline == at load and
# the f32 round trip hold for them too.
"$FP4SERVE" synth --arch qwen3moe --type f32 -o "$T_TMP/moe.gguf" 2>/dev/null
for q in mxfp4 nvfp4; do
    "$FP4SERVE" quantize "$T_TMP/moe.gguf" "$T_TMP/moe-$q.gguf" --type "$q" >"$T_TMP/q.out" 2>&1
    check "qwen3moe -> $q: 29 requantized (16 matrices + 12 expert tensors + head), router kept" \
        grep -q "29 requantized to $q (head q8_0).* 4 weights kept" "$T_TMP/q.out"
    "$FP4SERVE" info --all "$T_TMP/moe-$q.gguf" >"$T_TMP/info" 2>&1
    check "qwen3moe -> $q: experts $q [128, 64, 16]" \
        grep -qE "^  blk\.3\.ffn_gate_exps\.weight +$q +\[128, 64, 16\]" "$T_TMP/info"
    check "qwen3moe -> $q: router stays f32" grep -qE '^  blk\.0\.ffn_gate_inp\.weight +f32 ' "$T_TMP/info"
    "$FP4SERVE" generate --model "$T_TMP/moe-$q.gguf" --prompt "$PROMPT" -n 1 --logits "$T_TMP/off.f32" \
        >/dev/null 2>&1
    "$FP4SERVE" generate --model "$T_TMP/moe.gguf" --quant "$q" --prompt "$PROMPT" -n 1 \
        --logits "$T_TMP/load.f32" >/dev/null 2>&1
    check "qwen3moe -> $q: offline == at load (logits bit for bit)" cmp -s "$T_TMP/off.f32" "$T_TMP/load.f32"
    "$FP4SERVE" quantize "$T_TMP/moe-$q.gguf" "$T_TMP/deq.gguf" --type f32 >/dev/null 2>&1
    "$FP4SERVE" quantize "$T_TMP/deq.gguf" "$T_TMP/again.gguf" --type "$q" >/dev/null 2>&1
    check "qwen3moe -> $q -> f32 -> $q is byte-identical" cmp -s "$T_TMP/moe-$q.gguf" "$T_TMP/again.gguf"
done
check "qwen3moe nvfp4: one scale per expert" \
    grep -qE '^  blk\.0\.ffn_down_exps\.scale +f32 +\[16\]' "$T_TMP/info"

"$FP4SERVE" info --all "$T_TMP/tiny-nvfp4.gguf" >"$T_TMP/info" 2>&1
check "nvfp4: llama.cpp's scale tensor blk.0.attn_q.scale, f32 [1]" \
    grep -qE '^  blk\.0\.attn_q\.scale +f32 +\[1\]' "$T_TMP/info"
"$FP4SERVE" quantize "$tiny" "$T_TMP/s.gguf" --type mxfp4 --mxfp4-search >"$T_TMP/q.out" 2>&1
check "mxfp4 --mxfp4-search" grep -q "with exponent search" "$T_TMP/q.out"
check "--mxfp4-search changes some blocks" sh -c "! cmp -s '$T_TMP/s.gguf' '$T_TMP/tiny-mxfp4.gguf'"

# Refusals, with the exit statuses of engine/fp4.h.
"$FP4SERVE" quantize "$tiny" "$T_TMP/x.gguf" --type q3_k 2>"$T_TMP/err"
check_eq "unknown type: status 2" "$?" "2"
check_eq "unknown type: message" "$(cat "$T_TMP/err")" \
    "fp4serve: error: --type: unknown type 'q3_k' (use mxfp4|nvfp4|q8_0|q4_0|q4_1|f16|bf16|f32)"
"$FP4SERVE" quantize "$tiny" "$T_TMP/x.gguf" 2>/dev/null
check_eq "missing --type: status 2" "$?" "2"
"$FP4SERVE" quantize "$tiny" --type mxfp4 2>/dev/null
check_eq "one path: status 2" "$?" "2"
"$FP4SERVE" quantize "$tiny" "$T_TMP/x.gguf" --type nvfp4 --mxfp4-search 2>/dev/null
check_eq "--mxfp4-search with nvfp4: status 2" "$?" "2"
"$FP4SERVE" quantize "$tiny" "$tiny" --type mxfp4 2>/dev/null
check_eq "output = input: status 2" "$?" "2"
"$FP4SERVE" quantize "$T_TMP/none.gguf" "$T_TMP/x.gguf" --type mxfp4 2>/dev/null
check_eq "missing input: status 3" "$?" "3"
"$FP4SERVE" quantize "$tiny" "$T_TMP/no/dir/x.gguf" --type mxfp4 2>/dev/null
check_eq "unwritable output: status 3" "$?" "3"
head -c 300 "$tiny" >"$T_TMP/cut.gguf"
"$FP4SERVE" quantize "$T_TMP/cut.gguf" "$T_TMP/x.gguf" --type mxfp4 2>/dev/null
check_eq "truncated input: status 4" "$?" "4"
check "nothing left behind" sh -c "! ls '$T_TMP'/x.gguf* '$T_TMP'/no 2>/dev/null"

# gguf-py's dump tool reads our files (names, types, the file type).
if command -v gguf-dump >/dev/null 2>&1; then
    for q in mxfp4 nvfp4; do
        gguf-dump --no-tensors "$T_TMP/tiny-$q.gguf" >"$T_TMP/dump" 2>&1
        check_eq "gguf-dump reads tiny-$q: status" "$?" "0"
        want=$([ $q = mxfp4 ] && echo 38 || echo 39)
        check "gguf-dump: general.file_type = $want" grep -qE "general\.file_type += $want\$" "$T_TMP/dump"
        gguf-dump "$T_TMP/tiny-$q.gguf" >"$T_TMP/dump" 2>&1
        check "gguf-dump lists blk.1.ffn_down.weight as ${q}" \
            grep -qiE "\| +$(echo $q | tr a-z A-Z) +\| blk\.1\.ffn_down\.weight\$" "$T_TMP/dump"
    done
    check "gguf-dump: 14 NVFP4 scale tensors" \
        test "$(gguf-dump "$T_TMP/tiny-nvfp4.gguf" 2>/dev/null | grep -cE '\| F32 +\| blk\.[0-9]+\.[a-z_]+\.scale$')" = 14
else
    echo "skip: gguf-dump not installed (pip install gguf) - gguf-py dump check not run"
fi

# llama.cpp loads both files, generates, and its first-step logits match
# ours to within the rounding of its 8-bit activations (1% of the largest).
if python3 -c 'import llama_cpp' 2>/dev/null; then
    for q in mxfp4 nvfp4; do
        "$FP4SERVE" generate --model "$T_TMP/tiny-$q.gguf" --prompt "$PROMPT" -n 1 --kv f32 \
            --logits "$T_TMP/ours.f32" >/dev/null 2>&1
        ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$T_TMP/tiny-$q.gguf" "$PROMPT" "$T_TMP/ours.f32" <<'PY'
import sys
import numpy as np
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, verbose=False, logits_all=True,
          type_k=0, type_v=0)
ids = m.tokenize(sys.argv[2].encode(), add_bos=False, special=False)
m.eval(ids)
theirs = np.array(m.scores[len(ids) - 1][: m.n_vocab()], dtype=np.float32)
ours = np.fromfile(sys.argv[3], dtype=np.float32)
rel = float(np.abs(theirs - ours).max() / np.abs(ours).max())
m.reset()
out = m(prompt=sys.argv[2], max_tokens=4, temperature=0)
print(out["usage"]["completion_tokens"], int(theirs.argmax()) == int(ours.argmax()), rel < 0.01)
PY
        check_eq "llama.cpp loads tiny-$q, generates 4 tokens, agrees on the logits" \
            "$(cat "$T_TMP/llama")" "4 True True"
    done
    smol="$TOPDIR/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if [ -f "$smol" ]; then
        "$FP4SERVE" quantize "$smol" "$T_TMP/smol-mxfp4.gguf" --type mxfp4 --threads 2 >/dev/null 2>&1
        check_eq "SmolLM2 -> mxfp4: status" "$?" "0"
        first=$("$FP4SERVE" generate --model "$T_TMP/smol-mxfp4.gguf" \
            --prompt "The capital of France is" -n 1 --threads 2 2>/dev/null | sed -n 's/^ids: //p')
        ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$T_TMP/smol-mxfp4.gguf" <<'PY'
import sys
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], n_ctx=128, n_threads=2, verbose=False)
ids = m.tokenize(b"The capital of France is", add_bos=False, special=False)
out = m(prompt="The capital of France is", max_tokens=8, temperature=0)
text = out["choices"][0]["text"]
print(m.tokenize(text.encode(), add_bos=False, special=False)[0] if text else -1)
PY
        check_eq "llama.cpp generates from our SmolLM2 MXFP4 file, same first token" \
            "$(cat "$T_TMP/llama")" "$first"
    else
        echo "skip: $smol not present - SmolLM2 llama.cpp check not run"
    fi
else
    echo "skip: python3 package 'llama_cpp' not installed - llama.cpp load checks not run"
fi
finish
