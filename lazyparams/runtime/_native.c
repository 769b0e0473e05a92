/* Compiled loops behind the layout, cast and quantization kernels of `lazyparams.runtime`.
 *
 * Each function fills buffers the caller allocated, touches each byte once where it can, and
 * runs without the GIL, so that worker threads convert in parallel. `runtime/native.py` checks
 * every argument (dtypes, shapes, contiguity) before calling in; the checks here only guard
 * memory safety. Results are bit-identical to numpy's and ml_dtypes' own conversions: the
 * 1- and 2-byte sources go through tables those libraries computed, and the float32 roundings
 * below follow IEEE round-half-to-even and those libraries' NaN rules exactly. Quantization
 * reports a non-finite input instead of quantizing it, and the caller takes the numpy path.
 *
 * The extension is optional: without a C compiler the package installs without it and the
 * numpy loops in `runtime/fast.py` and `runtime/quant.py` do the same work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
/* Hot loops get an AVX2 build chosen at load time, where the CPU has it. */
#define LP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LP_CLONES
#endif

#if defined(__GNUC__) && defined(__x86_64__)
/* The float16 conversions of AVX2-era CPUs, used where the CPU has them. */
#define LP_X86 1
#include <immintrin.h>

static int has_f16c(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return known;
}
#else
#define LP_X86 0
#endif

/* Buffers -------------------------------------------------------------------------------- */

/* A buffer argument: the object's memory, its shape and byte strides. */
typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int get_buf(PyObject *obj, Buf *buf, int writable, int ndim, Py_ssize_t itemsize,
                   const char *what) {
    int flags = PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0) {
        return -1;
    }
    buf->held = 1;
    if (buf->view.ndim != ndim || (itemsize && buf->view.itemsize != itemsize)) {
        PyErr_Format(PyExc_ValueError, "expected %s of rank %d and item size %zd, got rank %d"
                     " and item size %zd", what, ndim, itemsize, buf->view.ndim,
                     buf->view.itemsize);
        return -1;
    }
    /* Rows may be strided, but the elements within a row must be adjacent. */
    if (ndim > 0 && buf->view.shape[ndim - 1] > 1 &&
        buf->view.strides[ndim - 1] != buf->view.itemsize) {
        PyErr_Format(PyExc_ValueError, "expected %s with adjacent elements in its last axis",
                     what);
        return -1;
    }
    return 0;
}

static void release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++) {
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
    }
}

static int same_shape(const Buf *a, const Buf *b, const char *what) {
    for (int i = 0; i < a->view.ndim; i++) {
        if (a->view.shape[i] != b->view.shape[i]) {
            PyErr_Format(PyExc_ValueError, "expected %s of the input's shape", what);
            return -1;
        }
    }
    return 0;
}

static inline uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static inline float bits_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Transposes ----------------------------------------------------------------------------- */

/* Bytes each strip of a streamed transpose writes to every output row: two whole cache lines,
 * so that few lines are open at a time. */
#define STREAM_STRIP_BYTES 128

/* Input rows of each strip of a transpose through the cache: each output row receives longer
 * runs, so its page is visited fewer times. */
#define CACHED_STRIP_ROWS 256

/* Bytes of each input row a strip gathers at a time (twice as many for 1-byte elements, whose
 * register blocks are 16 rows tall), and how many such tiles ahead it prefetches: a strip
 * reads dozens of rows side by side, more streams than the hardware prefetcher follows. */
#define TILE_BYTES 128
#define PREFETCH_TILES 1

/* The edges of a transpose, element by element. */
#define SCALAR_TILE(T)                                                                         \
    static void tile_##T(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,          \
                         Py_ssize_t rows, Py_ssize_t cols) {                                 \
        for (Py_ssize_t j = 0; j < cols; j++) {                                              \
            T *d = (T *)(dst + j * ds);                                                      \
            for (Py_ssize_t i = 0; i < rows; i++) {                                          \
                d[i] = *(const T *)(src + i * ss + j * (Py_ssize_t)sizeof(T));               \
            }                                                                                \
        }                                                                                    \
    }

SCALAR_TILE(uint8_t)
SCALAR_TILE(uint16_t)
SCALAR_TILE(uint32_t)
SCALAR_TILE(uint64_t)

typedef void (*TileFn)(const char *, Py_ssize_t, char *, Py_ssize_t, Py_ssize_t, Py_ssize_t);

#if defined(__SSE2__)
/* Register-sized square blocks of 16 bytes a row (2x2 of 8-byte, 4x4 of 4-byte, 8x8 of
 * 2-byte, 16x16 of 1-byte elements), transposed by rounds of interleaving row pairs: each
 * round doubles the width of the unit that moves together. `stream` stores around the cache
 * and needs 16-byte aligned rows. */
