/* The register blocks of the transposes (transpose.c's blocked strips and transpose_stream.c's
 * streamed ones) and the streamed transpose's entry point. */
#ifndef LAZYPARAMS_TRANSPOSE_H
#define LAZYPARAMS_TRANSPOSE_H

#include "native.h"

#if defined(__SSE2__)
/* Register-sized square blocks of 16 bytes a row (2x2 of 8-byte, 4x4 of 4-byte, 8x8 of
 * 2-byte, 16x16 of 1-byte elements), transposed by rounds of interleaving row pairs: each
 * round doubles the width of the unit that moves together. `stream` stores around the cache
 * and needs 16-byte aligned rows. */
/* One round over `k` registers of type VEC (intrinsics PRE##_unpack..., the function's
 * attributes ATTR): pairs (2i, 2i + 1) interleaved by `width` bytes within each 128-bit lane,
 * the low halves to the first k / 2. The SSE, AVX2 and AVX-512 blocks share it. */
#define LP_INTERLEAVE(NAME, ATTR, VEC, PRE)                                                   \
    ATTR static inline void NAME(VEC *r, VEC *a, int k, int width) {                          \
        for (int i = 0; i < k / 2; i++) {                                                     \
            VEC x = r[2 * i], y = r[2 * i + 1];                                               \
            switch (width) {                                                                  \
            case 1: a[i] = PRE##_unpacklo_epi8(x, y); a[i + k / 2] = PRE##_unpackhi_epi8(x, y); \
                    break;                                                                    \
            case 2: a[i] = PRE##_unpacklo_epi16(x, y); a[i + k / 2] = PRE##_unpackhi_epi16(x, y); \
                    break;                                                                    \
            case 4: a[i] = PRE##_unpacklo_epi32(x, y); a[i + k / 2] = PRE##_unpackhi_epi32(x, y); \
                    break;                                                                    \
            default: a[i] = PRE##_unpacklo_epi64(x, y);                                       \
                     a[i + k / 2] = PRE##_unpackhi_epi64(x, y);                               \
            }                                                                                 \
        }                                                                                     \
    }

/* All the rounds of a block of 16 / size registers of VEC (ATTR, through INTERLEAVE), ending
 * in r (a copy back where the count of rounds is odd). */
#define LP_ROUNDS(NAME, INTERLEAVE, ATTR, VEC)                                                \
    ATTR static inline __attribute__((always_inline)) void NAME(VEC *r, const int size) {     \
        VEC a[16];                                                                            \
        const int k = 16 / size;                                                              \
        switch (size) {                                                                       \
        case 1: INTERLEAVE(r, a, k, 1); INTERLEAVE(a, r, k, 2); INTERLEAVE(r, a, k, 4);       \
                INTERLEAVE(a, r, k, 8); break;                                                \
        case 2: INTERLEAVE(r, a, k, 2); INTERLEAVE(a, r, k, 4); INTERLEAVE(r, a, k, 8);       \
                memcpy(r, a, sizeof(VEC) * 8); break;                                         \
        case 4: INTERLEAVE(r, a, k, 4); INTERLEAVE(a, r, k, 8); break;                        \
        default: INTERLEAVE(r, a, k, 8); memcpy(r, a, sizeof(VEC) * 2);                       \
        }                                                                                     \
    }

LP_INTERLEAVE(interleave, , __m128i, _mm)
LP_ROUNDS(rounds, interleave, , __m128i)

/* Each round sends a pair's low halves to the first half of the registers, so column c ends
 * in the register whose index is c's bits reversed. */
static const int REVERSED[4][16] = {
    {0, 1},
    {0, 2, 1, 3},
    {0, 4, 2, 6, 1, 5, 3, 7},
    {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15},
};

static inline __attribute__((always_inline)) void micro(const char *src, Py_ssize_t ss,
                                                        char *dst, Py_ssize_t ds,
                                                        const int size) {
    __m128i r[16];
    const int k = 16 / size, log = size == 8 ? 0 : size == 4 ? 1 : size == 2 ? 2 : 3;
    for (int i = 0; i < k; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + i * ss));
    rounds(r, size);
    for (int c = 0; c < k; c++) _mm_storeu_si128((__m128i *)(dst + c * ds), r[REVERSED[log][c]]);
}

#if LP_X86
/* The AVX2 blocks: twice as many rows of 32 bytes. The loads pair the halves of the rows: one
 * register of the first 16 bytes of rows i and i + k (in its low and high 128-bit lane), one of
 * their next 16 bytes. The rounds of `micro` within the lanes then leave each register a whole
 * output row, column c of the first k rows in the low lane and of the last k in the high one,
 * with no round across the lanes (a shuffle less per register: the load of a lane takes it). */
