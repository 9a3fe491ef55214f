/*
 * Fuzz target for the GGUF reader: gguf_parse on arbitrary bytes must
 * either fail with a one-line message and a known code, or produce a file
 * whose every key, string view, array element and tensor extent lies
 * inside the input. Each accepted view is touched, so ASan sees overreads.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "xalloc.h"

#include "format/gguf.h"

static const uint8_t *lo, *hi;
static volatile uint64_t sink;

/* Trap unless [p, p + n) lies inside the input; read its ends. */
static void touch(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    if (b < lo || b > hi || n > (uint64_t)(hi - b))
        abort();
    if (n)
        sink += b[0] + b[n - 1];
}

static void check_kv(const struct gguf_kv *kv)
{
    touch(kv->key.p, kv->key.len);
    touch(kv->value, kv->value_bytes);
    uint64_t u;
    int64_t i;
    double d;
    gguf_kv_u64(kv, &u);
    gguf_kv_i64(kv, &i);
    gguf_kv_f64(kv, &d);
    if (kv->type != GGUF_T_ARR)
        return;
    if (kv->arr_type == GGUF_T_STR) {
        struct gguf_str *s = xmalloc((size_t)kv->arr_n * sizeof(*s) + 1);
        if (gguf_arr_strs(kv, s) != 0)
            abort();
        for (uint64_t k = 0; k < kv->arr_n; k++) {
            touch(s[k].p, s[k].len);
            if (s[k].p + s[k].len > (const char *)kv->value + kv->value_bytes)
                abort();
        }
        free(s);
        return;
    }
    for (uint64_t k = 0; k < kv->arr_n && k < 4096; k++) {
        gguf_arr_i64(kv, k, &i);
        gguf_arr_f64(kv, k, &d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file f;
    struct err err;
    err_init(&err);
    lo = data;
    hi = data + size;
    if (gguf_parse(data, size, &f, &err) != 0) {
        /* A failure always has a known code and a one-line message. */
        if (err.code != FP_ERR_FORMAT && err.code != FP_ERR_UNSUPPORTED)
            abort();
        if (!err.msg[0] || strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    if (f.data_offset > size || f.alignment == 0 || (f.alignment & (f.alignment - 1)))
        abort();
    for (size_t i = 0; i < f.n_kv; i++)
        check_kv(&f.kv[i]);
    for (size_t i = 0; i < f.n_tensors; i++) {
        const struct gguf_tensor *t = &f.tensors[i];
        if (strlen(t->name) >= GGUF_MAX_NAME || t->offset % f.alignment)
            abort();
        touch(t->data, t->nbytes);
        if (gguf_find_tensor(&f, t->name) != t) /* names are unique */
            abort();
    }
    gguf_close(&f);
    return 0;
}
