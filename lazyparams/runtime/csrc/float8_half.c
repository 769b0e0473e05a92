/* float16 and bfloat16 to the float8 formats with AVX2, in 16-bit lanes: sixteen values a
 * register, not the eight of float32 lanes, so that the casts keep up with a copy on CPUs
 * without AVX-512 (cast512.c has the same rounding in 32 lanes where they have it). Large
 * outputs stream around the cache; heads and tails are one vector of a zero-padded copy. */
#include "native.h"

#if LP_X86
#define AVX2 __attribute__((target("avx2")))
#define INLINE static inline __attribute__((always_inline))
#define SET16(v) _mm256_set1_epi16((short)(v))

/* Magnitudes to codes `drop` mantissa bits shorter of the same exponent, rounded half to even
 * by one add: float16 to e5m2. */
AVX2 INLINE __m256i normal_words(__m256i mag, const int drop) {
    __m256i odd = _mm256_and_si256(_mm256_srli_epi16(mag, drop), SET16(1));
    __m256i bump = _mm256_add_epi16(mag, SET16((1 << (drop - 1)) - 1));
    return _mm256_srli_epi16(_mm256_add_epi16(bump, odd), drop);
}

/* The power of two a significand is multiplied by, by its exponent (float16's own; bfloat16's
 * less the highest whose values all round to zero, plus one, saturating at 0): 0 where the
 * values round to zero, then doubling up to the target's smallest normal exponent, the same
 * above it (the lookup's index stops there). Byte tables, in both 128-bit lanes. */
#define STEPS_BY(a, b, c, d, e, f, g, h, i, j)                                              \
    _mm256_setr_epi8(a, b, c, d, e, f, g, h, i, j, 0, 0, 0, 0, 0, 0, a, b, c, d, e, f, g, h, \
                     i, j, 0, 0, 0, 0, 0, 0)
#define HALF_STEPS STEPS_BY(0, 0, 0, 0, 0, 1, 2, 4, 8, 16) /* float16 to e4m3fn */
#define BFLOAT_STEPS STEPS_BY(0, 1, 2, 4, 8, 16, 0, 0, 0, 0)

/* The magnitudes `mag` of 16 float16 (`half`) or bfloat16 values to the float8_e4m3fn
 * (`finite`) or float8_e5m2 codes they round to (half to even, as ml_dtypes does) in their
 * words, or past the largest code where they round past it (infinities and NaNs too).
 * float16 to e5m2 shares its exponent: one add rounds the mantissa, subnormals alike. The
 * others multiply the significand by a power of two looked up from the exponent, so that the
 * product's bits from 15 on are the significand shifted right as far as the target's spacing
 * at that exponent needs (its subnormals shift further than its normals): the multiply that
 * rounds half up gives them, the low word tells the ties that go down instead; the target's
 * exponent above its smallest normal one is added on. No branch on whether a vector holds
 * subnormals: weights hold many small values, so it would be mispredicted often. */
AVX2 INLINE __m256i float8_words(__m256i mag, const int half, const int finite) {
    const int ms = half ? 10 : 7, bs = half ? 15 : 127, m = finite ? 3 : 2, b = finite ? 7 : 15;
    if (bs == b) return normal_words(mag, ms - m);
    __m256i e = _mm256_srli_epi16(mag, ms), step;
    if (half) step = _mm256_shuffle_epi8(HALF_STEPS, _mm256_min_epu16(e, SET16(bs - b + 1)));
    else step = _mm256_shuffle_epi8(BFLOAT_STEPS, _mm256_min_epu16(
                    _mm256_subs_epu16(e, SET16(bs - b - m - 1)), SET16(m + 2)));
    /* the significand, its leading bit at bit 14 (a positive word) */
    __m256i sig = _mm256_and_si256(_mm256_slli_epi16(mag, 14 - ms), SET16(0x3FFF));
    sig = _mm256_or_si256(sig, SET16(0x4000));
    /* the product's bits from 15 on, rounded half up; less one where the fraction is exactly
     * half and they are even (the low word is 0x4000): half to even */
    __m256i near = _mm256_mulhrs_epi16(sig, step);
    __m256i tie = _mm256_cmpeq_epi16(_mm256_mullo_epi16(sig, step), SET16(0x4000));
    __m256i above = _mm256_slli_epi16(_mm256_subs_epu16(e, SET16(bs - b + 1)), m);
    return _mm256_add_epi16(_mm256_add_epi16(near, tie), above);
}

