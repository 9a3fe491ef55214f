#!/usr/bin/env python3
"""Write the corrupt-GGUF corpus: one small file per way a GGUF file can be
broken, each derived from one valid base file, plus the base itself.

Usage: python3 tests/cases/gguf/make_cases.py [OUT_DIR]   (default: this folder)

The expected one-line error and exit status of `fp4serve info` for every
file are in cases.tsv, next to this script; tests/integration/gguf_corrupt.sh
checks them. The files are committed, so the tests need no Python; run this
again only to change the corpus (the output is byte-identical each time).
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_Q8_0, T_IQ2_XXS = 0, 8, 16


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def tinfo(name, ne, ttype, offset):
    return (s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
            + struct.pack("<IQ", ttype, offset))


def gguf(kvs, tensors, data=b"", version=3, align=32, n_tensors=None, n_kv=None,
         magic=b"GGUF"):
    """Assemble a file; counts default to the real ones."""
    head = magic + struct.pack("<IQQ", version,
                               len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tensors)
    body += b"\0" * ((align - len(body) % align) % align)
    return body + data


def pad(b, align=32):
    return b + b"\0" * ((align - len(b) % align) % align)


BASE_KVS = [
    kv("general.architecture", STR, s("llama")),
    kv("llama.block_count", U32, struct.pack("<I", 1)),
    kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 2) + s("a") + s("b")),
]
NORM = struct.pack("<8f", *[1.0] * 8)          # f32 [8]: 32 bytes
Q8 = bytes(range(68))                          # q8_0 [32, 2]: 2 blocks of 34 bytes
BASE_TENSORS = [tinfo("norm.weight", [8], T_F32, 0), tinfo("blk.0.w", [32, 2], T_Q8_0, 32)]
BASE_DATA = pad(NORM) + pad(Q8)


def base(**kw):
    return gguf(kw.pop("kvs", BASE_KVS), kw.pop("tensors", BASE_TENSORS),
                kw.pop("data", BASE_DATA), **kw)


def rich():
    """A valid file with every value type, nested arrays, alignment 64 and
    several tensor types, to seed the fuzzer past the easy checks."""
    kvs = [
        kv("general.architecture", STR, s("llama")),
        kv("general.alignment", U32, struct.pack("<I", 64)),
        kv("x.u8", U8, b"\xc8"), kv("x.i8", I8, b"\xfb"),
        kv("x.u16", U16, struct.pack("<H", 60000)), kv("x.i16", I16, struct.pack("<h", -300)),
        kv("x.i32", I32, struct.pack("<i", -7)), kv("x.f32", F32, struct.pack("<f", 1.5)),
        kv("x.bool", BOOL, b"\x01"), kv("x.u64", U64, struct.pack("<Q", 1 << 40)),
        kv("x.i64", I64, struct.pack("<q", -5)), kv("x.f64", F64, struct.pack("<d", 0.25)),
        kv("x.nested", ARR, struct.pack("<IQ", ARR, 2)
           + struct.pack("<IQ", STR, 2) + s("a") + s("bc")
           + struct.pack("<IQ", I32, 2) + struct.pack("<ii", 1, -1)),
        kv("x.bools", ARR, struct.pack("<IQ", BOOL, 3) + b"\x00\x01\x01"),
    ]
    tensors = [tinfo("a", [32], 3, 0), tinfo("b", [64, 2], 39, 64), tinfo("c", [64], 40, 128),
               tinfo("d", [4, 2, 1, 1], 1, 192)]
    data = pad(b"\x11" * 20, 64) + pad(b"\x22" * 34, 64) + pad(b"\x33" * 36, 64) + pad(b"\x44" * 16, 64)
    return gguf(kvs, tensors, data, align=64)


def cases():
    b = base()
    yield "valid", b
    yield "valid_rich", rich()
    yield "empty", b""
    yield "truncated_header", b[:10]
    yield "bad_magic", base(magic=b"GGML")
    yield "version_1", base(version=1)
    yield "version_4", base(version=4)
    yield "big_endian", b[:4] + struct.pack(">I", 3) + b[8:]
    yield "absurd_tensor_count", base(n_tensors=1 << 60)
    yield "absurd_kv_count", base(n_kv=0xFFFFFFFFFFFF)
    yield "string_past_end", gguf([kv("general.name", STR, struct.pack("<Q", 1 << 40) + b"x")], [])
    yield "key_past_end", b[:24] + struct.pack("<Q", 5000) + b[32:]
    yield "truncated_metadata", b[:60]
    yield "array_count_absurd", gguf(
        [kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 1 << 58) + s("a"))], [])
    yield "unknown_value_type", gguf([kv("general.x", 13, b"\0" * 8)], [])
    yield "unknown_array_type", gguf([kv("general.x", ARR, struct.pack("<IQ", 77, 1) + b"\0")], [])
    yield "bool_not_0_or_1", gguf([kv("tokenizer.ggml.add_bos_token", BOOL, b"\x02")], [])
    yield "nested_too_deep", gguf([kv("general.x", ARR, struct.pack("<IQ", ARR, 1) * 9
                                      + struct.pack("<IQ", U8, 0))], [])
    yield "duplicate_key", base(kvs=BASE_KVS + [BASE_KVS[1]])
    yield "alignment_not_power_of_two", base(
        kvs=BASE_KVS + [kv("general.alignment", U32, struct.pack("<I", 48))])
    yield "alignment_wrong_type", base(
        kvs=BASE_KVS + [kv("general.alignment", U64, struct.pack("<Q", 64))])
    yield "tensor_name_too_long", base(tensors=[tinfo("n" * 64, [8], T_F32, 0)])
    yield "too_many_dims", base(tensors=[tinfo("w", [8, 1, 1, 1, 1], T_F32, 0)])
    yield "negative_dim", base(tensors=[tinfo("w", [8, 1 << 63], T_F32, 0)])
    yield "element_count_overflow", base(tensors=[tinfo("w", [1 << 32, 1 << 32], T_F32, 0)])
    yield "duplicate_tensor", base(tensors=[tinfo("w", [8], T_F32, 0), tinfo("w", [8], T_F32, 32)])
    yield "unknown_tensor_type", base(tensors=[tinfo("w", [8], 99, 0)])
    # A type the engine does not compute with still parses (the loader refuses it).
    yield "iq2_xxs_tensor", base(tensors=[tinfo("w", [256], T_IQ2_XXS, 0)])
    yield "removed_tensor_type", base(tensors=[tinfo("w", [8], 4, 0)])
    yield "ne0_not_block_multiple", base(tensors=[tinfo("w", [33, 2], T_Q8_0, 0)])
    yield "offset_misaligned", base(tensors=[tinfo("w", [8], T_F32, 16)])
    yield "offset_past_end", base(tensors=[tinfo("w", [8], T_F32, 1 << 20)])
    yield "data_truncated", b[:len(b) - 40]
    yield "tensor_infos_truncated", b[:len(b) - len(BASE_DATA) - 8]
    infos_end = 24 + len(b"".join(BASE_KVS)) + len(b"".join(BASE_TENSORS))
    assert infos_end % 32, "the cut must fall before the padding"
    yield "data_section_missing", b[:infos_end]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, data in cases():
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
