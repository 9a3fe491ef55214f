/*
 * quantize: `fp4serve quantize` (quantize.h). A plan is made first (one
 * entry per output tensor: copy, requantize, or a fresh NVFP4 scale), then
 * the GGUF writer streams the output and each requantized tensor is
 * produced by model_requant_matrix_opts inside its fill callback.
 */
#include "model/quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp4.h"
#include "log.h"
#include "xalloc.h"

#include "model/model.h"
#include "model/threadpool.h"

#include "format/gguf.h"
#include "format/quant.h"

/* llama.cpp's LLAMA_FTYPE_MOSTLY_* values (gguf-py LlamaFileType). MXFP4 has
 * only MXFP4_MOE (38), which llama-quantize also writes for dense models. */
static const struct qz_type qz_types[] = {
    {"mxfp4", Q_MXFP4, 38}, {"nvfp4", Q_NVFP4, 39}, {"q8_0", Q_Q8_0, 7},  {"q4_0", Q_Q4_0, 2},
    {"q4_1", Q_Q4_1, 3},    {"f16", Q_F16, 1},      {"bf16", Q_BF16, 32}, {"f32", Q_F32, 0},
};
#define N_TYPES (sizeof(qz_types) / sizeof(qz_types[0]))

const struct qz_type *qz_type_find(const char *name)
{
    for (size_t i = 0; name && i < N_TYPES; i++)
        if (strcmp(qz_types[i].name, name) == 0)
            return &qz_types[i];
    return NULL;
}

const struct qz_type *qz_type_of(uint32_t type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (qz_types[i].type == type)
            return &qz_types[i];
    return NULL;
}

const char *qz_type_names(void)
{
    return "mxfp4|nvfp4|q8_0|q4_0|q4_1|f16|bf16|f32";
}

/* The embedding and the output head: Q8_0 unless --head same. */
static const char *const head_names[] = {"token_embd.weight", "output.weight"};

enum action {
    ACT_COPY,    /* data copied verbatim */
    ACT_REQUANT, /* 2-D weight (or 3-D: one matrix per expert) requantized to `type` */
    ACT_SCALE,   /* the F32 NVFP4 scale of the REQUANT entry before it: [1], or one per
                    expert ([n_expert]) for a 3-D tensor */
};

/* One output tensor. */
struct entry {
    enum action act;
    const struct gguf_tensor *t;    /* input tensor (for ACT_SCALE: the weight's) */
    char name[GGUF_MAX_NAME];       /* output name */
    uint32_t type;                  /* output type */
    struct q_matrix src;            /* ACT_REQUANT: the input's first slice as a matrix */
    int64_t n_slices;               /* ACT_REQUANT: experts of a 3-D tensor (ne[2]), else 1 */
    const float *in_scales;         /* ACT_REQUANT: the input's per-slice scales, NULL = 1 */
    float scale[MODEL_MAX_EXPERTS]; /* ACT_REQUANT to NVFP4: s2 of each slice, set when filled */
    struct entry *weight;           /* ACT_SCALE: the entry whose s2 this stores */
};

