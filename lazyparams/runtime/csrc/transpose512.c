/* Streamed transposes of 2-byte items by AVX-512 blocks of 32 x 32 items: each block reads 64
 * bytes of 32 rows (of a staged strip, or the seams) and makes 32 whole output lines, a line
 * of each of 32 output rows, streamed straight from its registers (bfloat16 converted to
 * float16 on the way where asked): no second stage of runs. */
#include "transpose.h"

#if LP_X86
#define T512 __attribute__((target("avx2,f16c,avx512f,avx512bw")))

/* `halves512` of a vector holding items outside float16's normal range (few weights): out of
 * line, so that the loops of the blocks keep their registers and stay short. */
T512 static __attribute__((noinline)) __m512i halves512_rare(__m512i b) {
    __m256i lo = halves_of_bfloats(_mm512_castsi512_si256(b));
    __m256i hi = halves_of_bfloats(_mm512_extracti64x4_epi64(b, 1));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Thirty-two bfloat16 to float16, as `halves_of_bfloats`: a rebias and a shift when all are of
 * float16's normal range, else that function on each half. */
T512 static inline __attribute__((always_inline)) __m512i halves512(__m512i b) {
    const __m512i mag = _mm512_and_si512(b, _mm512_set1_epi16(0x7FFF));
    const __m512i off = _mm512_sub_epi16(mag, _mm512_set1_epi16(0x3880));
    if (_mm512_cmpgt_epu16_mask(off, _mm512_set1_epi16(0x0EFF)) == 0) {
        const __m512i rebiased = _mm512_sub_epi16(mag, _mm512_set1_epi16(0x3800));
        return _mm512_or_si512(_mm512_slli_epi16(rebiased, 3), _mm512_andnot_si512(_mm512_set1_epi16(0x7FFF), b));
    }
    return halves512_rare(b);
}

/* One round over 8 registers: pairs (2i, 2i + 1) interleaved by `width` bytes within each
 * 128-bit lane, the low halves to the first four. */
T512 static inline __attribute__((always_inline)) void round8(__m512i *r, __m512i *a, int width) {
    for (int i = 0; i < 4; i++) {
        __m512i x = r[2 * i], y = r[2 * i + 1];
        switch (width) {
        case 2: a[i] = _mm512_unpacklo_epi16(x, y); a[i + 4] = _mm512_unpackhi_epi16(x, y); break;
        case 4: a[i] = _mm512_unpacklo_epi32(x, y); a[i + 4] = _mm512_unpackhi_epi32(x, y); break;
        default: a[i] = _mm512_unpacklo_epi64(x, y); a[i + 4] = _mm512_unpackhi_epi64(x, y);
        }
    }
}

/* The block of 32 rows `ss` apart from `src` (64 bytes of each) to the first `count` of its 32
 * output lines, `ds` apart from `dst` (a line boundary), streamed or stored through the cache.
 * Each register takes 16 bytes of the same columns from rows i, i + 8, i + 16 and i + 24, one
 * per lane: three rounds within the lanes then leave each register a whole output line. */
T512 static inline __attribute__((always_inline)) void block32(const char *src, Py_ssize_t ss,
                                                              char *dst, Py_ssize_t ds,
                                                              Py_ssize_t count,
                                                              const int stream,
                                                              const int halves) {
    static const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    for (int q = 0; q < 4; q++) {
        __m512i r[8], a[8];
        for (int i = 0; i < 8; i++) {
            const char *at = src + i * ss + 16 * q;
            __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)at));
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 8 * ss)), 1);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 16 * ss)), 2);
            r[i] = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 24 * ss)), 3);
        }
        round8(r, a, 2);
        round8(a, r, 4);
        round8(r, a, 8);
        for (int c = 0; c < 8 && 8 * q + c < count; c++) {
            void *to = dst + (8 * q + c) * ds;
            const __m512i x = halves ? halves512(a[order[c]]) : a[order[c]];
            if (stream) _mm512_stream_si512(to, x);
            else _mm512_store_si512(to, x);
        }
    }
}

/* A staged tile of 2-byte items: `rows` (a multiple of 32) rows `stride` apart from `stage`
 * against `cols` columns, the output rows `ds` apart from `dst` (a line boundary). Each line
 * of columns goes out a block of 32 rows after another, so each output row gets its lines in
 * turn; columns past the last whole line are read from the stage (its rows are whole lines)
 * but not written. */
