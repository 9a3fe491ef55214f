/*
 * fp4_info: `fp4serve info PATH` prints what a GGUF file holds: the
 * architecture and its hyperparameters, a tokenizer summary, and a table
 * of tensors by type with counts, bytes and bits per weight. --all adds
 * every metadata pair and every tensor. A corrupt file is the reader's
 * one-line error and its exit status.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "xalloc.h"

#include "format/gguf.h"
#include "format/quant.h"
#include "text/tokenizer.h"

/* One hyperparameter line: label, key suffix after "ARCH.", kind. The
 * keys are llama.cpp's (docs/formats.md §2.1); missing ones
 * print "-", since other architectures and partial files exist, but for
 * the HP_OPT and HP_OPT_FLOAT ones (head dimension, experts, gpt-oss's
 * window and YaRN), printed only when present. */
enum hp_kind { HP_INT, HP_FLOAT, HP_OPT, HP_OPT_FLOAT };
struct hparam {
    const char *label;
    const char *key; /* appended to "<arch>." */
    enum hp_kind kind;
};

static const struct hparam hparams[] = {
    {"layers", "block_count", HP_INT},
    {"embedding", "embedding_length", HP_INT},
    {"heads", "attention.head_count", HP_INT},
    {"kv heads", "attention.head_count_kv", HP_INT},
    {"feed-forward", "feed_forward_length", HP_INT},
    {"context", "context_length", HP_INT},
    {"rope dims", "rope.dimension_count", HP_INT},
    {"rope base", "rope.freq_base", HP_FLOAT},
    {"rms eps", "attention.layer_norm_rms_epsilon", HP_FLOAT},
    {"vocab", "vocab_size", HP_INT},
    {"head dim", "attention.key_length", HP_OPT},
    {"experts", "expert_count", HP_OPT},
    {"experts used", "expert_used_count", HP_OPT},
    {"expert ff", "expert_feed_forward_length", HP_OPT},
    {"window", "attention.sliding_window", HP_OPT},
    {"rope scale", "rope.scaling.factor", HP_OPT_FLOAT},
    {"rope orig ctx", "rope.scaling.original_context_length", HP_OPT},
};

/* The special-token ids worth showing, in this order. */
static const struct {
    const char *label;
    const char *key;
} specials[] = {
    {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
    {"eot", "tokenizer.ggml.eot_token_id"},     {"unk", "tokenizer.ggml.unknown_token_id"},
    {"pad", "tokenizer.ggml.padding_token_id"},
};

/* Print a file string, with control bytes escaped so the output stays one
 * line per item. */
static void put_view(struct gguf_str s, size_t max)
{
    for (uint64_t i = 0; i < s.len && i < max; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    if (s.len > max)
        fputs("...", stdout);
}

/* The hparams table for architecture arch, one "label value" line each. */
static void print_hparams(const struct gguf_file *f, struct gguf_str arch)
{
    for (size_t i = 0; i < sizeof(hparams) / sizeof(hparams[0]); i++) {
        char *key = xasprintf("%.*s.%s", (int)arch.len, arch.p, hparams[i].key);
        uint64_t u;
        double d;
        if (hparams[i].kind == HP_OPT || hparams[i].kind == HP_OPT_FLOAT) {
            if (hparams[i].kind == HP_OPT && gguf_get_u64(f, key, &u) == 0)
                printf("%-14s%" PRIu64 "\n", hparams[i].label, u);
            else if (hparams[i].kind == HP_OPT_FLOAT && gguf_get_f64(f, key, &d) == 0)
                printf("%-14s%g\n", hparams[i].label, d);
            free(key);
            continue;
        }
        printf("%-14s", hparams[i].label);
        if (hparams[i].kind == HP_INT && gguf_get_u64(f, key, &u) == 0)
            printf("%" PRIu64 "\n", u);
        else if (hparams[i].kind == HP_FLOAT && gguf_get_f64(f, key, &d) == 0)
            printf("%g\n", d);
        else
            printf("-\n");
        free(key);
    }
}

/* Text of token id, or NULL when the id is outside the token list. */
static struct gguf_str token_text(const struct gguf_str *toks, uint64_t n, uint64_t id)
{
    struct gguf_str none = {NULL, 0};
    return id < n ? toks[id] : none;
}

/* The end-of-generation set as the tokenizer derives it (llama.cpp's
 * rules), or why the tokenizer would not load. */
static void print_eog(const struct gguf_file *f, const struct gguf_str *toks, uint64_t n_tok)
{
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    printf("%-14s", "eog");
    if (tok_load(f, &v, &err) != 0) {
        printf("- (%s)\n", err.msg);
        return;
    }
    size_t n;
    const int32_t *ids = tok_eog_ids(v, &n);
    for (size_t i = 0; i < n; i++) {
        printf("%s%d", i ? ", " : "", ids[i]);
        struct gguf_str t = token_text(toks, n_tok, (uint64_t)ids[i]);
        if (t.p) {
            printf(" '");
            put_view(t, 40);
            putchar('\'');
        }
    }
    printf("%s\n", n ? "" : "-");
    tok_free(v);
}

/* Tokenizer model and pre-tokenizer, token and merge counts, the special
 * ids with their texts, and the end-of-generation set. */
static void print_tokenizer(const struct gguf_file *f)
{
    struct gguf_str model, pre;
    if (gguf_get_str(f, "tokenizer.ggml.model", &model) != 0) {
        printf("%-14s-\n", "tokenizer");
        return;
    }
    printf("%-14s", "tokenizer");
    put_view(model, 32);
    if (gguf_get_str(f, "tokenizer.ggml.pre", &pre) == 0) {
        printf(", pre '");
        put_view(pre, 32);
        putchar('\'');
    }
    const struct gguf_kv *tk = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const struct gguf_kv *mk = gguf_find_kv(f, "tokenizer.ggml.merges");
    uint64_t n_tok = tk && tk->type == GGUF_T_ARR && tk->arr_type == GGUF_T_STR ? tk->arr_n : 0;
    printf(", %" PRIu64 " tokens", n_tok);
    if (mk && mk->type == GGUF_T_ARR)
        printf(", %" PRIu64 " merges", mk->arr_n);
    putchar('\n');

    struct gguf_str *toks = NULL;
    if (n_tok) {
        toks = xmalloc((size_t)n_tok * sizeof(*toks));
        gguf_arr_strs(tk, toks);
    }
    printf("%-14s", "special");
    int shown = 0;
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        uint64_t id;
        if (gguf_get_u64(f, specials[i].key, &id) != 0)
            continue;
        printf("%s%s %" PRIu64, shown++ ? ", " : "", specials[i].label, id);
        struct gguf_str t = token_text(toks, n_tok, id);
        if (t.p) {
            printf(" '");
            put_view(t, 40);
            putchar('\'');
        } else {
            printf(" (out of range)");
        }
    }
    bool add_bos;
    if (gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos) == 0)
        printf("%sadd_bos %s", shown++ ? ", " : "", add_bos ? "true" : "false");
    printf("%s\n", shown ? "" : "-");
    print_eog(f, toks, n_tok);
    free(toks);
}

