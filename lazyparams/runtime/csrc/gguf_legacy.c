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

static inline float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* The bits of max |x| of a block, at least 0x7F800000 when some value is NaN or infinite. */
static inline uint32_t abs_max_bits(const float *x) {
    uint32_t high = 0;
    for (int j = 0; j < QK; j++) {
        uint32_t b = f32_bits(LP_LOAD(float, x + j)) & 0x7FFFFFFFu;
        high = b > high ? b : high;
    }
    return high;
}

/* The first value of largest magnitude, given the bits of that magnitude (+0.0 when zero). */
static inline float signed_max(const float *x, uint32_t amax) {
    if (amax == 0) return 0.0f;
    int j = 0;
    while ((f32_bits(LP_LOAD(float, x + j)) & 0x7FFFFFFFu) != amax) j++;
    return LP_LOAD(float, x + j);
}

/* float32 bits mapped to integers that order like the values (-0.0 just below +0.0). */
static inline int32_t ordered(float v) {
    int32_t b = (int32_t)f32_bits(v);
    return b < 0 ? (int32_t)(0x80000000u - (uint32_t)b) - 1 : b;
}

/* The inverse of `ordered`. */
static inline float from_ordered(int32_t o) {
    return bits_f32(o < 0 ? 0x80000000u - (uint32_t)(o + 1) : (uint32_t)o);
}

/* The first value equal to `v` (equal as floats: it keeps the sign of the first zero). */
static inline float first_equal(const float *x, float v) {
    int j = 0;
    while (LP_LOAD(float, x + j) != v) j++;
    return LP_LOAD(float, x + j);
}

/* A block's minimum and maximum as ggml's strict comparisons find them: the first values
 * attaining them, which differ from the extreme bits only for a zero (its sign). */
static inline void block_min_max(const float *x, float *min, float *max) {
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int j = 0; j < QK; j++) {
        int32_t o = ordered(LP_LOAD(float, x + j));
        lo = o < lo ? o : lo;
        hi = o > hi ? o : hi;
    }
    *min = from_ordered(lo);
    *max = from_ordered(hi);
    if (*min == 0.0f) *min = first_equal(x, 0.0f);
    if (*max == 0.0f) *max = first_equal(x, 0.0f);
}

/* roundf(v) for |v| < 2**31, as an int: ties away from zero. */
static inline int32_t round_away(float v) {
    int32_t t = (int32_t)v;
    float frac = v - (float)t;
    return t + (int32_t)(frac >= 0.5f) - (int32_t)(frac <= -0.5f);
}

/* Each function returns the index of the first block holding a NaN or infinity, or -1. */

LP_CLONES static Py_ssize_t q8_0_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 34) {
        uint32_t amax = abs_max_bits(x);
        if (amax >= 0x7F800000u) return i;
        float d = bits_f32(amax) / 127.0f;
        float id = inverse(d);
        put_half(y, d);
        int ok = id <= FLT_MAX; /* else every product is infinite or NaN: code 0 */
        for (int j = 0; j < QK; j++) {
            y[2 + j] = ok ? (uint8_t)round_away(LP_LOAD(float, x + j) * id) : 0;
        }
    }
    return -1;
}

/* Codes of q4_0 (half 8, top 15) and q5_0 (half 16, top 31): min(top, (int)(x * id + half +
 * .5)); with a finite id the sum lies in [0, top + 1.5]. */
static inline void symmetric_codes(const float *x, float id, float half, int32_t top,
                                   uint8_t *q) {
    int ok = id <= FLT_MAX;
    for (int j = 0; j < QK; j++) {
        int32_t c = (int32_t)(LP_LOAD(float, x + j) * id + (half + 0.5f));
        q[j] = ok ? (uint8_t)(c < top ? c : top) : 0;
    }
}

