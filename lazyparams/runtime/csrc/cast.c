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

/* The portable loop of a cast, EXPR of each element. */
#define PORTABLE(NAME, S, T, EXPR)                                                            \
    static void NAME##_portable(const S *x, T *out, Py_ssize_t n) {                           \
        for (Py_ssize_t i = 0; i < n; i++) LP_STORE(T, out + i, EXPR(LP_LOAD(S, x + i)));     \
    }
#define SHIFTED(v) ((uint32_t)(v) << 16)
#define BFLOAT_OF_HALF(v) bfloat_bits(float_of_half(v))

#if LP_X86
#define F16C __attribute__((target("avx2,f16c")))
#define INLINE static inline __attribute__((always_inline))
#define PREFETCH(p) _mm_prefetch((const char *)(p) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0)
#define SET1 _mm256_set1_epi32
#define SET16(v) _mm256_set1_epi16((short)(v))
#define LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define LOW(v) _mm256_castsi256_si128(v)
#define HIGH(v) _mm256_extracti128_si256(v, 1)

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

/* Each step below converts sixteen values from x + i into v. The CPU's float16 conversions
 * round like numpy but change NaNs (they quiet signalling ones), so a step holding a NaN says
 * so, and the portable loop, whose NaN rules are numpy's and ml_dtypes', redoes it. */

F16C INLINE int f32_to_f16_step(const uint32_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256 a = _mm256_loadu_ps((const float *)(x + i));
    __m256 b = _mm256_loadu_ps((const float *)(x + i + 8));
    v[0] = _mm256_set_m128i(_mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT),
                            _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
    return any_nan32(a, b);
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

F16C INLINE int f32_to_bf16_step(const uint32_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256i a = LOAD(x + i), b = LOAD(x + i + 8);
    v[0] = bfloat_pack(a, b);
    return any_nan32(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b));
}

F16C INLINE int bf16_to_f32_step(const uint16_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256i h = LOAD(x + i);
    v[0] = _mm256_slli_epi32(_mm256_cvtepu16_epi32(LOW(h)), 16);
    v[1] = _mm256_slli_epi32(_mm256_cvtepu16_epi32(HIGH(h)), 16);
    return 0;
}

