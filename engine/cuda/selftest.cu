/*
 * cuda/selftest: the device decoders of quant.cuh, compiled for the host
 * and checked against q_dequant_row (engine/format/quant.c) on random bytes, so
 * block layouts, nibble orders and scale codecs are verified on machines
 * without a GPU. The same source runs in the kernels; only the four
 * intrinsic wrappers of quant.cuh differ between host and device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/quant.cuh"

extern "C" {
#include "xalloc.h"

#include "cuda/cuda.h"
}

/* Same bits, or both NaN. */
static bool same_value(float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b));
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Compare every unit (quantized) or element (float) of rows x cols
 * random-byte rows with the reference; returns values checked, or -1
 * with msg describing the first difference. */
template <uint32_t T>
static long check_type(const uint8_t *data, size_t row_bytes, int rows, int cols, const float *ref,
                       char *msg, size_t msg_size)
{
    long n = 0;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = data + (size_t)r * row_bytes;
        const float *want = ref + (size_t)r * cols;
        if constexpr (is_float_type(T)) {
            for (int i = 0; i < cols; i++, n++)
                if (!same_value(ft<T>::at(row, i), want[i]))
                    return snprintf(msg, msg_size, "row %d element %d: at() %g, reference %g", r, i,
                                    ft<T>::at(row, i), want[i]),
                           -1;
            for (int i = 0; i < cols; i += 8) {
                float v[8];
                ft<T>::at8(row, i, v);
                for (int k = 0; k < 8; k++, n++)
                    if (!same_value(v[k], want[i + k]))
                        return snprintf(msg, msg_size, "row %d element %d: at8() %g, reference %g",
                                        r, i + k, v[k], want[i + k]),
                               -1;
            }
        } else {
            for (int u = 0; u < cols / 16; u++) {
                unit16 o;
                qt<T>::unit(row, u, o);
                for (int i = 0; i < 16; i++, n++) {
                    float got = unit_value<T>(o, i);
                    if (!same_value(got, want[16 * u + i]))
                        return snprintf(msg, msg_size,
                                        "row %d unit %d element %d: decoded %.9g (q %d, d %g, m "
                                        "%g), reference %.9g",
                                        r, u, 16 * u + i, got,
                                        (int)(int8_t)(o.q[i >> 2] >> (8 * (i & 3))), o.d, o.m,
                                        want[16 * u + i]),
                               -1;
                }
            }
        }
    }
    return n;
}

extern "C" long cu_selftest_decode(uint32_t type, uint64_t seed, char *msg, size_t msg_size)
{
    const int rows = 7, cols = 512; /* a multiple of every block; odd row count */
    const struct q_type_info *qi = q_info(type);
    if (!qi || !qi->weights)
        return snprintf(msg, msg_size, "type %u is not a weight type", type), -1;
    size_t rb = q_row_bytes(type, cols);
    /* 256-byte aligned like device rows; rows follow each other as on the device. */
    uint8_t *data = (uint8_t *)xaligned_alloc(256, (rb * rows + 255) / 256 * 256);
    float *ref = (float *)xmalloc(sizeof(float) * (size_t)rows * cols);
    uint64_t s = seed | 1;
    for (size_t i = 0; i < rb * rows; i++)
        data[i] = (uint8_t)(next(&s) >> 32);
    for (int r = 0; r < rows; r++)
        q_dequant_row(type, data + (size_t)r * rb, ref + (size_t)r * cols, cols);
    long n;
    switch (type) {
#define CASE(T)                                                                                    \
    case T:                                                                                        \
        n = check_type<T>(data, rb, rows, cols, ref, msg, msg_size);                               \
        break;
        CU_WEIGHT_TYPES(CASE)
#undef CASE
    default:
        n = (snprintf(msg, msg_size, "type %s has no CUDA decoder", qi->name), -1);
    }
    free(data);
    free(ref);
    return n;
}
