/*
 * Unit tests for engine/model/eval (`fp4serve eval`) on the synthetic tiny model
 * written at test time: perplexity of a model with all-zero embeddings is
 * exactly the vocabulary size; perplexity, KL and top-1 of a tiny text
 * against an independent token-by-token computation (windows, BOS and
 * targets included); native vs native gives KL 0 and 100% agreement; a
 * real requantization gives KL > 0; chunking and threads change nothing;
 * the refusals.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "format/gguf.h"
#include "format/quant.h"
#include "format/synth.h"
#include "model/eval.h"
#include "model/model.h"
#include "text/tokenizer.h"

static const char *synth(const char *name, uint64_t seed)
{
    char *path = test_tmp_path(name);
    struct err err;
    err_init(&err);
    struct synth_opts o = {synth_preset_find("tiny"), Q_F16, seed};
    if (synth_write(&o, path, &err) != 0)
        abort();
    return path;
}

static const char *tiny_model(void)
{
    static const char *path;
    return path ? path : (path = synth("tiny.gguf", 3));
}

/* Another tiny model (other seed): far from the first, so top-1 disagrees often. */
static const char *other_model(void)
{
    static const char *path;
    return path ? path : (path = synth("other.gguf", 4));
}

/* The tiny model with an all-zero token embedding (and so, tied, an
 * all-zero head): the residual stream stays 0 and every logit is 0. */
static const char *zero_model(void)
{
    static char *path;
    if (path)
        return path;
    path = test_tmp_path("zero.gguf");
    struct gguf_file f;
    struct err err;
    err_init(&err);
    if (gguf_open(tiny_model(), &f, &err) != 0)
        abort();
    gguf_writer *w = gguf_writer_new(f.alignment);
    gguf_w_copy_kv(w, &f, NULL, NULL);
    for (size_t i = 0; i < f.n_tensors; i++) {
        const struct gguf_tensor *t = &f.tensors[i];
        void *zeros = xcalloc(1, t->nbytes);
        bool emb = strcmp(t->name, "token_embd.weight") == 0;
        gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type, emb ? zeros : t->data, t->nbytes);
        free(zeros);
    }
    if (gguf_writer_save(w, path, &err) != 0)
        abort();
    gguf_writer_free(w);
    gguf_close(&f);
    return path;
}

static struct model *load(const char *path, const char *quant, const struct ev_opts *eo,
                          int threads)
{
    struct err err;
    err_init(&err);
    struct model_opts o = {.threads = threads};
    ev_model_opts(&o, eo);
    if (model_opts_parse(&o, quant, NULL, NULL, NULL, &err) != 0)
        return NULL;
    struct model *m = model_new(path, &o, &err);
    if (!m)
        fprintf(stderr, "load: %s\n", err.msg);
    return m;
}

/* The tiny text, tokenized with the model's own tokenizer. */
static int32_t *tiny_text(const struct model *m, size_t *n)
{
    static const char text[] = "the river ran past the mill, and the mill ran on.";
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    int32_t *ids = NULL;
    size_t cap = 0;
    *n = 0;
    if (tok_load(&m->file, &v, &err) != 0 ||
        tok_encode(v, text, strlen(text), false, false, &ids, n, &cap, &err) != 0)
        abort();
    tok_free(v);
    return ids;
}

/* Log-softmax of one row in long double: lse, the value at t, argmax. */
static long double lse_of(const float *x, int V, int *arg)
{
    long double mx = x[0], s = 0;
    *arg = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > mx) {
            mx = x[i];
            *arg = i;
        }
    for (int i = 0; i < V; i++)
        s += expl((long double)x[i] - mx);
    return mx + logl(s);
}

/*
 * The expected result, computed the slow way: every window token by token
 * (decode steps, one logits row each), sums in long double.
 */
