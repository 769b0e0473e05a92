/* Streamed transposes by AVX-512 blocks of 64 x 64 bytes, each making whole output lines from a
 * line (64 bytes) of each of a line's worth of rows (of the input itself, a staged strip, or the
 * seams): blocks of 32 rows of 2-byte items, each register filled with a lane of four rows and
 * streamed out as a whole output line as it is done (bfloat16 staged as float16 by
 * lp_stage512_halves, the seams converted as they go out); blocks of 64 rows of 1-byte items,
 * 16 or 8 of the wider, loaded a line at a time and rearranged across their lanes at the end
 * (half the register work of loading lanes, where 2-byte items keep the other way: their
 * staged tiles of bfloat16 to float16 measure a tenth faster so).
 *
 * The direct tiles of the wider blocks gather their lines into runs, a tile's depth of each
 * output row (256 bytes of 1-byte items, 128 of the others, DIRECT512_ROWS; single lines at a
 * time write twice as slow as runs of 128 bytes, and deeper tiles fall out of the L2 cache),
 * and stream a line of the previous line of columns' runs for each line they gather: reads,
 * register work and writes then overlap as a copy's do, where a burst of writes after each
 * line of columns stalls the blocks behind it (1-byte transposes took 2.5 times a copy's time
 * so, against 1.9 with the lines interleaved). The prefetches of the next tile are spread the
 * same way for 1- and 2-byte items, a few lines with each quarter of a block's loads (see
 * Ahead). benchmarks/bench_transpose_floor.py times these access patterns alone. */
#include "transpose.h"

#if LP_X86
#define T512 __attribute__((target("avx2,f16c,avx512f,avx512bw")))

/* Thirty-two bfloat16 to float16 by way of their exact float32 values, which the CPU rounds
 * (to float16's subnormals and infinities too), bit for bit as cast.c's `half_of_bfloat`:
 * ml_dtypes' quiet NaN of the sign for every NaN. No branch: a fast path for float16's normal
 * range alone with the rest out of line took 2.25 times a copy's time on weights of standard
 * deviation 0.02 (a vector in 13 has a subnormal) and 5.9 on 0.002, against 1.7-1.8 for all
 * three so. */
T512 static inline __attribute__((always_inline)) __m512i halves512(__m512i b) {
    const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(b));
    const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1));
    const __m256i hl = _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_slli_epi32(lo, 16)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i hh = _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_slli_epi32(hi, 16)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(hl), hh, 1);
    const __m512i sign = _mm512_and_si512(b, _mm512_set1_epi16((short)0x8000));
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_andnot_si512(sign, b),
                                                  _mm512_set1_epi16(0x7F80));
    return _mm512_mask_mov_epi16(h, nan, _mm512_or_si512(sign, _mm512_set1_epi16(0x7E00)));
}

LP_INTERLEAVE(round512, T512 __attribute__((always_inline)), __m512i, _mm512)

/* The 128-bit lanes of four registers transposed: lane q of x[i] to lane i of out[q]. */
T512 static inline __attribute__((always_inline)) void lanes4(const __m512i *x, __m512i *out) {
    const __m512i y0 = _mm512_shuffle_i64x2(x[0], x[1], 0x44);
    const __m512i y1 = _mm512_shuffle_i64x2(x[0], x[1], 0xEE);
    const __m512i y2 = _mm512_shuffle_i64x2(x[2], x[3], 0x44);
    const __m512i y3 = _mm512_shuffle_i64x2(x[2], x[3], 0xEE);
    out[0] = _mm512_shuffle_i64x2(y0, y2, 0x88);
    out[1] = _mm512_shuffle_i64x2(y0, y2, 0xDD);
    out[2] = _mm512_shuffle_i64x2(y1, y3, 0x88);
    out[3] = _mm512_shuffle_i64x2(y1, y3, 0xDD);
}

/* Streams the next line of the runs draining (see LpRuns), if any is left. */
T512 static inline __attribute__((always_inline)) void drain_line(LpRuns *d) {
    if (d->left == 0) return;
    const __m512i v = _mm512_load_si512((const void *)(d->from + d->row * d->run + d->at));
    _mm512_stream_si512((void *)(d->dst + d->row * d->ds + d->at), v);
    d->left--;
    d->at += 64;
    if (d->at == d->run) d->at = 0, d->row++;
}

/* The lines of the next tile still to prefetch into the L2 cache, row after row: `nbytes` of
 * each of its `rows` rows `ss` apart from `next`, `done` of them so far, the next at (`row`,
 * `at`). With a cold cache a burst of a tile row's share after each line of columns fills the
 * CPU's queue of misses and stalls the blocks behind it: 4096 x 4096 transposes of 1- and
 * 2-byte items took 1.5-1.85 times a copy's time so, against 1.35-1.5 with `per` lines
 * prefetched with each quarter of every block's loads (4- and 8-byte items measure faster with
 * the bursts: a fifth to a third slower spread). */
