/*
 * gguf: the GGUF v3 reader and writer. The reader walks the file with a
 * bounds-checked cursor: every length, count and offset is compared with
 * what is left before it is used, all sums are overflow-checked, and the
 * first problem becomes a one-line message that says what and where.
 */
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp4.h"
#include "xalloc.h"

#include "format/quant.h"

/* Set the first error and return -1, for one-line failures. */
static int failf(struct err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(struct err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, code, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- tensor types ---- */

/* Block size and bytes of a ggml type quant.h knows; false otherwise. */
static bool type_geometry(uint32_t id, uint32_t *block, uint32_t *bytes)
{
    const struct q_type_info *ti = q_info(id);
    if (!ti)
        return false;
    *block = ti->block;
    *bytes = ti->bytes;
    return true;
}

const char *gguf_type_name(uint32_t type)
{
    const struct q_type_info *ti = q_info(type);
    return ti ? ti->name : "?";
}

int gguf_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *out)
{
    uint32_t block, bytes;
    if (n_dims > GGUF_MAX_DIMS || !type_geometry(type, &block, &bytes) || (!n_dims && block > 1))
        return -1;
    uint64_t n = bytes;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t k = d == 0 ? ne[0] / block : ne[d];
        if (d == 0 && ne[0] % block)
            return -1;
        if (k && n > UINT64_MAX / k)
            return -1;
        n *= k;
    }
    *out = n; /* a 0-d tensor: one element of a one-element block */
    return 0;
}

/* ---- small helpers ---- */

static const char *const vtype_names[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                          "bool", "str", "arr", "u64", "i64", "f64"};
#define N_VTYPES (sizeof(vtype_names) / sizeof(vtype_names[0]))

const char *gguf_vtype_name(uint32_t type)
{
    return type < N_VTYPES ? vtype_names[type] : "?";
}