static void naive(struct model *m, struct model *ref, const int32_t *tok, int64_t n, int ctx,
                  int32_t bos, struct ev_result *r)
{
    int V = m->cfg.n_vocab;
    memset(r, 0, sizeof(*r));
    long double nll = 0, rnll = 0, kl = 0;
    int64_t agree = 0, per = ctx - (bos >= 0);
    float *lq = xmalloc(sizeof(float) * (size_t)V), *lr = xmalloc(sizeof(float) * (size_t)V);
    struct err err;
    err_init(&err);
    for (int64_t w0 = 0; w0 < n; w0 += per) {
        int32_t win[64];
        int L = 0;
        if (bos >= 0)
            win[L++] = bos;
        for (int64_t i = w0; i < n && i < w0 + per; i++)
            win[L++] = tok[i];
        if (L < 2)
            break;
        r->n_windows++;
        r->n_tokens += L - (bos >= 0);
        for (int p = 0; p + 1 < L; p++) {
            struct model_seq s = {0, p, 1, &win[p], MODEL_LOGITS_LAST, NULL};
            if (model_step(m, &s, 1, &err) != 0)
                abort();
            memcpy(lq, s.out, sizeof(float) * (size_t)V);
            s = (struct model_seq){0, p, 1, &win[p], MODEL_LOGITS_LAST, NULL};
            if (model_step(ref, &s, 1, &err) != 0)
                abort();
            memcpy(lr, s.out, sizeof(float) * (size_t)V);
            int aq, ar;
            long double lseq = lse_of(lq, V, &aq), lser = lse_of(lr, V, &ar);
            nll += lseq - lq[win[p + 1]];
            rnll += lser - lr[win[p + 1]];
            long double k = 0;
            for (int i = 0; i < V; i++) {
                long double a = lr[i] - lser, b = lq[i] - lseq;
                k += expl(a) * (a - b);
            }
            kl += k;
            agree += aq == ar;
            r->n_scored++;
        }
    }
    r->nll = (double)(nll / r->n_scored);
    r->ref_nll = (double)(rnll / r->n_scored);
    r->kl = (double)(kl / r->n_scored);
    r->top1 = (double)agree / (double)r->n_scored;
    free(lq);
    free(lr);
}

TEST(zero_model_perplexity_is_the_vocabulary_size)
{
    struct ev_opts eo = {.ctx = 8, .chunk = 0, .bos = -1};
    struct model *m = load(zero_model(), NULL, &eo, 2);
    CHECK(m != NULL);
    if (!m)
        return;
    size_t n;
    int32_t *ids = tiny_text(m, &n);
    struct ev_result r;
    struct err err;
    err_init(&err);
    CHECK_INT(ev_run(m, NULL, ids, (int64_t)n, &eo, &r, &err), 0);
    /* uniform over 512 tokens: nll = ln 512 at every position */
    CHECK_NEAR(r.nll, log(512.0), 1e-12);
    CHECK_NEAR(r.ppl, 512.0, 1e-9);
    CHECK(!r.has_ref);
    /* windows of 8: n tokens -> ceil(n / 8) windows (the last >= 2 tokens
     * here), each scoring all but its first token */
    int64_t wins = ((int64_t)n + 7) / 8, last = (int64_t)n - (wins - 1) * 8;
    CHECK(last >= 2);
    CHECK_INT(r.n_windows, wins);
    CHECK_INT(r.n_scored, (int64_t)n - wins);
    CHECK_INT(r.n_tokens, (int64_t)n);
    free(ids);
    model_free(m);
}

/* ppl, KL and top-1 of an mxfp4 requantization (and of an unrelated model)
 * against the naive computation. */
TEST(matches_token_by_token_computation)
{
    static const struct {
        int ctx, chunk;
        int32_t bos;
        bool other; /* evaluate the other-seed model instead of the mxfp4 one */
    } cases[] = {{5, 0, -1, false},  {5, 2, -1, false}, {7, 3, 1, false},
                 {64, 0, -1, false}, {4, 1, 1, false},  {6, 4, -1, true}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct ev_opts eo = {cases[c].ctx, cases[c].chunk, cases[c].bos};
        struct model *m = cases[c].other ? load(other_model(), NULL, &eo, 2)
                                         : load(tiny_model(), "mxfp4", &eo, 2);
        struct model *ref = load(tiny_model(), NULL, &eo, 2);
        CHECK(m && ref);
        if (!m || !ref)
            return;
        size_t n;
        int32_t *ids = tiny_text(m, &n);
        CHECK(n > 12);
        struct ev_result got, want;
        struct err err;
        err_init(&err);
        CHECK_INT(ev_run(m, ref, ids, (int64_t)n, &eo, &got, &err), 0);
        naive(m, ref, ids, (int64_t)n, eo.ctx, eo.bos, &want);
        CHECK_INT(got.n_scored, want.n_scored);
        CHECK_INT(got.n_windows, want.n_windows);
        CHECK_INT(got.n_tokens, want.n_tokens);
        if (eo.bos >= 0) /* every text token is predicted, from BOS at least */
            CHECK_INT(got.n_scored, (int64_t)n);
        CHECK(got.has_ref);
        CHECK_NEAR(got.nll, want.nll, 1e-12 * want.nll);
        CHECK_NEAR(got.ppl, exp(want.nll), 1e-9 * exp(want.nll));
        CHECK_NEAR(got.ref_nll, want.ref_nll, 1e-12 * want.ref_nll);
        CHECK_NEAR(got.kl, want.kl, 1e-9 * want.kl + 1e-15);
        CHECK_NEAR(got.top1, want.top1, 1e-15);
        CHECK_MSG(got.kl > 0, "mxfp4 vs native: KL %g", got.kl);
        if (cases[c].other) /* unrelated models: the argmaxes differ somewhere */
            CHECK_MSG(got.top1 > 0 && got.top1 < 1 && got.kl > 1e-3, "top-1 %g, KL %g", got.top1,
                      got.kl);
        CHECK(got.kl_max >= got.kl);
        CHECK(got.nll != got.ref_nll);
        free(ids);
        model_free(m);
        model_free(ref);
    }
}

