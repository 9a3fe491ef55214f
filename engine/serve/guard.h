/*
 * guard: who may use the server and from where, with no I/O of its own:
 * the API key (--api-key, or FP4SERVE_API_KEY; a request without
 * "Authorization: Bearer KEY" is refused 401), which routes stay open
 * without it (/health and /metrics, unless --api-key-all), and CORS
 * (--allowed-origins, vLLM's option: which browser origins may read the
 * answers, and the preflight's answer). server.c asks these questions once
 * per request and writes the headers they give.
 */
#ifndef ENGINE_GUARD_H
#define ENGINE_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define GUARD_MAX_ORIGINS 64 /* origins in --allowed-origins */

struct guard {
    char *key;       /* the API key (owned), or NULL = every request is let in */
    bool key_all;    /* the key guards /health and /metrics too */
    bool any_origin; /* --allowed-origins holds "*" (vLLM's default) */
    char **origins;  /* (n_origins) the origins allowed by name, owned */
    size_t n_origins;
};

/*
 * Fill g from the options: key (NULL or "" = none), key_all, and origins
 * as vLLM takes them, a JSON list of strings ('["https://a.example", "*"]')
 * or, for a shell, a comma-separated list ("https://a.example,*"); NULL
 * means vLLM's default "*"; "" or "[]" means no origin (no CORS headers,
 * every preflight refused). Returns 0, or -1 with err (FP_ERR_USAGE)
 * naming the flag and what is wrong with the list.
 */
int guard_init(struct guard *g, const char *key, bool key_all, const char *origins,
               struct err *err);
void guard_release(struct guard *g);

/* Whether a request for path must carry the key: false without a key, for
 * /health, /v1/health and /metrics unless key_all, and for a CORS preflight
 * (browsers never send credentials in one). */
bool guard_needs_key(const struct guard *g, const char *path);

/* Why the Authorization header value auth (NULL when absent) does not
 * carry the key: NULL when it does (or no key is set), else a one-line
 * message for the 401. The key is compared in time that does not depend
 * on where the first difference lies. */
const char *guard_auth_refusal(const struct guard *g, const char *auth);

/* The Access-Control-Allow-Origin value for a request from origin (its
 * Origin header, NULL when absent): "*" when every origin is allowed,
 * origin itself when it is listed, NULL when no CORS header is due.
 * *vary is set when the answer depends on origin ("Vary: Origin"). */
const char *guard_cors_origin(const struct guard *g, const char *origin, bool *vary);

#endif
