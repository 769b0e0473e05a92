/* Casts: float32 to float16 and bfloat16 (and to the float8 formats, through float8.c), the
 * 16-bit floats to each other and to float32, rounding half to even with numpy's and
 * ml_dtypes' NaN rules (table lookups for the other 1- and 2-byte sources are lookup.c's).
 * Vector loops where the CPU has AVX2 and F16C, large outputs streamed around the
 * cache; the portable loops elsewhere and for the heads and tails. */
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

#define PORTABLE(NAME, S, T, EXPR)                                                            \
    static void NAME(const S *x, T *out, Py_ssize_t n) {                                      \
        for (Py_ssize_t i = 0; i < n; i++) LP_STORE(T, out + i, EXPR(LP_LOAD(S, x + i)));     \
    }
#define SHIFTED(v) ((uint32_t)(v) << 16)
#define BFLOAT_OF_HALF(v) bfloat_bits(float_of_half(v))

PORTABLE(f32_to_f16_portable, uint32_t, uint16_t, half_bits)
PORTABLE(f32_to_bf16_portable, uint32_t, uint16_t, bfloat_bits)
PORTABLE(bf16_to_f32_portable, uint16_t, uint32_t, SHIFTED)
PORTABLE(bf16_to_f16_portable, uint16_t, uint16_t, half_of_bfloat)
PORTABLE(f16_to_f32_portable, uint16_t, uint32_t, float_of_half)
PORTABLE(f16_to_bf16_portable, uint16_t, uint16_t, BFLOAT_OF_HALF)

#if LP_X86
#define F16C __attribute__((target("avx2,f16c")))
#define INLINE static inline __attribute__((always_inline))
#define PREFETCH(p) _mm_prefetch((const char *)(p) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0)
#define SET1 _mm256_set1_epi32
#define SET16(v) _mm256_set1_epi16((short)(v))
#define LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define LOW(v) _mm256_castsi256_si128(v)
#define HIGH(v) _mm256_extracti128_si256(v, 1)

/* A vector cast `NAME` from its run `RUN(x, out, n, stream)` (which returns the elements it
 * did), inlined twice: with streamed stores, after `REST` (the portable loop) has done the
 * elements before the first aligned output, where the output is large; with stores through
 * the cache elsewhere. `REST` does the tail. */
#define VECTOR_CAST(NAME, RUN, REST, S, T)                                                    \
    F16C static void NAME(const S *x, T *out, Py_ssize_t n) {                                 \
        Py_ssize_t head = lp_stream_head(out, sizeof(T), n), i;                               \
        if (head >= 0) {                                                                      \
            REST(x, out, head);                                                               \
            i = head + RUN(x + head, out + head, n - head, 1);                                \
            _mm_sfence();                                                                     \
        } else {                                                                              \
            i = RUN(x, out, n, 0);                                                            \
        }                                                                                     \
        REST(x + i, out + i, n - i);                                                          \
    }

/* Whether any of sixteen 16-bit floats (exponent `top` when all ones) is a NaN. */
F16C INLINE int any_nan16(__m256i v, uint16_t top) {
    __m256i mag = _mm256_and_si256(v, SET16(0x7FFF));
    __m256i nan = _mm256_cmpgt_epi16(mag, SET16(top));
    return !_mm256_testz_si256(nan, nan);
}

/* Whether any of two vectors of float32 holds a NaN. */
F16C INLINE int any_nan32(__m256 a, __m256 b) {
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    return !_mm256_testz_ps(nan, nan);
}

/* Each run below converts sixteen values at a time. The CPU's float16 conversions round like
 * numpy but change NaNs (they quiet signalling ones), so a vector holding a NaN is redone by
 * the portable loop, whose NaN rules are numpy's and ml_dtypes', before it is stored. */

