/*
 * http: curl_easy GET with a capped body. NOSIGNAL so timeouts never raise
 * SIGALRM in a multi-threaded caller.
 */
#include "http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "xalloc.h"

/* Keep what fits under the buffer's cap; report everything as taken
 * (returning less than given would abort the transfer). */
static size_t body_sink(char *data, size_t size, size_t nmemb, void *user)
{
    struct buf *b = user;
    size_t n = size * nmemb;
    if (b) {
        size_t room = b->max > b->len ? b->max - b->len : 0;
        buf_append(b, data, n < room ? n : room);
    }
    return n;
}

long http_get(const char *url, long connect_ms, long timeout_ms, struct buf *body, char *why,
              size_t why_size)
{
    CURL *c = curl_easy_init();
    if (!c) {
        if (why)
            snprintf(why, why_size, "libcurl init failed");
        return 0;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     connect_ms < timeout_ms ? connect_ms : timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_PROXY,
                     ""); /* never through a proxy, whatever the environment says */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    long code = 0;
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (why) {
        if (code)
            snprintf(why, why_size, "HTTP %ld", code);
        else
            snprintf(why, why_size, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    curl_easy_cleanup(c);
    return code;
}

char *http_join_url(const char *base, const char *path)
{
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    return xasprintf("%.*s%s%s", (int)n, base, path[0] == '/' ? "" : "/", path);
}