/* bfloat16 to float16 through the exact float32 value, which the CPU rounds. */
F16C INLINE __m128i half_lanes_of_bfloat(__m128i v) {
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

F16C INLINE int bf16_to_f16_step(const uint16_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256i h = LOAD(x + i);
    v[0] = _mm256_set_m128i(half_lanes_of_bfloat(HIGH(h)), half_lanes_of_bfloat(LOW(h)));
    return any_nan16(h, 0x7F80);
}

F16C INLINE int f16_to_f32_step(const uint16_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256i h = LOAD(x + i);
    v[0] = _mm256_castps_si256(_mm256_cvtph_ps(LOW(h)));
    v[1] = _mm256_castps_si256(_mm256_cvtph_ps(HIGH(h)));
    return any_nan16(h, 0x7C00);
}

/* float16 to bfloat16 through the exact float32 value: the CPU's conversion, then
 * `bfloat_lanes`, and the portable loop for a vector holding a NaN. No branch on the values:
 * rounding normal float16 in 16-bit lanes (0.7 times a copy's time) with vectors holding a
 * subnormal sent this way took 3.4 times on weights of standard deviation 0.002 (a third of
 * the vectors hold one), against 1.05-1.15 for every vector so, whatever the values. */
F16C INLINE int f16_to_bf16_step(const uint16_t *x, Py_ssize_t i, __m256i *v) {
    PREFETCH(x + i);
    __m256i h = LOAD(x + i);
    __m256i a = _mm256_castps_si256(_mm256_cvtph_ps(LOW(h)));
    v[0] = bfloat_pack(a, _mm256_castps_si256(_mm256_cvtph_ps(HIGH(h))));
    return any_nan16(h, 0x7C00);
}

/* The vector cast `NAME##_f16c`: its run of `NAME##_step`s, redone by `NAME##_portable`, which
 * also does the head and tail. */
#define VECTOR_CAST(NAME, S, T)                                                               \
    F16C INLINE Py_ssize_t NAME##_run(const S *x, T *out, Py_ssize_t n, const int stream) {   \
        LP_CAST_STEPS(16, NAME##_step, NAME##_portable);                                      \
    }                                                                                         \
    F16C static void NAME##_f16c(const S *x, T *out, Py_ssize_t n) {                          \
        LP_STREAMED_CAST(x, out, n, NAME##_run, NAME##_portable);                             \
    }
#else
#define VECTOR_CAST(NAME, S, T)
#endif

/* The cast `NAME` from S to T: its portable loop, element by element by EXPR; its vector one
 * (AVX2 and F16C), of `NAME##_step`s; and the pick of the two. */
#define CAST(NAME, S, T, EXPR)                                                                \
    PORTABLE(NAME, S, T, EXPR)                                                                \
    VECTOR_CAST(NAME, S, T)                                                                   \
    LP_PICK_CAST(NAME, S, T, lp_has_f16c, NAME##_f16c)

CAST(f32_to_f16, uint32_t, uint16_t, half_bits)
CAST(f32_to_bf16, uint32_t, uint16_t, bfloat_bits)
CAST(bf16_to_f32, uint16_t, uint32_t, SHIFTED)
CAST(bf16_to_f16, uint16_t, uint16_t, half_of_bfloat)
CAST(f16_to_f32, uint16_t, uint32_t, float_of_half)
CAST(f16_to_bf16, uint16_t, uint16_t, BFLOAT_OF_HALF)

/* The float32 bits of 16-bit floats, as `lp_float8_by_blocks` widens them. */
static void widen_bfloat(const void *x, uint32_t *wide, Py_ssize_t m) { bf16_to_f32(x, wide, m); }
static void widen_half(const void *x, uint32_t *wide, Py_ssize_t m) { f16_to_f32(x, wide, m); }

/* float16 or bfloat16 to a float8 format, rounding once: in 16-bit lanes with AVX-512 or
 * AVX2 (cast512.c, float8_half.c), else through float32, which holds every 16-bit value
 * exactly. */
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
    lp_float8_by_blocks(x, 2, out, n, finite, bfloat ? widen_bfloat : widen_half); /* float8.c */
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

/* The casts from float32, by kind (their place in `lp_cast`'s names). */
static void cast32(int which, const void *x, void *out, Py_ssize_t n, const void *table) {
    if (which == 0) f32_to_f16(x, out, n);
    else if (which == 1) f32_to_bf16(x, out, n);
    else lp_f32_to_float8(x, out, n, which == 2); /* float8.c */
}

/* The casts from 16-bit floats, by kind (their place in `lp_cast16`'s names). */
static void cast16(int which, const void *x, void *out, Py_ssize_t n, const void *table) {
    if (which == 0) bf16_to_f32(x, out, n);
    else if (which == 1) bf16_to_f16(x, out, n);
    else if (which == 2) f16_to_f32(x, out, n);
    else if (which == 3) half_to_bfloat(x, out, n);
    else if (which == 8) lp_half_to_double(x, out, n); /* cast64.c */
    else half_to_float8(x, out, n, which < 6, which % 2 == 0);
}

static const char *const CAST16_NAMES[] = {
    "bfloat16>float32",      "bfloat16>float16",   "float16>float32",
    "float16>bfloat16",      "bfloat16>float8_e4m3fn", "bfloat16>float8_e5m2",
    "float16>float8_e4m3fn", "float16>float8_e5m2",    "float16>float64",
};
static const Py_ssize_t CAST16_SIZES[] = {4, 2, 4, 2, 1, 1, 1, 1, 8};
static const LpCastKinds CAST16 = {
    CAST16_NAMES, 9,
    "bfloat16>float32, bfloat16>float16, float16>float32, float16>bfloat16, "
    "float16>float64, or bfloat16> or float16> then float8_e4m3fn or float8_e5m2",
    2, CAST16_SIZES, 0, cast16};

LP_CAST_FUNCTION(cast16, CAST16,
    "cast16(kind, x, out): convert 1-D 16-bit float bits `x` (uint16) into `out`; kind\n"
    "is 'bfloat16>float32' or 'float16>float32' (uint32 out), 'bfloat16>float16' or\n"
    "'float16>bfloat16' (uint16 out), 'bfloat16>' or 'float16>' followed by\n"
    "'float8_e4m3fn' or 'float8_e5m2' (uint8 out), or 'float16>float64' (uint64 out).")

static const char *const CAST_NAMES[] = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
static const Py_ssize_t CAST_SIZES[] = {2, 2, 1, 1};
static const LpCastKinds CAST = {
    CAST_NAMES, 4, "float16, bfloat16, float8_e4m3fn or float8_e5m2", 4, CAST_SIZES, 0, cast32};

LP_CAST_FUNCTION(cast, CAST,
    "cast(kind, x, out): convert 1-D float32 bits `x` (uint32) into `out`; kind is\n"
    "'float16' or 'bfloat16' (uint16 out), 'float8_e4m3fn' or 'float8_e5m2' (uint8).")

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
    if (conv->kind == LP_CONVERT_COPY) memcpy(out, x, (size_t)(n * out_size));
    else if (conv->kind < 5) cast32(conv->kind - 1, x, out, n, NULL);
    else if (conv->kind < LP_CONVERT_LOOKUP) cast16(conv->kind - 5, x, out, n, NULL);
    else if (conv->kind == LP_CONVERT_LOOKUP) {
        lp_lookup_run(x, in_size, out, out_size, conv->table, n);
    }
    else lp_float8_cast(conv->kind - 10, x, out, n, conv->table); /* float8.c */
}