F16C INLINE Py_ssize_t f32_to_f16_run(const uint32_t *x, uint16_t *out, Py_ssize_t n,
                                      const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256 a = _mm256_loadu_ps((const float *)(x + i));
        __m256 b = _mm256_loadu_ps((const float *)(x + i + 8));
        __m128i ha = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT);
        __m128i hb = _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT);
        if (any_nan32(a, b)) {
            uint16_t redo[16];
            f32_to_f16_portable(x + i, redo, 16);
            ha = _mm_loadu_si128((const __m128i *)redo);
            hb = _mm_loadu_si128((const __m128i *)(redo + 8));
        }
        lp_put16(out + i, ha, stream);
        lp_put16(out + i + 8, hb, stream);
    }
    return i;
}

/* float32 bits rounded to bfloat16's, half to even, in the low half of each lane. */
F16C INLINE __m256i bfloat_lanes(__m256i b) {
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), SET1(1));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, SET1(0x7FFF)), odd), 16);
}

/* Two vectors of `bfloat_lanes` packed into sixteen 16-bit values in order. */
F16C INLINE __m256i bfloat_pack(__m256i a, __m256i b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(bfloat_lanes(a), bfloat_lanes(b)), 0xD8);
}

F16C INLINE Py_ssize_t f32_to_bf16_run(const uint32_t *x, uint16_t *out, Py_ssize_t n,
                                       const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256i a = LOAD(x + i), b = LOAD(x + i + 8);
        __m256i r = bfloat_pack(a, b);
        if (any_nan32(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b))) {
            uint16_t redo[16];
            f32_to_bf16_portable(x + i, redo, 16);
            r = LOAD(redo);
        }
        lp_put32(out + i, r, stream);
    }
    return i;
}

F16C INLINE Py_ssize_t bf16_to_f32_run(const uint16_t *x, uint32_t *out, Py_ssize_t n,
                                       const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256i v = LOAD(x + i);
        lp_put32(out + i, _mm256_slli_epi32(_mm256_cvtepu16_epi32(LOW(v)), 16), stream);
        lp_put32(out + i + 8, _mm256_slli_epi32(_mm256_cvtepu16_epi32(HIGH(v)), 16), stream);
    }
    return i;
}

/* bfloat16 to float16 through the exact float32 value, which the CPU rounds. */
F16C INLINE __m128i half_lanes_of_bfloat(__m128i v) {
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

F16C INLINE Py_ssize_t bf16_to_f16_run(const uint16_t *x, uint16_t *out, Py_ssize_t n,
                                       const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256i v = LOAD(x + i);
        __m128i ha = half_lanes_of_bfloat(LOW(v)), hb = half_lanes_of_bfloat(HIGH(v));
        if (any_nan16(v, 0x7F80)) {
            uint16_t redo[16];
            bf16_to_f16_portable(x + i, redo, 16);
            ha = _mm_loadu_si128((const __m128i *)redo);
            hb = _mm_loadu_si128((const __m128i *)(redo + 8));
        }
        lp_put16(out + i, ha, stream);
        lp_put16(out + i + 8, hb, stream);
    }
    return i;
}

F16C INLINE Py_ssize_t f16_to_f32_run(const uint16_t *x, uint32_t *out, Py_ssize_t n,
                                      const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256i v = LOAD(x + i);
        __m256 a = _mm256_cvtph_ps(LOW(v)), b = _mm256_cvtph_ps(HIGH(v));
        if (any_nan16(v, 0x7C00)) {
            uint32_t redo[16];
            f16_to_f32_portable(x + i, redo, 16);
            a = _mm256_loadu_ps((const float *)redo);
            b = _mm256_loadu_ps((const float *)(redo + 8));
        }
        lp_put32(out + i, _mm256_castps_si256(a), stream);
        lp_put32(out + i + 8, _mm256_castps_si256(b), stream);
    }
    return i;
}

/* float16 to bfloat16 through the exact float32 value: the CPU's conversion, then
 * `bfloat_lanes`, and the portable loop for a vector holding a NaN. No branch on the values:
 * rounding normal float16 in 16-bit lanes (0.7 times a copy's time) with vectors holding a
 * subnormal sent this way took 3.4 times on weights of standard deviation 0.002 (a third of
 * the vectors hold one), against 1.05-1.15 for every vector so, whatever the values. */
