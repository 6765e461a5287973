/* vilu.c: the learned uncertainty head (vilu.h): inputs, targets, forward/backward of the MLP,
 * the seeded AdamW training loop, scores, files. Shapes: vilu.h. */
#include "hydra/vilu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/h5.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "nn/xfmr.h"
#include "tensor/rng.h"

/* ===== names ===== */

const char *hy_vilu_input_name(hy_vilu_input in) {
    return in == HY_VILU_INPUT_FEATURES ? "features" : "vilu";
}
const char *hy_vilu_loss_name(hy_vilu_loss l) { return l == HY_VILU_LOSS_TCP ? "tcp" : "bce"; }

hy_status hy_vilu_input_parse(const char *s, const char *key, hy_vilu_input *out) {
    if (s && strcmp(s, "vilu") == 0) *out = HY_VILU_INPUT_VILU;
    else if (s && strcmp(s, "features") == 0) *out = HY_VILU_INPUT_FEATURES;
    else return hy_fail(HY_EINVAL, "%s must be vilu or features (got '%s')", key, s ? s : "");
    return HY_OK;
}

hy_status hy_vilu_loss_parse(const char *s, const char *key, hy_vilu_loss *out) {
    if (s && strcmp(s, "bce") == 0) *out = HY_VILU_LOSS_BCE;
    else if (s && strcmp(s, "tcp") == 0) *out = HY_VILU_LOSS_TCP;
    else return hy_fail(HY_EINVAL, "%s must be bce or tcp (got '%s')", key, s ? s : "");
    return HY_OK;
}

size_t hy_vilu_input_dim(hy_vilu_input in, size_t D) {
    return in == HY_VILU_INPUT_VILU ? 3 * D : D;
}

static const char *const TNAMES[HY_VILU_NT] = {"fc1.weight", "fc1.bias", "fc2.weight",
                                               "fc2.bias",   "fc3.weight", "fc3.bias"};
const char *hy_vilu_tensor_name(size_t i) {
    HY_ASSERT(i < HY_VILU_NT);
    return TNAMES[i];
}

/* ===== layout ===== */

/* shape (out, in) of tensor i; a bias has in = 0 */
static void tshape(const hy_vilu *h, size_t i, size_t *out, size_t *in) {
    static const int is_w[HY_VILU_NT] = {1, 0, 1, 0, 1, 0};
    size_t o = i < HY_VILU_W3 ? h->H : 1;
    size_t n = i == HY_VILU_W1 ? h->DI : h->H;
    *out = o;
    *in = is_w[i] ? n : 0;
}

static size_t tnumel(const hy_vilu *h, size_t i) {
    size_t o, n;
    tshape(h, i, &o, &n);
    return n ? o * n : o;
}

#define R16(n) (((n) + 15) / 16 * 16)

hy_status hy_vilu_new(hy_vilu *h, hy_vilu_input in, hy_vilu_loss loss, size_t D, size_t H) {
    memset(h, 0, sizeof *h);
    if (D == 0 || H == 0)
        return hy_fail(HY_EINVAL, "vilu: features (%zu) and hidden width (%zu) must be >= 1", D,
                       H);
    h->input = in;
    h->loss = loss;
    h->D = D;
    h->DI = hy_vilu_input_dim(in, D);
    h->H = H;
    size_t off = 0;
    for (size_t i = 0; i < HY_VILU_NT; i++) {
        h->off[i] = off;
        off += R16(tnumel(h, i));
    }
    h->n_params = off;
    h->params = hy_xmalloc_aligned(off * sizeof(float));
    h->grads = hy_xmalloc_aligned(off * sizeof(float));
    h->mean = hy_xmalloc(h->DI * sizeof(float));
    h->std = hy_xmalloc(h->DI * sizeof(float));
    if (!h->params || !h->grads || !h->mean || !h->std) {
        hy_vilu_release(h);
        return HY_ENOMEM;
    }
    memset(h->params, 0, off * sizeof(float));
    memset(h->grads, 0, off * sizeof(float));
    for (size_t j = 0; j < h->DI; j++) {
        h->mean[j] = 0.0f;
        h->std[j] = 1.0f;
    }
    return HY_OK;
}

void hy_vilu_release(hy_vilu *h) {
    hy_free(h->params);
    hy_free(h->grads);
    hy_free(h->mean);
    hy_free(h->std);
    memset(h, 0, sizeof *h);
}

