/*
 * guard: the API key and CORS decisions of the HTTP layer (see guard.h).
 * Everything here is a pure function of the options and the request's
 * header values, so the unit test drives it without a socket.
 */
#include "serve/guard.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fp4.h"
#include "xalloc.h"

#define MAX_ORIGIN_BYTES 512 /* one origin: scheme://host:port is far shorter */

/* Routes a client may reach without the key unless --api-key-all: what a
 * supervisor or a Prometheus server polls (vLLM keeps these open too). */
static const char *const open_paths[] = {"/health", "/v1/health", "/metrics"};

/* One origin from the list, checked and stored ("*" sets any_origin). */
static int add_origin(struct guard *g, const char *s, size_t n, struct err *err)
{
    while (n && (*s == ' ' || *s == '\t')) /* "a, b" as a shell user types it */
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0)
        return err_set(err, FP_ERR_USAGE, "--allowed-origins: an empty origin in the list"), -1;
    if (n > MAX_ORIGIN_BYTES)
        return err_set(err, FP_ERR_USAGE, "--allowed-origins: an origin is %zu bytes (at most %d)",
                       n, MAX_ORIGIN_BYTES),
               -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return err_set(err, FP_ERR_USAGE,
                           "--allowed-origins: origin '%.*s' holds a space or control character",
                           (int)n, s),
                   -1;
    if (n == 1 && s[0] == '*') {
        g->any_origin = true;
        return 0;
    }
    /* what a browser sends: scheme://host[:port], or "null" (a file, a sandbox) */
    bool null_origin = n == 4 && memcmp(s, "null", 4) == 0;
    if (!null_origin && (!memmem(s, n, "://", 3) || s[n - 1] == '/'))
        return err_set(err, FP_ERR_USAGE,
                       "--allowed-origins: '%.*s' is not an origin (scheme://host[:port], no "
                       "path, or *)",
                       (int)n, s),
               -1;
    if (g->n_origins == GUARD_MAX_ORIGINS)
        return err_set(err, FP_ERR_USAGE, "--allowed-origins: more than %d origins",
                       GUARD_MAX_ORIGINS),
               -1;
    char *o = xmalloc(n + 1);
    memcpy(o, s, n);
    o[n] = '\0';
    g->origins[g->n_origins++] = o;
    return 0;
}

/* vLLM's spelling, a JSON list of strings. */
static int origins_json(struct guard *g, const char *list, struct err *err)
{
    json_error_t je;
    json_t *a = json_loads(list, 0, &je);
    int rc = -1;
    if (!a || !json_is_array(a)) {
        err_set(err, FP_ERR_USAGE,
                "--allowed-origins: '%.80s' is not a JSON list of strings (%s); write "
                "'[\"https://a.example\"]' or 'https://a.example,https://b.example'",
                list, a ? "not a list" : je.text);
        goto out;
    }
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v)) {
            err_set(err, FP_ERR_USAGE, "--allowed-origins: item %zu is not a string", i);
            goto out;
        }
        if (add_origin(g, json_string_value(v), json_string_length(v), err) != 0)
            goto out;
    }
    rc = 0;
out:
    json_decref(a);
    return rc;
}

int guard_init(struct guard *g, const char *key, bool key_all, const char *origins, struct err *err)
{
    memset(g, 0, sizeof(*g));
    g->key = key && key[0] ? xstrdup(key) : NULL;
    g->key_all = key_all;
    g->origins = xcalloc(GUARD_MAX_ORIGINS, sizeof(char *));
    if (!origins) { /* vLLM's default: every origin may read the answers */
        g->any_origin = true;
        return 0;
    }
    const char *p = origins;
    while (*p == ' ')
        p++;
    if (!*p)
        return 0;
    if (*p == '[' || *p == '{') /* JSON (an object is refused there, by name) */
        return origins_json(g, origins, err);
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (add_origin(g, p, n, err) != 0)
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

void guard_release(struct guard *g)
{
    free(g->key);
    for (size_t i = 0; i < g->n_origins; i++)
        free(g->origins[i]);
    free(g->origins);
    memset(g, 0, sizeof(*g));
}

bool guard_needs_key(const struct guard *g, const char *path)
{
    if (!g->key)
        return false;
    if (g->key_all)
        return true;
    for (size_t i = 0; i < sizeof(open_paths) / sizeof(open_paths[0]); i++)
        if (strcmp(path, open_paths[i]) == 0)
            return false;
    return true;
}

/* a == b over n bytes, in time that depends only on n. */
static bool same_bytes(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

const char *guard_auth_refusal(const struct guard *g, const char *auth)
{
    if (!g->key)
        return NULL;
    if (!auth || !*auth)
        return "no API key was given (send the header 'Authorization: Bearer <key>')";
    /* RFC 9110 §11.1: the scheme is case-insensitive, then one or more spaces */
    if (strncasecmp(auth, "Bearer ", 7) != 0)
        return "the Authorization header is not a bearer token (send 'Authorization: Bearer "
               "<key>')";
    const char *tok = auth + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok), k = strlen(g->key);
    /* the length check leaks only the length; the bytes are compared in
     * full either way, against the key itself when the lengths differ */
    bool same = same_bytes(tok, n == k ? g->key : tok, n) && n == k;
    return same ? NULL : "incorrect API key provided";
}

const char *guard_cors_origin(const struct guard *g, const char *origin, bool *vary)
{
    *vary = false;
    if (!origin)
        return NULL;
    if (g->any_origin)
        return "*";
    *vary = true; /* the answer names the origin: a cache must key on it */
    for (size_t i = 0; i < g->n_origins; i++)
        if (strcmp(g->origins[i], origin) == 0)
            return origin;
    return NULL;
}