struct plan {
    struct entry *e; /* (n) in output order, owned */
    size_t n;
    tp_pool *pool;
    struct q_quant_opts qo;
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* "<base>.<suffix>" for a "<base>.weight" name; false if name is not one
 * or the result would not fit a GGUF name. */
static bool sibling(const char *weight_name, const char *suffix, char *out, size_t cap)
{
    if (!ends_with(weight_name, ".weight"))
        return false;
    int n = snprintf(out, cap, "%.*s.%s", (int)(strlen(weight_name) - 7), weight_name, suffix);
    return n > 0 && (size_t)n < cap && (size_t)n < GGUF_MAX_NAME;
}

static bool is_head(const char *name)
{
    for (size_t i = 0; i < sizeof(head_names) / sizeof(head_names[0]); i++)
        if (strcmp(name, head_names[i]) == 0)
            return true;
    return false;
}

/* The F32 scales stored beside t (n: 1 per tensor, or one per expert of a
 * 3-D tensor): *out points at them, or is NULL (absent: 1). */
static int read_scale(const struct gguf_file *f, const struct gguf_tensor *t, int64_t n,
                      const float **out, struct err *err)
{
    char name[GGUF_MAX_NAME];
    *out = NULL;
    if (!sibling(t->name, "scale", name, sizeof(name)))
        return 0;
    const struct gguf_tensor *s = gguf_find_tensor(f, name);
    if (!s)
        return 0;
    if (s->type != Q_F32 || s->nbytes < 4 * (uint64_t)n)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is not %lld F32 scale(s)", name,
                       (long long)n),
               -1;
    const float *v = s->data;
    for (int64_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, v + i, 4);
        if (!isfinite(x) || x == 0)
            return err_set(err, FP_ERR_FORMAT, "tensor '%s' = %g is not a usable scale", name, x),
                   -1;
    }
    *out = v;
    return 0;
}

/* The type a 2-D weight or 3-D expert tensor should get, or its own type
 * when it stays. A MoE router (ffn_gate_inp) stays, as llama-quantize
 * keeps it: top-k selection is sensitive to its rounding. */
static uint32_t target_of(const struct gguf_tensor *t, const struct qz_opts *o, bool *kept_shape)
{
    *kept_shape = false;
    if ((t->n_dims != 2 && t->n_dims != 3) || !ends_with(t->name, ".weight") ||
        ends_with(t->name, "ffn_gate_inp.weight"))
        return t->type;
    if (t->n_dims == 3 && (t->ne[2] < 1 || t->ne[2] > MODEL_MAX_EXPERTS))
        return t->type;
    uint32_t want = is_head(t->name) && !o->head_same ? Q_Q8_0 : o->type;
    const struct q_type_info *src = q_info(t->type), *dst = q_info(want);
    if (t->type == want || !src || !src->weights)
        return t->type; /* already there, or a type we cannot dequantize */
    if (t->ne[0] % dst->block != 0) {
        *kept_shape = true;
        return t->type;
    }
    return want;
}

/* true if name is the ".scale" or ".input_scale" of a weight that is being
 * requantized: its meaning is folded into (or void for) the new values. */
static bool obsolete_sibling(const struct gguf_file *f, const char *name, const bool *requant)
{
    static const char *const suffixes[] = {".scale", ".input_scale"};
    for (size_t s = 0; s < sizeof(suffixes) / sizeof(suffixes[0]); s++) {
        if (!ends_with(name, suffixes[s]))
            continue;
        char weight[GGUF_MAX_NAME + 8];
        snprintf(weight, sizeof(weight), "%.*s.weight", (int)(strlen(name) - strlen(suffixes[s])),
                 name);
        for (size_t i = 0; i < f->n_tensors; i++)
            if (requant[i] && strcmp(f->tensors[i].name, weight) == 0)
                return true;
    }
    return false;
}

/*
 * Decide every output tensor, in input order. Two passes: the first picks
 * each tensor's target type (so the second knows which ".scale" and
 * ".input_scale" siblings became obsolete); the second lists the output
 * entries, puts a fresh scale entry right after each NVFP4 weight (the
 * writer fills tensors in order, so the weight's s2 is known by then) and
 * checks each requantized tensor's size against the file.
 */
