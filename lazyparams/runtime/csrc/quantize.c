/* Quantization: symmetric int8 per channel and int4 by groups along rows (the formats of
 * `runtime/quant.py`), from float32, float16, bfloat16 or table-read 1-byte codes. An infinity
 * or NaN is reported instead of quantized, and the caller takes the numpy path. */
#include "native.h"

/* A float source: float32 itself, float16 or bfloat16 (converted by shifts or the CPU), or
 * 1-byte codes read through a float32 table of one entry per code. */
typedef enum { SRC_F32, SRC_F16, SRC_BF16, SRC_TABLE } SourceKind;

typedef struct {
    const char *base;
    SourceKind kind;
    const float *table;  /* one float32 per code: 1-byte codes, and float16 without F16C */
} Source;

#if LP_X86
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint16_t *x, float *out,
                                                                  Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) out[i] = _cvtsh_ss(LP_LOAD(uint16_t, x + i));
}
#endif

LP_CLONES static void bf16_to_f32(const uint16_t *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = bits_f32((uint32_t)LP_LOAD(uint16_t, x + i) << 16);
}

/* The float32 of a code through the source's table (at any address, as the source). */
static inline float code_value(const Source *src, uint32_t code) {
    return LP_LOAD(float, src->table + code);
}

/* `count` elements of `src` from element `at`, as float32: a pointer into the source itself
 * when it is float32 (at any address: the loops below read it by LP_LOAD), else converted
 * into `scratch`. A converted NaN may differ in payload from numpy's, which does not matter:
 * quantization declines any NaN. */
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
        if (lp_has_f16c) {
            f16_to_f32_f16c(half, scratch, count);
            return scratch;
        }
#endif
        for (Py_ssize_t i = 0; i < count; i++) {
            scratch[i] = code_value(src, LP_LOAD(uint16_t, half + i));
        }
        return scratch;
    default: {
        const uint8_t *x = (const uint8_t *)src->base + at;
        for (Py_ssize_t i = 0; i < count; i++) scratch[i] = code_value(src, x[i]);
        return scratch;
    }
    }
}

/* max |x| over `n` values, as the bits of a non-negative float32: at least 0x7F800000 when one
 * is infinite or NaN (then the max is meaningless). With the sign cleared, float32 bits order
 * like the values they encode, so the max runs on integers: the vectorizer will not reorder a
 * float max (NaN and -0.0 make it unsafe). Inline, so that each caller's CPU build has it. */
static inline uint32_t abs_max_bits(const float *x, Py_ssize_t n) {
    uint32_t high = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t b = f32_bits(LP_LOAD(float, x + i)) & 0x7FFFFFFFu;
        high = b > high ? b : high;
    }
    return high;
}

/* One quotient rounded to an int8 code: rint(y) clipped to [qmin, qmax], half to even. The
 * clip comes first (it commutes with rounding to integers), so the value is small and adding
 * 1.5 * 2**23 rounds it to an integer in the current (nearest-even) mode. A scale that
 * underflowed to 0 makes 0 / 0 a NaN, which becomes 0, as numpy's conversion gives. */
static inline int8_t code_of(float y, float qmin, float qmax) {
    y = y != y ? 0.0f : y;
    y = y < qmin ? qmin : y;
    y = y > qmax ? qmax : y;
    return (int8_t)(int32_t)((y + 12582912.0f) - 12582912.0f);
}

/* q = rint(x / s), clipped to [qmin, qmax]. With a normal scale s = fl(max|x| / qmax), |x / s|
 * is at most qmax (1 + 2**-22) and rounds to qmax at most, so the clip (and the NaN guard)
 * can go, as in the numpy path: the common case is one division and one rounding. */
static inline void round_into(const float *x, Py_ssize_t n, float s, float qmin, float qmax,
                              int8_t *q) {
    if (s >= FLT_MIN && s <= FLT_MAX) {
        for (Py_ssize_t i = 0; i < n; i++) {
            q[i] = (int8_t)(int32_t)((LP_LOAD(float, x + i) / s + 12582912.0f) - 12582912.0f);
        }
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) q[i] = code_of(LP_LOAD(float, x + i) / s, qmin, qmax);
}

LP_CLONES static float abs_max(const float *x, Py_ssize_t n, int *nonfinite) {
    uint32_t high = abs_max_bits(x, n);
    *nonfinite |= high >= 0x7F800000u;
    return bits_f32(high);
}

static inline float scale_of(float amax, float qmax) {
    return amax == 0.0f ? 1.0f : amax / qmax;
}

/* q = rint(x / s), clipped to [qmin, qmax]. */
LP_CLONES static void round_run(const float *x, Py_ssize_t n, float s, float qmin, float qmax,
                                int8_t *q) {
    round_into(x, n, s, qmin, qmax, q);
}