static inline void pack_nibbles(const uint8_t *q, uint8_t *at) {
    for (int j = 0; j < QK / 2; j++) at[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

static inline void put_high_bits(uint8_t *at, const uint8_t *q) {
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) qh |= (uint32_t)((q[j] >> 4) & 1u) << j;
    for (int k = 0; k < 4; k++) at[k] = (uint8_t)(qh >> (8 * k));
}

/* Codes of q4_1 (top 15) and q5_1 (top 31, never reached past): (int)((x - min) * id + 0.5).
 * With d and id finite the sum lies in [0, top + 1.5]; otherwise every product is 0, NaN or
 * infinite, and every code 0. */
static inline void affine_codes(const float *x, float min, float d, int32_t top, uint8_t *q) {
    float id = inverse(d);
    int ok = d <= FLT_MAX && id <= FLT_MAX;
    for (int j = 0; j < QK; j++) {
        int32_t c = (int32_t)((LP_LOAD(float, x + j) - min) * id + 0.5f);
        q[j] = ok ? (uint8_t)(c < top ? c : top) : 0;
    }
}

/* The blocks of the 4- and 5-bit types (`bits`): symmetric (q4_0, q5_0: d = the first value of
 * largest magnitude / -2**(bits - 1)) or `affine`, with a minimum (q4_1, q5_1). Each block:
 * d (and the minimum) as float16, the fifth bits (q5_*), then the low nibbles. */
static inline __attribute__((always_inline)) Py_ssize_t
small_rows(const float *x, uint8_t *y, Py_ssize_t blocks, const int bits, const int affine) {
    const int top = bits == 5 ? 31 : 15;
    uint8_t q[QK];
    for (Py_ssize_t i = 0; i < blocks; i++, x += QK, y += 18 + 2 * affine + 4 * (bits == 5)) {
        uint32_t amax = abs_max_bits(x);
        if (amax >= 0x7F800000u) return i;
        uint8_t *at = y + 2;
        if (affine) {
            float min, max;
            block_min_max(x, &min, &max);
            float d = (max - min) / (float)top;
            put_half(y, d);
            put_half(at, min);
            at += 2;
            affine_codes(x, min, d, bits == 5 ? 255 : 15, q);
        } else {
            float d = signed_max(x, amax) / (bits == 5 ? -16.0f : -8.0f);
            put_half(y, d);
            symmetric_codes(x, inverse(d), bits == 5 ? 16.0f : 8.0f, top, q);
        }
        if (bits == 5) {
            put_high_bits(at, q);
            at += 4;
        }
        pack_nibbles(q, at);
    }
    return -1;
}

/* Dequantizers: value = d * code (+ m), in float32 as gguf-py and ggml compute it. */

static inline float half_value(const uint8_t *at) {
    uint32_t h = (uint32_t)at[0] | ((uint32_t)at[1] << 8);
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1Fu) return bits_f32(sign | 0x7F800000u | (man << 13));
    if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    float sub = (float)man * (1.0f / 16777216.0f); /* man * 2**-24, exact */
    return bits_f32(sign | f32_bits(sub));
}

static inline void nibbles_of(const uint8_t *qs, int32_t *codes) {
    for (int j = 0; j < QK / 2; j++) {
        codes[j] = qs[j] & 0x0F;
        codes[j + 16] = qs[j] >> 4;
    }
}

static inline void add_high_bits(const uint8_t *at, int32_t *codes) {
    uint32_t qh = (uint32_t)at[0] | ((uint32_t)at[1] << 8) | ((uint32_t)at[2] << 16) |
                  ((uint32_t)at[3] << 24);
    for (int j = 0; j < QK; j++) codes[j] |= (int32_t)(((qh >> j) & 1u) << 4);
}

LP_CLONES static void q8_0_values(const uint8_t *b, float *y, Py_ssize_t blocks) {
    for (Py_ssize_t i = 0; i < blocks; i++, b += 34, y += QK) {
        float d = half_value(b);
        for (int j = 0; j < QK; j++) LP_STORE(float, y + j, d * (float)(int8_t)b[2 + j]);
    }
}

