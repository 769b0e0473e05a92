/* Casts: float32 to float16 and bfloat16 (and to the float8 formats, through float8.c),
 * rounding half to even with numpy's and ml_dtypes' NaN rules, and table lookups for 1- and
 * 2-byte sources (tables those libraries computed). */
#include "native.h"

/* float32 to float16 bits, rounding half to even as numpy does, NaN payloads included:
 * numpy keeps the top ten payload bits and sets the lowest when they are all zero. */
static inline uint16_t half_bits(uint32_t b) {
    uint32_t sign = (b >> 16) & 0x8000u, mag = b & 0x7FFFFFFFu;
    /* Normal results: rebias the exponent and add the rounding increment in one add. */
    uint32_t normal = (mag + 0xC8000FFFu + ((mag >> 13) & 1u)) >> 13;
    /* Subnormal results are multiples of 2**-24: adding 0.5 rounds to one, half to even. */
    uint32_t sub = f32_bits(bits_f32(mag) + 0.5f) - 0x3F000000u;
    uint32_t payload = (mag >> 13) & 0x3FFu;
    uint32_t nan = 0x7C00u | payload | (uint32_t)(payload == 0);
    /* Selections by masks, not branches, so that the loop vectorizes. */
    uint32_t small = 0u - (uint32_t)(mag < 0x38800000u), big = 0u - (uint32_t)(mag >= 0x47800000u);
    uint32_t is_nan = 0u - (uint32_t)(mag > 0x7F800000u);
    uint32_t r = (sub & small) | (normal & ~small & ~big) | (0x7C00u & big);
    return (uint16_t)(sign | (nan & is_nan) | (r & ~is_nan));
}

/* float32 to bfloat16 bits, rounding half to even; every NaN becomes the quiet NaN, as in
 * ml_dtypes. */
static inline uint16_t bfloat_bits(uint32_t b) {
    uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    uint32_t nan = ((b >> 16) & 0x8000u) | 0x7FC0u;
    return (uint16_t)((b & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

static void f32_to_f16_portable(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = half_bits(x[i]);
}

#if LP_X86
/* The CPU's own conversion rounds like numpy but quiets signalling NaNs, so the few vectors
 * holding a NaN are redone by `half_bits`. */
__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(const uint32_t *x,
                                                                  uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps((const float *)(x + i));
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        if (!_mm256_testz_ps(nan, nan)) f32_to_f16_portable(x + i, out + i, 8);
    }
    f32_to_f16_portable(x + i, out + i, n - i);
}
#endif

static void f32_to_f16(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
#if LP_X86
    if (lp_has_f16c) {
        f32_to_f16_f16c(x, out, n);
        return;
    }
#endif
    f32_to_f16_portable(x, out, n);
}

static void f32_to_bf16_portable(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = bfloat_bits(x[i]);
}

#if LP_X86
/* `bfloat_bits` sixteen values at a time, in integer lanes: round, then the quiet NaN of the
 * sign where the input is a NaN, then pack to 16 bits in order. */
__attribute__((target("avx2"))) static inline __m256i bfloat_lanes(__m256i b) {
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), odd), 16);
    __m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i is_nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7F800000));
    __m256i nan = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(b, 16),
                                                   _mm256_set1_epi32(0x8000)),
                                  _mm256_set1_epi32(0x7FC0));
    return _mm256_blendv_epi8(rounded, nan, is_nan);
}

__attribute__((target("avx2"))) static void f32_to_bf16_avx2(const uint32_t *x, uint16_t *out,
                                                             Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = bfloat_lanes(_mm256_loadu_si256((const __m256i *)(x + i)));
        __m256i hi = bfloat_lanes(_mm256_loadu_si256((const __m256i *)(x + i + 8)));
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
        _mm256_storeu_si256((__m256i *)(out + i), packed);
    }
    f32_to_bf16_portable(x + i, out + i, n - i);
}
#endif

