#!/usr/bin/env python3
"""make_golden.py: golden outputs of llama.cpp (through llama-cpp-python) for
the engine's model tests: prompt ids, the first greedy tokens, and the first
step's logits, for a fixed set of prompts on any GGUF model.

Usage:  python3 tests/tools/make_golden.py MODEL OUT_DIR [--n-gen 32] [--threads 2]

For the tiny synthetic model (no download; vocabulary of 512):
  build/bin/fp4serve synth --preset tiny -o /tmp/tiny.gguf
  python3 tests/tools/make_golden.py /tmp/tiny.gguf tests/fixtures/golden/synth-tiny-f16

Command used for tests/fixtures/golden/smollm2-135m-q4_1/:
  python3 tests/tools/make_golden.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
      tests/fixtures/golden/smollm2-135m-q4_1
with llama-cpp-python 0.3.36 (bundles llama.cpp 0c1e57098), built from
source on x86-64 (AVX2/AVX-512 as the build machine has them):
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF" pip install llama-cpp-python

How llama.cpp is run (all recorded in the output's "meta"):
- 2 threads for prompt and generation, n_ctx 512 or the model's
  training context if smaller (prompts that do not fit with n_gen more
  tokens are left out and listed in meta.skipped), one batch per prompt
  (n_batch = n_ubatch = n_ctx), no flash attention, KV cache in F32
  (type_k = type_v = 0; llama.cpp's default would be F16), CPU only.
  The same settings give the same numbers on every run (checked: the
  script evaluates the first prompt twice and refuses to write on a
  difference).
- Prompt ids: llama.cpp's tokenizer with special tokens parsed and its
  default add_special, i.e. BOS is prepended only when the model asks
  (tokenizer.ggml.add_bos_token; false for SmolLM2, so no BOS there).
  "bos_added" in meta says what happened; the engine must do the same.
- Greedy: after the prompt, take the argmax of the logits (lowest id on a
  tie), feed it back, N_GEN times. End-of-generation tokens do NOT stop the
  run (like ignore_eos), so every prompt has exactly n_gen ids;
  "first_eog" is the index of the first EOG id in them, or -1.
- Note for comparisons: llama.cpp's CPU backend multiplies quantized
  weights with activations quantized to 8 bits (Q8_0/Q8_1 per 32 values,
  the weight type's vec_dot_type); an engine that keeps activations in
  float will differ by that rounding.

Output, in OUT_DIR (created):
  golden.json  {"meta": {...}, "prompts": [P, ...]} where each P is
    name, text             the prompt as a string (ChatML ones spelled out)
    prompt_ids             [int] what was evaluated
    greedy_ids             [int] n_gen ids chosen greedily
    greedy_text            their detokenized text (special tokens shown)
    first_eog              index into greedy_ids, or -1
    margins                [float] per greedy step, top-1 minus top-2 logit:
                           a step with a tiny margin may legitimately flip
                           under a different summation order
    logits                 the first step's logits (after the prompt):
      max_abs              max |logit|, the scale for relative errors
      top_ids, top_values  the 100 largest, descending
      sample_values        values at meta.sample_ids (a fixed random
                           subset of the vocabulary, the same for every
                           prompt; all ids when the vocabulary is small)
      full_file            name of a raw little-endian float32 file with
                           all n_vocab logits, or null (only prompt 0 has
                           one for large vocabularies; every prompt for
                           vocabularies up to 4096)
  logits-p<i>.f32      the files named by full_file
Floats are float32 values written with 9 significant digits (exact).
Suggested check: max_i |ours_i - ref_i| / max_abs <= 1e-2 over the full
file, top_ids and sample_ids; greedy ids identical.
"""
import argparse
import hashlib
import json
import os
import sys

LLAMA_CPP_COMMIT = "0c1e57098"  # from llama-cpp-python 0.3.36's CHANGELOG
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
N_TOP = 100
N_SAMPLE = 1000
SAMPLE_SEED = 1234
SMALL_VOCAB = 4096


