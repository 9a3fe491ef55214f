# gguf_synth: `fp4serve synth` writes the shapes it promises, byte-identical
# for the same options, readable by `fp4serve info` and (when the Python
# package `gguf` is installed) by gguf-py's reader, which must agree with
# ours on every tensor's name, type, shape, offset and size.
. tests/lib.sh

tiny="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --type f32 --seed 7 -o "$tiny"
check_eq "synth tiny: exit status" "$?" "0"
"$FP4SERVE" synth --preset tiny --type f32 --seed 7 -o "$T_TMP/tiny2.gguf"
check "same seed: byte-identical" cmp -s "$tiny" "$T_TMP/tiny2.gguf"
"$FP4SERVE" synth --preset tiny --type f32 --seed 8 -o "$T_TMP/tiny3.gguf"
check "other seed: different bytes" sh -c "! cmp -s '$tiny' '$T_TMP/tiny3.gguf'"

"$FP4SERVE" info "$tiny" >"$T_TMP/info" 2>&1
check_eq "info tiny: exit status" "$?" "0"
for want in "layers        2" "embedding     64" "heads         4" "kv heads      2" \
    "feed-forward  128" "context       256" "vocab         512" \
    "tokenizer     gpt2, pre 'smollm', 512 tokens, 253 merges" \
    "special       bos 1 '<|im_start|>', eos 2 '<|im_end|>', unk 0 '<|endoftext|>', pad 2 '<|im_end|>', add_bos false" \
    "eog           0 '<|endoftext|>', 2 '<|im_end|>'"; do
    check "info tiny: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "info tiny: 20 f32 tensors" grep -qE '^f32 +20 ' "$T_TMP/info"

# SmolLM2's shape: 272 tensors, the real file's element count, tied output.
smol="$T_TMP/smol.gguf"
"$FP4SERVE" synth --preset smollm2-135m --type f16 -o "$smol"
check_eq "synth smollm2-135m: exit status" "$?" "0"
"$FP4SERVE" info --all "$smol" >"$T_TMP/info" 2>&1
for want in "layers        30" "embedding     576" "heads         9" "kv heads      3" \
    "feed-forward  1536" "rope base     100000" "vocab         49152"; do
    check "info smollm2: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "smollm2: 134515008 elements in 272 tensors" grep -qE '^total +272 +134515008 ' "$T_TMP/info"
check "smollm2: tied output (no output.weight)" sh -c "! grep -q ' output.weight ' '$T_TMP/info'"
check "smollm2: token_embd f16 [576, 49152]" grep -qE '^  token_embd.weight +f16 +\[576, 49152\]' "$T_TMP/info"

# Quantized types: the 7 matrices of each layer in the type, a Q8_0
# embedding, F32 norms, and for NVFP4 one F32 ".scale" per matrix.
for t in q4_1 q8_0 mxfp4 nvfp4; do
    "$FP4SERVE" synth --preset tiny --type $t --seed 7 -o "$T_TMP/tiny-$t.gguf"
    check_eq "synth tiny $t: exit status" "$?" "0"
    "$FP4SERVE" info "$T_TMP/tiny-$t.gguf" >"$T_TMP/info" 2>&1
    if [ $t = q8_0 ]; then
        check "tiny q8_0: 14 matrices + embedding" grep -qE '^q8_0 +15 +106496 ' "$T_TMP/info"
    else
        check "tiny $t: 14 $t matrices" grep -qE "^$t +14 +73728 " "$T_TMP/info"
        check "tiny $t: q8_0 embedding" grep -qE '^q8_0 +1 +32768 ' "$T_TMP/info"
    fi
done
check "tiny nvfp4: 6 norms + 14 scales in f32" grep -qE '^f32 +19 +334 ' "$T_TMP/info"
"$FP4SERVE" synth --preset tiny --type nvfp4 --seed 7 -o "$T_TMP/tiny-nvfp4b.gguf"
check "nvfp4: byte-identical again" cmp -s "$T_TMP/tiny-nvfp4.gguf" "$T_TMP/tiny-nvfp4b.gguf"

