/* Transposes: dst[j, i] = src[i, j] for 2-D buffers of 1-, 2-, 4- or 8-byte elements, one strip
 * of input rows at a time through two small stages, with whole cache lines written to the
 * output; a large output (streamed around the cache) by the page strips of transpose_stream.c.
 * The register blocks both use are in transpose.h. */
#include "transpose.h"

/* Bytes each blocked strip of a streamed transpose (the page strips need AVX2) writes
 * to every output row: four whole cache lines, few open at a time, but runs long enough that
 * the memory's pages see bursts. */
#ifndef STREAM_STRIP_BYTES
#define STREAM_STRIP_BYTES 256
#endif

/* Input rows of each strip of a transpose through the cache: each output row receives longer
 * runs, so its page is visited fewer times. */
#ifndef CACHED_STRIP_ROWS
#define CACHED_STRIP_ROWS 256
#endif

/* Bytes of each input row a strip gathers at a time (runs of four cache lines, as the output
 * gets), and how many such tiles ahead it prefetches: a strip reads dozens of rows side by
 * side, more streams than the hardware prefetcher follows. */
#ifndef TILE_BYTES
#define TILE_BYTES 256
#endif
/* Bytes of a tile row: at least 32 one-byte columns, as the AVX2 blocks of 1-byte items are. */
#define SPAN(SIZE) ((SIZE) == 1 && TILE_BYTES < 256 ? 2 * TILE_BYTES : TILE_BYTES)
#ifndef PREFETCH_TILES
#define PREFETCH_TILES 2
#endif

/* The edges of a transpose, element by element. */
#define SCALAR_TILE(T)                                                                         \
    static void tile_##T(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,          \
                         Py_ssize_t rows, Py_ssize_t cols) {                                 \
        for (Py_ssize_t j = 0; j < cols; j++) {                                              \
            char *d = dst + j * ds;                                                          \
            for (Py_ssize_t i = 0; i < rows; i++) {                                          \
                T v = LP_LOAD(T, src + i * ss + j * (Py_ssize_t)sizeof(T));                  \
                LP_STORE(T, d + i * (Py_ssize_t)sizeof(T), v);                               \
            }                                                                                \
        }                                                                                    \
    }

SCALAR_TILE(uint8_t)
SCALAR_TILE(uint16_t)
SCALAR_TILE(uint32_t)
SCALAR_TILE(uint64_t)

typedef void (*TileFn)(const char *, Py_ssize_t, char *, Py_ssize_t, Py_ssize_t, Py_ssize_t);

#if defined(__SSE2__)
/* Copies one run of a strip's output to its row: `bytes` (a multiple of 16, from a 16-byte
 * aligned dst) streamed around the cache, or stored through it. */
static inline void emit(char *dst, const char *run, Py_ssize_t bytes, int stream) {
    if (!stream) {
        memcpy(dst, run, (size_t)bytes);
        return;
    }
    for (Py_ssize_t b = 0; b < bytes; b += 16) {
        _mm_stream_si128((__m128i *)(dst + b), _mm_load_si128((const __m128i *)(run + b)));
    }
}

/* One strip: `rows` input rows (at most CACHED_STRIP_ROWS, a multiple of the block side)
 * against the first `m` columns (a multiple of the block side), `span` bytes of columns at a
 * time. The columns are first gathered into the contiguous stage `in`: input rows a power-of-
 * two stride apart share one set of the L1 cache, which cannot hold them all until their last
 * block is read. The blocks are transposed into the stage `out`, and each output row then gets
 * its run (whole cache lines) in one go: streamed stores need a line completed before the next
 * is begun, or they write it piecemeal. */
/* The register blocks of one gathered tile: `rows` x `cols`, multiples of k. */
#define SSE_BLOCKS(SIZE)                                                                       \
    for (Py_ssize_t j = 0; j < cols; j += k) {                                                 \
        for (Py_ssize_t i = 0; i < rows; i += k) {                                             \
            micro(in + i * span + j * SIZE, span, out + j * run + i * SIZE, run, SIZE);         \
        }                                                                                      \
    }