static void f32_to_bf16(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
#if LP_X86
    if (lp_has_f16c) {  /* which implies AVX2 */
        f32_to_bf16_avx2(x, out, n);
        return;
    }
#endif
    f32_to_bf16_portable(x, out, n);
}

static void f32_to_e4m3fn(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    lp_f32_to_float8(x, out, n, 1);  /* float8.c */
}

static void f32_to_e5m2(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    lp_f32_to_float8(x, out, n, 0);
}

/* Casts from the 16-bit floats ------------------------------------------------------------ */

/* float16 bits to float32 bits, exactly; NaNs keep their payload, not quieted, as numpy does. */
static inline uint32_t float_of_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1Fu) return sign | 0x7F800000u | (man << 13);
    if (exp != 0) return sign | ((exp + 112u) << 23) | (man << 13);
    /* a subnormal (or zero) is man * 2**-24, which float32 holds exactly */
    return sign | f32_bits((float)man * 5.9604644775390625e-8f);
}

/* bfloat16 to float16, rounding half to even through the exact float32 value; every NaN
 * becomes float16's quiet NaN of its sign, as in ml_dtypes. */
static inline uint16_t half_of_bfloat(uint16_t b) {
    uint16_t nan = (uint16_t)((b & 0x8000u) | 0x7E00u);
    return (b & 0x7FFFu) > 0x7F80u ? nan : half_bits((uint32_t)b << 16);
}

LP_CLONES static void bf16_to_f32(const uint16_t *x, uint32_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = (uint32_t)x[i] << 16;
}

static void bf16_to_f16_portable(const uint16_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = half_of_bfloat(x[i]);
}

static void f16_to_f32_portable(const uint16_t *x, uint32_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = float_of_half(x[i]);
}

static void f16_to_bf16_portable(const uint16_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = bfloat_bits(float_of_half(x[i]));
}

#if LP_X86
/* Whether any of eight 16-bit floats (exponent `top` when all ones) is a NaN. */
__attribute__((target("avx2,f16c"))) static inline int any_nan16(__m128i v, uint16_t top) {
    __m128i mag = _mm_and_si128(v, _mm_set1_epi16(0x7FFF));
    return !_mm_testz_si128(_mm_cmpgt_epi16(mag, _mm_set1_epi16((short)top)),
                            _mm_set1_epi16(-1));
}

/* The CPU's conversions, eight values at a time; the few vectors holding a NaN are redone by
 * the portable loops, whose NaN rules are numpy's and ml_dtypes'. */
__attribute__((target("avx2,f16c"))) static void bf16_to_f16_f16c(const uint16_t *x,
                                                                   uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(x + i));
        __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
        if (any_nan16(v, 0x7F80)) bf16_to_f16_portable(x + i, out + i, 8);
    }
    bf16_to_f16_portable(x + i, out + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint16_t *x,
                                                                  uint32_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(x + i));
        _mm256_storeu_ps((float *)(out + i), _mm256_cvtph_ps(v));
        if (any_nan16(v, 0x7C00)) f16_to_f32_portable(x + i, out + i, 8);
    }
    f16_to_f32_portable(x + i, out + i, n - i);
}

/* float16 to float32 exactly, then to bfloat16 rounding half to even in integer lanes. */
__attribute__((target("avx2,f16c"))) static void f16_to_bf16_f16c(const uint16_t *x,
                                                                   uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(x + i));
        __m256i b = _mm256_castps_si256(_mm256_cvtph_ps(v));
        __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, bias), odd), 16);
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(packed));
        if (any_nan16(v, 0x7C00)) f16_to_bf16_portable(x + i, out + i, 8);
    }
    f16_to_bf16_portable(x + i, out + i, n - i);
}
#endif