/* Per-type totals for the tensor table. */
struct type_sum {
    uint32_t type;
    uint64_t count, elems, bytes;
};

/* Tensors grouped by type: count, elements, bytes, MiB and bits per weight,
 * with a total row; a type the engine does not compute with is marked. */
static void print_tensor_table(const struct gguf_file *f)
{
    struct type_sum *sums = xcalloc(f->n_tensors + 1, sizeof(*sums));
    size_t n = 0;
    uint64_t all_elems = 0, all_bytes = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        uint64_t elems = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        size_t k = 0;
        while (k < n && sums[k].type != t->type)
            k++;
        if (k == n)
            sums[n++].type = t->type;
        sums[k].count++;
        sums[k].elems += elems;
        sums[k].bytes += t->nbytes;
        all_elems += elems;
        all_bytes += t->nbytes;
    }
    /* by type id, a stable and familiar order */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && sums[j - 1].type > sums[j].type; j--) {
            struct type_sum tmp = sums[j];
            sums[j] = sums[j - 1];
            sums[j - 1] = tmp;
        }
    printf("\n%-8s %7s %14s %14s %10s %6s\n", "type", "tensors", "elements", "bytes", "MiB", "bpw");
    for (size_t i = 0; i < n; i++) {
        const struct q_type_info *ti = q_info(sums[i].type);
        printf("%-8s %7" PRIu64 " %14" PRIu64 " %14" PRIu64 " %10.2f %6.3f%s\n",
               gguf_type_name(sums[i].type), sums[i].count, sums[i].elems, sums[i].bytes,
               (double)sums[i].bytes / (1 << 20),
               sums[i].elems ? 8.0 * (double)sums[i].bytes / (double)sums[i].elems : 0.0,
               ti && ti->weights ? "" : "  (fp4serve does not compute with this type)");
    }
    printf("%-8s %7zu %14" PRIu64 " %14" PRIu64 " %10.2f %6.3f\n", "total", f->n_tensors, all_elems,
           all_bytes, (double)all_bytes / (1 << 20),
           all_elems ? 8.0 * (double)all_bytes / (double)all_elems : 0.0);
    free(sums);
}

/* One metadata value for --all: scalars in full, strings cut, arrays as
 * their type and length with the first few elements. */
