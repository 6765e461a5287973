/* ckpt.c: checkpoint save/load (schema in ckpt.h and DESIGN §2). */
#include "nn/ckpt.h"

#include "hydra/ens.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

hy_status hy_ckpt_write_config(hy_h5 *f, const hy_xfmr_config *c) {
    HY_TRY(hy_h5_set_attr_str(f, "/config", "kind", hy_xfmr_kind_name(c->kind)));
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *fd = &hy_xfmr_fields[i];
        if (fd->type == HY_FIELD_SIZE)
            HY_TRY(hy_h5_set_attr_i64(f, "/config", fd->name, (int64_t)hy_xfmr_field_size(c, fd)));
        else if (fd->type == HY_FIELD_FLOAT)
            HY_TRY(hy_h5_set_attr_f64(f, "/config", fd->name, hy_xfmr_field_float(c, fd)));
        else if (fd->type == HY_FIELD_COUNT)
            HY_TRY(hy_h5_set_attr_i64(f, "/config", fd->name, (int64_t)hy_xfmr_field_size(c, fd)));
        else if (fd->type == HY_FIELD_ENUM) {
            char w[32];
            HY_TRY(hy_h5_set_attr_str(f, "/config", fd->name,
                                      hy_xfmr_field_enum_name(fd, hy_xfmr_field_enum(c, fd), w,
                                                              sizeof w)));
        }
        else
            HY_TRY(hy_h5_set_attr_f64(f, "/config", fd->name, (double)hy_xfmr_field_rate(c, fd)));
    }
    return HY_OK;
}

hy_status hy_ckpt_write(hy_h5 *f, const hy_xfmr *m, const hy_kv *meta, size_t n) {
    const hy_xfmr_config *c = &m->cfg;
    HY_TRY(hy_ckpt_write_config(f, c));
    char name[96];
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        snprintf(name, sizeof name, "/params/%s", p->name);
        HY_TRY(hy_h5_write_data(f, name, HY_F32, p->ndim, p->shape, m->params + p->offset));
    }
    int64_t gshape[2] = {(int64_t)c->depth, (int64_t)c->n_heads};
    HY_TRY(hy_h5_write_data(f, "/head_gates", HY_F32, 2, gshape, m->gates));
    if (m->ens) {   /* ens.h: the YAML section's name and keys */
        const hy_ens_config *e = &m->ens->cfg;
        char tg[32];
        HY_TRY(hy_h5_set_attr_str(f, "/ensemble", "method", hy_ens_method_name(e->kind)));
        HY_TRY(hy_h5_set_attr_i64(f, "/ensemble", "members", (int64_t)e->members));
        if (e->kind == HY_ENS_LORA) {
            HY_TRY(hy_h5_set_attr_i64(f, "/ensemble", "rank", (int64_t)e->rank));
            HY_TRY(hy_h5_set_attr_f64(f, "/ensemble", "alpha", (double)e->alpha));
            HY_TRY(hy_h5_set_attr_str(f, "/ensemble", "targets",
                                      hy_ens_targets_str(e->targets, tg, sizeof tg)));
        }
    }
    HY_TRY(hy_h5_set_attr_str(f, "/meta", "hydra_version", HY_VERSION));
    for (size_t i = 0; i < n; i++) {
        if (meta[i].str) HY_TRY(hy_h5_set_attr_str(f, "/meta", meta[i].key, meta[i].str));
        else if (meta[i].is_int)
            HY_TRY(hy_h5_set_attr_i64(f, "/meta", meta[i].key, (int64_t)meta[i].num));
        else HY_TRY(hy_h5_set_attr_f64(f, "/meta", meta[i].key, meta[i].num));
    }
    return HY_OK;
}

hy_status hy_ckpt_save(const char *path, const hy_xfmr *m, const hy_kv *meta, size_t n) {
    hy_h5 f;
    memset(&f, 0, sizeof f);
    HY_TRY(hy_h5_create(&f, path));
    hy_status st = hy_ckpt_write(&f, m, meta, n);
    if (st != HY_OK) {
        hy_h5_close(&f);
        return st;
    }
    return hy_h5_commit(&f);
}

/* *has = whether /config has attribute key; fails only when the probe cannot tell (memory). */
static hy_status config_has(hy_h5 *f, const char *key, int *has) {
    int e = hy_h5_attr_exists(f, "/config", key);
    if (e < 0) return HY_ENOMEM;   /* message recorded by the probe */
    *has = e;
    return HY_OK;
}

