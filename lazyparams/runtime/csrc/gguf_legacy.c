/* GGML's legacy block quantizers (q4_0, q4_1, q5_0, q5_1, q8_0) from float32, giving the bytes
 * of ggml's reference `quantize_row_<type>_ref`: the same float32 operations in the same
 * order (the build turns off FMA contraction), roundf's ties away from zero, `x * (1 / d)`,
 * float16 scales rounded to nearest even, and C's float to integer conversion as x86 does it
 * (truncation; NaN, infinities and values out of int32 range give 0x80000000). The caller
 * refuses NaN and infinities before calling in. */
#include "native.h"

#include <math.h>

#define QK 32

/* float32 to float16 bits, to nearest even (the inputs here are never NaN). */
static inline uint16_t half_of(float f) {
    uint32_t b = f32_bits(f), sign = (b >> 16) & 0x8000u, mag = b & 0x7FFFFFFFu;
    if (mag >= 0x47800000u) return (uint16_t)(sign | 0x7C00u);
    if (mag < 0x38800000u) {
        /* multiples of 2**-24: adding 0.5 rounds to one of them, half to even */
        return (uint16_t)(sign | (f32_bits(bits_f32(mag) + 0.5f) - 0x3F000000u));
    }
    return (uint16_t)(sign | ((mag + 0xC8000FFFu + ((mag >> 13) & 1u)) >> 13));
}

static inline void put_half(uint8_t *at, float f) {
    uint16_t h = half_of(f);
    at[0] = (uint8_t)(h & 0xFF);
    at[1] = (uint8_t)(h >> 8);
}

/* C's (int) of `v` as x86 computes it: truncation, 0x80000000 where not representable. */
static inline int32_t c_int(float v) {
    int ok = fabsf(v) < 2147483648.0f; /* false for NaN */
    int32_t t = (int32_t)(ok ? v : 0.0f);
    return ok ? t : INT32_MIN;
}

/* C's (int) of roundf(v): ties away from zero (for |v| >= 2**23, v is already whole). */
static inline int32_t c_round(float v) {
    int ok = fabsf(v) < 2147483648.0f;
    float safe = ok ? v : 0.0f;
    int32_t t = (int32_t)safe;
    float frac = safe - (float)t;
    t += (int32_t)(frac >= 0.5f) - (int32_t)(frac <= -0.5f);
    return ok ? t : INT32_MIN;
}

static inline float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* max |x| of a block (the inputs are finite, so float32 bits order like the values). */
static inline float block_abs_max(const float *x) {
    uint32_t high = 0;
    for (int j = 0; j < QK; j++) {
        uint32_t b = f32_bits(x[j]) & 0x7FFFFFFFu;
        high = b > high ? b : high;
    }
    return bits_f32(high);
}

/* The first value of largest magnitude (+0.0 when every value is a zero). */
static inline float block_signed_max(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static inline void block_min_max(const float *x, float *min, float *max) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *min = lo;
    *max = hi;
}

LP_CLONES static void q8_0_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 34) {
        float d = block_abs_max(x) / 127.0f;
        float id = inverse(d);
        put_half(y, d);
        for (int j = 0; j < QK; j++) y[2 + j] = (uint8_t)c_round(x[j] * id);
    }
}

/* Codes of q4_0 (half 8) and q5_0 (half 16): min(2 * half - 1, (int8_t)(x * id + half + .5)). */
static inline void symmetric_codes(const float *x, float id, float half, int top, uint8_t *q) {
    for (int j = 0; j < QK; j++) {
        int8_t c = (int8_t)(uint8_t)c_int(x[j] * id + (half + 0.5f));
        q[j] = (uint8_t)(c < top ? c : top);
    }
}

LP_CLONES static void q4_0_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    uint8_t q[QK];
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 18) {
        float d = block_signed_max(x) / -8.0f;
        put_half(y, d);
        symmetric_codes(x, inverse(d), 8.0f, 15, q);
        for (int j = 0; j < QK / 2; j++) y[2 + j] = (uint8_t)((q[j] & 0x0F) | (q[j + 16] << 4));
    }
}

