/* layers.h: the transformer's non-attention kernels, each a forward/backward pair:
 * linear, layernorm, exact-erf GELU and its tanh approximation, softmax, softmax + cross-entropy,
 * dropout, patch and token embedding, the [cls; x] + pos assembly.
 * Argument order (CONVENTIONS §3.4):
 *   forward  (outputs, saved-for-backward, inputs, weights, sizes)   -- overwrites its outputs
 *   backward (input grads, weight grads, dout, forward inputs/saved, weights, sizes) -- adds (+=)
 * Kernels never allocate or fail; callers validate shapes. Weights are PyTorch [out,in].
 * In-place: forward outputs may alias inputs only where a contract says so.
 * Orders that fix the bits: GELU runs 16 lanes at a time (vmath.h hy_erf16 / hy_exp16), then at
 * most one block of 8, then the scalar tail, every lane doing the scalar function's operations,
 * so any split gives the same bits; a LayerNorm row is summed in 16-lane partial sums, then a
 * fixed tree over the lanes, then the < 16 left over in order; weight-gradient sums (LayerNorm
 * dW/db by 32-column blocks, bias gradients) run over the rows in order. None depends on the
 * vector width or the thread count. */
#ifndef HY_LAYERS_H
#define HY_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/rng.h"

/* ===== linear: out = in W^T + b ===== */
/*   out (N, Dout) written; in (N, Din); w (Dout, Din); b (Dout) or NULL. */
void hy_linear_forward(float *out, const float *in, const float *w, const float *b, size_t N,
                       size_t Din, size_t Dout);
/*   din (N, Din) += dout W (skipped when din is NULL); dw (Dout, Din) += dout^T in;
 *   db (Dout) += column sums of dout (skipped when NULL); dout (N, Dout). */
void hy_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                        const float *w, size_t N, size_t Din, size_t Dout);
/*   the same with din (N, Din) written = dout W (no zeroing needed; din must not be NULL). */
void hy_linear_backward_set(float *din, float *dw, float *db, const float *dout,
                            const float *in, const float *w, size_t N, size_t Din, size_t Dout);
/*   out (N, Dout) written = res + in W^T + b, the residual add fused in (res is copied with the
 *   bias before the GEMM adds into it: beta = 1); res may be out; b must not be NULL. */
void hy_linear_forward_res(float *out, const float *in, const float *w, const float *b,
                           const float *res, size_t N, size_t Din, size_t Dout);

/*   out (N, Dout) written = [res +] in W^T + b (res may be NULL, or out), then ln_out (N, Dout),
 *   ln_mean, ln_rstd (N) written = hy_layernorm_forward of out (ln_w, ln_b, eps): each tile's
 *   rows normalised right after its product, while in cache, when the product's tiles span
 *   whole rows (else the LayerNorm runs after the product). Bitwise the two calls;
 *   b must not be NULL; ln_out must not overlap out, in or res. */
void hy_linear_forward_res_ln(float *out, float *ln_out, float *ln_mean, float *ln_rstd,
                              const float *in, const float *w, const float *b, const float *res,
                              const float *ln_w, const float *ln_b, float eps, size_t N,
                              size_t Din, size_t Dout);

/*   A transformer block at inference or in the training forward, bitwise its kernels one after
 *   another:
 *     qkv (B T, 3D) = in W_qkv^T + b_qkv;  ao (B T, D) = hy_attn_forward(qkv, gate, kvalid) (no
 *     probabilities kept);  xm (B T, D) = res + ao W_proj^T + b_proj (res may be xm: in place);
 *     ln2, ln2_mean, ln2_rstd = hy_layernorm_forward(xm);  xo = hy_mlp_infer(ln2) + xm (xo may
 *     be xm), and, when ln1 is non-NULL, ln1, ln1_mean, ln1_rstd = the next block's LN1 of xo.
 *   When the four products' tiles (hy_gemm_tiling) span whole rows, the same rows, at least two
 *   per thread, each thread runs its contiguous Q/K/V tiles in order into its own window of
 *   scratch ((tile rows + T) x 3D floats per thread, which stays in cache), the attention of each
 *   sample as soon as its rows are there, and each row tile's proj, LN2, MLP and next LN1 as
 *   soon as its rows are attended (the MLP in the thread's tile of h, (N, DM) scratch): one pass
 *   over the rows, in cache. Only the rows of the samples that straddle two threads' tiles are
 *   written to qkv (its other rows are not touched); those samples and the tiles holding them
 *   run after. Returns false, having done nothing, when the shape does not suit (or one thread,
 *   or inside a parallel region, or scratch_floats too small): the caller then runs the kernels.
 *   The training forward (hg non-NULL: what backward reads is kept): qkv is written whole (no
 *   window, no scratch), att (when non-NULL) gets the probabilities, h (N, DM) gets GELU'(z) and
 *   hg (N, DM) GELU(z) of fc1's z, as hy_linear_gelu_d_forward writes them.
 *   in, ln1 (the same buffer: the next LN1 of a tile is written once every product has read its
 *   rows), ln2, h, hg, att, qkv and ao must not overlap xm, xo, res or each other otherwise. */