typedef struct {
    const char *next;
    Py_ssize_t ss, nbytes, rows, done, row, at;
    int per;
} Ahead;

/* Prefetches the next `count` lines of `a`, as far as it has them. */
T512 static inline __attribute__((always_inline)) void prefetch_lines(Ahead *a, Py_ssize_t count) {
    for (; count > 0 && a->row < a->rows; count--) {
        _mm_prefetch(a->next + a->row * a->ss + a->at, _MM_HINT_T1);
        a->done++;
        a->at += 64;
        if (a->at >= a->nbytes) a->at = 0, a->row++;
    }
}

/* The block of 32 rows of 2-byte items `ss` apart from `src` (64 bytes of each) to the first
 * `count` of its 32 output lines, `ds` apart from `dst` (a line boundary), streamed or stored
 * through the cache, prefetching `ahead->per` lines of `ahead` (where not NULL) for each
 * quarter of the columns. Each register takes 16 bytes of the same columns from rows i, i + 8,
 * i + 16 and i + 24, one per lane: three rounds within the lanes then leave each register a
 * whole output line. */
T512 static inline __attribute__((always_inline)) void block32(const char *src, Py_ssize_t ss,
                                                              char *dst, Py_ssize_t ds,
                                                              Py_ssize_t count, const int stream,
                                                              Ahead *ahead) {
    for (int q = 0; q < 4; q++) {
        __m512i r[8], a[8];
        if (ahead) prefetch_lines(ahead, ahead->per);
        for (int i = 0; i < 8; i++) {
            const char *at = src + i * ss + 16 * q;
            __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)at));
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 8 * ss)), 1);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 16 * ss)), 2);
            r[i] = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(at + 24 * ss)), 3);
        }
        round512(r, a, 8, 2);
        round512(a, r, 8, 4);
        round512(r, a, 8, 8);
        for (int c = 0; c < 8 && 8 * q + c < count; c++) {
            void *to = dst + (8 * q + c) * ds;
            const __m512i x = a[REVERSED[2][c]];
            if (stream) _mm512_stream_si512(to, x);
            else _mm512_store_si512(to, x);
        }
    }
}

/* The block of a line's worth of rows of 1-, 4- or 8-byte items (64 / size, `ss` apart from
 * `src`; 64 bytes of each) to the first `count` of its output lines, `ds` apart from `dst` (a
 * line boundary, stored through the cache), streaming a line of `drain` (where not NULL) for
 * each and prefetching `ahead->per` lines of `ahead` (where not NULL) after the loads of each
 * quarter of the rows. Each quarter of the rows (k = 16 / size, a register each) goes through
 * the rounds within the 128-bit lanes (log2 k of them), which leave register c's lane q holding
 * column k * q + c of those rows; the lanes of the quarters' registers c, transposed, are then
 * whole output lines. */
T512 static inline __attribute__((always_inline)) void block(const char *src, Py_ssize_t ss,
                                                            char *dst, Py_ssize_t ds,
                                                            Py_ssize_t count, const int size,
                                                            LpRuns *drain, Ahead *ahead) {
    const int k = 16 / size, log = size == 8 ? 0 : size == 4 ? 1 : 3;
    __m512i quarters[16][4]; /* [c][g]: register c of quarter g */
    for (int g = 0; g < 4; g++) {
        __m512i r[16], a[16];
        for (int i = 0; i < k; i++) r[i] = _mm512_loadu_si512(src + (g * k + i) * ss);
        if (ahead) prefetch_lines(ahead, ahead->per);
        switch (size) { /* rounds alternate between r and a: an even count ends in r */
        case 1: round512(r, a, k, 1); round512(a, r, k, 2); round512(r, a, k, 4);
                round512(a, r, k, 8); break;
        case 4: round512(r, a, k, 4); round512(a, r, k, 8); break;
        default: round512(r, a, k, 8);
        }
        const __m512i *done = size == 8 ? a : r;
        for (int c = 0; c < k; c++) quarters[c][g] = done[REVERSED[log][c]];
    }
    for (int c = 0; c < k; c++) {
        __m512i lines[4];
        lanes4(quarters[c], lines);
        for (int q = 0; q < 4 && k * q + c < count; q++) {
            _mm512_store_si512((void *)(dst + (k * q + c) * ds), lines[q]);
            if (drain) drain_line(drain);
        }
    }
}

