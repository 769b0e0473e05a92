/* Streamed transposes: outputs too large for the cache, written around it a whole cache line
 * at a time, by strips of input rows against tiles of about a page of columns (the loops
 * through the cache and the edges live in transpose.c).
 *
 * Such a transpose is bound by memory, and reading is the harder side: a strip reads many
 * input rows side by side, and read a few cache lines of each at a time, each 4 KiB page of
 * the input is visited many times over. The hardware prefetcher follows a stream within a page
 * only, so it starts over on every visit, and such reads take about half as long again as
 * sequential ones. Two ways around it:
 *
 * - staged: a strip first copies a page's worth of each of its rows, row after row, into a
 *   stage (converting the items on the way), then transposes the stage one cache line of
 *   columns at a time: the register blocks of those columns go to a small second stage whose
 *   rows are whole output runs, streamed to the output. Any conversion, any item size.
 * - direct (plain copies of 1- to 8-byte items with AVX-512, of 4 and 8 bytes without): tiles
 *   small enough to stay in the L2 cache (rows of 2 KiB), transposed straight from the input,
 *   while the next tile is prefetched row after row, a share of it after each line of columns.
 *   The reads of one tile then overlap the streamed writes of the other, as a copy's do, and no
 *   stage is written: on AMD Zen 5 a 4096 x 4096 float64 transpose takes 1.05 times a copy's
 *   time against the staged strips' 1.55, float32 1.3 against 1.6, by the AVX2 blocks of 4- and
 *   8-byte items (16 or 32 rows). Where the CPU has AVX-512 the blocks of transpose512.c take
 *   every item size instead (DIRECT512_ROWS, rows of 1 KiB), their output lines gathered into
 *   runs that stream out while the next line of columns is transposed, the next tile prefetched
 *   a few lines at a time as the blocks load (1- and 2-byte items).
 *
 * Arrays start 16 bytes into a cache line (numpy's allocator and the buffer pool's), so each
 * output row of a whole output begins and ends with a part of a line, the end of one row and
 * the start of the next sharing it. Where the rows are adjacent the first strip gathers these
 * seams as a line of extra rows and streams each just before its row's run. */
#include "transpose.h"

/* Which streamed strips the plain copies take: -1 the default (direct: on AMD Zen 5 and on an
 * Intel Xeon with AVX-512 FP16 alike they measured faster), 0 staged, 1 direct: by the AVX-512
 * blocks of transpose512.c where the CPU has them (which also take the staged tiles of bfloat16
 * to float16), else, for 4- and 8-byte items, by the AVX2 ones. On that Xeon, with its caches
 * cold, the AVX-512 blocks took 0.66-0.72 times a copy's time for 4096 x 4096 float64 and
 * float32 transposes against the staged strips' 1.0-1.1, float16 and bfloat16 0.98-1.0 against
 * 1.25-1.33, 1-byte items 1.2 against 1.4, bfloat16 to float16 1.36-1.5 against 1.5-1.75; the
 * AVX2 ones 0.94-1.09 for 8- and 4-byte items against 1.0-1.1. */
static int direct_path = -1;

#if LP_X86
/* Bytes of each input row a staged strip copies in one go: about a page (rows of up to
 * one and a half pages in one go, longer ones in tiles as even as whole lines allow: a row of
 * 1.1 pages goes whole, not as a page and a tenth whose short reads would be slow). */
#define PAGE_BYTES 4096
/* Input rows of a staged strip, so the bytes of each run it writes to an output row: 512, or
 * 128 rows of 1- and 2-byte items (runs of 128 and 256 bytes, stages of half a MiB and one MiB:
 * deeper ones fill the L2 cache). Runs of a few cache lines are as fast to stream as
 * sequential stores. On AMD Zen 5, 4096 x 4096 float16 transposes took a tenth less time with
 * 128 rows than with 256; on an Intel Xeon (2 MiB of L2), with the caches cold, float16 ones
 * 1.08-1.14 times a copy's time against 1.19-1.30, bfloat16 to float16 1.27-1.36 against
 * 1.56-1.59 (the AVX2 blocks) and 1.19-1.29 against 1.26-1.37 (the AVX-512 ones), 1-byte items
 * 1.18-1.27 against 1.28-1.36 with 128 rows rather than 256. */
