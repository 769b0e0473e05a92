/* The casts' AVX-512 loops, used where the CPU has them: 1-byte codes looked up in registers
 * by VBMI's byte permutes (lp_has_vbmi; a 256-entry table of bytes is four registers, two
 * permutes and a blend a vector of 64 codes), the 16-bit floats to float8 computed in
 * 16-bit lanes, 32 values a register (F and BW, lp_has_avx512), and float16 to bfloat16 by
 * AVX-512 BF16's rounding (lp_has_bf16). Heads and tails are masked vectors, large
 * outputs streamed around the cache from their first 64-byte boundary on. */
#include "native.h"

#if LP_X86
#define V512 __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define BW512 __attribute__((target("avx512f,avx512bw")))
#define INLINE static inline __attribute__((always_inline))
#define SET16(v) _mm512_set1_epi16((short)(v))
#define PREFETCH(p, ahead) _mm_prefetch((const char *)(p) + (ahead), _MM_HINT_T0)
/* The lookups read one byte an element, so a vector's time is short: they prefetch further
 * ahead (measured on Zen 5 with the output streamed: 4 KiB ahead, 1.2x a copy's time, against
 * 1.6x at the casts' 2 KiB). */
#define LOOKUP_PREFETCH_BYTES (2 * LP_CAST_PREFETCH_BYTES)

/* Byte indexes that take the even (low) or odd (high) bytes of two registers' words. */
static const uint8_t EVEN_BYTES[64] __attribute__((aligned(64))) = {
    0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,  32,  34,  36,  38,  40,  42,
    44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 64, 66, 68, 70, 72, 74,  76,  78,  80,  82,  84,  86,
    88, 90, 92, 94, 96, 98, 100, 102, 104, 106, 108, 110, 112, 114, 116, 118, 120, 122, 124, 126,
};

/* Elements before `out` (items of `size` bytes) reaches a 64-byte boundary, from where a large
 * output streams; -1 where the output stores through the cache. */
static Py_ssize_t stream_head64(const void *out, Py_ssize_t size, Py_ssize_t n) {
    if (n * size < LP_CAST_STREAM_BYTES || (uintptr_t)out % (uintptr_t)size) return -1;
    Py_ssize_t head = (Py_ssize_t)((64 - (uintptr_t)out % 64) % 64) / size;
    return head < n ? head : n;
}

/* SPAN(x, out, m, ..., stream) over `n` elements of `size` output bytes: cached up to the
 * output's first 64-byte boundary and streamed from there where the output is large
 * (stream_head64), else all cached. */