F16C INLINE Py_ssize_t f16_to_bf16_run(const uint16_t *x, uint16_t *out, Py_ssize_t n,
                                       const int stream) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH(x + i);
        __m256i v = LOAD(x + i);
        __m256i a = _mm256_castps_si256(_mm256_cvtph_ps(LOW(v)));
        __m256i r = bfloat_pack(a, _mm256_castps_si256(_mm256_cvtph_ps(HIGH(v))));
        if (any_nan16(v, 0x7C00)) {
            uint16_t redo[16];
            f16_to_bf16_portable(x + i, redo, 16);
            r = LOAD(redo);
        }
        lp_put32(out + i, r, stream);
    }
    return i;
}

VECTOR_CAST(f32_to_f16_f16c, f32_to_f16_run, f32_to_f16_portable, uint32_t, uint16_t)
VECTOR_CAST(f32_to_bf16_f16c, f32_to_bf16_run, f32_to_bf16_portable, uint32_t, uint16_t)
VECTOR_CAST(bf16_to_f32_f16c, bf16_to_f32_run, bf16_to_f32_portable, uint16_t, uint32_t)
VECTOR_CAST(bf16_to_f16_f16c, bf16_to_f16_run, bf16_to_f16_portable, uint16_t, uint16_t)
VECTOR_CAST(f16_to_f32_f16c, f16_to_f32_run, f16_to_f32_portable, uint16_t, uint32_t)
VECTOR_CAST(f16_to_bf16_f16c, f16_to_bf16_run, f16_to_bf16_portable, uint16_t, uint16_t)
#endif

/* A cast by its vector loop where the CPU has AVX2 and F16C, else by its portable one. */
#if LP_X86
#define BEST(NAME, S, T)                                                                      \
    static void NAME(const S *x, T *out, Py_ssize_t n) {                                      \
        if (lp_has_f16c) NAME##_f16c(x, out, n);                                              \
        else NAME##_portable(x, out, n);                                                      \
    }