/* A block of `size`-byte items to lines `ds` apart at `dst` through the cache (no drain). */
T512 static inline __attribute__((always_inline)) void block_to(const char *src, Py_ssize_t ss,
                                                               char *dst, Py_ssize_t ds,
                                                               Py_ssize_t count,
                                                               const int size) {
    if (size == 2) block32(src, ss, dst, ds, count, 0, NULL);
    else block(src, ss, dst, ds, count, size, NULL, NULL);
}

/* A staged tile of 2-byte items: `rows` (a multiple of 32) rows `stride` apart from `stage`
 * against `cols` columns, the output rows `ds` apart from `dst` (a line boundary). Each line
 * of columns goes out a block of 32 rows after another, so each output row gets its lines in
 * turn; columns past the last whole line are read from the stage (its rows are whole lines)
 * but not written. */
T512 void lp_tile512_2(const char *stage, Py_ssize_t stride, char *dst, Py_ssize_t ds,
                       Py_ssize_t rows, Py_ssize_t cols) {
    for (Py_ssize_t j = 0; j < cols; j += 32) {
        const Py_ssize_t count = cols - j < 32 ? cols - j : 32;
        for (Py_ssize_t b = 0; b < rows; b += 32) {
            const char *from = stage + b * stride + j * 2;
            char *to = dst + j * ds + b * 2;
            block32(from, stride, to, ds, count, 1, NULL);
        }
    }
}

/* Copies `rows` rows of `count` bfloat16 (`ss` bytes apart from `src`) to the stage's rows
 * (`stride` apart, whole lines) as float16, prefetching `ahead` rows ahead, a line with each
 * line converted; the last line of each row is filled out with zeros. Converting on the way
 * in, where the copy waits on the input's reads, rather than as the transposed lines go out
 * (4096 x 4096 bfloat16 to float16 transposes took 1.5-1.7 times a copy's time so, against
 * 1.75-1.9 with the cache cold); prefetching a line at a time rather than a row's lines in a
 * burst before it, which fill the CPU's queue of misses (1.35-1.4 against 1.7-1.8, and on
 * 8192 x 8192 1.65-1.7 against 1.9). */
T512 void lp_stage512_halves(const char *src, Py_ssize_t ss, char *stage, Py_ssize_t stride,
                             Py_ssize_t rows, Py_ssize_t count, Py_ssize_t ahead) {
    const Py_ssize_t bytes = count * 2, whole = bytes / 64 * 64;
    const __mmask32 tail = (__mmask32)((1ull << ((bytes - whole) / 2)) - 1);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const char *row = src + r * ss;
        char *to = stage + r * stride;
        const int ahead_ok = r + ahead < rows;
        for (Py_ssize_t b = 0; b < whole; b += 64) {
            if (ahead_ok) _mm_prefetch(row + ahead * ss + b, _MM_HINT_T0);
            _mm512_store_si512((void *)(to + b), halves512(_mm512_loadu_si512(row + b)));
        }
        if (ahead_ok && whole < bytes) _mm_prefetch(row + ahead * ss + whole, _MM_HINT_T0);
        if (tail) {
            const __m512i x = _mm512_maskz_loadu_epi16(tail, row + whole);
            _mm512_store_si512((void *)(to + whole), halves512(x));
        }
    }
}

T512 void lp_runs512_flush(LpRuns *runs) {
    while (runs->left) drain_line(runs);
}

/* Streams what is left of the runs draining, then starts draining the `count` output rows'
 * runs of `run` bytes at `from`, to dst's rows `ds` apart. */
T512 static inline __attribute__((always_inline)) void start_drain(LpRuns *d, const char *from,
                                                                  char *dst, Py_ssize_t ds,
                                                                  Py_ssize_t run,
                                                                  Py_ssize_t count) {
    while (d->left) drain_line(d);
    d->from = from;
    d->dst = dst;
    d->ds = ds;
    d->run = run;
    d->left = count * run / 64;
    d->row = d->at = 0;
    d->half ^= 1;
}

/* A direct tile (see lp_direct512) of `size`-byte items. Each line of columns goes a block of
 * rows after another: for 2-byte items streamed straight to the output; for the others to the
 * half of the runs buffer that is not draining, after which the rest of the draining half goes
 * out and this line's runs start draining. The lines of columns start on lines of the input
 * row `src` (the columns before the first such go first, on their own); a partial one (those,
 * or the last) goes by way of a block of its own, as the input's row ends may not be read
 * past. The next tile is prefetched as its blocks load (1- and 2-byte items), or a share of it
 * after each line of columns (see Ahead). */
