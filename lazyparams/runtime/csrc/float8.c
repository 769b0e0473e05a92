/* The float8 casts: float32 to float8_e4m3fn and float8_e5m2, rounding half to even as
 * ml_dtypes does, back to float32 and to the 16-bit floats exactly, and between the two
 * formats; AVX2 and F16C loops where the CPU has them (large outputs streamed around the
 * cache), cast512.c's where it has AVX-512, the portable loops elsewhere and for the heads
 * and tails; float8_half.c has the 16-bit floats' AVX2 loops. */
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
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = small_float_bits(LP_LOAD(uint32_t, x + i), 3, 7, 1);
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = small_float_bits(LP_LOAD(uint32_t, x + i), 2, 15, 0);
        }
    }
}

#if LP_X86
#define AVX2 __attribute__((target("avx2")))
#define F16C __attribute__((target("avx2,f16c")))
#define INLINE static inline __attribute__((always_inline))
#define SET1 _mm256_set1_epi32

/* `small_float_bits` of eight values without their signs, each in its lane as a signed number
 * that packing with signed saturation turns into the code's byte: past the largest code it
 * saturates to 0x7F, and an e5m2 NaN is -1 (0xFF), told from infinity after packing. */
LP_FLOAT8_ROUNDING(rounded_lanes, AVX2, __m256i, _mm256, 256)

AVX2 INLINE __m256i small_lanes(__m256i b, const int man, const int bias, const int finite) {
    __m256i mag = _mm256_and_si256(b, SET1(0x7FFFFFFF)), sub;
    __m256i normal = rounded_lanes(mag, man, bias, &sub);
    __m256i is_normal = _mm256_cmpgt_epi32(mag, SET1(((1 - bias + 127) << 23) - 1));
    __m256i r = _mm256_blendv_epi8(sub, normal, is_normal);
    /* An infinity or a NaN rounds, as a normal, far past the largest code, so saturation
     * finds it; only e5m2 tells a NaN (made -1) from infinity. */
    if (!finite) r = _mm256_or_si256(r, _mm256_cmpgt_epi32(mag, SET1(0x7F800000)));
    return r;
}

/* Thirty-two values at a time (a step of the run): four vectors of lanes
 * packed to bytes with signed saturation, which for e4m3fn already makes everything past 448
 * its NaN (0x7F); e5m2 clamps to infinity (0x7C), then turns the NaNs' 0xFF to 0x7E. The signs
 * are packed alike from the inputs themselves; the packs interleave the 128-bit halves, which
 * one permutation puts back in order. (The 16-bit floats have their own loops, in 16-bit
 * lanes: float8_half.c.) */