/* The values of blocks of the 4- and 5-bit types, as `small_rows` writes them. */
static inline __attribute__((always_inline)) void
small_values(const uint8_t *b, float *y, Py_ssize_t blocks, const int bits, const int affine) {
    int32_t c[QK];
    for (Py_ssize_t i = 0; i < blocks; i++, b += 18 + 2 * affine + 4 * (bits == 5), y += QK) {
        float d = half_value(b), m = affine ? half_value(b + 2) : 0.0f;
        const uint8_t *at = b + 2 + 2 * affine;
        if (bits == 5) {
            nibbles_of(at + 4, c);
            add_high_bits(at, c);
        } else {
            nibbles_of(at, c);
        }
        if (affine) {
            for (int j = 0; j < QK; j++) LP_STORE(float, y + j, d * (float)c[j] + m);
        } else {
            const int32_t zero = bits == 5 ? 16 : 8;
            for (int j = 0; j < QK; j++) LP_STORE(float, y + j, d * (float)(c[j] - zero));
        }
    }
}

/* The quantizer and dequantizer of a 4- or 5-bit type, each built for the CPU it runs on. */
#define SMALL_TYPE(NAME, BITS, AFFINE)                                                        \
    LP_CLONES static Py_ssize_t NAME##_rows(const float *x, uint8_t *y, Py_ssize_t blocks) {  \
        return small_rows(x, y, blocks, BITS, AFFINE);                                        \
    }                                                                                         \
    LP_CLONES static void NAME##_values(const uint8_t *b, float *y, Py_ssize_t blocks) {      \
        small_values(b, y, blocks, BITS, AFFINE);                                             \
    }

SMALL_TYPE(q4_0, 4, 0)
SMALL_TYPE(q4_1, 4, 1)
SMALL_TYPE(q5_0, 5, 0)
SMALL_TYPE(q5_1, 5, 1)

typedef Py_ssize_t (*RowsFn)(const float *, uint8_t *, Py_ssize_t);
typedef void (*ValuesFn)(const uint8_t *, float *, Py_ssize_t);

static const struct {
    const char *name;
    RowsFn fn;
    ValuesFn values;
    Py_ssize_t size;
} LEGACY[] = {
    {"q4_0", q4_0_rows, q4_0_values, 18}, {"q4_1", q4_1_rows, q4_1_values, 20},
    {"q5_0", q5_0_rows, q5_0_values, 22}, {"q5_1", q5_1_rows, q5_1_values, 24},
    {"q8_0", q8_0_rows, q8_0_values, 34},
};

static int legacy_index(const char *name) {
    for (int t = 0; t < (int)(sizeof LEGACY / sizeof LEGACY[0]); t++) {
        if (strcmp(LEGACY[t].name, name) == 0) return t;
    }
    return -1;
}

const char lp_quantize_legacy_doc[] = PyDoc_STR(
    "quantize_legacy(type, x, out, kind='') -> int: ggml's reference bytes of the values `x`\n"
    "(1-D, a multiple of 32; float32, or 16-bit floats converted to float32 by `kind`, a\n"
    "`cast16` kind to float32) into `out` (uint8, x.size / 32 * type size); -1 when done, else\n"
    "the index of the first 32-value block holding a NaN or infinity (out is then partial),\n"
    "or -2 for a type it does not know.");

/* Values a 16-bit source is converted at a time: 64 blocks, 8 KiB of float32 that stay in the
 * L1 cache between the conversion and the quantizer. */
#define GROUP_BLOCKS 64

/* `fn` over `blocks` blocks of the 16-bit values `x`, converted by `conv` a group at a time:
 * one call for a whole tensor, so the caller releases the GIL once, not once a chunk. */
static Py_ssize_t converted_rows(RowsFn fn, const LpConvert *conv, const char *x, uint8_t *y,
                                 Py_ssize_t blocks, Py_ssize_t size) {
    float group[GROUP_BLOCKS * QK];
    for (Py_ssize_t b = 0; b < blocks; b += GROUP_BLOCKS) {
        Py_ssize_t count = blocks - b < GROUP_BLOCKS ? blocks - b : GROUP_BLOCKS;
        lp_convert(conv, x + b * QK * 2, 2, group, 4, count * QK);
        Py_ssize_t bad = fn(group, y + b * size, count);
        if (bad >= 0) return b + bad;
    }
    return -1;
}