static inline void put_high_bits(uint8_t *at, const uint8_t *q) {
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) qh |= (uint32_t)((q[j] >> 4) & 1u) << j;
    for (int k = 0; k < 4; k++) at[k] = (uint8_t)(qh >> (8 * k));
}

LP_CLONES static void q5_0_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    uint8_t q[QK];
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 22) {
        float d = block_signed_max(x) / -16.0f;
        put_half(y, d);
        symmetric_codes(x, inverse(d), 16.0f, 31, q);
        put_high_bits(y + 2, q);
        for (int j = 0; j < QK / 2; j++) {
            y[6 + j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        }
    }
}

/* Codes of q4_1 (levels 16, clipped at 15) and q5_1 (levels 32): (x - min) * id + 0.5. */
static inline void affine_codes(const float *x, float min, float id, int levels, uint8_t *q) {
    for (int j = 0; j < QK; j++) {
        uint8_t c = (uint8_t)c_int((x[j] - min) * id + 0.5f);
        if (levels == 16) c = (int8_t)c < 15 ? c : 15;
        q[j] = c;
    }
}

LP_CLONES static void q4_1_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    uint8_t q[QK];
    float min, max;
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 20) {
        block_min_max(x, &min, &max);
        float d = (max - min) / 15.0f;
        put_half(y, d);
        put_half(y + 2, min);
        affine_codes(x, min, inverse(d), 16, q);
        for (int j = 0; j < QK / 2; j++) y[4 + j] = (uint8_t)((q[j] & 0x0F) | (q[j + 16] << 4));
    }
}

LP_CLONES static void q5_1_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    uint8_t q[QK];
    float min, max;
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 24) {
        block_min_max(x, &min, &max);
        float d = (max - min) / 31.0f;
        put_half(y, d);
        put_half(y + 2, min);
        affine_codes(x, min, inverse(d), 32, q);
        put_high_bits(y + 4, q);
        for (int j = 0; j < QK / 2; j++) {
            y[8 + j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        }
    }
}

typedef void (*RowsFn)(const float *, uint8_t *, Py_ssize_t);

static const struct {
    const char *name;
    RowsFn fn;
    Py_ssize_t size;
} LEGACY[] = {
    {"q4_0", q4_0_rows, 18}, {"q4_1", q4_1_rows, 20}, {"q5_0", q5_0_rows, 22},
    {"q5_1", q5_1_rows, 24}, {"q8_0", q8_0_rows, 34},
};

const char lp_quantize_legacy_doc[] = PyDoc_STR(
    "quantize_legacy(type, x, out) -> bool: ggml's reference bytes of the finite float32\n"
    "values `x` (1-D, a multiple of 32) into `out` (uint8, x.size / 32 * type size); False\n"
    "for a type it does not know.");

PyObject *lp_quantize_legacy(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    const char *name;
    if (!PyArg_ParseTuple(args, "sOO", &name, &xo, &oo)) return NULL;
    int found = -1;
    for (int t = 0; t < (int)(sizeof LEGACY / sizeof LEGACY[0]); t++) {
        if (strcmp(LEGACY[t].name, name) == 0) found = t;
    }
    if (found < 0) Py_RETURN_FALSE;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (lp_get_buf(xo, &b[0], 0, 1, 4, "x") < 0) {
        lp_release(b, 2);
        return NULL;
    }
    Py_ssize_t n = b[0].view.shape[0];
    if (n % QK != 0) {
        lp_release(b, 2);
        PyErr_SetString(PyExc_ValueError, "expected x of a whole number of 32-value blocks");
        return NULL;
    }
    if (lp_get_contiguous(oo, &b[1], 1, n / QK * LEGACY[found].size, "out") < 0) {
        lp_release(b, 2);
        return NULL;
    }
    RowsFn fn = LEGACY[found].fn;
    const float *x = b[0].view.buf;
    uint8_t *y = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    fn(x, y, n / QK);
    Py_END_ALLOW_THREADS
    lp_release(b, 2);
    Py_RETURN_TRUE;
}