/* The casts from 16-bit floats, by kind; the CPU's conversions where it has them. */
static void cast16(int which, const uint16_t *x, void *out, Py_ssize_t n) {
    if (which == 0) {
        bf16_to_f32(x, out, n);
        return;
    }
#if LP_X86
    if (lp_has_f16c) {
        if (which == 1) bf16_to_f16_f16c(x, out, n);
        else if (which == 2) f16_to_f32_f16c(x, out, n);
        else f16_to_bf16_f16c(x, out, n);
        return;
    }
#endif
    if (which == 1) bf16_to_f16_portable(x, out, n);
    else if (which == 2) f16_to_f32_portable(x, out, n);
    else f16_to_bf16_portable(x, out, n);
}

const char lp_cast16_doc[] = PyDoc_STR(
             "cast16(kind, x, out): convert 1-D 16-bit float bits `x` (uint16) into `out`; kind\n"
             "is 'bfloat16>float32' or 'float16>float32' (uint32 out), 'bfloat16>float16' or\n"
             "'float16>bfloat16' (uint16 out).");

PyObject *lp_cast16(PyObject *self, PyObject *args) {
    const char *kind;
    PyObject *xo, *oo;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &kind, &xo, &oo)) return NULL;
    static const char *const kinds[] = {"bfloat16>float32", "bfloat16>float16",
                                        "float16>float32", "float16>bfloat16"};
    int which = -1;
    for (int i = 0; i < 4; i++) {
        if (strcmp(kind, kinds[i]) == 0) which = i;
    }
    if (which < 0) {
        PyErr_Format(PyExc_ValueError, "expected kind bfloat16>float32, bfloat16>float16, "
                     "float16>float32 or float16>bfloat16, got '%s'", kind);
        return NULL;
    }
    Py_ssize_t n = lp_flat_pair(xo, oo, b, 2, which == 0 || which == 2 ? 4 : 2);
    if (n < 0) {
        lp_release(b, 2);
        return NULL;
    }
    const uint16_t *x = b[0].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    cast16(which, x, out, n);
    Py_END_ALLOW_THREADS
    lp_release(b, 2);
    Py_RETURN_NONE;
}

#define LOOKUP(NAME, S, T)                                                                     \
    LP_CLONES static void NAME(const S *x, T *out, const T *table, Py_ssize_t n) {           \
        for (Py_ssize_t i = 0; i < n; i++) out[i] = table[x[i]];                             \
    }

LOOKUP(lookup_8_8, uint8_t, uint8_t)
LOOKUP(lookup_8_16, uint8_t, uint16_t)
LOOKUP(lookup_8_32, uint8_t, uint32_t)
LOOKUP(lookup_8_64, uint8_t, uint64_t)
LOOKUP(lookup_16_8, uint16_t, uint8_t)
LOOKUP(lookup_16_16, uint16_t, uint16_t)
LOOKUP(lookup_16_32, uint16_t, uint32_t)
LOOKUP(lookup_16_64, uint16_t, uint64_t)

const char lp_cast_doc[] = PyDoc_STR(
             "cast(kind, x, out): convert 1-D float32 bits `x` (uint32) into `out`; kind is\n"
             "'float16' or 'bfloat16' (uint16 out), 'float8_e4m3fn' or 'float8_e5m2' (uint8).");

PyObject *lp_cast(PyObject *self, PyObject *args) {
    const char *kind;
    PyObject *xo, *oo;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &kind, &xo, &oo)) return NULL;
    static const char *const kinds[] = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
    int which = -1;
    for (int i = 0; i < 4; i++) {
        if (strcmp(kind, kinds[i]) == 0) which = i;
    }
    if (which < 0) {
        PyErr_Format(PyExc_ValueError, "expected kind float16, bfloat16, float8_e4m3fn or "
                     "float8_e5m2, got '%s'", kind);
        return NULL;
    }
    Py_ssize_t n = lp_flat_pair(xo, oo, b, 4, which < 2 ? 2 : 1);
    if (n < 0) {
        lp_release(b, 2);
        return NULL;
    }
    const uint32_t *x = b[0].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    switch (which) {
    case 0: f32_to_f16(x, out, n); break;
    case 1: f32_to_bf16(x, out, n); break;
    case 2: f32_to_e4m3fn(x, out, n); break;
    default: f32_to_e5m2(x, out, n);
    }
    Py_END_ALLOW_THREADS
    lp_release(b, 2);
    Py_RETURN_NONE;
}

