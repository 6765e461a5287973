/* vilu.h: a learned uncertainty head on a frozen model's features: the trained comparator of the
 * training-free table (DESIGN §3 baselines, experiments/table_training_free.lua).
 *   ViLU-style error predictor (Lafon et al., "ViLU", 2025): input "vilu", loss "bce";
 *   ConfidNet-style confidence head (Corbière et al. 2019): input "features", loss "tcp".
 * The head is a small MLP on the standardised input x:
 *   h1 = GELU(W1 xs + b1),  h2 = GELU(W2 h1 + b2),  u = w3 . h2 + b3,   xs = (x - mean) / std
 * (mean, std per input column, from the training rows; exact-erf GELU as in the model).
 * Inputs (hy_vilu_inputs), from the frozen model's features z = LN_f(x[cls]) (D, the CLS row
 * after the final LayerNorm: hy_xfmr_features) and its logits:
 *   "vilu":     x = [z, w_ŷ, z ∘ w_ŷ] (3D), w_ŷ = head.weight row of the predicted class
 *               ŷ = argmax logits (lowest class on ties). ViLU's second input is the text
 *               embedding of the predicted class; a classifier row is our analog of it (the
 *               class's "embedding" that the logit is the dot product with).
 *   "features": x = z (D).
 * Targets and losses (hy_vilu_targets):
 *   "bce": t = [ŷ != y] (1 = misclassified); weighted binary cross-entropy on logit u with the
 *          class-balance weights w+ = N / (2 n_err), w- = N / (2 n_correct) of the training rows
 *          (ViLU's weighted BCE); uncertainty score s = u.
 *   "tcp": t = softmax(logits)_y, the true-class probability; loss (sigmoid(u) - t)^2 (ConfidNet);
 *          uncertainty score s = -sigmoid(u).
 * Higher s = more likely an error (and, read as an OOD score, more OOD).
 * Entry points: hy_vilu_new / _release / _init, hy_vilu_inputs, hy_vilu_targets,
 * hy_vilu_loss_grad (forward + backward of one batch: the gradient-checked pair), hy_vilu_fit
 * (the whole seeded training loop: AdamW, cosine schedule, shuffled mini-batches),
 * hy_vilu_score, hy_vilu_save / hy_vilu_load. Dimension letters: N rows, D features, K classes,
 * DI input width (3D or D), H hidden width. */
#ifndef HY_VILU_H
#define HY_VILU_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

typedef enum { HY_VILU_INPUT_VILU = 0, HY_VILU_INPUT_FEATURES = 1 } hy_vilu_input;
typedef enum { HY_VILU_LOSS_BCE = 0, HY_VILU_LOSS_TCP = 1 } hy_vilu_loss;

/* "vilu" | "features", "bce" | "tcp"; parse fails naming `key` (e.g. "vilu.input") and the
 * choices. */
const char *hy_vilu_input_name(hy_vilu_input in);
const char *hy_vilu_loss_name(hy_vilu_loss l);
hy_status hy_vilu_input_parse(const char *s, const char *key, hy_vilu_input *out);
hy_status hy_vilu_loss_parse(const char *s, const char *key, hy_vilu_loss *out);
/* Input width DI of `in` over D features: 3D or D. */
size_t hy_vilu_input_dim(hy_vilu_input in, size_t D);

/* Training settings; the same words as the YAML keys vilu.* / confidnet.*. */
typedef struct hy_vilu_fit_config {
    size_t epochs;           /* passes over the training rows, >= 1 */
    size_t batch_size;       /* rows per step, >= 1 (the last batch of an epoch may be smaller) */
    double learning_rate;    /* AdamW peak rate (cosine decay to 0, no warm-up), > 0 */
    double weight_decay;     /* AdamW decoupled decay on W1, W2, w3 (not biases), >= 0 */
    uint64_t seed;           /* init and shuffling */
} hy_vilu_fit_config;

/* The head. params / grads: W1 (H, DI), b1 (H), W2 (H, H), b2 (H), w3 (1, H), b3 (1), each
 * starting at a multiple of 16 floats (offsets in off[]). */