static inline void interleave(__m128i *r, __m128i *a, int k, int width) {
    for (int i = 0; i < k / 2; i++) {
        __m128i x = r[2 * i], y = r[2 * i + 1];
        switch (width) {
        case 1: a[i] = _mm_unpacklo_epi8(x, y); a[i + k / 2] = _mm_unpackhi_epi8(x, y); break;
        case 2: a[i] = _mm_unpacklo_epi16(x, y); a[i + k / 2] = _mm_unpackhi_epi16(x, y); break;
        case 4: a[i] = _mm_unpacklo_epi32(x, y); a[i + k / 2] = _mm_unpackhi_epi32(x, y); break;
        default: a[i] = _mm_unpacklo_epi64(x, y); a[i + k / 2] = _mm_unpackhi_epi64(x, y);
        }
    }
}

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
    __m128i r[16], a[16];
    const int k = 16 / size, log = size == 8 ? 0 : size == 4 ? 1 : size == 2 ? 2 : 3;
    for (int i = 0; i < k; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + i * ss));
    switch (size) {  /* rounds alternate between r and a; an odd count ends in a */
    case 1: interleave(r, a, k, 1); interleave(a, r, k, 2); interleave(r, a, k, 4);
            interleave(a, r, k, 8); break;
    case 2: interleave(r, a, k, 2); interleave(a, r, k, 4); interleave(r, a, k, 8);
            memcpy(r, a, sizeof(__m128i) * 8); break;
    case 4: interleave(r, a, k, 4); interleave(a, r, k, 8); break;
    default: interleave(r, a, k, 8); memcpy(r, a, sizeof(__m128i) * 2);
    }
    for (int c = 0; c < k; c++) _mm_storeu_si128((__m128i *)(dst + c * ds), r[REVERSED[log][c]]);
}

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
 * against the first `m` columns (a multiple of the block side), `tile` bytes of columns at a
 * time. The columns are first gathered into the contiguous stage `in`: input rows a power-of-
 * two stride apart share one set of the L1 cache, which cannot hold them all until their last
 * block is read. The blocks are transposed into the stage `out`, and each output row then gets
 * its run (whole cache lines) in one go: streamed stores need a line completed before the next
 * is begun, or they write it piecemeal. */
#define STRIP(SIZE)                                                                            \
    static void strip_##SIZE(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds,      \
                             Py_ssize_t rows, Py_ssize_t m, int stream, char *in, char *out) { \
        const Py_ssize_t tile = SIZE == 1 ? 2 * TILE_BYTES : TILE_BYTES;                      \
        const Py_ssize_t k = 16 / SIZE, width = tile / SIZE, run = rows * SIZE;              \
        for (Py_ssize_t j0 = 0; j0 < m; j0 += width) {                                       \
            Py_ssize_t cols = m - j0 < width ? m - j0 : width;                               \
            int ahead = j0 + (PREFETCH_TILES + 1) * width <= m;                               \
            for (Py_ssize_t i = 0; i < rows; i++) {                                          \
                const char *row = src + i * ss + j0 * SIZE;                                  \
                memcpy(in + i * tile, row, (size_t)(cols * SIZE));                           \
                for (Py_ssize_t b = 0; ahead && b < tile; b += 64) {                         \
                    __builtin_prefetch(row + PREFETCH_TILES * tile + b);                     \
                }                                                                            \
            }                                                                                \
            for (Py_ssize_t j = 0; j < cols; j += k) {                                       \
                for (Py_ssize_t i = 0; i < rows; i += k) {                                   \
                    micro(in + i * tile + j * SIZE, tile, out + j * run + i * SIZE, run, SIZE); \
                }                                                                            \
            }                                                                                \
            for (Py_ssize_t j = 0; j < cols; j++) {                                          \
                emit(dst + (j0 + j) * ds, out + j * run, run, stream);                       \
            }                                                                                \
        }                                                                                    \
    }

STRIP(1)
STRIP(2)
STRIP(4)
STRIP(8)

typedef void (*StripFn)(const char *, Py_ssize_t, char *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                        int, char *, char *);
#endif

/* dst[j, i] = src[i, j] for an (n, m) src, one strip of input rows at a time; each strip
 * writes whole cache lines to every output row. When the output is `large` (it cannot stay in
 * the cache anyway) they are streamed around the cache, which also spares reading each line
 * from memory before it is overwritten. Edges that do not fill a register block go element
 * by element. */