typedef struct hy_block {
    size_t B, T, D, NH, DM;
    const float *in, *qkv_w, *qkv_b, *gate;
    const int32_t *kvalid;   /* key counts per sample, or NULL */
    float *qkv, *ao;
    float *att;   /* the attention probabilities (B, NH, T, T) kept, or NULL */
    const float *proj_w, *proj_b, *res;
    float *xm;
    float *ln2, *ln2_mean, *ln2_rstd;
    const float *ln2_w, *ln2_b;
    float *h;
    float *hg;   /* NULL: inference (h is scratch); else the training forward (see above) */
    const float *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    float *xo;
    float *ln1, *ln1_mean, *ln1_rstd;   /* NULL: no next LN1 */
    const float *ln1_w, *ln1_b;
    float eps;
    /* dropout (hy_dropout_apply's masks, row r of a site's mask from its stream and r): on
     * proj's output before the residual add (rate p_attn), on GELU's output and on fc2's before
     * its residual add (p_mlp); NULL: none at that site */
    const hy_rng *drop_attn, *drop_fc1, *drop_fc2;
    float p_attn, p_mlp;
} hy_block;
bool hy_block_forward(const hy_block *k, float *scratch, size_t scratch_floats);
/*   The scratch hy_block_forward needs at inference (hg NULL) for up to N rows of T-token
 *   samples of width D on `threads` threads (at most its 64): one window of (tile rows + T) x 3D
 *   floats per thread. With less it runs nothing (the caller's kernels give the same bits). */
size_t hy_block_scratch_floats(size_t N, size_t T, size_t D, size_t threads);

/*   The MLP at inference: out (N, D) written = [res +] GELU(in W1^T + b1) W2^T + b2 (w1 (DM, D),
 *   w2 (D, DM); res may be NULL, or out), then, when ln_out is non-NULL, ln_out (N, D), ln_mean,
 *   ln_rstd (N) = hy_layernorm_forward of out (ln_w, ln_b, eps). h (N, DM) is scratch: when the
 *   products' tiles span whole rows, each thread runs whole row tiles through fc1, GELU, fc2 (and
 *   the LayerNorm) in its own tile of h, which stays in cache (h's other rows are not touched);
 *   otherwise h = GELU(in W1^T + b1) and the second product follow. Bitwise the separate calls
 *   (the same OpenBLAS calls on the same operands). ln_out must not overlap out, in, res or h. */
void hy_mlp_infer(float *out, float *ln_out, float *ln_mean, float *ln_rstd, const float *ln_w,
                  const float *ln_b, float eps, float *h, const float *in, const float *w1,
                  const float *b1, const float *w2, const float *b2, const float *res, size_t N,
                  size_t D, size_t DM);

/*   out (N, Dout) written = in W^T + b, and gelu_out (N, Dout) written = GELU(out) (the MLP's
 *   fc1 + GELU in one pass over each GEMM tile); b must not be NULL. gelu_out may be out (then
 *   it holds GELU(in W^T + b) alone), but not overlap it otherwise. */
void hy_linear_gelu_forward(float *out, float *gelu_out, const float *in, const float *w,
                            const float *b, size_t N, size_t Din, size_t Dout);

/*   The same for training: gelu_out (N, Dout) written = GELU(z), z = in W^T + b, and dgelu
 *   (N, Dout) written = GELU'(z), the derivative the backward needs (z itself is not kept; one
 *   erf serves both, computed while the GEMM tile is in cache); b must not be NULL. Each value
 *   is bitwise what hy_linear_gelu_forward and the GELU' of hy_gelu_backward_set give. */
void hy_linear_gelu_d_forward(float *dgelu, float *gelu_out, const float *in, const float *w,
                              const float *b, size_t N, size_t Din, size_t Dout);
/*   part `part` of `parts` of hy_linear_gelu_d_forward (a small pass's team, as below). */
void hy_linear_gelu_d_forward_part(float *dgelu, float *gelu_out, const float *in,
                                   const float *w, const float *b, size_t N, size_t Din,
                                   size_t Dout, size_t part, size_t parts);