hy_status hy_ckpt_read_config(hy_h5 *f, hy_xfmr_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int has = 0;
    HY_TRY(config_has(f, "kind", &has));
    if (!has)
        return hy_fail(HY_EINVAL, "ckpt: '%s' has no /config attribute 'kind' (not a hydra "
                       "checkpoint?)", f->path);
    char *kind = NULL;
    HY_TRY(hy_h5_get_attr_str(f, "/config", "kind", &kind));
    hy_status st = HY_OK;
    if (hy_xfmr_kind_parse(kind, &cfg->kind) != HY_OK)
        st = hy_fail(HY_EINVAL, "ckpt: '%s': /config kind must be vit or text (got '%s')",
                     f->path, kind);
    hy_free(kind);
    HY_TRY(st);
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *fd = &hy_xfmr_fields[i];
        HY_TRY(config_has(f, fd->name, &has));
        if (fd->type == HY_FIELD_RATE) {   /* optional: 0 when absent */
            double d = 0;
            if (has) HY_TRY(hy_h5_get_attr_f64(f, "/config", fd->name, &d));
            hy_xfmr_field_set_rate(cfg, fd, (float)d);
            continue;
        }
        if (fd->type == HY_FIELD_FLOAT) {   /* optional: the schema's default when absent */
            double d = hy_xfmr_field_default(fd);
            if (has) HY_TRY(hy_h5_get_attr_f64(f, "/config", fd->name, &d));
            if (!(d > 0.0))
                return hy_fail(HY_EINVAL, "ckpt: '%s': /config %s must be > 0 (got %g)",
                               f->path, fd->name, d);
            hy_xfmr_field_set_float(cfg, fd, d);
            continue;
        }
        if (fd->type == HY_FIELD_ENUM) {   /* optional: the first word when absent */
            int v = 0;
            if (has) {
                char *w = NULL;
                HY_TRY(hy_h5_get_attr_str(f, "/config", fd->name, &w));
                hy_status pst = hy_xfmr_field_enum_parse(fd, w, &v);
                if (pst != HY_OK)
                    pst = hy_fail(HY_EINVAL, "ckpt: '%s': /config %s must be one of %s (got "
                                  "'%s')", f->path, fd->name, fd->dflt, w);
                hy_free(w);
                HY_TRY(pst);
            }
            hy_xfmr_field_set_enum(cfg, fd, v);
            continue;
        }
        if (fd->type == HY_FIELD_COUNT && !has) {   /* optional: the schema's default */
            hy_xfmr_field_set_size(cfg, fd, (size_t)hy_xfmr_field_default(fd));
            continue;
        }
        if (!has)
            return hy_fail(HY_EINVAL, "ckpt: '%s' has no /config attribute '%s'", f->path,
                           fd->name);
        int64_t v;
        HY_TRY(hy_h5_get_attr_i64(f, "/config", fd->name, &v));
        if (v < 0)
            return hy_fail(HY_EINVAL, "ckpt: '%s': /config %s must be >= 0 (got %lld)", f->path,
                           fd->name, (long long)v);
        hy_xfmr_field_set_size(cfg, fd, (size_t)v);
    }
    st = hy_xfmr_config_check(cfg);
    if (st != HY_OK) return hy_fail_prefix(st, "ckpt: '%s'", f->path);
    return HY_OK;
}

/* Reads float32 dataset `name` of the expected shape into buf; `what` names it in messages. */
static hy_status read_tensor(hy_h5 *f, const char *name, const char *what, int ndim,
                             const int64_t *shape, float *buf) {
    char want[96], got[96];
    hy_shape_str(want, sizeof want, ndim, shape);
    int e = hy_h5_exists(f, name);
    if (e < 0) return HY_ENOMEM;   /* message recorded by the probe */
    if (!e)
        return hy_fail(HY_EINVAL, "ckpt: '%s' has no tensor '%s' (expected shape %s)", f->path,
                       what, want);
    hy_dtype dt;
    int nd = 0;
    int64_t sh[HY_MAXDIM];
    HY_TRY(hy_h5_shape(f, name, &dt, &nd, sh));
    int same = nd == ndim;
    for (int i = 0; same && i < nd; i++) same = sh[i] == shape[i];
    if (!same)
        return hy_fail(HY_EINVAL, "ckpt: '%s': tensor '%s' has shape %s, expected %s", f->path,
                       what, hy_shape_str(got, sizeof got, nd, sh), want);
    HY_TRY(hy_h5_read_into(f, name, HY_F32, ndim, shape, buf));
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return hy_ckpt_check_finite(f->path, what, buf, n);
}

hy_status hy_ckpt_check_finite(const char *path, const char *what, const float *buf, size_t n) {
    /* One pass: x - x is 0 for finite x and NaN for NaN and +-inf. */
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) acc += buf[i] - buf[i];
    if (acc == 0.0f) return HY_OK;
    size_t i = 0;
    while (i < n && isfinite(buf[i])) i++;
    return hy_fail(HY_EINVAL, "ckpt: '%s': tensor '%s' has a non-finite value (%s) at flat "
                   "index %zu", path, what, isnan(buf[i]) ? "nan" : buf[i] > 0 ? "inf" : "-inf",
                   i);
}

hy_status hy_ckpt_read_params(hy_h5 *f, hy_xfmr *m) {
    char name[96];
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        snprintf(name, sizeof name, "/params/%s", p->name);
        HY_TRY(read_tensor(f, name, p->name, p->ndim, p->shape, m->params + p->offset));
    }
    int64_t gshape[2] = {(int64_t)m->cfg.depth, (int64_t)m->cfg.n_heads};
    return read_tensor(f, "/head_gates", "head_gates", 2, gshape, m->gates);
}