/* Encoded size of a fixed-size value type; 0 for str, arr and unknown. */
static uint32_t vtype_size(uint32_t t)
{
    static const uint8_t sizes[N_VTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < N_VTYPES ? sizes[t] : 0;
}

/* Little-endian loads from the mapping, byte by byte: no alignment or
 * host-endianness assumptions (the format is little-endian only). */
static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/*
 * Print a file-supplied name into out for a message: printable ASCII as is,
 * other bytes as \xNN, cut at about 60 bytes with "...", so a hostile name
 * cannot break the one-line rule or flood the terminal.
 */
static const char *show(const char *p, uint64_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (o + 8 >= cap || o >= 60) {
            memcpy(out + o, "...", 4);
            return out;
        }
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

/* ---- a set of names, to find duplicates in O(n) ---- */

struct nameset {
    const char **p; /* name starts (views), NULL = empty slot */
    uint64_t *len;  /* name lengths */
    size_t cap;     /* slots, a power of two; kept at most half full */
    size_t n;       /* names held */
};

static uint64_t hash_bytes(const char *p, uint64_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

static void nameset_init(struct nameset *s)
{
    memset(s, 0, sizeof(*s));
}

static void nameset_release(struct nameset *s)
{
    free(s->p);
    free(s->len);
}

/* Insert a name known to be absent (linear probing). */
static void nameset_put(struct nameset *s, const char *p, uint64_t len)
{
    size_t i = (size_t)hash_bytes(p, len) & (s->cap - 1);
    while (s->p[i])
        i = (i + 1) & (s->cap - 1);
    s->p[i] = p;
    s->len[i] = len;
    s->n++;
}

/* Add a name; false if it was already there. */
static bool nameset_add(struct nameset *s, const char *p, uint64_t len)
{
    if (2 * (s->n + 1) > s->cap) {
        struct nameset old = *s;
        s->cap = old.cap ? old.cap * 2 : 64;
        s->n = 0;
        s->p = xcalloc(s->cap, sizeof(*s->p));
        s->len = xcalloc(s->cap, sizeof(*s->len));
        for (size_t i = 0; i < old.cap; i++)
            if (old.p[i])
                nameset_put(s, old.p[i], old.len[i]);
        nameset_release(&old);
    }
    size_t i = (size_t)hash_bytes(p, len) & (s->cap - 1);
    while (s->p[i]) {
        if (s->len[i] == len && memcmp(s->p[i], p, len) == 0)
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    nameset_put(s, p, len);
    return true;
}

/* ---- the reader ---- */

/* A cursor over the file; every read goes through need(). */
struct cur {
    const uint8_t *base;
    size_t size; /* bytes in the file */
    size_t pos;  /* next byte to read */
    struct err *err;
};

/* Check that n more bytes are there; else set a truncation error naming
 * what was being read and return -1. */
static int need(struct cur *c, uint64_t n, const char *what, const char *whose)
{
    if (n <= c->size - c->pos)
        return 0;
    err_set(c->err, FP_ERR_FORMAT,
            "truncated: %s of %s at byte %zu needs %llu bytes, only %zu remain", what, whose,
            c->pos, (unsigned long long)n, c->size - c->pos);
    return -1;
}

/* Fixed-size reads that advance the cursor; `what` of `whose` names the
 * field in a truncation message ("array count of key 'x'"). */
static int rd_u32(struct cur *c, uint32_t *v, const char *what, const char *whose)
{
    if (need(c, 4, what, whose))
        return -1;
    *v = le32(c->base + c->pos);
    c->pos += 4;
    return 0;
}

static int rd_u64(struct cur *c, uint64_t *v, const char *what, const char *whose)
{
    if (need(c, 8, what, whose))
        return -1;
    *v = le64(c->base + c->pos);
    c->pos += 8;
    return 0;
}

/* A u64 length and that many bytes, as a view; the length is checked
 * against what remains before anything is read. */
static int rd_str(struct cur *c, struct gguf_str *s, const char *what, const char *whose)
{
    uint64_t len;
    if (rd_u64(c, &len, what, whose))
        return -1;
    if (len > c->size - c->pos) {
        err_set(c->err, FP_ERR_FORMAT,
                "%s of %s at byte %zu has length %llu, past the end of the file (%zu bytes "
                "remain)",
                what, whose, c->pos - 8, (unsigned long long)len, c->size - c->pos);
        return -1;
    }
    s->p = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return 0;
}

/*
 * Skip over one value of type t at the cursor, checking it: strings fit,
 * bools are 0/1, array counts fit in what is left, nesting is bounded.
 * whose names the key for messages.
 */
static int skip_value(struct cur *c, uint32_t t, int depth, const char *whose)
{
    uint32_t sz = vtype_size(t);
    if (t == GGUF_T_BOOL) {
        if (need(c, 1, "bool value", whose))
            return -1;
        uint8_t b = c->base[c->pos];
        if (b > 1)
            return failf(c->err, FP_ERR_FORMAT, "%s: bool value %u at byte %zu is not 0 or 1",
                         whose, b, c->pos);
        c->pos++;
        return 0;
    }
    if (sz) {
        if (need(c, sz, "value", whose))
            return -1;
        c->pos += sz;
        return 0;
    }
    if (t == GGUF_T_STR) {
        struct gguf_str s;
        return rd_str(c, &s, "string", whose);
    }
    if (t != GGUF_T_ARR)
        return failf(c->err, FP_ERR_FORMAT, "%s: unknown value type %u at byte %zu", whose, t,
                     c->pos - 4);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return failf(c->err, FP_ERR_FORMAT, "%s: arrays nested more than %d deep", whose,
                     GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, "array type", whose) || rd_u64(c, &n, "array count", whose))
        return -1;
    if (et >= N_VTYPES)
        return failf(c->err, FP_ERR_FORMAT, "%s: unknown array element type %u at byte %zu", whose,
                     et, c->pos - 12);
    /* The least an element can take: its fixed size, a string's 8-byte
     * length, or a nested array's 12-byte header. */
    uint64_t min = vtype_size(et) ? vtype_size(et) : et == GGUF_T_STR ? 8 : 12;
    if (n > (c->size - c->pos) / min)
        return failf(c->err, FP_ERR_FORMAT,
                     "%s: array of %llu %s elements at byte %zu cannot fit in the %zu bytes "
                     "left",
                     whose, (unsigned long long)n, gguf_vtype_name(et), c->pos - 12,
                     c->size - c->pos);
    if (vtype_size(et) && et != GGUF_T_BOOL) {
        c->pos += (size_t)(n * min);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, et, depth + 1, whose))
            return -1;
    return 0;
}

/* The n_kv metadata pairs: key (non-empty, unique), type, value. Each
 * value is walked by skip_value, which checks it; the pair keeps a view of
 * its bytes. */
static int parse_kvs(struct cur *c, struct gguf_file *f, uint64_t n_kv)
{
    char name[96], whose[128];
    int rc = -1;
    struct nameset seen;
    size_t cap = 0;
    nameset_init(&seen);
    for (uint64_t i = 0; i < n_kv; i++) {
        XGROW(f->kv, cap, i + 1); /* grown as parsed: a count is only a claim */
        struct gguf_kv *kv = &f->kv[i];
        memset(kv, 0, sizeof(*kv));
        snprintf(whose, sizeof(whose), "metadata key #%llu", (unsigned long long)i);
        if (rd_str(c, &kv->key, "name", whose))
            goto out;
        show(kv->key.p, kv->key.len, name, sizeof(name));
        if (kv->key.len == 0) {
            err_set(c->err, FP_ERR_FORMAT, "metadata key #%llu at byte %zu is empty",
                    (unsigned long long)i, c->pos - 8);
            goto out;
        }
        if (!nameset_add(&seen, kv->key.p, kv->key.len)) {
            err_set(c->err, FP_ERR_FORMAT, "duplicate metadata key '%s'", name);
            goto out;
        }
        snprintf(whose, sizeof(whose), "key '%s'", name);
        uint32_t t;
        if (rd_u32(c, &t, "value type", whose))
            goto out;
        if (t >= N_VTYPES) {
            err_set(c->err, FP_ERR_FORMAT, "%s: unknown value type %u at byte %zu", whose, t,
                    c->pos - 4);
            goto out;
        }
        kv->type = (enum gguf_vtype)t;
        size_t start = c->pos;
        if (t == GGUF_T_ARR) {
            /* Peek at the header for arr_type/arr_n; skip_value checks it. */
            if (need(c, 12, "array header", whose))
                goto out;
            kv->arr_type = (enum gguf_vtype)le32(c->base + c->pos);
            kv->arr_n = le64(c->base + c->pos + 4);
            start += 12;
        }
        if (skip_value(c, t, 0, whose))
            goto out;
        kv->value = c->base + start;
        kv->value_bytes = c->pos - start;
        f->n_kv++;
    }
    rc = 0;
out:
    nameset_release(&seen);
    return rc;
}

/* general.alignment: a u32 power of two when present, else 32. */
static int read_alignment(struct gguf_file *f, struct err *err)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv)
        return 0;
    if (kv->type != GGUF_T_U32)
        return failf(err, FP_ERR_FORMAT, "general.alignment must be a u32, not %s",
                     gguf_vtype_name(kv->type));
    uint32_t a = le32(kv->value);
    if (a == 0 || (a & (a - 1)) != 0)
        return failf(err, FP_ERR_FORMAT, "general.alignment %u is not a power of two", a);
    f->alignment = a;
    return 0;
}