static int transpose(const char *src, Py_ssize_t ss, char *dst, Py_ssize_t ds, Py_ssize_t n,
                     Py_ssize_t m, Py_ssize_t size, int large) {
    TileFn tile = size == 1 ? tile_uint8_t : size == 2 ? tile_uint16_t
                : size == 4 ? tile_uint32_t : tile_uint64_t;
    Py_ssize_t done = 0, cols = 0;
#if defined(__SSE2__)
    Py_ssize_t k = 16 / size, stage = CACHED_STRIP_ROWS * 2 * TILE_BYTES;
    /* Streamed runs must fill whole cache lines: the rows must start at one offset within
     * a line, and a first strip reaches the next line boundary. */
    int stream = large && ((uintptr_t)dst % 16) == 0 && ds % 64 == 0;
    Py_ssize_t rows = stream ? STREAM_STRIP_BYTES / size : CACHED_STRIP_ROWS;
    StripFn strip = size == 1 ? strip_1 : size == 2 ? strip_2 : size == 4 ? strip_4 : strip_8;
    char *in = aligned_alloc(64, (size_t)(2 * stage)), *out = in + stage;
    if (in == NULL) return -1;
    cols = m / k * k;
    Py_ssize_t head = stream ? (Py_ssize_t)((64 - (uintptr_t)dst % 64) % 64) / size : 0;
    if (head > 0 && head <= n) {
        strip(src, ss, dst, ds, head, cols, 0, in, out);
        done = head;
    }
    while (done + k <= n) {
        Py_ssize_t height = n - done >= rows ? rows : (n - done) / k * k;
        strip(src + done * ss, ss, dst + done * size, ds, height, cols, stream && height == rows,
              in, out);
        done += height;
    }
    if (stream) _mm_sfence();
    free(in);
#endif
    tile(src + done * ss, ss, dst + done * size, ds, n - done, m);  /* bottom rows */
    tile(src + cols * size, ss, dst + cols * ds, ds, done, m - cols);  /* right columns */
    return 0;
}

PyDoc_STRVAR(transpose2d_doc,
             "transpose2d(src, dst, large): dst[j, i] = src[i, j] for 2-D buffers of one item\n"
             "size (1, 2, 4 or 8 bytes) whose rows may be strided; `large` streams the output\n"
             "around the cache.");

