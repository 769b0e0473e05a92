/* The float8 casts: float32 to float8_e4m3fn and float8_e5m2, rounding half to even as
 * ml_dtypes does, and back to float32 exactly; AVX2 loops where the CPU has them, eight
 * values at a time in integer lanes, the portable loops elsewhere and for the tails. */
#include "native.h"

/* float32 to the bits of an 8-bit float with `man` mantissa bits and exponent bias `bias`,
 * rounding half to even as ml_dtypes does. Normal results take one integer add, as for
 * float16; subnormal ones are rounded by adding the power of two whose float32 spacing is the
 * format's subnormal step. float8_e4m3fn (`finite`) has no infinity: what rounds past 448 is
 * its NaN; float8_e5m2 rounds to infinity there, and makes every NaN its quiet NaN. */
static inline uint8_t small_float_bits(uint32_t b, const int man, const int bias,
                                       const int finite) {
    uint32_t sign = (b >> 24) & 0x80u, mag = b & 0x7FFFFFFFu, shift = 23u - (uint32_t)man;
    uint32_t normal = (mag + ((uint32_t)(bias - 127) << 23) + ((1u << (shift - 1)) - 1u) +
                       ((mag >> shift) & 1u)) >> shift;
    uint32_t magic = (uint32_t)(1 - bias - man + 23 + 127) << 23;
    uint32_t sub = f32_bits(bits_f32(mag) + bits_f32(magic)) - magic;
    /* Selections by masks, not branches, so that the loop vectorizes. */
    uint32_t small = 0u - (uint32_t)(mag < ((uint32_t)(1 - bias + 127) << 23));
    uint32_t r = (sub & small) | (normal & ~small);
    if (finite) {
        uint32_t nan = 0u - (uint32_t)((mag >= 0x7F800000u) | (r > 0x7Eu));
        r = (0x7Fu & nan) | (r & ~nan);
    } else {
        uint32_t nan = 0u - (uint32_t)(mag > 0x7F800000u);
        uint32_t inf = (0u - (uint32_t)((mag == 0x7F800000u) | (r >= 0x7Cu))) & ~nan;
        r = (0x7Eu & nan) | (0x7Cu & inf) | (r & ~(nan | inf));
    }
    return (uint8_t)(sign | r);
}

static void to_small_portable(const uint32_t *x, uint8_t *out, Py_ssize_t n, int finite) {
    if (finite) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = small_float_bits(x[i], 3, 7, 1);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = small_float_bits(x[i], 2, 15, 0);
    }
}

#if LP_X86
#define AVX2 __attribute__((target("avx2")))
#define SET1 _mm256_set1_epi32

/* `small_float_bits` of eight values, each result in the low byte of its lane. */
AVX2 static inline __m256i small_lanes(__m256i b, const int man, const int bias,
                                       const int finite) {
    const int shift = 23 - man;
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(b, 24), SET1(0x80));
    __m256i mag = _mm256_and_si256(b, SET1(0x7FFFFFFF));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(mag, shift), SET1(1));
    __m256i bump = SET1((int)(((uint32_t)(bias - 127) << 23) + ((1u << (shift - 1)) - 1u)));
    __m256i normal = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(mag, bump), odd), shift);
    __m256i magic = SET1((1 - bias - man + 23 + 127) << 23);
    __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(mag), _mm256_castsi256_ps(magic));
    __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(sum), magic);
    __m256i small = _mm256_cmpgt_epi32(SET1((1 - bias + 127) << 23), mag);
    __m256i r = _mm256_blendv_epi8(normal, sub, small);
    /* An infinity or NaN input rounds, as a normal, far past the largest code, so the range
     * test alone finds it; only e5m2 tells NaN (its quiet NaN) from infinity. */
    if (finite) {
        r = _mm256_blendv_epi8(r, SET1(0x7F), _mm256_cmpgt_epi32(r, SET1(0x7E)));
    } else {
        __m256i nan = _mm256_cmpgt_epi32(mag, SET1(0x7F800000));
        r = _mm256_blendv_epi8(r, SET1(0x7C), _mm256_cmpgt_epi32(r, SET1(0x7B)));
        r = _mm256_blendv_epi8(r, SET1(0x7E), nan);
    }
    return _mm256_or_si256(sign, r);
}

/* Thirty-two values a time: four vectors of lanes packed to bytes, then put back in order
 * (the packs interleave the 128-bit halves). */
