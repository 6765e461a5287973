/* layers.c: see layers.h. Row loops run in parallel with OpenMP when there is enough work;
 * reductions across rows (weight grads) run in a fixed order so results are deterministic. */
#include "nn/layers.h"

#include <math.h>
#include <string.h>

#include "tensor/attn.h"
#include "tensor/base.h"
#include "tensor/gemm.h"
#include "tensor/prof.h"
#include "tensor/vmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* elements of work below which a loop stays on one thread */
#define PAR_MIN 32768
/* columns per block of the weight-gradient sums */
#define LN_COLS 32

/* ===== linear ===== */
/* The bias (and residual) are written into each GEMM tile just before its product (beta = 1),
 * GELU / GELU' applied to each tile just after it, and the bias gradient summed for each row
 * range of dW, on the thread that computes the tile (gemm.h hooks): no separate pass over the
 * activations, one OpenMP team. Every element sees exactly the operations of separate passes,
 * so the hooks change no bit. (Adding the bias after a beta = 0 product instead, the same bits,
 * saves nothing with OpenBLAS: for beta = 0 it zeroes C in a pass of its own, inside the GEMM
 * call, measured on a Zen 5.) Hook operands: w = C (ld its row stride), u = bias,
 * v = residual or the GELU input, x = GELU output. */

static void gelu_span(float *out, const float *x, size_t n);
static void drop_rows(float *out, const float *x, const float *res, const hy_rng *stream,
                      size_t r0, size_t n, size_t cols, float p);
static void gelu_d_span(float *out, float *xd, size_t n);
static void mul_span(float *dx, const float *dout, const float *d, size_t n);
static void dgelu_span(float *dx, const float *dx_add, const float *dout, const float *x,
                       size_t n);

/* C tile = bias */
static void pre_bias(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        memcpy(e->w + r * e->ld + c0, e->u + c0, (c1 - c0) * sizeof(float));
}
/* C tile = res + bias */
static void pre_res_bias(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++) {
        float *o = e->w + r * e->ld;
        const float *rr = e->v + r * e->ld, *b = e->u;
#pragma omp simd
        for (size_t j = c0; j < c1; j++) o[j] = rr[j] + b[j];
    }
}
/* GELU output tile = GELU(C tile) */
static void post_gelu(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        gelu_span(e->x + r * e->ld + c0, e->w + r * e->ld + c0, c1 - c0);
}
/* GELU output tile = GELU(C tile), then C tile = GELU'(C tile): the derivative backward needs,
 * computed from the erf the forward computes anyway, while the tile is in cache */
static void post_gelu_d(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        gelu_d_span(e->x + r * e->ld + c0, e->w + r * e->ld + c0, c1 - c0);
}
/* C tile *= v tile (a stored GELU') */
static void post_mul(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        mul_span(e->w + r * e->ld + c0, e->w + r * e->ld + c0, e->v + r * e->ld + c0, c1 - c0);
}
/* C tile *= GELU'(v tile) */
static void post_dgelu(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        dgelu_span(e->w + r * e->ld + c0, NULL, e->w + r * e->ld + c0, e->v + r * e->ld + c0,
                   c1 - c0);
}
/* db (w) rows [r0, r1) += column sums of dout (u: n rows of ld), rows in order: once per row
 * range of dW (its tiles of column 0) */
static void post_bias_grad(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    (void)c1;
    if (c0 != 0) return;
    float *db = e->w;
    const float *u = e->u;
    size_t N = e->n, ld = e->ld, o = r0;
    /* 64 columns at a time, their sums in four registers across the rows (the loop over rows
     * with db in memory waited on a store and a reload per row): every db[o] still gets the
     * rows' adds one by one, in order, so the bits are those of the plain loop */
    for (; o + 64 <= r1; o += 64) {
        hy_v16f a0 = hy_v16_load(db + o), a1 = hy_v16_load(db + o + 16);
        hy_v16f a2 = hy_v16_load(db + o + 32), a3 = hy_v16_load(db + o + 48);
        for (size_t n = 0; n < N; n++) {
            const float *d = u + n * ld + o;
            a0 += hy_v16_load(d);
            a1 += hy_v16_load(d + 16);
            a2 += hy_v16_load(d + 32);
            a3 += hy_v16_load(d + 48);
        }
        hy_v16_store(db + o, a0);
        hy_v16_store(db + o + 16, a1);
        hy_v16_store(db + o + 32, a2);
        hy_v16_store(db + o + 48, a3);
    }
    for (; o + 16 <= r1; o += 16) {
        hy_v16f a = hy_v16_load(db + o);
        for (size_t n = 0; n < N; n++) a += hy_v16_load(u + n * ld + o);
        hy_v16_store(db + o, a);
    }
    for (; o < r1; o++) {
        float a = db[o];
        for (size_t n = 0; n < N; n++) a += u[n * ld + o];
        db[o] = a;
    }
}

/* the LayerNorm of a residual product's fresh tile (hy_linear_forward_res_ln) */
typedef struct {
    float *out, *mean, *rstd;
    const float *w, *b;
    float eps;
} ln_args;
static void post_ln(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1);

/* the hooks of out = [res +] in W^T [+ b] (ld Dout): gelu_out = GELU(out) when non-NULL, and
 * then out = GELU'(out) when keep_d; or, when ln is non-NULL (tiles of whole rows), LN(out)
 * into ln's buffers */
static hy_gemm_epi linear_epi(float *out, float *gelu_out, bool keep_d, const ln_args *ln,
                              const float *b, const float *res, size_t Dout) {
    hy_gemm_epi e = {0};
    e.pre = b ? (res ? pre_res_bias : pre_bias) : NULL;
    e.pre_kind = res ? HY_PROF_RESID : HY_PROF_BIAS;
    e.post = ln ? post_ln : gelu_out ? (keep_d ? post_gelu_d : post_gelu) : NULL;
    e.post_kind = ln ? HY_PROF_LN : HY_PROF_GELU;
    e.aux = ln;
    e.u = b;
    e.v = res;
    e.w = out;
    e.x = gelu_out;
    e.ld = Dout;
    return e;
}

/* the product with linear_epi's hooks; parts > 0: only part `part` of its tiles
 * (hy_gemm_ex_part) */
static void linear_fwd(float *out, float *gelu_out, bool keep_d, const ln_args *ln,
                       const float *in, const float *w, const float *b, const float *res,
                       size_t N, size_t Din, size_t Dout, size_t part, size_t parts) {
    hy_gemm_epi e = linear_epi(out, gelu_out, keep_d, ln, b, res, Dout);
    if (parts)
        hy_gemm_ex_part(CblasNoTrans, CblasTrans, N, Dout, Din, 1.0f, in, Din, w, Din,
                        b ? 1.0f : 0.0f, out, Dout, &e, part, parts);
    else
        hy_gemm_ex(CblasNoTrans, CblasTrans, N, Dout, Din, 1.0f, in, Din, w, Din,
                   b ? 1.0f : 0.0f, out, Dout, &e);
}

void hy_linear_forward_part(float *out, float *gelu_out, const float *in, const float *w,
                            const float *b, const float *res, size_t N, size_t Din, size_t Dout,
                            size_t part, size_t parts) {
    HY_ASSERT(!res || b);
    linear_fwd(out, gelu_out, false, NULL, in, w, b, res, N, Din, Dout, part, parts);
}

void hy_linear_gelu_d_forward_part(float *dgelu, float *gelu_out, const float *in,
                                   const float *w, const float *b, size_t N, size_t Din,
                                   size_t Dout, size_t part, size_t parts) {
    linear_fwd(dgelu, gelu_out, true, NULL, in, w, b, NULL, N, Din, Dout, part, parts);
}

void hy_linear_forward(float *out, const float *in, const float *w, const float *b, size_t N,
                       size_t Din, size_t Dout) {
    linear_fwd(out, NULL, false, NULL, in, w, b, NULL, N, Din, Dout, 0, 0);
}

void hy_linear_forward_res(float *out, const float *in, const float *w, const float *b,
                           const float *res, size_t N, size_t Din, size_t Dout) {
    HY_ASSERT(b != NULL);
    linear_fwd(out, NULL, false, NULL, in, w, b, res, N, Din, Dout, 0, 0);
}