T512 static inline __attribute__((always_inline)) void direct_tile(
    const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t rows, Py_ssize_t cols,
    const char *next, Py_ssize_t nrows, Py_ssize_t nbytes, LpRuns *runs, const int size) {
    const Py_ssize_t line = 64 / size, run = rows * size;
    /* the columns before the first that starts a line of the input: a group of their own */
    const Py_ssize_t lead = (Py_ssize_t)((64 - (uintptr_t)src % 64) % 64) / size;
    const Py_ssize_t groups = (lead > 0) + (cols - lead + line - 1) / line;
    _Alignas(64) char edge[64 * 64];
    Py_ssize_t j = 0;
    LpRuns d = *runs; /* a local copy, which the compiler can keep in registers */
    const Py_ssize_t lines = nrows * ((nbytes + 63) / 64);
    const Py_ssize_t quarters = 4 * groups * (rows / line > 0 ? rows / line : 1);
    const int spread = size <= 2;
    Ahead ahead = {next, ss, nbytes, nrows, 0, 0, 0, 0};
    if (spread) ahead.per = (int)((lines + quarters - 1) / quarters);
    Ahead *each = spread ? &ahead : NULL;
    for (Py_ssize_t g = 0; g < groups; g++) {
        const Py_ssize_t want = g == 0 && lead > 0 ? lead : line;
        const Py_ssize_t count = cols - j < want ? cols - j : want;
        char *to = d.buffer + d.half * d.half_bytes;
        for (Py_ssize_t b = 0; b < rows; b += line) {
            const char *from = src + b * ss + j * size;
            Py_ssize_t stride = ss;
            if (count < line) { /* whole lines of the block's rows, its columns at their start */
                for (Py_ssize_t i = 0; i < line; i++) {
                    memcpy(edge + i * 64, from + i * ss, (size_t)(count * size));
                }
                from = edge;
                stride = 64;
            }
            if (size == 2) block32(from, stride, dst + j * ds + b * 2, ds, count, 1, each);
            else block(from, stride, to + b * size, run, count, size, &d, each);
        }
        if (size != 2) start_drain(&d, to, dst + j * ds, ds, run, count);
        j += count;
        if (!spread) prefetch_lines(&ahead, lines * (g + 1) / groups - ahead.done);
    }
    *runs = d;
}

T512 void lp_direct512(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t rows,
                       Py_ssize_t cols, const char *next, Py_ssize_t nrows, Py_ssize_t nbytes,
                       LpRuns *runs, Py_ssize_t size) {
    switch (size) {
    case 1: direct_tile(src, ss, dst, ds, rows, cols, next, nrows, nbytes, runs, 1); break;
    case 2: direct_tile(src, ss, dst, ds, rows, cols, next, nrows, nbytes, runs, 2); break;
    case 4: direct_tile(src, ss, dst, ds, rows, cols, next, nrows, nbytes, runs, 4); break;
    default: direct_tile(src, ss, dst, ds, rows, cols, next, nrows, nbytes, runs, 8);
    }
}

/* The seams of a whole output (rows adjacent, `head` items of each before a line boundary, a
 * line being 64 / size items): for each output row j from 1, the line holding the last
 * line - head items of row j - 1 (the last input rows, a column behind) and the first `head`
 * of row j (the `head` rows before src), gathered a line of columns at a time into a block of
 * lines and transposed. */
T512 void lp_seams512(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                      Py_ssize_t m, Py_ssize_t head, int halves, Py_ssize_t size) {
    const Py_ssize_t line = 64 / size, tail = line - head;
    _Alignas(64) char stage[64 * 64];
    _Alignas(64) char lines[64 * 64];
    for (Py_ssize_t j = 0; j < m; j += line) {
        const Py_ssize_t count = m - j < line ? m - j : line, first = j == 0;
        for (Py_ssize_t k = 0; k < line; k++) {
            const Py_ssize_t skip = k < tail ? first : 0; /* column -1 does not exist */
            const char *from = k < tail ? src + (n - tail + k) * ss + (j - 1 + skip) * size
                                        : src + (k - line) * ss + j * size;
            memcpy(stage + k * 64 + skip * size, from, (size_t)((count - skip) * size));
        }
        switch (size) {
        case 1: block_to(stage, 64, lines, 64, line, 1); break;
        case 2: block_to(stage, 64, lines, 64, line, 2); break;
        case 4: block_to(stage, 64, lines, 64, line, 4); break;
        default: block_to(stage, 64, lines, 64, line, 8);
        }
        for (Py_ssize_t c = first; c < count; c++) {
            __m512i x = _mm512_load_si512((const void *)(lines + c * 64));
            if (halves) x = halves512(x);
            _mm512_stream_si512((void *)(dst + (j + c) * ds - 64), x);
        }
    }
}
#endif