static int make_plan(const struct gguf_file *f, const struct qz_opts *o, struct plan *p,
                     struct qz_stats *st, struct err *err)
{
    bool *requant = xcalloc(f->n_tensors + 1, sizeof(bool));
    uint32_t *target = xcalloc(f->n_tensors + 1, sizeof(uint32_t));
    int rc = -1;
    for (size_t i = 0; i < f->n_tensors; i++) {
        bool kept_shape;
        target[i] = target_of(&f->tensors[i], o, &kept_shape);
        requant[i] = target[i] != f->tensors[i].type;
        if ((f->tensors[i].n_dims == 2 || f->tensors[i].n_dims == 3) && !requant[i] &&
            ends_with(f->tensors[i].name, ".weight"))
            st->n_kept++;
        if (kept_shape && !st->kept_first[0])
            snprintf(st->kept_first, sizeof(st->kept_first), "%s", f->tensors[i].name);
    }
    /* at most one extra (scale) entry per input tensor */
    p->e = xcalloc(2 * f->n_tensors + 1, sizeof(*p->e));
    for (size_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        st->bytes_in += t->nbytes;
        if (obsolete_sibling(f, t->name, requant))
            continue;
        struct entry *e = &p->e[p->n++];
        e->t = t;
        e->type = target[i];
        e->act = requant[i] ? ACT_REQUANT : ACT_COPY;
        snprintf(e->name, sizeof(e->name), "%s", t->name);
        if (!requant[i])
            continue;
        e->src = (struct q_matrix){t->type,
                                   (int64_t)t->ne[1],
                                   (int64_t)t->ne[0],
                                   t->data,
                                   q_row_bytes(t->type, (int64_t)t->ne[0]),
                                   1.0f};
        e->n_slices = t->n_dims == 3 ? (int64_t)t->ne[2] : 1;
        if ((uint64_t)e->src.row_bytes * t->ne[1] * (uint64_t)e->n_slices > t->nbytes) {
            err_set(err, FP_ERR_FORMAT, "tensor '%s' is shorter than its shape", t->name);
            goto out;
        }
        if (read_scale(f, t, e->n_slices, &e->in_scales, err))
            goto out;
        if (e->type != Q_NVFP4)
            continue;
        struct entry *s = &p->e[p->n++];
        s->act = ACT_SCALE;
        s->t = t;
        s->type = Q_F32;
        s->weight = e;
        /* An input scale of this name, if any, was dropped as obsolete above. */
        if (!sibling(t->name, "scale", s->name, sizeof(s->name))) {
            err_set(err, FP_ERR_FORMAT, "tensor '%s': no room for its '.scale' name", t->name);
            goto out;
        }
    }
    rc = 0;
out:
    free(requant);
    free(target);
    return rc;
}

/* ---- fill callbacks (run while the writer streams the file) ---- */

struct fill_ctx {
    struct plan *p;
    struct entry *e;
};

/* The writer's buffer for a requantized tensor: the loader's requantizer
 * writes straight into it (on the plan's thread pool) and reports s2. */
static int fill_requant(void *varg, void *dst, uint64_t nbytes, struct err *err)
{
    struct fill_ctx *c = varg;
    struct entry *e = c->e;
    size_t slice = q_row_bytes(e->type, e->src.cols) * (size_t)e->src.rows;
    if (slice * (uint64_t)e->n_slices != nbytes)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s': size mismatch", e->name), -1;
    /* each expert of a 3-D tensor on its own, with its own NVFP4 s2 */
    for (int64_t x = 0; x < e->n_slices; x++) {
        struct q_matrix in = e->src, out;
        in.data = (const uint8_t *)e->src.data + (size_t)x * e->src.row_bytes * (size_t)in.rows;
        if (e->in_scales)
            memcpy(&in.scale, e->in_scales + x, 4);
        model_requant_matrix_opts(&in, e->type, (uint8_t *)dst + (size_t)x * slice, &out,
                                  c->p->pool, &c->p->qo);
        e->scale[x] = out.scale;
    }
    return 0;
}

/* A tensor kept as it is: its bytes from the input's mapping. */
static int fill_copy(void *varg, void *dst, uint64_t nbytes, struct err *err)
{
    struct fill_ctx *c = varg;
    if (nbytes > c->e->t->nbytes)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s': size mismatch", c->e->name), -1;
    memcpy(dst, c->e->t->data, nbytes);
    return 0;
}

