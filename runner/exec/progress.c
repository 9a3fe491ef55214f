/*
 * progress: point counter, elapsed time and ETA for `sweep run`, as a live
 * line on a terminal or as plain lines in a log.
 */
#include "exec/progress.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strutil.h"
#include "timeutil.h"

#define REDRAW_MS      250  /* live line: at most 4 redraws a second */
#define PLAIN_EVERY_S  30.0 /* not a terminal: a line per running point at most this often */
#define READ_EVERY_MS  500  /* the client's progress file: looked at this often */
#define RATE_WINDOW_S  5.0  /* "current" tok/s: over at least this much client time */
#define PROGRESS_BYTES 64   /* the file's line (client/loadgen.h PROGRESS_LINE_BYTES) */

void prog_init(struct progress *pr, FILE *out, bool tty, size_t n_total, double work_total)
{
    memset(pr, 0, sizeof(*pr));
    pr->out = out;
    pr->tty = tty;
    pr->n_total = n_total;
    pr->work_left = work_total;
    pr->eta_hint_s = -1;
    pr->plain_every_s = PLAIN_EVERY_S;
    const char *every = getenv("SWEEP_PROGRESS_EVERY_S");
    double v;
    if (every && str_to_double(every, &v) == 0 && v > 0)
        pr->plain_every_s = v;
}

/* " 40/96 req, 812 tok/s" (what is known of it), or "". */
static void client_text(const struct progress *pr, char *out, size_t size)
{
    out[0] = '\0';
    if (pr->req_total >= 0 && pr->tok_s >= 0)
        snprintf(out, size, " %ld/%ld req, %.0f tok/s", pr->req_done, pr->req_total, pr->tok_s);
    else if (pr->req_total >= 0)
        snprintf(out, size, " %ld/%ld req", pr->req_done, pr->req_total);
}

void prog_client(struct progress *pr, long done, long total, double tokens, double secs)
{
    pr->req_done = done;
    pr->req_total = total;
    if (pr->ref_secs < 0 || secs < pr->ref_secs || tokens < pr->ref_tokens) {
        pr->ref_secs = secs; /* first reading, or the measured phase began again */
        pr->ref_tokens = tokens;
        pr->tok_s = secs > 0 ? tokens / secs : -1;
    } else if (secs - pr->ref_secs >= RATE_WINDOW_S) {
        pr->tok_s = (tokens - pr->ref_tokens) / (secs - pr->ref_secs);
        pr->ref_secs = secs;
        pr->ref_tokens = tokens;
    } else if (pr->tok_s < 0 && secs > 0) {
        pr->tok_s = tokens / secs; /* until a whole window has passed */
    }
}

/* The last "D/T [" of a tqdm bar in text[0..n), D <= T: 0, else -1. */
static int last_bar(const char *text, size_t n, long *done, long *total)
{
    for (size_t i = n; i-- > 0;) {
        if (text[i] != '/')
            continue;
        size_t a = i, b = i + 1;
        while (a > 0 && text[a - 1] >= '0' && text[a - 1] <= '9')
            a--;
        while (b < n && text[b] >= '0' && text[b] <= '9')
            b++;
        if (a == i || b == i + 1 || a == 0 || (text[a - 1] != ' ' && text[a - 1] != '|') ||
            b + 1 >= n || text[b] != ' ' || text[b + 1] != '[' || i - a > 12 || b - i > 13)
            continue;
        char d[16], t[16];
        snprintf(d, sizeof(d), "%.*s", (int)(i - a), text + a);
        snprintf(t, sizeof(t), "%.*s", (int)(b - i - 1), text + i + 1);
        if (str_to_long(d, done) == 0 && str_to_long(t, total) == 0 && *done <= *total)
            return 0;
    }
    return -1;
}

/* The log's tqdm bar (prog_client_file). */
static int read_log(struct progress *pr, const char *log, long long from)
{
    char tail[4096];
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t at = end - (off_t)sizeof(tail) > (off_t)from ? end - (off_t)sizeof(tail) : (off_t)from;
    ssize_t n = at < end ? pread(fd, tail, (size_t)(end - at), at) : 0;
    close(fd);
    long done, total;
    if (n <= 0 || last_bar(tail, (size_t)n, &done, &total) != 0)
        return 0;
    pr->req_done = done;
    pr->req_total = total;
    return 1;
}

