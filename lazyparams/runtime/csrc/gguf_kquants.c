/* ggml's K-quants (q2_K to q6_K, no importance matrix) from float32, and back: the loops of
 * `runtime/gguf_kquants.py`, bit-identical to ggml's reference quantizers and dequantizers.
 *
 * The scale searches run on G sub-blocks side by side, one per SIMD lane (`x[i][g]` is value
 * i of sub-block g): every sum still adds its terms one after another as ggml's loops do, so
 * the vectorizer may spread lanes but never reorder a sum. Bit-identity also needs each product
 * rounded on its own: no fused multiply-add (the pragma below, and -ffp-contract=off).
 * An infinity or NaN in the input is reported instead of quantized. */
#include "native.h"

#include <math.h>

/* No fused multiply-add here whatever the build flags say (the x86-64-v4 and ARM builds have
 * FMA, and GCC contracts a * b + c by default): ggml's reference rounds every product. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define QK 256
#define G 16          /* sub-blocks searched together */
#define MAXN 32       /* values in the largest sub-block */
#define EPS 1e-15f    /* sub-blocks of smaller magnitude are all zero to ggml */

typedef float Cols[MAXN][G];

/* ggml's nearest_int: add 1.5 * 2**23 and read the low mantissa bits (ties to even). */
static inline int32_t round_int(float v) {
    union { float f; int32_t i; } u;
    u.f = v + 12582912.f;
    return (u.i & 0x007FFFFF) - 0x00400000;
}

static inline int32_t clampi(int32_t v, int32_t lo, int32_t hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

static inline float clamped(float v, int32_t lo, int32_t hi) {
    return (float)clampi(round_int(v), lo, hi);
}

/* float32 to float16 bits, rounding to nearest even (as numpy and GGML_FP32_TO_FP16). */
static uint16_t half_bits(float f) {
    uint32_t b = f32_bits(f), sign = (b >> 16) & 0x8000, a = b & 0x7FFFFFFF;
    if (a > 0x7F800000) return (uint16_t)(sign | 0x7E00);
    if (a >= 0x477FF000) return (uint16_t)(sign | 0x7C00); /* rounds past 65504 */
    if (a < 0x38800000) /* a float16 subnormal: 0.5 has the spacing 2**-24 */
        return (uint16_t)(sign | (f32_bits(bits_f32(a) + 0.5f) - 0x3F000000));
    return (uint16_t)(sign | (((a + 0xFFF + ((a >> 13) & 1)) >> 13) - 0x1C000));
}

static float half_value(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t sign = (h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0) return bits_f32(sign | f32_bits((float)m * 0x1p-24f));
    if (e == 31) return bits_f32(sign | 0x7F800000 | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

static void put_half(uint8_t *p, float f) {
    uint16_t h = half_bits(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* G sub-blocks of `n` values from `x` (`valid` values there; zeros past them) as columns. */
static void gather(const float *x, Py_ssize_t valid, int n, Cols c) {
    for (int g = 0; g < G; g++)
        for (int i = 0; i < n; i++) {
            Py_ssize_t at = (Py_ssize_t)g * n + i;
            c[i][g] = at < valid ? x[at] : 0.f;
        }
}

/* Searches ------------------------------------------------------------------------------- */

/* L[i][g] = trial[i][g] in the columns where take[g] is not 0. */
static inline void select_columns(int n, const float *take, const Cols trial, Cols L) {
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            float t = trial[i][g], l = L[i][g];
            L[i][g] = take[g] != 0 ? t : l;
        }
}

/* sum of w * |scale * L + low - x| (squared unless `mad`), in ggml's order. */
LP_CLONES static void weighted_error(int n, const Cols x, const Cols w, const Cols L,
                                     const float *scale, const float *low, int mad, float *err) {
    for (int g = 0; g < G; g++) err[g] = 0.f;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            float diff = scale[g] * L[i][g] + low[g] - x[i][g];
            err[g] += w[i][g] * (mad ? fabsf(diff) : diff * diff);
        }
}

/* ggml's make_qkx2_quants on each column: codes in [0, nmax] with x ~ scale * L - min. */
LP_CLONES static void fit_min_scale(int n, int nmax, const Cols x, const Cols w, float rmin,
                                    float rdelta, int nstep, int mad, Cols L, float *scale,
                                    float *mins) {
    float low[G], high[G], start[G], sw[G], sx[G], best[G], is[G], cur[G];
    float sl[G], sl2[G], sxl[G], ts[G], tm[G], det[G];
    Cols trial;
    for (int g = 0; g < G; g++) {
        low[g] = high[g] = x[0][g];
        sw[g] = w[0][g];
        sx[g] = sw[g] * x[0][g];
    }
    for (int i = 1; i < n; i++)
        for (int g = 0; g < G; g++) {
            float v = x[i][g];
            low[g] = v < low[g] ? v : low[g];
            high[g] = v > high[g] ? v : high[g];
            sw[g] += w[i][g];
            sx[g] += w[i][g] * v;
        }
    for (int g = 0; g < G; g++) {
        low[g] = start[g] = low[g] > 0 ? 0.f : low[g];
        is[g] = (float)nmax / (high[g] - low[g]);
        scale[g] = 1.f / is[g];
    }
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) L[i][g] = clamped(is[g] * (x[i][g] - low[g]), 0, nmax);
    weighted_error(n, x, w, L, scale, low, mad, best);
    for (int step = 0; step <= nstep; step++) {
        float top = rmin + rdelta * (float)step + (float)nmax;
        for (int g = 0; g < G; g++) {
            is[g] = top / (high[g] - low[g]); /* from the min of the best fit so far */
            sl[g] = sl2[g] = sxl[g] = 0.f;
        }
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++) {
                float t = clamped(is[g] * (x[i][g] - low[g]), 0, nmax), wl = w[i][g] * t;
                trial[i][g] = t;
                sl[g] += wl;
                sl2[g] += wl * t;
                sxl[g] += wl * x[i][g];
            }
        for (int g = 0; g < G; g++) {
            det[g] = sw[g] * sl2[g] - sl[g] * sl[g];
            ts[g] = (sw[g] * sxl[g] - sx[g] * sl[g]) / det[g];
            tm[g] = (sl2[g] * sx[g] - sl[g] * sxl[g]) / det[g];
            int clamp_min = tm[g] > 0;
            ts[g] = clamp_min ? sxl[g] / sl2[g] : ts[g];
            tm[g] = clamp_min ? 0.f : tm[g];
        }
        weighted_error(n, x, w, trial, ts, tm, mad, cur);
        for (int g = 0; g < G; g++) {
            int better = (det[g] > 0) & (cur[g] < best[g]);
            best[g] = better ? cur[g] : best[g];
            scale[g] = better ? ts[g] : scale[g];
            low[g] = better ? tm[g] : low[g];
            cur[g] = (float)better;
        }
        select_columns(n, cur, trial, L);
    }
    for (int g = 0; g < G; g++) {
        int flat = high[g] == start[g];
        scale[g] = flat ? 0.f : scale[g];
        mins[g] = -(flat ? start[g] : low[g]);
        for (int i = 0; i < n; i++) L[i][g] = flat ? 0.f : L[i][g];
    }
}

/* The value of largest magnitude in each column (the first of equals) and that magnitude. */
static void column_max_abs(int n, const Cols x, float *big, float *amax) {
    for (int g = 0; g < G; g++) big[g] = amax[g] = 0.f;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            float a = fabsf(x[i][g]);
            int more = a > amax[g];
            amax[g] = more ? a : amax[g];
            big[g] = more ? x[i][g] : big[g];
        }
}