/* The codes of 32 values: the words packed to bytes, clamped to the largest code (e4m3fn's
 * NaN, which signed saturation gives; e5m2's infinity), e5m2's NaNs made its quiet NaN; the
 * signs packed alike from the inputs by signed saturation. The packs interleave the 128-bit
 * halves, one permute puts them back in order. */
AVX2 INLINE __m256i float8_codes(const uint16_t *x, const int half, const int finite) {
    __m256i a = _mm256_loadu_si256((const __m256i *)x);
    __m256i b = _mm256_loadu_si256((const __m256i *)(x + 16));
    __m256i ma = _mm256_and_si256(a, SET16(0x7FFF)), mb = _mm256_and_si256(b, SET16(0x7FFF));
    __m256i codes;
    if (finite) {
        codes = _mm256_packs_epi16(float8_words(ma, half, 1), float8_words(mb, half, 1));
    } else {
        /* bfloat16 to e5m2 too: a branch to `normal_words` for vectors all of e5m2's normal
         * range, mispredicted on weights that often hold small values, took 1.4-1.7 times a
         * copy's time on weights of standard deviation 0.02 and 4-5 on 0.002, against 1.3-1.6
         * for all three so */
        codes = _mm256_packus_epi16(float8_words(ma, half, 0), float8_words(mb, half, 0));
        codes = _mm256_min_epu8(codes, _mm256_set1_epi8(0x7C));
        const __m256i inf = SET16(half ? 0x7C00 : 0x7F80);
        __m256i nan = _mm256_packs_epi16(_mm256_cmpgt_epi16(ma, inf), _mm256_cmpgt_epi16(mb, inf));
        codes = _mm256_blendv_epi8(codes, _mm256_set1_epi8(0x7E), nan);
    }
    __m256i signs = _mm256_and_si256(_mm256_packs_epi16(a, b), _mm256_set1_epi8(-128));
    return _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8);
}

/* Fewer than 32 values, through a zero-padded copy. */
AVX2 INLINE void float8_rest(const uint16_t *x, uint8_t *out, Py_ssize_t m, const int half,
                             const int finite) {
    uint16_t in[32] = {0};
    uint8_t codes[32];
    memcpy(in, x, (size_t)m * 2);
    _mm256_storeu_si256((__m256i *)codes, float8_codes(in, half, finite));
    memcpy(out, codes, (size_t)m);
}

/* All whole vectors of `n` values (streamed where `stream`), returning how many it did. */
AVX2 INLINE Py_ssize_t float8_run(const uint16_t *x, uint8_t *out, Py_ssize_t n,
                                  const int half, const int finite, const int stream) {
    Py_ssize_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch((const char *)(x + i) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
        lp_put32(out + i, float8_codes(x + i, half, finite), stream);
    }
    return i;
}

/* The cast of one source and target: a head cached up to the output's first 32-byte boundary
 * where it streams, the vectors, the tail. */
AVX2 INLINE void float8_span(const uint16_t *x, uint8_t *out, Py_ssize_t n, const int half,
                             const int finite) {
    Py_ssize_t head = lp_stream_head(out, 1, n), i = 0;
    if (head > 0) float8_rest(x, out, head, half, finite);
    if (head >= 0) {
        i = head + float8_run(x + head, out + head, n - head, half, finite, 1);
        _mm_sfence();
    } else {
        i = float8_run(x, out, n, half, finite, 0);
    }
    if (i < n) float8_rest(x + i, out + i, n - i, half, finite);
}

AVX2 void lp_half_to_float8_f16c(const uint16_t *x, uint8_t *out, Py_ssize_t n, int half,
                                 int finite) {
    if (half) {
        if (finite) float8_span(x, out, n, 1, 1);
        else float8_span(x, out, n, 1, 0);
    } else {
        if (finite) float8_span(x, out, n, 0, 1);
        else float8_span(x, out, n, 0, 0);
    }
}
#endif
