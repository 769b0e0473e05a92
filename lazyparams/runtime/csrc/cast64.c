/* Casts from float64 to float16, bfloat16 and the float8 formats (and float16 to float64,
 * exactly, for cast16), bit for bit as numpy and
 * ml_dtypes give them: float16 rounds once from the float64 value (half to even), as numpy
 * does; bfloat16 and the float8 formats round through float32 first, as ml_dtypes does.
 * AVX-512 loops where the CPU has them (lp_has_avx512), the element loops elsewhere and for
 * the tails (GCC does not vectorize float16's: six times slower). */
#include "native.h"

/* float64 bits to float16's, as numpy rounds them: once, half to even. Normal results rebias
 * and round in one add; subnormal ones shift the significand right by how far below the
 * smallest normal they are, rounding what is shifted out (past 60 bits everything rounds to
 * zero); past the largest finite value, infinity. NaNs keep the top ten payload bits, the
 * lowest set when they are all zero, as numpy does. */
static inline uint16_t half_of_double(uint64_t b) {
    uint64_t mag = b & 0x7FFFFFFFFFFFFFFFull, e = mag >> 52;
    uint64_t normal = (mag - (1008ull << 52) + ((1ull << 41) - 1u) + ((mag >> 42) & 1u)) >> 42;
    uint64_t sig = (mag & ((1ull << 52) - 1u)) | ((uint64_t)(e != 0) << 52);
    uint64_t s = 1051u - (e ? e : 1u);
    s = s - 1u < 60u ? s : 60u; /* normal lanes' junk kept in range */
    uint64_t sub = (sig + (1ull << (s - 1u)) - 1u + ((sig >> s) & 1u)) >> s;
    uint64_t r = mag < (1009ull << 52) ? sub : normal;
    r = r < 0x7C00u ? r : 0x7C00u;
    uint64_t top = (mag >> 42) & 0x3FFu;
    uint64_t nan = 0x7C00u | top | (uint64_t)(top == 0);
    r = mag > 0x7FF0000000000000ull ? nan : r;
    return (uint16_t)(((b >> 48) & 0x8000u) | r);
}

/* float64 to float32 bits, the CPU rounding (half to even). */
static inline uint32_t float_of_double(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return f32_bits((float)d);
}

/* bfloat16 through float32, as ml_dtypes converts: float32 rounded to bfloat16, half to even,
 * every NaN its quiet NaN of its sign. */
static inline uint16_t bfloat_of_double(uint64_t b) {
    uint32_t f = float_of_double(b);
    uint32_t rounded = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
    uint32_t nan = ((f >> 16) & 0x8000u) | 0x7FC0u;
    return (uint16_t)((f & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

static void f64_to_f16_portable(const uint64_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        LP_STORE(uint16_t, out + i, half_of_double(LP_LOAD(uint64_t, x + i)));
    }
}

static void f64_to_bf16_portable(const uint64_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        LP_STORE(uint16_t, out + i, bfloat_of_double(LP_LOAD(uint64_t, x + i)));
    }
}

#if LP_X86
#define V512 __attribute__((target("avx512f")))
#define SET64(v) _mm512_set1_epi64((long long)(v))
#define PREFETCH2(p)                                                                          \
    do {                                                                                      \
        _mm_prefetch((const char *)(p) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);                \
        _mm_prefetch((const char *)(p) + LP_CAST_PREFETCH_BYTES + 64, _MM_HINT_T0);           \
    } while (0)

/* `half_of_double` of eight values in their lanes. The subnormal step runs only for vectors
 * that hold a subnormal result: few do (float16's are below 2**-14). */
V512 static inline __m512i half_lanes(__m512i b) {
    const __m512i one = SET64(1);
    __m512i mag = _mm512_and_si512(b, SET64(0x7FFFFFFFFFFFFFFFull));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi64(mag, 42), one);
    __m512i bump = SET64(((1ull << 41) - 1u) - (1008ull << 52));
    __m512i r = _mm512_srli_epi64(_mm512_add_epi64(_mm512_add_epi64(mag, bump), odd), 42);
    __mmask8 small = _mm512_cmplt_epu64_mask(mag, SET64(1009ull << 52));
    if (small) {
        __m512i e = _mm512_srli_epi64(mag, 52);
        __m512i sig = _mm512_or_si512(_mm512_and_si512(mag, SET64((1ull << 52) - 1u)),
                                      _mm512_slli_epi64(_mm512_min_epu64(e, one), 52));
        __m512i s = _mm512_sub_epi64(SET64(1051), _mm512_max_epu64(e, one));
        s = _mm512_min_epu64(s, SET64(60)); /* shifts past 63 give zero: no junk to fear */
        __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(s, one));
        __m512i round = _mm512_add_epi64(_mm512_sub_epi64(half, one),
                                         _mm512_and_si512(_mm512_srlv_epi64(sig, s), one));
        r = _mm512_mask_mov_epi64(r, small, _mm512_srlv_epi64(_mm512_add_epi64(sig, round), s));
    }
    r = _mm512_min_epu64(r, SET64(0x7C00));
    __mmask8 is_nan = _mm512_cmpgt_epu64_mask(mag, SET64(0x7FF0000000000000ull));
    __m512i top = _mm512_and_si512(_mm512_srli_epi64(mag, 42), SET64(0x3FF));
    __m512i nan = _mm512_or_si512(_mm512_or_si512(top, SET64(0x7C00)),
                                  _mm512_maskz_mov_epi64(_mm512_testn_epi64_mask(top, top), one));
    r = _mm512_mask_mov_epi64(r, is_nan, nan);
    return _mm512_or_si512(r, _mm512_and_si512(_mm512_srli_epi64(b, 48), SET64(0x8000)));
}