#define STREAMED_SPANS(SPAN, x, out, size, n, ...)                                             \
    do {                                                                                       \
        const Py_ssize_t head_ = stream_head64(out, size, n);                                  \
        if (head_ >= 0) {                                                                      \
            SPAN(x, out, head_, ##__VA_ARGS__, 0);                                             \
            SPAN((x) + head_, (void *)((char *)(out) + head_ * (size)), (n) - head_,          \
                 ##__VA_ARGS__, 1);                                                            \
            _mm_sfence();                                                                      \
        } else {                                                                               \
            SPAN(x, out, n, ##__VA_ARGS__, 0);                                                 \
        }                                                                                      \
    } while (0)

/* The first `m` (below 64) bits set. */
INLINE uint64_t low_bits(Py_ssize_t m) { return m >= 64 ? ~0ull : (1ull << m) - 1; }

BW512 INLINE void put64(void *p, __m512i v, const int stream) {
    if (stream) _mm512_stream_si512((__m512i *)p, v);
    else _mm512_storeu_si512(p, v);
}

/* table[idx] for 64 byte codes, `t` the table's four registers. */
V512 INLINE __m512i byte_lookup(__m512i idx, const __m512i *t) {
    __m512i lo = _mm512_permutex2var_epi8(t[0], idx, t[1]);
    __m512i hi = _mm512_permutex2var_epi8(t[2], idx, t[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

/* The lookups of `m` codes (64, or fewer at a head or tail, masked) into bytes or words
 * (`wide`): a word table is two byte tables (`lo`, `hi`), whose results interleave back into
 * words, the 128-bit lanes' order put right by one 64-bit permute a register. */
V512 INLINE void lookup_block(const uint8_t *x, void *out, Py_ssize_t m, const __m512i *lo,
                              const __m512i *hi, const int wide, const int stream) {
    __mmask64 keep = m >= 64 ? ~0ull : low_bits(m);
    __m512i v = m >= 64 ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi8(keep, x);
    __m512i r = byte_lookup(v, lo);
    if (!wide) {
        if (m >= 64) put64(out, r, stream);
        else _mm512_mask_storeu_epi8(out, keep, r);
        return;
    }
    __m512i h = byte_lookup(v, hi);
    __m512i a = _mm512_unpacklo_epi8(r, h), b = _mm512_unpackhi_epi8(r, h);
    __m512i w0 = _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), b);
    __m512i w1 = _mm512_permutex2var_epi64(a, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), b);
    uint16_t *o = out;
    if (m >= 64) {
        put64(o, w0, stream);
        put64(o + 32, w1, stream);
    } else {
        _mm512_mask_storeu_epi16(o, (__mmask32)low_bits(m), w0);
        if (m > 32) _mm512_mask_storeu_epi16(o + 32, (__mmask32)low_bits(m - 32), w1);
    }
}

/* `m` codes' lookups, all but the last partial vector at once: its streamed or cached run. */
V512 INLINE void lookup_span(const uint8_t *x, void *out, Py_ssize_t m, const __m512i *lo,
                             const __m512i *hi, const int wide, const int stream) {
    Py_ssize_t i = 0, t = wide ? 2 : 1;
    for (; i + 64 <= m; i += 64) {
        PREFETCH(x + i, LOOKUP_PREFETCH_BYTES);
        lookup_block(x + i, (char *)out + i * t, 64, lo, hi, wide, stream);
    }
    if (i < m) lookup_block(x + i, (char *)out + i * t, m - i, lo, hi, wide, 0);
}

V512 static void lookup8(const uint8_t *x, void *out, Py_ssize_t n, const __m512i *lo,
                         const __m512i *hi, const int wide) {
    STREAMED_SPANS(lookup_span, x, out, wide ? 2 : 1, n, lo, hi, wide);
}

/* out[i] = table[x[i]] for `n` byte codes and a table of 256 entries of `t` (1 or 2) bytes. */
V512 void lp_lookup8_512(const uint8_t *x, void *out, Py_ssize_t t, const void *table,
                         Py_ssize_t n) {
    __m512i lo[4], hi[4];
    const uint8_t *tb = table;
    if (t == 1) {
        for (int k = 0; k < 4; k++) lo[k] = _mm512_loadu_si512(tb + 64 * k);
        lookup8(x, out, n, lo, hi, 0);
        return;
    }
    /* the word table split into its low and high bytes, 64 entries (two registers) a step */
    __m512i even = _mm512_load_si512(EVEN_BYTES), odd = _mm512_add_epi8(even, _mm512_set1_epi8(1));
    for (int k = 0; k < 4; k++) {
        __m512i a = _mm512_loadu_si512(tb + 128 * k), b = _mm512_loadu_si512(tb + 128 * k + 64);
        lo[k] = _mm512_permutex2var_epi8(a, even, b);
        hi[k] = _mm512_permutex2var_epi8(a, odd, b);
    }
    lookup8(x, out, n, lo, hi, 1);
}

/* 32 float16 (`half`) or bfloat16 bits to the float8_e4m3fn (`finite`) or float8_e5m2 codes
 * of their values in the low bytes of the words, rounding half to even as ml_dtypes does.
 * Normal results rebias the exponent and round in one add; subnormal ones (below the target's
 * smallest normal) shift the significand by how far below it they are, rounding the bits
 * shifted out. e4m3fn saturates past its largest code to its NaN (0x7F), infinities and NaNs
 * alike; e5m2 to infinity, NaNs becoming its quiet NaN. */
BW512 INLINE __m512i float8_words(__m512i v, const int half, const int finite) {
    const int ms = half ? 10 : 7, bs = half ? 15 : 127, m = finite ? 3 : 2, b = finite ? 7 : 15;
    const int shift = ms - m;
    __m512i mag = _mm512_and_si512(v, SET16(0x7FFF)), one = SET16(1);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi16(mag, shift), one);
    __m512i bump = SET16(((1 << (shift - 1)) - 1) - ((bs - b) << ms));
    __m512i r = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mag, bump), odd), shift);
    /* float16 to e5m2 shares its exponent: no subnormal step. The others compute the step for
     * every vector: a branch on whether one holds a subnormal would be mispredicted often, as
     * weights hold many small values (a third of the vectors of normal float16 values). */
    if (bs != b) {
        __m512i e = _mm512_srli_epi16(mag, ms);
        __m512i sig = _mm512_add_epi16(_mm512_and_si512(mag, SET16((1 << ms) - 1)),
                                       _mm512_slli_epi16(_mm512_min_epu16(e, one), ms));
        __m512i s = _mm512_sub_epi16(SET16(bs + ms + 1 - b - m), _mm512_max_epu16(e, one));
        s = _mm512_min_epu16(s, SET16(15)); /* past 15 every significand rounds to zero */
        __m512i half_step = _mm512_sllv_epi16(one, _mm512_sub_epi16(s, one));
        __m512i round = _mm512_add_epi16(_mm512_sub_epi16(half_step, one),
                                         _mm512_and_si512(_mm512_srlv_epi16(sig, s), one));
        __mmask32 sub = _mm512_cmplt_epu16_mask(mag, SET16((bs - b + 1) << ms));
        r = _mm512_mask_blend_epi16(sub, r, _mm512_srlv_epi16(_mm512_add_epi16(sig, round), s));
    }
    if (finite) {
        r = _mm512_min_epu16(r, SET16(0x7F));
    } else {
        r = _mm512_min_epu16(r, SET16(0x7C));
        __mmask32 nan = _mm512_cmpgt_epu16_mask(mag, SET16(half ? 0x7C00 : 0x7F80));
        r = _mm512_mask_mov_epi16(r, nan, SET16(0x7E));
    }
    /* r | (v >> 8 & 0x80): the sign */
    return _mm512_ternarylogic_epi32(r, _mm512_srli_epi16(v, 8), SET16(0x80), 0xF8);
}

