/* optim.h: AdamW (decoupled weight decay), the learning-rate schedule and global grad-norm
 * clipping, all over flat float blocks (a model's params/grads; m and v have the same layout).
 * Weight decay is applied per segment: the caller lists [offset, offset+n) ranges with a decay
 * flag (false for norms, biases, embeddings), usually straight from the model's param table. */
#ifndef HY_OPTIM_H
#define HY_OPTIM_H

#include "tensor/base.h"

typedef struct hy_optim_segment {
    size_t offset;          /* first element in the flat block */
    size_t n;               /* number of elements */
    int decay;              /* 1: weight decay applies, 0: never decayed */
} hy_optim_segment;

/* Hyperparameters; the same words as the YAML `optim` section. */
typedef struct hy_adamw_config {
    double learning_rate;   /* peak (base) rate; the schedule scales it per step */
    double beta1, beta2, eps;
    double weight_decay;
} hy_adamw_config;

typedef struct hy_adamw {
    hy_adamw_config cfg;
    size_t n;                   /* elements in the flat block */
    float *m, *v;               /* owned, n each (64-byte aligned), zeroed by new/reset */
    hy_optim_segment *seg;      /* owned copy of the segments */
    size_t nseg;
    int64_t t;                  /* steps taken (the bias-correction exponent) */
} hy_adamw;

/* Checks the hyperparameters; messages name the YAML key, e.g.
 * "optim: beta1 must be in [0, 1) (got 1.5)". */
hy_status hy_adamw_config_check(const hy_adamw_config *c);

/* Builds an optimizer for a flat block of n elements with m = v = 0, t = 0.
 * seg (nseg entries, borrowed and copied) must lie inside [0, n); elements outside every segment
 * are not decayed. Fails on a bad config, a segment out of range, or no memory (o left zeroed). */
hy_status hy_adamw_new(hy_adamw *o, const hy_adamw_config *c, size_t n,
                       const hy_optim_segment *seg, size_t nseg);
/* Frees m, v and the segments; accepts a zeroed object; zeroes o. */
void hy_adamw_release(hy_adamw *o);
/* m = v = 0, t = 0 (a fresh run on the same block). */
void hy_adamw_reset(hy_adamw *o);

/* One AdamW step at rate lr, in torch.optim.AdamW's order:
 *   t += 1;  p *= 1 - lr*wd (decayed segments only);
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 *   params (n) updated in place; grads (n) read. Never fails; elementwise, so the result does
 *   not depend on the thread count. */
void hy_adamw_step(hy_adamw *o, float *params, const float *grads, double lr);

/* Learning-rate schedule. kind: "cosine" (linear warmup, then cosine decay to min_lr at
 * total_steps) or "constant" (linear warmup, then base). step is 0-based; during warmup
 * lr = base * (step+1) / warmup_steps. */
typedef enum { HY_SCHED_COSINE = 0, HY_SCHED_CONSTANT } hy_sched_kind;
typedef struct hy_schedule {
    hy_sched_kind kind;
    double base_lr, min_lr;
    int64_t warmup_steps, total_steps;
} hy_schedule;
/* Parses "cosine" | "constant"; unknown names fail naming optim.schedule and the choices. */
hy_status hy_sched_parse(const char *name, hy_sched_kind *out);
double hy_sched_lr(const hy_schedule *s, int64_t step);
/* The schedule of a run of `epochs` epochs of per_epoch steps with warmup_epochs of linear
 * warmup (rounded to whole steps): every trainer's plan (train.*, mimo, pretrain.*). */
hy_schedule hy_sched_plan(hy_sched_kind kind, double base_lr, double min_lr, size_t epochs,
                          double warmup_epochs, size_t per_epoch);

/* Global L2 norm of grads (n), accumulated in double, in an order fixed by n (blocks, lanes:
 * optim.c), on the threads for large n: the same bits with any thread count. */
double hy_grad_norm(const float *grads, size_t n);
/* If max_norm > 0 and the norm exceeds it, scales grads by max_norm / (norm + 1e-6) as
 * torch.nn.utils.clip_grad_norm_ does. Returns the norm before clipping (non-finite when a
 * gradient is; grads are then left alone). */
double hy_grad_clip(float *grads, size_t n, double max_norm);

#endif