void hy_linear_gelu_forward(float *out, float *gelu_out, const float *in, const float *w,
                            const float *b, size_t N, size_t Din, size_t Dout) {
    linear_fwd(out, gelu_out, false, NULL, in, w, b, NULL, N, Din, Dout, 0, 0);
}

void hy_linear_gelu_d_forward(float *dgelu, float *gelu_out, const float *in, const float *w,
                              const float *b, size_t N, size_t Din, size_t Dout) {
    linear_fwd(dgelu, gelu_out, true, NULL, in, w, b, NULL, N, Din, Dout, 0, 0);
}

static void record_shares(uint64_t t0, const uint64_t ns[HY_PROF_N], uint64_t gemm_flops,
                          uint64_t attn_flops);

/* The two products of a linear's backward, din = beta din + dout W (hook e: its row tiles'
 * GELU' product or LayerNorm backward) and dW += dout^T in (hook g: the bias grads), tile by
 * tile: tiles [0, n1) are din's, [n1, n1 + n2) dW's, as hy_gemm_ex cuts them (so any thread
 * running any tile computes hy_gemm_ex's products bitwise). my[] += the tile's times. */
typedef struct {
    const hy_gemm_epi *e, *g;
    float *din, *dw;
    const float *dout, *in, *w;
    float beta;
    size_t N, Din, Dout, n1;
} bwd_pair_args;
static void bwd_tile(const bwd_pair_args *a, size_t i, uint64_t my[HY_PROF_N]) {
    uint64_t p[3] = {0, 0, 0};
    if (i < a->n1) {
        hy_gemm_ex_tile(CblasNoTrans, CblasNoTrans, a->N, a->Din, a->Dout, 1.0f, a->dout,
                        a->Dout, a->w, a->Din, a->beta, a->din, a->Din, a->e, i, p);
        if (a->e->post) my[a->e->post_kind] += p[2];
    } else {
        hy_gemm_ex_tile(CblasTrans, CblasNoTrans, a->Dout, a->Din, a->N, 1.0f, a->dout, a->Dout,
                        a->in, a->Din, 1.0f, a->dw, a->Din, a->g, i - a->n1, p);
        if (a->g->post) my[a->g->post_kind] += p[2];
    }
    my[HY_PROF_GEMM] += p[1];
}

/* whether a backward may run its products' tiles in a region of its own: at the top level
 * (inside a region hy_gemm_ex runs a large product as one call, which rounds differently)
 * and work worth a region */
static bool bwd_region(size_t N, size_t Din, size_t Dout) {
#ifdef _OPENMP
    return omp_get_level() == 0 &&
           (double)N * (double)Din * (double)Dout >= (double)HY_GEMM_PAR_MIN_WORK;
#else
    (void)N, (void)Din, (void)Dout;
    return false;
#endif
}

/* the hook of dW += dout^T in (N rows of Dout): db += dout's column sums (none when db NULL) */
static hy_gemm_epi bias_grad_epi(float *db, const float *dout, size_t N, size_t Dout) {
    return (hy_gemm_epi){.post = db ? post_bias_grad : NULL, .post_kind = HY_PROF_BIAS,
                         .u = dout, .w = db, .ld = Dout, .n = N};
}

/* the LayerNorm weight sums after a backward's products (hy_linear_backward_ln) */
typedef struct {
    float *dw, *db;
    const float *dout, *x, *mean, *rstd;
    size_t N, D;
} ln_cols_args;
static void ln_bwd_cols(float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *rstd, size_t N, size_t D, size_t cb);

/* Both products' tiles of a (bwd_tile) in one region, dealt out dynamically; then, when lc is
 * non-NULL and every tile is done, its LayerNorm weight sums by column blocks; the classes'
 * times recorded for the region */
static void bwd_run(const bwd_pair_args *a, const ln_cols_args *lc) {
    size_t n = a->n1 + hy_gemm_ex_tiles(a->Dout, a->Din, a->N);
    size_t ncb = lc ? (lc->D + LN_COLS - 1) / LN_COLS : 0;
    uint64_t t0 = hy_prof_t0(), ns[HY_PROF_N] = {0};
#pragma omp parallel
    {
        uint64_t my[HY_PROF_N] = {0};
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) bwd_tile(a, i, my);
#pragma omp for schedule(dynamic, 1)
        for (size_t cb = 0; cb < ncb; cb++) {
            uint64_t t = hy_prof_t0();
            ln_bwd_cols(lc->dw, lc->db, lc->dout, lc->x, lc->mean, lc->rstd, lc->N, lc->D, cb);
            if (hy_prof_on) my[HY_PROF_LN] += hy_prof_clock() - t;
        }
        if (hy_prof_on) {
#pragma omp critical(hy_bwd_run)
            for (int k = 0; k < HY_PROF_N; k++) ns[k] += my[k];
        }
    }
    record_shares(t0, ns, (a->n1 ? 4 : 2) * (uint64_t)a->N * a->Din * a->Dout, 0);
}

/* din = beta din + dout W (beta 0: written, 1: added), times GELU'(hpre) when hpre != NULL,
 * or times dgelu (a stored GELU') when dgelu != NULL (beta 0 only); the weight grads. With
 * threads, both products' tiles in one region (they only read dout, in and w). */
static void linear_backward(float *din, float beta, const float *hpre, const float *dgelu,
                            float *dw, float *db, const float *dout, const float *in,
                            const float *w, size_t N, size_t Din, size_t Dout) {
    /* out = in W^T + b  =>  din += dout W;  dW += dout^T in;  db += sum_n dout[n] */
    hy_gemm_epi e = {0};
    e.post = hpre ? post_dgelu : dgelu ? post_mul : NULL;
    e.post_kind = HY_PROF_GELU;
    e.v = hpre ? hpre : dgelu;
    e.w = din;
    e.ld = Din;
    hy_gemm_epi g = bias_grad_epi(db, dout, N, Dout);
    if (!bwd_region(N, Din, Dout)) {
        if (din)
            hy_gemm_ex(CblasNoTrans, CblasNoTrans, N, Din, Dout, 1.0f, dout, Dout, w, Din, beta,
                       din, Din, &e);
        hy_gemm_ex(CblasTrans, CblasNoTrans, Dout, Din, N, 1.0f, dout, Dout, in, Din, 1.0f, dw,
                   Din, &g);
        return;
    }
    bwd_pair_args a = {&e, &g, din, dw, dout, in, w, beta, N, Din, Dout,
                       din ? hy_gemm_ex_tiles(N, Din, Dout) : 0};
    bwd_run(&a, NULL);
}

void hy_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                        const float *w, size_t N, size_t Din, size_t Dout) {
    linear_backward(din, 1.0f, NULL, NULL, dw, db, dout, in, w, N, Din, Dout);
}

void hy_linear_backward_set(float *din, float *dw, float *db, const float *dout,
                            const float *in, const float *w, size_t N, size_t Din, size_t Dout) {
    linear_backward(din, 0.0f, NULL, NULL, dw, db, dout, in, w, N, Din, Dout);
}

void hy_linear_backward_gelu_set(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, const float *hpre, size_t N,
                                 size_t Din, size_t Dout) {
    linear_backward(din, 0.0f, hpre, NULL, dw, db, dout, in, w, N, Din, Dout);
}

void hy_linear_backward_dgelu_set(float *din, float *dw, float *db, const float *dout,
                                  const float *in, const float *w, const float *dgelu, size_t N,
                                  size_t Din, size_t Dout) {
    linear_backward(din, 0.0f, NULL, dgelu, dw, db, dout, in, w, N, Din, Dout);
}

/* ===== layernorm ===== */

/* rows per thread's share of the LayerNorm forward (a multiple of 4) */
#define LN_GROUP 32

/* Row sums of the LayerNorm kernels: 16-lane partial sums over the row's whole 16-float blocks,
 * added up by vmath.h's fixed tree (hy_hsum16), then the < 16 left over in order: the same bits
 * whatever thread runs the row. (The `omp simd reduction` loops they replace summed into one
 * vector register, a chain of dependent adds, then spilled its lanes for 16 scalar adds.) */