/*   A small pass's team (team.h): part `part` of `parts` of out = [res +] in W^T [+ b] (res
 *   needs b) and, when gelu_out is non-NULL, gelu_out = GELU(out): the product's tiles
 *   hy_team_share gives this part (gemm.h hy_gemm_ex_part), on the calling thread. The parts
 *   together write what hy_linear_forward / _res / hy_linear_gelu_forward write, bitwise. */
void hy_linear_forward_part(float *out, float *gelu_out, const float *in, const float *w,
                            const float *b, const float *res, size_t N, size_t Din, size_t Dout,
                            size_t part, size_t parts);
/*   hy_linear_backward_set with din (N, Din) written = (dout W) * GELU'(hpre) (hpre (N, Din):
 *   the pre-activation whose GELU was this layer's input), the GELU backward fused in. */
void hy_linear_backward_gelu_set(float *din, float *dw, float *db, const float *dout,
                                 const float *in, const float *w, const float *hpre, size_t N,
                                 size_t Din, size_t Dout);
/*   the same with the stored derivative: din = (dout W) * dgelu (dgelu (N, Din) from
 *   hy_linear_gelu_d_forward or hy_gelu_d_forward); bitwise hy_linear_backward_gelu_set. */
void hy_linear_backward_dgelu_set(float *din, float *dw, float *db, const float *dout,
                                  const float *in, const float *w, const float *dgelu, size_t N,
                                  size_t Din, size_t Dout);

/* ===== layernorm over the last axis, eps given ===== */
/*   out (N, D) written; mean, rstd (N) written (saved); x (N, D); w, b (D). out may alias x. */
void hy_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, size_t N, size_t D, float eps);
/*   dx (N, D) +=; dw, db (D) +=; dout (N, D); x, mean, rstd from forward; w (D). */
void hy_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                           const float *mean, const float *rstd, const float *w, size_t N,
                           size_t D);

/* hy_linear_backward_set (din = dout W, dW += dout^T in, db += its column sums) followed by
 * hy_layernorm_backward of din (dx += LN backward; ln_dw, ln_db += its weight grads), in one
 * OpenMP region: each of the product's row tiles gets its rows' LayerNorm backward while in
 * cache, then the weight products and the LayerNorm's column sums share the threads. Bitwise
 * the two calls (every product the same tile, every sum in the same order). */
void hy_linear_backward_ln(float *dx, float *ln_dw, float *ln_db, const float *x,
                           const float *mean, const float *rstd, const float *ln_w, float *din,
                           float *dw, float *db, const float *dout, const float *in,
                           const float *w, size_t N, size_t Din, size_t Dout);

/* ===== GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2)) ===== */
/*   out (n) written; x (n). out may alias x only if the caller does not need x for backward. */
void hy_gelu_forward(float *out, const float *x, size_t n);
/*   dx (n) += dout * gelu'(x). dx may alias dout (then it holds dout + dout*gelu'; callers that
 *   want dout*gelu' alone pass a zeroed dx). */
void hy_gelu_backward(float *dx, const float *dout, const float *x, size_t n);
/*   dx (n) written = dout * gelu'(x); dx may alias dout. */
void hy_gelu_backward_set(float *dx, const float *dout, const float *x, size_t n);
/*   out (n) written = GELU(x), then xd (n) = GELU'(x) in place of x (training: the backward
 *   needs only the derivative); out must not overlap xd. */
void hy_gelu_d_forward(float *out, float *xd, size_t n);
/*   dx (n) written = dout * dgelu (a stored GELU'); dx may alias dout. Bitwise
 *   hy_gelu_backward_set of the pre-activation dgelu was computed from. */
void hy_gelu_backward_d_set(float *dx, const float *dout, const float *dgelu, size_t n);

/* ===== GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) =====
 * (HF "gelu_new" / "gelu_pytorch_tanh"; the model's act gelu_tanh) */
/*   out (n) written; x (n); out may alias x. */
void hy_gelu_tanh_forward(float *out, const float *x, size_t n);
/*   dx (n) written = dout * gelu_tanh'(x); dx may alias dout. */
void hy_gelu_tanh_backward_set(float *dx, const float *dout, const float *x, size_t n);

/* ===== softmax over rows ===== */
/*   out (N, K) written; x (N, K); max starts at -INFINITY, an all -inf row gives zeros. */
void hy_softmax_forward(float *out, const float *x, size_t N, size_t K);
/* The double-accumulating twin, for predictions: probs (n, k) = softmax(logits (n, k)) row by
 * row, max-shifted, sum of exp in double, each p = exp(x - max) / sum rounded once. */
void hy_softmax_rows(float *probs, const float *logits, size_t n, size_t k);
/* log sum_c exp(z_c) of one row z (n) in double (max-shifted); -INFINITY for an all -inf row.
 * Metrics (NLL from logits, energy) and the circuit search's NLL / MSP use it. */