LP_CLONES static void round_scaled(const float *x, Py_ssize_t n, const float *s, float qmin,
                                   float qmax, int8_t *q) {
    for (Py_ssize_t i = 0; i < n; i++) {
        q[i] = code_of(LP_LOAD(float, x + i) / LP_LOAD(float, s + i), qmin, qmax);
    }
}

LP_CLONES static void max_into(const float *x, Py_ssize_t n, uint32_t *high, int *nonfinite) {
    uint32_t special = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t b = f32_bits(LP_LOAD(float, x + i)) & 0x7FFFFFFFu;
        special |= b >= 0x7F800000u;
        high[i] = b > high[i] ? b : high[i];
    }
    *nonfinite |= special != 0;
}

/* Elements converted at a time when a source needs converting. */
#define RUN 4096

/* Channel rows up to this many elements are converted whole, once, into the scratch buffer. */
#define ROW_BUFFER ((Py_ssize_t)1 << 16)

/* The run of `count` elements from `at` quantized with scale `s` into q: int8 codes. */
static void int8_run(const Source *src, Py_ssize_t at, Py_ssize_t count, float s, int8_t *q,
                     float *scratch) {
    for (Py_ssize_t done = 0; done < count; done += RUN) {
        Py_ssize_t k = count - done < RUN ? count - done : RUN;
        round_run(load(src, at + done, k, scratch), k, s, -127.0f, 127.0f, q + at + done);
    }
}

/* max |x| of the run of `count` elements from `at`, bits of a non-negative float32. */
static uint32_t run_max(const Source *src, Py_ssize_t at, Py_ssize_t count, float *scratch,
                        int *nonfinite) {
    uint32_t high = 0;
    for (Py_ssize_t done = 0; done < count; done += RUN) {
        Py_ssize_t k = count - done < RUN ? count - done : RUN;
        uint32_t h = f32_bits(abs_max(load(src, at + done, k, scratch), k, nonfinite));
        high = h > high ? h : high;
    }
    return high;
}

/* Channels that are contiguous rows: each quantized right after its max, while it is in cache
 * (a row up to ROW_BUFFER elements is converted once). */
static int int8_rows(const Source *src, Py_ssize_t channels, Py_ssize_t inner, int8_t *q,
                     float *scale, float *scratch) {
    int nonfinite = 0;
    for (Py_ssize_t c = 0; c < channels && !nonfinite; c++) {
        if (inner <= ROW_BUFFER) {
            const float *x = load(src, c * inner, inner, scratch);
            float s = scale_of(abs_max(x, inner, &nonfinite), 127.0f);
            LP_STORE(float, scale + c, s);
            if (!nonfinite) round_run(x, inner, s, -127.0f, 127.0f, q + c * inner);
            continue;
        }
        float s = scale_of(bits_f32(run_max(src, c * inner, inner, scratch, &nonfinite)), 127.0f);
        LP_STORE(float, scale + c, s);
        if (!nonfinite) int8_run(src, c * inner, inner, s, q, scratch);
    }
    return nonfinite;
}

/* Channels along the last axis of (outer, channels) rows: a pass over whole rows takes every
 * channel's max, a second quantizes them. */
static int int8_columns(const Source *src, Py_ssize_t outer, Py_ssize_t channels, int8_t *q,
                        float *scale, float *scratch, uint32_t *amax) {
    int nonfinite = 0;
    memset(amax, 0, sizeof(uint32_t) * (size_t)channels);
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t at = 0; at < channels; at += RUN) {
            Py_ssize_t k = channels - at < RUN ? channels - at : RUN;
            max_into(load(src, o * channels + at, k, scratch), k, amax + at, &nonfinite);
        }
    }
    for (Py_ssize_t c = 0; c < channels; c++) {
        LP_STORE(float, scale + c, scale_of(bits_f32(amax[c]), 127.0f));
    }
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t at = 0; at < channels; at += RUN) {
            Py_ssize_t k = channels - at < RUN ? channels - at : RUN;
            const float *x = load(src, o * channels + at, k, scratch);
            round_scaled(x, k, scale + at, -127.0f, 127.0f, q + o * channels + at);
        }
    }
    return nonfinite;
}

/* Any other (outer, channels, inner) layout: a first pass takes every channel's max over its
 * runs of `inner`, a second quantizes them. */