/* Type, block multiple and byte size of a tensor whose info was read;
 * whose names it for messages. */
static int check_shape(struct cur *c, struct gguf_tensor *t, const char *whose)
{
    uint32_t block, bytes;
    if (!type_geometry(t->type, &block, &bytes))
        return failf(c->err, FP_ERR_FORMAT, "%s has unknown type id %u", whose, t->type);
    if (t->ne[0] % block)
        return failf(c->err, FP_ERR_FORMAT,
                     "%s: ne[0] = %llu is not a multiple of the %s block size %u", whose,
                     (unsigned long long)t->ne[0], gguf_type_name(t->type), block);
    /* Each factor is at most INT64_MAX (checked while reading the dims),
     * so only the final product can wrap. */
    uint64_t row = t->ne[0] / block * bytes, rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (t->ne[0] / block > UINT64_MAX / bytes || (rows && row > UINT64_MAX / rows))
        return failf(c->err, FP_ERR_FORMAT, "%s: size in bytes overflows", whose);
    t->nbytes = row * rows;
    return 0;
}

/* Name, dims, type and offset of one tensor, and its byte size; the
 * extent is checked later, once the data section's start is known. */
static int parse_tensor_info(struct cur *c, struct gguf_tensor *t, uint64_t i, struct nameset *seen)
{
    char whose[128], name[96];
    struct gguf_str s;
    snprintf(whose, sizeof(whose), "tensor #%llu", (unsigned long long)i);
    if (rd_str(c, &s, "name", whose))
        return -1;
    show(s.p, s.len, name, sizeof(name));
    if (s.len >= GGUF_MAX_NAME)
        return failf(c->err, FP_ERR_FORMAT,
                     "tensor #%llu: name '%s' is %llu bytes long (at most %d)",
                     (unsigned long long)i, name, (unsigned long long)s.len, GGUF_MAX_NAME - 1);
    if (memchr(s.p, '\0', (size_t)s.len))
        return failf(c->err, FP_ERR_FORMAT, "tensor #%llu: name '%s' contains a NUL byte",
                     (unsigned long long)i, name);
    if (!nameset_add(seen, s.p, s.len))
        return failf(c->err, FP_ERR_FORMAT, "duplicate tensor name '%s'", name);
    memcpy(t->name, s.p, (size_t)s.len);
    t->name[s.len] = '\0';
    snprintf(whose, sizeof(whose), "tensor '%s'", name);
    if (rd_u32(c, &t->n_dims, "dimension count", whose))
        return -1;
    if (t->n_dims > GGUF_MAX_DIMS)
        return failf(c->err, FP_ERR_FORMAT, "%s: %u dimensions (at most %d)", whose, t->n_dims,
                     GGUF_MAX_DIMS);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && rd_u64(c, &t->ne[d], "dimension", whose))
            return -1;
        if (t->ne[d] > (uint64_t)INT64_MAX)
            return failf(c->err, FP_ERR_FORMAT, "%s: dimension %u is %llu (negative)", whose, d,
                         (unsigned long long)t->ne[d]);
        /* Zero-sized dims count as 1 here, so rows * row bytes below
         * cannot wrap whatever the other dims are. */
        uint64_t ne = t->ne[d] ? t->ne[d] : 1;
        if (elems > (uint64_t)INT64_MAX / ne)
            return failf(c->err, FP_ERR_FORMAT, "%s: element count overflows", whose);
        elems *= ne;
    }
    if (rd_u32(c, &t->type, "type", whose) || rd_u64(c, &t->offset, "data offset", whose))
        return -1;
    return check_shape(c, t, whose);
}