/* The same by the AVX2 blocks of side 2k, and SSE ones along the edges left over. */
#define AVX2_BLOCKS(SIZE)                                                                      \
    Py_ssize_t wide_cols = cols / (2 * k) * (2 * k), wide_rows = rows / (2 * k) * (2 * k);     \
    for (Py_ssize_t j = 0; j < wide_cols; j += 2 * k) {                                        \
        Py_ssize_t i = 0;                                                                      \
        for (; i < wide_rows; i += 2 * k) {                                                    \
            micro256(in + i * span + j * SIZE, span, out + j * run + i * SIZE, run, SIZE);      \
        }                                                                                      \
        for (; i < rows; i += k) {                                                             \
            micro(in + i * span + j * SIZE, span, out + j * run + i * SIZE, run, SIZE);         \
            micro(in + i * span + (j + k) * SIZE, span, out + (j + k) * run + i * SIZE, run,    \
                  SIZE);                                                                       \
        }                                                                                      \
    }                                                                                          \
    for (Py_ssize_t j = wide_cols; j < cols; j += k) {                                         \
        for (Py_ssize_t i = 0; i < rows; i += k) {                                             \
            micro(in + i * span + j * SIZE, span, out + j * run + i * SIZE, run, SIZE);         \
        }                                                                                      \
    }

#define STRIP(SIZE, NAME, ATTR, BLOCKS)                                                        \
    ATTR static void NAME(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,            \
                          Py_ssize_t rows, Py_ssize_t m, int stream, char *in, char *out,      \
                          char *cvt, const LpConvert *conv, Py_ssize_t isz, Py_ssize_t osz) {  \
        const Py_ssize_t span = SPAN(SIZE);                                                    \
        const Py_ssize_t k = 16 / SIZE, width = span / SIZE, run = rows * SIZE;                \
        const int copy = conv->kind == LP_CONVERT_COPY, after = !copy && isz == SIZE;          \
        const Py_ssize_t orun = rows * osz, stride = after ? orun : run;                       \
        const char *runs = after ? cvt : out;                                                  \
        for (Py_ssize_t j0 = 0; j0 < m; j0 += width) {                                         \
            Py_ssize_t cols = m - j0 < width ? m - j0 : width;                                 \
            int ahead = j0 + (PREFETCH_TILES + 1) * width <= m;                                \
            for (Py_ssize_t i = 0; i < rows; i++) {                                            \
                const char *row = src + i * ss + j0 * isz;                                     \
                if (copy || after) {                                                           \
                    if (cols == width) memcpy(in + i * span, row, (size_t)span); /* inlined */ \
                    else memcpy(in + i * span, row, (size_t)(cols * SIZE));                    \
                } else {                                                                       \
                    lp_convert(conv, row, isz, in + i * span, SIZE, cols);                     \
                }                                                                              \
                for (Py_ssize_t b = 0; ahead && b < width * isz; b += 64) {                    \
                    __builtin_prefetch(row + PREFETCH_TILES * width * isz + b);                \
                }                                                                              \
            }                                                                                  \
            BLOCKS(SIZE)                                                                       \
            if (after) lp_convert(conv, out, SIZE, cvt, osz, cols * rows);                     \
            for (Py_ssize_t j = 0; j < cols; j++) {                                            \
                emit(dst + (j0 + j) * ds, runs + j * stride, orun, stream);                    \
            }                                                                                  \
        }                                                                                      \
    }

STRIP(1, strip_1, , SSE_BLOCKS)
STRIP(2, strip_2, , SSE_BLOCKS)
STRIP(4, strip_4, , SSE_BLOCKS)
STRIP(8, strip_8, , SSE_BLOCKS)
#if LP_X86
#define AVX2 __attribute__((target("avx2")))
STRIP(1, strip_avx2_1, AVX2, AVX2_BLOCKS)
STRIP(2, strip_avx2_2, AVX2, AVX2_BLOCKS)
STRIP(4, strip_avx2_4, AVX2, AVX2_BLOCKS)
STRIP(8, strip_avx2_8, AVX2, AVX2_BLOCKS)
#endif

typedef void (*StripFn)(const char *, Py_ssize_t, char *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                        int, char *, char *, char *, const LpConvert *, Py_ssize_t, Py_ssize_t);
#endif

/* The edge rows or columns of a converting transpose, (rows, cols) of src: converted into
 * a contiguous block first (a few rows or columns, so the block is small), then transposed
 * element by element. */
static int edge(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t size, const LpConvert *conv, Py_ssize_t isz) {
    TileFn tile = size == 1 ? tile_uint8_t : size == 2 ? tile_uint16_t
                : size == 4 ? tile_uint32_t : tile_uint64_t;
    if (rows == 0 || cols == 0) return 0;
    if (conv->kind == LP_CONVERT_COPY) {
        tile(src, ss, dst, ds, rows, cols);
        return 0;
    }
    char *block = malloc((size_t)(rows * cols * size));
    if (block == NULL) return -1;
    for (Py_ssize_t i = 0; i < rows; i++) {
        lp_convert(conv, src + i * ss, isz, block + i * cols * size, size, cols);
    }
    tile(block, cols * size, dst, ds, rows, cols);
    free(block);
    return 0;
}

