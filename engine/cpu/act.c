/*
 * cpu/act: activations prepared for q_matmul (layout in qk.h): the buffer,
 * its shape for a weight type, and the reference Q8 quantizer that every
 * kernel table's act_q8 reproduces bit for bit.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "cpu/matmul.h"
#include "cpu/qk.h"

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

uint32_t q_vec_type(uint32_t weight_type)
{
    return qk_type_is_float(weight_type) ? Q_F32 : Q_Q8_1;
}

/* ---- prepared activations ----
 *
 * One buffer sized for the widest layout (f32 rows or Q8 groups), so a q_act
 * can be reshaped for any weight type without allocating. The quantization
 * itself is the kernel table's (SIMD), bit-identical to qk_ref_act_q8.
 */

static size_t act_row_bytes(uint32_t vec_type, int64_t cols)
{
    int64_t pad = qk_act_pad(vec_type, cols);
    size_t bytes = vec_type == Q_F32 ? (size_t)pad * sizeof(float) : qk_act_used_bytes(cols);
    return (size_t)qk_round_up((int64_t)bytes, QK_ACT_ALIGN);
}

/* Bytes are zeroed once here; after that every prepare writes whole rows. */
void q_act_init(struct q_act *a, int64_t max_rows, int64_t max_cols)
{
    memset(a, 0, sizeof(*a));
    size_t rb_q = act_row_bytes(Q_Q8_1, max_cols), rb_f = act_row_bytes(Q_F32, max_cols);
    a->max_rows = max_rows;
    a->max_cols = max_cols;
    a->cap_bytes = (size_t)max_rows * (rb_q > rb_f ? rb_q : rb_f);
    a->data = xaligned_alloc(QK_ACT_ALIGN, a->cap_bytes ? a->cap_bytes : QK_ACT_ALIGN);
    memset(a->data, 0, a->cap_bytes);
    a->vec_type = Q_F32;
}

void q_act_release(struct q_act *a)
{
    free(a->data);
    memset(a, 0, sizeof(*a));
}

void q_act_shape(struct q_act *a, uint32_t weight_type, int64_t rows, int64_t cols)
{
    assert(rows >= 0 && rows <= a->max_rows && cols > 0 && cols <= a->max_cols);
    a->vec_type = q_vec_type(weight_type);
    assert(a->vec_type == Q_F32 || cols % 32 == 0);
    a->rows = rows;
    a->cols = cols;
    a->row_bytes = act_row_bytes(a->vec_type, cols);
    assert((size_t)rows * a->row_bytes <= a->cap_bytes);
}

void q_act_prepare_rows(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    assert(r0 >= 0 && r0 <= r1 && r1 <= a->rows);
    if (a->vec_type == Q_F32) {
        int64_t pad = qk_act_pad(Q_F32, a->cols);
        for (int64_t r = r0; r < r1; r++) {
            float *dst = (float *)qk_act_row(a, r);
            memcpy(dst, x + r * ldx, (size_t)a->cols * sizeof(float));
            memset(dst + a->cols, 0, (size_t)(pad - a->cols) * sizeof(float));
        }
        return;
    }
    q_kernels_select(Q_ISA_AUTO)->act_q8(a, x, ldx, r0, r1);
    size_t used = qk_act_used_bytes(a->cols);
    for (int64_t r = r0; r < r1; r++)
        memset((uint8_t *)qk_act_row(a, r) + used, 0, a->row_bytes - used);
}

void q_act_prepare(struct q_act *a, uint32_t weight_type, const float *x, int64_t ldx, int64_t rows,
                   int64_t cols)
{
    q_act_shape(a, weight_type, rows, cols);
    q_act_prepare_rows(a, x, ldx, 0, rows);
}

void q_act_dequant_row(const struct q_act *a, int64_t row, float *dst)
{
    if (a->vec_type == Q_F32) {
        memcpy(dst, qk_act_f(a, row), (size_t)a->cols * sizeof(float));
        return;
    }
    for (int64_t j = 0; j < a->cols; j++) {
        const uint8_t *grp = qk_act_grp(a, row, j / 64);
        const float *da = (const float *)(grp + 64);
        dst[j] = (float)((int)grp[j % 64] - 128) * da[(j % 64) / 4];
    }
}

/* The reference activation quantizer (ggml's x86 quantize_row_q8_1: d = amax/127
 * kept as f16, q = rne(x * 127/amax)); the SIMD versions match it bit for bit. */
void qk_ref_act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    int64_t pad = qk_act_pad(Q_Q8_1, a->cols);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        float *sa = (float *)qk_act_sa(a, r);
        for (int64_t k = 0; k < pad / 32; k++, xr += 32) {
            uint8_t *q = (uint8_t *)qk_act_grp(a, r, k / 2) + 32 * (k % 2);
            float *da = (float *)(qk_act_grp(a, r, k / 2) + 64) + 8 * (k % 2);
            if (k >= a->cols / 32) { /* padding */
                memset(q, 128, 32);
                memset(da, 0, 8 * sizeof(float));
                sa[k] = 0.0f;
                continue;
            }
            float amax = q_abs_max(xr, 32);
            float id = amax != 0.0f ? 127.0f / amax : 0.0f, d = q_f16_round(amax / 127.0f);
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                int v = clampi((int)q_round_even(xr[j] * id), -127, 127);
                q[j] = (uint8_t)(v + 128);
                sum += v;
            }
            for (int l = 0; l < 8; l++)
                da[l] = d;
            sa[k] = d * (float)sum;
        }
        for (int64_t k = pad / 32; k < qk_nsum(pad); k++)
            sa[k] = 0.0f;
    }
}