static PyObject *py_transpose2d(PyObject *self, PyObject *args) {
    PyObject *so, *do_;
    int large;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "OOp", &so, &do_, &large)) return NULL;
    if (get_buf(so, &b[0], 0, 2, 0, "src") < 0 ||
        get_buf(do_, &b[1], 1, 2, b[0].view.itemsize, "dst") < 0) {
        release(b, 2);
        return NULL;
    }
    Py_ssize_t n = b[0].view.shape[0], m = b[0].view.shape[1], size = b[0].view.itemsize;
    if (b[1].view.shape[0] != m || b[1].view.shape[1] != n ||
        (size != 1 && size != 2 && size != 4 && size != 8)) {
        release(b, 2);
        PyErr_SetString(PyExc_ValueError, "expected dst of src's transposed shape and an item "
                        "size of 1, 2, 4 or 8 bytes");
        return NULL;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = transpose(b[0].view.buf, b[0].view.strides[0], b[1].view.buf, b[1].view.strides[0],
                       n, m, size, large);
    Py_END_ALLOW_THREADS
    release(b, 2);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* Casts ---------------------------------------------------------------------------------- */

/* float32 to float16 bits, rounding half to even as numpy does, NaN payloads included:
 * numpy keeps the top ten payload bits and sets the lowest when they are all zero. */
static inline uint16_t half_bits(uint32_t b) {
    uint32_t sign = (b >> 16) & 0x8000u, mag = b & 0x7FFFFFFFu;
    /* Normal results: rebias the exponent and add the rounding increment in one add. */
    uint32_t normal = (mag + 0xC8000FFFu + ((mag >> 13) & 1u)) >> 13;
    /* Subnormal results are multiples of 2**-24: adding 0.5 rounds to one, half to even. */
    uint32_t sub = f32_bits(bits_f32(mag) + 0.5f) - 0x3F000000u;
    uint32_t payload = (mag >> 13) & 0x3FFu;
    uint32_t nan = 0x7C00u | payload | (uint32_t)(payload == 0);
    /* Selections by masks, not branches, so that the loop vectorizes. */
    uint32_t small = 0u - (uint32_t)(mag < 0x38800000u), big = 0u - (uint32_t)(mag >= 0x47800000u);
    uint32_t is_nan = 0u - (uint32_t)(mag > 0x7F800000u);
    uint32_t r = (sub & small) | (normal & ~small & ~big) | (0x7C00u & big);
    return (uint16_t)(sign | (nan & is_nan) | (r & ~is_nan));
}

/* float32 to bfloat16 bits, rounding half to even; every NaN becomes the quiet NaN, as in
 * ml_dtypes. */
static inline uint16_t bfloat_bits(uint32_t b) {
    uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    uint32_t nan = ((b >> 16) & 0x8000u) | 0x7FC0u;
    return (uint16_t)((b & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

static void f32_to_f16_portable(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = half_bits(x[i]);
}

#if LP_X86
/* The CPU's own conversion rounds like numpy but quiets signalling NaNs, so the few vectors
 * holding a NaN are redone by `half_bits`. */
__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(const uint32_t *x,
                                                                  uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps((const float *)(x + i));
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        if (!_mm256_testz_ps(nan, nan)) f32_to_f16_portable(x + i, out + i, 8);
    }
    f32_to_f16_portable(x + i, out + i, n - i);
}
#endif

static void f32_to_f16(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
#if LP_X86
    if (has_f16c()) {
        f32_to_f16_f16c(x, out, n);
        return;
    }
#endif
    f32_to_f16_portable(x, out, n);
}

LP_CLONES static void f32_to_bf16(const uint32_t *x, uint16_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = bfloat_bits(x[i]);
}

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

LP_CLONES static void f32_to_e4m3fn(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = small_float_bits(x[i], 3, 7, 1);
}

LP_CLONES static void f32_to_e5m2(const uint32_t *x, uint8_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = small_float_bits(x[i], 2, 15, 0);
}

#define LOOKUP(NAME, S, T)                                                                     \
    LP_CLONES static void NAME(const S *x, T *out, const T *table, Py_ssize_t n) {           \
        for (Py_ssize_t i = 0; i < n; i++) out[i] = table[x[i]];                             \
    }

LOOKUP(lookup_8_8, uint8_t, uint8_t)
LOOKUP(lookup_8_16, uint8_t, uint16_t)
LOOKUP(lookup_8_32, uint8_t, uint32_t)
LOOKUP(lookup_8_64, uint8_t, uint64_t)
LOOKUP(lookup_16_8, uint16_t, uint8_t)
LOOKUP(lookup_16_16, uint16_t, uint16_t)
LOOKUP(lookup_16_32, uint16_t, uint32_t)
LOOKUP(lookup_16_64, uint16_t, uint64_t)

/* The flat element count of two same-shaped C-contiguous buffers, or -1 with an error set. */
static Py_ssize_t flat_pair(PyObject *xo, PyObject *oo, Buf *b, Py_ssize_t in_size,
                            Py_ssize_t out_size) {
    if (get_buf(xo, &b[0], 0, 1, in_size, "x") < 0 ||
        get_buf(oo, &b[1], 1, 1, out_size, "out") < 0 || same_shape(&b[0], &b[1], "out") < 0) {
        return -1;
    }
    return b[0].view.shape[0];
}

PyDoc_STRVAR(cast_doc,
             "cast(kind, x, out): convert 1-D float32 bits `x` (uint32) into `out`; kind is\n"
             "'float16' or 'bfloat16' (uint16 out), 'float8_e4m3fn' or 'float8_e5m2' (uint8).");

static PyObject *py_cast(PyObject *self, PyObject *args) {
    const char *kind;
    PyObject *xo, *oo;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &kind, &xo, &oo)) return NULL;
    static const char *const kinds[] = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
    int which = -1;
    for (int i = 0; i < 4; i++) {
        if (strcmp(kind, kinds[i]) == 0) which = i;
    }
    if (which < 0) {
        PyErr_Format(PyExc_ValueError, "expected kind float16, bfloat16, float8_e4m3fn or "
                     "float8_e5m2, got '%s'", kind);
        return NULL;
    }
    Py_ssize_t n = flat_pair(xo, oo, b, 4, which < 2 ? 2 : 1);
    if (n < 0) {
        release(b, 2);
        return NULL;
    }
    const uint32_t *x = b[0].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    switch (which) {
    case 0: f32_to_f16(x, out, n); break;
    case 1: f32_to_bf16(x, out, n); break;
    case 2: f32_to_e4m3fn(x, out, n); break;
    default: f32_to_e5m2(x, out, n);
    }
    Py_END_ALLOW_THREADS
    release(b, 2);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(lookup_doc,
             "lookup(x, out, table): out[i] = table[x[i]] for 1-D `x` of 1- or 2-byte codes\n"
             "and a table of one entry per code, of out's item size (1, 2, 4 or 8 bytes).");

static PyObject *py_lookup(PyObject *self, PyObject *args) {
    PyObject *xo, *oo, *to;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "OOO", &xo, &oo, &to)) return NULL;
    Py_ssize_t n = flat_pair(xo, oo, b, 0, 0);
    if (n < 0 || get_buf(to, &b[2], 0, 1, b[1].view.itemsize, "table") < 0) {
        release(b, 3);
        return NULL;
    }
    Py_ssize_t s = b[0].view.itemsize, t = b[1].view.itemsize;
    if ((s != 1 && s != 2) || (t != 1 && t != 2 && t != 4 && t != 8) ||
        b[2].view.shape[0] != ((Py_ssize_t)1 << (8 * s))) {
        release(b, 3);
        PyErr_SetString(PyExc_ValueError, "expected 1- or 2-byte codes and a table of one "
                        "1-, 2-, 4- or 8-byte entry per code");
        return NULL;
    }
    const void *x = b[0].view.buf, *table = b[2].view.buf;
    void *out = b[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    if (s == 1) {
        if (t == 1) lookup_8_8(x, out, table, n);
        else if (t == 2) lookup_8_16(x, out, table, n);
        else if (t == 4) lookup_8_32(x, out, table, n);
        else lookup_8_64(x, out, table, n);
    } else {
        if (t == 1) lookup_16_8(x, out, table, n);
        else if (t == 2) lookup_16_16(x, out, table, n);
        else if (t == 4) lookup_16_32(x, out, table, n);
        else lookup_16_64(x, out, table, n);
    }
    Py_END_ALLOW_THREADS
    release(b, 3);
    Py_RETURN_NONE;
}

/* Quantization --------------------------------------------------------------------------- */

/* A float source: float32 itself, float16 or bfloat16 (converted by shifts or the CPU), or
 * 1-byte codes read through a float32 table of one entry per code. */
typedef enum { SRC_F32, SRC_F16, SRC_BF16, SRC_TABLE } SourceKind;

typedef struct {
    const char *base;
    SourceKind kind;
    const float *table;  /* one float32 per code, for 1- and 2-byte sources */
} Source;

#if LP_X86
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint16_t *x, float *out,
                                                                  Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) out[i] = _cvtsh_ss(x[i]);
}
#endif