AVX2 INLINE int to_small_step(const uint32_t *x, Py_ssize_t i, __m256i *v, const int finite) {
    const int man = finite ? 3 : 2, bias = finite ? 7 : 15;
    const char *p = (const char *)(x + i);
    _mm_prefetch(p + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
    _mm_prefetch(p + LP_CAST_PREFETCH_BYTES + 64, _MM_HINT_T0);
    __m256i b0 = _mm256_loadu_si256((const __m256i *)p);
    __m256i b1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i b2 = _mm256_loadu_si256((const __m256i *)(p + 64));
    __m256i b3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    __m256i lo = _mm256_packs_epi32(small_lanes(b0, man, bias, finite),
                                    small_lanes(b1, man, bias, finite));
    __m256i hi = _mm256_packs_epi32(small_lanes(b2, man, bias, finite),
                                    small_lanes(b3, man, bias, finite));
    __m256i codes = _mm256_packs_epi16(lo, hi);
    if (!finite) {
        codes = _mm256_min_epi8(codes, _mm256_set1_epi8(0x7C));
        codes = _mm256_min_epu8(codes, _mm256_set1_epi8(0x7E));
    }
    __m256i signs = _mm256_packs_epi16(_mm256_packs_epi32(b0, b1), _mm256_packs_epi32(b2, b3));
    codes = _mm256_or_si256(codes, _mm256_and_si256(signs, _mm256_set1_epi8(-128)));
    v[0] = _mm256_permutevar8x32_epi32(codes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return 0;
}

/* The element loop of a float8 format (`finite` in scope), and the lookup of codes through
 * `table` (in scope), as the vector runs below redo and finish their work. */
#define SMALL_REST(x, out, n) to_small_portable(x, out, n, finite)
#define LOOK_UP(x, out, n) lp_lookup_run(x, 1, out, sizeof *(out), table, n)
#define SMALL_STEP(x, i, v) to_small_step(x, i, v, finite)

AVX2 INLINE Py_ssize_t to_small_run(const uint32_t *x, uint8_t *out, Py_ssize_t n,
                                    const int finite, const int stream) {
    LP_CAST_STEPS(32, SMALL_STEP, SMALL_REST);
}

#define SMALL_RUN(x, out, n, stream)                                                          \
    (finite ? to_small_run(x, out, n, 1, stream) : to_small_run(x, out, n, 0, stream))

AVX2 static void to_small_avx2(const uint32_t *x, uint8_t *out, Py_ssize_t n, int finite) {
    LP_STREAMED_CAST(x, out, n, SMALL_RUN, SMALL_REST);
}

/* float8 codes to float32, sixteen at a time, by the CPU's float16 conversion: a code of e5m2
 * is the top byte of the float16 of its value; e4m3fn's sign, exponent and mantissa, moved
 * into float16's places, give its value times 2**-8, subnormals alike, which one exact
 * multiplication undoes. Returns whether a code is a NaN, whose bits the conversion changes
 * (e4m3fn's S.1111.111 it reads as a number): the callers redo those vectors from their
 * table (ml_dtypes' values). */
F16C INLINE int small_to_f32(__m128i v, const int finite, __m256 *a, __m256 *b) {
    const __m128i zero = _mm_setzero_si128(), low7 = _mm_set1_epi8(0x7F);
    __m128i lo = _mm_unpacklo_epi8(zero, v), hi = _mm_unpackhi_epi8(zero, v), nan;
    if (finite) {
        const __m128i keep = _mm_set1_epi16((short)0xBFFF);
        const __m256 scale = _mm256_set1_ps(256.0f);
        lo = _mm_and_si128(_mm_srai_epi16(lo, 1), keep);
        hi = _mm_and_si128(_mm_srai_epi16(hi, 1), keep);
        *a = _mm256_mul_ps(_mm256_cvtph_ps(lo), scale);
        *b = _mm256_mul_ps(_mm256_cvtph_ps(hi), scale);
        nan = _mm_cmpeq_epi8(_mm_and_si128(v, low7), low7);
    } else {
        *a = _mm256_cvtph_ps(lo);
        *b = _mm256_cvtph_ps(hi);
        nan = _mm_cmpgt_epi8(_mm_and_si128(v, low7), _mm_set1_epi8(0x7C));
    }
    return !_mm_testz_si128(nan, nan);
}

/* A line of codes prefetched every fourth vector of sixteen. */
#define PREFETCH_CODES(x, i)                                                                   \
    if ((i) % 64 == 0) _mm_prefetch((const char *)((x) + (i)) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0)

F16C INLINE int from_small_step(const uint8_t *x, Py_ssize_t i, __m256i *v, const int finite) {
    PREFETCH_CODES(x, i);
    __m256 a, b;
    int nan = small_to_f32(_mm_loadu_si128((const __m128i *)(x + i)), finite, &a, &b);
    v[0] = _mm256_castps_si256(a);
    v[1] = _mm256_castps_si256(b);
    return nan;
}

#define FROM_SMALL_STEP(x, i, v) from_small_step(x, i, v, finite)

F16C INLINE Py_ssize_t from_small_run(const uint8_t *x, uint32_t *out, Py_ssize_t n,
                                      const uint32_t *table, const int finite,
                                      const int stream) {
    LP_CAST_STEPS(16, FROM_SMALL_STEP, LOOK_UP);
}

/* float8 codes to float16 (`half`) or bfloat16, sixteen at a time, exactly (each float8 value
 * is one of theirs): e5m2 to float16 is a shift; otherwise the float32 of `small_to_f32`,
 * narrowed by the CPU's float16 conversion, or cut to its top half for bfloat16. (e4m3fn to
 * float16 takes `e4m3_to_half_run`.) */
F16C INLINE int to_half_step(const uint8_t *x, Py_ssize_t i, __m256i *v, const int finite,
                             const int half) {
    PREFETCH_CODES(x, i);
    __m128i codes = _mm_loadu_si128((const __m128i *)(x + i));
    if (half && !finite) {
        __m128i low7 = _mm_and_si128(codes, _mm_set1_epi8(0x7F));
        __m128i nans = _mm_cmpgt_epi8(low7, _mm_set1_epi8(0x7C));
        v[0] = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
        return !_mm_testz_si128(nans, nans);
    }
    __m256 a, b;
    int nan = small_to_f32(codes, finite, &a, &b);
    if (half) {
        v[0] = _mm256_set_m128i(_mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT),
                                _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
    } else {
        __m256i top = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(a), 16),
                                          _mm256_srli_epi32(_mm256_castps_si256(b), 16));
        v[0] = _mm256_permute4x64_epi64(top, 0xD8);
    }
    return nan;
}