/* `m` (64, or fewer, masked) 16-bit floats to float8 codes. */
BW512 INLINE void to_float8_block(const uint16_t *x, uint8_t *out, Py_ssize_t m,
                                  const int half, const int finite, const int stream) {
    __m512i a, b;
    if (m >= 64) {
        a = _mm512_loadu_si512(x);
        b = _mm512_loadu_si512(x + 32);
    } else {
        a = _mm512_maskz_loadu_epi16((__mmask32)low_bits(m), x);
        b = _mm512_maskz_loadu_epi16((__mmask32)(m > 32 ? low_bits(m - 32) : 0), x + 32);
    }
    /* the words' low bytes, by truncating moves (AVX-512 BW, so that CPUs without VBMI's
     * byte permutes run this loop too) */
    __m256i lo = _mm512_cvtepi16_epi8(float8_words(a, half, finite));
    __m256i hi = _mm512_cvtepi16_epi8(float8_words(b, half, finite));
    __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    if (m >= 64) put64(out, codes, stream);
    else _mm512_mask_storeu_epi8(out, low_bits(m), codes);
}

BW512 INLINE void to_float8_span(const uint16_t *x, uint8_t *out, Py_ssize_t m, const int half,
                                const int finite, const int stream) {
    Py_ssize_t i = 0;
    for (; i + 64 <= m; i += 64) {
        PREFETCH(x + i, LP_CAST_PREFETCH_BYTES);
        PREFETCH(x + i + 32, LP_CAST_PREFETCH_BYTES);
        to_float8_block(x + i, out + i, 64, half, finite, stream);
    }
    if (i < m) to_float8_block(x + i, out + i, m - i, half, finite, 0);
}

#define TO_FLOAT8_SPAN(x, out, m, stream)                                                    \
    (half ? (finite ? to_float8_span(x, out, m, 1, 1, stream)                                \
                    : to_float8_span(x, out, m, 1, 0, stream))                               \
          : (finite ? to_float8_span(x, out, m, 0, 1, stream)                                \
                    : to_float8_span(x, out, m, 0, 0, stream)))

/* float16 (`half`) or bfloat16 to float8_e4m3fn (`finite`) or float8_e5m2. */
BW512 void lp_half_to_float8_512(const uint16_t *x, uint8_t *out, Py_ssize_t n, int half,
                                int finite) {
    STREAMED_SPANS(TO_FLOAT8_SPAN, x, out, 1, n);
}

#define BF16_512 __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* `m` (32, or fewer, masked) float16 to bfloat16: their exact float32 values (float16 holds no
 * float32 subnormal, which the rounding would flush) rounded half to even by the CPU's
 * bfloat16 conversion, every NaN made bfloat16's quiet NaN of its sign, as ml_dtypes does.
 * One conversion for every vector, whatever its values. */
BF16_512 INLINE void to_bfloat_block(const uint16_t *x, uint16_t *out, Py_ssize_t m,
                                     const int stream) {
    const __mmask32 keep = (__mmask32)low_bits(m);
    const __m512i v = m >= 32 ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi16(keep, x);
    const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
    const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
    __m512i r = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    const __m512i sign = _mm512_and_si512(v, SET16(0x8000));
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_andnot_si512(sign, v), SET16(0x7C00));
    r = _mm512_mask_mov_epi16(r, nan, _mm512_or_si512(sign, SET16(0x7FC0)));
    if (m >= 32) put64(out, r, stream);
    else _mm512_mask_storeu_epi16(out, keep, r);
}

BF16_512 INLINE void to_bfloat_span(const uint16_t *x, uint16_t *out, Py_ssize_t m,
                                    const int stream) {
    Py_ssize_t i = 0;
    for (; i + 32 <= m; i += 32) {
        PREFETCH(x + i, LP_CAST_PREFETCH_BYTES);
        to_bfloat_block(x + i, out + i, 32, stream);
    }
    if (i < m) to_bfloat_block(x + i, out + i, m - i, 0);
}

/* float16 to bfloat16 (where lp_has_bf16). */
BF16_512 void lp_half_to_bfloat_512(const uint16_t *x, uint16_t *out, Py_ssize_t n) {
    STREAMED_SPANS(to_bfloat_span, x, out, 2, n);
}
#endif