LP_CLONES static void bf16_to_f32(const uint16_t *x, float *out, Py_ssize_t n) {
    uint32_t *bits = (uint32_t *)out;
    for (Py_ssize_t i = 0; i < n; i++) bits[i] = (uint32_t)x[i] << 16;
}

/* `count` elements of `src` from element `at`, as float32: a pointer into the source itself
 * when it is float32, else converted into `scratch`. A converted NaN may differ in payload
 * from numpy's, which does not matter: quantization declines any NaN. */
static const float *load(const Source *src, Py_ssize_t at, Py_ssize_t count, float *scratch) {
    const uint16_t *half = (const uint16_t *)src->base + at;
    switch (src->kind) {
    case SRC_F32:
        return (const float *)src->base + at;
    case SRC_BF16:
        bf16_to_f32(half, scratch, count);
        return scratch;
    case SRC_F16:
#if LP_X86
        if (has_f16c()) {
            f16_to_f32_f16c(half, scratch, count);
            return scratch;
        }
#endif
        for (Py_ssize_t i = 0; i < count; i++) scratch[i] = src->table[half[i]];
        return scratch;
    default: {
        const uint8_t *x = (const uint8_t *)src->base + at;
        for (Py_ssize_t i = 0; i < count; i++) scratch[i] = src->table[x[i]];
        return scratch;
    }
    }
}

/* max |x| over `n` values, and whether any is infinite or NaN (then the max is meaningless).
 * With the sign cleared, float32 bits order like the values they encode, so the max runs on
 * integers: the vectorizer will not reorder a float max (NaN and -0.0 make it unsafe). */
LP_CLONES static float abs_max(const float *x, Py_ssize_t n, int *nonfinite) {
    const uint32_t *bits = (const uint32_t *)x;
    uint32_t high = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t b = bits[i] & 0x7FFFFFFFu;
        high = b > high ? b : high;
    }
    *nonfinite |= high >= 0x7F800000u;
    return bits_f32(high);
}

static inline float scale_of(float amax, float qmax) {
    return amax == 0.0f ? 1.0f : amax / qmax;
}

/* q = rint(x / s) clipped to [qmin, qmax], rounding half to even. The clip comes first (it
 * commutes with rounding to integers), so the quotient is small and adding 1.5 * 2**23 rounds
 * it to an integer in the current (nearest-even) mode. A scale that underflowed to 0 makes
 * 0 / 0 a NaN, which becomes 0, as numpy's conversion gives. */
