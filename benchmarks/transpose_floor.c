/* The memory floor of a streamed transpose: the access patterns of one, with no arithmetic, timed
 * against memcpy of the same bytes. bench_transpose_floor.py builds and runs it.
 *
 * A transpose of an N x N matrix of 1-byte items (4096 unless built with -DN) reads tiles of
 * `depth` input rows and writes, for each of the tile's columns, a run of `depth` bytes to an
 * output row. Its two sides are timed apart:
 *
 * - writes: runs of `run` bytes streamed around the cache to every output row in turn, the run's
 *   lines one after another (as a tile that gathers its runs before writing them), or a line of
 *   each row at a time (as one whose register blocks stream their lines as they finish);
 * - reads: tiles of `depth` rows by `width` bytes, read a cache line of columns at a time down
 *   the tile's rows (as the register blocks read them), with the next tile prefetched into the L2
 *   cache a share after each line of columns, or not.
 *
 * - both: the tiles read and their runs written in one pass, the lines moved whole (a transpose
 *   without its arithmetic: what the register blocks add comes on top).
 *
 * With `cold MIB` after the rounds, each pattern starts from a cache evicted by a read of MIB
 * MiB of other data (96 unless given; bench_transpose_floor.py gives twice the largest cache).
 * Prints one line per pattern: its name and its best time over memcpy's. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef N
#define N 4096 /* rows and columns (a multiple of 4096; bench_transpose_floor.py's --side) */
#endif
#define BYTES ((size_t)N * N)

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void stream_line(char *to) {
    _mm_stream_si128((__m128i *)to, _mm_set1_epi8(1));
    _mm_stream_si128((__m128i *)(to + 16), _mm_set1_epi8(2));
    _mm_stream_si128((__m128i *)(to + 32), _mm_set1_epi8(3));
    _mm_stream_si128((__m128i *)(to + 48), _mm_set1_epi8(4));
}

/* Runs of `run` bytes to each output row, for each tile of `run` input rows. */
static void write_runs(char *dst, int run, int line_at_a_time) {
    for (size_t r0 = 0; r0 < N; r0 += (size_t)run) {
        for (size_t j0 = 0; j0 < N; j0 += 64) { /* a line of columns: 64 output rows */
            if (line_at_a_time) {
                for (int x = 0; x < run; x += 64) {
                    for (size_t j = j0; j < j0 + 64; j++) stream_line(dst + j * N + r0 + (size_t)x);
                }
            } else {
                for (size_t j = j0; j < j0 + 64; j++) {
                    for (int x = 0; x < run; x += 64) stream_line(dst + j * N + r0 + (size_t)x);
                }
            }
        }
    }
    _mm_sfence();
}

static __m128i read_line(const char *at, __m128i acc) {
    acc = _mm_xor_si128(acc, _mm_loadu_si128((const __m128i *)at));
    acc = _mm_xor_si128(acc, _mm_loadu_si128((const __m128i *)(at + 16)));
    acc = _mm_xor_si128(acc, _mm_loadu_si128((const __m128i *)(at + 32)));
    return _mm_xor_si128(acc, _mm_loadu_si128((const __m128i *)(at + 48)));
}

/* The rows of the tile after the one at (r0, j0) (tiles of `depth` rows by `width` bytes, row
 * after row of tiles) from `fetched` up to the share of it due after line of columns g of the
 * `groups`, prefetched into the L2 cache row after row; returns the rows fetched so far. */
static size_t prefetch_next(const char *src, size_t r0, size_t j0, int depth, int width,
                            size_t g, size_t groups, size_t fetched) {
    size_t nr0 = r0, nj0 = j0 + (size_t)width;
    if (nj0 >= N) nj0 = 0, nr0 += (size_t)depth;
    const char *next = src + nr0 * N + nj0;
    size_t upto = nr0 < N ? (size_t)depth * (g + 1) / groups : 0;
    for (; fetched < upto; fetched++) {
        for (int x = 0; x < width; x += 64) {
            _mm_prefetch(next + fetched * N + (size_t)x, _MM_HINT_T1);
        }
    }
    return fetched;
}

/* Tiles of `depth` rows by `width` bytes, a line of columns at a time down the rows. */
static __m128i read_tiles(const char *src, int depth, int width, int prefetch) {
    __m128i acc = _mm_setzero_si128();
    const size_t groups = (size_t)width / 64;
    for (size_t r0 = 0; r0 < N; r0 += (size_t)depth) {
        for (size_t j0 = 0; j0 < N; j0 += (size_t)width) {
            size_t fetched = 0;
            for (size_t g = 0; g < groups; g++) {
                for (size_t i = 0; i < (size_t)depth; i++) {
                    acc = read_line(src + (r0 + i) * N + j0 + g * 64, acc);
                }
                if (prefetch) fetched = prefetch_next(src, r0, j0, depth, width, g, groups, fetched);
            }
        }
    }
    return acc;
}