def chatml(user, system=SYSTEM):
    """The SmolLM2 chat template's output for one user turn, ready to answer."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


LONG_USER = (
    "Here are some notes from a meeting. The team discussed the release schedule for "
    "the next quarter, the budget for new hardware, and the hiring plan. Alice said the "
    "release should slip by two weeks because the test suite is not finished. Bob argued "
    "that the hardware budget must be approved before the end of the month, or the "
    "vendor will raise prices by 15%. Carol proposed hiring two engineers in March and "
    "one in June. Everyone agreed to meet again on Friday at 10:00.\n\n"
    "Summarize these notes in three bullet points."
)

# Chosen among candidates for wide top-1/top-2 margins over all greedy steps
# (0.07 at the least, chat_long; most are above 0.1), so that a correct
# engine with a different summation order still picks the same tokens.
PROMPTS = [
    ("plain_primes", "The first ten prime numbers are"),
    ("plain_count", "1, 2, 3, 4, 5,"),
    ("plain_planets", "Here is a list of the planets in the solar system:\n1."),
    ("chat_math", chatml("What is 2+2?")),
    ("chat_hello", chatml("Hello! Who are you?")),
    ("chat_count", chatml("Count from 1 to 20.")),
    ("chat_nosys", "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n"),
    ("chat_long", chatml(LONG_USER)),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def f32(x):
    """A float32 as the shortest text that reads back to the same float32."""
    return float(f"{float(x):.9g}")


def write_atomic(path, data, mode="w"):
    with open(path + ".tmp", mode) as f:
        f.write(data)
    os.replace(path + ".tmp", path)


class Reference:
    def __init__(self, model, threads, n_ctx):
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(
            model, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=threads,
            n_threads_batch=threads, seed=0, type_k=0, type_v=0, flash_attn=False,
            n_gpu_layers=0, verbose=False)
        self.n_vocab = self.llm.n_vocab()
        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.eog = {i for i in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)}

    def logits(self):
        import numpy as np

        ptr = self.lc.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float32).copy()

    def run(self, ids, n_gen):
        """Evaluate ids, then n_gen greedy steps: (first logits, greedy ids, margins)."""
        import numpy as np

        self.llm.reset()
        self.llm._ctx.kv_cache_clear()
        self.llm.eval(ids)
        first = self.logits()
        logits = first
        out, margins = [], []
        for _ in range(n_gen):
            tok = int(np.argmax(logits))  # lowest id among equal maxima
            top2 = np.partition(logits, -2)[-2:]
            margins.append(f32(top2[1] - top2[0]))
            out.append(tok)
            self.llm.eval([tok])
            logits = self.logits()
        return first, out, margins


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=512)
    args = ap.parse_args()

    import numpy as np
    import llama_cpp

    ref = Reference(args.model, args.threads, args.n_ctx)
    n_ctx_train = llama_cpp.llama_model_n_ctx_train(ref.llm.model)
    if 0 < n_ctx_train < args.n_ctx:  # stay inside what the model was made for
        args.n_ctx = n_ctx_train
        ref = Reference(args.model, args.threads, args.n_ctx)
    n_vocab = ref.n_vocab
    rng = np.random.RandomState(SAMPLE_SEED)
    if n_vocab <= N_SAMPLE:
        sample_ids = list(range(n_vocab))
    else:
        sample_ids = sorted(int(i) for i in rng.choice(n_vocab, N_SAMPLE, replace=False))

    with_bos = ref.llm.tokenize(b"x", add_bos=True, special=True)
    bos_added = len(with_bos) > len(ref.llm.tokenize(b"x", add_bos=False, special=True))
    os.makedirs(args.out_dir, exist_ok=True)
    prompts, skipped = [], []
    for name, text in PROMPTS:
        ids = ref.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        if len(ids) + args.n_gen > args.n_ctx:
            print(f"{name}: {len(ids)} prompt ids + {args.n_gen} do not fit n_ctx "
                  f"{args.n_ctx}, left out", file=sys.stderr)
            skipped.append(name)
            continue
        i = len(prompts)
        first, greedy, margins = ref.run(ids, args.n_gen)
        if i == 0:  # determinism check: the same run again must match bit for bit
            first2, greedy2, _ = ref.run(ids, args.n_gen)
            if greedy2 != greedy or not np.array_equal(first, first2):
                sys.exit("llama.cpp is not deterministic with these settings; not writing")
        top = np.argsort(-first, kind="stable")[:N_TOP]
        full_file = None
        if i == 0 or n_vocab <= SMALL_VOCAB:
            full_file = f"logits-p{i}.f32"
            write_atomic(os.path.join(args.out_dir, full_file),
                         first.astype("<f4").tobytes(), "wb")
        eogs = [k for k, t in enumerate(greedy) if t in ref.eog]
        prompts.append({
            "name": name,
            "text": text,
            "prompt_ids": ids,
            "greedy_ids": greedy,
            "greedy_text": ref.llm.detokenize(greedy, special=True).decode("utf-8", "replace"),
            "first_eog": eogs[0] if eogs else -1,
            "margins": margins,
            "logits": {
                "max_abs": f32(np.max(np.abs(first))),
                "top_ids": [int(t) for t in top],
                "top_values": [f32(first[t]) for t in top],
                "sample_values": [f32(first[t]) for t in sample_ids],
                "full_file": full_file,
            },
        })
        print(f"{name}: {len(ids)} prompt ids, greedy {greedy[:8]}..., "
              f"min margin {min(margins):.4f}", file=sys.stderr)

    meta = {
        "tool": "tests/tools/make_golden.py",
        "command": " ".join(["python3"] + sys.argv),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "model": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "n_vocab": n_vocab,
        "eog_ids": sorted(ref.eog),
        "bos_added": bos_added,
        "n_gen": args.n_gen,
        "threads": args.threads,
        "n_ctx": args.n_ctx,
        "n_ctx_train": n_ctx_train,
        "skipped": skipped,
        "n_batch": args.n_ctx,
        "kv_cache_type": "f32",
        "flash_attn": False,
        "greedy": "argmax, lowest id on ties, EOG does not stop",
        "sample_seed": SAMPLE_SEED,
        "sample_ids": sample_ids,
    }
    doc = json.dumps({"meta": meta, "prompts": prompts}, ensure_ascii=True, indent=1)
    write_atomic(os.path.join(args.out_dir, "golden.json"), doc + "\n")
    print(f"{args.out_dir}: {len(prompts)} prompts", file=sys.stderr)


if __name__ == "__main__":
    main()
