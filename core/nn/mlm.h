/* mlm.h: masked-language-model pretraining of the text encoder (BERT's recipe): the masking of a
 * batch, the MLM head and its loss/backward, and the pretraining trainer (epoch steps, held-out
 * evaluation). Entry points: hy_mlm_mask; hy_mlm_new / _release / _init / _table; hy_mlm_loss;
 * hy_mlm_write / _read; hy_mlm_trainer_new / _release / _write_state / _read_state (its steps
 * are fit.h's hy_fit_run); hy_mlm_evaluate.
 *
 * The head (BERT's BertLMPredictionHead on a pre-LN encoder), on each predicted position t of
 * the encoder's last residual stream x_L (B, T, D) (row 1 + t; CLS is never predicted):
 *   a = LN_f(x_L[t])                  the model's final norm (norm.weight/.bias), shared with
 *                                     the classifier, so pretraining trains it too
 *   u = LN_m(GELU(a W_d^T + b_d))     mlm.transform.dense.weight (D, D), .bias (D),
 *                                     mlm.transform.norm.weight (D), .bias (D)
 *   z = u E^T + b_v                   decoder TIED to tok_embed.weight E (V, D); mlm.bias (V)
 *   loss = mean over predicted positions of cross-entropy(z, original id)
 * The head's own tensors live in one flat block (hy_mlm.params/grads, 64-byte aligned tensors,
 * the table order above); E and LN_f are the model's, and the backward adds into the model's
 * grads. Messages name the pretrain.* keys. */
#ifndef HY_MLM_H
#define HY_MLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/h5.h"
#include "data/loader.h"
#include "nn/optim.h"
#include "nn/train.h"
#include "nn/xfmr.h"

/* BERT's masking: each token of a row (positions < length) is chosen with probability
 * mask_rate (a row with tokens but none chosen gets one, uniformly); a chosen token is replaced
 * by [MASK] with probability mask_token, by a uniformly random word id in
 * [HY_TOK_NRESERVED, V) with probability random_token, else kept. The YAML words
 * pretrain.mask_rate, pretrain.mask_token, pretrain.random_token. */
typedef struct hy_mlm_mask_config {
    double mask_rate;       /* in (0, 1] */
    double mask_token;      /* in [0, 1], mask_token + random_token <= 1 */
    double random_token;    /* in [0, 1] */
} hy_mlm_mask_config;

/* Checks the three rates; messages name the key: "pretrain: mask_rate must be in (0, 1] (got 0)". */
hy_status hy_mlm_mask_check(const hy_mlm_mask_config *c);

/* Masks a batch. ids / lengths / index: the loader's batch (B rows of row stride len, dataset
 * index of each row); out (B, len) written: the model's input; targets (B, len) written: the
 * original id at chosen positions, -1 elsewhere (padding included). Row b draws from a stream
 * seeded by (seed, stream, index[b]) only, so a sample's masks depend neither on the batch it
 * lands in nor on the thread count (stream: the epoch in training, a fixed value for the
 * held-out evaluation). V > HY_TOK_NRESERVED (HY_ASSERT). Returns the positions chosen. */
size_t hy_mlm_mask(int32_t *out, int32_t *targets, const int32_t *ids, const int32_t *lengths,
                   const int64_t *index, size_t B, size_t len, size_t V,
                   const hy_mlm_mask_config *c, uint64_t seed, uint64_t stream);

/* Tensors of the head, in block order. */
enum { HY_MLM_DENSE_W, HY_MLM_DENSE_B, HY_MLM_NORM_W, HY_MLM_NORM_B, HY_MLM_BIAS, HY_MLM_N };

/* Rows of the decoder GEMM per chunk (the logits of RC rows x V are all that is held). */
#define HY_MLM_CHUNK 256

typedef struct hy_mlm {
    size_t D, V;
    hy_param table[HY_MLM_N];  /* names "mlm.transform.dense.weight", ..., "mlm.bias" */
    size_t n_params;           /* floats in params / grads (with alignment padding) */
    float *params, *grads;     /* owned, 64-byte aligned; backward adds into grads */
    float *w[HY_MLM_N];        /* views of params by tensor */
    float *g[HY_MLM_N];        /* views of grads */
    /* per-row scratch for up to N_cap predicted positions (hy_mlm_loss grows it) */
    size_t N_cap;
    float *block;              /* owned: every buffer below points into it */
    float *xs, *a, *a_mean, *a_rstd, *h, *gl, *u, *u_mean, *u_rstd, *du, *dg, *da;
    float *z;                  /* (HY_MLM_CHUNK, V) logits, then probabilities, then dlogits */
    int64_t *rows;             /* [N_cap] row of x_L (b * T + 1 + t) of each position */
    int32_t *tgt;              /* [N_cap] target id */
} hy_mlm;

/* A head for a text model config c (d_model D, vocab_size V): params and grads zeroed, no
 * scratch. HY_ECONFIG for a vit config, HY_ENOMEM. h zeroed on failure. */