LP_CLONES static void round_run(const float *x, Py_ssize_t n, float s, float qmin, float qmax,
                                int8_t *q) {
    for (Py_ssize_t i = 0; i < n; i++) {
        float y = x[i] / s;
        y = y != y ? 0.0f : y;
        y = y < qmin ? qmin : y;
        y = y > qmax ? qmax : y;
        q[i] = (int8_t)(int32_t)((y + 12582912.0f) - 12582912.0f);
    }
}

LP_CLONES static void round_scaled(const float *x, Py_ssize_t n, const float *s, float qmin,
                                   float qmax, int8_t *q) {
    for (Py_ssize_t i = 0; i < n; i++) {
        float y = x[i] / s[i];
        y = y != y ? 0.0f : y;
        y = y < qmin ? qmin : y;
        y = y > qmax ? qmax : y;
        q[i] = (int8_t)(int32_t)((y + 12582912.0f) - 12582912.0f);
    }
}

LP_CLONES static void max_into(const float *x, Py_ssize_t n, uint32_t *high, int *nonfinite) {
    const uint32_t *bits = (const uint32_t *)x;
    uint32_t special = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t b = bits[i] & 0x7FFFFFFFu;
        special |= b >= 0x7F800000u;
        high[i] = b > high[i] ? b : high[i];
    }
    *nonfinite |= special != 0;
}

/* Elements converted at a time when a source needs converting. */
#define RUN 4096

/* Channel rows up to this many elements are converted whole, once, into the scratch buffer. */
#define ROW_BUFFER ((Py_ssize_t)1 << 16)

/* int8 per channel of an (outer, channels, inner) source. With outer == 1 each channel is one
 * contiguous run, quantized right after its max while it is in cache; otherwise a first pass
 * takes every channel's max and a second quantizes. Returns 1 on a non-finite input. */
static int quantize_int8(const Source *src, Py_ssize_t outer, Py_ssize_t channels,
                         Py_ssize_t inner, int8_t *q, float *scale, float *scratch,
                         uint32_t *amax) {
    int nonfinite = 0;
    if (outer == 1) {
        for (Py_ssize_t c = 0; c < channels && !nonfinite; c++) {
            if (inner <= ROW_BUFFER) {  /* the row is converted once and stays in cache */
                const float *x = load(src, c * inner, inner, scratch);
                scale[c] = scale_of(abs_max(x, inner, &nonfinite), 127.0f);
                if (!nonfinite) round_run(x, inner, scale[c], -127.0f, 127.0f, q + c * inner);
                continue;
            }
            float high = 0.0f;
            for (Py_ssize_t at = 0; at < inner; at += RUN) {
                Py_ssize_t k = inner - at < RUN ? inner - at : RUN;
                float h = abs_max(load(src, c * inner + at, k, scratch), k, &nonfinite);
                high = h > high ? h : high;
            }
            scale[c] = scale_of(high, 127.0f);
            for (Py_ssize_t at = 0; at < inner && !nonfinite; at += RUN) {
                Py_ssize_t k = inner - at < RUN ? inner - at : RUN;
                const float *x = load(src, c * inner + at, k, scratch);
                round_run(x, k, scale[c], -127.0f, 127.0f, q + c * inner + at);
            }
        }
        return nonfinite;
    }
    if (inner == 1) {  /* channels are the last axis: whole rows update every channel's max */
        for (Py_ssize_t c = 0; c < channels; c++) amax[c] = 0;
        for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
            for (Py_ssize_t at = 0; at < channels; at += RUN) {
                Py_ssize_t k = channels - at < RUN ? channels - at : RUN;
                max_into(load(src, o * channels + at, k, scratch), k, amax + at, &nonfinite);
            }
        }
        for (Py_ssize_t c = 0; c < channels; c++) scale[c] = scale_of(bits_f32(amax[c]), 127.0f);
        for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
            for (Py_ssize_t at = 0; at < channels; at += RUN) {
                Py_ssize_t k = channels - at < RUN ? channels - at : RUN;
                const float *x = load(src, o * channels + at, k, scratch);
                round_scaled(x, k, scale + at, -127.0f, 127.0f, q + o * channels + at);
            }
        }
        return nonfinite;
    }
    for (Py_ssize_t c = 0; c < channels; c++) amax[c] = 0;
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t c = 0; c < channels; c++) {
            for (Py_ssize_t at = 0; at < inner; at += RUN) {
                Py_ssize_t k = inner - at < RUN ? inner - at : RUN;
                Py_ssize_t base = (o * channels + c) * inner + at;
                uint32_t h = f32_bits(abs_max(load(src, base, k, scratch), k, &nonfinite));
                amax[c] = h > amax[c] ? h : amax[c];
            }
        }
    }
    for (Py_ssize_t c = 0; c < channels; c++) scale[c] = scale_of(bits_f32(amax[c]), 127.0f);
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t c = 0; c < channels; c++) {
            for (Py_ssize_t at = 0; at < inner; at += RUN) {
                Py_ssize_t k = inner - at < RUN ? inner - at : RUN;
                Py_ssize_t base = (o * channels + c) * inner + at;
                round_run(load(src, base, k, scratch), k, scale[c], -127.0f, 127.0f, q + base);
            }
        }
    }
    return nonfinite;
}

