/* The scale searches of ggml's K-quants (make_qkx2_quants, make_qx_quants, make_q3_quants
 * without weights from an importance matrix), run on G sub-blocks side by side, one per SIMD
 * lane (`x[i][g]` is value i of sub-block g): every sum still adds its terms one after another
 * as ggml's loops do, so the vectorizer spreads lanes but never reorders a sum, and every
 * condition is branch-free so that the lanes vectorize. */
#include "gguf_kquants.h"

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
LP_CLONES void lp_k_fit_min_scale(int n, int nmax, const Cols x, const Cols w, float rmin,
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
LP_CLONES void lp_k_fit_symmetric(int nmax, const Cols x, Cols L, float *scale) {
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
LP_CLONES void lp_k_fit_q3(const Cols x, Cols L, float *scale) {
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
