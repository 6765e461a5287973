/* train.h: the C side of training and inference: run N optimisation steps of an epoch, evaluate
 * a split (mean NLL, accuracy), predict a split (logits, probs). Everything per batch happens
 * here; Lua decides epochs, validation and checkpoint selection. Nothing here prints: the
 * trainer fills a hy_progress the caller displays.
 * Entry points: hy_trainer_new / _release / _start_epoch / _run, hy_train_evaluate,
 * hy_train_predict, hy_train_ensure_acts (the softmax of predictions is layers.h's
 * hy_softmax_rows). */
#ifndef HY_TRAIN_H
#define HY_TRAIN_H

#include "io/h5.h"
#include "data/loader.h"
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

/* What the caller shows: filled in by hy_trainer_run. Counters with `epoch_` restart at each
 * hy_trainer_start_epoch. */
typedef struct hy_progress {
    uint64_t epoch;             /* 0-based */
    int64_t step;               /* optimisation steps done in total */
    int64_t total_steps;        /* epochs * batches per epoch */
    size_t epoch_step;          /* steps done in this epoch */
    size_t epoch_steps;         /* batches per epoch */
    size_t epoch_seen;          /* samples seen in this epoch */
    size_t epoch_correct;       /* argmax == label among them */
    double epoch_loss_sum;      /* sum over samples of the training loss */
    double epoch_seconds;       /* wall time inside hy_trainer_run this epoch */
    double loss;                /* last batch's mean loss */
    double lr;                  /* last step's learning rate */
    double grad_norm;           /* last step's norm before clipping */
} hy_progress;

typedef struct hy_trainer {
    hy_xfmr *model;             /* borrowed */
    const hy_dataset *data;     /* borrowed */
    hy_train_config cfg;
    hy_loader loader;           /* owned */
    hy_adamw opt;               /* owned */
    hy_schedule sched;
    float *logits, *dlogits;    /* owned [batch_size, K] */
    hy_progress prog;
} hy_trainer;

/* Prepares training of m on ds: checks the config and that ds matches the model (image size /
 * channels 1 for vit, text for text models; labels in [0, K)), builds the loader (shuffled,
 * augmentation aug or none), the AdamW state (decay segments from the param table), sizes the
 * model's activations for batch_size (hy_train_ensure_acts) and switches dropout on.
 * Epoch 0 is started. Fails with t zeroed; messages name the YAML key or the sample. */
hy_status hy_trainer_new(hy_trainer *t, hy_xfmr *m, const hy_dataset *ds,
                         const hy_train_config *cfg, const hy_augment *aug);
/* Frees what the trainer owns (not the model or the data); switches the model's dropout off. */
void hy_trainer_release(hy_trainer *t);
/* Starts epoch `epoch` (0-based): reshuffles and resets the epoch_ counters. */
void hy_trainer_start_epoch(hy_trainer *t, uint64_t epoch);
/* Runs up to max_steps steps of the current epoch (forward, loss, backward, clip, AdamW).
 * *ran receives the number run (< max_steps only at the end of the epoch). A non-finite loss
 * or gradient norm stops with HY_EINVAL "train: non-finite loss (nan) at step 12 (epoch 1,
 * batch 12 of 430)" (1-based numbers); the parameters are those before that step. */
hy_status hy_trainer_run(hy_trainer *t, size_t max_steps, size_t *ran);

/* Checks the train.* / optim.* settings every classifier trainer shares (epochs, batch_size,
 * warmup_epochs, grad_clip, label_smoothing, min_lr); messages name the YAML key. */
hy_status hy_train_config_check(const hy_train_config *cfg);
/* AdamW over a parameter block of n_params floats laid out by tab[n_tensors] (a model's or a
 * head's table), with the tensors' decay flags as its segments. */
hy_status hy_train_adamw_new(hy_adamw *o, const hy_adamw_config *c, const hy_param *tab,
                             size_t n_tensors, size_t n_params);

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

/* Makes sure m's activations hold batches of B samples (reallocates only when smaller). */
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
