/*
 * dataset: load JSONL and ShareGPT prompt files with jansson, check every
 * entry, and fix the seeded order in which requests take them. A file is
 * read once, in chunks that are parsed and hashed as they arrive (JSONL
 * line by line, ShareGPT through jansson's callback), so its size limit
 * (1 GiB) bounds time, not the memory of a copy of it.
 */
#include "client/dataset.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "rng.h"
#include "sha256.h"
#include "xalloc.h"

#include "client/lengths.h"

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

/* What jansson refused, in our words, into out: a NUL character and a key
 * given twice are named (jansson's own text for them names its parser
 * flags); anything else is "not JSON: <jansson's reason>". */
static const char *json_why(json_error_t *je, char *out, size_t size)
{
    const char *near = strstr(je->text, " near '"), *end = near ? strrchr(near + 7, '\'') : NULL;
    switch (json_error_code(je)) {
    case json_error_null_character:
        snprintf(out, size, "a string holds \"\\u0000\" (NUL), which a prompt cannot carry");
        break;
    case json_error_duplicate_key:
        if (end && end > near + 7)
            snprintf(out, size, "key %.*s given twice in one object", (int)(end - near - 7),
                     near + 7);
        else
            snprintf(out, size, "a key given twice in one object");
        break;
    default:
        snprintf(out, size, "not JSON: %.160s", je->text);
    }
    return one_line(out);
}

/* Chat roles a message may have: OpenAI's (fp4serve takes the same). */
static const char *const chat_roles[] = {"system", "developer", "user", "assistant", "tool"};

/* Append an entry (takes ownership of prompt and messages). */
static void add_entry(struct ds_set *ds, size_t *cap, char *prompt, char *messages, long out_len)
{
    XGROW(ds->e, *cap, ds->n + 1);
    ds->e[ds->n++] = (struct ds_entry){prompt, messages, count_words(prompt), out_len};
}

/* A messages list: [{role: str, content: str}, ...], at least one. On success
 * *prompt is the contents joined by '\n' and *json the list, compact. */
static const char *check_messages(json_t *m, char **prompt, char **json, char *why, size_t size)
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
        size_t r = 0;
        while (r < sizeof(chat_roles) / sizeof(chat_roles[0]) &&
               strcmp(json_string_value(role), chat_roles[r]) != 0)
            r++;
        if (r == sizeof(chat_roles) / sizeof(chat_roles[0])) {
            buf_release(&b);
            snprintf(why, size,
                     "message %zu: role '%.40s' is not system, developer, user, assistant or tool",
                     i + 1, json_string_value(role));
            return one_line(why);
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
static const char *jsonl_entry(struct ds_set *ds, size_t *cap, json_t *j, char *why, size_t size)
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
    const char *bad = check_messages(m, &prompt, &json, why, size);
    if (bad)
        return bad;
    add_entry(ds, cap, prompt, json, out_len);
    return NULL;
}

/* ---- reading: one pass over the file in 64 KiB chunks ---- */

/* A dataset file being read: its bytes pass through chunk once, counted and
 * hashed, so neither format holds the raw file in memory. */
struct reader {
    int fd;
    const char *path;
    uint64_t total; /* bytes read so far */
    bool toobig;    /* the file grew past DS_MAX_FILE_BYTES while read */
    int read_errno; /* a read failed: its errno; 0 when none */
    struct sha256 sha;
    size_t pos, fill; /* chunk[pos..fill) is unread */
    char chunk[65536];
};

/* Make chunk hold unread bytes: 1, or 0 at the end of the file, or -1 on
 * a read error or past the size limit (read_errno or toobig says which). */
static int rd_more(struct reader *r)
{
    if (r->pos < r->fill)
        return 1;
    if (r->toobig || r->read_errno)
        return -1;
    ssize_t n;
    do
        n = read(r->fd, r->chunk, sizeof(r->chunk));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return r->read_errno = errno, -1;
    r->total += (uint64_t)n;
    if (r->total > DS_MAX_FILE_BYTES)
        return r->toobig = true, -1;
    sha256_update(&r->sha, r->chunk, (size_t)n);
    r->pos = 0;
    r->fill = (size_t)n;
    return n > 0;
}

/* The reader's failure in err, if it had one; returns -1 then, else 0. */
static int rd_failed(const struct reader *r, struct err *err, int io_code, int bad)
{
    if (r->toobig)
        return err_set(err, bad, "%s: larger than %s; dataset files are limited to that", r->path,
                       DS_MAX_FILE_TEXT),
               -1;
    if (r->read_errno)
        return err_set(err, io_code, "%s: %s", r->path, strerror(r->read_errno)), -1;
    return 0;
}

/* jansson's input callback: the next bytes of the file, 0 at its end,
 * (size_t)-1 on a failure the reader keeps. */
static size_t rd_json(void *buffer, size_t size, void *data)
{
    struct reader *r = data;
    int more = rd_more(r);
    if (more <= 0)
        return more == 0 ? 0 : (size_t)-1;
    size_t n = r->fill - r->pos < size ? r->fill - r->pos : size;
    memcpy(buffer, r->chunk + r->pos, n);
    r->pos += n;
    return n;
}

