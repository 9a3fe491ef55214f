# llama_ppl.py MODEL TEXT KV: llama.cpp's perplexity over the first 256 tokens
# of TEXT in non-overlapping windows of 128 (each starting empty), from the
# log-softmax of every window's logits: what `fp4serve eval --ctx 128
# --max-tokens 256 --kv KV` computes. KV is the K/V cache type, f32 or f16.
# Compare like with like: with an f16 cache and no flash attention (the
# llama-cpp-python default), ggml's CPU matmul converts the other operand
# to the cache's type, so llama.cpp rounds Q and the softmax probabilities
# to f16 before the two attention products, where fp4serve keeps them f32
# and rounds only the stored K/V. With f32 on both sides the two compute the
# same operations up to summation order (README.md "MXFP4 and NVFP4", eval).
# Prints "PREDICTIONS PERPLEXITY". Run through tests/lib.sh's ref_py
# (llama-cpp-python from build/venv).
import sys

import numpy as np
from llama_cpp import Llama

kv = {"f32": 0, "f16": 1}[sys.argv[3]]  # ggml type ids
m = Llama(model_path=sys.argv[1], n_ctx=128, n_batch=128, n_threads=2, verbose=False,
          logits_all=True, type_k=kv, type_v=kv)
ids = m.tokenize(open(sys.argv[2], "rb").read(), add_bos=False, special=False)[:256]
nll, n = 0.0, 0
for w0 in range(0, len(ids), 128):
    win = ids[w0:w0 + 128]
    m.reset()
    m.eval(win)
    lg = np.array(m.scores[: len(win)], dtype=np.float64)
    mx = lg.max(axis=1)
    lse = mx + np.log(np.exp(lg - mx[:, None]).sum(axis=1))
    for i in range(len(win) - 1):
        nll += lse[i] - lg[i, win[i + 1]]
        n += 1
print(n, float(np.exp(nll / n)))
