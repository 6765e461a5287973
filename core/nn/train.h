/* train.h: the C side of training and inference: the one training loop (hy_fit: N optimisation
 * steps of an epoch, for any objective), the classifier's objective on it (hy_trainer), evaluate
 * a split (mean NLL, accuracy), predict a split (logits, probs). Everything per batch happens
 * here; Lua decides epochs, validation and checkpoint selection. Nothing here prints: the loop
 * fills a hy_progress the caller displays.
 * Entry points: hy_fit_new / _block / _plan / _release / _start_epoch / _run, hy_trainer_new /
 * _release, hy_train_evaluate,
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

/* What the caller shows: filled in by hy_fit_run. Counters with `epoch_` restart at each
 * hy_fit_start_epoch. */
typedef struct hy_progress {
    uint64_t epoch;             /* 0-based */
    int64_t step;               /* optimisation steps done in total */
    int64_t total_steps;        /* epochs * batches per epoch */
    size_t epoch_step;          /* steps done in this epoch */
    size_t epoch_steps;         /* batches per epoch */
    size_t epoch_seen;          /* samples seen in this epoch */
    size_t epoch_correct;       /* argmax == label among them */
    double epoch_loss_sum;      /* sum over samples of the training loss */
    double epoch_seconds;       /* wall time inside hy_fit_run this epoch */
    double loss;                /* last batch's mean loss */
    double lr;                  /* last step's learning rate */
    double grad_norm;           /* last step's norm before clipping */
} hy_progress;

/* ===== the training loop =====
 * One loop for every objective (classification, MIMO, MLM; ensembles and member fine-tuning are
 * classification of an extended or gated model). A step: the loader's next batch of b samples;
 * the dropout stream set from (seed, step) when the model has dropout; the objective's forward
 * (its input, the model's forward, its loss); a non-finite loss stops; the objective's backward;
 * the gradient norm over the trained blocks (one block: hy_grad_clip's; several: the root of
 * the sum of their squared norms), clipped to grad_clip; a non-finite norm stops; AdamW on each
 * block at the scheduled rate; the objective's tally of the epoch counters; the step counted.
 * A stop fails HY_EINVAL "<who>: non-finite loss (nan) at step 12 (epoch 1, batch 12 of 430)"
 * (1-based numbers) with the parameters those before that step. */
typedef struct hy_fit hy_fit;

/* What a trainer optimises; each gets the loop (f->ctx: the trainer) and the batch size b. */
typedef struct hy_fit_objective {
    const char *who;    /* message prefix: "train" | "pretrain" */
    /* Input of the loader's batch, forward and *loss (the mean the progress reports). */
    hy_status (*forward)(hy_fit *f, size_t b, double *loss);
    /* Gradients of that loss into the blocks' grads (zeroing them is the objective's: before
     * whichever of forward and backward adds to them first). */
    hy_status (*backward)(hy_fit *f, size_t b);
    /* After the update: adds the step to f->prog's epoch counters (epoch_seen, epoch_correct,
     * epoch_loss_sum) and sets prog.loss. */
    void (*tally)(hy_fit *f, size_t b, double loss);
} hy_fit_objective;

#define HY_FIT_BLOCKS 2   /* the model and one more (the MLM head) */

struct hy_fit {
    hy_xfmr *model;             /* borrowed; NULL once released */
    const hy_dataset *data;     /* borrowed */
    const hy_fit_objective *obj;
    void *ctx;                  /* the trainer, for the objective */
    hy_loader loader;           /* owned: shuffled batches of the training split */
    size_t n_blocks;            /* parameter blocks trained (hy_fit_block) */
    float *params[HY_FIT_BLOCKS], *grads[HY_FIT_BLOCKS];   /* borrowed */
    size_t n[HY_FIT_BLOCKS];    /* floats of each */
    hy_adamw opt[HY_FIT_BLOCKS];   /* owned: each block's AdamW state */
    hy_schedule sched;
    double grad_clip;           /* 0 = off */
    uint64_t seed;              /* loader order and augmentation, dropout streams */
    hy_progress prog;
};

/* Starts a loop of objective obj (ctx: its trainer) on model m and ds: the loader of batches of
 * batch_size samples (shuffled, augmentation aug or none, from seed). No blocks yet. Fails with f
 * zeroed. */
hy_status hy_fit_new(hy_fit *f, hy_xfmr *m, const hy_dataset *ds, size_t batch_size,
                     const hy_augment *aug, uint64_t seed, double grad_clip,
                     const hy_fit_objective *obj, void *ctx);
/* Adds a trained block: params / grads of n_params floats laid out by tab[n_tensors], with its
 * AdamW state (hy_train_adamw_new). */
hy_status hy_fit_block(hy_fit *f, float *params, float *grads, const hy_param *tab,
                       size_t n_tensors, size_t n_params, const hy_adamw_config *c);
/* Plans the schedule over `epochs` epochs of the loader's batches and starts epoch 0. */
void hy_fit_plan(hy_fit *f, hy_sched_kind kind, double lr, double min_lr, size_t epochs,
                 double warmup_epochs);
/* Frees the loader and the AdamW states; switches the model's dropout off; zeroes f. */
void hy_fit_release(hy_fit *f);
/* Starts epoch `epoch` (0-based): reshuffles and resets the epoch_ counters; the schedule goes
 * on from prog.step (set prog.step and the optimizers' t when resuming). */
void hy_fit_start_epoch(hy_fit *f, uint64_t epoch);
/* Runs up to max_steps steps of the current epoch; *ran receives the number run (< max_steps
 * only at the end of the epoch). */
hy_status hy_fit_run(hy_fit *f, size_t max_steps, size_t *ran);

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