int prog_client_file(struct progress *pr, const char *path, const char *log, long long from)
{
    double now = clock_ms();
    if ((!path && !log) || now - pr->last_read_ms < READ_EVERY_MS)
        return 0;
    pr->last_read_ms = now;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0)
        return log ? read_log(pr, log, from) : 0;
    if (fd < 0)
        return 0;
    char line[PROGRESS_BYTES + 1];
    ssize_t n = pread(fd, line, PROGRESS_BYTES, 0);
    close(fd);
    if (n != PROGRESS_BYTES || line[PROGRESS_BYTES - 1] != '\n')
        return 0; /* not yet written, or caught in the middle of a rewrite */
    line[PROGRESS_BYTES - 1] = '\0';
    char *f[4], *save = NULL, *p = line;
    size_t k = 0;
    for (; k < 4; k++, p = NULL) { /* strtok is banned (check-banned.sh): strtok_r */
        f[k] = strtok_r(p, " ", &save);
        if (!f[k])
            return 0;
    }
    long done, total;
    double tokens, secs;
    if (str_to_long(f[0], &done) != 0 || str_to_long(f[1], &total) != 0 ||
        str_to_double(f[2], &tokens) != 0 || str_to_double(f[3], &secs) != 0 || done < 0 ||
        total < 0 || tokens < 0 || secs < 0 || strtok_r(NULL, " ", &save))
        return 0;
    prog_client(pr, done, total, tokens, secs);
    return 1;
}

void prog_set_eta(struct progress *pr, double seconds)
{
    prog_set_eta_bound(pr, seconds, false);
}

void prog_set_eta_bound(struct progress *pr, double seconds, bool lower)
{
    pr->eta_hint_s = seconds;
    pr->eta_hint_ms = clock_ms();
    pr->eta_lower = lower && seconds >= 0;
}

void prog_format_eta(const struct progress *pr, char *out, size_t size)
{
    char d[32];
    prog_format_duration(prog_eta_s(pr), d, sizeof(d));
    bool lower = ((pr->eta_lower && pr->eta_hint_s >= 0) || pr->searching) && strcmp(d, "?") != 0;
    snprintf(out, size, "%s%s", lower ? ">= " : "", d);
}