/* Codes in [-8, 7] two to a byte, element 2j in the low nibble: read as a little-endian
 * 16-bit word, a pair holds both codes, and one mask and shift join their low nibbles. */
LP_CLONES static void pack_nibbles(const int8_t *codes, uint8_t *out, Py_ssize_t pairs) {
    for (Py_ssize_t j = 0; j < pairs; j++) {
        uint16_t w = (uint16_t)((uint8_t)codes[2 * j] | ((uint16_t)(uint8_t)codes[2 * j + 1] << 8));
        out[j] = (uint8_t)((w & 0x000Fu) | ((w >> 4) & 0x00F0u));
    }
}

/* int4 by groups of `group` along each row of an (n, k) source, packed two codes a byte
 * (element 2j in the low nibble). Returns 1 on a non-finite input. */
static int quantize_int4(const Source *src, Py_ssize_t n, Py_ssize_t k, Py_ssize_t group,
                         uint8_t *packed, float *scale, float *scratch, int8_t *codes) {
    int nonfinite = 0;
    Py_ssize_t groups = k / group;
    for (Py_ssize_t r = 0; r < n && !nonfinite; r++) {
        const float *row = load(src, r * k, k, scratch);
        for (Py_ssize_t g = 0; g < groups; g++) {
            float s = scale_of(abs_max(row + g * group, group, &nonfinite), 7.0f);
            scale[r * groups + g] = s;
            round_run(row + g * group, group, s, -8.0f, 7.0f, codes + g * group);
        }
        pack_nibbles(codes, packed + r * (k / 2), k / 2);
    }
    return nonfinite;
}

/* Reads the source argument: a C-contiguous buffer, its format ("float32", "float16",
 * "bfloat16", or "table" for 1-byte codes) and, for all but float32, a float32 table of one
 * entry per code. */