V512 static void f64_to_f16_512(const uint64_t *x, uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH2(x + i);
        __m128i a = _mm512_cvtepi64_epi16(half_lanes(_mm512_loadu_si512(x + i)));
        __m128i b = _mm512_cvtepi64_epi16(half_lanes(_mm512_loadu_si512(x + i + 8)));
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_set_m128i(b, a));
    }
    f64_to_f16_portable(x + i, out + i, n - i);
}

/* Sixteen float64 rounded to float32 by the CPU (half to even, as numpy), in one register. */
V512 static inline __m512i floats_of_doubles(const uint64_t *x) {
    __m256 lo = _mm512_cvtpd_ps(_mm512_castsi512_pd(_mm512_loadu_si512(x)));
    __m256 hi = _mm512_cvtpd_ps(_mm512_castsi512_pd(_mm512_loadu_si512(x + 8)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_castps_si256(lo)),
                              _mm256_castps_si256(hi), 1);
}

V512 static void f64_to_bf16_512(const uint64_t *x, uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH2(x + i);
        __m512i f = floats_of_doubles(x + i);
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_add_epi32(_mm512_add_epi32(f, _mm512_set1_epi32(0x7FFF)), odd);
        r = _mm512_srli_epi32(r, 16);
        __m512i mag = _mm512_and_si512(f, _mm512_set1_epi32(0x7FFFFFFF));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7F800000));
        __m512i quiet = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(f, 16),
                                                         _mm512_set1_epi32(0x8000)),
                                        _mm512_set1_epi32(0x7FC0));
        r = _mm512_mask_mov_epi32(r, nan, quiet);
        _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi32_epi16(r));
    }
    f64_to_bf16_portable(x + i, out + i, n - i);
}

/* Sixteen float32 (bits) to float8_e4m3fn (`finite`) or float8_e5m2 codes, rounding half to
 * even as float8.c's loops do: normal results rebias and round in one add, subnormal ones
 * by adding the power of two whose float32 spacing is the format's subnormal step; the
 * magnitudes narrowed to bytes with signed saturation (past the largest code e4m3fn's NaN,
 * 0x7F; an e5m2 NaN made -1), then e5m2 clamped to infinity and its NaNs to 0x7E. */
LP_FLOAT8_ROUNDING(rounded_lanes, V512, __m512i, _mm512, 512)

V512 static inline __m128i float8_of_floats(__m512i b, const int finite) {
    const int man = finite ? 3 : 2, bias = finite ? 7 : 15;
    __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)), sub;
    __m512i r = rounded_lanes(mag, man, bias, &sub);
    __mmask16 small = _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32((1 - bias + 127) << 23));
    r = _mm512_mask_mov_epi32(r, small, sub);
    if (!finite) {
        __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7F800000));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(-1));
    }
    __m128i codes = _mm512_cvtsepi32_epi8(r);
    if (!finite) {
        codes = _mm_min_epi8(codes, _mm_set1_epi8(0x7C));
        codes = _mm_min_epu8(codes, _mm_set1_epi8(0x7E));
    }
    __m512i sign = _mm512_and_si512(_mm512_srli_epi32(b, 24), _mm512_set1_epi32(0x80));
    return _mm_or_si128(codes, _mm512_cvtepi32_epi8(sign));
}

/* float64 to float8 through float32 in registers, sixteen values a step. */
V512 static void f64_to_float8_512(const uint64_t *x, uint8_t *out, Py_ssize_t n, int finite) {
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        PREFETCH2(x + i);
        __m512i f = floats_of_doubles(x + i);
        __m128i codes = finite ? float8_of_floats(f, 1) : float8_of_floats(f, 0);
        _mm_storeu_si128((__m128i *)(out + i), codes);
    }
    uint32_t wide[16];
    for (Py_ssize_t k = 0; k < n - i; k++) wide[k] = float_of_double(LP_LOAD(uint64_t, x + i + k));
    lp_f32_to_float8(wide, out + i, n - i, finite); /* float8.c */
}
#endif

