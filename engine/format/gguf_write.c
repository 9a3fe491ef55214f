/*
 * gguf_write: the GGUF writer (gguf.h, "writer"). Metadata is encoded as it
 * is added; tensors are described up front and their data is copied or
 * produced by a fill callback while the file streams out, so a model
 * larger than memory can be written. Files are replaced atomically.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "fp4.h"
#include "xalloc.h"

#include "format/gguf.h"

/* Record the caller's first mistake (reported by gguf_writer_save). */
static void note_mistake(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_mistake(struct err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, FP_ERR_USAGE, fmt, ap);
    va_end(ap);
}

/* A tensor as described by the caller; its data is written at save time,
 * at `offset` in the data section, padded to the alignment. */
struct wtensor {
    char name[GGUF_MAX_NAME];   /* NUL-terminated, at most 63 bytes */
    uint32_t n_dims;            /* 1..4 */
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] contiguous; unused dims are 1 */
    uint32_t type;              /* ggml type id */
    uint64_t nbytes;            /* data bytes, before padding */
    uint64_t offset;            /* bytes from the data section's start */
    void *data;                 /* owned copy, or NULL when fill is set */
    gguf_fill_fn fill;          /* produces the data at save time, or NULL */
    void *fill_ctx;             /* passed to fill; owned by the caller */
};

/* Metadata is encoded into kv as it is added, in the caller's order; only
 * the header and tensor infos wait for gguf_writer_save. */
struct gguf_writer {
    uint32_t alignment; /* bytes; a power of two */
    struct buf kv;      /* encoded metadata pairs */
    uint64_t n_kv;      /* pairs in kv */
    char **keys;        /* owned copies, to refuse duplicates */
    size_t cap_keys;
    struct wtensor *t;   /* owned */
    size_t n_t, cap_t;   /* tensors in t, slots allocated */
    uint64_t data_bytes; /* the data section so far, padded */
    struct err mistake;  /* the first caller mistake, reported by save */
};

#define WRITER_MAX_META ((size_t)1 << 30) /* 1 GiB of encoded metadata */

gguf_writer *gguf_writer_new(uint32_t alignment)
{
    gguf_writer *w = xcalloc(1, sizeof(*w));
    w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    buf_init(&w->kv, WRITER_MAX_META);
    err_init(&w->mistake);
    if (w->alignment & (w->alignment - 1))
        note_mistake(&w->mistake, "alignment %u is not a power of two", alignment);
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    buf_release(&w->kv);
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].data);
    free(w->t);
    free(w);
}

/* Little-endian encoders; a refused append (past the cap) sets kv.toobig,
 * which gguf_writer_save reports. */
static void put32(struct buf *b, uint32_t v)
{
    uint8_t e[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_append(b, e, 4);
}

static void put64(struct buf *b, uint64_t v)
{
    put32(b, (uint32_t)v);
    put32(b, (uint32_t)(v >> 32));
}

/* A GGUF string: u64 length, then the bytes, no NUL. */
static void put_str(struct buf *b, const char *s, size_t n)
{
    put64(b, n);
    buf_append(b, s, n);
}

/* Start a pair: refuse a duplicate key, then encode the key and type. */
static bool begin_kv(gguf_writer *w, const char *key, size_t key_len, uint32_t type)
{
    if (key_len == strlen("general.alignment") && memcmp(key, "general.alignment", key_len) == 0) {
        note_mistake(&w->mistake, "set general.alignment through gguf_writer_new");
        return false;
    }
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strlen(w->keys[i]) == key_len && memcmp(w->keys[i], key, key_len) == 0) {
            note_mistake(&w->mistake, "duplicate metadata key '%.*s'", (int)key_len, key);
            return false;
        }
    XGROW(w->keys, w->cap_keys, w->n_kv + 1);
    w->keys[w->n_kv++] = xstrndup(key, key_len);
    put_str(&w->kv, key, key_len);
    put32(&w->kv, type);
    return true;
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_U32))
        put32(&w->kv, v);
}

void gguf_w_i32(gguf_writer *w, const char *key, int32_t v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_I32))
        put32(&w->kv, (uint32_t)v);
}

