/*
 * runner_sse: the SSE parser, table-driven. Each case is fed whole, byte by
 * byte, and split in two at every position; the events must be the same
 * every time (the split-invariance the load generator relies on).
 */
#include <stdlib.h>

#include "test.h"
#include "xalloc.h"

#include "client/sse.h"

/* Events rendered as "type|data\n" lines, so a case compares one string. */
struct capture {
    struct buf out;
    int stop_after; /* stop the parser after this many events; 0 = never */
    int n;
};

static int on_event(void *ctx, const struct sse_event *ev)
{
    struct capture *c = ctx;
    buf_printf(&c->out, "%s|", ev->type);
    buf_append(&c->out, ev->data, ev->data_len);
    buf_putc(&c->out, '\n');
    CHECK(ev->data[ev->data_len] == '\0');
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? 7 : 0;
}

struct result {
    char *events; /* owned */
    size_t len;   /* bytes in events (a NUL in data is kept) */
    int status;
    bool pending;
};

/* Feed in[0..n) cut at the given offsets (ascending, 0 < cut < n). */
static struct result run_split(const char *in, size_t n, const size_t *cuts, size_t n_cuts,
                               size_t max_bytes, int stop_after)
{
    struct sse_parser p;
    sse_init(&p, max_bytes);
    struct capture c = {.stop_after = stop_after};
    buf_init(&c.out, 1 << 20);
    size_t at = 0;
    int st = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        st = sse_feed(&p, in + at, end - at, on_event, &c);
        at = end;
    }
    struct result r = {NULL, 0, st, sse_pending(&p)};
    r.events = buf_detach(&c.out, &r.len);
    sse_release(&p);
    return r;
}

struct sse_case {
    const char *name;
    const char *in;
    size_t len; /* 0: strlen(in) */
    const char *want;
    int status;
    bool pending;
    size_t want_len; /* 0: strlen(want) */
};

static const struct sse_case cases[] = {
    {"basic", "data: {\"a\":1}\n\ndata: [DONE]\n\n", 0, "|{\"a\":1}\n|[DONE]\n", 0, false},
    {"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", 0, "|x\n|y\n", 0, false},
    {"cr only", "data: x\r\rdata: y\r\r", 0, "|x\n|y\n", 0, false},
    {"mixed terminators", "data: a\r\n\ndata: b\n\r\n", 0, "|a\n|b\n", 0, false},
    {"no space after colon", "data:x\n\n", 0, "|x\n", 0, false},
    {"only one space removed", "data:  x\n\n", 0, "| x\n", 0, false},
    {"multi-line data", "data: a\ndata: b\n\n", 0, "|a\nb\n", 0, false},
    {"comments skipped", ": ping\n\n: keep-alive\ndata: x\n\n", 0, "|x\n", 0, false},
    {"event type", "event: error\ndata: boom\n\ndata: next\n\n", 0, "error|boom\n|next\n", 0,
     false},
    {"type reset without data", "event: foo\n\ndata: x\n\n", 0, "|x\n", 0, false},
    {"empty data dispatches", "data:\n\n", 0, "|\n", 0, false},
    {"field without colon", "data\n\n", 0, "|\n", 0, false},
    {"id and retry ignored", "id: 7\nretry: 100\ndata: x\n\n", 0, "|x\n", 0, false},
    {"unknown field ignored", "foo: bar\ndata: x\n\n", 0, "|x\n", 0, false},
    {"blank lines alone", "\n\n\r\n", 0, "", 0, false},
    {"bom stripped",
     "\xEF\xBB\xBF"
     "data: x\n\n",
     0, "|x\n", 0, false},
    {"bom only at start",
     "data: x\n\n\xEF\xBB\xBF"
     "data: y\n\n",
     0, "|x\n", 0, false},
    {"utf8 kept whole", "data: {\"text\":\"\xC3\xA9\xF0\x9F\x98\x80\"}\n\n", 0,
     "|{\"text\":\"\xC3\xA9\xF0\x9F\x98\x80\"}\n", 0, false},
    {"nul inside data", "data: a\0b\n\n", 11, "|a\0b\n", 0, false, 5},
    {"unterminated event pending", "data: x\n", 0, "", 0, true},
    {"unterminated line pending", "data: x\n\ndata: y", 0, "|x\n", 0, true},
    {"trailing cr not pending", "data: x\n\r", 0, "|x\n", 0, false},
    {"line over the cap", "data: 0123456789012345678901234567890123456789\n\n", 0, "", SSE_TOOBIG,
     true},
    {"data at the cap", "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n", 0,
     "|0123456789\n0123456789\n0123456789\n", 0, false},
    {"data over the cap", "data: 0123456789\ndata: 0123456789\ndata: 0123456789\ndata: 0\n\n", 0,
     "", SSE_TOOBIG, true},
};

#define CAP 32

static bool same(const struct result *a, const struct result *b)
{
    return a->len == b->len && memcmp(a->events, b->events, a->len) == 0 &&
           a->status == b->status && a->pending == b->pending;
}