#define TO_HALF_STEP(x, i, v) to_half_step(x, i, v, finite, half)

F16C INLINE Py_ssize_t to_half_run(const uint8_t *x, uint16_t *out, Py_ssize_t n,
                                   const uint16_t *table, const int finite, const int half,
                                   const int stream) {
    LP_CAST_STEPS(16, TO_HALF_STEP, LOOK_UP);
}

/* float8_e4m3fn codes to float16, 32 at a time, in byte lanes: a normal code's exponent
 * moves up by 8 (15 - 7) into the float16's high byte with its mantissa's top two bits, the
 * last bit to the top of the low byte; a subnormal code's float16 (a normal one) has only a
 * high byte, looked up by its mantissa. The input's 64-bit quarters reordered first, so that
 * the bytes interleave into words in order. A vector holding a NaN (S.1111.111) is redone
 * from the table. */
AVX2 INLINE int e4m3_to_half_step(const uint8_t *x, Py_ssize_t i, __m256i *v) {
    const __m256i low7 = _mm256_set1_epi8(0x7F), sign = _mm256_set1_epi8((char)0x80);
    const __m256i subnormal = _mm256_setr_epi8(0, 0x18, 0x1C, 0x1E, 0x20, 0x21, 0x22, 0x23, 0, 0,
                                               0, 0, 0, 0, 0, 0, 0, 0x18, 0x1C, 0x1E, 0x20, 0x21,
                                               0x22, 0x23, 0, 0, 0, 0, 0, 0, 0, 0);
    if (i % 64 == 0) _mm_prefetch((const char *)(x + i) + LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
    __m256i c = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)(x + i)), 0xD8);
    __m256i mag = _mm256_and_si256(c, low7), nan = _mm256_cmpeq_epi8(mag, low7);
    __m256i top = _mm256_and_si256(_mm256_srli_epi16(c, 1), _mm256_set1_epi8(0x3F));
    top = _mm256_add_epi8(top, _mm256_set1_epi8(0x20));
    __m256i low = _mm256_and_si256(_mm256_slli_epi16(c, 7), sign);
    __m256i sub = _mm256_cmpeq_epi8(_mm256_and_si256(c, _mm256_set1_epi8(0x78)),
                                    _mm256_setzero_si256());
    top = _mm256_blendv_epi8(top, _mm256_shuffle_epi8(subnormal, mag), sub);
    top = _mm256_or_si256(top, _mm256_and_si256(c, sign));
    low = _mm256_andnot_si256(sub, low);
    v[0] = _mm256_unpacklo_epi8(low, top);
    v[1] = _mm256_unpackhi_epi8(low, top);
    return !_mm256_testz_si256(nan, nan);
}

AVX2 INLINE Py_ssize_t e4m3_to_half_run(const uint8_t *x, uint16_t *out, Py_ssize_t n,
                                        const uint16_t *table, const int stream) {
    LP_CAST_STEPS(32, e4m3_to_half_step, LOOK_UP);
}