/* Alignment and extent of tensor t against the data section
 * [data_offset, size); sets t->data. */
static int check_extent(const struct gguf_file *f, struct gguf_tensor *t, struct err *err)
{
    char name[96];
    show(t->name, strlen(t->name), name, sizeof(name));
    if (t->offset % f->alignment)
        return failf(err, FP_ERR_FORMAT,
                     "tensor '%s': data offset %llu is not a multiple of the alignment %u", name,
                     (unsigned long long)t->offset, f->alignment);
    uint64_t room = f->size - f->data_offset;
    if (t->offset > room || t->nbytes > room - t->offset)
        return failf(err, FP_ERR_FORMAT,
                     "tensor '%s': data at offset %llu + %llu bytes runs past the end of the "
                     "data section (%llu bytes)",
                     name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                     (unsigned long long)room);
    t->data = f->map + f->data_offset + t->offset;
    return 0;
}

/* The fixed header: magic, version, counts. Counts are checked against
 * the least space each record can take, so no allocation is absurd. */
static int parse_header(struct cur *c, struct gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv)
{
    if (c->size >= 4 && le32(c->base) != GGUF_MAGIC) {
        char m[40];
        return failf(c->err, FP_ERR_FORMAT, "not a GGUF file (magic '%s')",
                     show((const char *)c->base, 4, m, sizeof(m)));
    }
    if (c->size < 24)
        return failf(c->err, FP_ERR_FORMAT, "truncated header: %zu bytes, a GGUF header needs 24",
                     c->size);
    f->version = le32(c->base + 4);
    if (f->version == 0)
        return failf(c->err, FP_ERR_FORMAT, "invalid GGUF version 0");
    if ((f->version & 0xffff) == 0)
        return failf(c->err, FP_ERR_UNSUPPORTED,
                     "big-endian GGUF file (version reads 0x%08x): not supported", f->version);
    if (f->version != GGUF_VERSION)
        return failf(c->err, FP_ERR_UNSUPPORTED, "GGUF version %u is not supported (only %d)",
                     f->version, GGUF_VERSION);
    *n_tensors = le64(c->base + 8);
    *n_kv = le64(c->base + 16);
    c->pos = 24;
    /* A tensor info takes at least 8 (name) + 4 (dims) + 4 (type) + 8
     * (offset) bytes, a pair 8 (key) + 4 (type) + 1 (value): counts the
     * whole file could not hold are absurd. Counts that merely exceed
     * what follows are left to the parse, which then names the record
     * where the file ends. */
    if (*n_tensors > c->size / 24)
        return failf(c->err, FP_ERR_FORMAT, "tensor count %llu cannot fit in a file of %zu bytes",
                     (unsigned long long)*n_tensors, c->size);
    if (*n_kv > c->size / 13)
        return failf(c->err, FP_ERR_FORMAT, "metadata count %llu cannot fit in a file of %zu bytes",
                     (unsigned long long)*n_kv, c->size);
    return 0;
}

