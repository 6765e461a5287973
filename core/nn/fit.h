/* fit.h: the training loop every trainer runs (classification and ensembles: train.h
 * hy_trainer; MIMO: hydra/mimo.h; MLM pretraining: mlm.h), with the objective as a small vtable,
 * and the progress it fills for the caller to display.
 * Entry points: hy_fit_new / _block / _plan / _release / _start_epoch / _run. */
#ifndef HY_FIT_H
#define HY_FIT_H

#include "data/loader.h"
#include "nn/optim.h"
#include "nn/xfmr.h"

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
    void *ctx;                  /* the trainer, for the objective (a made trainer stays put) */
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
 * AdamW state (its segments: the tensors' decay flags). */
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

#endif