static void check_case(const struct sse_case *c)
{
    size_t n = c->len ? c->len : strlen(c->in);
    size_t want_len = c->want_len ? c->want_len : strlen(c->want);
    struct result whole = run_split(c->in, n, NULL, 0, CAP, 0);
    CHECK_MSG(whole.len == want_len && memcmp(whole.events, c->want, want_len) == 0,
              "%s: events \"%s\", want \"%s\"", c->name, whole.events, c->want);
    CHECK_MSG(whole.status == c->status, "%s: status %d, want %d", c->name, whole.status,
              c->status);
    CHECK_MSG(whole.pending == c->pending, "%s: pending %d", c->name, whole.pending);

    /* every single cut, and every byte on its own */
    size_t *cuts = xcalloc(n + 1, sizeof(*cuts));
    for (size_t k = 1; k < n; k++) {
        cuts[0] = k;
        struct result r = run_split(c->in, n, cuts, 1, CAP, 0);
        CHECK_MSG(same(&r, &whole), "%s: split at %zu differs: \"%s\"", c->name, k, r.events);
        free(r.events);
    }
    for (size_t k = 1; k < n; k++)
        cuts[k - 1] = k;
    struct result r = run_split(c->in, n, cuts, n ? n - 1 : 0, CAP, 0);
    CHECK_MSG(same(&r, &whole), "%s: byte by byte differs: \"%s\"", c->name, r.events);
    free(r.events);
    free(cuts);
    free(whole.events);
}

TEST(table_every_split)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_case(&cases[i]);
}

TEST(callback_stop_is_sticky)
{
    const char *in = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    struct result r = run_split(in, strlen(in), NULL, 0, CAP, 2);
    CHECK_STR(r.events, "|1\n|2\n");
    CHECK_INT(r.status, 7);
    free(r.events);
}

TEST(crlf_split_across_reads_is_one_terminator)
{
    /* "\r" ends one read and "\n" starts the next: still one line end, so
     * the blank line that follows dispatches exactly one event */
    struct sse_parser p;
    sse_init(&p, CAP);
    struct capture c = {0};
    buf_init(&c.out, 1024);
    CHECK_INT(sse_feed(&p, "data: x\r", 8, on_event, &c), 0);
    CHECK_INT(sse_feed(&p, "", 0, on_event, &c), 0); /* an empty read changes nothing */
    CHECK_INT(sse_feed(&p, "\n", 1, on_event, &c), 0);
    CHECK_INT(c.n, 0);
    CHECK_INT(sse_feed(&p, "\r\n", 2, on_event, &c), 0);
    CHECK_INT(c.n, 1);
    CHECK_STR(c.out.data, "|x\n");
    CHECK_INT(p.n_events, 1);
    buf_release(&c.out);
    sse_release(&p);
}

TEST(comment_count_and_reset)
{
    struct sse_parser p;
    sse_init(&p, CAP);
    CHECK_INT(sse_feed(&p, ": a\n: b\ndata: partial", 21, NULL, NULL), 0);
    CHECK_INT(p.n_comments, 2);
    CHECK(sse_pending(&p));
    sse_reset(&p);
    CHECK(!sse_pending(&p));
    CHECK_INT(p.n_comments, 0);
    struct capture c = {0};
    buf_init(&c.out, 1024);
    CHECK_INT(sse_feed(&p, "data: y\n\n", 9, on_event, &c), 0);
    CHECK_STR(c.out.data, "|y\n");
    buf_release(&c.out);
    sse_release(&p);
}

TEST(toobig_refuses_further_input)
{
    struct sse_parser p;
    sse_init(&p, 8);
    CHECK_INT(sse_feed(&p, "data: 0123456789", 16, NULL, NULL), SSE_TOOBIG);
    CHECK_INT(sse_feed(&p, "\n\ndata: x\n\n", 11, NULL, NULL), SSE_TOOBIG);
    CHECK_INT(p.n_events, 0);
    sse_release(&p);
}

TEST(large_event_within_cap)
{
    /* a 100 KB event arriving in 1000-byte reads comes out whole */
    size_t n = 100000;
    struct buf in;
    buf_init(&in, 1 << 20);
    buf_puts(&in, "data: ");
    for (size_t i = 0; i < n; i++)
        buf_putc(&in, (char)('a' + i % 26));
    buf_puts(&in, "\n\n");
    struct sse_parser p;
    sse_init(&p, 1 << 20);
    struct capture c = {0};
    buf_init(&c.out, 1 << 20);
    for (size_t at = 0; at < in.len; at += 1000)
        sse_feed(&p, in.data + at, in.len - at < 1000 ? in.len - at : 1000, on_event, &c);
    CHECK_INT(c.n, 1);
    CHECK_INT(c.out.len, n + 2);
    CHECK(memcmp(c.out.data + 1, in.data + 6, n) == 0);
    buf_release(&c.out);
    buf_release(&in);
    sse_release(&p);
}

TEST_MAIN()
