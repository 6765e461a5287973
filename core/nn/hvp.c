/* hvp.c: loss, gradient and Hessian-vector products over a dataset (hvp.h). */
#include "nn/hvp.h"

#include <math.h>
#include <string.h>

#include "nn/train.h"

hy_status hy_hvp_grad(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, double *loss,
                      double *grad) {
    if (ds->n == 0) return hy_fail(HY_EINVAL, "hvp: the dataset is empty");
    if (batch_size < 1) return hy_fail(HY_EINVAL, "hvp: batch size must be >= 1 (got 0)");
    for (size_t i = 0; i < ds->n; i++)
        if (ds->labels[i] < 0 || (size_t)ds->labels[i] >= m->cfg.n_classes)
            return hy_fail(HY_EINVAL,
                           "hvp: sample %zu of %s has label %d (expected 0 to %zu: the loss "
                           "needs labelled data)",
                           i + 1, ds->origin[0] ? ds->origin : "the dataset",
                           (int)ds->labels[i], m->cfg.n_classes - 1);
    if (batch_size > ds->n) batch_size = ds->n;
    HY_TRY(hy_train_ensure_acts(m, batch_size));
    const size_t K = m->cfg.n_classes, P = m->n_params;
    hy_loader ld;
    HY_TRY(hy_loader_new(&ld, ds, batch_size, 0, NULL, 0));
    hy_status st = HY_OK;
    float *logits = hy_xmalloc_aligned(batch_size * K * sizeof(float));
    float *dlogits = hy_xmalloc_aligned(batch_size * K * sizeof(float));
    if (!logits || !dlogits) st = hy_fail(HY_ENOMEM, "hvp: out of memory (logits)");
    if (grad) memset(grad, 0, P * sizeof(double));
    double sum = 0;
    size_t B;
    while (st == HY_OK && (B = hy_loader_next(&ld)) > 0) {
        hy_batch in;
        hy_train_input(&ld, &in);
        double l;
        st = hy_xfmr_forward(m, &in, B, logits);
        if (st == HY_OK)
            st = hy_xfmr_loss(m, logits, ld.labels, B, 0.0f, &l, grad ? dlogits : NULL);
        if (st != HY_OK) break;
        const double w = (double)B / (double)ds->n;
        sum += l * w;
        if (!grad) continue;
        hy_xfmr_zero_grad(m);
        st = hy_xfmr_backward(m, dlogits);
        if (st != HY_OK) break;
        const float *g = m->grads;
        for (size_t i = 0; i < P; i++) grad[i] += w * (double)g[i];
    }
    hy_free(logits);
    hy_free(dlogits);
    hy_loader_release(&ld);
    if (st == HY_OK) *loss = sum;
    return st;
}

hy_status hy_hvp(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, const double *v, double h,
                 double *hv, double *loss_out) {
    if (!(h > 0) || !isfinite(h))
        return hy_fail(HY_EINVAL, "hvp: the step h must be a finite number > 0 (got %g)", h);
    const size_t P = m->n_params;
    double vn2 = 0;
    for (size_t i = 0; i < P; i++) vn2 += v[i] * v[i];
    if (!isfinite(vn2)) return hy_fail(HY_EINVAL, "hvp: the direction v is not finite");
    if (vn2 == 0) {
        memset(hv, 0, P * sizeof(double));
        if (loss_out) return hy_hvp_grad(m, ds, batch_size, loss_out, NULL);
        return HY_OK;
    }
    const double vn = sqrt(vn2);
    float *theta = hy_xmalloc_aligned(P * sizeof(float));
    double *gm = hy_xmalloc(P * sizeof(double));
    if (!theta || !gm) {
        hy_free(theta);
        hy_free(gm);
        return hy_fail(HY_ENOMEM, "hvp: out of memory (%zu parameters)", P);
    }
    memcpy(theta, m->params, P * sizeof(float));
    double lp = 0, lm = 0;
    /* theta + h u -> hv holds grad+, theta - h u -> gm holds grad- */
    for (size_t i = 0; i < P; i++) m->params[i] = (float)((double)theta[i] + h * v[i] / vn);
    hy_status st = hy_hvp_grad(m, ds, batch_size, &lp, hv);
    if (st == HY_OK) {
        for (size_t i = 0; i < P; i++) m->params[i] = (float)((double)theta[i] - h * v[i] / vn);
        st = hy_hvp_grad(m, ds, batch_size, &lm, gm);
    }
    memcpy(m->params, theta, P * sizeof(float));
    if (st == HY_OK) {
        const double s = vn / (2 * h);
        for (size_t i = 0; i < P; i++) hv[i] = (hv[i] - gm[i]) * s;
        if (loss_out) *loss_out = 0.5 * (lp + lm);
    }
    hy_free(theta);
    hy_free(gm);
    return st;
}

void hy_hvp_fold_gates(hy_xfmr *m) {
    const size_t L = m->cfg.depth, NH = m->cfg.n_heads, D = m->cfg.d_model, HS = m->HS;
    for (size_t l = 0; l < L; l++) {
        float *w = m->p.blk[l].proj_w;   /* (D out, D in): input column h*HS + j reads head h */
        for (size_t h = 0; h < NH; h++) {
            const float g = m->gates[l * NH + h];
            if (g == 1.0f) continue;
            for (size_t r = 0; r < D; r++)
                for (size_t j = 0; j < HS; j++) w[r * D + h * HS + j] *= g;
            m->gates[l * NH + h] = 1.0f;
        }
    }
}