/* rows [n0, n0 + NR) of the LayerNorm forward, NR (a constant at each call) rows side by side:
 * each row's sums are chains of dependent adds (and a square root and a division at the end),
 * so one row at a time waits on latencies; NR interleaved chains fill the vector units. Every
 * row does exactly the operations of one row alone, in the same order: bitwise row by row. */
static inline __attribute__((always_inline)) void ln_rows(float *out, float *mean, float *rstd,
                                                          const float *x, const float *w,
                                                          const float *b, size_t n0, size_t NR,
                                                          size_t D, float eps) {
    hy_v16f acc[4];
    float m[4], r[4];
    size_t D16 = D / 16 * 16;
    /* pass 1: mean; pass 2: biased variance about the mean */
    for (size_t k = 0; k < NR; k++) acc[k] = hy_v16_splat(0.0f);
    for (size_t i = 0; i < D16; i += 16)
        for (size_t k = 0; k < NR; k++) acc[k] += hy_v16_load(x + (n0 + k) * D + i);
    for (size_t k = 0; k < NR; k++) {
        const float *xr = x + (n0 + k) * D;
        float sm = hy_hsum16(acc[k]);
        for (size_t i = D16; i < D; i++) sm += xr[i];
        m[k] = sm / (float)D;
        acc[k] = hy_v16_splat(0.0f);
    }
    for (size_t i = 0; i < D16; i += 16)
        for (size_t k = 0; k < NR; k++) {
            hy_v16f v = hy_v16_load(x + (n0 + k) * D + i) - m[k];
            acc[k] += v * v;
        }
    for (size_t k = 0; k < NR; k++) {
        const float *xr = x + (n0 + k) * D;
        float v = hy_hsum16(acc[k]);
        for (size_t i = D16; i < D; i++) v += (xr[i] - m[k]) * (xr[i] - m[k]);
        r[k] = 1.0f / sqrtf(v / (float)D + eps);
    }
    /* pass 3: out = (x - mean) * rstd * w + b */
    for (size_t i = 0; i < D16; i += 16) {
        hy_v16f wv = hy_v16_load(w + i), bv = hy_v16_load(b + i);
        for (size_t k = 0; k < NR; k++)
            hy_v16_store(out + (n0 + k) * D + i,
                         (hy_v16_load(x + (n0 + k) * D + i) - m[k]) * r[k] * wv + bv);
    }
    for (size_t k = 0; k < NR; k++) {
        const float *xr = x + (n0 + k) * D;
        float *o = out + (n0 + k) * D;
        for (size_t i = D16; i < D; i++) o[i] = (xr[i] - m[k]) * r[k] * w[i] + b[i];
        mean[n0 + k] = m[k];
        rstd[n0 + k] = r[k];
    }
}

/* rows [n0, n1) of the LayerNorm forward: 4 at a time, then one by one (out may alias x: each
 * element is read before it is written, and a row reads only itself) */
static void ln_range(float *out, float *mean, float *rstd, const float *x, const float *w,
                     const float *b, size_t n0, size_t n1, size_t D, float eps) {
    size_t n = n0;
    for (; n + 4 <= n1; n += 4) ln_rows(out, mean, rstd, x, w, b, n, 4, D, eps);
    for (; n < n1; n++) ln_rows(out, mean, rstd, x, w, b, n, 1, D, eps);
}

/* rows [r0, r1) of LN(C): a tile of whole rows (c0 = 0, c1 = the row width) */
static void post_ln(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    const ln_args *a = e->aux;
    HY_ASSERT(c0 == 0 && c1 == e->ld);
    ln_range(a->out, a->mean, a->rstd, e->w, a->w, a->b, r0, r1, e->ld, a->eps);
}

void hy_linear_forward_res_ln(float *out, float *ln_out, float *ln_mean, float *ln_rstd,
                              const float *in, const float *w, const float *b, const float *res,
                              const float *ln_w, const float *ln_b, float eps, size_t N,
                              size_t Din, size_t Dout) {
    HY_ASSERT(b != NULL);
    size_t rt, ct;
    hy_gemm_tiling(N, Dout, Din, &rt, &ct);
    if (ct < Dout) {   /* column tiles: the LayerNorm after the whole product */
        linear_fwd(out, NULL, false, NULL, in, w, b, res, N, Din, Dout, 0, 0);
        hy_layernorm_forward(ln_out, ln_mean, ln_rstd, out, ln_w, ln_b, N, Dout, eps);
        return;
    }
    ln_args a = {ln_out, ln_mean, ln_rstd, ln_w, ln_b, eps};
    linear_fwd(out, NULL, false, &a, in, w, b, res, N, Din, Dout, 0, 0);
}

/* ===== the MLP at inference, row tile by row tile ===== */

/* the threads a region opened here would have, and whether we are inside one already */
static int region_threads(bool *nested) {
#ifdef _OPENMP
    *nested = omp_in_parallel();
    return omp_get_max_threads();
#else
    *nested = false;
    return 1;
#endif
}

/* the wall time of a region, shared out among the prof.h classes by their CPU times (as
 * hy_gemm_ex does); the flops of its GEMMs and of its attention products */
static void record_shares(uint64_t t0, const uint64_t ns[HY_PROF_N], uint64_t gemm_flops,
                          uint64_t attn_flops) {
    if (!hy_prof_on) return;
    double wall = (double)(hy_prof_clock() - t0), cpu = 0;
    for (int k = 0; k < HY_PROF_N; k++) cpu += (double)ns[k];
    double f = cpu > 0 ? wall / cpu : 0;
    for (int k = 0; k < HY_PROF_N; k++)
        if (ns[k])
            hy_prof_record_ns((hy_prof_kind)k, (uint64_t)((double)ns[k] * f),
                              k == HY_PROF_GEMM ? gemm_flops
                              : k == HY_PROF_ATTN_MM ? attn_flops : 0);
}

/* One row tile of the inference MLP: h = GELU(in W1^T + b1) into the thread's scratch (which
 * stays in cache), out = res + h W2^T + b2, [ln_out = LN(out)]: each product one call with the
 * operands and hooks hy_gemm_ex gives that tile (bitwise). ns: CPU ns per prof.h class. */
static void mlp_tile(float *out, const ln_args *ln, float *h, const float *in, const float *w1,
                     const float *b1, const float *w2, const float *b2, const float *res,
                     size_t r0, size_t r1, size_t D, size_t DM, uint64_t ns[HY_PROF_N]) {
    size_t rows = r1 - r0;
    uint64_t t[3] = {0, 0, 0};
    hy_gemm_epi e = linear_epi(h, h, false, NULL, b1, NULL, DM);
    hy_gemm_ex_block(CblasNoTrans, CblasTrans, rows, DM, D, 1.0f, in + r0 * D, D, w1, D, 1.0f,
                     h, DM, &e, t);
    ns[e.pre_kind] += t[0], ns[HY_PROF_GEMM] += t[1], ns[e.post_kind] += t[2];
    ln_args la;
    if (ln) la = (ln_args){ln->out + r0 * D, ln->mean + r0, ln->rstd + r0, ln->w, ln->b, ln->eps};
    hy_gemm_epi f = linear_epi(out + r0 * D, NULL, false, ln ? &la : NULL, b2,
                               res ? res + r0 * D : NULL, D);
    t[0] = t[1] = t[2] = 0;
    hy_gemm_ex_block(CblasNoTrans, CblasTrans, rows, D, DM, 1.0f, h, DM, w2, DM, 1.0f,
                     out + r0 * D, D, &f, t);
    ns[f.pre_kind] += t[0], ns[HY_PROF_GEMM] += t[1], ns[f.post_kind] += t[2];
}