#define STREAM_ROWS(SIZE) ((SIZE) <= 2 ? 128 : 512 / (SIZE))
/* How many rows ahead of the copy their page is prefetched. */
#define COPY_AHEAD 2
/* A direct tile: rows of 2 KiB, and two cache lines of each output row (16 rows of 8-byte
 * items, 32 of 4-byte ones). More rows fall out of the L2 cache where the input's rows are a
 * power of two apart (they share its sets); shorter rows read slower, as do shorter runs of
 * the output stream; 1 or 4 KiB rows are a few percent slower. */
#define DIRECT_BYTES 2048
/* Input rows and columns (bytes of each row) of a direct tile of plain copies by the AVX-512
 * blocks of transpose512.c: runs of 256 bytes to each output row for 1-byte items, 192 for
 * 2-byte ones, 128 for the others; rows of 1 KiB. Deeper tiles fall out of the L2 cache where
 * rows are a power of two apart: the lines of one column of a tile share its sets, and rows
 * of 8 KiB leave each such column 8 sets of 16 ways, 128 lines (AMD Zen 5's 1 MiB L2). On Zen
 * 5 with the cache cold, 1-byte tiles of 256 rows by 1 KiB took 1.55-1.8 times a copy's time
 * on 4096 x 4096, 8192 x 8192 and 14336 x 4096, against 1.75-1.9 of 128 by 2 KiB; 2-byte tiles
 * of 96 rows 1.3-1.4 (128 rows: 1.35-1.45; with the prefetches in bursts 64 and 160 rows were
 * slower), 4- and 8-byte ones 1.5 times slower with twice their rows. 2-byte blocks of
 * whole-line loads into drained runs (as the 1-byte ones) measure slower, of 64 rows or 128. */
#define DIRECT512_ROWS(SIZE) ((SIZE) == 1 ? 256 : (SIZE) == 2 ? 96 : 128 / (SIZE))
#define DIRECT512_BYTES 1024
#ifndef DIRECT_RUN
#define DIRECT_RUN 128
#endif

/* Copies `cols` items of each of `rows` rows (`ss` apart) to the stage's rows (`stride`
 * apart), row after row, converted by `conv` from items of `isz` bytes into the stage's items
 * of `size` bytes. Converting here, where the copy waits on the input's reads, rather than as
 * the runs go out: 4096 x 4096 bfloat16 to float16 transposes by the AVX2 blocks took 1.55-1.85
 * times a copy's time so, against 2.0-2.4. */
__attribute__((target("avx2"))) static void copy_pages(const char *src, Py_ssize_t ss,
                                                       char *stage, Py_ssize_t stride,
                                                       Py_ssize_t rows, Py_ssize_t cols,
                                                       const LpConvert *conv, Py_ssize_t isz,
                                                       Py_ssize_t size) {
    const Py_ssize_t bytes = cols * isz, vectors = bytes / 32 * 32;
    const int copy = conv->kind == LP_CONVERT_COPY;
    for (Py_ssize_t r = 0; r < rows; r++) {
        const char *row = src + r * ss;
        char *to = stage + r * stride;
        for (Py_ssize_t b = 0; r + COPY_AHEAD < rows && b < bytes; b += 64) {
            _mm_prefetch(row + COPY_AHEAD * ss + b, _MM_HINT_T0);
        }
        if (!copy) {
            lp_convert(conv, row, isz, to, size, cols);
            continue;
        }
        for (Py_ssize_t b = 0; b < vectors; b += 32) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(row + b));
            _mm256_store_si256((__m256i *)(to + b), x);
        }
        memcpy(to + vectors, row + vectors, (size_t)(bytes - vectors));
    }
}

/* Streams `lines` output rows of `run` bytes (whole cache lines) from the stage `runs` to
 * dst's rows `ds` apart, starting on a line boundary. */
