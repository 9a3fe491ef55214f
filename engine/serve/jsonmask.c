/*
 * jsonmask: the token mask of JSON mode (see jsonmask.h). Every token's
 * bytes sit in one flat array, so a step tries each token on a copy of
 * the recognizer's few bytes of state: about n_vocab x 6 bytes fed, well
 * under a millisecond against a decode step.
 */
#include "serve/jsonmask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

struct jmask {
    int n_vocab;
    char *bytes;     /* every token's tok_piece, back to back */
    uint32_t *off;   /* (n_vocab + 1) token i is bytes[off[i], off[i + 1]) */
    bool *candidate; /* (n_vocab) a normal or byte token with text */
    float *row;      /* (n_vocab) the masked logits */
};

static struct jmask *jmask_new(const tok_vocab *v, int n_vocab)
{
    struct jmask *jm = xcalloc(1, sizeof(*jm));
    jm->n_vocab = n_vocab;
    jm->off = xcalloc((size_t)n_vocab + 1, sizeof(uint32_t));
    jm->candidate = xcalloc((size_t)n_vocab, sizeof(bool));
    jm->row = xcalloc((size_t)n_vocab, sizeof(float));
    size_t cap = tok_max_piece(v) + 1, total = 0;
    char *piece = xmalloc(cap);
    for (int i = 0; i < n_vocab; i++) /* first pass: sizes */
        total += tok_piece(v, i, piece, cap);
    jm->bytes = xmalloc(total + 1);
    size_t at = 0;
    for (int i = 0; i < n_vocab; i++) {
        size_t n = tok_piece(v, i, jm->bytes + at, total + 1 - at);
        enum tok_type t = tok_type_of(v, i);
        jm->candidate[i] = n > 0 && (t == TOK_NORMAL || t == TOK_BYTE) && !tok_is_eog(v, i);
        jm->off[i] = (uint32_t)at;
        at += n;
    }
    jm->off[n_vocab] = (uint32_t)at;
    free(piece);
    return jm;
}

const float *jmask_row(struct jmask **jm, const tok_vocab *v, const struct jfsm *f,
                       const float *logits, int n_vocab, int *n_allowed)
{
    if (!*jm)
        *jm = jmask_new(v, n_vocab);
    struct jmask *m = *jm;
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        struct jfsm g = *f;
        bool ok = m->candidate[i] && jfsm_feed(&g, m->bytes + m->off[i], m->off[i + 1] - m->off[i]);
        m->row[i] = ok ? logits[i] : -INFINITY;
        n += ok;
    }
    *n_allowed = n;
    return m->row;
}

int32_t jmask_sample(struct jmask **jm, const tok_vocab *v, const struct jfsm *f,
                     struct sampler *smp, const float *logits, int n_vocab)
{
    int n_ok;
    const float *row = jmask_row(jm, v, f, logits, n_vocab, &n_ok);
    if (n_ok == 0)
        return -1;
    int32_t tok = sampler_sample(smp, row);
    if (!isinf(row[tok]))
        return tok;
    /* a masked token can come back only through a rounding in the draw:
     * take the likeliest allowed one instead */
    tok = -1;
    for (int i = 0; i < n_vocab; i++)
        if (!isinf(row[i]) && (tok < 0 || row[i] > row[tok]))
            tok = i;
    return tok;
}

bool jmask_push(const struct jmask *jm, struct jfsm *f, int32_t tok)
{
    if (tok < 0 || tok >= jm->n_vocab)
        return false;
    jfsm_feed(f, jm->bytes + jm->off[tok], jm->off[tok + 1] - jm->off[tok]);
    return jfsm_done(f);
}

void jmask_free(struct jmask *jm)
{
    if (!jm)
        return;
    free(jm->bytes);
    free(jm->off);
    free(jm->candidate);
    free(jm->row);
    free(jm);
}