void hy_mlp_infer(float *out, float *ln_out, float *ln_mean, float *ln_rstd, const float *ln_w,
                  const float *ln_b, float eps, float *h, const float *in, const float *w1,
                  const float *b1, const float *w2, const float *b2, const float *res, size_t N,
                  size_t D, size_t DM) {
    HY_ASSERT(b1 && b2);
    size_t r1t, c1t, r2t, c2t;
    hy_gemm_tiling(N, DM, D, &r1t, &c1t);
    hy_gemm_tiling(N, D, DM, &r2t, &c2t);
    bool nested;   /* there a large product is one call (gemm.c), not tiles */
    int nt = region_threads(&nested);
    size_t ntiles = (N + r1t - 1) / r1t;
    /* whole-row tiles, the same rows for both products, a whole scratch tile per thread
     * within h's N rows */
    if (nested || c1t < DM || c2t < D || r1t != r2t || r1t == N || (size_t)nt * r1t > N) {
        hy_linear_gelu_forward(h, h, in, w1, b1, N, D, DM);
        if (ln_out)
            hy_linear_forward_res_ln(out, ln_out, ln_mean, ln_rstd, h, w2, b2, res, ln_w, ln_b,
                                     eps, N, DM, D);
        else if (res)
            hy_linear_forward_res(out, h, w2, b2, res, N, DM, D);
        else
            hy_linear_forward(out, h, w2, b2, N, DM, D);
        return;
    }
    ln_args la = {ln_out, ln_mean, ln_rstd, ln_w, ln_b, eps};
    const ln_args *ln = ln_out ? &la : NULL;
    uint64_t t0 = hy_prof_t0();
    uint64_t ns[HY_PROF_N] = {0};
#pragma omp parallel num_threads(nt) reduction(+ : ns[:HY_PROF_N])
    {
        size_t th = 0;
#ifdef _OPENMP
        th = (size_t)omp_get_thread_num();
#endif
        float *scratch = h + th * r1t * DM;
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < ntiles; i++) {
            size_t r0 = i * r1t, r1 = r0 + r1t < N ? r0 + r1t : N;
            mlp_tile(out, ln, scratch, in, w1, b1, w2, b2, res, r0, r1, D, DM, ns);
        }
    }
    record_shares(t0, ns, 4 * (uint64_t)N * D * DM, 0);
}

/* ===== the whole block, row tile by row tile ===== */

/* rows [a, b) of a window of rows (scratch row 0 = row w0, ld floats) into dst's rows */
static void copy_rows(float *dst, const float *win, size_t w0, size_t a, size_t b, size_t ld) {
    if (a < b) memcpy(dst + a * ld, win + (a - w0) * ld, (b - a) * ld * sizeof(float));
}

/* row tile [r0, r1) of hy_block_forward after its attention: xm = res + ao W_proj^T + b_proj
 * and LN2 of it, then the MLP (mlp_tile, in the thread's tile of h) into xo and the next LN1:
 * each product with the operands and hooks of the whole-batch kernels' tile, each dropout mask
 * row that row's of hy_dropout_apply, each LayerNorm row ln_range's (bitwise) */
static void block_tile(const hy_block *k, float *h, size_t r0, size_t r1, uint64_t ns[HY_PROF_N]) {
    size_t D = k->D, DM = k->DM, n = r1 - r0;
    uint64_t t[3] = {0, 0, 0}, u;
    ln_args la = {k->ln2 + r0 * D, k->ln2_mean + r0, k->ln2_rstd + r0, k->ln2_w, k->ln2_b,
                  k->eps};
    float *xm = k->xm + r0 * D, *xo = k->xo + r0 * D;
    /* attention dropout: xm = proj(ao), then xm = res + xm * mask, then LN2 */
    hy_gemm_epi e = linear_epi(xm, NULL, false, k->drop_attn ? NULL : &la, k->proj_b,
                               k->drop_attn ? NULL : k->res + r0 * D, D);
    hy_gemm_ex_block(CblasNoTrans, CblasTrans, n, D, D, 1.0f, k->ao + r0 * D, D, k->proj_w, D,
                     1.0f, xm, D, &e, t);
    ns[e.pre_kind] += t[0], ns[HY_PROF_GEMM] += t[1], ns[e.post_kind] += t[2];
    if (k->drop_attn) {
        u = hy_prof_t0();
        drop_rows(xm, xm, k->res + r0 * D, k->drop_attn, r0, n, D, k->p_attn);
        if (hy_prof_on) { uint64_t v = hy_prof_clock(); ns[HY_PROF_RESID] += v - u; u = v; }
        ln_range(k->ln2, k->ln2_mean, k->ln2_rstd, k->xm, k->ln2_w, k->ln2_b, r0, r1, D, k->eps);
        if (hy_prof_on) ns[HY_PROF_LN] += hy_prof_clock() - u;
    }
    ln_args ln1 = {k->ln1, k->ln1_mean, k->ln1_rstd, k->ln1_w, k->ln1_b, k->eps};
    if (!k->hg && !k->drop_fc1) {
        mlp_tile(k->xo, k->ln1 ? &ln1 : NULL, h, k->ln2, k->fc1_w, k->fc1_b, k->fc2_w, k->fc2_b,
                 k->xm, r0, r1, D, DM, ns);
        return;
    }
    /* kept for backward (GELU(z) into hg's rows, GELU'(z) into h's: hy_linear_gelu_d_forward's
     * tile) or GELU in place in the thread's tile of h; [GELU's output *= mask;] then
     * xo = [xm +] g W2^T + b2 [then xo = xm + xo * mask] [and the next LN1] */
    float *z = k->hg ? k->h + r0 * DM : h, *g = k->hg ? k->hg + r0 * DM : h;
    ln_args l1 = {k->ln1 + r0 * D, k->ln1_mean + r0, k->ln1_rstd + r0, k->ln1_w, k->ln1_b, k->eps};
    hy_gemm_epi f = linear_epi(z, g, k->hg != NULL, NULL, k->fc1_b, NULL, DM);
    t[0] = t[1] = t[2] = 0;
    hy_gemm_ex_block(CblasNoTrans, CblasTrans, n, DM, D, 1.0f, k->ln2 + r0 * D, D, k->fc1_w, D,
                     1.0f, z, DM, &f, t);
    ns[f.pre_kind] += t[0], ns[HY_PROF_GEMM] += t[1], ns[f.post_kind] += t[2];
    if (k->drop_fc1) {
        u = hy_prof_t0();
        drop_rows(g, g, NULL, k->drop_fc1, r0, n, DM, k->p_mlp);
        if (hy_prof_on) ns[HY_PROF_DROPOUT] += hy_prof_clock() - u;
    }
    bool d2 = k->drop_fc2 != NULL;
    hy_gemm_epi q = linear_epi(xo, NULL, false, !d2 && k->ln1 ? &l1 : NULL, k->fc2_b,
                               d2 ? NULL : xm, D);
    t[0] = t[1] = t[2] = 0;
    hy_gemm_ex_block(CblasNoTrans, CblasTrans, n, D, DM, 1.0f, g, DM, k->fc2_w, DM, 1.0f, xo, D,
                     &q, t);
    ns[q.pre_kind] += t[0], ns[HY_PROF_GEMM] += t[1], ns[q.post_kind] += t[2];
    if (d2) {
        u = hy_prof_t0();
        drop_rows(xo, xo, xm, k->drop_fc2, r0, n, D, k->p_mlp);
        if (hy_prof_on) { uint64_t v = hy_prof_clock(); ns[HY_PROF_RESID] += v - u; u = v; }
        if (k->ln1)
            ln_range(k->ln1, k->ln1_mean, k->ln1_rstd, k->xo, k->ln1_w, k->ln1_b, r0, r1, D,
                     k->eps);
        if (hy_prof_on) ns[HY_PROF_LN] += hy_prof_clock() - u;
    }
}

#define BLOCK_MAX_THREADS 64

size_t hy_block_scratch_floats(size_t N, size_t T, size_t D, size_t threads) {
    size_t rt = hy_gemm_tile_rows_max(), P = threads < BLOCK_MAX_THREADS ? threads
                                                                          : BLOCK_MAX_THREADS;
    if (rt > N) rt = N;
    return P * (rt + T) * 3 * D;
}

