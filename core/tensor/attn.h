/* attn.h: multi-head self-attention with per-head gates and a key-padding mask (no causal mask:
 * encoders see every token). Fused over (b, h): scores, softmax and the value product for one
 * head stay in L1; parallelised with OpenMP over B x NH. Head h of qkv occupies columns
 * [h*HS, (h+1)*HS) of each of the q | k | v thirds (timm's reshape(B,T,3,NH,HS)).
 * scale = 1/sqrt(HS). T <= HY_ATTN_MAX_T.
 * Results do not depend on the thread count or the tiling (every sum in an order fixed by the
 * shape and the key lengths: attn.c), but do depend on the vector width: the 16-lane (AVX-512)
 * and 8-lane summation trees differ, so AVX-512 and AVX2 builds round some scores differently. */
#ifndef HY_ATTN_H
#define HY_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define HY_ATTN_MAX_T 257

/* out  (B, T, C)      written; out[b,t,h*HS..] = gate[h] * sum_j att[b,h,t,j] v[b,j,h]
 * att  (B, NH, T, T)  written; softmax probabilities (saved for backward); masked keys get 0;
 *                     NULL: not written (inference: nothing reads them)
 * qkv  (B, T, 3C)     read
 * gate (NH)           read; every head is computed, also at gate 0 (dgate needs it)
 * kvalid (B) or NULL  keys j >= kvalid[b] are masked (1 <= kvalid[b] <= T); NULL: none masked
 * Rows t >= kvalid[b] are padding as queries too: their out rows are written as zeros and their
 * att rows are left unwritten (backward never reads them), and no product touches them, so the
 * work is sum_b kvalid[b]^2, not B T^2. The valid rows' results are bitwise those of computing
 * the padding rows: a masked key contributes exactly 0, and nothing valid reads a padding query
 * (the encoder's outputs are read at CLS and at real tokens only).
 * Never allocates or fails; the caller has checked shapes. */
void hy_attn_forward(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH);

/* The matrix products inside a pass (forward: q k^T and A v; backward: dout v^T, A^T dout, dS k
 * and dS^T q) as prof.h's class HY_PROF_ATTN_MM: the CPU ns they took and their multiply-adds
 * times 2 over the valid rows and keys (the few queries or keys of the row path, a transposed
 * reduction of dot products, are not counted: they stay in HY_PROF_ATTN). Zero with the timers
 * off. hy_attn_forward and hy_attn_backward record both classes themselves. */
typedef struct hy_attn_cost {
    uint64_t ns, flops;
} hy_attn_cost;

/* A small pass's team (team.h), or a caller's own region: the (sample, head) pairs
 * hy_team_share gives part `part` of `parts` of B * NH, on the calling thread; the parts
 * together write what hy_attn_forward writes, bitwise. Records nothing: returns its products'
 * cost for a caller that times the call (the rest of the call's time is HY_PROF_ATTN). */
hy_attn_cost hy_attn_forward_part(float *out, float *att, const float *qkv, const float *gate,
                          const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH,
                          size_t part, size_t parts);

/* Writes dqkv (B, T, 3C) (no zeroing needed; it may hold NaN) and adds (+=) into dgate (NH);
 * dout (B, T, C).
 * dgate[h] += sum over b and t < kvalid[b] of dout_h . y_h, y_h the ungated head output
 * recomputed from att and v (the Taylor head-importance score). A head with gate[h] == 0 is
 * skipped: its q/k/v slices of dqkv are exactly zero, and so are the q/k/v rows of the padding
 * rows t >= kvalid[b] (forward wrote them as constants; dout's padding rows are not read).
 * scratch: B*NH floats (per-(b,h) dgate partials, summed in a fixed order: deterministic). */
void hy_attn_backward(float *dqkv, float *dgate, const float *dout, const float *qkv,
                      const float *att, const float *gate, const int32_t *kvalid,
                      float *scratch, size_t B, size_t T, size_t C, size_t NH);

#endif
