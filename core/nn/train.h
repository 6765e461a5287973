/* train.h: the C side of classifier training and inference: the classifier's objective on the
 * training loop (hy_trainer on fit.h's hy_fit), evaluate a split (mean NLL, accuracy), predict a
 * split (logits, probs). Everything per batch happens here; Lua decides epochs, validation and
 * checkpoint selection. Nothing here prints: the loop fills a hy_progress the caller displays.
 * Entry points: hy_trainer_new / _release, hy_train_evaluate,
 * hy_train_predict, hy_train_ensure_acts (the softmax of predictions is layers.h's
 * hy_softmax_rows). */
#ifndef HY_TRAIN_H
#define HY_TRAIN_H

#include "io/h5.h"
#include "data/loader.h"
#include "nn/fit.h"
#include "nn/optim.h"
#include "nn/xfmr.h"

/* The resolved `train` + `optim` settings (YAML words; a fine-tuning run takes finetune.epochs,
 * finetune.warmup_epochs and finetune.learning_rate in their place: lua/bind/nn/l_train.c). */
typedef struct hy_train_config {
    size_t epochs;              /* train.epochs | finetune.epochs (>= 1); the schedule's length */
    size_t batch_size;          /* train.batch_size */
    double warmup_epochs;       /* train.warmup_epochs | finetune.warmup_epochs (fractional ok) */
    double grad_clip;           /* train.grad_clip; 0 = off */
    double label_smoothing;     /* train.label_smoothing in [0, 1) */
    hy_adamw_config optim;      /* optim.learning_rate (| finetune.learning_rate), optim.beta1,
                                 * optim.beta2, optim.eps, optim.weight_decay */
    hy_sched_kind schedule;     /* optim.schedule */
    double min_lr;              /* optim.min_lr */
    uint64_t seed;              /* seed: shuffling, augmentation and dropout streams */
} hy_train_config;


/* ===== classification ===== */

/* The classifier's objective: label-smoothed cross-entropy of the model's logits (an ensemble:
 * the mean of its members', hy_xfmr_loss); the epoch's accuracy of argmax (an ensemble: of
 * p̄). fit.opt[0] is the model's AdamW state. */
typedef struct hy_trainer {
    hy_fit fit;                 /* first: the Lua box of a trainer is read as its hy_fit */
    hy_train_config cfg;
    float *logits, *dlogits;    /* owned [batch_size, K] */
} hy_trainer;

/* Prepares training of m on ds: checks the config and that ds matches the model (image size /
 * channels 1 for vit, text for text models; labels in [0, K)), builds the loader (shuffled,
 * augmentation aug or none), the AdamW state (decay segments from the param table), sizes the
 * model's activations for batch_size (hy_train_ensure_acts) and switches dropout on.
 * Epoch 0 is started. Fails with t zeroed; messages name the YAML key or the sample. */
hy_status hy_trainer_new(hy_trainer *t, hy_xfmr *m, const hy_dataset *ds,
                         const hy_train_config *cfg, const hy_augment *aug);
/* Frees what the trainer owns (not the model or the data); switches the model's dropout off.
 * Train with hy_fit_start_epoch / hy_fit_run on &t->fit. */
void hy_trainer_release(hy_trainer *t);

/* Checks the train.* / optim.* settings every classifier trainer shares (epochs, batch_size,
 * warmup_epochs, grad_clip, label_smoothing, min_lr); messages name the YAML key. */
hy_status hy_train_config_check(const hy_train_config *cfg);

/* A classifier trainer's resumable state (hy_trainer, hy_mimo_trainer), written into a
 * checkpoint file being made after hy_ckpt_write: /train_state/adam_m, /train_state/adam_v
 * (o->n floats each) and attributes step (optimisation steps done, p->step) and adam_t (the
 * bias-correction exponent) on /train_state. Reading checks the shapes and that step lies in
 * [0, p->total_steps], and restores them; with the parameters read back (hy_ckpt_read_params)
 * and the next epoch started, training goes on bitwise as if it had never stopped: the
 * loader's order and the augmentation depend only on seed and epoch, the dropout masks and
 * MIMO's slot orders on seed and step, the schedule on step. */
hy_status hy_train_state_write(hy_h5 *f, const hy_adamw *o, const hy_progress *p);
hy_status hy_train_state_read(hy_h5 *f, hy_adamw *o, hy_progress *p);

/* Makes sure m's training activations hold batches of B samples (hy_xfmr_alloc_acts,
 * reallocated only when smaller). Evaluation and prediction use hy_xfmr_ensure_infer. */
hy_status hy_train_ensure_acts(hy_xfmr *m, size_t B);
/* The current batch of ld as the model's input: images, or ids / lengths / len; it borrows the
 * loader's buffers (valid until the next fill). */
void hy_train_input(const hy_loader *ld, hy_batch *out);

/* Mean NLL (natural log, averaged over samples) and accuracy of m on ds, in batches of
 * batch_size, with dropout as currently set (an ensemble: of p̄, the mean of its members'
 * softmaxes). Samples labelled -1 are not allowed
 * (HY_EINVAL naming the sample). */
hy_status hy_train_evaluate(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, double *nll,
                            double *acc);
/* Forward over every sample of ds in order: logits [N,K] and probs [N,K] (softmax, either may
 * be NULL); an ensemble of M members (hy_xfmr_members) writes its members' [M,N,K]. Dropout as
 * currently set (on = one MC sample). */
hy_status hy_train_predict(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, float *logits,
                           float *probs);

/* hy_train_predict that also writes features [N,D] (hy_xfmr_features: the CLS row after the
 * final LayerNorm) from the same forward; any output may be NULL. */
hy_status hy_train_features(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, float *features,
                            float *logits, float *probs);

#endif
