/* ggml's K-quants (q2_K to q6_K, no importance matrix) from float32, and back: the Python
 * functions behind `runtime/gguf_kquants.py`, and each type's super-block built from the
 * searches of gguf_ksearch.c as ggml's reference quantizers build it, byte for byte. An
 * infinity or NaN in the input is reported instead of quantized. */
#include "gguf_kquants.h"

/* G sub-blocks of `n` values from `x` (`valid` values there; zeros past them) as columns. */
static void gather(const float *x, Py_ssize_t valid, int n, Cols c) {
    for (int g = 0; g < G; g++)
        for (int i = 0; i < n; i++) {
            Py_ssize_t at = (Py_ssize_t)g * n + i;
            c[i][g] = at < valid ? LP_LOAD(float, x + at) : 0.f;
        }
}

/* Blocks --------------------------------------------------------------------------------- */

/* The search's codes of sub-block `g` (of `n` values) into L. */
static void take_codes(const Cols c, int n, int g, uint8_t *L) {
    for (int i = 0; i < n; i++) L[i] = (uint8_t)c[i][g];
}

/* ggml's last pass over one sub-block: round((x + dm) / d) clamped to [lo, hi], plus `bias`. */
static void requantize(const float *x, int n, float d, float dm, int lo, int hi, int bias,
                       uint8_t *L) {
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)(clampi(round_int((LP_LOAD(float, x + i) + dm) / d), lo, hi) + bias);
    }
}

/* 2-bit codes: byte l of each 128 values holds codes l, l+32, l+64, l+96. */
static void pack2(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((L[j + l] & 3) | ((L[j + l + 32] & 3) << 2) |
                                      ((L[j + l + 64] & 3) << 4) | ((L[j + l + 96] & 3) << 6));
}

static float positive_max(const float *v, int n, int stride) {
    float m = 0.f;
    for (int j = 0; j < n; j++) m = v[j * stride] > m ? v[j * stride] : m;
    return m;
}

static void finish_q2(const float *x, const Cols c, const float *scale, const float *mins,
                      uint8_t *y) {
    uint8_t L[QK], *sc = y;
    float max_scale = positive_max(scale, 16, 1), max_min = positive_max(mins, 16, 1);
    for (int j = 0; j < 16; j++)
        sc[j] = max_scale > 0 ? (uint8_t)round_int(15.f / max_scale * scale[j]) : 0;
    if (max_min > 0)
        for (int j = 0; j < 16; j++)
            sc[j] |= (uint8_t)((uint32_t)round_int(15.f / max_min * mins[j]) << 4);
    put_half(y + 80, max_scale > 0 ? max_scale / 15.f : 0.f);
    put_half(y + 82, max_min > 0 ? max_min / 15.f : 0.f);
    float dd = half_value(y + 80), dmin = half_value(y + 82);
    for (int j = 0; j < 16; j++) {
        float d = dd * (float)(sc[j] & 0xF);
        take_codes(c, 16, j, L + 16 * j);
        if (d != 0) requantize(x + 16 * j, 16, d, dmin * (float)(sc[j] >> 4), 0, 3, 0, L + 16 * j);
    }
    pack2(L, y + 16);
}

static void finish_q3(const float *x, const Cols c, const float *scale, uint8_t *y) {
    uint8_t L[QK], *sc = y + 96;
    float amax = 0.f, max_scale = 0.f;
    int lv[16];
    for (int j = 0; j < 16; j++)
        if (fabsf(scale[j]) > amax) amax = fabsf(scale[j]), max_scale = scale[j];
    float is = -32.f / max_scale;
    memset(sc, 0, 12);
    for (int j = 0; j < 16; j++) {
        lv[j] = max_scale != 0 ? clampi((int8_t)round_int(is * scale[j]), -32, 31) + 32 : 0;
        sc[j % 8] |= (uint8_t)((lv[j] & 0xF) << (j < 8 ? 0 : 4));
        sc[8 + j % 4] |= (uint8_t)((lv[j] >> 4) << (2 * (j / 4)));
    }
    put_half(y + 108, max_scale != 0 ? 1.f / is : 0.f);
    float dd = half_value(y + 108);
    for (int j = 0; j < 16; j++) {
        float d = dd * (float)(lv[j] - 32);
        take_codes(c, 16, j, L + 16 * j);
        if (d != 0) requantize(x + 16 * j, 16, d, 0.f, -4, 3, 4, L + 16 * j);
    }
    memset(y, 0, 32);
    for (int j = 0; j < QK; j++) y[j % 32] |= (uint8_t)((L[j] >> 2) << (j / 32));
    pack2(L, y + 32);
}

/* The shared head of q4_K and q5_K (d, dmin, 12 bytes of 6-bit scales and mins) for the 8
 * sub-blocks in lanes `g0`.. of the search, and the final codes in L. */