# --arch: qwen3 (per-head Q/K norms, head dim 64 written as key_length)
# and qwen3moe (F32 router, 3-D expert tensors; NVFP4 with one scale per expert).
"$FP4SERVE" synth --arch qwen3 --type q8_0 -o "$T_TMP/q3.gguf"
check_eq "synth --arch qwen3: exit status" "$?" "0"
"$FP4SERVE" info --all "$T_TMP/q3.gguf" >"$T_TMP/info" 2>&1
for want in "architecture  qwen3" "layers        4" "head dim      64" "vocab         2048"; do
    check "info qwen3: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "qwen3: attn_q_norm f32 [64]" grep -qE '^  blk\.3\.attn_q_norm\.weight +f32 +\[64\]' "$T_TMP/info"
check "qwen3: attn_q q8_0 [128, 256]" grep -qE '^  blk\.0\.attn_q\.weight +q8_0 +\[128, 256\]' "$T_TMP/info"
"$FP4SERVE" synth --arch qwen3moe --type nvfp4 -o "$T_TMP/q3m.gguf"
check_eq "synth --arch qwen3moe: exit status" "$?" "0"
"$FP4SERVE" info --all "$T_TMP/q3m.gguf" >"$T_TMP/info" 2>&1
for want in "architecture  qwen3moe" "experts       16" "experts used  4" "expert ff     64"; do
    check "info qwen3moe: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "qwen3moe: router f32 [128, 16]" grep -qE '^  blk\.0\.ffn_gate_inp\.weight +f32 +\[128, 16\]' "$T_TMP/info"
check "qwen3moe: experts nvfp4 [64, 128, 16]" grep -qE '^  blk\.0\.ffn_down_exps\.weight +nvfp4 +\[64, 128, 16\]' "$T_TMP/info"
check "qwen3moe: one scale per expert" grep -qE '^  blk\.0\.ffn_up_exps\.scale +f32 +\[16\]' "$T_TMP/info"
check "qwen3moe: no dense ffn" sh -c "! grep -q 'ffn_gate\.weight' '$T_TMP/info'"
"$FP4SERVE" synth --arch gpt-oss --type mxfp4 -o "$T_TMP/oss.gguf"
check_eq "synth --arch gpt-oss: exit status" "$?" "0"
"$FP4SERVE" info --all "$T_TMP/oss.gguf" >"$T_TMP/info" 2>&1
for want in "architecture  gpt-oss" "experts       16" "window        20" "rope scale    8" \
    "rope orig ctx 512"; do
    check "info gpt-oss: '$want'" grep -qxF "$want" "$T_TMP/info"
done
check "gpt-oss: sinks f32 [4]" grep -qE '^  blk\.0\.attn_sinks\.weight +f32 +\[4\]' "$T_TMP/info"
check "gpt-oss: expert bias f32 [128, 16]" grep -qE '^  blk\.0\.ffn_up_exps\.bias +f32 +\[128, 16\]' "$T_TMP/info"
check "gpt-oss: experts mxfp4" grep -qE '^  blk\.0\.ffn_gate_exps\.weight +mxfp4 +\[128, 128, 16\]' "$T_TMP/info"
"$FP4SERVE" synth --arch gemma -o "$T_TMP/x.gguf" 2>"$T_TMP/err"
check_eq "unknown --arch: status" "$?" "2"
"$FP4SERVE" synth --arch qwen3 --preset tiny -o "$T_TMP/x.gguf" 2>"$T_TMP/err"
check_eq "--arch against the preset's: status" "$?" "2"
check_eq "--arch against the preset's: message" "$(cat "$T_TMP/err")" \
    "fp4serve: error: --arch qwen3 does not match preset 'tiny' (a llama model)"

# Refusals.
"$FP4SERVE" synth --preset huge -o "$T_TMP/x.gguf" 2>"$T_TMP/err"
check_eq "unknown preset: status" "$?" "2"
check_eq "unknown preset: message" "$(cat "$T_TMP/err")" \
    "fp4serve: error: unknown preset 'huge' (use tiny|smollm2-135m|llama-1b|qwen3-tiny|qwen3moe-tiny|qwen3moe-small|gpt-oss-tiny)"
"$FP4SERVE" synth --preset tiny --type q3_k -o "$T_TMP/x.gguf" 2>/dev/null
check_eq "unknown type: status" "$?" "2"
"$FP4SERVE" synth --preset tiny 2>/dev/null
check_eq "missing -o: status" "$?" "2"
"$FP4SERVE" synth --preset tiny -o "$T_TMP/no/such/dir/x.gguf" 2>"$T_TMP/err"
check_eq "unwritable path: status" "$?" "3"
check "no file left behind" sh -c "! ls '$T_TMP'/x.gguf* 2>/dev/null"

