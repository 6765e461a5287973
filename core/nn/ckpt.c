/* ckpt.c: checkpoint save/load (schema in ckpt.h and DESIGN §2). */
#include "nn/ckpt.h"

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
    if (m->ext) HY_TRY(m->ext->ops->save(m, f));   /* e.g. an ensemble's /ensemble */
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
        char what[48];
        HY_TRY(hy_h5_get_attr_i64(f, "/config", fd->name, &v));
        snprintf(what, sizeof what, "/config %s", fd->name);
        hy_status rs = hy_check_range(f->path, what, v, 0, (int64_t)hy_xfmr_field_max(fd));
        if (rs != HY_OK) return hy_fail_prefix(rs, "ckpt");
        hy_xfmr_field_set_size(cfg, fd, (size_t)v);
    }
    st = hy_xfmr_config_check(cfg);
    if (st != HY_OK) return hy_fail_prefix(st, "ckpt: '%s'", f->path);
    return HY_OK;
}

hy_status hy_ckpt_check_tensor(hy_h5 *f, const char *name, const char *what, int ndim,
                               const int64_t *shape) {
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
    return HY_OK;
}

hy_status hy_ckpt_read_tensor(hy_h5 *f, const char *name, const char *what, int ndim,
                              const int64_t *shape, float *buf) {
    HY_TRY(hy_ckpt_check_tensor(f, name, what, ndim, shape));
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
        HY_TRY(hy_ckpt_read_tensor(f, name, p->name, p->ndim, p->shape, m->params + p->offset));
    }
    int64_t gshape[2] = {(int64_t)m->cfg.depth, (int64_t)m->cfg.n_heads};
    return hy_ckpt_read_tensor(f, "/head_gates", "head_gates", 2, gshape, m->gates);
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
        st = hy_ckpt_read_tensor(&f, name, p->name, p->ndim, p->shape, buf + p->offset);
        if (st != HY_OK) goto done;
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

hy_status hy_ckpt_count_blocks(hy_h5 *f, const char *group, size_t *n) {
    *n = 0;
    hy_h5_entry *e = NULL;
    size_t ne = 0;
    int ex = hy_h5_exists(f, group);
    if (ex < 0) return HY_ENOMEM;
    if (!ex) return HY_OK;
    HY_TRY(hy_h5_list(f, group, &e, &ne));
    for (size_t i = 0; i < ne; i++) {
        const char *s = e[i].name;
        if (strncmp(s, "blocks.", 7) != 0 || s[7] < '0' || s[7] > '9') continue;
        size_t b = 0;
        for (s += 7; *s >= '0' && *s <= '9' && b <= HY_XFMR_MAX_DEPTH; s++)
            b = b * 10 + (size_t)(*s - '0');
        if (*s == '.' && b < HY_XFMR_MAX_DEPTH && b + 1 > *n) *n = b + 1;
    }
    hy_h5_list_free(e, ne);
    return HY_OK;
}

hy_status hy_ckpt_check_layout(hy_h5 *f, const hy_xfmr_config *cfg) {
    size_t nb = 0;
    HY_TRY(hy_ckpt_count_blocks(f, "/params", &nb));
    if (nb != cfg->depth)
        return hy_fail(HY_EINVAL, "ckpt: '%s': /config depth = %zu but /params holds %zu blocks "
                       "(blocks.0 to blocks.%zu)", f->path, cfg->depth, nb, nb ? nb - 1 : 0);
    size_t nt = hy_xfmr_n_slots(cfg), total = 0;
    hy_param *tab = hy_xcalloc(nt, sizeof *tab);
    if (!tab) return HY_ENOMEM;
    hy_xfmr_table(cfg, tab, &total);
    hy_status st = HY_OK;
    char name[96];
    for (size_t i = 0; i < nt && st == HY_OK; i++) {
        snprintf(name, sizeof name, "/params/%s", tab[i].name);
        st = hy_ckpt_check_tensor(f, name, tab[i].name, tab[i].ndim, tab[i].shape);
    }
    hy_free(tab);
    int64_t gshape[2] = {(int64_t)cfg->depth, (int64_t)cfg->n_heads};
    if (st == HY_OK) st = hy_ckpt_check_tensor(f, "/head_gates", "head_gates", 2, gshape);
    return st;
}

/* the model of a checkpoint without an extension's part */
static hy_status build_plain(hy_h5 *f, const hy_xfmr_config *cfg, hy_xfmr *m) {
    int ex = hy_h5_exists(f, "/ensemble");
    if (ex < 0) return HY_ENOMEM;
    if (ex)
        return hy_fail(HY_EINVAL, "ckpt: '%s' holds an ensemble (/ensemble), which hy_ckpt_load "
                       "does not build (hy_ens_load does)", f->path);
    hy_status st = hy_xfmr_new(m, cfg);
    return st == HY_OK ? st : hy_fail_prefix(st, "ckpt: '%s'", f->path);
}

hy_status hy_ckpt_load_with(const char *path, hy_xfmr *m, hy_ckpt_build build) {
    memset(m, 0, sizeof *m);
    hy_h5 f;
    memset(&f, 0, sizeof f);
    hy_xfmr_config cfg;
    HY_TRY(hy_h5_open(&f, path));
    hy_status st = hy_ckpt_read_config(&f, &cfg);
    /* the file must hold the tensors its /config describes before anything is allocated */
    if (st == HY_OK) st = hy_ckpt_check_layout(&f, &cfg);
    if (st == HY_OK) st = (build ? build : build_plain)(&f, &cfg, m);
    if (st == HY_OK) {
        st = hy_ckpt_read_params(&f, m);
        if (st != HY_OK) hy_xfmr_release(m);
    }
    hy_h5_close(&f);
    return st;
}

hy_status hy_ckpt_load(const char *path, hy_xfmr *m) { return hy_ckpt_load_with(path, m, NULL); }