/* Codes (offset by nmax) at iscale and the sums of w*x*l and w*l*l. */
static inline void symmetric_sums(int n, int nmax, const Cols x, const Cols w, const Cols wx,
                                  const float *is, Cols out, float *slx, float *sl2) {
    for (int g = 0; g < G; g++) slx[g] = sl2[g] = 0.f;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            float l = clamped(is[g] * x[i][g], -nmax, nmax - 1);
            out[i][g] = l + (float)nmax;
            slx[g] += wx[i][g] * l;
            sl2[g] += w[i][g] * l * l;
        }
}

/* ggml's make_qx_quants (rmse_type 1, no weights) on each column of 16. */
LP_CLONES static void fit_symmetric(int nmax, const Cols x, Cols L, float *scale) {
    const int n = 16;
    float big[G], amax[G], is[G], slx[G], sl2[G], best[G];
    Cols w, wx, trial;
    column_max_abs(n, x, big, amax);
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            w[i][g] = x[i][g] * x[i][g];
            wx[i][g] = w[i][g] * x[i][g];
        }
    for (int g = 0; g < G; g++) is[g] = (float)(-nmax) / big[g];
    symmetric_sums(n, nmax, x, w, wx, is, L, slx, sl2);
    for (int g = 0; g < G; g++) {
        scale[g] = sl2[g] != 0 ? slx[g] / sl2[g] : 0.f;
        best[g] = scale[g] * slx[g];
    }
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        float top = -((float)nmax + 0.1f * (float)step);
        for (int g = 0; g < G; g++) is[g] = top / big[g];
        symmetric_sums(n, nmax, x, w, wx, is, trial, slx, sl2);
        for (int g = 0; g < G; g++) {
            int take = (sl2[g] > 0) & (slx[g] * slx[g] > best[g] * sl2[g]);
            scale[g] = take ? slx[g] / sl2[g] : scale[g];
            best[g] = take ? scale[g] * slx[g] : best[g];
            is[g] = (float)take;
        }
        select_columns(n, is, trial, L);
    }
    for (int g = 0; g < G; g++) {
        int zero = amax[g] < EPS;
        scale[g] = zero ? 0.f : scale[g];
        for (int i = 0; i < n; i++) L[i][g] = zero ? 0.f : L[i][g];
    }
}

