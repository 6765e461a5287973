/* ckpt.c: checkpoint save/load (schema in ckpt.h and DESIGN §2). */
#include "ckpt.h"

#include <stdio.h>
#include <string.h>

/* the size_t fields of /config, in schema order */
typedef struct cfg_field {
    const char *key;
    size_t offset;
} cfg_field;

static const cfg_field CFG_FIELDS[] = {
    {"image_size", offsetof(hy_xfmr_config, image_size)},
    {"channels", offsetof(hy_xfmr_config, channels)},
    {"patch", offsetof(hy_xfmr_config, patch)},
    {"vocab_size", offsetof(hy_xfmr_config, vocab_size)},
    {"max_len", offsetof(hy_xfmr_config, max_len)},
    {"d_model", offsetof(hy_xfmr_config, d_model)},
    {"n_heads", offsetof(hy_xfmr_config, n_heads)},
    {"depth", offsetof(hy_xfmr_config, depth)},
    {"d_mlp", offsetof(hy_xfmr_config, d_mlp)},
    {"n_classes", offsetof(hy_xfmr_config, n_classes)},
};
#define N_CFG_FIELDS (sizeof CFG_FIELDS / sizeof CFG_FIELDS[0])

static size_t *cfg_at(hy_xfmr_config *c, size_t i) {
    return (size_t *)(void *)((char *)c + CFG_FIELDS[i].offset);
}

hy_status hy_ckpt_write(hy_h5 *f, const hy_xfmr *m, const hy_kv *meta, size_t n) {
    const hy_xfmr_config *c = &m->cfg;
    HY_TRY(hy_h5_set_attr_str(f, "/config", "kind", c->kind == HY_XFMR_TEXT ? "text" : "vit"));
    hy_xfmr_config tmp = *c;
    for (size_t i = 0; i < N_CFG_FIELDS; i++)
        HY_TRY(hy_h5_set_attr_i64(f, "/config", CFG_FIELDS[i].key, (int64_t)*cfg_at(&tmp, i)));
    HY_TRY(hy_h5_set_attr_f64(f, "/config", "attn_dropout", (double)c->attn_dropout));
    HY_TRY(hy_h5_set_attr_f64(f, "/config", "mlp_dropout", (double)c->mlp_dropout));
    char name[96];
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        snprintf(name, sizeof name, "/params/%s", p->name);
        HY_TRY(hy_h5_write_data(f, name, HY_F32, p->ndim, p->shape, m->params + p->offset));
    }
    int64_t gshape[2] = {(int64_t)c->depth, (int64_t)c->n_heads};
    HY_TRY(hy_h5_write_data(f, "/head_gates", HY_F32, 2, gshape, m->gates));
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
    if (strcmp(kind, "vit") == 0) cfg->kind = HY_XFMR_VIT;
    else if (strcmp(kind, "text") == 0) cfg->kind = HY_XFMR_TEXT;
    else st = hy_fail(HY_EINVAL, "ckpt: '%s': /config kind must be vit or text (got '%s')",
                      f->path, kind);
    hy_free(kind);
    HY_TRY(st);
    for (size_t i = 0; i < N_CFG_FIELDS; i++) {
        const char *key = CFG_FIELDS[i].key;
        HY_TRY(config_has(f, key, &has));
        if (!has)
            return hy_fail(HY_EINVAL, "ckpt: '%s' has no /config attribute '%s'", f->path, key);
        int64_t v;
        HY_TRY(hy_h5_get_attr_i64(f, "/config", key, &v));
        if (v < 0)
            return hy_fail(HY_EINVAL, "ckpt: '%s': /config %s must be >= 0 (got %lld)", f->path,
                           key, (long long)v);
        *cfg_at(cfg, i) = (size_t)v;
    }
    double d = 0;
    HY_TRY(config_has(f, "attn_dropout", &has));
    if (has) {
        HY_TRY(hy_h5_get_attr_f64(f, "/config", "attn_dropout", &d));
        cfg->attn_dropout = (float)d;
    }
    HY_TRY(config_has(f, "mlp_dropout", &has));
    if (has) {
        HY_TRY(hy_h5_get_attr_f64(f, "/config", "mlp_dropout", &d));
        cfg->mlp_dropout = (float)d;
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
    return hy_h5_read_into(f, name, HY_F32, ndim, shape, buf);
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

hy_status hy_ckpt_load(const char *path, hy_xfmr *m) {
    memset(m, 0, sizeof *m);
    hy_h5 f;
    memset(&f, 0, sizeof f);
    hy_xfmr_config cfg;
    HY_TRY(hy_h5_open(&f, path));
    hy_status st = hy_ckpt_read_config(&f, &cfg);
    if (st == HY_OK) st = hy_xfmr_new(m, &cfg);
    if (st == HY_OK) {
        st = hy_ckpt_read_params(&f, m);
        if (st != HY_OK) hy_xfmr_release(m);
    }
    hy_h5_close(&f);
    return st;
}