__attribute__((target("avx2"))) static inline void stream_runs(char *dst, Py_ssize_t ds,
                                                               const char *runs,
                                                               Py_ssize_t lines,
                                                               Py_ssize_t run) {
    for (Py_ssize_t c = 0; c < lines; c++) {
        char *d = dst + c * ds;
        const char *from = runs + c * run;
        for (Py_ssize_t b = 0; b < run; b += 32) {
            __m256i x = _mm256_load_si256((const __m256i *)(from + b));
            _mm256_stream_si256((__m256i *)(d + b), x);
        }
    }
}

/* A tile of a streamed transpose: `rows` input rows from `r0` (none when 0) against `cols`
 * columns from `j0`. */
typedef struct {
    Py_ssize_t r0, rows, j0, cols;
} PageTile;

/* A streamed transpose: input, output, conversion, and the tiles' layout (strips of `most`
 * rows, tiles `width` columns wide but the last of a strip, stage rows `stride` apart); with
 * `seam_rows` (a line's worth, or none) gathered for each tile of the first strip into `seam`
 * (rows `stride` apart), whose runs go out just before the strip's. */
typedef struct {
    const char *src;
    char *dst;
    Py_ssize_t ss, ds, n, m, size, isz, most, line, width, stride, seam_rows, lead;
    const LpConvert *conv;
    const char *seam;
} PagePlan;

/* The tile after `t`: the next columns of its strip, else the first of the next strip (of
 * `most` rows, or the whole lines of output left), else one of no rows. */
static PageTile next_tile(const PagePlan *p, PageTile t) {
    if (t.rows > 0 && t.j0 + t.cols < p->m) {
        t.j0 += t.cols;
    } else {
        Py_ssize_t left = p->n - t.r0 - t.rows;
        t.r0 += t.rows;
        t.rows = left >= p->most ? p->most : left / p->line * p->line;
        t.j0 = 0;
    }
    const Py_ssize_t width = p->width + (t.j0 == 0 ? p->lead : 0);
    t.cols = p->m - t.j0 < width ? p->m - t.j0 : width;
    return t;
}

/* Prefetches the input rows [from, to) of tile `t`, row after row. */
static inline void prefetch_rows(const PagePlan *p, PageTile t, Py_ssize_t from, Py_ssize_t to) {
    for (Py_ssize_t r = from; r < to; r++) {
        const char *row = p->src + (t.r0 + r) * p->ss + t.j0 * p->isz;
        for (Py_ssize_t b = 0; b < t.cols * p->isz; b += 64) _mm_prefetch(row + b, _MM_HINT_T0);
    }
}

/* Tile `t` from `from` (its first item; rows `stride` apart): each line of columns (64 / SIZE,
 * two AVX2 blocks wide) goes to `runs` and on to the output, after the seams' (in the first
 * strip, where the plan has them; but output row 0's, which lies before the output). From a
 * stage, the last line may be partial, its missing columns read from the stage but not
 * written; from the input (`direct`), whose row ends may not be read past, such a line is
 * first copied to `edge`. After each line a share of the rows of tile `next` is prefetched
 * (none when it has none). */
