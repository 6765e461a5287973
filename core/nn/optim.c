/* optim.c: AdamW, the learning-rate schedule and grad-norm clipping over flat blocks. */
#include "nn/optim.h"

#include <math.h>
#include <string.h>

#include "tensor/base.h"
#include "tensor/prof.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const double PI = 3.14159265358979323846;

hy_status hy_adamw_config_check(const hy_adamw_config *c) {
    if (!(c->learning_rate > 0) || !isfinite(c->learning_rate))
        return hy_fail(HY_EINVAL, "optim: learning_rate must be > 0 (got %g)", c->learning_rate);
    if (!(c->beta1 >= 0 && c->beta1 < 1))
        return hy_fail(HY_EINVAL, "optim: beta1 must be in [0, 1) (got %g)", c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1))
        return hy_fail(HY_EINVAL, "optim: beta2 must be in [0, 1) (got %g)", c->beta2);
    if (!(c->eps > 0) || !isfinite(c->eps))
        return hy_fail(HY_EINVAL, "optim: eps must be > 0 (got %g)", c->eps);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return hy_fail(HY_EINVAL, "optim: weight_decay must be >= 0 (got %g)", c->weight_decay);
    return HY_OK;
}

hy_status hy_adamw_new(hy_adamw *o, const hy_adamw_config *c, size_t n,
                       const hy_optim_segment *seg, size_t nseg) {
    memset(o, 0, sizeof *o);
    HY_TRY(hy_adamw_config_check(c));
    for (size_t i = 0; i < nseg; i++)
        if (seg[i].offset > n || seg[i].n > n - seg[i].offset)
            return hy_fail(HY_EINVAL, "optim: segment %zu [%zu, %zu) outside the block of %zu",
                           i, seg[i].offset, seg[i].offset + seg[i].n, n);
    size_t bytes = (n ? n : 1) * sizeof(float);
    o->m = hy_xmalloc_aligned(bytes);
    o->v = hy_xmalloc_aligned(bytes);
    o->seg = hy_xmalloc((nseg ? nseg : 1) * sizeof *seg);
    if (!o->m || !o->v || !o->seg) {
        hy_adamw_release(o);
        return HY_ENOMEM;
    }
    if (nseg) memcpy(o->seg, seg, nseg * sizeof *seg);
    o->cfg = *c;
    o->n = n;
    o->nseg = nseg;
    hy_adamw_reset(o);
    return HY_OK;
}

void hy_adamw_release(hy_adamw *o) {
    if (!o) return;
    hy_free(o->m);
    hy_free(o->v);
    hy_free(o->seg);
    memset(o, 0, sizeof *o);
}

void hy_adamw_reset(hy_adamw *o) {
    if (o->n) {
        memset(o->m, 0, o->n * sizeof(float));
        memset(o->v, 0, o->n * sizeof(float));
    }
    o->t = 0;
}

void hy_adamw_step(hy_adamw *o, float *params, const float *grads, double lr) {
    uint64_t t0 = hy_prof_t0();
    o->t++;
    const double b1 = o->cfg.beta1, b2 = o->cfg.beta2;
    const double bc1 = 1.0 - pow(b1, (double)o->t);
    const double bc2 = 1.0 - pow(b2, (double)o->t);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float fb1 = (float)b1, fb2 = (float)b2;
    const float ob1 = (float)(1.0 - b1), ob2 = (float)(1.0 - b2);
    const float eps = (float)o->cfg.eps;
    const float shrink = (float)(1.0 - lr * o->cfg.weight_decay);
    float *m = o->m, *v = o->v;
    const size_t n = o->n;

    /* one region: each thread takes its static share [lo, hi) of the block and runs on it
     * pass 1, the decoupled weight decay of the decayed segments (p *= 1 - lr*wd, segment by
     * segment in order), then pass 2, the Adam step on every element: each element sees the
     * operations of the two passes over the whole block, in the same order, whatever the
     * thread count (and no barrier or second fork between the passes) */
    const bool decay = o->cfg.weight_decay > 0;
#pragma omp parallel if (n > 32768)
    {
        size_t th = 0, nt = 1;
#ifdef _OPENMP
        th = (size_t)omp_get_thread_num();
        nt = (size_t)omp_get_num_threads();
#endif
        const size_t lo = n * th / nt, hi = n * (th + 1) / nt;
        for (size_t s = 0; decay && s < o->nseg; s++) {
            if (!o->seg[s].decay) continue;
            size_t a = o->seg[s].offset, b = a + o->seg[s].n;
            if (a < lo) a = lo;
            if (b > hi) b = hi;
            for (size_t i = a; i < b; i++) params[i] *= shrink;
        }
        for (size_t i = lo; i < hi; i++) {
            const float g = grads[i];
            m[i] = fb1 * m[i] + ob1 * g;
            v[i] = fb2 * v[i] + ob2 * g * g;
            const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            params[i] -= step_size * (m[i] / denom);
        }
    }
    hy_prof_add(HY_PROF_OPTIM, t0, 0);
}