TEST(native_against_native_and_real_requantization)
{
    struct ev_opts eo = {.ctx = 16, .bos = -1};
    struct model *ref = load(tiny_model(), NULL, &eo, 2);
    size_t n;
    int32_t *ids = tiny_text(ref, &n);
    struct err err;
    err_init(&err);
    static const char *const quants[] = {"native", "mxfp4", "nvfp4", "q8_0"};
    struct ev_result r[4];
    for (int q = 0; q < 4; q++) {
        struct model *m = load(tiny_model(), quants[q], &eo, 2);
        CHECK_INT(ev_run(m, ref, ids, (int64_t)n, &eo, &r[q], &err), 0);
        model_free(m);
    }
    CHECK(r[0].kl == 0.0 && r[0].kl_max == 0.0);
    CHECK(r[0].top1 == 1.0);
    CHECK(r[0].nll == r[0].ref_nll);
    for (int q = 1; q < 4; q++) {
        CHECK_MSG(r[q].kl > 0, "%s: KL %g", quants[q], r[q].kl);
        CHECK(r[q].ref_nll == r[0].nll); /* the reference is the same in every run */
    }
    /* 8-bit weights stay much closer to the f16 model than 4-bit ones */
    CHECK_MSG(r[3].kl < r[1].kl && r[3].kl < r[2].kl, "KL q8_0 %g, mxfp4 %g, nvfp4 %g", r[3].kl,
              r[1].kl, r[2].kl);
    free(ids);
    model_free(ref);
}

/* Threads and step size change nothing, bit for bit. */
TEST(threads_and_chunks_do_not_change_the_result)
{
    struct ev_result r[3];
    static const struct {
        int threads, chunk;
    } cases[] = {{1, 16}, {2, 16}, {2, 3}};
    for (int c = 0; c < 3; c++) {
        struct ev_opts eo = {.ctx = 16, .chunk = cases[c].chunk, .bos = -1};
        struct model *m = load(tiny_model(), "nvfp4", &eo, cases[c].threads);
        struct model *ref = load(tiny_model(), NULL, &eo, cases[c].threads);
        size_t n;
        int32_t *ids = tiny_text(m, &n);
        struct err err;
        err_init(&err);
        CHECK_INT(ev_run(m, ref, ids, (int64_t)n, &eo, &r[c], &err), 0);
        free(ids);
        model_free(m);
        model_free(ref);
    }
    for (int c = 1; c < 3; c++) {
        CHECK(r[c].nll == r[0].nll && r[c].kl == r[0].kl && r[c].top1 == r[0].top1);
        CHECK(r[c].kl_max == r[0].kl_max && r[c].n_scored == r[0].n_scored);
    }
}

TEST(refusals)
{
    struct ev_opts eo = {.ctx = 8, .bos = -1};
    struct model *m = load(tiny_model(), NULL, &eo, 1);
    struct ev_result r;
    struct err err;
    err_init(&err);
    int32_t one = 5, many[40];
    for (int i = 0; i < 40; i++)
        many[i] = i + 3;
    CHECK_INT(ev_run(m, NULL, &one, 1, &eo, &r, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    CHECK(strstr(err.msg, "nothing to score") != NULL);
    err_init(&err);
    struct ev_opts big = {.ctx = 32, .bos = -1}; /* the model was sized for 8 */
    CHECK_INT(ev_run(m, NULL, many, 40, &big, &r, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    err_init(&err);
    struct ev_opts tiny_ctx = {.ctx = 2, .bos = 1}; /* BOS + 1 token: nothing after BOS fits */
    CHECK_INT(ev_run(m, NULL, many, 40, &tiny_ctx, &r, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    err_init(&err);
    /* a text of exactly one window plus one token: the lone last token is
     * dropped (nothing to predict it from), with BOS it is scored */
    CHECK_INT(ev_run(m, NULL, many, 9, &eo, &r, &err), 0);
    CHECK_INT(r.n_windows, 1);
    CHECK_INT(r.n_scored, 7);
    CHECK_INT(r.n_tokens, 8);
    model_free(m);
}

TEST_MAIN()