enum { HY_VILU_W1, HY_VILU_B1, HY_VILU_W2, HY_VILU_B2, HY_VILU_W3, HY_VILU_B3, HY_VILU_NT };
typedef struct hy_vilu {
    hy_vilu_input input;
    hy_vilu_loss loss;
    size_t D, DI, H;
    size_t n_params;
    size_t off[HY_VILU_NT];
    float *params, *grads;   /* owned, n_params each */
    float *mean, *std;       /* owned (DI): input standardisation (0 and 1 until fitted) */
} hy_vilu;

/* Allocates a head over D features with hidden width H (params zeroed, mean 0, std 1).
 * HY_EINVAL for D or H == 0, HY_ENOMEM; h zeroed on failure. */
hy_status hy_vilu_new(hy_vilu *h, hy_vilu_input in, hy_vilu_loss loss, size_t D, size_t H);
/* Frees; accepts a zeroed or released head; zeroes h. */
void hy_vilu_release(hy_vilu *h);
/* PyTorch nn.Linear's default init from seed: every weight and bias U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)), each tensor from hy_rng_split(seed, tensor index). */
void hy_vilu_init(hy_vilu *h, uint64_t seed);
/* Name of tensor i (< HY_VILU_NT) in files: "fc1.weight", "fc1.bias", ... "fc3.bias". */
const char *hy_vilu_tensor_name(size_t i);

/* x (N, DI) written from z (N, D) features, logits (N, K), head_w (K, D) the model's
 * head.weight. Never fails. */
void hy_vilu_inputs(float *x, hy_vilu_input in, const float *z, const float *logits,
                    const float *head_w, size_t N, size_t D, size_t K);
/* t (N) written: bce [argmax logits != labels], tcp softmax(logits)_label. labels in [0, K):
 * HY_EINVAL naming the 1-based row otherwise (nothing written). */
hy_status hy_vilu_targets(float *t, hy_vilu_loss loss, const float *logits,
                          const int32_t *labels, size_t N, size_t K);

/* One batch: forward of x (N, DI) raw (standardised inside with h->mean, h->std), the loss
 *   L = (1/N) sum_i w_i l_i,  l_i = bce: softplus(u_i) - t_i u_i;  tcp: (sigmoid(u_i) - t_i)^2
 * into *loss (double), and grads written (not added) = dL/dparams. w (N) per-row weights or
 * NULL (all 1). HY_EINVAL for N == 0, HY_ENOMEM. */
hy_status hy_vilu_loss_grad(hy_vilu *h, const float *x, const float *t, const float *w, size_t N,
                            double *loss);

/* Fits the head on N training rows x (N, DI), targets t (N): sets mean/std from x (std of a
 * constant column = 1), inits params from c->seed, then c->epochs epochs of AdamW (beta 0.9,
 * 0.999, eps 1e-8) over mini-batches of a seeded shuffle; bce weights rows by the class balance
 * above. *final_loss (may be NULL) = the mean training loss of the last epoch. The result does
 * not depend on the thread count. Errors (HY_EINVAL, naming `who`, e.g. "vilu"): N == 0, a bad
 * config, bce targets without both classes ("vilu: the training rows have no misclassified
 * sample (0 of 500): a learned error predictor needs both outcomes"), a non-finite loss. */
hy_status hy_vilu_fit(hy_vilu *h, const float *x, const float *t, size_t N,
                      const hy_vilu_fit_config *c, const char *who, double *final_loss);

/* Uncertainty scores s (N) of raw inputs x (N, DI): bce u, tcp -sigmoid(u). HY_ENOMEM. */
hy_status hy_vilu_score(const hy_vilu *h, const float *x, size_t N, float *s);

/* A head file: /vilu attributes input, loss, d_features, hidden (the format is "hydra-vilu-1"),
 * /vilu/mean, /vilu/std (DI), /params/<fc1.weight ...> in PyTorch [out, in] shapes, plus what
 * the caller adds. save writes into an open file being created; load allocates h (zeroed on
 * failure, messages name the file). */
struct hy_h5;
hy_status hy_vilu_write(struct hy_h5 *f, const hy_vilu *h);
hy_status hy_vilu_read(struct hy_h5 *f, const char *path, hy_vilu *h);

#endif
