/*
 * sha256: FIPS 180-4 SHA-256, for model fingerprints and point keys.
 */
#ifndef COMMON_SHA256_H
#define COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];     /* chaining state */
    uint64_t bytes;    /* message length so far */
    uint8_t block[64]; /* pending partial block */
    size_t fill;       /* bytes in block */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[32]);
/* Lower-case hex of the digest of data (out: 65 bytes, NUL-terminated). */
void sha256_hex(const void *data, size_t len, char out[65]);
/* Lower-case hex of a finished digest. */
void sha256_to_hex(const uint8_t digest[32], char out[65]);

#endif