AVX2 static void to_small_avx2(const uint32_t *x, uint8_t *out, Py_ssize_t n, int finite) {
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    Py_ssize_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v[4];
        for (int q = 0; q < 4; q++) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(x + i + 8 * q));
            v[q] = finite ? small_lanes(b, 3, 7, 1) : small_lanes(b, 2, 15, 0);
        }
        __m256i lo = _mm256_packus_epi32(v[0], v[1]), hi = _mm256_packus_epi32(v[2], v[3]);
        __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order);
        _mm256_storeu_si256((__m256i *)(out + i), bytes);
    }
    to_small_portable(x + i, out + i, n - i, finite);
}

/* float8 codes to float32 bits, eight at a time: sign, exponent and mantissa moved into
 * place; subnormals (exponent 0) are mantissa * 2**(1 - bias - man), which float32 holds
 * exactly. A vector holding a NaN or an infinity is redone from `table` (ml_dtypes' values). */
AVX2 static void from_small_avx2(const uint8_t *x, uint32_t *out, Py_ssize_t n, int finite,
                                 const uint32_t *table) {
    const int man = finite ? 3 : 2, bias = finite ? 7 : 15;
    const __m256i exp_mask = SET1((1 << (7 - man)) - 1), man_mask = SET1((1 << man) - 1);
    const __m256 step = _mm256_castsi256_ps(SET1((1 - bias - man + 127) << 23));
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x + i)));
        __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, SET1(0x80)), 24);
        __m256i e = _mm256_and_si256(_mm256_srli_epi32(v, man), exp_mask);
        __m256i m = _mm256_and_si256(v, man_mask);
        __m256i normal = _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, SET1(127 - bias)), 23),
                                         _mm256_slli_epi32(m, 23 - man));
        __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(m), step));
        __m256i r = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_or_si256(r, sign));
        /* e4m3fn's only special code is S.1111.111; e5m2's are every code of exponent 31 */
        __m256i special = finite ? _mm256_cmpeq_epi32(_mm256_and_si256(v, SET1(0x7F)), SET1(0x7F))
                                 : _mm256_cmpeq_epi32(e, exp_mask);
        if (!_mm256_testz_si256(special, special)) {
            for (int q = 0; q < 8; q++) out[i + q] = table[x[i + q]];
        }
    }
    for (; i < n; i++) out[i] = table[x[i]];
}
#endif

/* float32 to float8_e4m3fn (`finite`) or float8_e5m2. */
void lp_f32_to_float8(const uint32_t *x, uint8_t *out, Py_ssize_t n, int finite) {
#if LP_X86
    if (lp_has_f16c) {  /* which implies AVX2 */
        to_small_avx2(x, out, n, finite);
        return;
    }
#endif
    to_small_portable(x, out, n, finite);
}

/* float8_e4m3fn (`finite`) or float8_e5m2 to float32, `table` holding every code's value. */
void lp_float8_to_f32(const uint8_t *x, uint32_t *out, Py_ssize_t n, int finite,
                      const uint32_t *table) {
#if LP_X86
    if (lp_has_f16c) {
        from_small_avx2(x, out, n, finite, table);
        return;
    }
#endif
    for (Py_ssize_t i = 0; i < n; i++) out[i] = table[x[i]];
}

const char lp_cast8_doc[] = PyDoc_STR(
             "cast8(kind, x, out, table): float8 codes `x` (uint8) to float32 bits `out`\n"
             "(uint32); kind is 'float8_e4m3fn>float32' or 'float8_e5m2>float32', `table` the\n"
             "float32 bits of each of the 256 codes (for NaNs and infinities).");

PyObject *lp_cast8(PyObject *self, PyObject *args) {
    const char *kind;
    PyObject *xo, *oo, *to;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOOO", &kind, &xo, &oo, &to)) return NULL;
    int finite = strcmp(kind, "float8_e4m3fn>float32") == 0;
    if (!finite && strcmp(kind, "float8_e5m2>float32") != 0) {
        PyErr_Format(PyExc_ValueError, "expected kind float8_e4m3fn>float32 or "
                     "float8_e5m2>float32, got '%s'", kind);
        return NULL;
    }
    Py_ssize_t n = lp_flat_pair(xo, oo, b, 1, 4);
    if (n < 0 || lp_get_buf(to, &b[2], 0, 1, 4, "table") < 0 || b[2].view.shape[0] != 256) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expected a table of 256 codes");
        lp_release(b, 3);
        return NULL;
    }
    const uint8_t *x = b[0].view.buf;
    uint32_t *out = b[1].view.buf;
    const uint32_t *table = b[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    lp_float8_to_f32(x, out, n, finite, table);
    Py_END_ALLOW_THREADS
    lp_release(b, 3);
    Py_RETURN_NONE;
}