bool hy_block_forward(const hy_block *k, float *scratch, size_t scratch_floats) {
    size_t B = k->B, T = k->T, D = k->D, NH = k->NH, DM = k->DM;
    size_t N = B * T, C3 = 3 * D, rt, ct, rp, cp, r1t, c1t, r2t, c2t;
    hy_gemm_tiling(N, C3, D, &rt, &ct);
    hy_gemm_tiling(N, D, D, &rp, &cp);
    hy_gemm_tiling(N, DM, D, &r1t, &c1t);
    hy_gemm_tiling(N, D, DM, &r2t, &c2t);
    bool nested;
    int nt = region_threads(&nested);
    size_t P = (size_t)nt, ntiles = (N + rt - 1) / rt, cap = rt + T;
    /* whole-row tiles, the same rows for the four products, at least two per thread, every
     * thread's rows longer than a sample (so a sample straddles at most one boundary between
     * threads), the windows within scratch, a whole tile of h per thread within h's N rows */
    if (nested || P < 2 || P > BLOCK_MAX_THREADS || ct < C3 || cp < D || rp != rt ||
        c1t < DM || c2t < D || r1t != rt || r2t != rt || P * rt > N ||
        rt >= N || ntiles < 2 * P || (ntiles / P - 1) * rt < T ||
        (!k->hg && P * cap * C3 > scratch_floats))
        return false;
    uint64_t t0 = hy_prof_t0();
    uint64_t ns[HY_PROF_N] = {0}, af = 0;   /* af: the attention products' flops */
    size_t pa[BLOCK_MAX_THREADS], pb[BLOCK_MAX_THREADS];   /* tiles finished in the region */
#pragma omp parallel num_threads(nt) reduction(+ : ns[:HY_PROF_N], af)
    {
        size_t th = 0, np = 1;
#ifdef _OPENMP
        th = (size_t)omp_get_thread_num();
        np = (size_t)omp_get_num_threads();
#endif
        /* this thread's tiles [i0, i1): rows [R0, R1), its own samples [s0, s1) (the rows
         * before s0 T and from s1 T belong to samples shared with a neighbour: copied to qkv
         * for the pass after the region) */
        size_t i0 = ntiles * th / np, i1 = ntiles * (th + 1) / np;
        size_t R0 = i0 * rt, R1 = i1 * rt < N ? i1 * rt : N;
        size_t s0 = (R0 + T - 1) / T, s1 = R1 / T;
        /* the window (row 0 = row w0); kept for backward: qkv itself, from row 0 */
        float *win = k->hg ? k->qkv : scratch + th * cap * C3;
        float *h = k->hg ? NULL : k->h + th * rt * DM;
        size_t w0 = k->hg ? 0 : R0, next = s0;
        /* tiles [pj0, pj) finished here: from the first that starts at or after row s0 T;
         * the tiles before it hold rows of the sample straddling R0 (when T exceeds the tile
         * rows, that sample may reach past the tile holding R0), finished after the region */
        size_t pj = (s0 * T + rt - 1) / rt;
        if (pj > i1) pj = i1;
        size_t pj0 = pj;
        hy_gemm_epi e = {0};
        e.pre = pre_bias;
        e.u = k->qkv_b;
        e.ld = C3;
        for (size_t i = i0; i < i1; i++) {
            size_t r0 = i * rt, r1 = r0 + rt < N ? r0 + rt : N;
            uint64_t t[3] = {0, 0, 0};
            e.w = win + (r0 - w0) * C3;
            hy_gemm_ex_block(CblasNoTrans, CblasTrans, r1 - r0, C3, D, 1.0f, k->in + r0 * D, D,
                             k->qkv_w, D, 1.0f, e.w, C3, &e, t);
            ns[HY_PROF_BIAS] += t[0], ns[HY_PROF_GEMM] += t[1];
            uint64_t u = hy_prof_t0();
            size_t lead = s0 * T < R1 ? s0 * T : R1, tail = s1 * T > R0 ? s1 * T : R0;
            if (!k->hg) {
                copy_rows(k->qkv, win, w0, r0, r1 < lead ? r1 : lead, C3);
                copy_rows(k->qkv, win, w0, r0 > tail ? r0 : tail, r1, C3);
            }
            /* the own samples whose rows are all in the window */
            size_t done = r1 / T < s1 ? r1 / T : s1;
            hy_attn_cost ac = {0, 0};
            if (done > next) {
                ac = hy_attn_forward_part(k->ao + next * T * D,
                                          k->att ? k->att + next * NH * T * T : NULL,
                                          win + (next * T - w0) * C3, k->gate,
                                          k->kvalid ? k->kvalid + next : NULL, done - next, T,
                                          D, NH, 0, 1);
                next = done;
            }
            /* keep the rows of the sample not yet complete at the window's start */
            size_t keep = next * T > w0 ? next * T : w0;
            if (keep > r1) keep = r1;
            if (!k->hg && keep > w0) {
                memmove(win, win + (keep - w0) * C3, (r1 - keep) * C3 * sizeof(float));
                w0 = keep;
            }
            if (hy_prof_on) {
                ns[HY_PROF_ATTN] += hy_prof_clock() - u - ac.ns;
                ns[HY_PROF_ATTN_MM] += ac.ns;
                af += ac.flops;
            }
            /* the tiles whose rows have all been attended (the last one may be short) */
            for (; pj < i1 && ((pj + 1) * rt < N ? (pj + 1) * rt : N) <= next * T; pj++)
                block_tile(k, h, pj * rt, (pj + 1) * rt < N ? (pj + 1) * rt : N, ns);
        }
        pa[th] = pj0;
        pb[th] = pj;
    }
    /* the samples straddling two threads' rows (from qkv), then the tiles left */
    uint64_t u = hy_prof_t0(), amm = 0;
    for (size_t th = 1; th < P; th++) {
        size_t R0 = ntiles * th / P * rt;
        if (R0 % T == 0) continue;
        size_t s = R0 / T;
        hy_attn_cost ac = hy_attn_forward_part(k->ao + s * T * D,
                                               k->att ? k->att + s * NH * T * T : NULL,
                                               k->qkv + s * T * C3, k->gate,
                                               k->kvalid ? k->kvalid + s : NULL, 1, T, D, NH, 0,
                                               1);
        amm += ac.ns;
        af += ac.flops;
    }
    if (hy_prof_on) {
        ns[HY_PROF_ATTN] += hy_prof_clock() - u - amm;
        ns[HY_PROF_ATTN_MM] += amm;
    }
    for (size_t th = 0; th < P; th++) {
        size_t i0 = ntiles * th / P, i1 = ntiles * (th + 1) / P;
        for (size_t i = i0; i < i1; i++) {
            if (i >= pa[th] && i < pb[th]) continue;
            block_tile(k, k->hg ? NULL : k->h, i * rt, (i + 1) * rt < N ? (i + 1) * rt : N, ns);
        }
    }
    record_shares(t0, ns, 2 * (uint64_t)N * (C3 * D + D * D + 2 * D * DM), af);
    return true;
}

void hy_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, size_t N, size_t D, float eps) {
    uint64_t t0 = hy_prof_t0();
    if (hy_omp_par(N * D > PAR_MIN)) {
        /* groups of LN_GROUP rows (whole 4-row blocks) for the threads */
        size_t ng = (N + LN_GROUP - 1) / LN_GROUP;
#pragma omp parallel for schedule(static)
        for (size_t g = 0; g < ng; g++)
            ln_range(out, mean, rstd, x, w, b, g * LN_GROUP,
                     (g + 1) * LN_GROUP < N ? (g + 1) * LN_GROUP : N, D, eps);
    } else {
        ln_range(out, mean, rstd, x, w, b, 0, N, D, eps);
    }
    hy_prof_add(HY_PROF_LN, t0, 0);
}

/* LayerNorm backward, dx += for rows [n0, n1):
 * xhat = (x - mean) * rstd; out = xhat * w + b
 * dxhat = dout * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
static void ln_bwd_rows(float *dx, const float *dout, const float *x, const float *mean,
                        const float *rstd, const float *w, size_t n0, size_t n1, size_t D) {
    for (size_t n = n0; n < n1; n++) {
        const float *xr = x + n * D, *g = dout + n * D;
        float m = mean[n], r = rstd[n];
        hy_v16f a1 = hy_v16_splat(0.0f), a2 = a1;
        size_t i = 0;
        for (; i + 16 <= D; i += 16) {
            hy_v16f dn = hy_v16_load(g + i) * hy_v16_load(w + i);
            a1 += dn;
            a2 += dn * (hy_v16_load(xr + i) - m) * r;
        }
        float s1 = hy_hsum16(a1), s2 = hy_hsum16(a2);
        for (size_t j = i; j < D; j++) {
            float dn = g[j] * w[j];
            s1 += dn;
            s2 += dn * (xr[j] - m) * r;
        }
        s1 /= (float)D;
        s2 /= (float)D;
        float *d = dx + n * D;
        for (i = 0; i + 16 <= D; i += 16) {
            hy_v16f xh = (hy_v16_load(xr + i) - m) * r;
            hy_v16_store(d + i, hy_v16_load(d + i) +
                                    r * (hy_v16_load(g + i) * hy_v16_load(w + i) - s1 - xh * s2));
        }
        for (; i < D; i++) {
            float xh = (xr[i] - m) * r;
            d[i] += r * (g[i] * w[i] - s1 - xh * s2);
        }
    }
}

/* its weight grads for the columns of block cb (LN_COLS wide): every row in order, the same bits
 * as one serial loop whatever thread runs the block; a whole block keeps its sums in registers
 * across the rows */