void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_U64))
        put64(&w->kv, v);
}

/* The IEEE-754 bits of v, written as a little-endian u32. */
static uint32_t f32_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

void gguf_w_f32(gguf_writer *w, const char *key, float v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_F32))
        put32(&w->kv, f32_bits(v));
}

void gguf_w_bool(gguf_writer *w, const char *key, bool v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_BOOL))
        buf_putc(&w->kv, v ? 1 : 0);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v)
{
    if (begin_kv(w, key, strlen(key), GGUF_T_STR))
        put_str(&w->kv, v, strlen(v));
}

/* Start an array pair: key, type ARR, element type, element count. */
static bool begin_arr(gguf_writer *w, const char *key, uint32_t elem, size_t n)
{
    if (!begin_kv(w, key, strlen(key), GGUF_T_ARR))
        return false;
    put32(&w->kv, elem);
    put64(&w->kv, n);
    return true;
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n)
{
    if (begin_arr(w, key, GGUF_T_STR, n))
        for (size_t i = 0; i < n; i++)
            put_str(&w->kv, v[i], strlen(v[i]));
}

void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n)
{
    if (begin_arr(w, key, GGUF_T_I32, n))
        for (size_t i = 0; i < n; i++)
            put32(&w->kv, (uint32_t)v[i]);
}

void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n)
{
    if (begin_arr(w, key, GGUF_T_F32, n))
        for (size_t i = 0; i < n; i++)
            put32(&w->kv, f32_bits(v[i]));
}

void gguf_w_copy_kv(gguf_writer *w, const struct gguf_file *src,
                    bool (*skip)(const char *key, void *ctx), void *ctx)
{
    for (size_t i = 0; i < src->n_kv; i++) {
        const struct gguf_kv *kv = &src->kv[i];
        char *key = xstrndup(kv->key.p, (size_t)kv->key.len);
        bool drop = strcmp(key, "general.alignment") == 0 || (skip && skip(key, ctx));
        /* The parser checked the value's encoding, and value/value_bytes
         * cover it exactly (arrays: after their 12-byte header), so the
         * bytes are copied as they are, nested arrays included. */
        if (!drop && begin_kv(w, kv->key.p, (size_t)kv->key.len, kv->type)) {
            if (kv->type == GGUF_T_ARR) {
                put32(&w->kv, kv->arr_type);
                put64(&w->kv, kv->arr_n);
            }
            buf_append(&w->kv, kv->value, (size_t)kv->value_bytes);
        }
        free(key);
    }
}

/* Zero bytes that bring n up to a multiple of a. */
static uint64_t pad_to(uint64_t n, uint32_t a)
{
    return (a - n % a) % a;
}

/* Describe a tensor and reserve its place in the data section. */
static struct wtensor *add_tensor(gguf_writer *w, const char *name, uint32_t n_dims,
                                  const uint64_t *ne, uint32_t type)
{
    uint64_t nbytes;
    if (strlen(name) >= GGUF_MAX_NAME) {
        note_mistake(&w->mistake, "tensor name '%s' is longer than %d bytes", name,
                     GGUF_MAX_NAME - 1);
        return NULL;
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            note_mistake(&w->mistake, "duplicate tensor name '%s'", name);
            return NULL;
        }
    if (n_dims == 0 || gguf_tensor_nbytes(type, n_dims, ne, &nbytes) != 0) {
        note_mistake(&w->mistake,
                     "tensor '%s': type %s with %u dimensions and ne[0] = %llu cannot be stored",
                     name, gguf_type_name(type), n_dims, n_dims ? (unsigned long long)ne[0] : 0ull);
        return NULL;
    }
    XGROW(w->t, w->cap_t, w->n_t + 1);
    struct wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof(*t));
    memcpy(t->name, name, strlen(name) + 1);
    t->n_dims = n_dims;
    t->type = type;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->offset = w->data_bytes;
    w->data_bytes += t->nbytes + pad_to(t->nbytes, w->alignment);
    return t;
}