static void print_value(const struct gguf_kv *kv)
{
    int64_t i;
    uint64_t u;
    double d;
    if (kv->type == GGUF_T_ARR) {
        printf("arr[%s] x %" PRIu64, gguf_vtype_name(kv->arr_type), kv->arr_n);
        if (kv->arr_type == GGUF_T_STR && kv->arr_n) {
            struct gguf_str *s = xmalloc((size_t)kv->arr_n * sizeof(*s));
            gguf_arr_strs(kv, s);
            printf(": ");
            for (uint64_t k = 0; k < kv->arr_n && k < 4; k++) {
                printf("%s'", k ? ", " : "");
                put_view(s[k], 24);
                putchar('\'');
            }
            free(s);
        } else if (kv->arr_type != GGUF_T_ARR && kv->arr_n) {
            printf(": ");
            for (uint64_t k = 0; k < kv->arr_n && k < 8; k++)
                if (gguf_arr_f64(kv, k, &d) == 0)
                    printf("%s%g", k ? ", " : "", d);
        }
        if (kv->arr_n > 8 || (kv->arr_type == GGUF_T_STR && kv->arr_n > 4))
            printf(", ...");
        return;
    }
    printf("%s ", gguf_vtype_name(kv->type));
    if (kv->type == GGUF_T_STR) {
        struct gguf_str s = {(const char *)kv->value + 8, kv->value_bytes - 8};
        putchar('\'');
        put_view(s, 60);
        putchar('\'');
    } else if (kv->type == GGUF_T_BOOL) {
        printf("%s", kv->value[0] ? "true" : "false");
    } else if (kv->type == GGUF_T_F32 || kv->type == GGUF_T_F64) {
        if (gguf_kv_f64(kv, &d) == 0)
            printf("%g", d);
    } else if (gguf_kv_i64(kv, &i) == 0) {
        printf("%" PRId64, i);
    } else if (gguf_kv_u64(kv, &u) == 0) {
        printf("%" PRIu64, u);
    }
}

/* --all: every metadata pair, then every tensor with its type, dims, size
 * and absolute file offset. */
static void print_all(const struct gguf_file *f)
{
    printf("\nmetadata (%zu):\n", f->n_kv);
    for (size_t i = 0; i < f->n_kv; i++) {
        printf("  ");
        put_view(f->kv[i].key, 64);
        printf(" = ");
        print_value(&f->kv[i]);
        putchar('\n');
    }
    printf("\ntensors (%zu):\n", f->n_tensors);
    for (size_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        printf("  %-32s %-6s [", t->name, gguf_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf("%s%" PRIu64, d ? ", " : "", t->ne[d]);
        printf("] %" PRIu64 " bytes at %" PRIu64 "\n", t->nbytes, f->data_offset + t->offset);
    }
}

static const struct opt_cmd usage = {
    "fp4serve", "info", "PATH",
    "Print the architecture, hyperparameters, tokenizer and tensors of a GGUF file.", FP_ERR_USAGE};

/* Exit status: 0, FP_ERR_USAGE for bad arguments, or the reader's code
 * (FP_ERR_IO, FP_ERR_FORMAT, FP_ERR_UNSUPPORTED) with its one-line error. */
int fp4_info(int argc, char **argv)
{
    bool all = false;
    const struct opt opts[] = {
        {"all", 'a', OPT_BOOL, &all, NULL, "also list every metadata pair and every tensor"},
    };
    struct strvec pos = STRVEC_INIT;
    struct err err;
    struct gguf_file f;
    int rc = FP_ERR_USAGE;
    int p = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &pos, &err);
    if (p == 1) {
        rc = FP_OK;
        goto out;
    }
    if (p == 0 && pos.n != 1)
        err_set(&err, FP_ERR_USAGE, "info takes one GGUF path (see --help)");
    if (err.code || gguf_open(pos.v[0], &f, &err) != 0) {
        log_error("%s", err.msg);
        rc = err.code;
        goto out;
    }
    struct gguf_str arch = {"-", 1}, name;
    gguf_get_str(&f, "general.architecture", &arch);
    printf("%-14s%s: GGUF v%u, %zu tensors, %zu metadata pairs, alignment %u, %.1f MiB\n", "file",
           pos.v[0], f.version, f.n_tensors, f.n_kv, f.alignment, (double)f.size / (1 << 20));
    if (gguf_get_str(&f, "general.name", &name) == 0) {
        printf("%-14s", "name");
        put_view(name, 80);
        putchar('\n');
    }
    printf("%-14s", "architecture");
    put_view(arch, 40);
    putchar('\n');
    print_hparams(&f, arch);
    print_tokenizer(&f);
    print_tensor_table(&f);
    if (all)
        print_all(&f);
    gguf_close(&f);
    rc = FP_OK;
out:
    strvec_release(&pos);
    return rc;
}
