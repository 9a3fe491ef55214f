/*
 * gguf: GGUF v3 files (docs/formats.md §1). The reader
 * maps the file and checks every count, offset and size against it before
 * use, so a truncated or corrupt file is a one-line error, never a crash.
 * Keys, strings and tensor data are views into the mapping. The writer
 * lays a file out in memory order and writes it atomically (streamed).
 */
#ifndef ENGINE_GGUF_H
#define ENGINE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GGUF_MAGIC             0x46554747u /* "GGUF" little-endian */
#define GGUF_VERSION           3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS          4
#define GGUF_MAX_NAME          64 /* names are at most 63 bytes */
#define GGUF_MAX_ARRAY_DEPTH   8  /* arrays of arrays nest at most this deep */

enum gguf_vtype {
    GGUF_T_U8 = 0,
    GGUF_T_I8 = 1,
    GGUF_T_U16 = 2,
    GGUF_T_I16 = 3,
    GGUF_T_U32 = 4,
    GGUF_T_I32 = 5,
    GGUF_T_F32 = 6,
    GGUF_T_BOOL = 7,
    GGUF_T_STR = 8,
    GGUF_T_ARR = 9,
    GGUF_T_U64 = 10,
    GGUF_T_I64 = 11,
    GGUF_T_F64 = 12,
};

/* A string inside the mapping: not NUL-terminated. */
struct gguf_str {
    const char *p;
    uint64_t len; /* bytes */
};

/* One metadata pair. For a scalar, value points at its encoding; for an
 * array, at the first element (after the 12-byte type and count header),
 * and value_bytes covers the elements only. Nested arrays keep their own
 * headers inside value. */
struct gguf_kv {
    struct gguf_str key;
    enum gguf_vtype type;
    enum gguf_vtype arr_type; /* element type when type == GGUF_T_ARR */
    uint64_t arr_n;           /* element count when type == GGUF_T_ARR */
    const uint8_t *value;     /* first byte of the value (for arrays: of the first element) */
    uint64_t value_bytes;     /* encoded size of the value (arrays: of the elements) */
};

struct gguf_tensor {
    char name[GGUF_MAX_NAME]; /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is contiguous; missing dims are 1 */
    uint32_t type;              /* ggml type id (quant.h) */
    uint64_t offset;            /* bytes, relative to the data section; multiple of alignment */
    uint64_t nbytes;            /* checked against the file */
    const void *data;           /* inside the mapping */
};

struct gguf_file {
    int fd;             /* -1 when parsed from memory */
    const uint8_t *map; /* the whole file */
    size_t size;        /* bytes */
    uint32_t version;
    uint32_t alignment;   /* general.alignment or 32 */
    uint64_t data_offset; /* start of the tensor data section (bytes from the file start) */
    struct gguf_kv *kv;   /* owned array, in file order */
    size_t n_kv;
    struct gguf_tensor *tensors; /* owned array, in file order */
    size_t n_tensors;
};

/*
 * Map and parse path. Returns 0, or -1 with "path: reason" in err: code
 * FP_ERR_IO when the file cannot be opened or mapped, FP_ERR_FORMAT when it
 * is corrupt or truncated (a tensor type id unknown to quant.h's table
 * included), FP_ERR_UNSUPPORTED when it is well-formed but of a kind we do
 * not read (GGUF v1/v2 or newer than v3, big-endian). Every ggml type in
 * quant.h's table parses, also those the engine does not compute with
 * (q_info()->weights false): refusing those is the model loader's job,
 * so that `fp4serve info` can still describe such files. On failure f is
 * left closed (gguf_close on it is a no-op).
 */
int gguf_open(const char *path, struct gguf_file *f, struct err *err);
/* Parse a buffer that stays valid while f is in use (fuzzing, tests).
 * Same checks and codes as gguf_open; the message has no path prefix. */
int gguf_parse(const void *data, size_t size, struct gguf_file *f, struct err *err);
/* Free the arrays and unmap; safe on a zeroed or already closed f. */
void gguf_close(struct gguf_file *f);