LP_INTERLEAVE(interleave256, __attribute__((target("avx2"))), __m256i, _mm256)

/* The in-lane rounds of one half (k = 16 / size registers), ending in r. */
LP_ROUNDS(lane_rounds, interleave256, __attribute__((target("avx2"))), __m256i)

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
micro256(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, const int size) {
    __m256i lo[16], hi[16];
    const int k = 16 / size, log = size == 8 ? 0 : size == 4 ? 1 : size == 2 ? 2 : 3;
    for (int i = 0; i < k; i++) {
        const char *a = src + i * ss, *b = src + (i + k) * ss;
        lo[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                        _mm_loadu_si128((const __m128i *)b), 1);
        hi[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + 16))),
            _mm_loadu_si128((const __m128i *)(b + 16)), 1);
    }
    lane_rounds(lo, size);
    lane_rounds(hi, size);
    for (int c = 0; c < k; c++) {
        _mm256_storeu_si256((__m256i *)(dst + c * ds), lo[REVERSED[log][c]]);
        _mm256_storeu_si256((__m256i *)(dst + (c + k) * ds), hi[REVERSED[log][c]]);
    }
}
#endif
#endif

#if LP_X86
/* The streamed strips of an (n, m) src whose output rows start on line boundaries (`ds` a
 * whole number of lines), down to the last whole line of output (64 / size rows): returns
 * the rows done, or -1 out of memory. Needs AVX2 (transpose_stream.c). With `head` (rows
 * before src, less than a line) the output rows are adjacent and start `head` items before a
 * line boundary: the first strip then also streams the seams, each the last items of output
 * row j - 1 (the rows left after the strips) and the first `head` of row j, a line in all, for
 * j from 1. */
Py_ssize_t lp_transpose_streamed(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,
                                 Py_ssize_t n, Py_ssize_t m, Py_ssize_t size,
                                 const LpConvert *conv, Py_ssize_t isz, Py_ssize_t head);
/* The runs of the direct tiles of the AVX-512 blocks (transpose512.c): a buffer of two halves of
 * `half_bytes`, `half` the one the next line of columns fills; and the line of columns draining,
 * output row r's run of `run` bytes at `from` + r * run going to `dst` + r * `ds`, `left` lines
 * of it still to stream, the next at (`row`, `at`). */
typedef struct {
    char *buffer;
    Py_ssize_t half_bytes;
    int half;
    const char *from;
    char *dst;
    Py_ssize_t ds, run, left, row, at;
} LpRuns;
/* The AVX-512 blocks (transpose512.c). lp_tile512_2: a staged tile of
 * 2-byte items, `rows` (a multiple of 32) rows `stride` apart (whole lines) against `cols`
 * columns, streamed to dst (a line boundary, its rows a whole number of lines apart).
 * lp_stage512_halves: `rows` rows of `count` bfloat16 `ss` apart staged as float16 for it
 * (rows `stride` apart, whole lines), prefetching `ahead` rows ahead a line at a time.
 * lp_direct512: a direct tile of `size`-byte items straight from the input, `rows` (a whole
 * number of lines) rows `ss` apart against `cols` columns, its runs through `runs` (see
 * lp_runs512_flush), prefetching the next tile's `nrows` rows (`nbytes` of each from `next`, rows `ss` apart)
 * into the L2 cache as it goes (a few lines with each block's loads of 1- or 2-byte items, a
 * share after each line of columns of the others), so that its reads overlap this tile's
 * writes as a copy's do.
 * lp_runs512_flush: streams what is left of the runs draining (after the last tile).
 * lp_seams512: the seams of a whole output whose rows start `head` items before a line
 * boundary (see lp_transpose_streamed), for output rows 1 to m - 1, src being its row `head`
 * and n its rows from there. */
void lp_tile512_2(const char *stage, Py_ssize_t stride, char *dst, Py_ssize_t ds,
                  Py_ssize_t rows, Py_ssize_t cols);
void lp_direct512(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t rows,
                  Py_ssize_t cols, const char *next, Py_ssize_t nrows, Py_ssize_t nbytes,
                  LpRuns *runs, Py_ssize_t size);
void lp_runs512_flush(LpRuns *runs);
void lp_stage512_halves(const char *src, Py_ssize_t ss, char *stage, Py_ssize_t stride,
                        Py_ssize_t rows, Py_ssize_t count, Py_ssize_t ahead);
void lp_seams512(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                 Py_ssize_t m, Py_ssize_t head, int halves, Py_ssize_t size);
#endif

#endif
