/* hvp.h: the loss, the gradient and Hessian-vector products of a model over a whole labelled
 * dataset, for measuring the paper's Proposition 1 (experiments/prop1.lua): ||grad L_D(theta)||,
 * grad L_Dn(theta)^T dtheta and dtheta^T (H_n - H_t) dtheta along a pruning perturbation dtheta.
 *
 * L(theta) = (1/N) sum_i CE(f(x_i; theta), y_i) over every row of the dataset (no label
 * smoothing; dropout as the model has it set: callers switch it off). Gradients are the model's
 * own float backward, batch by batch, accumulated in double with weights B/N, so the result does
 * not depend on the batch size beyond float rounding, nor on the thread count at all.
 *
 * H v is a central difference of these exact gradients along v:
 *     H v ~ (grad L(theta + h u) - grad L(theta - h u)) * |v| / (2 h),   u = v / |v|,
 * with h the length of the parameter perturbation (the parameters are float32, so theta +- h u
 * is rounded to float; choose h well above float resolution of |theta|, e.g. 1e-3 |theta|). The
 * error is O(h^2) (third derivatives) plus the float noise of the gradients divided by h.
 * tests/c/test_hvp.c checks it against the exact double-precision Hessian of the classifier
 * head (analytic for softmax cross-entropy) and for symmetry on the whole model. */
#ifndef HY_HVP_H
#define HY_HVP_H

#include <stddef.h>

#include "tensor/base.h"
#include "data/loader.h"
#include "nn/xfmr.h"

/* Mean loss of m over every row of ds (batches of batch_size >= 1, in order) into *loss and,
 * when grad != NULL, its gradient d loss / d params into grad [m->n_params] (written; padding
 * between tensors is 0). Overwrites m->grads and m->dgates. Rows labelled -1 (OOD sets) fail
 * HY_EINVAL naming the row; an empty dataset fails HY_EINVAL. */
hy_status hy_hvp_grad(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, double *loss,
                      double *grad);

/* H v of the loss of hy_hvp_grad, by central differences with perturbation length h > 0 (see
 * the header), into hv [m->n_params] (written). v [m->n_params] in double; v = 0 gives hv = 0
 * without any pass. m->params are restored bit-exactly before returning (also on failure).
 * *loss_out, when non-NULL, gets the mean of the losses at theta +- h u (= L(theta) + O(h^2)).
 * HY_EINVAL for h <= 0 or not finite, or a non-finite v. */
hy_status hy_hvp(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, const double *v, double h,
                 double *hv, double *loss_out);

/* Folds the head gates into the output projections: the columns of blocks.{l}.attn.proj.weight
 * that read head h of layer l are multiplied by gate[l][h], and every gate is set to 1. The
 * forward is unchanged (the gate multiplies the head's output before that projection; for gates
 * 0 and 1 exactly), so a pruned model becomes a point theta + dtheta of the unpruned model's
 * parameter space, in which Proposition 1 is stated. */
void hy_hvp_fold_gates(hy_xfmr *m);

#endif
