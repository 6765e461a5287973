/* ref_xfmr.h: the naive double-precision twin of hy_xfmr_forward (the whole model), reading
 * the float parameters and gates of a built model. Dropout masks, when the model has dropout
 * switched on, are regenerated exactly as hy_xfmr_forward draws them for drop_step `step`. */
#ifndef HY_REF_XFMR_H
#define HY_REF_XFMR_H

#include <stdbool.h>

#include "nn/xfmr.h"

/* x (B, T, D) written: the last residual stream x_L (before LN_f), T = the forward's length.
 * Every option of the schema (xfmr.h: norm, act, pooler, text_embed, type_vocab, ln_eps) is
 * followed, written from its definition. */
void ref_xfmr_hidden(const hy_xfmr *m, const hy_batch *in, size_t B, bool dropout,
                     uint64_t step, double *x);
/* logits (B, K) written. Allocates its own temporaries (test code). */
void ref_xfmr_forward(const hy_xfmr *m, const hy_batch *in, size_t B, bool dropout,
                      uint64_t step, double *logits);

#endif