#define TO_HALF(x, out, n, stream)                                                            \
    (finite ? (half ? e4m3_to_half_run(x, out, n, table, stream)                              \
                    : to_half_run(x, out, n, table, 1, 0, stream))                           \
            : (half ? to_half_run(x, out, n, table, 0, 1, stream)                            \
                    : to_half_run(x, out, n, table, 0, 0, stream)))

F16C static void to_half_f16c(const uint8_t *x, uint16_t *out, Py_ssize_t n, int finite,
                              int half, const uint16_t *table) {
    LP_STREAMED_CAST(x, out, n, TO_HALF, LOOK_UP);
}

#define FROM_SMALL(x, out, n, stream)                                                         \
    (finite ? from_small_run(x, out, n, table, 1, stream)                                     \
            : from_small_run(x, out, n, table, 0, stream))

F16C static void from_small_f16c(const uint8_t *x, uint32_t *out, Py_ssize_t n, int finite,
                                 const uint32_t *table) {
    LP_STREAMED_CAST(x, out, n, FROM_SMALL, LOOK_UP);
}

/* Thirty-two float8 codes to the other float8 format, in byte lanes (AVX2 shifts 16-bit lanes:
 * the bits they move across bytes are masked off). e4m3fn to e5m2 adds 8 to the exponent and
 * rounds off one mantissa bit, half to even; its subnormals (magnitudes below 8) come from
 * `low` (the table's first 16 codes), its NaN is e5m2's. e5m2 to e4m3fn is exact from 2**-6
 * to 448 (exponent less 8, mantissa shifted up); below 2**-10 (magnitudes below 0x14) zero;
 * between, rounded, from `low` (the table's codes 0x14 to 0x23); past 448 e4m3fn's NaN. */
F16C INLINE __m256i other_float8(__m256i v, __m256i low, const int finite) {
    const __m256i mag = _mm256_and_si256(v, _mm256_set1_epi8(0x7F));
    __m256i r;
    if (finite) {
        __m256i t = _mm256_add_epi8(mag, _mm256_set1_epi8(0x40));
        __m256i odd = _mm256_and_si256(_mm256_srli_epi16(t, 1), _mm256_set1_epi8(1));
        r = _mm256_and_si256(_mm256_srli_epi16(_mm256_add_epi8(t, odd), 1), _mm256_set1_epi8(0x7F));
        __m256i sub = _mm256_shuffle_epi8(low, mag);
        r = _mm256_blendv_epi8(r, sub, _mm256_cmpgt_epi8(_mm256_set1_epi8(8), mag));
        __m256i nan = _mm256_cmpeq_epi8(mag, _mm256_set1_epi8(0x7F));
        r = _mm256_blendv_epi8(r, _mm256_set1_epi8(0x7E), nan);
    } else {
        __m256i up = _mm256_slli_epi16(_mm256_sub_epi8(mag, _mm256_set1_epi8(0x20)), 1);
        r = _mm256_and_si256(up, _mm256_set1_epi8((char)0xFE));
        __m256i sub = _mm256_shuffle_epi8(low, _mm256_sub_epi8(mag, _mm256_set1_epi8(0x14)));
        r = _mm256_blendv_epi8(r, sub, _mm256_cmpgt_epi8(_mm256_set1_epi8(0x24), mag));
        r = _mm256_andnot_si256(_mm256_cmpgt_epi8(_mm256_set1_epi8(0x14), mag), r);
        __m256i over = _mm256_cmpgt_epi8(mag, _mm256_set1_epi8(0x5F));
        r = _mm256_blendv_epi8(r, _mm256_set1_epi8(0x7F), over);
    }
    return _mm256_or_si256(r, _mm256_and_si256(v, _mm256_set1_epi8((char)0x80)));
}