/* An NVFP4 weight's s2 as a little-endian F32 (the host order, as GGUF). */
static int fill_scale(void *varg, void *dst, uint64_t nbytes, struct err *err)
{
    struct fill_ctx *c = varg;
    if (nbytes != 4 * (uint64_t)c->e->weight->n_slices)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s': size mismatch", c->e->name), -1;
    /* filled after its weight: the writer keeps order */
    memcpy(dst, c->e->weight->scale, nbytes);
    return 0;
}

/* Metadata copy filter: general.file_type is written anew for the target. */
static bool skip_file_type(const char *key, void *ctx)
{
    (void)ctx;
    return strcmp(key, "general.file_type") == 0;
}

/* true if a and b name the same existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int qz_quantize_file(const char *in_path, const char *out_path, const struct qz_opts *o,
                     struct qz_stats *st, struct err *err)
{
    struct qz_stats local;
    st = st ? st : &local;
    memset(st, 0, sizeof(*st));
    st->file_type = -1;
    const struct qz_type *qt = qz_type_of(o->type);
    if (!qt)
        return err_set(err, FP_ERR_USAGE, "--type: type %u is not a target (use %s)", o->type,
                       qz_type_names()),
               -1;
    /* The input stays mapped while the output streams: they must differ
     * (the rename would also pull the file from under the mapping). */
    if (same_file(in_path, out_path))
        return err_set(err, FP_ERR_USAGE, "'%s': output would overwrite the input", out_path), -1;
    struct gguf_file f;
    if (gguf_open(in_path, &f, err) != 0)
        return -1;
    struct plan p = {0};
    struct fill_ctx *ctx = NULL;
    gguf_writer *w = NULL;
    int rc = -1;
    if (make_plan(&f, o, &p, st, err) != 0) {
        err_prefix(err, "%s", in_path);
        goto out;
    }
    p.qo.mxfp4_search = o->mxfp4_search;
    p.pool = tp_new(o->threads);
    /* Same alignment as the input; metadata copied in order, file type last. */
    w = gguf_writer_new(f.alignment);
    gguf_w_copy_kv(w, &f, skip_file_type, NULL);
    if (qt->llama_ftype >= 0) {
        gguf_w_u32(w, "general.file_type", (uint32_t)qt->llama_ftype);
        st->file_type = qt->llama_ftype;
    }
    /* Describe every tensor now (offsets are fixed before any data is
     * written); the data comes from the fill callbacks during the save. */
    ctx = xcalloc(p.n + 1, sizeof(*ctx));
    for (size_t i = 0; i < p.n; i++) {
        struct entry *e = &p.e[i];
        const struct gguf_tensor *t = e->t;
        ctx[i] = (struct fill_ctx){&p, e};
        if (e->act == ACT_COPY) {
            gguf_w_tensor_fill(w, e->name, t->n_dims, t->ne, t->type, fill_copy, &ctx[i]);
            st->bytes_out += t->nbytes;
        } else if (e->act == ACT_REQUANT) {
            gguf_w_tensor_fill(w, e->name, t->n_dims, t->ne, e->type, fill_requant, &ctx[i]);
            st->bytes_out +=
                q_row_bytes(e->type, e->src.cols) * (uint64_t)e->src.rows * (uint64_t)e->n_slices;
            st->n_requant++;
        } else {
            uint64_t n = (uint64_t)e->weight->n_slices;
            gguf_w_tensor_fill(w, e->name, 1, &n, Q_F32, fill_scale, &ctx[i]);
            st->bytes_out += 4 * n;
            st->n_scales++;
        }
    }
    st->n_tensors = p.n;
    if (gguf_writer_save(w, out_path, err) != 0)
        goto out;
    rc = 0;
out:
    gguf_writer_free(w);
    tp_free(p.pool);
    free(ctx);
    free(p.e);
    gguf_close(&f);
    return rc;
}