hy_status hy_ckpt_read_ensemble(hy_h5 *f, hy_ens_config *e, int *has) {
    memset(e, 0, sizeof *e);
    int ex = hy_h5_exists(f, "/ensemble");
    if (ex < 0) return HY_ENOMEM;
    *has = ex;
    if (!ex) return HY_OK;
    static const char *const keys[] = {"method", "members", "rank", "alpha", "targets"};
    for (int i = 0; i < 5; i++) {
        int a = hy_h5_attr_exists(f, "/ensemble", keys[i]);
        if (a < 0) return HY_ENOMEM;
        if (!a && (i < 2 || e->kind == HY_ENS_LORA))
            return hy_fail(HY_EINVAL, "ckpt: '%s' has no /ensemble attribute '%s'", f->path,
                           keys[i]);
        if (!a) continue;
        if (i == 0 || i == 4) {
            char *v = NULL;
            HY_TRY(hy_h5_get_attr_str(f, "/ensemble", keys[i], &v));
            hy_status st = HY_OK;
            if (i == 0 && hy_ens_method_parse(v, &e->kind) != HY_OK)
                st = hy_fail(HY_EINVAL, "ckpt: '%s': /ensemble method must be batch_ensemble or "
                             "lora_ensemble (got '%s')", f->path, v);
            for (char *w = i == 4 ? v : NULL; w && st == HY_OK;) {   /* words split at ',' */
                char *comma = strchr(w, ',');
                if (comma) *comma = '\0';
                unsigned bit = 0;
                if (hy_ens_target_parse(w, &bit) != HY_OK)
                    st = hy_fail(HY_EINVAL, "ckpt: '%s': /ensemble targets: unknown target '%s' "
                                 "(expected q, k, v, o, mlp)", f->path, w);
                e->targets |= bit;
                w = comma ? comma + 1 : NULL;
            }
            hy_free(v);
            HY_TRY(st);
        } else if (i == 3) {
            double d;
            HY_TRY(hy_h5_get_attr_f64(f, "/ensemble", keys[i], &d));
            e->alpha = (float)d;
        } else {
            int64_t v;
            HY_TRY(hy_h5_get_attr_i64(f, "/ensemble", keys[i], &v));
            if (v < 1)
                return hy_fail(HY_EINVAL, "ckpt: '%s': /ensemble %s must be >= 1 (got %lld)",
                               f->path, keys[i], (long long)v);
            if (i == 1) e->members = (size_t)v;
            else e->rank = (size_t)v;
        }
    }
    return HY_OK;
}

hy_status hy_ckpt_read_encoder(const char *path, hy_xfmr *m, size_t *n_loaded) {
    *n_loaded = 0;
    hy_h5 f;
    memset(&f, 0, sizeof f);
    HY_TRY(hy_h5_open(&f, path));
    hy_status st = HY_OK;
    float *buf = NULL;
    char *kind = NULL, name[96];
    if ((st = hy_h5_get_attr_str(&f, "/config", "kind", &kind)) != HY_OK) {
        st = hy_fail_prefix(st, "ckpt: '%s' is not a model checkpoint", path);
        goto done;
    }
    if (strcmp(kind, hy_xfmr_kind_name(m->cfg.kind)) != 0) {
        st = hy_fail(HY_EINVAL, "ckpt: '%s' holds a %s model; train.init needs a %s model",
                     path, kind, hy_xfmr_kind_name(m->cfg.kind));
        goto done;
    }
    buf = hy_xmalloc_aligned(m->n_params * sizeof(float));
    if (!buf) { st = HY_ENOMEM; goto done; }
    memcpy(buf, m->params, m->n_params * sizeof(float));
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        if (strcmp(p->name, "head.weight") == 0 || strcmp(p->name, "head.bias") == 0) continue;
        snprintf(name, sizeof name, "/params/%s", p->name);
        if ((st = read_tensor(&f, name, p->name, p->ndim, p->shape, buf + p->offset)) != HY_OK)
            goto done;
        n++;
    }
    memcpy(m->params, buf, m->n_params * sizeof(float));
    *n_loaded = n;
done:
    hy_free(buf);
    hy_free(kind);
    hy_h5_close(&f);
    return st;
}

hy_status hy_ckpt_load(const char *path, hy_xfmr *m) {
    memset(m, 0, sizeof *m);
    hy_h5 f;
    memset(&f, 0, sizeof f);
    hy_xfmr_config cfg;
    hy_ens_config ens;
    int has_ens = 0;
    HY_TRY(hy_h5_open(&f, path));
    hy_status st = hy_ckpt_read_config(&f, &cfg);
    if (st == HY_OK) st = hy_ckpt_read_ensemble(&f, &ens, &has_ens);
    if (st == HY_OK && has_ens) {
        st = hy_xfmr_new_ens(m, &cfg, &ens);
        if (st != HY_OK) st = hy_fail_prefix(st, "ckpt: '%s': /ensemble", path);
    } else if (st == HY_OK) {
        st = hy_xfmr_new(m, &cfg);
    }
    if (st == HY_OK) {
        st = hy_ckpt_read_params(&f, m);
        if (st != HY_OK) hy_xfmr_release(m);
    }
    hy_h5_close(&f);
    return st;
}