hy_status hy_mlm_new(hy_mlm *h, const hy_xfmr_config *c);
/* Frees everything; accepts a zeroed or released head; zeroes h. */
void hy_mlm_release(hy_mlm *h);
/* Init from seed as hy_xfmr_init does: dense weight trunc-normal(0.02), biases 0, norm weight 1
 * (tensor i draws from hy_rng_split(seed, i)). */
void hy_mlm_init(hy_mlm *h, uint64_t seed);
/* Index of a head tensor by name, or -1. */
int64_t hy_mlm_param_index(const hy_mlm *h, const char *name);

/* Loss of the last forward of m (hy_xfmr_forward of B rows at text length len): targets
 * (B, len) as hy_mlm_mask writes them. *loss = mean cross-entropy over the predicted positions
 * (0 when there are none), *correct = positions whose argmax is the target, *n = predicted
 * positions. With backward: adds d(loss)/d(head params) into h->grads, d/d(tok_embed, norm.*)
 * into m->grads, and writes dhidden (B, 1 + len, D) = d(loss)/d(x_L) (the input of
 * hy_xfmr_backward_hidden); dhidden may be NULL otherwise. A target outside [0, V) fails
 * HY_EINVAL naming the row and position (1-based); HY_ENOMEM. */
hy_status hy_mlm_loss(hy_mlm *h, hy_xfmr *m, const int32_t *targets, size_t B, size_t len,
                      bool backward, float *dhidden, double *loss, size_t *correct, size_t *n);

/* The head in a file being written / read (a pretrained checkpoint, PRE.h5, is a model
 * checkpoint, ckpt.h, plus these): /mlm/params/<name> float32 in the table's shapes. Reading
 * checks names, shapes and finiteness as every checkpoint tensor is (hy_ckpt_read_tensor:
 * "ckpt: 'pre.h5' has no tensor 'mlm.bias' (expected shape [8000])"). */
hy_status hy_mlm_write(hy_h5 *f, const hy_mlm *h);
hy_status hy_mlm_read(hy_h5 *f, hy_mlm *h);

/* ===== the pretraining trainer ===== */

/* The resolved pretrain.* settings (pretrain.epochs, .batch_size, .warmup_epochs, .grad_clip,
 * .learning_rate, .min_lr, .schedule and the mask rates; optim.beta1/beta2/eps/weight_decay). */
typedef struct hy_mlm_train_config {
    size_t epochs, batch_size;
    double warmup_epochs, grad_clip, min_lr;
    hy_adamw_config optim;        /* learning_rate = pretrain.learning_rate */
    hy_sched_kind schedule;
    hy_mlm_mask_config mask;
    uint64_t seed;                /* shuffling, masks, dropout */
} hy_mlm_train_config;

/* MLM's objective on the training loop (fit.h hy_fit): two blocks, the model (fit.opt[0]) and
 * the head (fit.opt[1]), clipped together; fit.prog's epoch_seen / epoch_correct count predicted
 * positions. */
typedef struct hy_mlm_trainer {
    hy_fit fit;                   /* first: the Lua box of a trainer is read as its hy_fit */
    hy_mlm *head;                 /* borrowed */
    hy_mlm_train_config cfg;
    int32_t *in_ids, *targets;    /* owned (batch_size, max_len) */
    float *logits, *dhidden;      /* owned (batch_size, K), (batch_size, 1 + max_len, D) */
    size_t correct, n;            /* the last step's predicted positions, and correct ones */
} hy_mlm_trainer;

/* Prepares pretraining of m with head h on the text set ds (labels ignored). Checks the config
 * (keys named), that ds is text within the model's max_len and vocab_size, sizes the
 * activations, builds the optimizers; epoch 0 is started. Fails with t zeroed. */
hy_status hy_mlm_trainer_new(hy_mlm_trainer *t, hy_xfmr *m, hy_mlm *h, const hy_dataset *ds,
                             const hy_mlm_train_config *cfg);
void hy_mlm_trainer_release(hy_mlm_trainer *t);
/* Train with hy_fit_start_epoch / hy_fit_run on &t->fit: a step masks the batch (stream: the
 * epoch), runs the forward and the MLM loss, backward through the head into the model; messages
 * start "pretrain:". */

/* The trainer's resumable state in a file being written (after hy_ckpt_write + hy_mlm_write):
 * /mlm/state/model_m, model_v [n_params of the model], head_m, head_v [n_params of the head],
 * attributes step (optimisation steps done) and adam_t on /mlm/state. Reading restores them
 * (sizes checked; the model's and head's params are read separately) so that the next epoch
 * runs exactly as it would have without the interruption. */
hy_status hy_mlm_trainer_write_state(hy_h5 *f, const hy_mlm_trainer *t);
hy_status hy_mlm_trainer_read_state(hy_h5 *f, hy_mlm_trainer *t);

/* Held-out MLM loss and accuracy of m + h on ds with masks drawn from (seed, a fixed stream),
 * so every call masks the same positions: *loss = mean cross-entropy over predicted positions,
 * *acc = their accuracy, *n = their count. Dropout off. */
hy_status hy_mlm_evaluate(hy_xfmr *m, hy_mlm *h, const hy_dataset *ds, size_t batch_size,
                          const hy_mlm_mask_config *mc, uint64_t seed, double *loss,
                          double *acc, size_t *n);

#endif
