/*
 * dataset: load JSONL and ShareGPT prompt files with jansson, check every
 * entry, and fix the seeded order in which requests take them.
 */
#include "client/dataset.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client/lengths.h"
#include "fileio.h"
#include "rng.h"
#include "xalloc.h"

static const char *const kind_names[] = {"random", "jsonl", "sharegpt"};

int ds_kind_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, kind_names[i]) == 0)
            return i;
    return -1;
}

const char *ds_kind_name(enum ds_kind kind)
{
    return (unsigned)kind < 3 ? kind_names[kind] : "unknown";
}

/* Words: runs of non-space bytes. */
static long count_words(const char *s)
{
    long n = 0;
    for (bool in = false; *s; s++) {
        bool sp = isspace((unsigned char)*s) != 0;
        n += !sp && !in;
        in = !sp;
    }
    return n;
}

/* jansson's message quotes the input ("near '...'"): control bytes become
 * '?', so the error stays one line. Returns text, changed in place. */
static const char *one_line(char *text)
{
    for (char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return text;
}

/* Append an entry (takes ownership of prompt and messages). */
static void add_entry(struct ds_set *ds, size_t *cap, char *prompt, char *messages, long out_len)
{
    XGROW(ds->e, *cap, ds->n + 1);
    ds->e[ds->n++] = (struct ds_entry){prompt, messages, count_words(prompt), out_len};
}

/* A messages list: [{role: str, content: str}, ...], at least one. On success
 * *prompt is the contents joined by '\n' and *json the list, compact. */
static const char *check_messages(json_t *m, char **prompt, char **json)
{
    if (!json_is_array(m) || json_array_size(m) == 0)
        return "\"messages\" wants a non-empty list of {\"role\", \"content\"} objects";
    struct buf b;
    buf_init(&b, DS_MAX_FILE_BYTES);
    size_t i;
    json_t *it;
    json_array_foreach(m, i, it)
    {
        json_t *role = json_object_get(it, "role"), *content = json_object_get(it, "content");
        if (!json_is_string(role) || !json_is_string(content)) {
            buf_release(&b);
            return "each message wants \"role\" and \"content\" strings";
        }
        if (i)
            buf_putc(&b, '\n');
        buf_puts(&b, json_string_value(content));
    }
    *prompt = xstrdup(b.data ? b.data : "");
    buf_release(&b);
    if (count_words(*prompt) == 0) {
        free(*prompt);
        *prompt = NULL;
        return "\"messages\" carry no text";
    }
    *json = json_dumps(m, JSON_COMPACT | JSON_ENSURE_ASCII);
    return NULL;
}

/* One JSONL object into ds; NULL, or what is wrong with it. */
static const char *jsonl_entry(struct ds_set *ds, size_t *cap, json_t *j)
{
    if (!json_is_object(j))
        return "not a JSON object";
    json_t *p = json_object_get(j, "prompt"), *m = json_object_get(j, "messages");
    json_t *o = json_object_get(j, "output_len");
    long out_len = -1;
    if (o) {
        if (!json_is_integer(o) || json_integer_value(o) < 1 || json_integer_value(o) > LEN_MAX)
            return "\"output_len\" wants an integer from 1 to 1048576";
        out_len = (long)json_integer_value(o);
    }
    if (p && m)
        return "has both \"prompt\" and \"messages\"; give one";
    if (p) {
        if (!json_is_string(p) || count_words(json_string_value(p)) == 0)
            return "\"prompt\" wants a non-empty string";
        add_entry(ds, cap, xstrdup(json_string_value(p)), NULL, out_len);
        return NULL;
    }
    if (!m)
        return "wants \"prompt\" (a string) or \"messages\" (a list of {\"role\", \"content\"})";
    char *prompt = NULL, *json = NULL;
    const char *why = check_messages(m, &prompt, &json);
    if (why)
        return why;
    add_entry(ds, cap, prompt, json, out_len);
    return NULL;
}

static int load_jsonl(struct ds_set *ds, const struct buf *text, struct err *err, int bad)
{
    size_t cap = 0;
    const char *p = text->data ? text->data : "", *end = p + text->len;
    if (text->len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3; /* a UTF-8 byte order mark (some editors write one) */
    for (long line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        bool blank = true;
        for (size_t k = 0; k < len && blank; k++)
            blank = isspace((unsigned char)p[k]) != 0;
        if (!blank) {
            json_error_t je;
            json_t *j = json_loadb(p, len, 0, &je);
            const char *why = j ? jsonl_entry(ds, &cap, j) : NULL;
            json_decref(j);
            if (!j)
                return err_set(err, bad, "%s:%ld:%d: not JSON: %s", ds->path, line, je.column,
                               one_line(je.text)),
                       -1;
            if (why)
                return err_set(err, bad, "%s:%ld: %s", ds->path, line, why), -1;
            if (ds->n > DS_MAX_ENTRIES)
                return err_set(err, bad, "%s:%ld: more than %d entries", ds->path, line,
                               DS_MAX_ENTRIES),
                       -1;
        }
        p += len + 1;
    }
    return 0;
}

/* "from" of a ShareGPT turn: which side spoke. */
static bool is_human(const char *from)
{
    return strcmp(from, "human") == 0 || strcmp(from, "user") == 0;
}

static int load_sharegpt(struct ds_set *ds, const struct buf *text, struct err *err, int bad)
{
    json_error_t je;
    size_t cap = 0, i;
    json_t *root = json_loadb(text->data ? text->data : "", text->len, 0, &je), *conv;
    int rc = -1;
    if (!root)
        return err_set(err, bad, "%s:%d:%d: not JSON: %s", ds->path, je.line, je.column,
                       one_line(je.text)),
               -1;
    if (!json_is_array(root)) {
        err_set(err, bad, "%s: a ShareGPT file is a JSON list of {\"conversations\": [...]}",
                ds->path);
        goto out;
    }
    json_array_foreach(root, i, conv)
    {
        json_t *turns = json_object_get(conv, "conversations");
        if (!turns)
            turns = json_object_get(conv, "conversation");
        if (!json_is_object(conv) || !json_is_array(turns)) {
            err_set(err, bad, "%s: entry %zu: wants an object with a \"conversations\" list",
                    ds->path, i);
            goto out;
        }
        size_t k;
        json_t *t;
        long human = -1;
        json_array_foreach(turns, k, t)
        {
            json_t *from = json_object_get(t, "from"), *value = json_object_get(t, "value");
            if (!json_is_string(from) || !json_is_string(value)) {
                err_set(err, bad, "%s: entry %zu: turn %zu wants \"from\" and \"value\" strings",
                        ds->path, i, k);
                goto out;
            }
            if (human < 0 && is_human(json_string_value(from)))
                human = (long)k;
        }
        const char *prompt =
            human >= 0 ? json_string_value(json_object_get(json_array_get(turns, human), "value"))
                       : NULL;
        json_t *reply = human >= 0 ? json_array_get(turns, (size_t)human + 1) : NULL;
        long reply_words =
            reply ? count_words(json_string_value(json_object_get(reply, "value"))) : 0;
        if (!prompt || count_words(prompt) == 0 || reply_words == 0) {
            /* vLLM and SGLang drop these too; we count them and say so */
            if (ds->n_skipped++ == 0)
                ds->first_skipped = (long)i;
            continue;
        }
        add_entry(ds, &cap, xstrdup(prompt), NULL, reply_words > LEN_MAX ? LEN_MAX : reply_words);
        if (ds->n > DS_MAX_ENTRIES) {
            err_set(err, bad, "%s: more than %d entries", ds->path, DS_MAX_ENTRIES);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int ds_load(const char *path, enum ds_kind kind, uint64_t seed, struct ds_set *ds, struct err *err,
            int io_code, int bad_code)
{
    memset(ds, 0, sizeof(*ds));
    ds->kind = kind;
    ds->path = xstrdup(path);
    ds->first_skipped = -1;
    struct buf text;
    buf_init(&text, DS_MAX_FILE_BYTES);
    int rc = -1;
    if (file_read_all(path, &text, err, io_code) != 0)
        goto out;
    if (kind == DS_JSONL)
        rc = load_jsonl(ds, &text, err, bad_code);
    else if (kind == DS_SHAREGPT)
        rc = load_sharegpt(ds, &text, err, bad_code);
    else
        err_set(err, bad_code, "%s: dataset kind '%s' reads no file", path, ds_kind_name(kind));
    if (rc != 0)
        goto out;
    rc = -1;
    if (ds->n == 0) {
        err_set(err, bad_code, "%s: no usable entries%s", path,
                ds->n_skipped ? " (every conversation lacks a human turn with a reply)" : "");
        goto out;
    }
    /* Fisher-Yates with the seed: the order requests take entries in */
    ds->order = xcalloc(ds->n, sizeof(*ds->order));
    for (size_t i = 0; i < ds->n; i++)
        ds->order[i] = i;
    uint64_t state = seed ^ 0xa54ff53a5f1d36f1ull;
    for (size_t i = ds->n - 1; i > 0; i--) {
        size_t j = (size_t)(((unsigned __int128)rng_next(&state) * (i + 1)) >> 64);
        size_t t = ds->order[i];
        ds->order[i] = ds->order[j];
        ds->order[j] = t;
    }
    rc = 0;
out:
    buf_release(&text);
    if (rc != 0)
        ds_release(ds);
    return rc;
}

const struct ds_entry *ds_pick(const struct ds_set *ds, size_t index, bool warmup)
{
    size_t k = index % ds->n;
    return &ds->e[ds->order[warmup ? ds->n - 1 - k : k]];
}

void ds_release(struct ds_set *ds)
{
    for (size_t i = 0; i < ds->n; i++) {
        free(ds->e[i].prompt);
        free(ds->e[i].messages); /* from json_dumps: jansson's allocator is malloc */
    }
    free(ds->e);
    free(ds->order);
    free(ds->path);
    memset(ds, 0, sizeof(*ds));
    ds->first_skipped = -1;
}