static int int8_blocks(const Source *src, Py_ssize_t outer, Py_ssize_t channels,
                       Py_ssize_t inner, int8_t *q, float *scale, float *scratch,
                       uint32_t *amax) {
    int nonfinite = 0;
    memset(amax, 0, sizeof(uint32_t) * (size_t)channels);
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t c = 0; c < channels; c++) {
            uint32_t h = run_max(src, (o * channels + c) * inner, inner, scratch, &nonfinite);
            amax[c] = h > amax[c] ? h : amax[c];
        }
    }
    for (Py_ssize_t c = 0; c < channels; c++) {
        LP_STORE(float, scale + c, scale_of(bits_f32(amax[c]), 127.0f));
    }
    for (Py_ssize_t o = 0; o < outer && !nonfinite; o++) {
        for (Py_ssize_t c = 0; c < channels; c++) {
            float s = LP_LOAD(float, scale + c);
            int8_run(src, (o * channels + c) * inner, inner, s, q, scratch);
        }
    }
    return nonfinite;
}

/* int8 per channel of an (outer, channels, inner) source, by the loop that reads it best.
 * Returns 1 on a non-finite input. */
static int quantize_int8(const Source *src, const Py_ssize_t *size, void *q, float *scale,
                         void *scratch, void *amax) {
    Py_ssize_t outer = size[0], channels = size[1], inner = size[2];
    if (outer == 1) return int8_rows(src, channels, inner, q, scale, scratch);
    if (inner == 1) return int8_columns(src, outer, channels, q, scale, scratch, amax);
    return int8_blocks(src, outer, channels, inner, q, scale, scratch, amax);
}

/* Codes in [-8, 7] two to a byte, element 2j in the low nibble: read as a little-endian
 * 16-bit word, a pair holds both codes, and one mask and shift join their low nibbles. */
LP_CLONES static void pack_nibbles(const int8_t *codes, uint8_t *out, Py_ssize_t pairs) {
    for (Py_ssize_t j = 0; j < pairs; j++) {
        uint16_t w = (uint16_t)((uint8_t)codes[2 * j] | ((uint16_t)(uint8_t)codes[2 * j + 1] << 8));
        out[j] = (uint8_t)((w & 0x000Fu) | ((w >> 4) & 0x00F0u));
    }
}

/* One row of int4: each group of `group` gets its scale and codes, then the codes are packed.
 * Returns whether the row held an infinity or NaN. */
static int int4_row(const float *row, Py_ssize_t k, Py_ssize_t group, float *scale,
                    int8_t *codes, uint8_t *out) {
    int nonfinite = 0;
    for (Py_ssize_t g = 0; g < k / group; g++) {
        float s = scale_of(abs_max(row + g * group, group, &nonfinite), 7.0f);
        LP_STORE(float, scale + g, s);
        round_run(row + g * group, group, s, -8.0f, 7.0f, codes + g * group);
    }
    pack_nibbles(codes, out, k / 2);
    return nonfinite;
}

/* int4 by groups of `group` along each row of an (n, k) source, packed two codes a byte.
 * Returns 1 on a non-finite input. */
static int quantize_int4(const Source *src, const Py_ssize_t *size, void *packed, float *scale,
                         void *scratch, void *codes) {
    Py_ssize_t n = size[0], k = size[1], group = size[2], groups = k / group;
    int nonfinite = 0;
    for (Py_ssize_t r = 0; r < n && !nonfinite; r++) {
        const float *row = load(src, r * k, k, scratch);
        nonfinite = int4_row(row, k, group, scale + r * groups, codes,
                             (uint8_t *)packed + r * (k / 2));
    }
    return nonfinite;
}

/* Reads the source argument: a C-contiguous buffer of `count` elements, its format
 * ("float32", "float16", "bfloat16", or "table" for 1-byte codes) and a float32 table of one
 * entry per code (None for float32 and bfloat16, which need none). */
static int get_source(PyObject *xo, const char *format, PyObject *to, Py_ssize_t count, Buf *b,
                      Source *src) {
    SourceKind kind = strcmp(format, "float32") == 0    ? SRC_F32
                      : strcmp(format, "float16") == 0  ? SRC_F16
                      : strcmp(format, "bfloat16") == 0 ? SRC_BF16
                      : strcmp(format, "table") == 0    ? SRC_TABLE
                                                        : -1;
    Py_ssize_t size = kind == SRC_F32 ? 4 : kind == SRC_TABLE ? 1 : 2;
    if ((int)kind < 0 || count > PY_SSIZE_T_MAX / 4) {
        PyErr_Format(PyExc_ValueError, "expected format float32, float16, bfloat16 or table "
                     "and a size that fits, got %s", format);
        return -1;
    }
    if (lp_get_contiguous(xo, &b[0], 0, count * size, size, "x") < 0) return -1;
    src->base = b[0].view.buf;
    src->kind = kind;
    src->table = NULL;
    if (kind == SRC_F32 || kind == SRC_BF16) return 0;
    if (lp_get_buf(to, &b[1], 0, 1, 4, "table") < 0) return -1;
    if (b[1].view.shape[0] != ((Py_ssize_t)1 << (8 * size))) {
        PyErr_SetString(PyExc_ValueError, "expected a table of one float32 per code");
        return -1;
    }
    src->table = b[1].view.buf;
    return 0;
}