T512 void lp_tile512_2(const char *stage, Py_ssize_t stride, char *dst, Py_ssize_t ds,
                       Py_ssize_t rows, Py_ssize_t cols, int halves) {
    for (Py_ssize_t j = 0; j < cols; j += 32) {
        const Py_ssize_t count = cols - j < 32 ? cols - j : 32;
        for (Py_ssize_t b = 0; b < rows; b += 32) {
            if (halves) {
                block32(stage + b * stride + j * 2, stride, dst + j * ds + b * 2, ds, count, 1, 1);
            } else {
                block32(stage + b * stride + j * 2, stride, dst + j * ds + b * 2, ds, count, 1, 0);
            }
        }
    }
}

/* The last `count` (under 32) columns of a direct tile, by way of a block of their own: the
 * input's row ends may not be read past. */
T512 static __attribute__((noinline)) void direct_edge(const char *src, Py_ssize_t ss, char *dst,
                                                       Py_ssize_t ds, Py_ssize_t rows,
                                                       Py_ssize_t count) {
    _Alignas(64) char edge[32 * 64];
    for (Py_ssize_t b = 0; b < rows; b += 32) {
        for (Py_ssize_t i = 0; i < 32; i++) {
            memcpy(edge + i * 64, src + (b + i) * ss, (size_t)(count * 2));
        }
        block32(edge, 64, dst + b * 2, ds, count, 1, 0);
    }
}

/* A direct tile of 2-byte items, straight from the input: `rows` (a multiple of 32) rows `ss`
 * apart from `src` against `cols` columns, streamed to dst as lp_tile512_2 does. After each line
 * of columns a share of the next tile's `nrows` rows (`nbytes` of each from `next`, rows `ss`
 * apart) is prefetched into the L2 cache, so that its reads overlap this tile's streamed writes
 * as a copy's do. */
T512 void lp_direct512_2(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,
                         Py_ssize_t rows, Py_ssize_t cols, const char *next, Py_ssize_t nrows,
                         Py_ssize_t nbytes) {
    const Py_ssize_t groups = (cols + 31) / 32;
    Py_ssize_t fetched = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        const Py_ssize_t j = g * 32;
        if (cols - j >= 32) {
            for (Py_ssize_t b = 0; b < rows; b += 32) {
                block32(src + b * ss + j * 2, ss, dst + j * ds + b * 2, ds, 32, 1, 0);
            }
        } else {
            direct_edge(src + j * 2, ss, dst + j * ds, ds, rows, cols - j);
        }
        const Py_ssize_t upto = nrows * (g + 1) / groups;
        for (Py_ssize_t r = fetched; r < upto; r++) {
            for (Py_ssize_t x = 0; x < nbytes; x += 64) _mm_prefetch(next + r * ss + x, _MM_HINT_T1);
        }
        fetched = upto;
    }
}

/* The seams of a whole output (rows adjacent, `head` items of each before a line boundary, 32
 * items to a line): for each output row j from 1, the line holding the last 32 - head items of
 * row j - 1 (the last input rows, a column behind) and the first `head` of row j (the `head`
 * rows before src), gathered 32 columns at a time into a block of lines and transposed. */
T512 void lp_seams512_2(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                        Py_ssize_t m, Py_ssize_t head, int halves) {
    const Py_ssize_t tail = 32 - head;
    _Alignas(64) char stage[32 * 64];
    _Alignas(64) char lines[32 * 64];
    for (Py_ssize_t j = 0; j < m; j += 32) {
        const Py_ssize_t count = m - j < 32 ? m - j : 32, first = j == 0;
        for (Py_ssize_t k = 0; k < 32; k++) {
            const Py_ssize_t skip = k < tail ? first : 0; /* column -1 does not exist */
            const char *from = k < tail ? src + (n - tail + k) * ss + (j - 1 + skip) * 2
                                        : src + (k - 32) * ss + j * 2;
            memcpy(stage + k * 64 + skip * 2, from, (size_t)((count - skip) * 2));
        }
        block32(stage, 64, lines, 64, 32, 0, 0);
        for (Py_ssize_t c = first; c < count; c++) {
            __m512i x = _mm512_load_si512((const void *)(lines + c * 64));
            if (halves) x = halves512(x);
            _mm512_stream_si512((void *)(dst + (j + c) * ds - 64), x);
        }
    }
}
#endif
