/*
 * utf8: strict UTF-8 (Unicode table 3-7: no overlongs, surrogates or code
 * points past U+10FFFF) for the tokenizer and for streaming text out:
 * validation, decoding, encoding, and lossy copies that replace each
 * maximal invalid subpart with U+FFFD and can hold back an incomplete tail.
 */
#ifndef ENGINE_UTF8_H
#define ENGINE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum utf8_kind {
    UTF8_OK,    /* a complete, valid character */
    UTF8_BAD,   /* a maximal subpart that can never become valid */
    UTF8_SHORT, /* a valid start that runs out of bytes */
};

/* Classify the character at p[0..n) (n >= 1). *adv is its length (OK), the
 * bytes to replace (BAD, >= 1), or the bytes present (SHORT). */
enum utf8_kind utf8_step(const uint8_t *p, size_t n, size_t *adv);
/* Offset of the first byte that is not part of valid UTF-8, or n. */
size_t utf8_invalid_at(const uint8_t *p, size_t n);
/* Decode one character of possibly invalid text: the code point, or -1 for
 * an invalid or truncated byte (*adv = 1 then). n >= 1. */
int32_t utf8_decode(const uint8_t *p, size_t n, size_t *adv);
/* Write code point cp (< 0x110000) to out (4 bytes of room); returns the
 * byte count. */
size_t utf8_encode(uint32_t cp, char *out);
/* Append p[0..n) to out[*w..cap) as valid UTF-8, each maximal invalid
 * subpart as U+FFFD (3 bytes); with hold, stop before an incomplete tail.
 * Characters that do not fit in cap are skipped. Returns the bytes of p
 * consumed (n unless a tail was held back). */
size_t utf8_lossy(const uint8_t *p, size_t n, bool hold, char *out, size_t *w, size_t cap);

#endif
