/* mimo.h: MIMO (Havasi et al., ICLR 2021) on the hydra transformer, with no engine of its own:
 * M input slots are stacked as the model's input channels and M classifier heads are one head
 * of M K outputs.
 *   model: a vit hy_xfmr with channels = M C_in and n_classes = M K. Slot m is input channels
 *     [m C_in, (m+1) C_in) (the patch projection sums the M images' patch embeddings, each
 *     through its own columns of patch_embed.proj.weight), member m's logits are columns
 *     [m K, (m+1) K) of the head (rows [m K, (m+1) K) of head.weight).
 *   loss: the sum over slots of each slot's mean cross-entropy on its own labels.
 *   training batches (the authors' implementation): a loader batch of b samples is tiled
 *     batch_repetition = r times (R = r b rows) and shuffled once (the main order); slot m takes
 *     the main order with its first floor(R (1 - input_repetition)) rows shuffled again, by its
 *     own stream, and the rest as they are: those rows give every slot the same image.
 *   test: the same image in every slot; member m = head m; p̄ = mean of the members' softmaxes.
 * Datasets are single-channel images (C_in = 1), as everywhere in hydra.
 * Entry points: hy_mimo_loss, hy_mimo_check, hy_mimo_trainer_new / _release (its steps are
 * fit.h's hy_fit_run), hy_mimo_predict, hy_mimo_evaluate. */
#ifndef HY_MIMO_H
#define HY_MIMO_H

#include "nn/train.h"

/* mimo.members, mimo.input_repetition, mimo.batch_repetition */
typedef struct hy_mimo_config {
    size_t members;             /* M >= 1 */
    double input_repetition;    /* rho in [0, 1] */
    size_t batch_repetition;    /* r >= 1 */
} hy_mimo_config;

/* loss = sum over m < M of mean_b CE(logits[b, m K .. (m+1) K), labels[m B + b]) with label
 * smoothing eps (hy_ce_forward's target); logits (B, M K), labels (M, B) slot-major in [0, K).
 * *loss written; dlogits (B, M K) written = dloss/dlogits when not NULL. A bad label fails
 * HY_EINVAL naming slot and row (1-based) before anything is written. */
hy_status hy_mimo_loss(const float *logits, const int32_t *labels, size_t B, size_t M, size_t K,
                       float eps, double *loss, float *dlogits);

/* Model m fits MIMO with M slots on images of ds: vit, channels == M (C_in = 1), n_classes a
 * multiple of M, image size; need_labels: labels in [0, n_classes / M). Messages name mimo.members
 * or the model key. */
hy_status hy_mimo_check(const hy_xfmr *m, size_t M, const hy_dataset *ds, int need_labels);

/* MIMO's objective on the training loop (fit.h hy_fit; fit.loader: batches of
 * b = min(batch_size, n) samples; fit.opt[0]: the model's AdamW state; fit.prog: seen / correct
 * count (row, slot) pairs, loss = mean over slots of their mean cross-entropy). */
typedef struct hy_mimo_trainer {
    hy_fit fit;                 /* first: the Lua box of a trainer is read as its hy_fit */
    hy_train_config cfg;
    hy_mimo_config mc;
    size_t R;                   /* rows per step, b * batch_repetition */
    float *images;              /* owned (R, M, H, W): slot m of row i in channel m */
    int32_t *labels;            /* owned (M, R) */
    int64_t *order;             /* owned (M + 1, R): the main order, then each slot's */
    float *logits, *dlogits;    /* owned (R, M K) */
} hy_mimo_trainer;

/* As hy_trainer_new (same checks and messages for the train/optim settings), for MIMO with
 * mc; hy_mimo_check on the model and data; mimo.input_repetition in [0, 1], mimo.batch_repetition
 * >= 1. Dropout is switched on when the model has any. Epoch 0 is started; t zeroed on failure. */
hy_status hy_mimo_trainer_new(hy_mimo_trainer *t, hy_xfmr *m, const hy_dataset *ds,
                              const hy_train_config *cfg, const hy_mimo_config *mc,
                              const hy_augment *aug);
void hy_mimo_trainer_release(hy_mimo_trainer *t);
/* Train with hy_fit_start_epoch / hy_fit_run on &t->fit: a step assembles the slots, runs the
 * forward and hy_mimo_loss; the slot orders of step s are drawn from hy_hash64(s, seed), so they
 * depend on the seed and the global step only. */

/* Every sample of ds in order, the same image in every slot, in batches of batch_size:
 * member_logits (M, N, K), probs (N, K) = mean over members of softmax, member_probs (M, N, K);
 * any may be NULL. */
hy_status hy_mimo_predict(hy_xfmr *m, size_t M, const hy_dataset *ds, size_t batch_size,
                          float *member_logits, float *probs, float *member_probs);
/* NLL of p̄ (-log of the mean of the members' softmaxes at the label, averaged over samples)
 * and accuracy of argmax p̄ on ds (checkpoint selection). */
hy_status hy_mimo_evaluate(hy_xfmr *m, size_t M, const hy_dataset *ds, size_t batch_size,
                           double *nll, double *acc);

#endif