static void ln_bwd_cols(float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *rstd, size_t N, size_t D, size_t cb) {
    size_t i0 = cb * LN_COLS, i1 = i0 + LN_COLS < D ? i0 + LN_COLS : D;
    if (i1 - i0 == LN_COLS) {
        hy_v16f w0 = hy_v16_load(dw + i0), w1 = hy_v16_load(dw + i0 + 16);
        hy_v16f b0 = hy_v16_load(db + i0), b1 = hy_v16_load(db + i0 + 16);
        for (size_t n = 0; n < N; n++) {
            const float *xr = x + n * D + i0, *g = dout + n * D + i0;
            float m = mean[n], r = rstd[n];
            hy_v16f g0 = hy_v16_load(g), g1 = hy_v16_load(g + 16);
            w0 += g0 * (hy_v16_load(xr) - m) * r;
            w1 += g1 * (hy_v16_load(xr + 16) - m) * r;
            b0 += g0;
            b1 += g1;
        }
        hy_v16_store(dw + i0, w0);
        hy_v16_store(dw + i0 + 16, w1);
        hy_v16_store(db + i0, b0);
        hy_v16_store(db + i0 + 16, b1);
        return;
    }
    for (size_t n = 0; n < N; n++) {
        const float *xr = x + n * D, *g = dout + n * D;
        float m = mean[n], r = rstd[n];
        for (size_t i = i0; i < i1; i++) {
            dw[i] += g[i] * (xr[i] - m) * r;
            db[i] += g[i];
        }
    }
}

void hy_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                           const float *mean, const float *rstd, const float *w, size_t N,
                           size_t D) {
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (N * D > PAR_MIN)
    for (size_t n = 0; n < N; n++) ln_bwd_rows(dx, dout, x, mean, rstd, w, n, n + 1, D);
    /* weight grads: blocks of columns in parallel */
    size_t ncb = (D + LN_COLS - 1) / LN_COLS;
#pragma omp parallel for schedule(static) if (N * D > PAR_MIN && ncb > 1)
    for (size_t cb = 0; cb < ncb; cb++) ln_bwd_cols(dw, db, dout, x, mean, rstd, N, D, cb);
    hy_prof_add(HY_PROF_LN, t0, 0);
}

/* the LayerNorm backward of a product's fresh tile of whole rows (hy_linear_backward_ln) */
typedef struct {
    float *dx;
    const float *x, *mean, *rstd, *w;
} ln_bwd_args;
static void post_ln_bwd(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    const ln_bwd_args *a = e->aux;
    HY_ASSERT(c0 == 0 && c1 == e->ld);
    ln_bwd_rows(a->dx, e->w, a->x, a->mean, a->rstd, a->w, r0, r1, e->ld);
}

void hy_linear_backward_ln(float *dx, float *ln_dw, float *ln_db, const float *x,
                           const float *mean, const float *rstd, const float *ln_w, float *din,
                           float *dw, float *db, const float *dout, const float *in,
                           const float *w, size_t N, size_t Din, size_t Dout) {
    size_t rt, ct;
    hy_gemm_tiling(N, Din, Dout, &rt, &ct);
    if (ct < Din || !bwd_region(N, Din, Dout)) {   /* column tiles: the LayerNorm after */
        linear_backward(din, 0.0f, NULL, NULL, dw, db, dout, in, w, N, Din, Dout);
        hy_layernorm_backward(dx, ln_dw, ln_db, din, x, mean, rstd, ln_w, N, Din);
        return;
    }
    ln_bwd_args la = {dx, x, mean, rstd, ln_w};
    hy_gemm_epi e = {0}, g = bias_grad_epi(db, dout, N, Dout);
    e.post = post_ln_bwd;
    e.post_kind = HY_PROF_LN;
    e.w = din;
    e.ld = Din;
    e.aux = &la;
    bwd_pair_args a = {&e, &g, din, dw, dout, in, w, 0.0f, N, Din, Dout,
                       hy_gemm_ex_tiles(N, Din, Dout)};
    ln_cols_args lc = {ln_dw, ln_db, din, x, mean, rstd, N, Din};
    bwd_run(&a, &lc);
}

/* ===== GELU (erf form; hy_erf is a vectorisable erf, see vmath.h) ===== */

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT2PI 0.39894228040143267794f

/* 16 floats at a time (one AVX-512 register, vmath.h), then at most one block of 8, then the
 * scalar tail: each lane is bitwise its scalar twin (vmath.h), so results do not depend on where
 * a span starts or on the thread count */
/* The formulas, once, from x and e = erf(x / sqrt 2) (and the exp for GELU'): every width and
 * the stored-derivative pass below use them, so GELU and GELU' are the same operations
 * wherever they are computed. GELU = x Phi(x); GELU' = Phi(x) + x phi(x). */
#define GELU_OF(v, e) (0.5f * (v) * (1.0f + (e)))
#define DGELU_OF(v, e, EXP) (0.5f * (1.0f + (e)) + (v) * (INV_SQRT2PI * EXP(-0.5f * (v) * (v))))
static inline float gelu1(float v) { return GELU_OF(v, hy_erf(v * INV_SQRT2)); }
static inline hy_v8f gelu8(hy_v8f v) { return GELU_OF(v, hy_erf8(v * INV_SQRT2)); }
static inline hy_v16f gelu16(hy_v16f v) { return GELU_OF(v, hy_erf16(v * INV_SQRT2)); }
static inline float dgelu1(float v) { return DGELU_OF(v, hy_erf(v * INV_SQRT2), hy_exp); }
static inline hy_v8f dgelu8(hy_v8f v) { return DGELU_OF(v, hy_erf8(v * INV_SQRT2), hy_exp8); }
static inline hy_v16f dgelu16(hy_v16f v) {
    return DGELU_OF(v, hy_erf16(v * INV_SQRT2), hy_exp16);
}

/* out = GELU(x) over n floats */
static void gelu_span(float *out, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) hy_v16_store(out + i, gelu16(hy_v16_load(x + i)));
    if (i + 8 <= n) {
        hy_v8_store(out + i, gelu8(hy_v8_load(x + i)));
        i += 8;
    }
    for (; i < n; i++) out[i] = gelu1(x[i]);
}
/* out = GELU(x) and x = GELU'(x) over n floats, one erf for both: each value bitwise what
 * gelu_span and dgelu_span's GELU' give (the same operations on the same erf) */