/* ggml's make_q3_quants with do_rmse on each column of 16: codes in [0, 8). */
LP_CLONES static void fit_q3(const Cols x, Cols L, float *scale) {
    const int n = 16;
    float big[G], amax[G], is[G], slx[G], sl2[G];
    Cols w, wx;
    column_max_abs(n, x, big, amax);
    for (int g = 0; g < G; g++) {
        is[g] = -4.f / big[g];
        slx[g] = sl2[g] = 0.f;
    }
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            w[i][g] = x[i][g] * x[i][g];
            wx[i][g] = w[i][g] * x[i][g];
            float l = clamped(is[g] * x[i][g], -4, 3);
            L[i][g] = l;
            slx[g] += wx[i][g] * l;
            sl2[g] += w[i][g] * l * l;
        }
    for (int pass = 0; pass < 5; pass++) {
        int changed[G] = {0}; /* a pass without a change would repeat itself */
        for (int i = 0; i < n; i++)
            for (int g = 0; g < G; g++) {
                float li = L[i][g], a = slx[g] - wx[i][g] * li, b = sl2[g] - w[i][g] * li * li;
                float nl = clamped(x[i][g] * b / a, -4, 3);
                float na = a + wx[i][g] * nl, nb = b + w[i][g] * nl * nl;
                int take = (a > 0) & (nl != li) & (nb > 0) & (na * na * sl2[g] > slx[g] * slx[g] * nb);
                L[i][g] = take ? nl : li;
                slx[g] = take ? na : slx[g];
                sl2[g] = take ? nb : sl2[g];
                changed[g] |= take;
            }
        int any = 0;
        for (int g = 0; g < G; g++) any |= changed[g];
        if (!any) break;
    }
    for (int g = 0; g < G; g++) {
        int zero = amax[g] < EPS;
        scale[g] = zero || !(sl2[g] > 0) ? 0.f : slx[g] / sl2[g];
        for (int i = 0; i < n; i++) L[i][g] = zero ? 0.f : L[i][g] + 4.f;
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
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(clampi(round_int((x[i] + dm) / d), lo, hi) + bias);
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

/* Drivers: one search group (16 sub-blocks: one super-block of 16-value sub-blocks, or two
 * of 32-value ones) at a time. */

static int all_finite(const float *x, Py_ssize_t n) {
    uint32_t worst = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t e = f32_bits(x[i]) & 0x7F800000;
        worst = e > worst ? e : worst;
    }
    return worst != 0x7F800000;
}

typedef enum { K2, K3, K4, K5, K6 } Kind;
static const int TYPE_SIZE[] = {84, 110, 144, 176, 210};

/* Quantizes `nb` super-blocks; returns 0, or 1 when one holds an infinity or NaN. */
static int quantize_blocks(Kind kind, const float *x, Py_ssize_t nb, uint8_t *y) {
    Cols cols, w, L;
    float scale[G], mins[G];
    int per = kind == K4 || kind == K5 ? 2 : 1, n = 16 * per;
    for (Py_ssize_t b = 0; b < nb; b += per) {
        int here = nb - b < per ? (int)(nb - b) : per;
        const float *xb = x + QK * b;
        if (!all_finite(xb, (Py_ssize_t)QK * here)) return 1;
        gather(xb, (Py_ssize_t)QK * here, n, cols);
        if (kind == K3) fit_q3(cols, L, scale);
        if (kind == K6) fit_symmetric(32, cols, L, scale);
        if (kind == K2) {
            for (int i = 0; i < n; i++)
                for (int g = 0; g < G; g++) w[i][g] = fabsf(cols[i][g]);
            fit_min_scale(n, 3, cols, w, -0.5f, 0.1f, 15, 1, L, scale, mins);
        }
        if (kind == K4 || kind == K5) {
            float rms[G];
            for (int g = 0; g < G; g++) rms[g] = 0.f;
            for (int i = 0; i < n; i++)
                for (int g = 0; g < G; g++) rms[g] += cols[i][g] * cols[i][g];
            for (int g = 0; g < G; g++) rms[g] = sqrtf(rms[g] / 32.f);
            for (int i = 0; i < n; i++)
                for (int g = 0; g < G; g++) w[i][g] = rms[g] + fabsf(cols[i][g]);
            if (kind == K4) fit_min_scale(n, 15, cols, w, -1.f, 0.1f, 20, 0, L, scale, mins);
            else fit_min_scale(n, 31, cols, w, -0.5f, 0.1f, 15, 0, L, scale, mins);
        }
        for (int k = 0; k < here; k++) {
            Cols part;
            for (int i = 0; i < n; i++)
                for (int g = 0; g < G / per; g++) part[i][g] = L[i][g + k * G / per];
            const float *xk = xb + QK * k, *sk = scale + k * G / per, *mk = mins + k * G / per;
            uint8_t *yk = y + (b + k) * TYPE_SIZE[kind];
            if (kind == K2) finish_q2(xk, part, sk, mk, yk);
            if (kind == K3) finish_q3(xk, part, sk, yk);
            if (kind == K4) finish_q4(xk, part, sk, mk, yk);
            if (kind == K5) finish_q5(xk, part, sk, mk, yk);
            if (kind == K6) finish_q6(xk, part, sk, yk);
        }
    }
    return 0;
}

