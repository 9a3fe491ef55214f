# engine_qwen3: the qwen3 and qwen3moe architectures against llama.cpp
# (llama-cpp-python) on models from `fp4serve synth --arch`, in every
# weight type synth writes for them (f32, q8_0, and for the MoE's experts
# mxfp4 and nvfp4, ggml types 39 and 40), and in the files `fp4serve
# quantize` makes from the f32 MoE (".q" below: experts requantized as 3-D
# tensors, NVFP4 with one scale per expert). Per prompt (4 of them): the
# first step's logits agree within the type's tolerance, max |diff| over
# max |logit|: 1e-4 for f32 weights; 2% for quantized ones, whose 8-bit
# activations both engines round the same way, so most prompts agree to
# 1e-7, but an activation on a rounding boundary (reached through a
# different summation order upstream) moves one 8-bit step, which these
# deliberately sharp synthetic models amplify to about 1%. And 32 greedy
# tokens are equal; a divergence passes only at a near-tie (llama.cpp's
# top-2 margin at that step under 0.02 nats for f32, 0.25 for quantized
# weights), and its margin is printed. Then `fp4serve eval`'s perplexity
# over the first 256 tokens of the public-domain text (windows of 128)
# against llama.cpp's on the same windows, both with an f32 K/V cache
# (tests/tools/llama_ppl.py says why: with an f16 cache llama.cpp rounds Q
# and the softmax probabilities to f16 and fp4serve does not), within 1%
# for every type: qwen3 in f32, q8_0, mxfp4 and nvfp4, and each qwen3moe
# file above (measured: at most 0.4%, most under 0.1%). These random
# models are confidently wrong about English (perplexity ~1e7, 16 nats a
# token) and so sharp that one 8-bit activation rounding tipped by a
# different summation order moves later predictions, so the f16 roundings
# above move either engine's figure by up to 10% (README.md "MXFP4 and
# NVFP4"). Batch invariance is tests/unit/engine_moe.c.
. tests/lib.sh
need jq

if ! python3 -c 'import llama_cpp' 2>/dev/null; then
    skip "python3 package 'llama_cpp' not installed (make pydeps) - llama.cpp cross-check not run"
    finish
    exit 0
fi

set -- "the river ran past the old mill" "What does the engine do when the model is large?" \
    "Hello world" "The children would wait on the bridge and count"
N_PROMPTS=$#
for case in "qwen3 f32 1e-4 0.02" "qwen3 q8_0 0.02 0.25" "qwen3moe f32 1e-4 0.02" \
    "qwen3moe q8_0 0.02 0.25" "qwen3moe mxfp4 0.02 0.25" "qwen3moe nvfp4 0.02 0.25" \
    "qwen3moe mxfp4.q 0.02 0.25" "qwen3moe nvfp4.q 0.02 0.25"; do
    set -- $case "$@"
    arch=$1 type=$2 tol=$3 tie=$4
    shift 4
    model="$T_TMP/$arch-$type.gguf"
    case $type in
    *.q)
        "$FP4SERVE" quantize "$T_TMP/$arch-f32.gguf" "$model" --type "${type%.q}" >/dev/null 2>&1
        check_eq "quantize $arch f32 -> ${type%.q}: status" "$?" "0"
        ;;
    *)
        "$FP4SERVE" synth --arch "$arch" --type "$type" -o "$model" 2>/dev/null
        check_eq "synth --arch $arch --type $type: status" "$?" "0"
        ;;
    esac
    i=0
    for p in "$@"; do
        "$FP4SERVE" generate --model "$model" --prompt "$p" -n 32 --ignore-eos --kv f32 \
            --threads 2 --logits "$T_TMP/ours-$i.f32" 2>/dev/null | sed -n 's/^ids: //p' \
            >"$T_TMP/ours-$i.ids"
        i=$((i + 1))
    done
    ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$model" "$T_TMP" "$tol" "$tie" "$@" <<'PY'
import sys
import numpy as np
from llama_cpp import Llama
path, tmp, tol, tie = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
m = Llama(model_path=path, n_ctx=128, n_threads=2, verbose=False, logits_all=True,
          type_k=0, type_v=0)
for i, p in enumerate(sys.argv[5:]):
    ids = m.tokenize(p.encode(), add_bos=False, special=False)
    m.reset()
    m.eval(ids)
    n_vocab = m.n_vocab()
    ours = np.fromfile(f"{tmp}/ours-{i}.f32", dtype=np.float32)
    theirs = np.array(m.scores[len(ids) - 1][:n_vocab], dtype=np.float32)
    rel = float(np.abs(theirs - ours).max() / np.abs(ours).max())
    print(f"prompt {i} logits", "ok" if rel <= tol else "off", f"(rel {rel:.2e})")
    want = [int(t) for t in open(f"{tmp}/ours-{i}.ids").read().split()]
    got, verdict = [], "equal"
    for step in range(32):
        lg = np.array(m.scores[m.n_tokens - 1][:n_vocab])
        top = np.sort(lg)[-2:]
        t = int(lg.argmax())
        if step >= len(want) or t != want[step]:
            margin = float(top[1] - top[0])
            verdict = ("near-tie" if margin < tie else "diverged") + \
                f" at token {step} (llama.cpp margin {margin:.4f} nats)"
            break
        got.append(t)
        m.eval([t])
    print(f"prompt {i} greedy", "ok" if verdict == "equal" or verdict.startswith("near-tie")
          else "bad", f"({verdict})")
PY
    sed 's/^/    /' "$T_TMP/llama"
    i=0
    while [ $i -lt $N_PROMPTS ]; do
        check "$arch $type prompt $i: logits within $tol of llama.cpp's" \
            grep -q "^prompt $i logits ok" "$T_TMP/llama"
        check "$arch $type prompt $i: 32 greedy tokens as llama.cpp's" \
            grep -q "^prompt $i greedy ok" "$T_TMP/llama"
        i=$((i + 1))
    done
    check "$arch $type: our greedy ids written" test -s "$T_TMP/ours-0.ids"
done

# Perplexity, ours against llama.cpp's (log-softmax of every window's
# logits), f32 K/V on both sides.
text=tests/fixtures/text/pride-and-prejudice-ch1-5.txt
for type in mxfp4 nvfp4; do
    "$FP4SERVE" synth --arch qwen3 --type "$type" -o "$T_TMP/qwen3-$type.gguf" 2>/dev/null
    check_eq "synth --arch qwen3 --type $type: status" "$?" "0"
done
for f in qwen3-f32 qwen3-q8_0 qwen3-mxfp4 qwen3-nvfp4 qwen3moe-f32 qwen3moe-q8_0 qwen3moe-mxfp4 \
    qwen3moe-nvfp4 qwen3moe-mxfp4.q qwen3moe-nvfp4.q; do
    "$FP4SERVE" eval --model "$T_TMP/$f.gguf" --text "$text" --ctx 128 --max-tokens 256 \
        --kv f32 --threads 2 >"$T_TMP/eval" 2>/dev/null
    check_eq "$f: eval status" "$?" "0"
    ours=$(tail -n 1 "$T_TMP/eval" | jq -r .ppl)
    ref_py "$T_TMP/llama" "$T_TMP/llama.log" "$T_TMP/$f.gguf" "$text" f32 <tests/tools/llama_ppl.py
    read -r _ theirs <"$T_TMP/llama"
    echo "    $f: perplexity ours $ours, llama.cpp $theirs"
    check "$f: perplexity within 1% of llama.cpp's ($ours vs $theirs)" \
        within "$ours" "$theirs" 0.01 rel
done
finish