/* a * b * c, or -1 when one is below 1 or the product does not fit. */
static Py_ssize_t checked_product(Py_ssize_t a, Py_ssize_t b, Py_ssize_t c) {
    if (a < 1 || b < 1 || c < 1 || a > PY_SSIZE_T_MAX / b || a * b > PY_SSIZE_T_MAX / c) {
        return -1;
    }
    return a * b * c;
}

/* The work of a call on its buffers (sizes as the call gives them): 1 on a non-finite input. */
typedef int (*Work)(const Source *src, const Py_ssize_t *size, void *codes, float *scale,
                    void *scratch, void *extra);

const char lp_quantize_int8_doc[] = PyDoc_STR(
    "quantize_int8(x, format, table, outer, channels, inner, q, scale) -> bool: int8 codes of\n"
    "the C-contiguous (outer, channels, inner) `x` per channel into `q` and `scale`; False,\n"
    "with the outputs unspecified, when x holds an infinity or NaN. `format` is float32,\n"
    "float16, bfloat16 or table (1-byte codes read through `table`, one float32 per code;\n"
    "float16 passes its table too, for CPUs without F16C).");

const char lp_quantize_int4_doc[] = PyDoc_STR(
    "quantize_int4(x, format, table, n, k, group, packed, scale) -> bool: int4 codes of the\n"
    "C-contiguous (n, k) `x` by groups along rows, packed two a byte into `packed` (n, k // 2)\n"
    "with scales (n, k // group); False when x holds an infinity or NaN. `format` and\n"
    "`table` as for quantize_int8.");

/* quantize_int8, or quantize_int4 (`int4`): (x, format, table, three sizes, codes, scale). The
 * sizes checked, the buffers taken, the work runs without the GIL on two work buffers. */
static PyObject *quantize_call(PyObject *args, const int int4) {
    PyObject *xo, *to, *qo, *so;
    const char *format;
    Py_ssize_t size[3];
    if (!PyArg_ParseTuple(args, "OsOnnnOO", &xo, &format, &to, &size[0], &size[1], &size[2], &qo,
                          &so)) {
        return NULL;
    }
    /* int8: (outer, channels, inner); int4: (n, k, group) */
    Py_ssize_t total = checked_product(size[0], size[1], int4 ? 1 : size[2]);
    if (int4 && (total < 0 || size[2] < 1 || size[1] % 2 || size[1] % size[2])) {
        PyErr_SetString(PyExc_ValueError, "expected a non-empty x with k even and a multiple "
                        "of group");
        return NULL;
    }
    if (total < 0) {
        PyErr_SetString(PyExc_ValueError, "expected positive sizes whose product fits");
        return NULL;
    }
    Py_ssize_t codes = int4 ? total / 2 : total, scales = int4 ? size[0] * (size[1] / size[2])
                                                               : size[1];
    /* int8: a row of float32 and the channels' maxima; int4: a row of float32 and its codes */
    Py_ssize_t row = int4 ? size[1]
                   : size[0] == 1 && size[2] <= ROW_BUFFER && size[2] > RUN ? size[2] : RUN;
    size_t scratch = sizeof(float) * (size_t)row;
    size_t extra = int4 ? (size_t)size[1] : sizeof(uint32_t) * (size_t)size[1];
    Work work = int4 ? quantize_int4 : quantize_int8;
    Buf b[4];
    memset(b, 0, sizeof b);
    Source src;
    if (get_source(xo, format, to, total, b, &src) < 0 ||
        lp_get_contiguous(qo, &b[2], 1, codes, 1, int4 ? "packed" : "q") < 0 ||
        lp_get_contiguous(so, &b[3], 1, scales * 4, 4, "scale") < 0) {
        lp_release(b, 4);
        return NULL;
    }
    void *first = malloc(scratch), *second = malloc(extra);
    int nonfinite = 0;
    if (first != NULL && second != NULL) {
        Py_BEGIN_ALLOW_THREADS
        nonfinite = work(&src, size, b[2].view.buf, b[3].view.buf, first, second);
        Py_END_ALLOW_THREADS
    }
    int failed = first == NULL || second == NULL;
    free(first);
    free(second);
    lp_release(b, 4);
    return failed ? PyErr_NoMemory() : PyBool_FromLong(!nonfinite);
}

PyObject *lp_quantize_int8(PyObject *self, PyObject *args) { return quantize_call(args, 0); }

PyObject *lp_quantize_int4(PyObject *self, PyObject *args) { return quantize_call(args, 1); }