#define STREAMED_TILE(SIZE)                                                                    \
    __attribute__((target("avx2,f16c"))) static void tile_##SIZE(                             \
        const PagePlan *p, PageTile t, const char *from, Py_ssize_t stride, int direct,        \
        PageTile next, char *runs, char *edge) {                                               \
        const Py_ssize_t pre = t.r0 == 0 ? p->seam_rows : 0, w = 32 / SIZE;                    \
        const Py_ssize_t run = (pre + t.rows) * SIZE, groups = (t.cols + 2 * w - 1) / (2 * w); \
        char *dst = p->dst + t.j0 * p->ds + (t.r0 - pre) * SIZE;                               \
        Py_ssize_t fetched = 0;                                                                \
        for (Py_ssize_t g = 0; g < groups; g++) {                                              \
            const char *block = from + g * 2 * w * SIZE, *seam = p->seam + g * 2 * w * SIZE;    \
            Py_ssize_t lines = t.cols - g * 2 * w < 2 * w ? t.cols - g * 2 * w : 2 * w;         \
            Py_ssize_t bs = stride;                                                            \
            if (direct && lines < 2 * w) {                                                     \
                for (Py_ssize_t i = 0; i < t.rows; i++) {                                      \
                    memcpy(edge + i * 64, block + i * stride, (size_t)(lines * SIZE));         \
                }                                                                              \
                block = edge;                                                                  \
                bs = 64;                                                                       \
            }                                                                                  \
            for (Py_ssize_t i = 0; i < pre; i += w) {                                          \
                micro256(seam + i * p->stride, p->stride, runs + i * SIZE, run, SIZE);         \
                micro256(seam + i * p->stride + 32, p->stride, runs + w * run + i * SIZE, run, \
                         SIZE);                                                                \
            }                                                                                  \
            char *at = runs + pre * SIZE;                                                      \
            for (Py_ssize_t i = 0; i < t.rows; i += w) {                                       \
                micro256(block + i * bs, bs, at + i * SIZE, run, SIZE);                        \
                micro256(block + i * bs + 32, bs, at + w * run + i * SIZE, run, SIZE);         \
            }                                                                                  \
            const Py_ssize_t skip = pre && t.j0 == 0 && g == 0;                                \
            char *out = dst + (g * 2 * w + skip) * p->ds;                                      \
            if (skip) stream_runs(dst + pre * SIZE, p->ds, at, 1, run - pre * SIZE);           \
            stream_runs(out, p->ds, runs + skip * run, lines - skip, run);                     \
            Py_ssize_t upto = next.rows * (g + 1) / groups;                                    \
            prefetch_rows(p, next, fetched, upto);                                             \
            fetched = upto;                                                                    \
        }                                                                                      \
    }

STREAMED_TILE(1)
STREAMED_TILE(2)
STREAMED_TILE(4)
STREAMED_TILE(8)

typedef void (*TileFn)(const PagePlan *, PageTile, const char *, Py_ssize_t, int, PageTile,
                       char *, char *);

/* Columns of each tile of rows of `m` items of `size` bytes, `page` bytes about: rows of up to
 * one and a half of it go whole, longer ones in tiles as even as whole lines of `line` items
 * allow (a row of 1.1 pages goes whole, not as a page and a tenth whose short reads would be
 * slow). */
static Py_ssize_t tile_width(Py_ssize_t m, Py_ssize_t size, Py_ssize_t page, Py_ssize_t line) {
    const Py_ssize_t bytes = m * size, pages = bytes / page;
    const Py_ssize_t tiles = bytes - pages * page < page / 2 && pages ? pages : pages + 1;
    return ((m - 1) / tiles / line + 1) * line;
}

/* Gathers the seams of tile `t` (of the first strip) into `seam`: the last `tail` rows of the
 * input a column behind (none for output row 0, whose seam lies before the output), then its
 * first `line - tail` rows, `src` being the first row after those. */
static void gather_seams(const PagePlan *p, PageTile t, char *seam, Py_ssize_t tail) {
    const int raw = p->conv->kind == LP_CONVERT_COPY;
    const Py_ssize_t first = t.j0 == 0; /* the columns that have a column behind start here */
    for (Py_ssize_t r = 0; r < p->line; r++) {
        const char *from = r < tail
                               ? p->src + (p->n - tail + r) * p->ss + (t.j0 + first - 1) * p->isz
                               : p->src + (r - p->line) * p->ss + t.j0 * p->isz;
        Py_ssize_t skip = r < tail ? first : 0, count = t.cols - skip;
        char *to = seam + r * p->stride + skip * p->size;
        if (raw) memcpy(to, from, (size_t)(count * p->isz));
        else lp_convert(p->conv, from, p->isz, to, p->size, count);
    }
}

/* How the tiles of a streamed transpose go (see streamed_pages). */
enum { TILES_STAGED, TILES_STAGED512, TILES_DIRECT, TILES_DIRECT512 };

