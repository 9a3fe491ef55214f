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

# Refusals.
"$FP4SERVE" synth --preset huge -o "$T_TMP/x.gguf" 2>"$T_TMP/err"
check_eq "unknown preset: status" "$?" "2"
check_eq "unknown preset: message" "$(cat "$T_TMP/err")" \
    "fp4serve: error: unknown preset 'huge' (use tiny|smollm2-135m|llama-1b)"
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
        python3 - "$f" >"$T_TMP/llama" 2>"$T_TMP/llama.log" <<'PY'
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
else
    echo "skip: python3 package 'llama_cpp' not installed - llama.cpp load check not run"
fi
finish