void hy_vilu_init(hy_vilu *h, uint64_t seed) {
    hy_rng root;
    hy_rng_seed(&root, seed);
    for (size_t i = 0; i < HY_VILU_NT; i++) {
        hy_rng r = hy_rng_split(&root, (uint64_t)i);
        /* fan_in of the layer the tensor belongs to (a bias shares its weight's) */
        size_t fan_in = i / 2 == 0 ? h->DI : h->H;
        float a = 1.0f / sqrtf((float)fan_in);
        float *p = h->params + h->off[i];
        size_t n = tnumel(h, i);
        for (size_t k = 0; k < n; k++) p[k] = a * (2.0f * hy_rng_uniform(&r) - 1.0f);
    }
}

/* ===== inputs and targets ===== */

static size_t argmax(const float *z, size_t K) {
    size_t best = 0;
    for (size_t k = 1; k < K; k++)
        if (z[k] > z[best]) best = k;
    return best;
}

void hy_vilu_inputs(float *x, hy_vilu_input in, const float *z, const float *logits,
                    const float *head_w, size_t N, size_t D, size_t K) {
    for (size_t i = 0; i < N; i++) {
        const float *zi = z + i * D;
        if (in == HY_VILU_INPUT_FEATURES) {
            memcpy(x + i * D, zi, D * sizeof(float));
            continue;
        }
        /* x = [z, w_ŷ, z ∘ w_ŷ] */
        const float *w = head_w + argmax(logits + i * K, K) * D;
        float *xi = x + i * 3 * D;
        for (size_t d = 0; d < D; d++) {
            xi[d] = zi[d];
            xi[D + d] = w[d];
            xi[2 * D + d] = zi[d] * w[d];
        }
    }
}

hy_status hy_vilu_targets(float *t, hy_vilu_loss loss, const float *logits,
                          const int32_t *labels, size_t N, size_t K) {
    for (size_t i = 0; i < N; i++)
        if (labels[i] < 0 || (size_t)labels[i] >= K)
            return hy_fail(HY_EINVAL, "vilu: label %d out of range [0, %zu) (row %zu)",
                           (int)labels[i], K, i + 1);
    for (size_t i = 0; i < N; i++) {
        const float *z = logits + i * K;
        if (loss == HY_VILU_LOSS_BCE) {
            t[i] = argmax(z, K) != (size_t)labels[i] ? 1.0f : 0.0f;
        } else {
            /* softmax(z)_y in double, max-shifted */
            float mx = z[argmax(z, K)];
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s += exp((double)z[k] - (double)mx);
            t[i] = (float)(exp((double)z[labels[i]] - (double)mx) / s);
        }
    }
    return HY_OK;
}

/* ===== forward / backward ===== */

/* Activations of a batch of up to N rows (one allocation). */
typedef struct acts {
    float *xs, *a1, *h1, *a2, *h2, *u;        /* (N,DI) (N,H) (N,H) (N,H) (N,H) (N) */
    float *du, *dh2, *dh1;                    /* (N) (N,H) (N,H) */
    float *buf;
} acts;

static hy_status acts_new(acts *a, const hy_vilu *h, size_t N) {
    size_t DI = h->DI, H = h->H;
    size_t n = R16(N * DI) + 6 * R16(N * H) + 2 * R16(N);
    memset(a, 0, sizeof *a);
    a->buf = hy_xmalloc_aligned(n * sizeof(float));
    if (!a->buf) return HY_ENOMEM;
    float *p = a->buf;
    a->xs = p; p += R16(N * DI);
    a->a1 = p; p += R16(N * H);
    a->h1 = p; p += R16(N * H);
    a->a2 = p; p += R16(N * H);
    a->h2 = p; p += R16(N * H);
    a->dh2 = p; p += R16(N * H);
    a->dh1 = p; p += R16(N * H);
    a->u = p; p += R16(N);
    a->du = p;
    return HY_OK;
}

#define PW(h, i) ((h)->params + (h)->off[i])
#define GW(h, i) ((h)->grads + (h)->off[i])

/* u (N) of raw x (N, DI); keeps every activation in a */
static void forward(const hy_vilu *h, const float *x, size_t N, acts *a) {
    size_t DI = h->DI, H = h->H;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < DI; j++)
            a->xs[i * DI + j] = (x[i * DI + j] - h->mean[j]) / h->std[j];
    hy_linear_forward(a->a1, a->xs, PW(h, HY_VILU_W1), PW(h, HY_VILU_B1), N, DI, H);
    hy_gelu_forward(a->h1, a->a1, N * H);
    hy_linear_forward(a->a2, a->h1, PW(h, HY_VILU_W2), PW(h, HY_VILU_B2), N, H, H);
    hy_gelu_forward(a->h2, a->a2, N * H);
    hy_linear_forward(a->u, a->h2, PW(h, HY_VILU_W3), PW(h, HY_VILU_B3), N, H, 1);
}