/* The bytes of each input row a tile of the way `how` reads, about. */
static Py_ssize_t tile_bytes(int how) {
    return how == TILES_DIRECT512 ? DIRECT512_BYTES : how == TILES_DIRECT ? DIRECT_BYTES
                                                                          : PAGE_BYTES;
}

/* A streamed transpose's scratch, each on a line: the runs of a line of columns (two, for the
 * AVX-512 blocks' drain), the edge of a direct tile, and the stage. */
typedef struct {
    char *runs, *edge, *stage;
    LpRuns drain;
} Scratch;

/* Tile `t` of plan `p` the way `how` says, `next` the tile after it (its rows prefetched by the
 * direct ones). */
static void one_tile(const PagePlan *p, PageTile t, PageTile next, int how, Scratch *s) {
    const Py_ssize_t ss = p->ss, ds = p->ds, size = p->size, isz = p->isz;
    const TileFn tile = size == 1 ? tile_1 : size == 2 ? tile_2 : size == 4 ? tile_4 : tile_8;
    const PageTile none = {0, 0, 0, 0};
    switch (how) {
    case TILES_DIRECT512:
        lp_direct512(p->src + t.r0 * ss + t.j0 * size, ss, p->dst + t.j0 * ds + t.r0 * size, ds,
                     t.rows, t.cols, p->src + next.r0 * ss + next.j0 * size, next.rows,
                     next.cols * size, &s->drain, size);
        break;
    case TILES_DIRECT:
        tile(p, t, p->src + t.r0 * ss + t.j0 * size, ss, 1, next, s->runs, s->edge);
        break;
    case TILES_STAGED512: /* bfloat16 to float16, converted as it is staged */
        lp_stage512_halves(p->src + t.r0 * ss + t.j0 * isz, ss, s->stage, p->stride, t.rows,
                           t.cols, COPY_AHEAD);
        lp_tile512_2(s->stage, p->stride, p->dst + t.j0 * ds + t.r0 * 2, ds, t.rows, t.cols);
        break;
    default:
        copy_pages(p->src + t.r0 * ss + t.j0 * isz, ss, s->stage, p->stride, t.rows, t.cols,
                   p->conv, isz, size);
        tile(p, t, s->stage, p->stride, 0, none, s->runs, s->edge);
    }
}

/* Allocates the scratch of plan `p` tiled as `how` says, and after it the seams' rows (into
 * `seam`); returns the block to free, or NULL. */
static char *alloc_scratch(const PagePlan *p, int how, Scratch *s, char **seam) {
    const Py_ssize_t line = p->line, most = p->most, size = p->size;
    const Py_ssize_t runs_bytes = how == TILES_DIRECT512 ? 2 * line * most * size
                                                         : line * (most + line) * size;
    const Py_ssize_t edge_bytes = most * 64;
    const Py_ssize_t stage_bytes = how >= TILES_DIRECT ? 0 : most * p->stride;
    char *block = malloc((size_t)(runs_bytes + edge_bytes + stage_bytes + line * p->stride + 63));
    if (block == NULL) return NULL;
    s->runs = block + (64 - (uintptr_t)block % 64) % 64;
    s->edge = s->runs + runs_bytes;
    s->stage = s->edge + edge_bytes;
    s->drain = (LpRuns){.buffer = s->runs, .half_bytes = line * most * size, .half = 0, .left = 0};
    *seam = s->stage + stage_bytes;
    return block;
}

/* The strips above (staged or direct) of an (n, m) src from `src` (see lp_transpose_streamed);
 * with `wide`, the tiles by the AVX-512 blocks (direct for plain copies, staged for bfloat16 to
 * float16, where the direct ones measured slower). */