/* dst[j, i] = src[i, j] for an (n, m) src, converted by `conv` from items of `isz` bytes to
 * items of `size` bytes, one strip of input rows at a time; each strip writes whole cache
 * lines to every output row, converting as `strip` does. When the output is
 * `large` (it cannot stay in the cache anyway) they are streamed around the cache, which also
 * spares reading each line from memory before it is overwritten. Edges that do not fill a
 * register block go element by element. */
static int blocked(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                   Py_ssize_t m, Py_ssize_t size, int large, const LpConvert *conv,
                   Py_ssize_t isz) {
    Py_ssize_t done = 0, cols = 0;
#if defined(__SSE2__)
    /* The blocks move items of the wider side: a narrowing conversion runs on the transposed
     * runs (whole tiles at a time), a widening one as the tile rows are gathered. */
    Py_ssize_t wide = isz > size ? isz : size, k = 16 / wide;
    /* Streamed runs must fill whole cache lines: the rows must start at one offset within
     * a line, and a first strip reaches the next line boundary. */
    int stream = large && ((uintptr_t)dst % 16) == 0 && ds % 64 == 0;
    Py_ssize_t rows = stream ? STREAM_STRIP_BYTES / size : CACHED_STRIP_ROWS;
    Py_ssize_t stage = rows * SPAN(wide);  /* a strip's tile, in each stage */
    StripFn strip = wide == 1 ? strip_1 : wide == 2 ? strip_2 : wide == 4 ? strip_4 : strip_8;
#if LP_X86
    if (lp_has_f16c) {  /* which implies AVX2 */
        strip = wide == 1 ? strip_avx2_1 : wide == 2 ? strip_avx2_2
              : wide == 4 ? strip_avx2_4 : strip_avx2_8;
    }
#endif
    char *block = malloc((size_t)(3 * stage + 63));  /* the stages, on a cache line */
    if (block == NULL) return -1;
    char *in = block + (64 - (uintptr_t)block % 64) % 64, *out = in + stage, *cvt = out + stage;
    cols = m / k * k;
    Py_ssize_t head = stream ? (Py_ssize_t)((64 - (uintptr_t)dst % 64) % 64) / size : 0;
    if (head > 0 && head <= n) {
        strip(src, ss, dst, ds, head, cols, 0, in, out, cvt, conv, isz, size);
        done = head;
    }
    while (done + k <= n) {
        Py_ssize_t height = n - done >= rows ? rows : (n - done) / k * k;
        strip(src + done * ss, ss, dst + done * size, ds, height, cols, stream && height == rows,
              in, out, cvt, conv, isz, size);
        done += height;
    }
    if (stream) _mm_sfence();
    free(block);
#endif
    /* bottom rows, then right columns */
    if (edge(src + done * ss, ss, dst + done * size, ds, n - done, m, size, conv, isz) < 0) {
        return -1;
    }
    return edge(src + cols * isz, ss, dst + cols * ds, ds, done, m - cols, size, conv, isz);
}

/* dst[j, i] = src[i, j] converted (see `blocked`). A large output whose rows are a whole
 * number of cache lines apart takes the streamed strips where the CPU has AVX2: the rows
 * before the first whole line of the output, and the few after the last whole line, go to
 * the blocked loops; or, where the output rows are adjacent (a whole output, or a plane of
 * one), to the streamed seams, each the last items of one output row and the first of the
 * next in one line (those outside the output, before its first row and after its last, item
 * by item). */
static int transpose(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                     Py_ssize_t m, Py_ssize_t size, int large, const LpConvert *conv,
                     Py_ssize_t isz) {
#if LP_X86
    Py_ssize_t head = (Py_ssize_t)((64 - (uintptr_t)dst % 64) % 64) / size;
    if (large && lp_has_f16c && ds % 64 == 0 && (uintptr_t)dst % size == 0 &&
        n - head >= 64 / size) {
        int seams = head > 0 && ds == n * size && m > 1;
        if (head > 0 && !seams && blocked(src, ss, dst, ds, head, m, size, large, conv, isz) < 0) {
            return -1;
        }
        Py_ssize_t done = lp_transpose_streamed(src + head * ss, ss, dst + head * size, ds,
                                                n - head, m, size, conv, isz, seams ? head : 0);
        if (done < 0) return -1;
        done += head;
        if (seams) {  /* the rows left are the line's other items: n is a whole line */
            if (edge(src, ss, dst, ds, head, 1, size, conv, isz) < 0) return -1;
            return edge(src + done * ss + (m - 1) * isz, ss, dst + (m - 1) * ds + done * size,
                        ds, n - done, 1, size, conv, isz);
        }
        if (done == n) return 0;
        return blocked(src + done * ss, ss, dst + done * size, ds, n - done, m, size, large,
                       conv, isz);
    }
#endif
    return blocked(src, ss, dst, ds, n, m, size, large, conv, isz);
}