static double sigmoid(double u) {
    return u >= 0 ? 1.0 / (1.0 + exp(-u)) : exp(u) / (1.0 + exp(u));
}

/* per-row loss l_i and dl_i/du_i */
static double row_loss(hy_vilu_loss loss, double u, double t, double *dl) {
    double s = sigmoid(u);
    if (loss == HY_VILU_LOSS_BCE) {
        *dl = s - t;                                          /* d/du softplus(u) - t u */
        return (u > 0 ? u : 0.0) + log1p(exp(-fabs(u))) - t * u;
    }
    *dl = 2.0 * (s - t) * s * (1.0 - s);                      /* d/du (sigmoid(u) - t)^2 */
    return (s - t) * (s - t);
}

/* loss of the batch in a->u; grads written from du */
static double backward(hy_vilu *h, const float *t, const float *w, size_t N, acts *a) {
    size_t DI = h->DI, H = h->H;
    double sum = 0.0;
    for (size_t i = 0; i < N; i++) {
        double wi = w ? (double)w[i] : 1.0, dl;
        sum += wi * row_loss(h->loss, (double)a->u[i], (double)t[i], &dl);
        a->du[i] = (float)(wi * dl / (double)N);               /* L = (1/N) sum_i w_i l_i */
    }
    memset(h->grads, 0, h->n_params * sizeof(float));
    /* u = h2 w3^T + b3 */
    hy_linear_backward_set(a->dh2, GW(h, HY_VILU_W3), GW(h, HY_VILU_B3), a->du, a->h2,
                           PW(h, HY_VILU_W3), N, H, 1);
    /* h2 = GELU(a2): dh2 <- dh2 * gelu'(a2) in place */
    hy_gelu_backward_set(a->dh2, a->dh2, a->a2, N * H);
    /* a2 = h1 W2^T + b2 */
    hy_linear_backward_set(a->dh1, GW(h, HY_VILU_W2), GW(h, HY_VILU_B2), a->dh2, a->h1,
                           PW(h, HY_VILU_W2), N, H, H);
    hy_gelu_backward_set(a->dh1, a->dh1, a->a1, N * H);
    /* a1 = xs W1^T + b1 (no gradient into the frozen inputs) */
    hy_linear_backward(NULL, GW(h, HY_VILU_W1), GW(h, HY_VILU_B1), a->dh1, a->xs,
                       PW(h, HY_VILU_W1), N, DI, H);
    return sum / (double)N;
}

hy_status hy_vilu_loss_grad(hy_vilu *h, const float *x, const float *t, const float *w, size_t N,
                            double *loss) {
    if (N == 0) return hy_fail(HY_EINVAL, "vilu: a batch needs at least one row");
    acts a;
    HY_TRY(acts_new(&a, h, N));
    forward(h, x, N, &a);
    *loss = backward(h, t, w, N, &a);
    hy_free(a.buf);
    return HY_OK;
}

/* ===== scores ===== */

#define SCORE_CHUNK 1024

hy_status hy_vilu_score(const hy_vilu *h, const float *x, size_t N, float *s) {
    if (N == 0) return HY_OK;
    size_t B = N < SCORE_CHUNK ? N : SCORE_CHUNK;
    acts a;
    HY_TRY(acts_new(&a, h, B));
    for (size_t i0 = 0; i0 < N; i0 += B) {
        size_t n = N - i0 < B ? N - i0 : B;
        forward(h, x + i0 * h->DI, n, &a);
        for (size_t i = 0; i < n; i++)
            s[i0 + i] = h->loss == HY_VILU_LOSS_BCE ? a.u[i]
                                                    : (float)-sigmoid((double)a.u[i]);
    }
    hy_free(a.buf);
    return HY_OK;
}

/* ===== training ===== */

/* mean and std (population, in double) of every column of x (N, DI); std 1 for a constant
 * column */
static void standardise(hy_vilu *h, const float *x, size_t N) {
    size_t DI = h->DI;
    for (size_t j = 0; j < DI; j++) {
        double m = 0.0, v = 0.0;
        for (size_t i = 0; i < N; i++) m += (double)x[i * DI + j];
        m /= (double)N;
        for (size_t i = 0; i < N; i++) {
            double d = (double)x[i * DI + j] - m;
            v += d * d;
        }
        double sd = sqrt(v / (double)N);
        h->mean[j] = (float)m;
        h->std[j] = sd > 1e-12 ? (float)sd : 1.0f;
    }
}

