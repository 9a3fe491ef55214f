/* Unit tests for common/rng.h: the splitmix64 stream is fixed bit for bit
 * (synthetic models, golden tokens and prompts depend on it). The expected
 * values were taken from the generator before it moved to common/. */
#include <stdint.h>

#include "rng.h"
#include "test.h"

TEST(first_values_for_seed_0)
{
    uint64_t s = 0;
    CHECK(rng_next(&s) == 0xe220a8397b1dcdafull);
    CHECK(rng_next(&s) == 0x6e789e6aa1b965f4ull);
    CHECK(rng_next(&s) == 0x06c45d188009454full);
    CHECK(s == 3 * 0x9e3779b97f4a7c15ull); /* the state only counts */
}

TEST(first_values_for_seed_1)
{
    uint64_t s = 1;
    CHECK(rng_next(&s) == 0x910a2dec89025cc1ull);
    CHECK(rng_next(&s) == 0xbeeb8da1658eec67ull);
    CHECK(rng_next(&s) == 0xf893a2eefb32555eull);
}

TEST(unit_uses_the_top_53_bits)
{
    uint64_t s = 0;
    CHECK(rng_unit(&s) == (double)(0xe220a8397b1dcdafull >> 11) * 0x1.0p-53);
    s = 1;
    CHECK_NEAR(rng_unit(&s), 0.5665615751722809, 1e-16);
    uint64_t t = 7;
    for (int i = 0; i < 100000; i++) {
        double u = rng_unit(&t);
        if (!(u >= 0.0 && u < 1.0)) {
            CHECK_MSG(0, "draw %d: %.17g outside [0, 1)", i, u);
            break;
        }
    }
}

TEST_MAIN()
