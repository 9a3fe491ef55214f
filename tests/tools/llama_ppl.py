# llama_ppl.py MODEL TEXT: llama.cpp's perplexity over the first 256 tokens
# of TEXT in non-overlapping windows of 128 (each starting empty), from the
# log-softmax of every window's logits: what `fp4serve eval --ctx 128
# --max-tokens 256` computes. Prints "PREDICTIONS PERPLEXITY". Run through
# tests/lib.sh's ref_py (llama-cpp-python from build/venv).
import sys

import numpy as np
from llama_cpp import Llama

m = Llama(model_path=sys.argv[1], n_ctx=128, n_batch=128, n_threads=2, verbose=False,
          logits_all=True)
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