double hy_logsumexp(const float *z, size_t n);

/* ===== softmax + cross-entropy, mean over rows, label smoothing eps ===== */
/* target_c = (1 - eps) [c == y] + eps / K.  loss = mean_n sum_c -target_c log softmax(x_n)_c.
 *   loss (1) written (double); probs (N, K) written (saved); logits (N, K); labels (N) in [0,K). */
void hy_ce_forward(double *loss, float *probs, const float *logits, const int32_t *labels,
                   size_t N, size_t K, float eps);
/*   dlogits (N, K) += dloss * (probs - target) / N. */
void hy_ce_backward(float *dlogits, double dloss, const float *probs, const int32_t *labels,
                    size_t N, size_t K, float eps);

/* ===== dropout ===== */
/* Element (r, c) of a (rows, cols) site is dropped iff hy_ctr_bits24(k_r, c) < ceil(p 2^24),
 * k_r = hy_rng_split_key(stream, r) (rng.h): probability p (rounded up to a multiple of 2^-24);
 * kept elements are scaled by 1/(1-p). The mask is a pure function of (stream, r, c): it does not
 * depend on the thread count, vectorises, and is drawn again in backward instead of stored.
 * p in [0, 1); cols < 2^32. */
/*   mask (rows, cols) written: 0 or 1/(1-p) (the mask itself, for tests and references). */
void hy_dropout_mask(float *mask, const hy_rng *stream, size_t rows, size_t cols, float p);
/*   out (rows, cols) written = x * mask, or res + x * mask when res != NULL; out may alias x or
 *   res. Also the backward of dropout (dx = dout * mask: the same product). */
void hy_dropout_apply(float *out, const float *x, const float *res, const hy_rng *stream,
                      size_t rows, size_t cols, float p);
/* With a stored mask (mask from hy_dropout_mask): */
/*   out (n) written = x * mask; out may alias x. */
void hy_dropout_forward(float *out, const float *x, const float *mask, size_t n);
/*   dx (n) += dout * mask. */
void hy_dropout_backward(float *dx, const float *dout, const float *mask, size_t n);

/* ===== patch embedding (ViT): a stride-p conv written as im2col + linear ===== */
/* patches (B, NP, Cin*p*p) written: patch n = (row n / G, col n % G), G = S/p, flattened in
 * (channel, dy, dx) order so that W (D, Cin, p, p) is the linear weight (D, Cin*p*p).
 *   images (B, Cin, S, S). */
void hy_patch_extract(float *patches, const float *images, size_t B, size_t Cin, size_t S,
                      size_t p);

/* ===== token embedding ===== */
/*   out (N, D) written = W[ids[n]]; ids (N) in [0, V); W (V, D). */
void hy_tokembed_forward(float *out, const int32_t *ids, const float *w, size_t N, size_t D);
/*   dw (V, D) += scatter of dout (N, D) by ids. */
void hy_tokembed_backward(float *dw, const float *dout, const int32_t *ids, size_t N, size_t D);

/* ===== BERT embedding sum (text_embed bert) ===== */
/*   out (N, D) written = (tok[ids[n]] + type[tids[n]]) + pos[n % T] (HF's order of the sums);
 *   type NULL: tok[ids[n]] + pos[n % T]; tids NULL: every type 0. ids (N) in [0, V), tids (N)
 *   in [0, type_vocab); tok (V, D), type (type_vocab, D), pos (T, D); N a multiple of T. */
void hy_bert_embed_forward(float *out, const int32_t *ids, const int32_t *tids, const float *tok,
                           const float *type, const float *pos, size_t N, size_t T, size_t D);

/* ===== tanh pooler (pooler tanh) ===== */
/*   out (N, D) written = tanh(in W^T + b); in (N, D), W (D, D), b (D); out must not alias in. */
void hy_pooler_forward(float *out, const float *in, const float *w, const float *b, size_t N,
                       size_t D);

/* ===== [cls; emb] + pos ===== */
/*   x (B, T, D) written: x[b,0] = cls + pos[0], x[b,t] = emb[b,t-1] + pos[t] (t >= 1);
 *   emb (B, T-1, D); cls (D); pos (T, D) (the first T rows of pos_embed). */
void hy_embed_assemble_forward(float *x, const float *emb, const float *cls, const float *pos,
                               size_t B, size_t T, size_t D);
/*   demb (B, T-1, D) +=, dcls (D) +=, dpos (T, D) +=; dx (B, T, D). */
void hy_embed_assemble_backward(float *demb, float *dcls, float *dpos, const float *dx,
                                size_t B, size_t T, size_t D);

#endif