/* The whole file in order: header, metadata, alignment, tensor infos,
 * then each tensor's extent against the data section. */
static int parse(const uint8_t *data, size_t size, struct gguf_file *f, struct err *err)
{
    struct cur c = {data, size, 0, err};
    uint64_t n_tensors = 0, n_kv = 0;
    f->map = data;
    f->size = size;
    if (parse_header(&c, f, &n_tensors, &n_kv) || parse_kvs(&c, f, n_kv) || read_alignment(f, err))
        return -1;
    struct nameset seen;
    nameset_init(&seen);
    size_t cap = 0;
    int rc = -1;
    for (uint64_t i = 0; i < n_tensors; i++) {
        XGROW(f->tensors, cap, i + 1);
        memset(&f->tensors[i], 0, sizeof(f->tensors[i]));
        if (parse_tensor_info(&c, &f->tensors[i], i, &seen))
            goto out;
        f->n_tensors++;
    }
    /* The data section starts at the next multiple of the alignment. It
     * may lie past the end only when there is no tensor to read. */
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    f->data_offset = c.pos + pad;
    if (f->data_offset > size) {
        if (n_tensors) {
            err_set(err, FP_ERR_FORMAT,
                    "truncated: the data section would start at byte %llu, past the end of "
                    "the file (%zu bytes)",
                    (unsigned long long)f->data_offset, size);
            goto out;
        }
        f->data_offset = size;
    }
    for (size_t i = 0; i < f->n_tensors; i++)
        if (check_extent(f, &f->tensors[i], err))
            goto out;
    rc = 0;
out:
    nameset_release(&seen);
    return rc;
}

int gguf_parse(const void *data, size_t size, struct gguf_file *f, struct err *err)
{
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    if (parse(data, size, f, err) == 0)
        return 0;
    gguf_close(f);
    return -1;
}

int gguf_open(const char *path, struct gguf_file *f, struct err *err)
{
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    /* A private read-only mapping: tensor data stays in the page cache and
     * is shared by every process that maps the same model. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return failf(err, FP_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err_set(err, FP_ERR_IO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, FP_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    const uint8_t *map = NULL;
    size_t size = (size_t)st.st_size;
    if (size) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            err_set(err, FP_ERR_IO, "%s: mmap: %s", path, strerror(errno));
            goto fail;
        }
        map = m;
    }
    f->fd = fd; /* from here gguf_close unmaps and closes */
    if (parse(map, size, f, err) == 0)
        return 0;
    err_prefix(err, "%s", path);
    gguf_close(f);
    return -1;
fail:
    close(fd);
    return -1;
}

void gguf_close(struct gguf_file *f)
{
    free(f->kv);
    free(f->tensors);
    if (f->fd >= 0) {
        if (f->map && f->size)
            munmap((void *)f->map, f->size);
        close(f->fd);
    }
    memset(f, 0, sizeof(*f));
    f->fd = -1;
}

/* ---- lookups: linear scans, the counts are small (SmolLM2: 33 pairs,
 * 272 tensors) and callers look each name up once at load ---- */

bool gguf_str_eq(struct gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.p, c, n) == 0;
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key))
            return &f->kv[i];
    return NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

/*
 * Decode a scalar of type t at p. Integers set *neg (signed and < 0) and
 * *mag (the magnitude, or the raw value when non-negative); floats set
 * *fl. Returns 1 for integers, 2 for floats, 3 for bool, 0 otherwise.
 */
