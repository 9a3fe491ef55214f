/*
 * Unit tests for engine/text/utf8: classification against the Unicode table of
 * well-formed sequences, decoding and encoding, and lossy copies with
 * U+FFFD and a held-back tail.
 */
#include "test.h"

#include "text/utf8.h"

#define U(s) ((const uint8_t *)(s))

/* utf8_step agrees with the Unicode table of well-formed sequences. */
TEST(utf8_classification)
{
    size_t adv;
    CHECK_INT(utf8_step(U("\xc2\x80"), 2, &adv), UTF8_OK);
    CHECK_INT(adv, 2);
    CHECK_INT(utf8_step(U("\xc1\xbf"), 2, &adv), UTF8_BAD);
    CHECK_INT(utf8_step(U("\xe0\x9f\x80"), 3, &adv), UTF8_BAD);
    CHECK_INT(utf8_step(U("\xe0\xa0"), 2, &adv), UTF8_SHORT);
    CHECK_INT(adv, 2);
    CHECK_INT(utf8_step(U("\xed\x9f\xbf"), 3, &adv), UTF8_OK);
    CHECK_INT(utf8_step(U("\xed\xa0\x80"), 3, &adv), UTF8_BAD);
    CHECK_INT(adv, 1);
    CHECK_INT(utf8_step(U("\xf4\x8f\xbf\xbf"), 4, &adv), UTF8_OK);
    CHECK_INT(utf8_step(U("\xf4\x90\x80\x80"), 4, &adv), UTF8_BAD);
    CHECK_INT(utf8_step(U("\xf0\x9f\x98"), 3, &adv), UTF8_SHORT);
    CHECK_INT(adv, 3);
    CHECK_INT(utf8_step(U("\xf0\x9f\x41"), 3, &adv), UTF8_BAD);
    CHECK_INT(adv, 2);
    CHECK_INT(utf8_invalid_at(U("h\xc3\xa9llo"), 6), 6);
}

/* Decoding gives code points; encoding round-trips every length. */
TEST(utf8_decode_encode)
{
    static const uint32_t cps[] = {0x24, 0xA2, 0x939, 0x20AC, 0xD55C, 0x10348, 0x10FFFF};
    static const size_t lens[] = {1, 2, 3, 3, 3, 4, 4};
    for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++) {
        char b[4];
        size_t n = utf8_encode(cps[i], b), adv;
        CHECK_INT(n, lens[i]);
        CHECK_INT(utf8_decode(U(b), n, &adv), cps[i]);
        CHECK_INT(adv, n);
        CHECK_INT(utf8_invalid_at(U(b), n), n);
    }
    size_t adv;
    CHECK_INT(utf8_decode(U("\xc3"), 1, &adv), -1);
    CHECK_INT(adv, 1);
    CHECK_INT(utf8_decode(U("\xff"), 1, &adv), -1);
}

/* Lossy copies: U+FFFD per maximal invalid subpart, a tail held or not,
 * nothing written past cap. */
TEST(utf8_lossy_copies)
{
    char out[64];
    size_t w = 0;
    /* E2 82 then 'x': one U+FFFD for the two-byte subpart, then x */
    CHECK_INT(utf8_lossy(U("a\xe2\x82x\xff"), 5, false, out, &w, sizeof(out)), 5);
    CHECK_INT(w, 1 + 3 + 1 + 3);
    CHECK(memcmp(out, "a\xef\xbf\xbdx\xef\xbf\xbd", w) == 0);
    /* hold keeps an incomplete tail for later */
    w = 0;
    CHECK_INT(utf8_lossy(U("ok\xf0\x9f\x98"), 5, true, out, &w, sizeof(out)), 2);
    CHECK_INT(w, 2);
    /* without hold it becomes one U+FFFD */
    w = 0;
    CHECK_INT(utf8_lossy(U("ok\xf0\x9f\x98"), 5, false, out, &w, sizeof(out)), 5);
    CHECK_INT(w, 5);
    /* a character that does not fit is skipped, never cut */
    w = 0;
    CHECK_INT(utf8_lossy(U("ab\xe2\x82\xac"), 5, false, out, &w, 4), 5);
    CHECK_INT(w, 2);
}

TEST_MAIN()