static int get_source(PyObject *xo, const char *format, PyObject *to, Buf *b, Source *src) {
    if (PyObject_GetBuffer(xo, &b[0].view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    b[0].held = 1;
    Py_ssize_t size = b[0].view.itemsize;
    src->base = b[0].view.buf;
    src->table = NULL;
    src->kind = strcmp(format, "float32") == 0 ? SRC_F32 : strcmp(format, "float16") == 0
              ? SRC_F16 : strcmp(format, "bfloat16") == 0 ? SRC_BF16 : SRC_TABLE;
    if (size != (src->kind == SRC_F32 ? 4 : src->kind == SRC_TABLE ? 1 : 2) ||
        (src->kind == SRC_TABLE && strcmp(format, "table") != 0)) {
        PyErr_Format(PyExc_ValueError, "expected x in format float32, float16, bfloat16 or "
                     "table (of its item size), got %s with %zd-byte items", format, size);
        return -1;
    }
    if (src->kind == SRC_F32) return 0;
    if (get_buf(to, &b[1], 0, 1, 4, "table") < 0) return -1;
    if (b[1].view.shape[0] != ((Py_ssize_t)1 << (8 * size))) {
        PyErr_SetString(PyExc_ValueError, "expected a table of one float32 per code");
        return -1;
    }
    src->table = b[1].view.buf;
    return 0;
}

static int check_len(const Buf *b, Py_ssize_t want, const char *what) {
    if (b->view.len != want) {
        PyErr_Format(PyExc_ValueError, "expected %s of %zd bytes, got %zd", what, want,
                     b->view.len);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(quantize_int8_doc,
             "quantize_int8(x, format, table, outer, channels, inner, q, scale) -> bool: int8\n"
             "codes of the C-contiguous (outer, channels, inner) `x` per channel into `q` and\n"
             "`scale`; False, with the outputs unspecified, when x holds an infinity or NaN.\n"
             "`format` is float32, float16, bfloat16 or table (1-byte codes read through\n"
             "`table`, one float32 per code; float16 and bfloat16 pass theirs too).");

static PyObject *py_quantize_int8(PyObject *self, PyObject *args) {
    PyObject *xo, *to, *qo, *so;
    const char *format;
    Py_ssize_t outer, channels, inner;
    Buf b[4];
    memset(b, 0, sizeof b);
    Source src;
    if (!PyArg_ParseTuple(args, "OsOnnnOO", &xo, &format, &to, &outer, &channels, &inner, &qo,
                          &so)) {
        return NULL;
    }
    Py_ssize_t total = outer * channels * inner;
    if (outer < 1 || channels < 1 || inner < 1 || get_source(xo, format, to, b, &src) < 0 ||
        check_len(&b[0], total * b[0].view.itemsize, "x") < 0 ||
        PyObject_GetBuffer(qo, &b[2].view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0 ||
        (b[2].held = 1, check_len(&b[2], total, "q")) < 0 ||
        PyObject_GetBuffer(so, &b[3].view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0 ||
        (b[3].held = 1, check_len(&b[3], channels * 4, "scale")) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expected positive sizes");
        release(b, 4);
        return NULL;
    }
    Py_ssize_t row = outer == 1 && inner <= ROW_BUFFER && inner > RUN ? inner : RUN;
    float *scratch = malloc(sizeof(float) * (size_t)(row + channels));
    if (scratch == NULL) {
        release(b, 4);
        return PyErr_NoMemory();
    }
    int nonfinite;
    Py_BEGIN_ALLOW_THREADS
    nonfinite = quantize_int8(&src, outer, channels, inner, b[2].view.buf, b[3].view.buf,
                              scratch, (uint32_t *)(scratch + row));
    Py_END_ALLOW_THREADS
    free(scratch);
    release(b, 4);
    return PyBool_FromLong(!nonfinite);
}

PyDoc_STRVAR(quantize_int4_doc,
             "quantize_int4(x, format, table, group, packed, scale) -> bool: int4 codes of the\n"
             "2-D C-contiguous `x` (N, K) by groups along rows, packed two a byte into `packed`\n"
             "(N, K // 2) with scales (N, K // group); False when x holds an infinity or NaN.\n"
             "`format` and `table` as for quantize_int8.");

static PyObject *py_quantize_int4(PyObject *self, PyObject *args) {
    PyObject *xo, *to, *po, *so;
    const char *format;
    Py_ssize_t group;
    Buf b[4];
    memset(b, 0, sizeof b);
    Source src;
    if (!PyArg_ParseTuple(args, "OsOnOO", &xo, &format, &to, &group, &po, &so)) return NULL;
    if (get_source(xo, format, to, b, &src) < 0) {
        release(b, 4);
        return NULL;
    }
    Py_ssize_t n = b[0].view.ndim == 2 ? b[0].view.shape[0] : -1;
    Py_ssize_t k = b[0].view.ndim == 2 ? b[0].view.shape[1] : 0;
    if (n < 1 || group < 1 || k < 2 || k % 2 || k % group ||
        PyObject_GetBuffer(po, &b[2].view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0 ||
        (b[2].held = 1, check_len(&b[2], n * (k / 2), "packed")) < 0 ||
        PyObject_GetBuffer(so, &b[3].view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0 ||
        (b[3].held = 1, check_len(&b[3], n * (k / group) * 4, "scale")) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "expected a non-empty 2-D x with K even and a "
                            "multiple of group");
        }
        release(b, 4);
        return NULL;
    }
    float *scratch = malloc(sizeof(float) * (size_t)k + (size_t)k);
    if (scratch == NULL) {
        release(b, 4);
        return PyErr_NoMemory();
    }
    int nonfinite;
    Py_BEGIN_ALLOW_THREADS
    nonfinite = quantize_int4(&src, n, k, group, b[2].view.buf, b[3].view.buf, scratch,
                              (int8_t *)(scratch + k));
    Py_END_ALLOW_THREADS
    free(scratch);
    release(b, 4);
    return PyBool_FromLong(!nonfinite);
}

/* Module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"transpose2d", py_transpose2d, METH_VARARGS, transpose2d_doc},
    {"cast", py_cast, METH_VARARGS, cast_doc},
    {"lookup", py_lookup, METH_VARARGS, lookup_doc},
    {"quantize_int8", py_quantize_int8, METH_VARARGS, quantize_int8_doc},
    {"quantize_int4", py_quantize_int4, METH_VARARGS, quantize_int4_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Compiled loops behind lazyparams' layout, cast and quantization kernels.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