hy_status hy_vilu_fit(hy_vilu *h, const float *x, const float *t, size_t N,
                      const hy_vilu_fit_config *c, const char *who, double *final_loss) {
    if (N == 0) return hy_fail(HY_EINVAL, "%s: no training rows", who);
    if (c->epochs < 1) return hy_fail(HY_EINVAL, "%s.epochs must be >= 1 (got 0)", who);
    if (c->batch_size < 1) return hy_fail(HY_EINVAL, "%s.batch_size must be >= 1 (got 0)", who);
    if (!(c->learning_rate > 0) || !isfinite(c->learning_rate))
        return hy_fail(HY_EINVAL, "%s.learning_rate must be > 0 (got %g)", who,
                       c->learning_rate);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return hy_fail(HY_EINVAL, "%s.weight_decay must be >= 0 (got %g)", who, c->weight_decay);
    /* class-balance weights of the bce loss */
    double wpos = 1.0, wneg = 1.0;
    if (h->loss == HY_VILU_LOSS_BCE) {
        size_t npos = 0;
        for (size_t i = 0; i < N; i++) npos += t[i] > 0.5f;
        if (npos == 0 || npos == N)
            return hy_fail(HY_EINVAL, "%s: the training rows have %s misclassified sample (%zu "
                           "of %zu): a learned error predictor needs both outcomes", who,
                           npos == 0 ? "no" : "only", npos, N);
        wpos = (double)N / (2.0 * (double)npos);
        wneg = (double)N / (2.0 * (double)(N - npos));
    }
    standardise(h, x, N);
    hy_vilu_init(h, c->seed);
    hy_optim_segment seg[HY_VILU_NT];
    for (size_t i = 0; i < HY_VILU_NT; i++) {
        seg[i].offset = h->off[i];
        seg[i].n = tnumel(h, i);
        seg[i].decay = i % 2 == 0;           /* weights, not biases */
    }
    hy_adamw_config oc = {c->learning_rate, 0.9, 0.999, 1e-8, c->weight_decay};
    hy_adamw opt;
    HY_TRY(hy_adamw_new(&opt, &oc, h->n_params, seg, HY_VILU_NT));
    size_t B = c->batch_size < N ? c->batch_size : N;
    size_t steps_per_epoch = (N + B - 1) / B;
    hy_schedule sched = {HY_SCHED_COSINE, c->learning_rate, 0.0, 0,
                         (int64_t)(steps_per_epoch * c->epochs)};
    acts a;
    hy_status st = acts_new(&a, h, B);
    int64_t *idx = hy_xmalloc(N * sizeof *idx);
    float *xb = hy_xmalloc_aligned(B * h->DI * sizeof(float));
    float *tb = hy_xmalloc(B * sizeof(float));
    float *wb = hy_xmalloc(B * sizeof(float));
    if (st == HY_OK && (!idx || !xb || !tb || !wb)) st = HY_ENOMEM;
    hy_rng rng;
    hy_rng_seed(&rng, c->seed);
    hy_rng shuffle = hy_rng_split(&rng, 1000);
    int64_t step = 0;
    double epoch_loss = 0.0;
    for (size_t e = 0; st == HY_OK && e < c->epochs; e++) {
        for (size_t i = 0; i < N; i++) idx[i] = (int64_t)i;
        hy_rng_shuffle(&shuffle, idx, N);
        double sum = 0.0;
        for (size_t i0 = 0; st == HY_OK && i0 < N; i0 += B) {
            size_t n = N - i0 < B ? N - i0 : B;
            for (size_t i = 0; i < n; i++) {
                size_t r = (size_t)idx[i0 + i];
                memcpy(xb + i * h->DI, x + r * h->DI, h->DI * sizeof(float));
                tb[i] = t[r];
                wb[i] = (float)(h->loss == HY_VILU_LOSS_BCE ? (t[r] > 0.5f ? wpos : wneg) : 1.0);
            }
            forward(h, xb, n, &a);
            double l = backward(h, tb, wb, n, &a);
            if (!isfinite(l)) {
                st = hy_fail(HY_EINVAL, "%s: non-finite loss at step %lld (epoch %zu)", who,
                             (long long)step + 1, e + 1);
                break;
            }
            sum += l * (double)n;
            hy_adamw_step(&opt, h->params, h->grads, hy_sched_lr(&sched, step));
            step++;
        }
        epoch_loss = sum / (double)N;
    }
    if (st == HY_OK && final_loss) *final_loss = epoch_loss;
    hy_free(a.buf);
    hy_free(idx);
    hy_free(xb);
    hy_free(tb);
    hy_free(wb);
    hy_adamw_release(&opt);
    return st;
}

