/*
 * Unit tests for the CUDA backend's weight decoders (engine/cuda/quant.cuh)
 * without a GPU: the same source compiled for the host, against
 * q_dequant_row bit for bit on random blocks of every weight type (all
 * nibbles, high bits, scale codes and sub-block orders occur). Builds
 * without nvcc have no decoders: they report "skipped" and 0 passed.
 */
#include <stdio.h>

#ifdef HAVE_CUDA
#include "test.h"

#include "cuda/cuda.h"
#include "format/quant.h"

static void check(uint32_t type)
{
    char msg[256] = "";
    for (uint64_t seed = 1; seed <= 4; seed++) {
        long n = cu_selftest_decode(type, seed * 0x9E3779B97F4A7C15ull, msg, sizeof(msg));
        CHECK_MSG(n == 7 * 512 ||
                      (n == 2 * 7 * 512 && (type == Q_F32 || type == Q_F16 || type == Q_BF16)),
                  "%s seed %llu: %s (%ld values)", q_info(type)->name, (unsigned long long)seed,
                  n < 0 ? msg : "wrong count", n);
    }
}

TEST(decode_f32)
{
    check(Q_F32);
}
TEST(decode_f16)
{
    check(Q_F16);
}
TEST(decode_bf16)
{
    check(Q_BF16);
}
TEST(decode_q4_0)
{
    check(Q_Q4_0);
}
TEST(decode_q4_1)
{
    check(Q_Q4_1);
}
TEST(decode_q5_0)
{
    check(Q_Q5_0);
}
TEST(decode_q5_1)
{
    check(Q_Q5_1);
}
TEST(decode_q8_0)
{
    check(Q_Q8_0);
}
TEST(decode_q4_k)
{
    check(Q_Q4_K);
}
TEST(decode_q6_k)
{
    check(Q_Q6_K);
}
TEST(decode_mxfp4)
{
    check(Q_MXFP4);
}
TEST(decode_nvfp4)
{
    check(Q_NVFP4);
}

/* A type without a CUDA decoder is refused, not decoded. */
TEST(refuses_other_types)
{
    char msg[256] = "";
    CHECK(cu_selftest_decode(Q_Q8_1, 1, msg, sizeof(msg)) < 0);
    CHECK(cu_selftest_decode(10 /* q2_k */, 1, msg, sizeof(msg)) < 0);
}

TEST_MAIN()
#else
int main(void)
{
    printf("skipped: built without CUDA (no nvcc)\n0 passed, 0 failed\n");
    return 0;
}
#endif
