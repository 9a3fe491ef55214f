#!/usr/bin/env python3
"""tokenizer_check.py: compare fp4serve's /tokenize and /detokenize with a
fixture of llama.cpp's ids and, when the `tokenizers` package imports, with
the Hugging Face files that `fp4serve export-tokenizer` wrote.

Usage: tokenizer_check.py URL FIXTURE.jsonl [EXPORT_DIR] [--random N --seed S]

For every fixture case (tests/fixtures/tokenizer/*.jsonl, see
make_tokenizer_fixtures.py):
  - the server's /tokenize ids equal the fixture's (llama.cpp's) ids;
  - /detokenize of those ids gives the text back when llama.cpp's did;
  - with EXPORT_DIR: tokenizers.Tokenizer.from_file(tokenizer.json) gives
    the server's ids (with add_special_tokens, as /tokenize's default), and
    with encode_special_tokens the fixture's ids_nospecial; its decode
    equals /detokenize.
With --gpt2pre FIXTURE (SmolLM2's vocabulary under the gpt-2
pre-tokenizer, smollm2-gpt2pre.jsonl): the export minus its first Split
(what export-tokenizer writes for pre "gpt-2": the same chain without the
digit split, tests/unit/engine_export.c) gives that fixture's ids.
With --random N, N seeded random strings (many scripts, digits, Unicode
spaces, control bytes, bytes without tokens, special-token texts, emoji)
are compared between the server and the export as well. When
`transformers` imports too, its AutoTokenizer over EXPORT_DIR (which reads
tokenizer_config.json) must give the server's ids as well.
Prints one "ok: ..." or "FAIL: ..." line per comparison group, a
"skip: ..." line when `tokenizers` does not import, and exits 1 on a
failure. Standard library only, apart from `tokenizers`.
"""
import argparse
import json
import random
import sys
import urllib.request


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


PIECES = [
    "the", " quick", "Brown", " fox", "'s", "'ll", "'RE", "don't", "  ", "   ", "\t", "\n", "\n\n",
    "\r\n", " ", "0", "12", "345", "3.14", "1,000", "x2", "٣٤", "½", "Ⅻ", "²",
    "é", "naïve", "Ünïcödé", "東京", "北京是", "Москва", "Αθήνα", "القاهرة", "서울", "ไทย", "हिन्दी",
    "🎉", "👍🏽", "👨‍👩‍👧", "✅", "\u00a0", "\u2009", "\u3000", "\u0085", "\u200b", "\ufeff",
    "\x04", "\x06", "\x13", "\x00", "\x7f", "\U00050000", "\U000F1234", "ñ", "\u0144",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "im_end|>", "<repo_name>",
    "!!", "?!", "...", "---", "==>", "#include", "{\"a\": [1, 2]}", "http://x.y/z?q=1",
    "`code`", "$$", "@@", "\\n", "\u02bc", "’s", "'", " '", "a'b",
]


def random_texts(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        parts = []
        for _ in range(k):
            if rng.random() < 0.15:
                parts.append(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                             rng.randint(0x3000, 0xd7ff), rng.randint(0xe000, 0xfffd),
                                             rng.randint(0x10000, 0x10ffff)])))
            else:
                parts.append(rng.choice(PIECES))
        out.append("".join(parts))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("fixture")
    ap.add_argument("export", nargs="?")
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gpt2pre")
    a = ap.parse_args()
    cases = [json.loads(l) for l in open(a.fixture, encoding="utf-8") if l.strip()]
    cases = [c for c in cases if "meta" not in c]
    failed = False

    def report(name, bad, n):
        nonlocal failed
        if bad:
            failed = True
            print(f"FAIL: {name}: {len(bad)} of {n} differ, first: {bad[0]}")
        else:
            print(f"ok: {name} ({n} cases)")

    srv = {}
    bad = []
    for c in cases:
        got = post(a.url, "/tokenize", {"prompt": c["text"]})
        srv[c["text"]] = got["tokens"]
        if got["tokens"] != c["ids"] or got["count"] != len(c["ids"]):
            bad.append((c["name"], got["tokens"][:16], c["ids"][:16]))
    report("/tokenize = llama.cpp's ids", bad, len(cases))
    bad = []
    n = 0
    for c in cases:
        if not c["ref_roundtrip"]:
            continue
        n += 1
        got = post(a.url, "/detokenize", {"tokens": c["ids"]})["prompt"]
        if got != c["text"]:
            bad.append((c["name"], got[:40], c["text"][:40]))
    report("/detokenize gives the text back", bad, n)

    if not a.export:
        sys.exit(1 if failed else 0)
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"skip: the exported tokenizer was not loaded: python package 'tokenizers' does not "
              f"import ({e}; make pydeps installs it)")
        sys.exit(1 if failed else 0)
    tok = Tokenizer.from_file(a.export + "/tokenizer.json")
    bad = []
    bad_ns = []
    bad_dec = []
    for c in cases:
        ids = tok.encode(c["text"]).ids
        if ids != srv[c["text"]]:
            bad.append((c["name"], ids[:16], srv[c["text"]][:16]))
        tok.encode_special_tokens = True
        ids_ns = tok.encode(c["text"]).ids
        tok.encode_special_tokens = False
        if ids_ns != c["ids_nospecial"]:
            bad_ns.append((c["name"], ids_ns[:16], c["ids_nospecial"][:16]))
        dec = tok.decode(srv[c["text"]], skip_special_tokens=False)
        want = post(a.url, "/detokenize", {"tokens": srv[c["text"]]})["prompt"]
        if dec != want:
            bad_dec.append((c["name"], dec[:40], want[:40]))
    report("export: tokenizers' ids = /tokenize's", bad, len(cases))
    report("export: ids without special-token parsing = llama.cpp's", bad_ns, len(cases))
    report("export: tokenizers' decode = /detokenize", bad_dec, len(cases))
    if a.random:
        bad = []
        for t in random_texts(a.random, a.seed):
            want = post(a.url, "/tokenize", {"prompt": t})["tokens"]
            ids = tok.encode(t).ids
            if ids != want:
                bad.append((t[:40], ids[:16], want[:16]))
        report(f"export: tokenizers' ids = /tokenize's on random text (seed {a.seed})", bad,
               a.random)
    try:  # optional: what vLLM's benchmark and most clients load
        from transformers import AutoTokenizer
    except Exception as e:
        print(f"skip: transformers' AutoTokenizer not tried: {e.__class__.__name__}: {e}")
    else:
        at = AutoTokenizer.from_pretrained(a.export)
        bad = [(c["name"], at(c["text"])["input_ids"][:16], srv[c["text"]][:16]) for c in cases
               if at(c["text"])["input_ids"] != srv[c["text"]]]
        report("export: transformers' AutoTokenizer ids = /tokenize's", bad, len(cases))
    if a.gpt2pre:
        j = json.load(open(a.export + "/tokenizer.json", encoding="utf-8"))
        j["pre_tokenizer"]["pretokenizers"].pop(0)
        tok2 = Tokenizer.from_str(json.dumps(j))
        cases2 = [json.loads(l) for l in open(a.gpt2pre, encoding="utf-8") if l.strip()]
        cases2 = [c for c in cases2 if "meta" not in c]
        bad = [(c["name"], tok2.encode(c["text"]).ids[:16], c["ids"][:16]) for c in cases2
               if tok2.encode(c["text"]).ids != c["ids"]]
        report("export, gpt-2 pre-tokenizer chain: llama.cpp's ids", bad, len(cases2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