/* The conversion to float32 of 16-bit sources named `kind` ('' for float32 itself), or -1
 * with an error set. */
static int source_conversion(const char *kind, LpConvert *conv) {
    conv->kind = lp_convert_kind(kind);
    conv->table = NULL;
    if (conv->kind == LP_CONVERT_COPY && kind[0] == '\0') return 0;
    if (conv->kind > 0 && (strcmp(kind, "bfloat16>float32") == 0 ||
                           strcmp(kind, "float16>float32") == 0)) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "expected kind '', 'bfloat16>float32' or 'float16>float32', "
                 "got '%s'", kind);
    return -1;
}

/* The buffers of a call, held in b: its input `in` (1-D, items of `isz` bytes, whole units of
 * `per` items, else the error `whole`) and its C-contiguous output `out` (items of `osz` bytes,
 * `out_per` bytes a unit). Returns the count of units, or -1 with an error set. */
static Py_ssize_t legacy_pair(PyObject *in, const char *in_name, Py_ssize_t isz, Py_ssize_t per,
                              const char *whole, PyObject *out, Py_ssize_t osz,
                              Py_ssize_t out_per, Buf *b) {
    memset(b, 0, 2 * sizeof *b);
    if (lp_get_buf(in, &b[0], 0, 1, isz, in_name) < 0) return -1;
    Py_ssize_t units = b[0].view.shape[0] / per;
    if (b[0].view.shape[0] % per != 0) {
        PyErr_SetString(PyExc_ValueError, whole);
        return -1;
    }
    if (lp_get_contiguous(out, &b[1], 1, units * out_per, osz, "out") < 0) return -1;
    return units;
}

PyObject *lp_quantize_legacy(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    const char *name, *kind = "";
    if (!PyArg_ParseTuple(args, "sOO|s", &name, &xo, &oo, &kind)) return NULL;
    int found = legacy_index(name);
    if (found < 0) return PyLong_FromSsize_t(-2);
    LpConvert conv;
    if (source_conversion(kind, &conv) < 0) return NULL;
    Py_ssize_t isz = conv.kind == LP_CONVERT_COPY ? 4 : 2, size = LEGACY[found].size;
    Buf b[2];
    Py_ssize_t blocks = legacy_pair(xo, "x", isz, QK, "expected x of a whole number of 32-value "
                                    "blocks", oo, 1, size, b), bad = 0;
    if (blocks >= 0) {
        RowsFn fn = LEGACY[found].fn;
        const char *x = b[0].view.buf;
        uint8_t *y = b[1].view.buf;
        Py_BEGIN_ALLOW_THREADS
        if (isz == 4) bad = fn((const float *)x, y, blocks);
        else bad = converted_rows(fn, &conv, x, y, blocks, size);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 2);
    return blocks < 0 ? NULL : PyLong_FromSsize_t(bad);
}

const char lp_dequantize_legacy_doc[] = PyDoc_STR(
    "dequantize_legacy(type, q, out) -> bool: the float32 values of the blocks `q` (uint8,\n"
    "1-D, whole blocks) into `out` (float32, 32 a block); False for a type it does not know.");

PyObject *lp_dequantize_legacy(PyObject *self, PyObject *args) {
    PyObject *qo, *oo;
    const char *name;
    if (!PyArg_ParseTuple(args, "sOO", &name, &qo, &oo)) return NULL;
    int found = legacy_index(name);
    if (found < 0) Py_RETURN_FALSE;
    Buf b[2];
    Py_ssize_t blocks = legacy_pair(qo, "q", 1, LEGACY[found].size, "expected q of whole blocks",
                                    oo, 4, QK * 4, b);
    if (blocks >= 0) {
        ValuesFn fn = LEGACY[found].values;
        const uint8_t *q = b[0].view.buf;
        float *y = b[1].view.buf;
        Py_BEGIN_ALLOW_THREADS
        fn(q, y, blocks);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 2);
    if (blocks < 0) return NULL;
    Py_RETURN_TRUE;
}