LP_PICK_CAST(f64_to_f16, uint64_t, uint16_t, lp_has_avx512, f64_to_f16_512)
LP_PICK_CAST(f64_to_bf16, uint64_t, uint16_t, lp_has_avx512, f64_to_bf16_512)

/* The float32 bits of float64 values, as `lp_float8_by_blocks` widens them. */
static void widen_double(const void *x, uint32_t *wide, Py_ssize_t m) {
    const uint64_t *d = x;
    for (Py_ssize_t k = 0; k < m; k++) wide[k] = float_of_double(LP_LOAD(uint64_t, d + k));
}

/* float64 to float8_e4m3fn (`finite`) or float8_e5m2 through float32, as ml_dtypes converts
 * (rounding twice, so not always as a single rounding would): in registers with AVX-512,
 * else through float8.c's float32 loops. */
static void f64_to_float8(const uint64_t *x, uint8_t *out, Py_ssize_t n, int finite) {
#if LP_X86
    if (lp_has_avx512) {
        f64_to_float8_512(x, out, n, finite);
        return;
    }
#endif
    lp_float8_by_blocks(x, 8, out, n, finite, widen_double); /* float8.c */
}

/* float16 bits to float64 bits, exactly; NaNs keep their payload, not quieted, as numpy
 * does. */
static inline uint64_t double_of_half(uint16_t h) {
    uint64_t sign = (uint64_t)(h & 0x8000u) << 48, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1Fu) return sign | 0x7FF0000000000000ull | (man << 42);
    if (exp != 0) return sign | ((exp + 1008u) << 52) | (man << 42);
    double d = (double)man * 5.9604644775390625e-8; /* a subnormal (or zero): man * 2**-24 */
    uint64_t b;
    memcpy(&b, &d, 8);
    return sign | b;
}

static void f16_to_f64_portable(const uint16_t *x, uint64_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        LP_STORE(uint64_t, out + i, double_of_half(LP_LOAD(uint16_t, x + i)));
    }
}

#if LP_X86
/* Sixteen float16 at a time by the CPU's conversions (exact, but quieting NaNs: a step
 * holding one is redone by the element loop), stored streamed where the output is large. */
__attribute__((target("avx2,f16c"), always_inline)) static inline int
f16_to_f64_step(const uint16_t *x, Py_ssize_t i, __m256i *v) {
    _mm_prefetch((const char *)(x + i) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
    __m256i h = _mm256_loadu_si256((const __m256i *)(x + i));
    __m256 a = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    __m256 b = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
    v[0] = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    v[1] = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
    v[2] = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(b)));
    v[3] = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
    __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                     _mm256_set1_epi16(0x7C00));
    return !_mm256_testz_si256(nan, nan);
}

__attribute__((target("avx2,f16c"), always_inline)) static inline Py_ssize_t
f16_to_f64_run(const uint16_t *x, uint64_t *out, Py_ssize_t n, const int stream) {
    LP_CAST_STEPS(16, f16_to_f64_step, f16_to_f64_portable);
}

__attribute__((target("avx2,f16c"))) static void f16_to_f64_f16c(const uint16_t *x,
                                                                  uint64_t *out, Py_ssize_t n) {
    LP_STREAMED_CAST(x, out, n, f16_to_f64_run, f16_to_f64_portable);
}
#endif

LP_PICK_CAST(f16_to_f64, uint16_t, uint64_t, lp_has_f16c, f16_to_f64_f16c)

/* float16 to float64 (cast16's "float16>float64"). */
void lp_half_to_double(const uint16_t *x, uint64_t *out, Py_ssize_t n) {
    f16_to_f64(x, out, n);
}

/* The casts from float64, by kind (their place in CAST64_NAMES). */
static void cast64(int which, const void *x, void *out, Py_ssize_t n, const void *table) {
    if (which == 0) f64_to_f16(x, out, n);
    else if (which == 1) f64_to_bf16(x, out, n);
    else f64_to_float8(x, out, n, which == 2);
}

static const char *const CAST64_NAMES[] = {
    "float64>float16", "float64>bfloat16", "float64>float8_e4m3fn", "float64>float8_e5m2"};
static const Py_ssize_t CAST64_SIZES[] = {2, 2, 1, 1};
static const LpCastKinds CAST64 = {
    CAST64_NAMES, 4, "float64> then float16, bfloat16, float8_e4m3fn or float8_e5m2", 8,
    CAST64_SIZES, 0, cast64};

LP_CAST_FUNCTION(cast64, CAST64,
    "cast64(kind, x, out): convert 1-D float64 bits `x` (uint64) into `out`; kind is\n"
    "'float64>' followed by 'float16' or 'bfloat16' (uint16 out), 'float8_e4m3fn' or\n"
    "'float8_e5m2' (uint8 out).")
