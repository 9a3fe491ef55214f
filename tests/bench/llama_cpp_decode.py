#!/usr/bin/env python3
"""llama_cpp_decode.py: single-stream greedy decode speed of llama.cpp (through
llama-cpp-python) on a GGUF file, for side-by-side comparison with
`fp4serve bench --batch 1` in tests/bench/bench_engine.sh.

Usage: llama_cpp_decode.py MODEL [--threads T] [--prompt-len N] [--gen N] [--seed S]

It feeds a prompt of N pseudo-random token ids (one llama_decode), then
decodes --gen tokens one per llama_decode call, each the argmax of the last
logits, and prints one line:
  llama.cpp: PP=128 TG=128 threads=2 prefill 345.6 tok/s decode 136.9 tok/s
Exit status 3 when llama_cpp is not installed (the bench script skips it).
"""
import argparse
import random
import sys
import time

try:
    import llama_cpp
except ImportError:
    print("llama.cpp: skipped (llama_cpp is not installed)")
    sys.exit(3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.prompt_len + a.gen + 16,
                          n_batch=max(512, a.prompt_len), n_threads=a.threads,
                          n_threads_batch=a.threads, logits_all=False, verbose=False)
    ctx = llm.ctx
    n_vocab = llm.n_vocab()
    rng = random.Random(a.seed)
    prompt = [rng.randrange(100, n_vocab) for _ in range(a.prompt_len)]

    def decode(tokens):
        arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        batch = llama_cpp.llama_batch_get_one(arr, len(tokens))
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc != 0:
            raise SystemExit(f"llama_decode failed: {rc}")
        logits = llama_cpp.llama_get_logits_ith(ctx, -1)
        best, best_v = 0, logits[0]
        for i in range(1, n_vocab):  # greedy, like fp4serve bench
            if logits[i] > best_v:
                best, best_v = i, logits[i]
        return best

    t0 = time.perf_counter()
    tok = decode(prompt)
    t1 = time.perf_counter()
    # The argmax in Python costs ~5 ms a token; time it apart and subtract.
    argmax_s = 0.0
    t_dec = 0.0
    for _ in range(a.gen):
        arr = (llama_cpp.llama_token * 1)(tok)
        s0 = time.perf_counter()
        rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, 1))
        s1 = time.perf_counter()
        if rc != 0:
            raise SystemExit(f"llama_decode failed: {rc}")
        t_dec += s1 - s0
        logits = llama_cpp.llama_get_logits_ith(ctx, -1)
        s2 = time.perf_counter()
        tok = max(range(n_vocab), key=logits.__getitem__)
        argmax_s += time.perf_counter() - s2
    print(f"llama.cpp: PP={a.prompt_len} TG={a.gen} threads={a.threads} "
          f"prefill {a.prompt_len / (t1 - t0):.1f} tok/s decode {a.gen / t_dec:.1f} tok/s "
          f"(llama_decode calls only; python argmax excluded)")


if __name__ == "__main__":
    main()