const char lp_transpose2d_doc[] = PyDoc_STR(
             "transpose2d(src, dst, large, kind='', table=None): dst[j, i] = src[i, j] for 2-D\n"
             "buffers of items of 1, 2, 4 or 8 bytes whose rows may be strided, converted by\n"
             "`kind` (a name of `cast` or `cast16`, or 'lookup' by `table`; '' copies);\n"
             "`large` streams the output around the cache.");

/* The conversion named `kind` between items of `isz` and `size` bytes, or -1 with an error
 * set. */
static int conversion(const char *kind, PyObject *to, Buf *table, Py_ssize_t isz,
                      Py_ssize_t size, LpConvert *conv) {
    static const Py_ssize_t sizes[LP_CONVERT_KINDS][2] = {
        {0, 0}, {4, 2}, {4, 2}, {4, 1}, {4, 1}, {2, 4}, {2, 2}, {2, 4}, {2, 2}, {0, 0},
        {1, 4}, {1, 4}};
    conv->kind = lp_convert_kind(kind);
    conv->table = NULL;
    if (conv->kind >= LP_CONVERT_LOOKUP) {
        int float8 = conv->kind > LP_CONVERT_LOOKUP;
        if (to == Py_None || lp_get_buf(to, table, 0, 1, size, "table") < 0 ||
            (isz != 1 && isz != 2) || table->view.shape[0] != ((Py_ssize_t)1 << (8 * isz)) ||
            (float8 && (isz != sizes[conv->kind][0] || size != sizes[conv->kind][1]))) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "expected 1- or 2-byte codes and a table of "
                                "one entry of dst's item size per code");
            }
            return -1;
        }
        conv->table = table->view.buf;
        return 0;
    }
    int same = conv->kind == LP_CONVERT_COPY && isz == size;
    if (conv->kind < 0 || (conv->kind > 0 && (sizes[conv->kind][0] != isz ||
                                              sizes[conv->kind][1] != size)) ||
        (conv->kind == 0 && !same)) {
        PyErr_Format(PyExc_ValueError, "expected a conversion kind of src's and dst's item "
                     "sizes, got '%s' from %zd to %zd bytes", kind, isz, size);
        return -1;
    }
    return 0;
}

PyObject *lp_transpose2d(PyObject *self, PyObject *args) {
    PyObject *so, *do_, *to = Py_None;
    const char *kind = "";
    int large;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "OOp|sO", &so, &do_, &large, &kind, &to)) return NULL;
    if (lp_get_buf(so, &b[0], 0, 2, 0, "src") < 0 || lp_get_buf(do_, &b[1], 1, 2, 0, "dst") < 0) {
        lp_release(b, 3);
        return NULL;
    }
    Py_ssize_t n = b[0].view.shape[0], m = b[0].view.shape[1], size = b[1].view.itemsize;
    Py_ssize_t isz = b[0].view.itemsize;
    if (b[1].view.shape[0] != m || b[1].view.shape[1] != n ||
        (size != 1 && size != 2 && size != 4 && size != 8)) {
        lp_release(b, 3);
        PyErr_SetString(PyExc_ValueError, "expected dst of src's transposed shape and an item "
                        "size of 1, 2, 4 or 8 bytes");
        return NULL;
    }
    LpConvert conv;
    if (conversion(kind, to, &b[2], isz, size, &conv) < 0) {
        lp_release(b, 3);
        return NULL;
    }
    int failed = 0;
    /* nothing to write, but the strips would still step over every row of an (n, 0) src:
     * minutes for an empty array of 10**12 rows */
    if (n == 0 || m == 0) {
        lp_release(b, 3);
        Py_RETURN_NONE;
    }
    Py_BEGIN_ALLOW_THREADS
    failed = transpose(b[0].view.buf, b[0].view.strides[0], b[1].view.buf, b[1].view.strides[0],
                       n, m, size, large, &conv, isz);
    Py_END_ALLOW_THREADS
    lp_release(b, 3);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}