F16C INLINE int other_float8_step(const uint8_t *x, Py_ssize_t i, __m256i *v, __m256i low,
                                  const int finite) {
    if (i % 64 == 0) _mm_prefetch((const char *)(x + i) + 2 * LP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
    v[0] = other_float8(_mm256_loadu_si256((const __m256i *)(x + i)), low, finite);
    return 0;
}

#define OTHER_STEP(x, i, v) other_float8_step(x, i, v, low, finite)

F16C INLINE Py_ssize_t other_float8_run(const uint8_t *x, uint8_t *out, Py_ssize_t n,
                                        const uint8_t *table, __m256i low, const int finite,
                                        const int stream) {
    LP_CAST_STEPS(32, OTHER_STEP, LOOK_UP);
}

#define OTHER_RUN(x, out, n, stream)                                                          \
    (finite ? other_float8_run(x, out, n, table, low, 1, stream)                              \
            : other_float8_run(x, out, n, table, low, 0, stream))

/* float8_e4m3fn (`finite`) to float8_e5m2 or back, `table` the target's code of each code. */
F16C static void other_float8_f16c(const uint8_t *x, uint8_t *out, Py_ssize_t n, int finite,
                                   const uint8_t *table) {
    __m128i from = _mm_loadu_si128((const __m128i *)(table + (finite ? 0 : 0x14)));
    __m256i low = _mm256_broadcastsi128_si256(from);
    LP_STREAMED_CAST(x, out, n, OTHER_RUN, LOOK_UP);
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

void lp_float8_by_blocks(const void *x, Py_ssize_t size, uint8_t *out, Py_ssize_t n, int finite,
                         void (*widen)(const void *x, uint32_t *wide, Py_ssize_t m)) {
    enum { BLOCK = 1024 };
    uint32_t wide[BLOCK];
    for (Py_ssize_t i = 0; i < n; i += BLOCK) {
        Py_ssize_t m = n - i < BLOCK ? n - i : BLOCK;
        widen((const char *)x + i * size, wide, m);
        lp_f32_to_float8(wide, out + i, m, finite);
    }
}

/* The casts from float8 codes by their kind among CAST8_NAMES: to float32, float16 or
 * bfloat16 exactly, or to the other float8 format, `table` the target's bits of each code
 * (where a vector holds a NaN, and for the lookups without AVX2). Float16 and bfloat16 come
 * from a lookup in registers where the CPU has VBMI; the other float8 from the AVX2 loop even
 * there, which beats the lookup (Zen 5, bench_kernels' row: 1.04x a copy against 1.19x). */
void lp_float8_cast(int which, const void *x, void *out, Py_ssize_t n, const void *table) {
    int finite = which % 2 == 0;
#if LP_X86
    if (lp_has_vbmi && which >= 2 && which < 6) {
        lp_lookup8_512(x, out, 2, table, n);
        return;
    }
    if (lp_has_f16c) {
        if (which < 2) from_small_f16c(x, out, n, finite, table);
        else if (which < 6) to_half_f16c(x, out, n, finite, which < 4, table);
        else other_float8_f16c(x, out, n, finite, table);
        return;
    }
#endif
    lp_lookup_run(x, 1, out, LP_CAST8_SIZES[which], table, n);
}

static const char *const CAST8_NAMES[] = {
    "float8_e4m3fn>float32", "float8_e5m2>float32",  "float8_e4m3fn>float16",
    "float8_e5m2>float16",   "float8_e4m3fn>bfloat16", "float8_e5m2>bfloat16",
    "float8_e4m3fn>float8_e5m2", "float8_e5m2>float8_e4m3fn",
};
const Py_ssize_t LP_CAST8_SIZES[8] = {4, 4, 2, 2, 2, 2, 1, 1};
static const LpCastKinds CAST8 = {
    CAST8_NAMES, 8, "float8_e4m3fn> or float8_e5m2> then float32, float16, bfloat16 or the other "
    "float8", 1, LP_CAST8_SIZES, 256, lp_float8_cast};

LP_CAST_FUNCTION(cast8, CAST8,
    "cast8(kind, x, out, table): float8 codes `x` (uint8) to the bits `out` of another\n"
    "float; kind is 'float8_e4m3fn>' or 'float8_e5m2>' followed by 'float32' (uint32\n"
    "out), 'float16' or 'bfloat16' (uint16 out), or the other float8 (uint8 out);\n"
    "`table` the bits of each of the 256 codes in the target (for NaNs and lookups).")