/* Both sides at once, as a transpose with no arithmetic: the tiles read as read_tiles does (with
 * the prefetch), each line of them streamed to an output row, each output row's run of `depth`
 * bytes written in one go (the lines are moved whole, not transposed). */
static void move_tiles(const char *src, char *dst, int depth, int width) {
    const size_t groups = (size_t)width / 64, per = (size_t)depth / 64;
    for (size_t r0 = 0; r0 < N; r0 += (size_t)depth) {
        for (size_t j0 = 0; j0 < N; j0 += (size_t)width) {
            size_t fetched = 0;
            for (size_t g = 0; g < groups; g++) {
                for (size_t c = 0; c < 64; c++) {
                    char *row = dst + (j0 + g * 64 + c) * N + r0;
                    for (size_t x = 0; x < per; x++) {
                        const char *at = src + (r0 + x * 64 + c) * N + j0 + g * 64;
                        for (int k = 0; k < 64; k += 16) {
                            __m128i v = _mm_loadu_si128((const __m128i *)(at + k));
                            _mm_stream_si128((__m128i *)(row + x * 64 + (size_t)k), v);
                        }
                    }
                }
                fetched = prefetch_next(src, r0, j0, depth, width, g, groups, fetched);
            }
        }
    }
    _mm_sfence();
}

static __m128i read_all(const char *src) {
    __m128i acc = _mm_setzero_si128();
    for (size_t at = 0; at < BYTES; at += 64) acc = read_line(src + at, acc);
    return acc;
}

/* Reads `bytes` of other data, evicting the caches' lines (with a cold start, before each
 * pattern). */
static int read_evict(const char *other, size_t bytes) {
    __m128i acc = _mm_setzero_si128();
    for (size_t at = 0; at < bytes; at += 64) acc = read_line(other + at, acc);
    return _mm_cvtsi128_si32(acc);
}

static char *matrix(void) {
    char *p = aligned_alloc(1 << 21, BYTES);
    if (p == NULL) exit(1);
    madvise(p, BYTES, MADV_HUGEPAGE);
    memset(p, 7, BYTES);
    return p;
}

int main(int argc, char **argv) {
    const int repeat = argc > 1 ? atoi(argv[1]) : 9;
    char *src = matrix(), *dst = matrix();
    const size_t evict_bytes = (size_t)(argc > 3 ? atoi(argv[3]) : 96) << 20;
    char *evict = argc > 2 && strcmp(argv[2], "cold") == 0 ? malloc(evict_bytes) : NULL;
    if (evict) memset(evict, 3, evict_bytes);
    volatile int sink = 0;
    double best[24];
    const char *names[24];
    int count = 0;
    for (int k = 0; k < 24; k++) best[k] = 1e9;
    for (int round = 0; round < repeat; round++) {
        int k = 0;
        double t;
#define TIME(NAME, CALL)                                   \
    do {                                                   \
        if (evict) sink += read_evict(evict, evict_bytes); \
        t = seconds();                                     \
        CALL;                                              \
        t = seconds() - t;                                 \
        names[k] = NAME;                                   \
        if (t < best[k]) best[k] = t;                      \
        k++;                                               \
    } while (0)
        TIME("memcpy", memcpy(dst, src, BYTES));
        TIME("read, sequential", sink += _mm_cvtsi128_si32(read_all(src)));
        TIME("write, sequential", write_runs(dst, N, 0));
        TIME("write, runs of 64 bytes", write_runs(dst, 64, 0));
        TIME("write, runs of 128 bytes", write_runs(dst, 128, 0));
        TIME("write, runs of 256 bytes", write_runs(dst, 256, 0));
        TIME("write, runs of 128 bytes a line at a time", write_runs(dst, 128, 1));
        TIME("write, runs of 256 bytes a line at a time", write_runs(dst, 256, 1));
        TIME("read, tiles of 64 rows x 4096 bytes", sink += _mm_cvtsi128_si32(read_tiles(src, 64, 4096, 1)));
        TIME("read, tiles of 128 rows x 2048 bytes", sink += _mm_cvtsi128_si32(read_tiles(src, 128, 2048, 1)));
        TIME("read, tiles of 256 rows x 1024 bytes", sink += _mm_cvtsi128_si32(read_tiles(src, 256, 1024, 1)));
        TIME("read, tiles of 256 rows x 4096 bytes", sink += _mm_cvtsi128_si32(read_tiles(src, 256, 4096, 1)));
        TIME("read, tiles of 256 rows x 1024 bytes, no prefetch", sink += _mm_cvtsi128_si32(read_tiles(src, 256, 1024, 0)));
        TIME("both, tiles of 128 rows x 2048 bytes", move_tiles(src, dst, 128, 2048));
        TIME("both, tiles of 256 rows x 1024 bytes", move_tiles(src, dst, 256, 1024));
        TIME("both, tiles of 256 rows x 4096 bytes", move_tiles(src, dst, 256, 4096));
        count = k;
    }
    for (int k = 0; k < count; k++) printf("%s\t%.3f\t%.2f\n", names[k], best[k] * 1e3, best[k] / best[0]);
    return sink == 42;
}