/* The lookup loop of an item size pair. */
static void lookup_run(const void *x, Py_ssize_t s, void *out, Py_ssize_t t, const void *table,
                       Py_ssize_t n) {
    if (s == 1) {
        if (t == 1) lookup_8_8(x, out, table, n);
        else if (t == 2) lookup_8_16(x, out, table, n);
        else if (t == 4) lookup_8_32(x, out, table, n);
        else lookup_8_64(x, out, table, n);
    } else {
        if (t == 1) lookup_16_8(x, out, table, n);
        else if (t == 2) lookup_16_16(x, out, table, n);
        else if (t == 4) lookup_16_32(x, out, table, n);
        else lookup_16_64(x, out, table, n);
    }
}

const char lp_lookup_doc[] = PyDoc_STR(
             "lookup(x, out, table): out[i] = table[x[i]] for 1-D `x` of 1- or 2-byte codes\n"
             "and a table of one entry per code, of out's item size (1, 2, 4 or 8 bytes).");

PyObject *lp_lookup(PyObject *self, PyObject *args) {
    PyObject *xo, *oo, *to;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "OOO", &xo, &oo, &to)) return NULL;
    Py_ssize_t n = lp_flat_pair(xo, oo, b, 0, 0);
    if (n < 0 || lp_get_buf(to, &b[2], 0, 1, b[1].view.itemsize, "table") < 0) {
        lp_release(b, 3);
        return NULL;
    }
    Py_ssize_t s = b[0].view.itemsize, t = b[1].view.itemsize;
    if ((s != 1 && s != 2) || (t != 1 && t != 2 && t != 4 && t != 8) ||
        b[2].view.shape[0] != ((Py_ssize_t)1 << (8 * s))) {
        lp_release(b, 3);
        PyErr_SetString(PyExc_ValueError, "expected 1- or 2-byte codes and a table of one "
                        "1-, 2-, 4- or 8-byte entry per code");
        return NULL;
    }
    const void *x = b[0].view.buf, *table = b[2].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    lookup_run(x, s, out, t, table, n);
    Py_END_ALLOW_THREADS
    lp_release(b, 3);
    Py_RETURN_NONE;
}

/* Conversions by kind, for the loops of other files (the transposes) ---------------------- */

const char *const LP_CONVERT_NAMES[LP_CONVERT_KINDS] = {
    "", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
    "bfloat16>float32", "bfloat16>float16", "float16>float32", "float16>bfloat16", "lookup",
    "float8_e4m3fn>float32", "float8_e5m2>float32",
};

/* The kind of a conversion name (float32 sources by their target's name, the 16-bit ones by
 * `cast16`'s), or -1. */
int lp_convert_kind(const char *name) {
    for (int i = 0; i < LP_CONVERT_KINDS; i++) {
        if (strcmp(name, LP_CONVERT_NAMES[i]) == 0) return i;
    }
    return -1;
}

/* `n` elements of `in_size` bytes at `x` converted into `out` (`out_size` bytes each). */
void lp_convert(const LpConvert *conv, const void *x, Py_ssize_t in_size, void *out,
                Py_ssize_t out_size, Py_ssize_t n) {
    switch (conv->kind) {
    case LP_CONVERT_COPY: memcpy(out, x, (size_t)(n * out_size)); break;
    case 1: f32_to_f16(x, out, n); break;
    case 2: f32_to_bf16(x, out, n); break;
    case 3: f32_to_e4m3fn(x, out, n); break;
    case 4: f32_to_e5m2(x, out, n); break;
    case LP_CONVERT_LOOKUP: lookup_run(x, in_size, out, out_size, conv->table, n); break;
    case 10: lp_float8_to_f32(x, out, n, 1, conv->table); break;
    case 11: lp_float8_to_f32(x, out, n, 0, conv->table); break;
    default: cast16(conv->kind - 5, x, out, n);
    }
}