hy_status hy_sched_parse(const char *name, hy_sched_kind *out) {
    if (strcmp(name, "cosine") == 0) { *out = HY_SCHED_COSINE; return HY_OK; }
    if (strcmp(name, "constant") == 0) { *out = HY_SCHED_CONSTANT; return HY_OK; }
    return hy_fail(HY_EINVAL, "optim: unknown schedule '%s' (expected cosine or constant)",
                   name);
}

hy_schedule hy_sched_plan(hy_sched_kind kind, double base_lr, double min_lr, size_t epochs,
                          double warmup_epochs, size_t per_epoch) {
    hy_schedule s;
    s.kind = kind;
    s.base_lr = base_lr;
    s.min_lr = min_lr;
    s.total_steps = (int64_t)(epochs * per_epoch);
    s.warmup_steps = (int64_t)llround(warmup_epochs * (double)per_epoch);
    return s;
}

double hy_sched_lr(const hy_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    if (step < s->warmup_steps)
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    if (s->kind == HY_SCHED_CONSTANT) return s->base_lr;
    int64_t span = s->total_steps - s->warmup_steps;
    if (span <= 0) return s->base_lr;
    double progress = (double)(step - s->warmup_steps) / (double)span;
    if (progress > 1.0) progress = 1.0;
    return s->min_lr + 0.5 * (s->base_lr - s->min_lr) * (1.0 + cos(PI * progress));
}

/* The sum of squares in NORM_BLOCKS blocks fixed by n alone, each block in 8 double lanes
 * (two 4-lane accumulators, element i into lane i mod 8 of its block) added up in a fixed tree,
 * the blocks' sums then added in order: the same bits with any thread count. Blocks run on the
 * threads from NORM_PAR elements up (a scalar loop over 1.2 M gradients took ~1 ms a step). */
#define NORM_BLOCKS 64
#define NORM_PAR ((size_t)1 << 16)
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

static double sumsq(const float *g, size_t n) {
    v4d a0 = {0, 0, 0, 0}, a1 = a0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f x0, x1;
        memcpy(&x0, g + i, sizeof x0);
        memcpy(&x1, g + i + 4, sizeof x1);
        v4d d0 = __builtin_convertvector(x0, v4d), d1 = __builtin_convertvector(x1, v4d);
        a0 += d0 * d0;
        a1 += d1 * d1;
    }
    double s = ((a0[0] + a1[0]) + (a0[1] + a1[1])) + ((a0[2] + a1[2]) + (a0[3] + a1[3]));
    for (; i < n; i++) s += (double)g[i] * (double)g[i];
    return s;
}

static double block_sumsq(const float *g, size_t n, size_t b) {
    size_t lo = n * b / NORM_BLOCKS, hi = n * (b + 1) / NORM_BLOCKS;
    return sumsq(g + lo, hi - lo);
}

double hy_grad_norm(const float *grads, size_t n) {
    double part[NORM_BLOCKS];
    if (hy_omp_par(n >= NORM_PAR)) {
#pragma omp parallel for schedule(static)
        for (size_t b = 0; b < NORM_BLOCKS; b++)
            part[b] = block_sumsq(grads, n, b);
    } else {
        for (size_t b = 0; b < NORM_BLOCKS; b++)
            part[b] = block_sumsq(grads, n, b);
    }
    double acc = 0;
    for (size_t b = 0; b < NORM_BLOCKS; b++) acc += part[b];
    return sqrt(acc);
}

double hy_grad_clip(float *grads, size_t n, double max_norm) {
    uint64_t t0 = hy_prof_t0();
    double norm = hy_grad_norm(grads, n);
    if (max_norm > 0 && isfinite(norm) && norm > max_norm) {
        const float scale = (float)(max_norm / (norm + 1e-6));
#pragma omp parallel for schedule(static) if (n > 32768)
        for (size_t i = 0; i < n; i++) grads[i] *= scale;
    }
    hy_prof_add(HY_PROF_OPTIM, t0, 0);
    return norm;
}
