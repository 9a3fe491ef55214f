/*
 * modelfp: a model file's whole-file sha256 and the cache that spares
 * reading it again (see modelfp.h for the cache's format and place).
 */
#include "config/modelfp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "log.h"
#include "sha256.h"
#include "sweep.h"
#include "xalloc.h"

#define READ_CHUNK   (4 << 20)   /* bytes per read while hashing */
#define CACHE_BYTES  (1 << 20)   /* a cache file larger than this is ignored */
#define LOUD_BYTES   (1LL << 30) /* hashing a file this large is said on stderr */
#define CACHE_FIELDS 6           /* before the path: sha, dev, ino, size, mtime, ctime */

char *modelfp_cache_path(void)
{
    const char *dir = getenv("SWEEP_CACHE_DIR");
    if (dir && *dir)
        return path_join(dir, "model-sha256");
    dir = getenv("XDG_CACHE_HOME");
    if (dir && *dir == '/')
        return xasprintf("%s/sweep/model-sha256", dir);
    dir = getenv("HOME");
    if (dir && *dir == '/')
        return xasprintf("%s/.cache/sweep/model-sha256", dir);
    return NULL;
}

/* "DEV INO SIZE MTIME CTIME" of st, the identity an entry must match. */
static void identity(const struct stat *st, char *out, size_t size)
{
    snprintf(out, size, "%llu %llu %lld %lld.%09ld %lld.%09ld", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
             (long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
}

/* The path part of a cache line (after CACHE_FIELDS space-separated
 * fields), or NULL for a malformed line. */
static const char *line_path(const char *line, const char *end)
{
    const char *p = line;
    for (int f = 0; f < CACHE_FIELDS; f++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        if (!sp)
            return NULL;
        p = sp + 1;
    }
    return p;
}

/* Look path up in the cache text: the sha of a line whose identity and
 * path match, copied into hex. */
static bool cache_find(const struct buf *text, const char *path, const char *id, char hex[65])
{
    size_t id_len = strlen(id), path_len = strlen(path);
    const char *s = text->data, *end = s ? s + text->len : NULL;
    while (s && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        const char *p = line_path(s, le);
        if (p && le - s > 65 && s[64] == ' ' && (size_t)(p - (s + 65)) == id_len + 1 &&
            memcmp(s + 65, id, id_len) == 0 && (size_t)(le - p) == path_len &&
            memcmp(p, path, path_len) == 0) {
            bool hexok = true;
            for (int i = 0; i < 64 && hexok; i++)
                hexok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
            if (hexok) {
                memcpy(hex, s, 64);
                hex[64] = '\0';
                return true;
            }
        }
        s = nl ? nl + 1 : end;
    }
    return false;
}

/* Rewrite the cache: its lines for other paths (the newest
 * MODELFP_CACHE_MAX - 1), then this one. Failures are silent: a cache
 * that cannot be written only costs a new hash next time. */
static void cache_put(const char *cache, const struct buf *text, const char *path, const char *id,
                      const char *hex)
{
    struct buf out;
    struct err err;
    size_t n_lines = 0, skip = 0, path_len = strlen(path);
    const char *s = text->data, *end = s ? s + text->len : NULL;
    for (const char *q = s; q && q < end; q++)
        n_lines += *q == '\n';
    if (n_lines >= MODELFP_CACHE_MAX)
        skip = n_lines - (MODELFP_CACHE_MAX - 1);
    buf_init(&out, CACHE_BYTES * 2);
    for (size_t i = 0; s && s < end; i++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) /* a line cut short (a crash while writing it?) is dropped */
            break;
        const char *p = line_path(s, nl);
        bool same = p && (size_t)(nl - p) == path_len && memcmp(p, path, path_len) == 0;
        if (i >= skip && p && !same)
            buf_append(&out, s, (size_t)(nl - s) + 1);
        s = nl + 1;
    }
    buf_printf(&out, "%s %s %s\n", hex, id, path);
    const char *base = path_base(cache);
    char *dir = xstrndup(cache, (size_t)(base - cache));
    err_init(&err);
    if (mkdir_p(dir, 0755, &err, RN_ERR_ENV) == 0 && !out.toobig)
        file_write_atomic(cache, out.data, out.len, &err, RN_ERR_ENV);
    free(dir);
    buf_release(&out);
}

/* sha256 of everything read from fd, from its start. */
static int hash_fd(const char *path, int fd, char hex[65], struct err *err)
{
    struct sha256 h;
    uint8_t digest[32];
    unsigned char *chunk = xmalloc(READ_CHUNK);
    int rc = 0;
    sha256_init(&h);
    for (off_t off = 0;;) {
        ssize_t n = pread(fd, chunk, READ_CHUNK, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, RN_ERR_ENV, "model path '%s': cannot be read: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        sha256_update(&h, chunk, (size_t)n);
        off += n;
    }
    free(chunk);
    if (rc == 0) {
        sha256_final(&h, digest);
        sha256_to_hex(digest, hex);
    }
    return rc;
}

int modelfp_sha256(const char *path, int fd, const struct stat *st, char hex[65], bool *cached,
                   struct err *err)
{
    char id[160];
    struct buf text;
    struct err ignore;
    char *cache = strchr(path, '\n') ? NULL : modelfp_cache_path();
    identity(st, id, sizeof(id));
    buf_init(&text, CACHE_BYTES);
    err_init(&ignore);
    if (cache && path_exists(cache) && file_read_all(cache, &text, &ignore, RN_ERR_ENV) != 0)
        buf_reset(&text); /* unreadable or too large: start afresh */
    *cached = cache && cache_find(&text, path, id, hex);
    int rc = 0;
    if (!*cached) {
        if ((long long)st->st_size >= LOUD_BYTES)
            log_info("hashing model '%s' (%.1f GiB) once; the sha256 is remembered in %s", path,
                     (double)st->st_size / (1 << 30), cache ? cache : "(no cache folder)");
        rc = hash_fd(path, fd, hex, err);
        if (rc == 0 && cache)
            cache_put(cache, &text, path, id, hex);
    }
    buf_release(&text);
    free(cache);
    return rc;
}