static void finish_q45(const float *x, const Cols c, const float *scale, const float *mins,
                       int nmax, uint8_t *y, uint8_t *L) {
    uint8_t ls[8], lm[8], *sc = y + 4;
    float max_scale = positive_max(scale, 8, 1), max_min = positive_max(mins, 8, 1);
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)round_int(inv_scale * scale[j]);
        lm[j] = (uint8_t)round_int(inv_min * mins[j]);
        ls[j] = ls[j] < 63 ? ls[j] : 63;
        lm[j] = lm[j] < 63 ? lm[j] : 63;
    }
    for (int j = 0; j < 4; j++) {
        sc[j] = (uint8_t)(ls[j] | ((ls[j + 4] >> 4) << 6));
        sc[j + 4] = (uint8_t)(lm[j] | ((lm[j + 4] >> 4) << 6));
        sc[j + 8] = (uint8_t)((ls[j + 4] & 0xF) | ((lm[j + 4] & 0xF) << 4));
    }
    put_half(y, max_scale / 63.f);
    put_half(y + 2, max_min / 63.f);
    float dd = half_value(y), dmin = half_value(y + 2);
    for (int j = 0; j < 8; j++) {
        float d = dd * (float)ls[j];
        take_codes(c, 32, j, L + 32 * j);
        if (d != 0) requantize(x + 32 * j, 32, d, dmin * (float)lm[j], 0, nmax, 0, L + 32 * j);
    }
}

static void finish_q4(const float *x, const Cols c, const float *scale, const float *mins,
                      uint8_t *y) {
    uint8_t L[QK];
    finish_q45(x, c, scale, mins, 15, y, L);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            y[16 + 32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
}

static void finish_q5(const float *x, const Cols c, const float *scale, const float *mins,
                      uint8_t *y) {
    uint8_t L[QK], *qh = y + 16;
    finish_q45(x, c, scale, mins, 31, y, L);
    memset(qh, 0, 32);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            uint8_t a = L[64 * j + l], b = L[64 * j + 32 + l];
            qh[l] |= (uint8_t)(((a >> 4) << (2 * j)) | ((b >> 4) << (2 * j + 1)));
            y[48 + 32 * j + l] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
        }
}

static void finish_q6(const float *x, const Cols c, const float *scale, uint8_t *y) {
    uint8_t L[QK];
    int8_t *sc = (int8_t *)(y + 192);
    float amax = 0.f, max_scale = 0.f;
    for (int j = 0; j < 16; j++)
        if (fabsf(scale[j]) > amax) amax = fabsf(scale[j]), max_scale = scale[j];
    if (amax < EPS) {
        memset(y, 0, 210);
        return;
    }
    float is = -128.f / max_scale;
    put_half(y + 208, 1.f / is);
    float dd = half_value(y + 208);
    for (int j = 0; j < 16; j++) {
        int32_t l = round_int(is * scale[j]);
        sc[j] = (int8_t)(l < 127 ? l : 127);
        float d = dd * (float)sc[j];
        take_codes(c, 16, j, L + 16 * j);
        if (d != 0) requantize(x + 16 * j, 16, d, 0.f, -32, 31, 32, L + 16 * j);
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = L + 128 * h + l;
            y[64 * h + l] = (uint8_t)((q[0] & 0xF) | ((q[64] & 0xF) << 4));
            y[64 * h + 32 + l] = (uint8_t)((q[32] & 0xF) | ((q[96] & 0xF) << 4));
            y[128 + 32 * h + l] =
                (uint8_t)((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
        }
}

/* Drivers: one search group of G sub-blocks (G / 16 super-blocks of 16-value sub-blocks, or
 * G / 8 of 32-value ones) at a time. */

static int all_finite(const float *x, Py_ssize_t n) {
    uint32_t worst = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t e = f32_bits(LP_LOAD(float, x + i)) & 0x7F800000;
        worst = e > worst ? e : worst;
    }
    return worst != 0x7F800000;
}

/* The scale search of `kind` on one group of G sub-blocks of `n` values. */
static void search_group(Kind kind, int n, const Cols cols, Cols L, float *scale, float *mins) {
    Cols w;
    float rms[G];
    if (kind == K3) lp_k_fit_q3(cols, L, scale);
    if (kind == K6) lp_k_fit_symmetric(32, cols, L, scale);
    if (kind == K2) {
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++) w[i][g] = fabsf(cols[i][g]);
        lp_k_fit_min_scale(n, 3, cols, w, -0.5f, 0.1f, 15, 1, L, scale, mins);
    }
    if (kind == K4 || kind == K5) { /* weights: the sub-block's rms plus |x| */
        for (int g = 0; g < G; g++) rms[g] = 0.f;
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++) rms[g] += cols[i][g] * cols[i][g];
        for (int g = 0; g < G; g++) rms[g] = sqrtf(rms[g] / 32.f);
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++) w[i][g] = rms[g] + fabsf(cols[i][g]);
        if (kind == K4) lp_k_fit_min_scale(n, 15, cols, w, -1.f, 0.1f, 20, 0, L, scale, mins);
        else lp_k_fit_min_scale(n, 31, cols, w, -0.5f, 0.1f, 15, 0, L, scale, mins);
    }
}