/* Lookups by exact name; NULL when absent. Linear in the count. */
const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);

/* Typed getters: 0 on success, -1 if missing or of an incompatible type.
 * Integer getters accept any integer type whose value fits (a negative i32
 * is not a u64); float getters accept F32, F64 and integers. Booleans and
 * strings only match their own type. */
int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out);
int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out);
int gguf_get_f64(const struct gguf_file *f, const char *key, double *out);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out);
int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out);
/* The same conversions on a pair already found (e.g. while listing all). */
int gguf_kv_u64(const struct gguf_kv *kv, uint64_t *out);
int gguf_kv_i64(const struct gguf_kv *kv, int64_t *out);
int gguf_kv_f64(const struct gguf_kv *kv, double *out);
/* Fill out[0..kv->arr_n) with views of a string array's elements (one pass,
 * no allocation). -1 if kv is not an array of strings. */
int gguf_arr_strs(const struct gguf_kv *kv, struct gguf_str *out);
/* Element i of a numeric array, widened; -1 if not numeric, out of range,
 * or (i64) a u64 above INT64_MAX. Bool arrays read as 0/1. */
int gguf_arr_i64(const struct gguf_kv *kv, uint64_t i, int64_t *out);
int gguf_arr_f64(const struct gguf_kv *kv, uint64_t i, double *out);
/* true if s equals the C string c. */
bool gguf_str_eq(struct gguf_str s, const char *c);
/* "u32", "str", "arr", ... for a value type; "?" when out of range. */
const char *gguf_vtype_name(uint32_t type);
/* ggml's lower-case name for a tensor type id ("q4_1", "nvfp4", also types
 * the engine does not compute with such as "iq2_xxs"); "?" when unknown. */
const char *gguf_type_name(uint32_t type);

/* Bytes of a tensor of ggml type `type` and dims ne[0..n_dims) (a 0-d
 * tensor is one element): 0, or -1 when the type is unknown to quant.h,
 * ne[0] is not a multiple of its block or the size overflows. */
int gguf_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *out);

/* ---- writer (gguf_write.c) ---- */

/*
 * The writer collects metadata (encoded at once) and tensor descriptions,
 * then streams the file out in one pass: header, metadata, tensor infos,
 * padding, data (each tensor padded to the alignment). An alignment other
 * than 32 is recorded as general.alignment automatically. Mistakes by the
 * caller (a duplicate key or tensor name, a name of 64+ bytes, a type
 * unknown to quant.h, ne[0] not a multiple of the block) are remembered
 * and reported by gguf_writer_save as FP_ERR_USAGE.
 */
typedef struct gguf_writer gguf_writer;

/* Fills dst[0..nbytes) with a tensor's data at save time; returns 0, or -1
 * with err set (which aborts the save). */
typedef int (*gguf_fill_fn)(void *ctx, void *dst, uint64_t nbytes, struct err *err);

/* alignment: a power of two (0 means 32). */
gguf_writer *gguf_writer_new(uint32_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n);
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n);
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n);
/* Copy every metadata pair of src verbatim (nested arrays included) except
 * general.alignment and those for which skip(key, ctx) is true (skip may
 * be NULL). */
void gguf_w_copy_kv(gguf_writer *w, const struct gguf_file *src,
                    bool (*skip)(const char *key, void *ctx), void *ctx);
/* Add a tensor: dims ne[0..n_dims), ggml type, data of nbytes (copied). */
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                   uint32_t type, const void *data, uint64_t nbytes);
/* Add a tensor whose data fill(ctx, ...) produces during gguf_writer_save,
 * so a large model never sits in memory whole; ctx must outlive the save.
 * Tensors are filled in the order they were added. */
void gguf_w_tensor_fill(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, gguf_fill_fn fill, void *ctx);
/* Write the file atomically (temporary name, fsync, rename). Returns 0 or
 * -1 with err set: FP_ERR_IO for the file system, FP_ERR_USAGE for a
 * recorded mistake, or whatever a fill function set. */
int gguf_writer_save(gguf_writer *w, const char *path, struct err *err);

#endif
