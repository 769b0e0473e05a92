/* Dequantization of ggml's K-quant blocks (q2_K to q6_K) to float32, bit-identical to ggml's
 * dequantize_row_* and gguf-py: each block's codes are unpacked a sub-block at a time, then
 * scaled as ggml does, (d * scale) * code - (dmin * min), each product rounded. */
#include "gguf_kquants.h"

/* (d * sc) * q - (dmin * m) over the `n` codes of one sub-block (ggml's order). */
static inline void min_scaled(float d, float dmin, int sc, int m, const int8_t *q, int n,
                              float *out) {
    float dl = d * (float)sc, ml = dmin * (float)m;
    for (int l = 0; l < n; l++) LP_STORE(float, out + l, dl * (float)q[l] - ml);
}

static void k4_levels(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* The 2-bit codes of `pack2`'s layout, back in order. */
static inline void unpack2(const uint8_t *qs, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * s + l] = (int8_t)((qs[32 * h + l] >> (2 * s)) & 3);
}

LP_CLONES static void dequantize_q2(const uint8_t *y, float *out) {
    int8_t q[QK];
    unpack2(y + 16, q);
    float d = half_value(y + 80), dmin = half_value(y + 82);
    for (int j = 0; j < 16; j++) min_scaled(d, dmin, y[j] & 0xF, y[j] >> 4, q + 16 * j, 16, out + 16 * j);
}

LP_CLONES static void dequantize_q3(const uint8_t *y, float *out) {
    int8_t q[QK];
    const uint8_t *s = y + 96;
    unpack2(y + 32, q);
    for (int b = 0; b < 8; b++)
        for (int l = 0; l < 32; l++) q[32 * b + l] = (int8_t)(q[32 * b + l] - ((y[l] >> b) & 1 ? 0 : 4));
    float d = half_value(y + 108);
    for (int j = 0; j < 16; j++) {
        int lv = (j < 8 ? s[j] & 0xF : s[j - 8] >> 4) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
        min_scaled(d, 0.f, lv - 32, 0, q + 16 * j, 16, out + 16 * j);
    }
}

LP_CLONES static void dequantize_q45(const uint8_t *y, float *out, int five) {
    int8_t q[QK];
    const uint8_t *qs = y + (five ? 48 : 16), *qh = y + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
            if (five) lo += ((qh[l] >> (2 * c)) & 1) << 4, hi += ((qh[l] >> (2 * c + 1)) & 1) << 4;
            q[64 * c + l] = (int8_t)lo;
            q[64 * c + 32 + l] = (int8_t)hi;
        }
    float d = half_value(y), dmin = half_value(y + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_levels(y + 4, j, &sc, &m);
        min_scaled(d, dmin, sc, m, q + 32 * j, 32, out + 32 * j);
    }
}

LP_CLONES static void dequantize_q6(const uint8_t *y, float *out) {
    int8_t q[QK];
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = y + 64 * h + l;
            int qh = y[128 + 32 * h + l];
            int8_t *o = q + 128 * h + l;
            o[0] = (int8_t)(((ql[0] & 0xF) | ((qh & 3) << 4)) - 32);
            o[32] = (int8_t)(((ql[32] & 0xF) | (((qh >> 2) & 3) << 4)) - 32);
            o[64] = (int8_t)(((ql[0] >> 4) | (((qh >> 4) & 3) << 4)) - 32);
            o[96] = (int8_t)(((ql[32] >> 4) | (((qh >> 6) & 3) << 4)) - 32);
        }
    float d = half_value(y + 208);
    const int8_t *sc = (const int8_t *)(y + 192);
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)sc[j];
        for (int l = 0; l < 16; l++) LP_STORE(float, out + 16 * j + l, dl * (float)q[16 * j + l]);
    }
}

static void dequantize_block(Kind kind, const uint8_t *y, float *out) {
    if (kind == K2) dequantize_q2(y, out);
    if (kind == K3) dequantize_q3(y, out);
    if (kind == K4 || kind == K5) dequantize_q45(y, out, kind == K5);
    if (kind == K6) dequantize_q6(y, out);
}

void lp_k_dequantize(Kind kind, const uint8_t *q, Py_ssize_t nb, float *out) {
    for (Py_ssize_t i = 0; i < nb; i++) dequantize_block(kind, q + i * type_size(kind), out + QK * i);
}