void prog_format_duration(double s, char *out, size_t size)
{
    if (s < 0) {
        snprintf(out, size, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, size, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60)
        snprintf(out, size, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(out, size, "%lds", t);
}

double prog_eta_s(const struct progress *pr)
{
    if (pr->eta_hint_s >= 0) {
        double left = pr->eta_hint_s - (clock_ms() - pr->eta_hint_ms) / 1000.0;
        return left < 0 ? 0 : left;
    }
    if (pr->work_done <= 0)
        return -1;
    double per_unit = pr->secs_done / pr->work_done;
    double eta = pr->work_left * per_unit;
    if (pr->active) {
        double spent = (clock_ms() - pr->cur_start_ms) / 1000.0;
        double cur = pr->cur_work * per_unit;
        eta -= spent < cur ? spent : cur; /* an overrunning point adds nothing */
    }
    return eta < 0 ? 0 : eta;
}

/* "point 2/6", or "probe 3 (find_max, at most 9)" for a search's probe. */
static void counter(const struct progress *pr, char *out, size_t size)
{
    if (pr->probe)
        snprintf(out, size, "probe %zu (find_max, at most %zu)", pr->probe, pr->probe_max);
    else
        snprintf(out, size, "point %zu/%zu", pr->n_started, pr->n_total);
}

/* "[2/6] mxfp4 c=4 n=16  12s  ETA 1m05s" ("[probe 3 (find_max, at most
 * 9)] ..." for a probe): carriage return and erase-line first, so the line
 * replaces the previous one; no newline until the end. */
static void draw(struct progress *pr, const char *tail)
{
    char el[32], eta[40], k[80];
    prog_format_duration((clock_ms() - pr->cur_start_ms) / 1000.0, el, sizeof(el));
    prog_format_eta(pr, eta, sizeof(eta));
    if (pr->probe)
        counter(pr, k, sizeof(k));
    else
        snprintf(k, sizeof(k), "%zu/%zu", pr->n_started, pr->n_total);
    char cl[96];
    client_text(pr, cl, sizeof(cl));
    fprintf(pr->out, "\r\033[K[%s] %s  %s%s  ETA %s%s", k, pr->label, el, cl, eta, tail);
    fflush(pr->out);
    pr->last_draw_ms = clock_ms();
}

/* In a log (not a terminal) each point gets a start line and an end line,
 * so a reader can tell which point was running when something happened. */
void prog_begin(struct progress *pr, const char *label, double work)
{
    snprintf(pr->label, sizeof(pr->label), "%s", label);
    if (!pr->probe)
        pr->n_started++;
    pr->cur_work = work;
    pr->cur_start_ms = clock_ms();
    pr->last_plain_ms = pr->cur_start_ms;
    pr->active = true;
    pr->req_done = pr->req_total = -1;
    pr->tok_s = pr->ref_secs = -1;
    pr->ref_tokens = 0;
    if (pr->tty) {
        draw(pr, "");
    } else {
        char eta[40], k[80];
        prog_format_eta(pr, eta, sizeof(eta));
        counter(pr, k, sizeof(k));
        fprintf(pr->out, "sweep: %s: %s (ETA %s)\n", k, pr->label, eta);
        fflush(pr->out);
    }
}

void prog_tick(struct progress *pr)
{
    double now = clock_ms();
    if (pr->tty && pr->active && now - pr->last_draw_ms >= REDRAW_MS)
        draw(pr, "");
    if (!pr->tty && pr->active && now - pr->last_plain_ms >= pr->plain_every_s * 1000) {
        char el[32], eta[40], k[80], cl[96];
        prog_format_duration((now - pr->cur_start_ms) / 1000.0, el, sizeof(el));
        prog_format_eta(pr, eta, sizeof(eta));
        counter(pr, k, sizeof(k));
        client_text(pr, cl, sizeof(cl));
        fprintf(pr->out, "sweep: %s: %s running %s%s%s (ETA %s)\n", k, pr->label, el,
                *cl ? "," : "", cl, eta);
        fflush(pr->out);
        pr->last_plain_ms = now;
    }
}

void prog_end(struct progress *pr, const char *status, const char *cause)
{
    double secs = (clock_ms() - pr->cur_start_ms) / 1000.0;
    pr->active = false;
    if (!pr->probe) /* probes were never in the work left */
        pr->work_left -= pr->cur_work;
    if (pr->work_left < 0)
        pr->work_left = 0;
    /* only complete measurements teach us the pace */
    if (strcmp(status, "ok") == 0) {
        pr->work_done += pr->cur_work;
        pr->secs_done += secs;
    }
    char el[32], eta[40], k[80];
    prog_format_duration(secs, el, sizeof(el));
    prog_format_eta(pr, eta, sizeof(eta));
    counter(pr, k, sizeof(k));
    const char *sep = cause && *cause ? ": " : "";
    fprintf(pr->out, "%ssweep: %s: %s %s in %s%s%s (ETA %s)\n", pr->tty ? "\r\033[K" : "", k,
            pr->label, status, el, sep, cause ? cause : "", eta);
    fflush(pr->out);
    pr->probe = pr->probe_max = 0;
}

void prog_probe(struct progress *pr, size_t k, size_t at_most)
{
    pr->probe = k;
    pr->probe_max = at_most > k ? at_most : k;
}

void prog_skip(struct progress *pr, double work)
{
    pr->work_left -= work;
    if (pr->work_left < 0)
        pr->work_left = 0;
}

/* Erase the live line, print the message on its own line, redraw. */
void prog_note(struct progress *pr, const char *fmt, ...)
{
    if (pr->tty && pr->active)
        fputs("\r\033[K", pr->out);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(pr->out, fmt, ap);
    va_end(ap);
    fputc('\n', pr->out);
    if (pr->tty && pr->active)
        draw(pr, "");
    fflush(pr->out);
}
