/*
 * Unit tests for engine/format/gguf: the reader on hand-built buffers (every value
 * type, nested arrays, alignment, widening getters, every truncation of a
 * valid file), its refusals with their codes, and writer round trips.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "fp4.h"
#include "test.h"
#include "xalloc.h"

#include "format/gguf.h"

/* ---- a tiny encoder for hand-built files ---- */

static void b_u8(struct buf *b, uint8_t v)
{
    buf_append(b, &v, 1);
}
static void b_u16(struct buf *b, uint16_t v)
{
    b_u8(b, (uint8_t)v);
    b_u8(b, (uint8_t)(v >> 8));
}
static void b_u32(struct buf *b, uint32_t v)
{
    b_u16(b, (uint16_t)v);
    b_u16(b, (uint16_t)(v >> 16));
}
static void b_u64(struct buf *b, uint64_t v)
{
    b_u32(b, (uint32_t)v);
    b_u32(b, (uint32_t)(v >> 32));
}
static void b_f32(struct buf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    b_u32(b, u);
}
static void b_f64(struct buf *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    b_u64(b, u);
}
static void b_str(struct buf *b, const char *s)
{
    b_u64(b, strlen(s));
    buf_puts(b, s);
}
static void b_header(struct buf *b, uint64_t n_tensors, uint64_t n_kv)
{
    b_u32(b, GGUF_MAGIC);
    b_u32(b, 3);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_key(struct buf *b, const char *k, uint32_t type)
{
    b_str(b, k);
    b_u32(b, type);
}
static void b_pad(struct buf *b, uint32_t a)
{
    while (b->len % a)
        b_u8(b, 0);
}
static void b_tensor(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                     uint32_t type, uint64_t offset)
{
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        b_u64(b, ne[i]);
    b_u32(b, type);
    b_u64(b, offset);
}

static int parse(struct buf *b, struct gguf_file *f, struct err *e)
{
    err_init(e);
    return gguf_parse(b->data, b->len, f, e);
}

/* ---- value types and getters ---- */

static void every_scalar(struct buf *b)
{
    buf_init(b, 1 << 20);
    b_header(b, 0, 12);
    b_key(b, "a.u8", GGUF_T_U8), b_u8(b, 200);
    b_key(b, "a.i8", GGUF_T_I8), b_u8(b, (uint8_t)-5);
    b_key(b, "a.u16", GGUF_T_U16), b_u16(b, 60000);
    b_key(b, "a.i16", GGUF_T_I16), b_u16(b, (uint16_t)-300);
    b_key(b, "a.u32", GGUF_T_U32), b_u32(b, 4000000000u);
    b_key(b, "a.i32", GGUF_T_I32), b_u32(b, (uint32_t)-7);
    b_key(b, "a.f32", GGUF_T_F32), b_f32(b, 1.5f);
    b_key(b, "a.bool", GGUF_T_BOOL), b_u8(b, 1);
    b_key(b, "a.str", GGUF_T_STR), b_str(b, "hello");
    b_key(b, "a.u64", GGUF_T_U64), b_u64(b, 0xfedcba9876543210ull);
    b_key(b, "a.i64", GGUF_T_I64), b_u64(b, (uint64_t)-1234567890123ll);
    b_key(b, "a.f64", GGUF_T_F64), b_f64(b, -2.25);
}

TEST(every_scalar_type_parses_with_its_value)
{
    struct buf b;
    struct gguf_file f;
    struct err e;
    every_scalar(&b);
    CHECK_INT(parse(&b, &f, &e), 0);
    CHECK_INT(f.n_kv, 12);
    CHECK_INT(f.n_tensors, 0);
    CHECK_INT(f.alignment, 32);
    uint64_t u;
    int64_t i;
    double d;
    bool v;
    struct gguf_str s;
    CHECK(gguf_get_u64(&f, "a.u8", &u) == 0 && u == 200);
    CHECK(gguf_get_i64(&f, "a.i8", &i) == 0 && i == -5);
    CHECK(gguf_get_u64(&f, "a.u16", &u) == 0 && u == 60000);
    CHECK(gguf_get_i64(&f, "a.i16", &i) == 0 && i == -300);
    CHECK(gguf_get_u64(&f, "a.u32", &u) == 0 && u == 4000000000u);
    CHECK(gguf_get_i64(&f, "a.i32", &i) == 0 && i == -7);
    CHECK(gguf_get_f64(&f, "a.f32", &d) == 0 && d == 1.5);
    CHECK(gguf_get_bool(&f, "a.bool", &v) == 0 && v);
    CHECK(gguf_get_str(&f, "a.str", &s) == 0 && gguf_str_eq(s, "hello"));
    CHECK(gguf_get_u64(&f, "a.u64", &u) == 0 && u == 0xfedcba9876543210ull);
    CHECK(gguf_get_i64(&f, "a.i64", &i) == 0 && i == -1234567890123ll);
    CHECK(gguf_get_f64(&f, "a.f64", &d) == 0 && d == -2.25);
    const struct gguf_kv *kv = gguf_find_kv(&f, "a.str");
    CHECK(kv && kv->type == GGUF_T_STR && kv->value_bytes == 13);
    CHECK_STR(gguf_vtype_name(GGUF_T_F64), "f64");
    gguf_close(&f);
    buf_release(&b);
}

TEST(getters_widen_integers_and_refuse_what_does_not_fit)
{
    struct buf b;
    struct gguf_file f;
    struct err e;
    every_scalar(&b);
    CHECK_INT(parse(&b, &f, &e), 0);
    uint64_t u = 99;
    int64_t i = 99;
    double d = 0;
    bool v;
    struct gguf_str s;
    CHECK(gguf_get_i64(&f, "a.u32", &i) == 0 && i == 4000000000ll); /* u32 -> i64 */
    CHECK(gguf_get_u64(&f, "a.i16", &u) == -1);                     /* negative -> u64 */
    CHECK(gguf_get_u64(&f, "a.i8", &u) == -1);
    CHECK(gguf_get_i64(&f, "a.u64", &i) == -1); /* above INT64_MAX */
    CHECK(gguf_get_f64(&f, "a.u32", &d) == 0 && d == 4000000000.0);
    CHECK(gguf_get_f64(&f, "a.i64", &d) == 0 && d == -1234567890123.0);
    CHECK(gguf_get_u64(&f, "a.f32", &u) == -1); /* floats are not integers */
    CHECK(gguf_get_u64(&f, "a.str", &u) == -1);
    CHECK(gguf_get_u64(&f, "a.bool", &u) == -1);
    CHECK(gguf_get_i64(&f, "a.bool", &i) == -1);
    CHECK(gguf_get_bool(&f, "a.u8", &v) == -1);
    CHECK(gguf_get_str(&f, "a.u8", &s) == -1);
    CHECK(gguf_get_u64(&f, "a.missing", &u) == -1);
    CHECK(gguf_find_kv(&f, "a.u") == NULL); /* exact names only */
    gguf_close(&f);
    buf_release(&b);
}

TEST(arrays_of_every_kind_including_arrays_of_arrays)
{
    struct buf b;
    struct gguf_file f;
    struct err e;
    buf_init(&b, 1 << 20);
    b_header(&b, 0, 6);
    b_key(&b, "t.i32", GGUF_T_ARR), b_u32(&b, GGUF_T_I32), b_u64(&b, 3);
    b_u32(&b, 1), b_u32(&b, (uint32_t)-2), b_u32(&b, 3);
    b_key(&b, "t.strs", GGUF_T_ARR), b_u32(&b, GGUF_T_STR), b_u64(&b, 3);
    b_str(&b, "a"), b_str(&b, ""), b_str(&b, "\xc4\xa0the");
    b_key(&b, "t.bools", GGUF_T_ARR), b_u32(&b, GGUF_T_BOOL), b_u64(&b, 2);
    b_u8(&b, 0), b_u8(&b, 1);
    /* [[1, 2], [], [3]] as u8, then [["x"], ["y", "zz"]] */
    b_key(&b, "t.nested", GGUF_T_ARR), b_u32(&b, GGUF_T_ARR), b_u64(&b, 3);
    b_u32(&b, GGUF_T_U8), b_u64(&b, 2), b_u8(&b, 1), b_u8(&b, 2);
    b_u32(&b, GGUF_T_U8), b_u64(&b, 0);
    b_u32(&b, GGUF_T_U8), b_u64(&b, 1), b_u8(&b, 3);
    b_key(&b, "t.nested_strs", GGUF_T_ARR), b_u32(&b, GGUF_T_ARR), b_u64(&b, 2);
    b_u32(&b, GGUF_T_STR), b_u64(&b, 1), b_str(&b, "x");
    b_u32(&b, GGUF_T_STR), b_u64(&b, 2), b_str(&b, "y"), b_str(&b, "zz");
    b_key(&b, "t.f32", GGUF_T_ARR), b_u32(&b, GGUF_T_F32), b_u64(&b, 2);
    b_f32(&b, 0.25f), b_f32(&b, -8.0f);
    CHECK_INT(parse(&b, &f, &e), 0);
    CHECK_INT(f.n_kv, 6);

    const struct gguf_kv *kv = gguf_find_kv(&f, "t.i32");
    int64_t i;
    double d;
    CHECK(kv && kv->arr_type == GGUF_T_I32 && kv->arr_n == 3 && kv->value_bytes == 12);
    CHECK(gguf_arr_i64(kv, 1, &i) == 0 && i == -2);
    CHECK(gguf_arr_f64(kv, 2, &d) == 0 && d == 3.0);
    CHECK(gguf_arr_i64(kv, 3, &i) == -1); /* out of range */

    kv = gguf_find_kv(&f, "t.strs");
    struct gguf_str s[3];
    CHECK(kv && gguf_arr_strs(kv, s) == 0);
    CHECK(gguf_str_eq(s[0], "a") && gguf_str_eq(s[1], "") && gguf_str_eq(s[2], "\xc4\xa0the"));
    CHECK(gguf_arr_i64(kv, 0, &i) == -1); /* not numeric */

    kv = gguf_find_kv(&f, "t.bools");
    CHECK(kv && gguf_arr_i64(kv, 1, &i) == 0 && i == 1);
    CHECK(gguf_arr_strs(kv, s) == -1);

    kv = gguf_find_kv(&f, "t.nested");
    CHECK(kv && kv->arr_type == GGUF_T_ARR && kv->arr_n == 3);
    CHECK_INT(kv->value_bytes, 12 + 2 + 12 + 12 + 1);
    CHECK(gguf_arr_i64(kv, 0, &i) == -1); /* nested arrays are not numeric */
    kv = gguf_find_kv(&f, "t.nested_strs");
    CHECK(kv && kv->arr_n == 2 && kv->value_bytes == 12 + 9 + 12 + 9 + 10);

    kv = gguf_find_kv(&f, "t.f32");
    CHECK(kv && gguf_arr_f64(kv, 1, &d) == 0 && d == -8.0);
    CHECK(gguf_arr_i64(kv, 0, &i) == -1); /* floats do not narrow */
    gguf_close(&f);
    buf_release(&b);
}

/* ---- tensors and alignment ---- */

/* Two tensors (f32 [8] and q8_0 [32, 2]) with alignment a (0: no key). */
static void two_tensors(struct buf *b, uint32_t a)
{
    uint32_t align = a ? a : 32;
    buf_init(b, 1 << 20);
    b_header(b, 2, a ? 2 : 1);
    b_key(b, "general.architecture", GGUF_T_STR), b_str(b, "llama");
    if (a)
        b_key(b, "general.alignment", GGUF_T_U32), b_u32(b, a);
    uint64_t ne1[1] = {8}, ne2[2] = {32, 2};
    b_tensor(b, "norm.weight", 1, ne1, 0, 0);
    b_tensor(b, "blk.0.w", 2, ne2, 8, align);
    b_pad(b, align);
    for (int i = 0; i < 8; i++)
        b_f32(b, (float)i);
    b_pad(b, align);
    for (int i = 0; i < 68; i++)
        b_u8(b, (uint8_t)i);
    b_pad(b, align);
}

TEST(tensor_infos_resolve_to_data_inside_the_file)
{
    struct buf b;
    struct gguf_file f;
    struct err e;
    two_tensors(&b, 0);
    CHECK_INT(parse(&b, &f, &e), 0);
    CHECK_INT(f.n_tensors, 2);
    CHECK_INT(f.data_offset % 32, 0);
    const struct gguf_tensor *t = gguf_find_tensor(&f, "blk.0.w");
    CHECK(t && t->type == 8 && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2);
    CHECK(t && t->ne[2] == 1 && t->ne[3] == 1 && t->nbytes == 68);
    CHECK(t && (const uint8_t *)t->data == f.map + f.data_offset + 32);
    CHECK(t && ((const uint8_t *)t->data)[5] == 5);
    t = gguf_find_tensor(&f, "norm.weight");
    float x;
    CHECK(t && t->nbytes == 32);
    memcpy(&x, (const uint8_t *)t->data + 12, 4);
    CHECK(x == 3.0f);
    CHECK(gguf_find_tensor(&f, "blk.0") == NULL);
    gguf_close(&f);
    gguf_close(&f); /* twice is harmless */
    buf_release(&b);
}

TEST(general_alignment_moves_the_data_section)
{
    struct buf b;
    struct gguf_file f;
    struct err e;
    two_tensors(&b, 256);
    CHECK_INT(parse(&b, &f, &e), 0);
    CHECK_INT(f.alignment, 256);
    CHECK_INT(f.data_offset, 256);
    gguf_close(&f);
    buf_release(&b);
}

/* Expect gguf_parse to fail with code and a message containing want. */
static void expect_fail(struct buf *b, int code, const char *want)
{
    struct gguf_file f;
    struct err e;
    CHECK_INT(parse(b, &f, &e), -1);
    CHECK_INT(e.code, code);
    CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
    CHECK(strchr(e.msg, '\n') == NULL);
    CHECK(f.kv == NULL && f.tensors == NULL && f.n_kv == 0);
}

TEST(alignment_must_be_a_u32_power_of_two)
{
    struct buf b;
    two_tensors(&b, 48);
    expect_fail(&b, FP_ERR_FORMAT, "general.alignment 48 is not a power of two");
    buf_release(&b);
    buf_init(&b, 4096);
    b_header(&b, 0, 1);
    b_key(&b, "general.alignment", GGUF_T_I32), b_u32(&b, 64);
    expect_fail(&b, FP_ERR_FORMAT, "general.alignment must be a u32, not i32");
    buf_release(&b);
}

TEST(every_truncation_of_a_valid_file_is_a_clean_format_error)
{
    struct buf b;
    two_tensors(&b, 0);
    /* The last tensor's 68 bytes end at len - 28 (padding follows). */
    size_t end = b.len - 28;
    for (size_t n = 0; n < end; n++) {
        struct gguf_file f;
        struct err e;
        err_init(&e);
        char *copy = xmalloc(n + 1); /* exact size, so ASan sees overreads */
        memcpy(copy, b.data, n);
        int rc = gguf_parse(copy, n, &f, &e);
        CHECK_MSG(rc == -1 && e.code == FP_ERR_FORMAT, "length %zu: rc %d code %d '%s'", n, rc,
                  e.code, e.msg);
        free(copy);
    }
    buf_release(&b);
}

TEST(header_refusals_carry_their_codes)
{
    struct buf b;
    buf_init(&b, 4096);
    b_u32(&b, GGUF_MAGIC), b_u32(&b, 2), b_u64(&b, 0), b_u64(&b, 0);
    expect_fail(&b, FP_ERR_UNSUPPORTED, "GGUF version 2 is not supported");
    buf_reset(&b);
    b_u32(&b, GGUF_MAGIC), b_u32(&b, 0x03000000), b_u64(&b, 0), b_u64(&b, 0);
    expect_fail(&b, FP_ERR_UNSUPPORTED, "big-endian");
    buf_reset(&b);
    b_u32(&b, 0x46554746), b_u32(&b, 3), b_u64(&b, 0), b_u64(&b, 0);
    expect_fail(&b, FP_ERR_FORMAT, "not a GGUF file");
    buf_reset(&b);
    b_header(&b, 1ull << 40, 0);
    expect_fail(&b, FP_ERR_FORMAT, "tensor count 1099511627776 cannot fit");
    buf_reset(&b);
    b_header(&b, 0, 0);
    struct gguf_file f;
    struct err e;
    CHECK_INT(parse(&b, &f, &e), 0); /* an empty but valid file */
    CHECK_INT(f.data_offset, 24);
    gguf_close(&f);
    buf_release(&b);
}

TEST(tensor_refusals_name_the_tensor)
{
    struct buf b;
    uint64_t ne[2] = {33, 2};
    buf_init(&b, 4096);
    b_header(&b, 1, 0);
    b_tensor(&b, "w", 2, ne, 8, 0);
    b_pad(&b, 32);
    expect_fail(&b, FP_ERR_FORMAT, "tensor 'w': ne[0] = 33 is not a multiple of the q8_0 block");
    buf_reset(&b);
    b_header(&b, 1, 0);
    b_tensor(&b, "w", 2, ne, 4, 0); /* a removed ggml id */
    expect_fail(&b, FP_ERR_FORMAT, "tensor 'w' has unknown type id 4");
    buf_reset(&b);
    b_header(&b, 1, 0);
    b_tensor(&b, "w", 2, ne, 200, 0);
    expect_fail(&b, FP_ERR_FORMAT, "tensor 'w' has unknown type id 200");
    buf_reset(&b);
    b_header(&b, 2, 0);
    ne[0] = 4;
    b_tensor(&b, "w", 1, ne, 0, 0);
    b_tensor(&b, "w", 1, ne, 0, 32);
    expect_fail(&b, FP_ERR_FORMAT, "duplicate tensor name 'w'");
    buf_reset(&b);
    b_header(&b, 1, 0);
    b_tensor(&b, "w", 1, ne, 0, 16);
    b_pad(&b, 32);
    for (int i = 0; i < 64; i++)
        b_u8(&b, 0);
    expect_fail(&b, FP_ERR_FORMAT, "data offset 16 is not a multiple of the alignment 32");
    buf_reset(&b);
    b_header(&b, 1, 0);
    b_tensor(&b, "w", 1, ne, 0, 0);
    b_pad(&b, 32);
    b_u64(&b, 0); /* 8 of the 16 bytes */
    expect_fail(&b, FP_ERR_FORMAT, "runs past the end of the data section (8 bytes)");
    buf_release(&b);
}

TEST(metadata_refusals)
{
    struct buf b;
    buf_init(&b, 4096);
    b_header(&b, 0, 1);
    b_key(&b, "x.flag", GGUF_T_BOOL), b_u8(&b, 2);
    expect_fail(&b, FP_ERR_FORMAT, "key 'x.flag': bool value 2 at byte");
    buf_reset(&b);
    b_header(&b, 0, 2);
    b_key(&b, "x.a", GGUF_T_U8), b_u8(&b, 1);
    b_key(&b, "x.a", GGUF_T_U8), b_u8(&b, 1);
    expect_fail(&b, FP_ERR_FORMAT, "duplicate metadata key 'x.a'");
    buf_reset(&b);
    b_header(&b, 0, 1);
    b_key(&b, "x.s", GGUF_T_STR), b_u64(&b, UINT64_MAX);
    expect_fail(&b, FP_ERR_FORMAT, "string of key 'x.s' at byte 39 has length");
    buf_reset(&b);
    b_header(&b, 0, 1);
    b_key(&b, "x.t", 13), b_u8(&b, 0);
    expect_fail(&b, FP_ERR_FORMAT, "key 'x.t': unknown value type 13");
    buf_reset(&b);
    b_header(&b, 0, 1);
    b_key(&b, "x.arr", GGUF_T_ARR), b_u32(&b, GGUF_T_U32), b_u64(&b, 1ull << 62);
    expect_fail(&b, FP_ERR_FORMAT, "key 'x.arr': array of 4611686018427387904 u32 elements");
    buf_reset(&b);
    /* Arrays nested deeper than the limit. */
    b_header(&b, 0, 1);
    b_key(&b, "x.deep", GGUF_T_ARR);
    for (int i = 0; i < GGUF_MAX_ARRAY_DEPTH + 1; i++)
        b_u32(&b, GGUF_T_ARR), b_u64(&b, 1);
    b_u32(&b, GGUF_T_U8), b_u64(&b, 0);
    expect_fail(&b, FP_ERR_FORMAT, "arrays nested more than 8 deep");
    buf_release(&b);
}

TEST(open_reports_the_path_and_io_errors)
{
    struct gguf_file f;
    struct err e;
    err_init(&e);
    CHECK_INT(gguf_open("/nonexistent/x.gguf", &f, &e), -1);
    CHECK_INT(e.code, FP_ERR_IO);
    CHECK_STR(e.msg, "/nonexistent/x.gguf: No such file or directory");
    err_init(&e);
    CHECK_INT(gguf_open("/tmp", &f, &e), -1);
    CHECK_INT(e.code, FP_ERR_IO);
    CHECK_STR(e.msg, "/tmp: not a regular file");
    gguf_close(&f);
}

TEST(tensor_nbytes_follows_the_block_geometry)
{
    uint64_t n, ne[4] = {576, 1536, 1, 1};
    CHECK(gguf_tensor_nbytes(3, 2, ne, &n) == 0 && n == 576 / 32 * 20 * 1536);  /* q4_1 */
    CHECK(gguf_tensor_nbytes(40, 2, ne, &n) == 0 && n == 576 / 64 * 36 * 1536); /* nvfp4 */
    CHECK(gguf_tensor_nbytes(0, 0, ne, &n) == 0 && n == 4);                     /* a 0-d f32 */
    CHECK(gguf_tensor_nbytes(12, 2, ne, &n) == -1); /* q4_k: 576 % 256 != 0 */
    CHECK(gguf_tensor_nbytes(16, 2, ne, &n) == -1); /* iq2_xxs: not supported */
    CHECK(gguf_tensor_nbytes(0, 5, ne, &n) == -1);
    uint64_t huge[2] = {1ull << 62, 1ull << 62};
    CHECK(gguf_tensor_nbytes(0, 2, huge, &n) == -1); /* overflow */
    CHECK_STR(gguf_type_name(39), "mxfp4");
    CHECK_STR(gguf_type_name(16), "iq2_xxs");
    CHECK_STR(gguf_type_name(4), "?");
}

/* ---- writer ---- */

static char *tmp_path(const char *tag)
{
    return xasprintf("%s/gguf-test-%ld-%s.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                     (long)getpid(), tag);
}

static int fill_ramp(void *ctx, void *dst, uint64_t nbytes, struct err *err)
{
    (void)err;
    for (uint64_t i = 0; i < nbytes; i++)
        ((uint8_t *)dst)[i] = (uint8_t)(i * 7 + *(int *)ctx);
    return 0;
}

TEST(writer_round_trip)
{
    char *path = tmp_path("rt");
    gguf_writer *w = gguf_writer_new(64);
    static const char *const toks[] = {"<|endoftext|>", "\xc4\xa0", "ab"};
    static const int32_t types[] = {3, 1, 1};
    static const float scores[] = {0.5f, -1.0f};
    float norm[8];
    for (int i = 0; i < 8; i++)
        norm[i] = 1.0f + (float)i / 8;
    int seed = 3;
    uint64_t ne_norm[1] = {8}, ne_w[2] = {64, 3};
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_u32(w, "llama.block_count", 2);
    gguf_w_i32(w, "x.neg", -9);
    gguf_w_u64(w, "x.big", 1ull << 40);
    gguf_w_f32(w, "llama.rope.freq_base", 100000.0f);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 3);
    gguf_w_arr_f32(w, "x.scores", scores, 2);
    gguf_w_tensor(w, "output_norm.weight", 1, ne_norm, 0, norm, sizeof(norm));
    gguf_w_tensor_fill(w, "blk.0.ffn_up.weight", 2, ne_w, 39, fill_ramp, &seed);
    struct err e;
    err_init(&e);
    CHECK_INT(gguf_writer_save(w, path, &e), 0);
    gguf_writer_free(w);

    struct gguf_file f;
    CHECK_INT(gguf_open(path, &f, &e), 0);
    CHECK_INT(f.alignment, 64);
    CHECK_INT(f.n_kv, 10); /* 9 + general.alignment */
    struct gguf_str s;
    uint64_t u;
    int64_t i;
    double d;
    bool v = true;
    CHECK(gguf_get_str(&f, "general.architecture", &s) == 0 && gguf_str_eq(s, "llama"));
    CHECK(gguf_get_u64(&f, "llama.block_count", &u) == 0 && u == 2);
    CHECK(gguf_get_i64(&f, "x.neg", &i) == 0 && i == -9);
    CHECK(gguf_get_u64(&f, "x.big", &u) == 0 && u == 1ull << 40);
    CHECK(gguf_get_f64(&f, "llama.rope.freq_base", &d) == 0 && d == 100000.0);
    CHECK(gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &v) == 0 && !v);
    const struct gguf_kv *kv = gguf_find_kv(&f, "tokenizer.ggml.tokens");
    struct gguf_str ts[3];
    CHECK(kv && kv->arr_n == 3 && gguf_arr_strs(kv, ts) == 0);
    CHECK(gguf_str_eq(ts[0], "<|endoftext|>") && gguf_str_eq(ts[2], "ab"));
    kv = gguf_find_kv(&f, "tokenizer.ggml.token_type");
    CHECK(kv && gguf_arr_i64(kv, 0, &i) == 0 && i == 3);
    kv = gguf_find_kv(&f, "x.scores");
    CHECK(kv && gguf_arr_f64(kv, 1, &d) == 0 && d == -1.0);
    const struct gguf_tensor *t = gguf_find_tensor(&f, "output_norm.weight");
    CHECK(t && t->nbytes == sizeof(norm) && memcmp(t->data, norm, sizeof(norm)) == 0);
    t = gguf_find_tensor(&f, "blk.0.ffn_up.weight");
    CHECK(t && t->type == 39 && t->ne[0] == 64 && t->ne[1] == 3 && t->nbytes == 2 * 17 * 3);
    CHECK(t && t->offset % 64 == 0 && ((const uint8_t *)t->data)[10] == (uint8_t)(70 + 3));
    CHECK_INT(f.size % 64, 0); /* every tensor padded, the last one too */

    /* Copying the metadata (nested arrays included) gives the same bytes. */
    gguf_writer *w2 = gguf_writer_new(0);
    gguf_w_copy_kv(w2, &f, NULL, NULL);
    char *path2 = tmp_path("rt2");
    CHECK_INT(gguf_writer_save(w2, path2, &e), 0);
    gguf_writer_free(w2);
    struct gguf_file g;
    CHECK_INT(gguf_open(path2, &g, &e), 0);
    CHECK_INT(g.n_kv, 9); /* general.alignment is the writer's own */
    CHECK_INT(g.alignment, 32);
    for (size_t k = 1; k < f.n_kv; k++) {
        const struct gguf_kv *a = &f.kv[k], *c = &g.kv[k - 1];
        CHECK(a->key.len == c->key.len && memcmp(a->key.p, c->key.p, a->key.len) == 0);
        CHECK(a->type == c->type && a->value_bytes == c->value_bytes &&
              memcmp(a->value, c->value, a->value_bytes) == 0);
    }
    gguf_close(&g);
    gguf_close(&f);
    unlink(path);
    unlink(path2);
    free(path);
    free(path2);
}

TEST(writer_reports_caller_mistakes_at_save)
{
    char *path = tmp_path("bad");
    struct err e;
    uint64_t ne[1] = {33};
    const char *cases[] = {"dup", "align", "block"};
    for (int c = 0; c < 3; c++) {
        gguf_writer *w = gguf_writer_new(0);
        if (c == 0) {
            gguf_w_u32(w, "a.b", 1);
            gguf_w_str(w, "a.b", "x");
        } else if (c == 1) {
            gguf_w_u32(w, "general.alignment", 64);
        } else {
            gguf_w_tensor_fill(w, "w", 1, ne, 8, fill_ramp, NULL);
        }
        err_init(&e);
        CHECK_MSG(gguf_writer_save(w, path, &e) == -1 && e.code == FP_ERR_USAGE, "case %s",
                  cases[c]);
        CHECK(access(path, F_OK) != 0);
        gguf_writer_free(w);
    }
    gguf_writer_free(NULL);
    free(path);
}

TEST_MAIN()