static void gelu_d_span(float *out, float *xd, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        hy_v16f v = hy_v16_load(xd + i), e = hy_erf16(v * INV_SQRT2);
        hy_v16_store(out + i, GELU_OF(v, e));
        hy_v16_store(xd + i, DGELU_OF(v, e, hy_exp16));
    }
    if (i + 8 <= n) {
        hy_v8f v = hy_v8_load(xd + i), e = hy_erf8(v * INV_SQRT2);
        hy_v8_store(out + i, GELU_OF(v, e));
        hy_v8_store(xd + i, DGELU_OF(v, e, hy_exp8));
        i += 8;
    }
    for (; i < n; i++) {
        float v = xd[i], e = hy_erf(v * INV_SQRT2);
        out[i] = GELU_OF(v, e);
        xd[i] = DGELU_OF(v, e, hy_exp);
    }
}
/* dx = dout * d over n floats (may alias dout) */
static void mul_span(float *dx, const float *dout, const float *d, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) hy_v16_store(dx + i, hy_v16_load(dout + i) * hy_v16_load(d + i));
    for (; i < n; i++) dx[i] = dout[i] * d[i];
}
/* dx = [dx_add +] dout * GELU'(x) over n floats (dx_add NULL: written; may alias dx / dout) */
static void dgelu_span(float *dx, const float *dx_add, const float *dout, const float *x,
                       size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        hy_v16f d = hy_v16_load(dout + i) * dgelu16(hy_v16_load(x + i));
        if (dx_add) d = hy_v16_load(dx_add + i) + d;
        hy_v16_store(dx + i, d);
    }
    if (i + 8 <= n) {
        hy_v8f d = hy_v8_load(dout + i) * dgelu8(hy_v8_load(x + i));
        if (dx_add) d = hy_v8_load(dx_add + i) + d;
        hy_v8_store(dx + i, d);
        i += 8;
    }
    for (; i < n; i++) {
        float d = dout[i] * dgelu1(x[i]);
        dx[i] = dx_add ? dx_add[i] + d : d;
    }
}

/* n floats in blocks of GELU_BLOCK for the threads (a multiple of 16: the spans' split does not
 * matter anyway) */
#define GELU_BLOCK 1024

/* SPAN over the n floats in blocks [lo, hi) of GELU_BLOCK, on the threads, timed as GELU */
#define GELU_BLOCKS(n, SPAN)                                                                      \
    do {                                                                                          \
        uint64_t t0_ = hy_prof_t0();                                                              \
        size_t nb_ = ((n) + GELU_BLOCK - 1) / GELU_BLOCK;                                         \
        _Pragma("omp parallel for schedule(static) if ((n) > PAR_MIN)")                           \
        for (size_t b_ = 0; b_ < nb_; b_++) {                                                     \
            size_t lo = b_ * GELU_BLOCK, hi = lo + GELU_BLOCK < (n) ? lo + GELU_BLOCK : (n);     \
            SPAN;                                                                                 \
        }                                                                                         \
        hy_prof_add(HY_PROF_GELU, t0_, 0);                                                        \
    } while (0)

void hy_gelu_forward(float *out, const float *x, size_t n) {
    GELU_BLOCKS(n, gelu_span(out + lo, x + lo, hi - lo));
}

/* d/dx [x Phi(x)] = Phi(x) + x phi(x); dx = dout * GELU'(x), added into dx when add */
void hy_gelu_backward(float *dx, const float *dout, const float *x, size_t n) {
    GELU_BLOCKS(n, dgelu_span(dx + lo, dx + lo, dout + lo, x + lo, hi - lo));
}

void hy_gelu_backward_set(float *dx, const float *dout, const float *x, size_t n) {
    GELU_BLOCKS(n, dgelu_span(dx + lo, NULL, dout + lo, x + lo, hi - lo));
}

void hy_gelu_d_forward(float *out, float *xd, size_t n) {
    GELU_BLOCKS(n, gelu_d_span(out + lo, xd + lo, hi - lo));
}

void hy_gelu_backward_d_set(float *dx, const float *dout, const float *dgelu, size_t n) {
    GELU_BLOCKS(n, mul_span(dx + lo, dout + lo, dgelu + lo, hi - lo));
}

/* ===== GELU, tanh approximation ===== */

/* sqrt(2 / pi) and the cubic coefficient of the tanh approximation (HF "gelu_new") */
#define GT_K 0.7978845608028654f
#define GT_C 0.044715f

/* 0.5 (1 + tanh u) = s = 1 / (1 + e), e = exp(-2u), and s (1 - s) = 1 / ((1 + e)(1 + 1/e)):
 * written so, nothing cancels when tanh u rounds to -1 or 1 (the tails keep their relative
 * accuracy); e = 0 or inf (|x| large) gives the limits, never a NaN */
static float gelu_tanh1(float x) {
    float e = expf(-2.0f * GT_K * (x + GT_C * x * x * x));
    return x / (1.0f + e);
}

static float dgelu_tanh1(float x) {
    float e = expf(-2.0f * GT_K * (x + GT_C * x * x * x)), s = 1.0f / (1.0f + e);
    if (e == 0.0f || e == INFINITY) return s;   /* the tails: 1 or 0 (x^3 may overflow) */
    float q = 1.0f / ((1.0f + e) * (1.0f + 1.0f / e));
    return s + 2.0f * x * GT_K * (1.0f + 3.0f * GT_C * x * x) * q;
}

void hy_gelu_tanh_forward(float *out, const float *x, size_t n) {
    GELU_BLOCKS(n, for (size_t i = lo; i < hi; i++) out[i] = gelu_tanh1(x[i]));
}

void hy_gelu_tanh_backward_set(float *dx, const float *dout, const float *x, size_t n) {
    GELU_BLOCKS(n, for (size_t i = lo; i < hi; i++) dx[i] = dout[i] * dgelu_tanh1(x[i]));
}

/* ===== softmax ===== */

void hy_softmax_forward(float *out, const float *x, size_t N, size_t K) {
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (N * K > PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *xr = x + n * K;
        float *o = out + n * K;
        float mx = -INFINITY;
        for (size_t k = 0; k < K; k++) mx = xr[k] > mx ? xr[k] : mx;
        if (mx == -INFINITY) {
            memset(o, 0, K * sizeof *o);
            continue;
        }
        float s = 0.0f;
        for (size_t k = 0; k < K; k++) {
            o[k] = expf(xr[k] - mx);
            s += o[k];
        }
        float inv = 1.0f / s;
        for (size_t k = 0; k < K; k++) o[k] *= inv;
    }
    hy_prof_add(HY_PROF_LOSS, t0, 0);
}

void hy_softmax_rows(float *probs, const float *logits, size_t n, size_t k) {
    for (size_t r = 0; r < n; r++) {
        const float *x = logits + r * k;
        float *p = probs + r * k;
        float mx = -INFINITY;
        for (size_t j = 0; j < k; j++) mx = x[j] > mx ? x[j] : mx;
        double sum = 0;
        for (size_t j = 0; j < k; j++) sum += exp((double)x[j] - (double)mx);
        for (size_t j = 0; j < k; j++) p[j] = (float)(exp((double)x[j] - (double)mx) / sum);
    }
}

double hy_logsumexp(const float *z, size_t n) {
    double mx = -INFINITY;
    for (size_t c = 0; c < n; c++)
        if ((double)z[c] > mx) mx = (double)z[c];
    if (isinf(mx) && mx < 0.0) return mx;
    double s = 0.0;
    for (size_t c = 0; c < n; c++) s += exp((double)z[c] - mx);
    return mx + log(s);
}

/* ===== softmax + cross-entropy ===== */

void hy_ce_forward(double *loss, float *probs, const float *logits, const int32_t *labels,
                   size_t N, size_t K, float eps) {
    uint64_t t0 = hy_prof_t0();
    double total = 0.0;
    for (size_t n = 0; n < N; n++) {
        const float *x = logits + n * K;
        float *p = probs + n * K;
        /* pass 1: log-sum-exp in double; pass 2: probs and -sum target log p */
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++) mx = (double)x[k] > mx ? (double)x[k] : mx;
        double s = 0.0;
        for (size_t k = 0; k < K; k++) s += exp((double)x[k] - mx);
        double lse = mx + log(s);
        double sum_logp = 0.0;
        for (size_t k = 0; k < K; k++) {
            double lp = (double)x[k] - lse;
            p[k] = (float)exp(lp);
            sum_logp += lp;
        }
        double lpy = (double)x[labels[n]] - lse;
        total += -((1.0 - (double)eps) * lpy + (double)eps / (double)K * sum_logp);
    }
    *loss = N ? total / (double)N : 0.0;
    hy_prof_add(HY_PROF_LOSS, t0, 0);
}

void hy_ce_backward(float *dlogits, double dloss, const float *probs, const int32_t *labels,
                    size_t N, size_t K, float eps) {
    uint64_t t0 = hy_prof_t0();
    /* loss = mean_n -sum_c t_c log p_c  =>  dlogit_c = (p_c - t_c) / N  (sum_c t_c = 1) */
    double off = (double)eps / (double)K;
    for (size_t n = 0; n < N; n++) {
        for (size_t k = 0; k < K; k++) {
            double t = off + ((int64_t)k == labels[n] ? 1.0 - (double)eps : 0.0);
            dlogits[n * K + k] += (float)(dloss * ((double)probs[n * K + k] - t) / (double)N);
        }
    }
    hy_prof_add(HY_PROF_LOSS, t0, 0);
}