#else
#define BEST(NAME, S, T)                                                                      \
    static void NAME(const S *x, T *out, Py_ssize_t n) { NAME##_portable(x, out, n); }
#endif

BEST(f32_to_f16, uint32_t, uint16_t)
BEST(f32_to_bf16, uint32_t, uint16_t)
BEST(bf16_to_f32, uint16_t, uint32_t)
BEST(bf16_to_f16, uint16_t, uint16_t)
BEST(f16_to_f32, uint16_t, uint32_t)
BEST(f16_to_bf16, uint16_t, uint16_t)

static void f32_to_e4m3fn(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    lp_f32_to_float8(x, out, n, 1);  /* float8.c */
}

static void f32_to_e5m2(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    lp_f32_to_float8(x, out, n, 0);
}

/* float16 or bfloat16 to a float8 format, rounding once: in 16-bit lanes with AVX-512 or
 * AVX2 (cast512.c, float8_half.c), else through float32, which holds every 16-bit value
 * exactly, block by block in a buffer that stays in the first-level cache. */
static void half_to_float8(const uint16_t *x, uint8_t *out, Py_ssize_t n, int bfloat,
                           int finite) {
#if LP_X86
    if (lp_has_avx512) {  /* in 16-bit lanes */
        lp_half_to_float8_512(x, out, n, !bfloat, finite);
        return;
    }
    if (lp_has_f16c) {  /* AVX2 */
        lp_half_to_float8_f16c(x, out, n, !bfloat, finite);
        return;
    }
#endif
    enum { BLOCK = 1024 };
    uint32_t wide[BLOCK];
    for (Py_ssize_t i = 0; i < n; i += BLOCK) {
        Py_ssize_t m = n - i < BLOCK ? n - i : BLOCK;
        if (bfloat) bf16_to_f32(x + i, wide, m);
        else f16_to_f32(x + i, wide, m);
        lp_f32_to_float8(wide, out + i, m, finite);  /* float8.c */
    }
}

/* float16 to bfloat16: by AVX-512 BF16's rounding where the CPU has it (cast512.c), else by
 * the AVX2 or portable loop. */
static void half_to_bfloat(const uint16_t *x, uint16_t *out, Py_ssize_t n) {
#if LP_X86
    if (lp_has_bf16) {
        lp_half_to_bfloat_512(x, out, n);
        return;
    }
#endif
    f16_to_bf16(x, out, n);
}

/* The casts from 16-bit floats, by kind (CAST16_KINDS' place). */
static void cast16(int which, const uint16_t *x, void *out, Py_ssize_t n) {
    if (which == 0) bf16_to_f32(x, out, n);
    else if (which == 1) bf16_to_f16(x, out, n);
    else if (which == 2) f16_to_f32(x, out, n);
    else if (which == 3) half_to_bfloat(x, out, n);
    else if (which == 8) lp_half_to_double(x, out, n); /* cast64.c */
    else half_to_float8(x, out, n, which < 6, which % 2 == 0);
}

#define CAST16_KINDS 9
static const char *const CAST16_NAMES[CAST16_KINDS] = {
    "bfloat16>float32",      "bfloat16>float16",   "float16>float32",
    "float16>bfloat16",      "bfloat16>float8_e4m3fn", "bfloat16>float8_e5m2",
    "float16>float8_e4m3fn", "float16>float8_e5m2",    "float16>float64",
};

const char lp_cast16_doc[] = PyDoc_STR(
             "cast16(kind, x, out): convert 1-D 16-bit float bits `x` (uint16) into `out`; kind\n"
             "is 'bfloat16>float32' or 'float16>float32' (uint32 out), 'bfloat16>float16' or\n"
             "'float16>bfloat16' (uint16 out), 'bfloat16>' or 'float16>' followed by\n"
             "'float8_e4m3fn' or 'float8_e5m2' (uint8 out), or 'float16>float64' (uint64 out).");

PyObject *lp_cast16(PyObject *self, PyObject *args) {
    static const Py_ssize_t out_sizes[CAST16_KINDS] = {4, 2, 4, 2, 1, 1, 1, 1, 8};
    static const LpCastKinds kinds = {
        CAST16_NAMES, CAST16_KINDS,
        "bfloat16>float32, bfloat16>float16, float16>float32, float16>bfloat16, "
        "float16>float64, or bfloat16> or float16> then float8_e4m3fn or float8_e5m2",
        2, out_sizes};
    Buf b[2];
    Py_ssize_t n;
    int which = lp_cast_args(args, &kinds, b, &n);
    if (which < 0) return NULL;
    const uint16_t *x = b[0].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    cast16(which, x, out, n);
    Py_END_ALLOW_THREADS
    lp_release(b, 2);
    Py_RETURN_NONE;
}

const char lp_cast_doc[] = PyDoc_STR(
             "cast(kind, x, out): convert 1-D float32 bits `x` (uint32) into `out`; kind is\n"
             "'float16' or 'bfloat16' (uint16 out), 'float8_e4m3fn' or 'float8_e5m2' (uint8).");

PyObject *lp_cast(PyObject *self, PyObject *args) {
    static const char *const names[] = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
    static const Py_ssize_t out_sizes[] = {2, 2, 1, 1};
    static const LpCastKinds kinds = {
        names, 4, "float16, bfloat16, float8_e4m3fn or float8_e5m2", 4, out_sizes};
    Buf b[2];
    Py_ssize_t n;
    int which = lp_cast_args(args, &kinds, b, &n);
    if (which < 0) return NULL;
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
    case LP_CONVERT_LOOKUP: lp_lookup_run(x, in_size, out, out_size, conv->table, n); break;
    case 10: lp_float8_to_f32(x, out, n, 1, conv->table); break;
    case 11: lp_float8_to_f32(x, out, n, 0, conv->table); break;
    default: cast16(conv->kind - 5, x, out, n);
    }
}
