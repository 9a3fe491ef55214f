#!/usr/bin/env python3
"""make_tokenizer_fixtures.py: reference token ids from llama.cpp for the
tokenizer unit test (tests/unit/engine_tokenizer.c).

What it does: loads MODEL's vocabulary with llama-cpp-python (vocab_only,
no weights) and, for every string in CASES below, records the ids that
llama.cpp's tokenizer gives with special-token parsing on and off, without
BOS (add_bos=False; llama.cpp adds none for the smollm pre-tokenizer anyway,
which the header line records), plus whether llama.cpp's own detokenizer
gives the string back.

Output (OUT, default stdout): JSON Lines. Line 1 is a header
  {"meta": {"tool", "llama_cpp_python", "llama_cpp_commit", "model",
            "model_sha256", "pre", "adds_bos", "command"}}
and every further line one case
  {"name": str, "text": str, "ids": [int], "ids_nospecial": [int],
   "ref_roundtrip": bool}
"text" is the exact string (JSON escapes, so any Unicode and control bytes
survive); all strings are valid UTF-8.

Command used for tests/fixtures/tokenizer/smollm2.jsonl:
  python3 tests/tools/make_tokenizer_fixtures.py \
      models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/tokenizer/smollm2.jsonl
with llama-cpp-python 0.3.36 (bundles llama.cpp 0c1e57098), built from
source: CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF" pip install llama-cpp-python

For tests/fixtures/tokenizer/synth-tiny.jsonl (the tokenizer of the
synthetic model, checked without any download):
  build/bin/fp4serve synth --preset tiny -o /tmp/tiny.gguf
  python3 tests/tools/make_tokenizer_fixtures.py /tmp/tiny.gguf \
      tests/fixtures/tokenizer/synth-tiny.jsonl

With --pre NAME it first writes a vocabulary-only copy of MODEL whose
tokenizer.ggml.pre is NAME (needs the `gguf` package) and uses that, which
checks our other pre-tokenizers against llama.cpp on the same vocabulary:
  python3 tests/tools/make_tokenizer_fixtures.py --pre gpt-2 \
      models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/tokenizer/smollm2-gpt2pre.jsonl
The unit test rebuilds the same vocabulary in memory (tok_new with the
GGUF's arrays and pre = NAME) to compare.

With --random N [--seed S] the cases are N random strings instead (drawn
from many scripts, digits, Unicode spaces and number forms, emoji
sequences, special-token texts and arbitrary code points), for
differential runs that are not committed:
  python3 tests/tools/make_tokenizer_fixtures.py --random 20000 \
      models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/tok-random.jsonl
  TOK_EXTRA_FIXTURE=/tmp/tok-random.jsonl build/tests/engine_tokenizer extra
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

LLAMA_CPP_COMMIT = "0c1e57098"  # from llama-cpp-python 0.3.36's CHANGELOG

PARAGRAPH_EN = (
    "The quick brown fox jumps over the lazy dog. Meanwhile, in a small village "
    "nestled between rolling hills, the townsfolk prepared for the annual harvest "
    "festival. Children ran through the streets, laughing and shouting, while their "
    "parents carried baskets of apples, pears, and freshly baked bread to the square. "
    "It's a tradition that's been kept for over 300 years -- since 1721, or so the "
    "records say. \"We'll never stop,\" said the mayor, smiling.\n\nLater that evening, "
    "lanterns were lit one by one, and the music began."
)
PARAGRAPH_TECH = (
    "In 2023, the model processed 1,234,567 requests at a median latency of 42.5 ms "
    "(p99: 187.3 ms). Throughput scaled as step_ms = a + b*N with a=40 and b=31; "
    "at N=64 that gives 40+31*64 = 2024 ms per step. See https://example.com/docs?v=2.1 "
    "for details, or run `make bench --batch 1,4,16,64`.\n\tNote: values are +/- 3.5%; "
    "IDs like 0xDEADBEEF and v1.2.3-rc4 must survive.\r\nEnd of report."
)
PARAGRAPH_MIXED = (
    "Le café coûte 3,50 € à Paris; en München kostet er 4 € — ça dépend. "
    "東京の人口は約1400万人です。北京是中国的首都，人口超过2000万。"
    "Москва — столица России. Αθήνα είναι η πρωτεύουσα. القاهرة هي عاصمة مصر. "
    "서울은 한국의 수도입니다. 🎉🎉 Done! ✅"
)

CASES = [
    ("known_vector", "Hello world! 123"),
    ("empty", ""),
    ("one_space", " "),
    ("two_spaces", "  "),
    ("leading_spaces", "   leading spaces"),
    ("trailing_spaces", "trailing spaces   "),
    ("space_runs", "a  b   c    d     e"),
    ("tabs", "\t tab\tseparated\t\tvalues\t"),
    ("newlines", "line1\nline2\n\nline4\n"),
    ("crlf", "windows\r\nline endings\r\n\r\n"),
    ("only_newlines", "\n\n\n"),
    ("space_newline_mix", " \n \n  \n\t\n"),
    ("cr_alone", "a\rb\r\r\n\nc"),
    ("digits", "1234567890"),
    ("long_number", "123456789012345678901234567890"),
    ("numbers_mixed", "3.14159 2.71828 -42 +7 1e-9 0x1F 1,000,000"),
    ("number_spacing", "a 1 b  2 c   3 d\t4"),
    ("years", "The year 2024 had 366 days and 8784 hours."),
    ("price", "Price: $19.99 (20% off!) or £5/€6."),
    ("contractions", "Hello, World! How's it going? I'm fine; you're great, they'll see, we've done, she'd go."),
    ("contractions_upper", "DON'T SHOUT'S IT'LL WE'VE"),
    ("apostrophes", "'s 's'  're've'm'll'd ''' rock'n'roll"),
    ("punct_runs", "!!!???...,,,;;;:::---___***"),
    ("keyboard", "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/"),
    ("email_url", "email@example.com https://example.org/path?q=1&r=2#frag"),
    ("paths", "C:\\Users\\name\\file.txt ~/dir/./x/../y"),
    ("accented", "café naïve résumé Zürich Ångström façade"),
    ("latin_ext", "Ünïcödé ÀÉÎÕÜ ß ø æ œ Łódź Čeština"),
    ("combining", "e\u0301 a\u0300 n\u0303 cafe\u0301"),
    ("chinese", "中文测试：你好，世界！"),
    ("japanese", "日本語のテキストです。カタカナとひらがな。"),
    ("korean", "한국어 텍스트입니다"),
    ("cyrillic", "Русский текст, ёжик."),
    ("greek", "Ελληνικά κείμενο"),
    ("arabic", "مرحبا بالعالم"),
    ("hebrew", "עברית שלום"),
    ("devanagari", "हिन्दी पाठ"),
    ("thai", "ไทย ภาษา"),
    ("emoji", "Emoji: 😀😃😄 👍🏽 ❤️"),
    ("emoji_zwj", "Family: 👨‍👩‍👧‍👦 flag 🇫🇷 rainbow 🏳️‍🌈"),
    ("skin_tone_alone", "🏽"),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u2009e"),
    ("nel", "\u0085 next line"),
    ("zero_width", "zero\u200bwidth\u200djoiner\ufeffbom"),
    ("math_symbols", "∑ x² ≤ ∞ √2 ≈ 1.414 ½ ¾ ①②③"),
    ("fullwidth_digits", "１２３ and ٠١٢٣ and ४२"),
    ("private_unassigned", "pua \ue000 \U000f0000 unassigned \u0378."),
    ("unicode15", "\n\n\n\n\U0001d2cb\r\r\r \U00011f04abc \U00031350x \U0001e4f1"),
    ("bytes_without_tokens", "a\x04b\x06c\x13\x14\x16\x1d \U00050000 \U00090000"),
    ("control_bytes", "\x00 nul \x01\x02 ctl \x7f del \x1b[0m"),
    ("mixed_script", "Hello世界123abc"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("repeat_char", "x" * 200),
    ("many_spaces", " " * 50 + "end"),
    ("tabs_spaces", "\t\t  \t x"),
    ("spaces_before_nl", "abc   \n  def"),
    ("code_python", "def foo(x):\n    return x ** 2  # square\n\nprint(foo(3))\n"),
    ("code_c", "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"),
    ("json", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}"),
    ("markdown", "# Title\n\n- item *bold* _it_ `code`\n\n```python\nprint(1)\n```\n"),
    ("html", "<div class=\"a\">&amp; &lt;tag&gt;</div>"),
    ("chatml_short", "<|im_start|>user\nHi<|im_end|>"),
    ("chatml_full", "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"),
    ("endoftext_alone", "<|endoftext|>"),
    ("adjacent_specials", "text<|im_end|>more<|im_end|><|im_end|>"),
    ("partial_special", "<|im_start <|im_end| |im_end|>"),
    ("special_case", "<|IM_START|> <|Im_End|>"),
    ("other_specials", "<repo_name>x<reponame>y<file_sep>z<filename>"),
    ("special_spaces", " <|im_start|> user <|im_end|> "),
    ("paragraph_en", PARAGRAPH_EN),
    ("paragraph_tech", PARAGRAPH_TECH),
    ("paragraph_mixed", PARAGRAPH_MIXED),
]


POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\x0b\x0c",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "'s't're've'm'll'd'S'T",
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýþÿßœŁłČčŠšŽž",
    "\u0300\u0301\u0302\u0308\u0327\u20dd\u093f\u0940",
    "中文字符测试你好世界日本語ひらがなカタカナ한국어텍스트",
    "مرحبابالعالمעבריתРусскийтекстΕλληνικάहिन्दीไทย",
    "😀😃👍🏽❤️👨‍👩‍👧‍👦🇫🇷🏳️‍🌈\u200d\ufe0f\U0001f3fd",
    "\u00a0\u1680\u2000\u2003\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u0085\u200b\ufeff",
    "²³¹¼½¾①②⑳ⅠⅡⅫ０１２٠١٢४२৩〇零",
    "\x00\x01\x1b\x7f\u0080\u009f\u00ad",
]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<reponame>", "<file_sep>"]


def random_cases(n, seed):
    import random

    rnd = random.Random(seed)
    cases = []
    for i in range(n):
        parts = []
        for _ in range(rnd.randint(1, 12)):
            r = rnd.random()
            if r < 0.05:
                parts.append(rnd.choice(SPECIALS))
            elif r < 0.15:  # any scalar value, unassigned ones included
                cp = rnd.choice([rnd.randint(0x20, 0xFFFF), rnd.randint(0x10000, 0x10FFFF)])
                if not 0xD800 <= cp <= 0xDFFF:
                    parts.append(chr(cp))
            else:
                pool = rnd.choice(POOLS)
                parts.append("".join(rnd.choice(pool) for _ in range(rnd.randint(1, 6))))
        cases.append((f"random_{i}", "".join(parts)))
    return cases


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def vocab_copy(model, pre, path):
    """Write a tensor-less copy of model's metadata with tokenizer.ggml.pre = pre."""
    import gguf

    reader = gguf.GGUFReader(model)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(path, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = pre if name == "tokenizer.ggml.pre" else field.contents()
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, vtype, sub_type=sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--pre", help="override tokenizer.ggml.pre in a vocabulary-only copy")
    ap.add_argument("--random", type=int, help="N random strings instead of the fixed cases")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    cases = random_cases(args.random, args.seed) if args.random else CASES

    import llama_cpp

    path = args.model
    tmp = None
    if args.pre:
        tmp = tempfile.NamedTemporaryFile(suffix=".gguf", delete=False)
        tmp.close()
        vocab_copy(args.model, args.pre, tmp.name)
        path = tmp.name
    llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    probe = b"Hello"
    adds_bos = llm.tokenize(probe, add_bos=True) != llm.tokenize(probe, add_bos=False)
    lines = [json.dumps({"meta": {
        "tool": "tests/tools/make_tokenizer_fixtures.py",
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "model": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "pre": args.pre or "(as in the file)",
        "adds_bos": adds_bos,
        "command": " ".join(["python3"] + sys.argv),
    }}, ensure_ascii=True)]
    names = set()
    for name, text in cases:
        assert name not in names, name
        names.add(name)
        raw = text.encode("utf-8")
        ids = llm.tokenize(raw, add_bos=False, special=True)
        ids_ns = llm.tokenize(raw, add_bos=False, special=False)
        back = llm.detokenize(ids, special=True)
        lines.append(json.dumps({"name": name, "text": text, "ids": ids,
                                 "ids_nospecial": ids_ns, "ref_roundtrip": back == raw},
                                ensure_ascii=True))
    if tmp:
        os.unlink(tmp.name)
    data = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(data)
        os.replace(args.out + ".tmp", args.out)
        print(f"{args.out}: {len(cases)} cases", file=sys.stderr)
    else:
        sys.stdout.write(data)


if __name__ == "__main__":
    main()