void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                   uint32_t type, const void *data, uint64_t nbytes)
{
    struct wtensor *t = add_tensor(w, name, n_dims, ne, type);
    if (!t)
        return;
    if (nbytes != t->nbytes) {
        note_mistake(&w->mistake, "tensor '%s': %llu data bytes given, shape needs %llu", name,
                     (unsigned long long)nbytes, (unsigned long long)t->nbytes);
        return;
    }
    t->data = xmalloc(nbytes ? (size_t)nbytes : 1);
    memcpy(t->data, data, (size_t)nbytes);
}

void gguf_w_tensor_fill(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, gguf_fill_fn fill, void *ctx)
{
    struct wtensor *t = add_tensor(w, name, n_dims, ne, type);
    if (t) {
        t->fill = fill;
        t->fill_ctx = ctx;
    }
}

/* write(2) until done; -1 with errno set on failure. */
static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* n zero bytes of padding. */
static int write_zeros(int fd, uint64_t n)
{
    static const uint8_t zeros[256];
    while (n) {
        size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
        if (write_all(fd, zeros, k))
            return -1;
        n -= k;
    }
    return 0;
}

/* Header, metadata and tensor infos, padded to the data section. */
static void encode_head(gguf_writer *w, struct buf *h)
{
    bool extra = w->alignment != GGUF_DEFAULT_ALIGNMENT;
    put32(h, GGUF_MAGIC);
    put32(h, GGUF_VERSION);
    put64(h, w->n_t);
    put64(h, w->n_kv + extra);
    if (extra) {
        put_str(h, "general.alignment", strlen("general.alignment"));
        put32(h, GGUF_T_U32);
        put32(h, w->alignment);
    }
    buf_append(h, w->kv.data, w->kv.len);
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        put_str(h, t->name, strlen(t->name));
        put32(h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put64(h, t->ne[d]);
        put32(h, t->type);
        put64(h, t->offset);
    }
    uint64_t pad = pad_to(h->len, w->alignment);
    for (uint64_t i = 0; i < pad; i++)
        buf_putc(h, 0);
}

/* Stream every tensor's data, each padded to the alignment. */
static int write_data(gguf_writer *w, int fd, const char *tmp, struct err *err)
{
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        void *data = t->data;
        if (t->fill) {
            data = xmalloc(t->nbytes ? (size_t)t->nbytes : 1);
            if (t->fill(t->fill_ctx, data, t->nbytes, err)) {
                free(data);
                return -1;
            }
        }
        int bad = write_all(fd, data, (size_t)t->nbytes) ||
                  write_zeros(fd, pad_to(t->nbytes, w->alignment));
        if (t->fill)
            free(data);
        if (bad) {
            err_set(err, FP_ERR_IO, "%s: %s", tmp, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int gguf_writer_save(gguf_writer *w, const char *path, struct err *err)
{
    if (!w->mistake.code && w->kv.toobig)
        note_mistake(&w->mistake, "metadata larger than %zu bytes", WRITER_MAX_META);
    if (w->mistake.code) {
        err_set(err, w->mistake.code, "%s: %s", path, w->mistake.msg);
        return -1;
    }
    /* The head (header, metadata, tensor infos, padding) is built in memory:
     * it is small next to the data, which is streamed tensor by tensor.
     * The file takes its final name only once it is complete and synced. */
    struct buf head;
    buf_init(&head, WRITER_MAX_META + ((size_t)1 << 24));
    encode_head(w, &head);
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int rc = -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        err_set(err, FP_ERR_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (head.toobig || write_all(fd, head.data, head.len)) {
        err_set(err, FP_ERR_IO, "%s: %s", tmp, head.toobig ? "header too large" : strerror(errno));
        goto out_unlink;
    }
    if (write_data(w, fd, tmp, err))
        goto out_unlink;
    if (fsync(fd) != 0) {
        err_set(err, FP_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
        goto out_unlink;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path) != 0) {
        err_set(err, FP_ERR_IO, "%s: rename: %s", path, strerror(errno));
        goto out_unlink;
    }
    file_fsync_dir(path);
    rc = 0;
    goto out;
out_unlink:
    unlink(tmp);
out:
    if (fd >= 0)
        close(fd);
    buf_release(&head);
    free(tmp);
    return rc;
}