/* ===== dropout ===== */

/* the drop threshold on 24 random bits: P(bits < thr) = thr / 2^24 = p rounded up to 2^-24 */
static uint32_t drop_threshold(float p) { return (uint32_t)ceil((double)p * 16777216.0); }

void hy_dropout_mask(float *mask, const hy_rng *stream, size_t rows, size_t cols, float p) {
    /* the mask is the dropout of ones: 1 * keep and 1 * 0 are exact */
    for (size_t i = 0; i < rows * cols; i++) mask[i] = 1.0f;
    hy_dropout_apply(mask, mask, NULL, stream, rows, cols, p);
}

/* rows [0, n) of out = [res +] x * mask, row i with the mask of row r0 + i */
static void drop_rows(float *out, const float *x, const float *res, const hy_rng *stream,
                      size_t r0, size_t n, size_t cols, float p) {
    float keep = 1.0f / (1.0f - p);
    uint32_t thr = drop_threshold(p);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = hy_rng_split_key(stream, (uint64_t)(r0 + i));
        const float *xr = x + i * cols;
        float *o = out + i * cols;
        if (res) {
            const float *rr = res + i * cols;
#pragma omp simd
            for (size_t c = 0; c < cols; c++)
                o[c] = rr[c] + xr[c] * (hy_ctr_bits24(k, (uint32_t)c) < thr ? 0.0f : keep);
        } else {
#pragma omp simd
            for (size_t c = 0; c < cols; c++)
                o[c] = xr[c] * (hy_ctr_bits24(k, (uint32_t)c) < thr ? 0.0f : keep);
        }
    }
}

void hy_dropout_apply(float *out, const float *x, const float *res, const hy_rng *stream,
                      size_t rows, size_t cols, float p) {
    uint64_t t0 = hy_prof_t0();
    HY_ASSERT(cols <= UINT32_MAX);
#pragma omp parallel for schedule(static) if (rows * cols > PAR_MIN)
    for (size_t r = 0; r < rows; r++)
        drop_rows(out + r * cols, x + r * cols, res ? res + r * cols : NULL, stream, r, 1, cols,
                  p);
    hy_prof_add(res ? HY_PROF_RESID : HY_PROF_DROPOUT, t0, 0);
}

void hy_dropout_forward(float *out, const float *x, const float *mask, size_t n) {
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = x[i] * mask[i];
    hy_prof_add(HY_PROF_DROPOUT, t0, 0);
}

void hy_dropout_backward(float *dx, const float *dout, const float *mask, size_t n) {
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] += dout[i] * mask[i];
    hy_prof_add(HY_PROF_DROPOUT, t0, 0);
}

/* ===== patch embedding ===== */

void hy_patch_extract(float *patches, const float *images, size_t B, size_t Cin, size_t S,
                      size_t p) {
    uint64_t t0 = hy_prof_t0();
    size_t G = S / p, NP = G * G, F = Cin * p * p;
#pragma omp parallel for schedule(static) if (B * NP * F > PAR_MIN)
    for (size_t b = 0; b < B; b++) {
        for (size_t n = 0; n < NP; n++) {
            size_t gy = n / G, gx = n % G;
            float *dst = patches + (b * NP + n) * F;
            for (size_t c = 0; c < Cin; c++) {
                const float *img = images + (b * Cin + c) * S * S;
                for (size_t dy = 0; dy < p; dy++)
                    memcpy(dst + (c * p + dy) * p, img + (gy * p + dy) * S + gx * p,
                           p * sizeof *dst);
            }
        }
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}

/* ===== token embedding ===== */

void hy_tokembed_forward(float *out, const int32_t *ids, const float *w, size_t N, size_t D) {
    uint64_t t0 = hy_prof_t0();
    if (hy_omp_par(N * D > PAR_MIN)) {   /* (no nested region of one thread: base.h) */
#pragma omp parallel for schedule(static)
        for (size_t n = 0; n < N; n++)
            memcpy(out + n * D, w + (size_t)ids[n] * D, D * sizeof *out);
    } else {
        for (size_t n = 0; n < N; n++)
            memcpy(out + n * D, w + (size_t)ids[n] * D, D * sizeof *out);
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}

void hy_tokembed_backward(float *dw, const float *dout, const int32_t *ids, size_t N, size_t D) {
    uint64_t t0 = hy_prof_t0();
    /* serial over n: repeated ids must accumulate in a fixed order */
    for (size_t n = 0; n < N; n++) {
        float *d = dw + (size_t)ids[n] * D;
        const float *g = dout + n * D;
#pragma omp simd
        for (size_t i = 0; i < D; i++) d[i] += g[i];
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}

/* ===== BERT embedding sum ===== */

void hy_bert_embed_forward(float *out, const int32_t *ids, const int32_t *tids, const float *tok,
                           const float *type, const float *pos, size_t N, size_t T, size_t D) {
    hy_tokembed_forward(out, ids, tok, N, D);
    uint64_t t0 = hy_prof_t0();
    for (size_t r = 0; r < N; r++) {
        float *e = out + r * D;
        const float *ps = pos + (r % T) * D;
        if (type) {
            const float *ty = type + (size_t)(tids ? tids[r] : 0) * D;
            for (size_t i = 0; i < D; i++) e[i] = (e[i] + ty[i]) + ps[i];
        } else {
            for (size_t i = 0; i < D; i++) e[i] += ps[i];
        }
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}

/* ===== tanh pooler ===== */

void hy_pooler_forward(float *out, const float *in, const float *w, const float *b, size_t N,
                       size_t D) {
    hy_linear_forward(out, in, w, b, N, D, D);
    for (size_t i = 0; i < N * D; i++) out[i] = tanhf(out[i]);
}

/* ===== [cls; emb] + pos ===== */

/* sample b of hy_embed_assemble_forward */
static void assemble_sample(float *x, const float *emb, const float *cls, const float *pos,
                            size_t b, size_t T, size_t D) {
    float *xb = x + b * T * D;
    for (size_t i = 0; i < D; i++) xb[i] = cls[i] + pos[i];
    const float *e = emb + b * (T - 1) * D;
    for (size_t t = 1; t < T; t++) {
        float *xr = xb + t * D;
        const float *er = e + (t - 1) * D, *pr = pos + t * D;
#pragma omp simd
        for (size_t i = 0; i < D; i++) xr[i] = er[i] + pr[i];
    }
}

void hy_embed_assemble_forward(float *x, const float *emb, const float *cls, const float *pos,
                               size_t B, size_t T, size_t D) {
    uint64_t t0 = hy_prof_t0();
    if (hy_omp_par(B * T * D > PAR_MIN)) {   /* (no nested region of one thread: base.h) */
#pragma omp parallel for schedule(static)
        for (size_t b = 0; b < B; b++) assemble_sample(x, emb, cls, pos, b, T, D);
    } else {
        for (size_t b = 0; b < B; b++) assemble_sample(x, emb, cls, pos, b, T, D);
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}

void hy_embed_assemble_backward(float *demb, float *dcls, float *dpos, const float *dx,
                                size_t B, size_t T, size_t D) {
    uint64_t t0 = hy_prof_t0();
    for (size_t b = 0; b < B; b++) {
        const float *g = dx + b * T * D;
        for (size_t i = 0; i < D; i++) dcls[i] += g[i];
        for (size_t t = 0; t < T; t++) {
            float *dp = dpos + t * D;
            const float *gr = g + t * D;
#pragma omp simd
            for (size_t i = 0; i < D; i++) dp[i] += gr[i];
        }
        if (demb) {
            float *de = demb + b * (T - 1) * D;
            for (size_t t = 1; t < T; t++) {
                float *dr = de + (t - 1) * D;
                const float *gr = g + t * D;
#pragma omp simd
                for (size_t i = 0; i < D; i++) dr[i] += gr[i];
            }
        }
    }
    hy_prof_add(HY_PROF_EMBED, t0, 0);
}