/* Super-block `k` of a searched group: its lanes' codes and scales, written as ggml does. */
static void finish_block(Kind kind, int n, int k, const float *x, const Cols L,
                         const float *scale, const float *mins, uint8_t *y) {
    Cols part;
    int subs = QK / n;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < subs; g++) part[i][g] = L[i][g + k * subs];
    const float *sk = scale + k * subs, *mk = mins + k * subs;
    if (kind == K2) finish_q2(x, part, sk, mk, y);
    if (kind == K3) finish_q3(x, part, sk, y);
    if (kind == K4) finish_q4(x, part, sk, mk, y);
    if (kind == K5) finish_q5(x, part, sk, mk, y);
    if (kind == K6) finish_q6(x, part, sk, y);
}

/* Quantizes `nb` super-blocks; returns 0, or 1 when one holds an infinity or NaN. */
static int quantize_blocks(Kind kind, const float *x, Py_ssize_t nb, uint8_t *y) {
    Cols cols, L;
    float scale[G], mins[G];
    int n = kind == K4 || kind == K5 ? 32 : 16, per = G * n / QK; /* super-blocks per group */
    for (Py_ssize_t b = 0; b < nb; b += per) {
        int here = nb - b < per ? (int)(nb - b) : per;
        const float *xb = x + QK * b;
        if (!all_finite(xb, (Py_ssize_t)QK * here)) return 1;
        gather(xb, (Py_ssize_t)QK * here, n, cols);
        search_group(kind, n, cols, L, scale, mins);
        for (int k = 0; k < here; k++)
            finish_block(kind, n, k, xb + QK * k, L, scale, mins, y + (b + k) * type_size(kind));
    }
    return 0;
}

/* Python functions ----------------------------------------------------------------------- */

static int kind_of(const char *name, Kind *kind) {
    static const char *names[] = {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
    for (int k = 0; k < 5; k++)
        if (strcmp(name, names[k]) == 0) {
            *kind = (Kind)k;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "expected a K-quant type q2_k..q6_k, got %s", name);
    return -1;
}

/* The float32 and block buffers of a call (C-contiguous, float32 items and bytes, whole
 * super-blocks, of matching sizes) and their number of super-blocks, or -1 with an error
 * set: a buffer of other items (float64, say) would be read as bits of other values. */
static Py_ssize_t get_pair(PyObject *fo, PyObject *qo, int quantizing, Kind kind, Buf *b) {
    int fflags = PyBUF_C_CONTIGUOUS | (quantizing ? 0 : PyBUF_WRITABLE);
    int qflags = PyBUF_C_CONTIGUOUS | (quantizing ? PyBUF_WRITABLE : 0);
    const char *fname = quantizing ? "x" : "out", *qname = quantizing ? "out" : "q";
    if (lp_get_view(fo, &b[0], fflags, fname) < 0 || lp_get_view(qo, &b[1], qflags, qname) < 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (b[i].view.itemsize != (i ? 1 : 4)) {
            PyErr_Format(PyExc_ValueError, "expected %s of %d-byte items, got %zd-byte items",
                         i ? qname : fname, i ? 1 : 4, b[i].view.itemsize);
            return -1;
        }
    }
    Py_ssize_t nb = b[0].view.len / (4 * QK);
    if (b[0].view.len % (4 * QK) || b[1].view.len != nb * type_size(kind)) {
        PyErr_SetString(PyExc_ValueError, "expected float32 super-blocks and their blocks");
        return -1;
    }
    return nb;
}

/* quantize_gguf_k (`quantizing`) or dequantize_gguf_k: (kind, x, out) or (kind, q, out). */
static PyObject *k_call(PyObject *args, int quantizing) {
    PyObject *in, *out;
    const char *name;
    Kind kind;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &name, &in, &out) || kind_of(name, &kind) < 0) return NULL;
    Py_ssize_t nb = quantizing ? get_pair(in, out, 1, kind, b) : get_pair(out, in, 0, kind, b);
    int nonfinite = 0;
    if (nb >= 0) {
        float *values = b[0].view.buf;
        uint8_t *blocks = b[1].view.buf;
        Py_BEGIN_ALLOW_THREADS
        if (quantizing) nonfinite = quantize_blocks(kind, values, nb, blocks);
        else lp_k_dequantize(kind, blocks, nb, values);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 2);
    if (nb < 0) return NULL;
    if (quantizing) return PyBool_FromLong(!nonfinite);
    Py_RETURN_NONE;
}

const char lp_quantize_gguf_k_doc[] = PyDoc_STR(
    "quantize_gguf_k(kind, x, out) -> bool: ggml's `kind` (q2_k..q6_k) blocks of the\n"
    "C-contiguous float32 `x` (whole super-blocks of 256) into the uint8 `out`; False, with out\n"
    "unspecified, when x holds an infinity or NaN.");

PyObject *lp_quantize_gguf_k(PyObject *self, PyObject *args) { return k_call(args, 1); }

const char lp_dequantize_gguf_k_doc[] = PyDoc_STR(
    "dequantize_gguf_k(kind, q, out) -> None: the float32 values of ggml's `kind` blocks `q`\n"
    "(C-contiguous uint8) into the C-contiguous float32 `out`.");

PyObject *lp_dequantize_gguf_k(PyObject *self, PyObject *args) { return k_call(args, 0); }