static int scalar(uint32_t t, const uint8_t *p, bool *neg, uint64_t *mag, double *fl)
{
    int64_t s;
    switch (t) {
    case GGUF_T_U8:
        *mag = p[0];
        *neg = false;
        return 1;
    case GGUF_T_U16:
        *mag = le16(p);
        *neg = false;
        return 1;
    case GGUF_T_U32:
        *mag = le32(p);
        *neg = false;
        return 1;
    case GGUF_T_U64:
        *mag = le64(p);
        *neg = false;
        return 1;
    case GGUF_T_I8:
        s = (int8_t)p[0];
        break;
    case GGUF_T_I16:
        s = (int16_t)le16(p);
        break;
    case GGUF_T_I32:
        s = (int32_t)le32(p);
        break;
    case GGUF_T_I64:
        s = (int64_t)le64(p);
        break;
    case GGUF_T_F32: {
        uint32_t u = le32(p);
        float v;
        memcpy(&v, &u, 4);
        *fl = v;
        return 2;
    }
    case GGUF_T_F64: {
        uint64_t u = le64(p);
        memcpy(fl, &u, 8);
        return 2;
    }
    case GGUF_T_BOOL:
        *mag = p[0];
        *neg = false;
        return 3;
    default:
        return 0;
    }
    *neg = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return 1;
}

/* Widen a decoded scalar to the getter's type, refusing what does not
 * fit: negatives as u64, values above INT64_MAX as i64, floats as ints. */
static int to_u64(int kind, bool neg, uint64_t mag, uint64_t *out)
{
    if (kind != 1 || neg)
        return -1;
    *out = mag;
    return 0;
}

static int to_i64(int kind, bool neg, uint64_t mag, int64_t *out)
{
    if (kind != 1 && kind != 3)
        return -1;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        return 0;
    }
    if (mag > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)mag;
    return 0;
}

static int to_f64(int kind, bool neg, uint64_t mag, double fl, double *out)
{
    if (kind == 2)
        *out = fl;
    else if (kind == 1)
        *out = neg ? -(double)mag : (double)mag;
    else
        return -1;
    return 0;
}

/* ---- getters: decode the pair's bytes with scalar(), then widen ---- */

int gguf_kv_u64(const struct gguf_kv *kv, uint64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    double fl = 0;
    int kind = scalar(kv->type, kv->value, &neg, &mag, &fl);
    return to_u64(kind, neg, mag, out);
}

int gguf_kv_i64(const struct gguf_kv *kv, int64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    double fl = 0;
    int kind = scalar(kv->type, kv->value, &neg, &mag, &fl);
    return kind == 3 ? -1 : to_i64(kind, neg, mag, out);
}

int gguf_kv_f64(const struct gguf_kv *kv, double *out)
{
    bool neg = false;
    uint64_t mag = 0;
    double fl = 0;
    int kind = scalar(kv->type, kv->value, &neg, &mag, &fl);
    return to_f64(kind, neg, mag, fl, out);
}

int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv ? gguf_kv_u64(kv, out) : -1;
}

int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv ? gguf_kv_i64(kv, out) : -1;
}

int gguf_get_f64(const struct gguf_file *f, const char *key, double *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv ? gguf_kv_f64(kv, out) : -1;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_T_BOOL)
        return -1;
    *out = kv->value[0] != 0;
    return 0;
}

int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_T_STR)
        return -1;
    out->len = le64(kv->value);
    out->p = (const char *)kv->value + 8;
    return 0;
}

/* ---- arrays ---- */

int gguf_arr_strs(const struct gguf_kv *kv, struct gguf_str *out)
{
    if (kv->type != GGUF_T_ARR || kv->arr_type != GGUF_T_STR)
        return -1;
    /* The parser checked every length, so this walk stays inside. */
    const uint8_t *p = kv->value;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        out[i].len = le64(p);
        out[i].p = (const char *)p + 8;
        p += 8 + out[i].len;
    }
    return 0;
}

/* Decode numeric array element i; the kind as scalar() returns it. */
static int arr_elem(const struct gguf_kv *kv, uint64_t i, bool *neg, uint64_t *mag, double *fl)
{
    uint32_t sz = vtype_size(kv->arr_type);
    if (kv->type != GGUF_T_ARR || !sz || i >= kv->arr_n)
        return 0;
    return scalar(kv->arr_type, kv->value + i * sz, neg, mag, fl);
}

int gguf_arr_i64(const struct gguf_kv *kv, uint64_t i, int64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    double fl = 0;
    int kind = arr_elem(kv, i, &neg, &mag, &fl);
    return to_i64(kind, neg, mag, out);
}

int gguf_arr_f64(const struct gguf_kv *kv, uint64_t i, double *out)
{
    bool neg = false;
    uint64_t mag = 0;
    double fl = 0;
    int kind = arr_elem(kv, i, &neg, &mag, &fl);
    return to_f64(kind == 3 ? 1 : kind, neg, mag, fl, out);
}