/* ===== files ===== */

#define VILU_FORMAT "hydra-vilu-1"

hy_status hy_vilu_write(hy_h5 *f, const hy_vilu *h) {
    HY_TRY(hy_h5_set_attr_str(f, "/vilu", "format", VILU_FORMAT));
    HY_TRY(hy_h5_set_attr_str(f, "/vilu", "input", hy_vilu_input_name(h->input)));
    HY_TRY(hy_h5_set_attr_str(f, "/vilu", "loss", hy_vilu_loss_name(h->loss)));
    HY_TRY(hy_h5_set_attr_i64(f, "/vilu", "d_features", (int64_t)h->D));
    HY_TRY(hy_h5_set_attr_i64(f, "/vilu", "hidden", (int64_t)h->H));
    int64_t di = (int64_t)h->DI;
    HY_TRY(hy_h5_write_data(f, "/vilu/mean", HY_F32, 1, &di, h->mean));
    HY_TRY(hy_h5_write_data(f, "/vilu/std", HY_F32, 1, &di, h->std));
    char name[64];
    for (size_t i = 0; i < HY_VILU_NT; i++) {
        size_t o, n;
        tshape(h, i, &o, &n);
        int64_t sh[2] = {(int64_t)o, (int64_t)n};
        snprintf(name, sizeof name, "/params/%s", TNAMES[i]);
        HY_TRY(hy_h5_write_data(f, name, HY_F32, n ? 2 : 1, sh, PW(h, i)));
    }
    return HY_OK;
}

hy_status hy_vilu_read(hy_h5 *f, const char *path, hy_vilu *h) {
    memset(h, 0, sizeof *h);
    char *fmt = NULL, *in = NULL, *loss = NULL;
    int64_t D = 0, H = 0;
    hy_status st = hy_h5_get_attr_str(f, "/vilu", "format", &fmt);
    if (st == HY_OK && strcmp(fmt, VILU_FORMAT) != 0)
        st = hy_fail(HY_EINVAL, "vilu: '%s' has format '%s', expected '%s'", path, fmt,
                     VILU_FORMAT);
    if (st == HY_OK) st = hy_h5_get_attr_str(f, "/vilu", "input", &in);
    if (st == HY_OK) st = hy_h5_get_attr_str(f, "/vilu", "loss", &loss);
    if (st == HY_OK) st = hy_h5_get_attr_i64(f, "/vilu", "d_features", &D);
    if (st == HY_OK) st = hy_h5_get_attr_i64(f, "/vilu", "hidden", &H);
    hy_vilu_input vi = HY_VILU_INPUT_VILU;
    hy_vilu_loss vl = HY_VILU_LOSS_BCE;
    if (st == HY_OK) st = hy_vilu_input_parse(in, "vilu: /vilu input", &vi);
    if (st == HY_OK) st = hy_vilu_loss_parse(loss, "vilu: /vilu loss", &vl);
    if (st == HY_OK && (D < 1 || H < 1))
        st = hy_fail(HY_EINVAL, "vilu: '%s' /vilu has d_features %lld, hidden %lld (expected "
                     ">= 1)", path, (long long)D, (long long)H);
    /* sizes from the file, bounded before hy_vilu_new sizes its blocks from them */
    if (st == HY_OK &&
        ((st = hy_check_range(path, "/vilu d_features", D, 1, HY_XFMR_MAX_WIDTH)) != HY_OK ||
         (st = hy_check_range(path, "/vilu hidden", H, 1, HY_XFMR_MAX_WIDTH)) != HY_OK))
        hy_fail_prefix(st, "vilu");
    hy_free(fmt);
    hy_free(in);
    hy_free(loss);
    if (st != HY_OK) return st;
    HY_TRY(hy_vilu_new(h, vi, vl, (size_t)D, (size_t)H));
    int64_t di = (int64_t)h->DI;
    st = hy_h5_read_into(f, "/vilu/mean", HY_F32, 1, &di, h->mean);
    if (st == HY_OK) st = hy_h5_read_into(f, "/vilu/std", HY_F32, 1, &di, h->std);
    char name[64];
    for (size_t i = 0; st == HY_OK && i < HY_VILU_NT; i++) {
        size_t o, n;
        tshape(h, i, &o, &n);
        int64_t sh[2] = {(int64_t)o, (int64_t)n};
        snprintf(name, sizeof name, "/params/%s", TNAMES[i]);
        st = hy_h5_read_into(f, name, HY_F32, n ? 2 : 1, sh, PW(h, i));
    }
    if (st != HY_OK) hy_vilu_release(h);
    return st;
}