static Py_ssize_t streamed_pages(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,
                                 Py_ssize_t n, Py_ssize_t m, Py_ssize_t size,
                                 const LpConvert *conv, Py_ssize_t isz, Py_ssize_t head,
                                 int wide) {
    const int copy = conv->kind == LP_CONVERT_COPY;
    const int how = wide ? (copy ? TILES_DIRECT512 : TILES_STAGED512)
                  : direct_path != 0 && copy && size >= 4 ? TILES_DIRECT
                                                          : TILES_STAGED;
    const int direct = how >= TILES_DIRECT;
    const Py_ssize_t line = 64 / size;
    const Py_ssize_t most = how == TILES_DIRECT512 ? DIRECT512_ROWS(size)
                          : how == TILES_DIRECT    ? DIRECT_RUN / size
                                                   : STREAM_ROWS(size);
    const Py_ssize_t width = tile_width(m, isz > size ? isz : size, tile_bytes(how), line);
    PagePlan p = {src, dst, ss, ds, n, m, size, isz, most, line, width,
                  ((width * size + 63) / 64 | 1) * 64, head ? line : 0, 0, conv, NULL};
    Scratch s;
    char *seam, *block = alloc_scratch(&p, how, &s, &seam);
    if (block == NULL) return -1;
    p.seam = seam;
    /* the direct tiles of the AVX-512 blocks start on lines of the input but the first of each
     * strip, which takes the columns before the first line in addition (their blocks read
     * whole lines of each row) */
    p.lead = how == TILES_DIRECT512 ? (Py_ssize_t)((64 - (uintptr_t)src % 64) % 64) / size : 0;
    PageTile t = next_tile(&p, (PageTile){0, 0, 0, 0});
    if (direct) prefetch_rows(&p, t, 0, t.rows);
    while (t.rows > 0) {
        PageTile next = next_tile(&p, t);
        if (head && t.r0 == 0) gather_seams(&p, t, seam, line - head);
        one_tile(&p, t, next, how, &s);
        t = next;
    }
    if (how == TILES_DIRECT512) lp_runs512_flush(&s.drain);
    _mm_sfence();
    free(block);
    return t.r0;
}

Py_ssize_t lp_transpose_streamed(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,
                                 Py_ssize_t n, Py_ssize_t m, Py_ssize_t size,
                                 const LpConvert *conv, Py_ssize_t isz, Py_ssize_t head) {
    /* plain copies and bfloat16 to float16 on CPUs with AVX-512 (unless the path is staged)
     * take its blocks: for direct tiles (copies), staged ones (bfloat16 to float16), and the
     * seams */
    const int copy = conv->kind == LP_CONVERT_COPY;
    const int wide = (copy || (size == 2 && conv->kind == LP_CONVERT_BF16_F16)) &&
                     lp_has_avx512 && direct_path != 0;
    const int halves = conv->kind == LP_CONVERT_BF16_F16;
    if (wide && head) lp_seams512(src, ss, dst, ds, n, m, head, halves, size);
    return streamed_pages(src, ss, dst, ds, n, m, size, conv, isz, wide ? 0 : head, wide);
}
#endif

const char lp_transpose_path_doc[] = PyDoc_STR(
    "transpose_path(name): which streamed strips transpose2d gives plain copies: 'direct',\n"
    "'staged', or 'auto' (the default: direct, on every CPU measured); 'direct' takes the\n"
    "AVX-512 blocks where the CPU has them (also for bfloat16 to float16, in staged tiles),\n"
    "else the AVX2 ones for 4- and 8-byte items; 'staged' the AVX2 ones; returns the\n"
    "previous name.");

PyObject *lp_transpose_path(PyObject *self, PyObject *arg) {
    static const char *const names[] = {"auto", "staged", "direct"};
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (name == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "expected a path name");
        return NULL;
    }
    int before = direct_path, chosen = -2; /* the names' index, less one */
    for (int i = 0; i < 3; i++) {
        if (strcmp(name, names[i]) == 0) chosen = i - 1;
    }
    if (chosen == -2) {
        PyErr_Format(PyExc_ValueError, "expected 'auto', 'staged' or 'direct', got '%s'", name);
        return NULL;
    }
    direct_path = chosen;
    return PyUnicode_FromString(names[before + 1]);
}
