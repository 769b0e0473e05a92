/* Shared parts of the K-quant loops (gguf_ksearch.c, gguf_kquants.c, gguf_kdequant.c): the
 * super-block constants, ggml's rounding, float16 bits, and the search entry points.
 * Bit-identity with ggml's reference needs every product rounded on its own, hence the pragma:
 * no fused multiply-add in these files whatever the build flags say (the x86-64-v4 and ARM
 * builds have FMA, and GCC contracts a * b + c by default). */
#ifndef LAZYPARAMS_GGUF_KQUANTS_H
#define LAZYPARAMS_GGUF_KQUANTS_H

#include "native.h"

#include <math.h>

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
static inline uint16_t half_bits(float f) {
    uint32_t b = f32_bits(f), sign = (b >> 16) & 0x8000, a = b & 0x7FFFFFFF;
    if (a > 0x7F800000) return (uint16_t)(sign | 0x7E00);
    if (a >= 0x477FF000) return (uint16_t)(sign | 0x7C00); /* rounds past 65504 */
    if (a < 0x38800000) /* a float16 subnormal: 0.5 has the spacing 2**-24 */
        return (uint16_t)(sign | (f32_bits(bits_f32(a) + 0.5f) - 0x3F000000));
    return (uint16_t)(sign | (((a + 0xFFF + ((a >> 13) & 1)) >> 13) - 0x1C000));
}

static inline float half_value(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t sign = (h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0) return bits_f32(sign | f32_bits((float)m * 0x1p-24f));
    if (e == 31) return bits_f32(sign | 0x7F800000 | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

static inline void put_half(uint8_t *p, float f) {
    uint16_t h = half_bits(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

typedef enum { K2, K3, K4, K5, K6 } Kind;
/* Bytes of one block of `kind` (sizeof(block_qK_K) in ggml). */
static inline Py_ssize_t type_size(Kind kind) {
    static const Py_ssize_t sizes[] = {84, 110, 144, 176, 210};
    return sizes[kind];
}

/* The searches (gguf_ksearch.c), on G sub-blocks as columns x[i][g]. */
void lp_k_fit_min_scale(int n, int nmax, const Cols x, const Cols w, float rmin, float rdelta,
                        int nstep, int mad, Cols L, float *scale, float *mins);
void lp_k_fit_symmetric(int nmax, const Cols x, Cols L, float *scale);
void lp_k_fit_q3(const Cols x, Cols L, float *scale);

/* Float32 values of `nb` blocks of `kind` (gguf_kdequant.c). */
void lp_k_dequantize(Kind kind, const uint8_t *q, Py_ssize_t nb, float *out);

#endif