/* Dequantization ------------------------------------------------------------------------- */

/* (d * sc) * q - (dmin * m) over the `n` codes of one sub-block (ggml's order). */
static inline void min_scaled(float d, float dmin, int sc, int m, const int8_t *q, int n,
                              float *out) {
    float dl = d * (float)sc, ml = dmin * (float)m;
    for (int l = 0; l < n; l++) out[l] = dl * (float)q[l] - ml;
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
        for (int l = 0; l < 16; l++) out[16 * j + l] = dl * (float)q[16 * j + l];
    }
}

static void dequantize_block(Kind kind, const uint8_t *y, float *out) {
    if (kind == K2) dequantize_q2(y, out);
    if (kind == K3) dequantize_q3(y, out);
    if (kind == K4 || kind == K5) dequantize_q45(y, out, kind == K5);
    if (kind == K6) dequantize_q6(y, out);
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

/* The float32 and block buffers of a call (C-contiguous, whole super-blocks, of matching
 * sizes) and their number of super-blocks, or -1 with an error set. */
static Py_ssize_t get_pair(PyObject *fo, PyObject *qo, int quantizing, Kind kind, Buf *b) {
    int fflags = PyBUF_C_CONTIGUOUS | (quantizing ? 0 : PyBUF_WRITABLE);
    int qflags = PyBUF_C_CONTIGUOUS | (quantizing ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(fo, &b[0].view, fflags) < 0) return -1;
    b[0].held = 1;
    if (PyObject_GetBuffer(qo, &b[1].view, qflags) < 0) return -1;
    b[1].held = 1;
    Py_ssize_t nb = b[0].view.len / (4 * QK);
    if (b[0].view.len % (4 * QK) || b[1].view.len != nb * TYPE_SIZE[kind]) {
        PyErr_SetString(PyExc_ValueError, "expected float32 super-blocks and their blocks");
        return -1;
    }
    return nb;
}

const char lp_quantize_gguf_k_doc[] = PyDoc_STR(
    "quantize_gguf_k(kind, x, out) -> bool: ggml's `kind` (q2_k..q6_k) blocks of the\n"
    "C-contiguous float32 `x` (whole super-blocks of 256) into the uint8 `out`; False, with out\n"
    "unspecified, when x holds an infinity or NaN.");

PyObject *lp_quantize_gguf_k(PyObject *self, PyObject *args) {
    PyObject *xo, *qo;
    const char *name;
    Kind kind;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &name, &xo, &qo) || kind_of(name, &kind) < 0) return NULL;
    Py_ssize_t nb = get_pair(xo, qo, 1, kind, b);
    int nonfinite = 0;
    if (nb >= 0) {
        Py_BEGIN_ALLOW_THREADS
        nonfinite = quantize_blocks(kind, b[0].view.buf, nb, b[1].view.buf);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 2);
    return nb < 0 ? NULL : PyBool_FromLong(!nonfinite);
}

const char lp_dequantize_gguf_k_doc[] = PyDoc_STR(
    "dequantize_gguf_k(kind, q, out) -> None: the float32 values of ggml's `kind` blocks `q`\n"
    "(C-contiguous uint8) into the C-contiguous float32 `out`.");

PyObject *lp_dequantize_gguf_k(PyObject *self, PyObject *args) {
    PyObject *qo, *oo;
    const char *name;
    Kind kind;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "sOO", &name, &qo, &oo) || kind_of(name, &kind) < 0) return NULL;
    Py_ssize_t nb = get_pair(oo, qo, 0, kind, b);
    if (nb >= 0) {
        const uint8_t *q = b[1].view.buf;
        float *out = b[0].view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < nb; i++) dequantize_block(kind, q + i * TYPE_SIZE[kind], out + QK * i);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 2);
    if (nb < 0) return NULL;
    Py_RETURN_NONE;
}
