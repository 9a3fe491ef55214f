/*
 * chat: ChatML rendering and tokenization (see chat.h). Recognising the
 * GGUF template instead of running Jinja keeps the engine small; the two
 * things that matter for the models we serve (the ChatML markers and a
 * default system prompt) are read out of the template text.
 */
#include "text/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define IM_START "<|im_start|>"
#define IM_END   "<|im_end|>"

/*
 * A default system prompt written as a literal inside the template, as in
 * SmolLM2's: {% if ... messages[0]['role'] != 'system' %}{{ '<|im_start|>
 * system\nYou are ...<|im_end|>\n' }}. Returns it (owned) or NULL when the
 * template has none or builds it from expressions we would have to run.
 */
static char *default_system(const char *tmpl)
{
    if (!strstr(tmpl, "!= 'system'") && !strstr(tmpl, "!= \"system\""))
        return NULL;
    const char *p = strstr(tmpl, IM_START "system");
    if (!p)
        return NULL;
    p += strlen(IM_START "system");
    if (*p == '\n')
        p++;
    else if (p[0] == '\\' && p[1] == 'n')
        p += 2;
    else
        return NULL;
    const char *end = strstr(p, IM_END);
    if (!end || end == p)
        return NULL;
    for (const char *q = p; q < end; q++)
        if (strchr("{}'\"+\\", *q))
            return NULL; /* an expression, not a literal */
    return xstrndup(p, (size_t)(end - p));
}

void chat_template_init(struct chat_template *t, const char *gguf_template)
{
    memset(t, 0, sizeof(*t));
    if (!gguf_template || !gguf_template[0]) {
        snprintf(t->note, sizeof(t->note), "chat template: built-in ChatML (the model has none)");
        return;
    }
    if (!strstr(gguf_template, IM_START) || !strstr(gguf_template, IM_END)) {
        snprintf(t->note, sizeof(t->note),
                 "chat template: the model's template is not ChatML; using the built-in ChatML");
        return;
    }
    t->from_gguf = true;
    t->default_system = default_system(gguf_template);
    snprintf(t->note, sizeof(t->note), "chat template: the model's ChatML%s",
             t->default_system ? " with its default system prompt" : "");
}

void chat_template_release(struct chat_template *t)
{
    free(t->default_system);
    t->default_system = NULL;
}

/* Append one segment; empty text is skipped so that an empty message
 * content does not become a zero-length segment. */
static void push(struct chat_seg **segs, size_t *n, size_t *cap, const char *p, size_t len,
                 bool special)
{
    if (len == 0)
        return;
    XGROW(*segs, *cap, *n + 1);
    (*segs)[(*n)++] = (struct chat_seg){.p = p, .n = len, .special = special};
}

/* <|im_start|>role\ncontent<|im_end|>\n */
static void turn(struct chat_seg **segs, size_t *n, size_t *cap, const char *role,
                 const char *content, size_t content_len)
{
    push(segs, n, cap, IM_START, strlen(IM_START), true);
    push(segs, n, cap, role, strlen(role), false);
    push(segs, n, cap, "\n", 1, false);
    push(segs, n, cap, content, content_len, false);
    push(segs, n, cap, IM_END, strlen(IM_END), true);
    push(segs, n, cap, "\n", 1, false);
}

/* The layout is SmolLM2's template run with add_generation_prompt: the
 * default system turn first when the conversation has no system message,
 * each message as a turn, then the open assistant turn the model continues.
 * fp4serve generate --chat builds the same text, which is what the
 * serve_greedy test compares against. */
void chat_render(const struct chat_template *t, const struct api_message *msgs, size_t n,
                 struct chat_seg **segs, size_t *n_segs, size_t *cap)
{
    if (t->default_system && (n == 0 || strcmp(msgs[0].role, "system") != 0))
        turn(segs, n_segs, cap, "system", t->default_system, strlen(t->default_system));
    for (size_t i = 0; i < n; i++)
        turn(segs, n_segs, cap, msgs[i].role, msgs[i].content, msgs[i].content_len);
    push(segs, n_segs, cap, IM_START, strlen(IM_START), true);
    push(segs, n_segs, cap, "assistant\n", strlen("assistant\n"), false);
}

void chat_flatten(const struct chat_seg *segs, size_t n, struct buf *b)
{
    for (size_t i = 0; i < n; i++)
        buf_append(b, segs[i].p, segs[i].n);
}

int chat_tokenize(const tok_vocab *v, const struct chat_seg *segs, size_t n_segs, int32_t **ids,
                  size_t *n_ids, size_t *cap, struct err *err)
{
    /* Literal text between two control tokens is encoded as one run, which
     * gives the same ids as encoding the whole rendered string with special
     * parsing on (the tokenizer splits at control tokens first anyway), as
     * long as no message contains control-token text; when one does, ours
     * keeps it as text, which is the point. */
    size_t first = *n_ids;
    int rc = -1;
    struct buf run; /* literal text since the last control token */
    buf_init(&run, (size_t)1 << 30);
    for (size_t i = 0; i <= n_segs; i++) {
        if (i < n_segs && !segs[i].special) {
            buf_append(&run, segs[i].p, segs[i].n);
            continue;
        }
        if (run.len && tok_encode(v, run.data, run.len, false, false, ids, n_ids, cap, err) != 0)
            goto out;
        buf_reset(&run);
        if (i < n_segs &&
            tok_encode(v, segs[i].p, segs[i].n, true, false, ids, n_ids, cap, err) != 0)
            goto out;
    }
    int32_t bos = tok_bos(v);
    if (tok_add_bos(v) && bos >= 0 && (*n_ids == first || (*ids)[first] != bos)) {
        XGROW(*ids, *cap, *n_ids + 1);
        memmove(*ids + first + 1, *ids + first, (*n_ids - first) * sizeof(**ids));
        (*ids)[first] = bos;
        (*n_ids)++;
    }
    rc = 0;
out:
    if (rc)
        *n_ids = first;
    buf_release(&run);
    return rc;
}