/* One line (without its '\n') into line; 1, 0 at the end of the file, -1
 * on a read failure or a line longer than line->max (line->toobig). */
static int rd_line(struct reader *r, struct buf *line)
{
    buf_reset(line);
    for (bool any = false;;) {
        int more = rd_more(r);
        if (more < 0)
            return -1;
        if (more == 0)
            return any ? 1 : 0;
        any = true;
        const char *p = r->chunk + r->pos;
        const char *nl = memchr(p, '\n', r->fill - r->pos);
        size_t n = nl ? (size_t)(nl - p) : r->fill - r->pos;
        if (buf_append(line, p, n) != 0)
            return -1;
        r->pos += n + (nl != NULL);
        if (nl)
            return 1;
    }
}

static int load_jsonl(struct ds_set *ds, struct reader *r, struct err *err, int io_code, int bad)
{
    size_t cap = 0;
    struct buf text;
    buf_init(&text, DS_MAX_LINE_BYTES);
    char why[200];
    int rc = -1, got;
    long line = 1;
    for (; (got = rd_line(r, &text)) == 1; line++) {
        const char *p = text.data ? text.data : "";
        size_t len = text.len;
        if (line == 1 && len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
            p += 3, len -= 3; /* a UTF-8 byte order mark (some editors write one) */
        bool blank = true;
        for (size_t k = 0; k < len && blank; k++)
            blank = isspace((unsigned char)p[k]) != 0;
        if (blank)
            continue;
        json_error_t je;
        json_t *j = json_loadb(p, len, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
            err_set(err, bad, "%s:%ld:%d: %s", ds->path, line, je.column,
                    json_why(&je, why, sizeof(why)));
            goto out;
        }
        const char *bad_entry = jsonl_entry(ds, &cap, j, why, sizeof(why));
        json_decref(j);
        if (bad_entry) {
            err_set(err, bad, "%s:%ld: %s", ds->path, line, bad_entry);
            goto out;
        }
        if (ds->n > DS_MAX_ENTRIES) {
            err_set(err, bad, "%s:%ld: more than %d entries", ds->path, line, DS_MAX_ENTRIES);
            goto out;
        }
    }
    if (got < 0 && text.toobig)
        err_set(err, bad, "%s:%ld: the line is longer than %s; a dataset entry is limited to that",
                ds->path, line, DS_MAX_LINE_TEXT);
    else if (got == 0 || rd_failed(r, err, io_code, bad) == 0)
        rc = 0;
out:
    buf_release(&text);
    return rc;
}

/* "from" of a ShareGPT turn: which side spoke. */
static bool is_human(const char *from)
{
    return strcmp(from, "human") == 0 || strcmp(from, "user") == 0;
}

static int load_sharegpt(struct ds_set *ds, struct reader *r, struct err *err, int io_code, int bad)
{
    json_error_t je;
    size_t cap = 0, i;
    char why[200];
    json_t *root = json_load_callback(rd_json, r, JSON_REJECT_DUPLICATES, &je), *conv;
    int rc = -1;
    if (!root) {
        if (rd_failed(r, err, io_code, bad) == 0)
            err_set(err, bad, "%s:%d:%d: %s", ds->path, je.line, je.column,
                    json_why(&je, why, sizeof(why)));
        return -1;
    }
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
    int rc = -1;
    struct stat st;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; the mode is
     * checked before any read, so only regular files are read */
    struct reader *r = xcalloc(1, sizeof(*r));
    r->path = path;
    sha256_init(&r->sha);
    r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (r->fd < 0) {
        err_set(err, io_code, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(r->fd, &st) != 0) {
        err_set(err, io_code, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        err_set(err, bad_code, "%s: is a directory, not a dataset file", path);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, bad_code, "%s: not a regular file (a FIFO, socket or device); give a file",
                path);
        goto out;
    }
    if ((uint64_t)st.st_size > DS_MAX_FILE_BYTES) {
        err_set(err, bad_code, "%s: the file is %lld bytes; dataset files are limited to %s", path,
                (long long)st.st_size, DS_MAX_FILE_TEXT);
        goto out;
    }
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
    if (kind == DS_JSONL)
        rc = load_jsonl(ds, r, err, io_code, bad_code);
    else if (kind == DS_SHAREGPT)
        rc = load_sharegpt(ds, r, err, io_code, bad_code);
    else
        err_set(err, bad_code, "%s: dataset kind '%s' reads no file", path, ds_kind_name(kind));
    /* the digest covers the whole file, also bytes past the JSON parser's end */
    while (rc == 0 && rd_more(r) > 0)
        r->pos = r->fill;
    if (rc == 0 && rd_failed(r, err, io_code, bad_code) != 0)
        rc = -1;
    if (rc == 0) {
        uint8_t digest[32];
        sha256_final(&r->sha, digest);
        sha256_to_hex(digest, ds->sha256);
    }
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
    if (r->fd >= 0)
        close(r->fd);
    free(r);
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
