/*
 * utf8: classification of UTF-8 by the Unicode table of well-formed byte
 * sequences (3-7), used to validate text, decode code points, and write
 * lossy text with U+FFFD for bytes that can never be UTF-8.
 */
#include "text/utf8.h"

#include <string.h>

enum utf8_kind utf8_step(const uint8_t *p, size_t n, size_t *adv)
{
    uint8_t b = p[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (b < 0x80) {
        *adv = 1;
        return UTF8_OK;
    } else if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        *adv = 1;
        return UTF8_BAD;
    }
    for (size_t i = 1; i < len; i++) {
        if (i >= n) {
            *adv = i;
            return UTF8_SHORT;
        }
        if (p[i] < lo || p[i] > hi) {
            *adv = i;
            return UTF8_BAD;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    *adv = len;
    return UTF8_OK;
}

size_t utf8_invalid_at(const uint8_t *p, size_t n)
{
    size_t i = 0, adv;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (utf8_step(p + i, n - i, &adv) != UTF8_OK)
            return i;
        i += adv;
    }
    return n;
}

int32_t utf8_decode(const uint8_t *p, size_t n, size_t *adv)
{
    if (utf8_step(p, n, adv) != UTF8_OK) {
        *adv = 1;
        return -1;
    }
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    int32_t cp = p[0] & lead_mask[*adv];
    for (size_t i = 1; i < *adv; i++)
        cp = (cp << 6) | (p[i] & 0x3F);
    return cp;
}

size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_lossy(const uint8_t *p, size_t n, bool hold, char *out, size_t *w, size_t cap)
{
    size_t i = 0, adv;
    while (i < n) {
        enum utf8_kind st = utf8_step(p + i, n - i, &adv);
        if (st == UTF8_SHORT && hold)
            break;
        const char *src = st == UTF8_OK ? (const char *)p + i : "\xEF\xBF\xBD";
        size_t k = st == UTF8_OK ? adv : 3;
        if (*w + k <= cap) {
            memcpy(out + *w, src, k);
            *w += k;
        }
        i += adv;
    }
    return i;
}