# Cross-check with gguf-py's reader (pip install gguf), when present.
if python3 -c 'import gguf' 2>/dev/null; then
    for f in "$tiny" "$smol" tests/cases/gguf/valid_rich.gguf; do
        "$FP4SERVE" info --all "$f" | sed -n 's/^  \([^ ]*\) \+\([a-z0-9_]*\) \+\[\(.*\)\] \([0-9]*\) bytes at \([0-9]*\)$/\1 \2 \3 \4 \5/p' \
            | tr -d ',' >"$T_TMP/ours"
        python3 - "$f" >"$T_TMP/theirs" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
for t in r.tensors:
    shape = " ".join(str(int(n)) for n in t.shape)
    print(t.name, t.tensor_type.name.lower(), shape, int(t.n_bytes), int(t.data_offset))
PY
        check "gguf-py agrees on $(basename "$f")" cmp -s "$T_TMP/ours" "$T_TMP/theirs"
        check "gguf-py read tensors of $(basename "$f")" test -s "$T_TMP/theirs"
    done
    python3 - "$tiny" <<'PY' >"$T_TMP/py"
import sys, gguf, numpy as np
r = gguf.GGUFReader(sys.argv[1])
emb = np.asarray(r.get_tensor(0).data, dtype=np.float32)
norm = np.asarray([t for t in r.tensors if t.name == "output_norm.weight"][0].data)
toks = r.fields["tokenizer.ggml.tokens"]
print(f"{emb.std():.3f} {norm.mean():.2f} {len(toks.data)}")
PY
    check_eq "gguf-py: embedding std, norm mean, token count" "$(cat "$T_TMP/py")" "0.020 1.00 512"
else
    echo "skip: python3 package 'gguf' not installed (pip install gguf) - gguf-py cross-check not run"
fi
# llama.cpp (pip package llama-cpp-python), when present, loads the tiny
# model, agrees on the vocabulary and round-trips text through it.
if python3 -c 'import llama_cpp' 2>/dev/null; then
    "$FP4SERVE" synth --preset tiny --type f16 -o "$T_TMP/tiny16.gguf"
    for f in "$tiny" "$T_TMP/tiny16.gguf"; do
        ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$f" <<'PY'
import sys
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, verbose=False)
texts = ["Hello world! 123", "the river ran past the mill\n", "  spaces,\ttabs; caf\u00e9 \u65e5\u672c"]
ok = all(m.detokenize(m.tokenize(t.encode(), add_bos=False, special=False)) == t.encode()
         for t in texts)
chat = m.tokenize(b"<|im_start|>user\nhi<|im_end|>", add_bos=False, special=True)
out = m(prompt="the river", max_tokens=4, temperature=0)
print(m.n_vocab(), m.token_bos(), m.token_eos(), ok, chat[0], chat[-1],
      out["usage"]["completion_tokens"])
PY
        check_eq "llama.cpp loads $(basename "$f"): vocab, bos, eos, round trip, specials, tokens" \
            "$(cat "$T_TMP/llama")" "512 1 2 True 1 2 4"
    done
    # Every type runs in llama.cpp, and its logits stay close to the F32
    # model's: NVFP4's ".scale" tensors are applied as llama.cpp applies them.
    ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$T_TMP" <<'PY'
import sys
import numpy as np
from llama_cpp import Llama
def last_logits(path):
    m = Llama(model_path=path, n_ctx=64, n_threads=1, verbose=False, logits_all=True)
    toks = m.tokenize(b"the river ran past the old mill", add_bos=False)
    m.eval(toks)
    return np.array(m.scores[len(toks) - 1])
ref = last_logits(sys.argv[1] + "/tiny.gguf")
for t, tol in [("q8_0", 0.03), ("q4_1", 0.2), ("mxfp4", 0.25), ("nvfp4", 0.2)]:
    got = last_logits(f"{sys.argv[1]}/tiny-{t}.gguf")
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    print(t, "ok" if rel < tol else f"off by {rel:.3f}")
PY
    for t in q8_0 q4_1 mxfp4 nvfp4; do
        check_eq "llama.cpp: $t logits near f32" "$(grep "^$t " "$T_TMP/llama")" "$t ok"
    done
else
    echo "skip: python3 package 'llama_cpp' not installed - llama.cpp load check not run"
fi
finish
