/* fused.c: see fused.h. Layout: the tensors of one xfmr (the "slots" of xfmr.h, in its table
 * order) are either shared (one "shared/<name>" entry that every member's slot points to) or per
 * member ("members/{m}/<name>"; attention tensors packed to the kept heads). The forward is
 * written once over slots, so every fuse.* combination runs the same code; the mode only decides
 * where several members can go through one call (one LN / one GEMM over all streams, one
 * embedding). */
#include "hydra/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/attn.h"
#include "nn/ckpt.h"
#include "tensor/gemm.h"
#include "nn/layers.h"
#include "tensor/prof.h"
#include "tensor/team.h"
#include "hydra/prune.h"
#include "nn/train.h"


const char *hy_fuse_mode_name(hy_fuse_mode m) { return m == HY_FUSE_AVERAGE ? "average" : "member"; }

hy_status hy_fuse_mode_parse(const char *key, const char *s, hy_fuse_mode *out) {
    if (strcmp(s, "average") == 0) *out = HY_FUSE_AVERAGE;
    else if (strcmp(s, "member") == 0) *out = HY_FUSE_MEMBER;
    else return hy_fail(HY_EINVAL, "fused: fuse.%s must be average or member (got '%s')", key, s);
    return HY_OK;
}

/* the fuse.* mode of a part of the model (attention is always per member) */
static hy_fuse_mode mode_of(const hy_fuse_config *fc, hy_xfmr_part g) {
    switch (g) {
    case HY_PART_EMBED: return fc->embed;
    case HY_PART_LN: return fc->ln;
    case HY_PART_MLP: return fc->mlp;
    case HY_PART_HEAD: return fc->head;
    case HY_PART_ATTN: return HY_FUSE_MEMBER;
    case HY_N_PARTS: break;
    }
    return HY_FUSE_MEMBER;
}

static float *P(const hy_fused *f, size_t m, size_t s) {
    return f->params + f->table[f->slot[m * f->n_slots + s]].offset;
}
static bool shared(const hy_fused *f, hy_xfmr_part g) {
    return mode_of(&f->fuse, g) == HY_FUSE_AVERAGE;
}
/* the encoder options of the members (xfmr.h), which the forward follows like the model */
static bool bert_embed(const hy_fused *f) {
    return f->cfg.kind == HY_XFMR_TEXT && f->cfg.text_embed == HY_TEXT_EMBED_BERT;
}
static bool post_ln(const hy_fused *f) { return f->cfg.norm == HY_NORM_POST; }

/* ===== layout ===== */

/* Builds kept/heads/table/slot from cfg, fuse, M and head_gates (already set in f) and
 * allocates params (zeroed). ref: the xfmr table of cfg. */
static hy_status layout(hy_fused *f, const hy_param *ref, size_t n_slots) {
    const hy_xfmr_config *c = &f->cfg;
    size_t M = f->M, L = c->depth, NH = c->n_heads, HS = f->HS;
    f->n_slots = n_slots;
    f->kept = hy_xcalloc(M * L, sizeof *f->kept);
    f->heads = hy_xmalloc(M * L * NH * sizeof *f->heads);
    f->table = hy_xcalloc(M * n_slots, sizeof *f->table);
    f->slot = hy_xcalloc(M * n_slots, sizeof *f->slot);
    if (!f->kept || !f->heads || !f->table || !f->slot) return HY_ENOMEM;
    for (size_t m = 0; m < M; m++)
        for (size_t l = 0; l < L; l++) {
            size_t k = 0, row = m * L + l;
            for (size_t h = 0; h < NH; h++) {
                f->heads[row * NH + h] = -1;
                if (f->head_gates[row * NH + h] != 0.0f) f->heads[row * NH + k++] = (int32_t)h;
            }
            f->kept[row] = k;
        }
    size_t off = 0;
    char name[64];
    for (size_t s = 0; s < n_slots; s++) {
        size_t l = 0, j = 0;
        hy_xfmr_part g = hy_xfmr_slot_part(c, s, &l, &j);
        if (mode_of(&f->fuse, g) == HY_FUSE_AVERAGE) {
            snprintf(name, sizeof name, "shared/%s", ref[s].name);
            for (size_t m = 0; m < M; m++) f->slot[m * n_slots + s] = f->n_tensors;
            hy_param_table_add(f->table, &f->n_tensors, &off, name, ref[s].ndim, ref[s].shape,
                               false);
            continue;
        }
        for (size_t m = 0; m < M; m++) {
            int64_t shape[4];
            memcpy(shape, ref[s].shape, sizeof shape);
            if (g == HY_PART_ATTN) {
                int64_t kh = (int64_t)(f->kept[m * L + l] * HS);
                if (j == HY_BLK_QKVW || j == HY_BLK_QKVB) shape[0] = 3 * kh;
                if (j == HY_BLK_PROJW) shape[1] = kh;
            }
            snprintf(name, sizeof name, "members/%zu/%s", m, ref[s].name);
            f->slot[m * n_slots + s] = f->n_tensors;
            hy_param_table_add(f->table, &f->n_tensors, &off, name, ref[s].ndim, shape, false);
        }
    }
    f->n_params = off;
    f->params = hy_xmalloc_aligned(off * sizeof(float));
    if (!f->params) return HY_ENOMEM;
    memset(f->params, 0, off * sizeof(float));
    return HY_OK;
}


void hy_fused_release(hy_fused *f) {
    if (!f) return;
    hy_free(f->head_gates);
    hy_free(f->kept);
    hy_free(f->heads);
    hy_free(f->table);
    hy_free(f->slot);
    hy_free(f->params);
    hy_free(f->acts);
    hy_free(f->work);
    hy_free(f->ones);
    hy_xfmr_bf16_precision(&f->bf16, HY_PRECISION_FP32, &f->cfg, NULL, NULL, NULL, 0, NULL);
    memset(f, 0, sizeof *f);
}

static hy_status same_config(const hy_xfmr_config *a, const hy_xfmr_config *b, size_t m) {
    if (a->kind != b->kind)
        return hy_fail(HY_EINVAL, "fused: member %zu has a different config than member 1 (kind "
                       "%zu vs %zu)", m + 1, (size_t)b->kind, (size_t)a->kind);
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *fd = &hy_xfmr_fields[i];
        if (fd->type == HY_FIELD_FLOAT) {
            double fa = hy_xfmr_field_float(a, fd), fb = hy_xfmr_field_float(b, fd);
            if (fa != fb)
                return hy_fail(HY_EINVAL, "fused: member %zu has a different config than "
                               "member 1 (%s %g vs %g)", m + 1, fd->name, fb, fa);
            continue;
        }
        if (fd->type == HY_FIELD_ENUM) {
            int ea = hy_xfmr_field_enum(a, fd), eb = hy_xfmr_field_enum(b, fd);
            char wa[32], wb[32];
            if (ea != eb)
                return hy_fail(HY_EINVAL, "fused: member %zu has a different config than "
                               "member 1 (%s %s vs %s)", m + 1, fd->name,
                               hy_xfmr_field_enum_name(fd, eb, wb, sizeof wb),
                               hy_xfmr_field_enum_name(fd, ea, wa, sizeof wa));
            continue;
        }
        if (fd->type == HY_FIELD_RATE) continue;   /* the dropout rates may differ */
        size_t va = hy_xfmr_field_size(a, fd), vb = hy_xfmr_field_size(b, fd);
        if (va != vb)
            return hy_fail(HY_EINVAL, "fused: member %zu has a different config than member 1 "
                           "(%s %zu vs %zu)", m + 1, fd->name, vb, va);
    }
    return HY_OK;
}

/* ===== build from members ===== */

static void pack_attn(hy_fused *f, size_t m, size_t s, const float *src) {
    const hy_xfmr_config *c = &f->cfg;
    size_t L = c->depth, NH = c->n_heads, D = c->d_model, HS = f->HS, l = 0, j = 0;
    hy_xfmr_slot_part(c, s, &l, &j);
    size_t k = f->kept[m * L + l];
    const int32_t *hd = f->heads + (m * L + l) * NH;
    float *dst = P(f, m, s);
    if (j == HY_BLK_QKVW || j == HY_BLK_QKVB) {
        size_t cols = j == HY_BLK_QKVW ? D : 1;
        for (size_t t = 0; t < 3; t++)
            for (size_t i = 0; i < k; i++)
                memcpy(dst + (t * k + i) * HS * cols, src + (t * D + (size_t)hd[i] * HS) * cols,
                       HS * cols * sizeof(float));
    } else if (j == HY_BLK_PROJW) {
        for (size_t r = 0; r < D; r++)
            for (size_t i = 0; i < k; i++)
                memcpy(dst + r * k * HS + i * HS, src + r * D + (size_t)hd[i] * HS,
                       HS * sizeof(float));
    } else {
        memcpy(dst, src, D * sizeof(float));
    }
}

hy_status hy_fused_build(hy_fused *f, hy_xfmr *const *members, size_t M,
                         const hy_fuse_config *fc) {
    memset(f, 0, sizeof *f);
    if (M == 0) return hy_fail(HY_EINVAL, "fused: need at least one member (got 0)");
    if (M > HY_FUSED_MAX_MEMBERS)
        return hy_fail(HY_EINVAL, "fused: at most %d members (got %zu)", HY_FUSED_MAX_MEMBERS, M);
    const hy_xfmr_config *c = &members[0]->cfg;
    size_t L = c->depth, NH = c->n_heads, LH = L * NH;
    for (size_t m = 0; m < M; m++) {
        HY_TRY(same_config(c, &members[m]->cfg, m));
        HY_TRY(hy_prune_check_member("fused", members[m]->gates, m, L, NH));
    }
    f->cfg = *c;
    f->fuse = *fc;
    f->M = M;
    f->T = members[0]->T;
    f->HS = members[0]->HS;
    hy_status st = HY_OK;
    f->head_gates = hy_xmalloc(M * LH * sizeof(float));
    if (!f->head_gates) {
        st = HY_ENOMEM;
        goto fail;
    }
    for (size_t m = 0; m < M; m++)
        memcpy(f->head_gates + m * LH, members[m]->gates, LH * sizeof(float));
    const hy_xfmr *m0 = members[0];
    if ((st = layout(f, m0->table, m0->n_tensors)) != HY_OK) goto fail;
    for (size_t s = 0; s < f->n_slots; s++) {
        hy_xfmr_part g = hy_xfmr_slot_part(c, s, NULL, NULL);
        size_t n = m0->table[s].numel, o = m0->table[s].offset;
        if (mode_of(fc, g) == HY_FUSE_AVERAGE) {
            float *dst = P(f, 0, s);
            for (size_t i = 0; i < n; i++) {
                double acc = 0.0;
                for (size_t m = 0; m < M; m++) acc += (double)members[m]->params[o + i];
                dst[i] = (float)(acc / (double)M);
            }
        } else if (g == HY_PART_ATTN) {
            for (size_t m = 0; m < M; m++) pack_attn(f, m, s, members[m]->params + o);
        } else {
            for (size_t m = 0; m < M; m++)
                memcpy(P(f, m, s), members[m]->params + o, n * sizeof(float));
        }
    }
    return HY_OK;
fail:
    hy_fused_release(f);
    return st;
}

/* ===== file I/O ===== */

hy_status hy_fused_write(hy_h5 *file, const hy_fused *f) {
    const hy_xfmr_config *c = &f->cfg;
    HY_TRY(hy_ckpt_write_config(file, c));
    HY_TRY(hy_h5_set_attr_str(file, "/fuse", "mlp", hy_fuse_mode_name(f->fuse.mlp)));
    HY_TRY(hy_h5_set_attr_str(file, "/fuse", "ln", hy_fuse_mode_name(f->fuse.ln)));
    HY_TRY(hy_h5_set_attr_str(file, "/fuse", "embed", hy_fuse_mode_name(f->fuse.embed)));
    HY_TRY(hy_h5_set_attr_str(file, "/fuse", "head", hy_fuse_mode_name(f->fuse.head)));
    HY_TRY(hy_h5_set_attr_i64(file, "/fuse", "members", (int64_t)f->M));
    HY_TRY(hy_h5_set_attr_i64(file, "/fuse", "format", 1));
    size_t L = c->depth, NH = c->n_heads;
    char name[80];
    for (size_t m = 0; m < f->M; m++) {
        int64_t sh[2] = {(int64_t)L, (int64_t)NH};
        snprintf(name, sizeof name, "/members/%zu/head_gates", m);
        HY_TRY(hy_h5_write_data(file, name, HY_F32, 2, sh, f->head_gates + m * L * NH));
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        const hy_param *p = &f->table[i];
        snprintf(name, sizeof name, "/%s", p->name);
        HY_TRY(hy_h5_write_data(file, name, HY_F32, p->ndim, p->shape, f->params + p->offset));
    }
    return HY_OK;
}

hy_status hy_fused_save(const char *path, const hy_fused *f) {
    hy_h5 file;
    HY_TRY(hy_h5_create(&file, path));
    hy_status st = hy_fused_write(&file, f);
    if (st != HY_OK) {
        hy_h5_close(&file);
        return st;
    }
    return hy_h5_commit(&file);
}

static hy_status read_mode(hy_h5 *file, const char *key, hy_fuse_mode *out) {
    char *s = NULL;
    HY_TRY(hy_h5_get_attr_str(file, "/fuse", key, &s));
    hy_status st = hy_fuse_mode_parse(key, s, out);
    hy_free(s);
    return st;
}

/* The member groups /members/0 .. /members/{M-1} of a fused file, and nothing else under
 * /members: *n receives how many children /members has, *ok whether they are exactly those. */
static hy_status member_groups(hy_h5 *file, size_t M, size_t *n, int *ok) {
    *n = 0;
    *ok = 1;
    int ex = hy_h5_exists(file, "/members");
    if (ex < 0) return HY_ENOMEM;
    if (!ex) {
        *ok = M == 0;
        return HY_OK;
    }
    hy_h5_entry *e = NULL;
    HY_TRY(hy_h5_list(file, "/members", &e, n));
    *ok = *n == M;
    for (size_t i = 0; i < *n && *ok; i++) {
        char *end = NULL;
        unsigned long long v = strtoull(e[i].name, &end, 10);
        *ok = e[i].kind == HY_H5_GROUP && e[i].name[0] >= '0' && e[i].name[0] <= '9' &&
              *end == '\0' && v < M && (v == 0 || e[i].name[0] != '0');
    }
    hy_h5_list_free(e, *n);
    return HY_OK;
}

/* /fuse members against the member groups, depth against the blocks stored, every head_gates
 * shape and the shape of every tensor whose size does not depend on the kept heads (ref: the
 * config's xfmr table) -- so no allocation is sized from an unchecked number. */
static hy_status check_counts(hy_fused *f, hy_h5 *file, const hy_param *ref, size_t n_ref) {
    const char *path = file->path;
    size_t M = f->M, L = f->cfg.depth, NH = f->cfg.n_heads, ng = 0, nb0 = 0, nbs = 0;
    int ok = 0;
    HY_TRY(member_groups(file, M, &ng, &ok));
    if (!ok) {
        if (ng != M)
            return hy_fail(HY_EINVAL, "fused: '%s': /fuse members = %zu but the file holds %zu "
                           "member groups under /members", path, M, ng);
        return hy_fail(HY_EINVAL, "fused: '%s': the groups under /members are not /members/0 "
                       "to /members/%zu (/fuse members = %zu)", path, M - 1, M);
    }
    HY_TRY(hy_ckpt_count_blocks(file, "/members/0", &nb0));
    HY_TRY(hy_ckpt_count_blocks(file, "/shared", &nbs));
    size_t nb = nb0 > nbs ? nb0 : nbs;
    if (nb != L)
        return hy_fail(HY_EINVAL, "fused: '%s': /config depth = %zu but the file holds %zu "
                       "blocks", path, L, nb);
    char name[96];
    int64_t gsh[2] = {(int64_t)L, (int64_t)NH};
    for (size_t m = 0; m < M; m++) {
        snprintf(name, sizeof name, "/members/%zu/head_gates", m);
        HY_TRY(hy_ckpt_check_tensor(file, name, name + 1, 2, gsh));
    }
    for (size_t s = 0; s < n_ref; s++) {
        hy_xfmr_part g = hy_xfmr_slot_part(&f->cfg, s, NULL, NULL);
        bool avg = mode_of(&f->fuse, g) == HY_FUSE_AVERAGE;
        if (!avg && g == HY_PART_ATTN) continue;   /* packed: sized by the kept heads */
        snprintf(name, sizeof name, avg ? "/shared/%s" : "/members/0/%s", ref[s].name);
        HY_TRY(hy_ckpt_check_tensor(file, name, name + 1, ref[s].ndim, ref[s].shape));
    }
    return HY_OK;
}

hy_status hy_fused_load(hy_fused *f, const char *path) {
    memset(f, 0, sizeof *f);
    hy_h5 file;
    HY_TRY(hy_h5_open(&file, path));
    hy_param *ref = NULL;   /* the xfmr table of the config (the slots) */
    hy_status st = HY_OK;
    int64_t M = 0;
    char name[80];
    if (!hy_h5_exists(&file, "/fuse")) {
        st = hy_fail(HY_EINVAL, "fused: '%s' is not a fused Hydra model (no /fuse group)", path);
        goto fail;
    }
    if ((st = hy_ckpt_read_config(&file, &f->cfg)) != HY_OK) goto fail;
    if ((st = read_mode(&file, "mlp", &f->fuse.mlp)) != HY_OK) goto fail;
    if ((st = read_mode(&file, "ln", &f->fuse.ln)) != HY_OK) goto fail;
    if ((st = read_mode(&file, "embed", &f->fuse.embed)) != HY_OK) goto fail;
    if ((st = read_mode(&file, "head", &f->fuse.head)) != HY_OK) goto fail;
    if ((st = hy_h5_get_attr_i64(&file, "/fuse", "members", &M)) != HY_OK) goto fail;
    if ((st = hy_check_range(path, "/fuse members", M, 1, HY_FUSED_MAX_MEMBERS)) != HY_OK) {
        hy_fail_prefix(st, "fused");
        goto fail;
    }
    size_t n_ref = hy_xfmr_n_slots(&f->cfg), ref_floats = 0;
    if (!(ref = hy_xcalloc(n_ref, sizeof *ref))) {
        st = HY_ENOMEM;
        goto fail;
    }
    hy_xfmr_table(&f->cfg, ref, &ref_floats);
    f->M = (size_t)M;
    f->T = hy_xfmr_seq_len(&f->cfg);
    f->HS = f->cfg.d_model / f->cfg.n_heads;
    size_t L = f->cfg.depth, NH = f->cfg.n_heads;
    /* every count and size against the data it describes, before anything is allocated */
    if ((st = check_counts(f, &file, ref, n_ref)) != HY_OK) goto fail;
    f->head_gates = hy_xmalloc(f->M * L * NH * sizeof(float));
    if (!f->head_gates) {
        st = HY_ENOMEM;
        goto fail;
    }
    for (size_t m = 0; m < f->M; m++) {
        int64_t sh[2] = {(int64_t)L, (int64_t)NH};
        snprintf(name, sizeof name, "/members/%zu/head_gates", m);
        st = hy_h5_read_into(&file, name, HY_F32, 2, sh, f->head_gates + m * L * NH);
        if (st == HY_OK)
            st = hy_ckpt_check_finite(path, name + 1, f->head_gates + m * L * NH, L * NH);
        if (st == HY_OK) st = hy_prune_check_member("fused", f->head_gates + m * L * NH, m, L, NH);
        if (st != HY_OK) goto fail;
    }
    if ((st = layout(f, ref, n_ref)) != HY_OK) goto fail;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const hy_param *p = &f->table[i];
        snprintf(name, sizeof name, "/%s", p->name);
        st = hy_h5_read_into(&file, name, HY_F32, p->ndim, p->shape, f->params + p->offset);
        if (st == HY_OK) st = hy_ckpt_check_finite(path, p->name, f->params + p->offset, p->numel);
        if (st != HY_OK) goto fail;
    }
    hy_free(ref);
    hy_h5_close(&file);
    return HY_OK;
fail:
    hy_free(ref);
    hy_h5_close(&file);
    hy_fused_release(f);
    return st;
}

/* ===== activations ===== */

/* rows of the activations a thread runs through every layer at a time (cache-sized chunks) */
#define CHUNK_ROWS 256
#define R16(x) (((x) + 15) / 16 * 16)

/* The most rows of a chunk (n_chunks: at most CHUNK_ROWS / T samples or pairs of T <= f->T
 * rows, at least one) */
static size_t chunk_rows_max(const hy_fused *f) { return CHUNK_ROWS > f->T ? CHUNK_ROWS : f->T; }

/* The buffers one chunk goes through its layers in (one work set, WORK_* at its rows): LN1 /
 * LN2 output, LayerNorm statistics, Q/K/V, the attention output, the MLP hidden, the patch /
 * token embeddings; rows_max rows of each, 64-byte aligned */
enum { WORK_LN, WORK_MEAN, WORK_RSTD, WORK_QKV, WORK_AO, WORK_H, WORK_EMB, WORK_N };
static void work_sizes(const hy_fused *f, size_t sz[WORK_N]) {
    size_t rows = chunk_rows_max(f), D = f->cfg.d_model;
    sz[WORK_LN] = R16(rows * D);
    sz[WORK_MEAN] = sz[WORK_RSTD] = R16(rows);
    sz[WORK_QKV] = R16(rows * 3 * D);
    sz[WORK_AO] = R16(rows * D);
    sz[WORK_H] = R16(rows * f->cfg.d_mlp);
    sz[WORK_EMB] = R16(rows * D);
}

size_t hy_fused_work_floats(const hy_fused *f) {
    size_t sz[WORK_N], n = 0;
    work_sizes(f, sz);
    for (int i = 0; i < WORK_N; i++) n += sz[i];
    return n;
}

/* at least `sets` work sets (grown, never shrunk) */
static hy_status ensure_work(hy_fused *f, size_t sets) {
    if (f->n_work >= sets) return HY_OK;
    hy_free(f->work);
    f->n_work = 0;
    f->work = hy_xmalloc_aligned(sets * hy_fused_work_floats(f) * sizeof(float));
    if (!f->work) return HY_ENOMEM;
    f->n_work = sets;
    return HY_OK;
}

hy_status hy_fused_alloc_acts(hy_fused *f, size_t B_cap) {
    hy_free(f->acts);
    f->acts = NULL;
    f->B_cap = 0;
    if (B_cap == 0) return hy_fail(HY_EINVAL, "fused: activation batch size must be > 0");
    const hy_xfmr_config *c = &f->cfg;
    size_t M = f->M, T = f->T, D = c->d_model, MBT = M * B_cap * T;
    size_t F = c->kind == HY_XFMR_VIT ? c->channels * c->patch * c->patch : 0;
    size_t sizes[] = {R16(MBT * D), R16(B_cap * (T - 1) * F), R16(M * B_cap * D),
                      R16(M * B_cap * D), R16(M * B_cap), R16(M * B_cap), R16(M * B_cap * D),
                      R16(B_cap)};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) total += sizes[i];
    f->acts = hy_xmalloc_aligned(total * sizeof(float));
    if (!f->acts) return HY_ENOMEM;
    float *q = f->acts;
    float **dst[] = {&f->x, &f->patches, &f->cls, &f->lnf, &f->fmean, &f->frstd, &f->pool};
    for (size_t i = 0; i < sizeof dst / sizeof *dst; i++) {
        *dst[i] = q;
        q += sizes[i];
    }
    f->kvalid = (int32_t *)q;
    f->B_cap = B_cap;
    /* a set per thread that may run and one for a shared chunk (hy_fused_forward grows them
     * when a later forward has more threads) */
#ifdef _OPENMP
    int procs = omp_get_num_procs();
#else
    int procs = 1;
#endif
    int nt = hy_threads() > procs ? hy_threads() : procs;
    hy_status st = ensure_work(f, (size_t)(nt > 1 ? nt : 1) + 1);
    if (st != HY_OK) {
        hy_free(f->acts);
        f->acts = NULL;
        f->B_cap = 0;
    }
    return st;
}

/* One chunk's view of a work set: the chunk's pair (or, for the shared embedding, sample) p
 * has its rows (p - p0) T .. + T of ln, mean, rstd, qkv, ao, h and (p - p0) (T - 1) .. of emb */
typedef struct work {
    float *ln, *mean, *rstd, *qkv, *ao, *h, *emb;
    size_t p0;
} work;

static work work_for(const hy_fused *f, size_t set, size_t p0) {
    HY_ASSERT(set < f->n_work);
    size_t sz[WORK_N];
    work_sizes(f, sz);
    float *q = f->work + set * hy_fused_work_floats(f);
    float **dst[WORK_N];
    work w;
    dst[WORK_LN] = &w.ln, dst[WORK_MEAN] = &w.mean, dst[WORK_RSTD] = &w.rstd;
    dst[WORK_QKV] = &w.qkv, dst[WORK_AO] = &w.ao, dst[WORK_H] = &w.h, dst[WORK_EMB] = &w.emb;
    for (int i = 0; i < WORK_N; i++) {
        *dst[i] = q;
        q += sz[i];
    }
    w.p0 = p0;
    return w;
}
#undef R16

/* ===== forward ===== */

static hy_status check_batch(const hy_fused *f, const hy_batch *in, size_t B) {
    if (!f->acts)
        return hy_fail(HY_EINVAL, "fused: no activations allocated (call hy_fused_alloc_acts)");
    if (B == 0 || B > f->B_cap)
        return hy_fail(HY_EINVAL, "fused: batch size %zu out of range [1, %zu] (the activation "
                       "capacity)", B, f->B_cap);
    return hy_xfmr_check_inputs(&f->cfg, in, B, "fused");
}

/* ===== the forward, in slices =====
 * The streams are stored member-major, so the pair (member m, sample b) owns the T rows starting
 * at row (m B + b) T of every per-row buffer (x, ln, h, mean, rstd) and of qkv / ao (rows of
 * 3D / D floats, of which 3 C_m / C_m are used in layer l), and its cls / logits row is m B + b.
 * A slice is a contiguous range [p0, p1) of pairs: whole samples of whole streams, so every
 * operation of the forward -- LayerNorms, Q/K/V and output projections, attention, MLP, head --
 * only reads rows of its own slice, and slices are independent from the embedding to the
 * logits. The forward cuts
 * the M B pairs into chunks at boundaries fixed by M B and T alone (n_chunks), deals whole
 * chunks out to the threads and runs them in ONE OpenMP region with no barrier
 * (two, when the averaged embedding is computed once for all streams; a chunk left over when
 * the chunks do not divide among the threads is shared, with a team's spin barriers between
 * its kernels: see forward): no per-layer fork/join,
 * no per-head tasks, and OpenBLAS single-threaded for the call, so that its thread pool never
 * runs beside or inside an OpenMP region. Inside a slice the GEMMs are one call per member
 * segment (Q/K/V, projection, per-member MLP) or one call over the whole slice (the merged MLP,
 * shared LayerNorms: the same weights for every stream). The engine kernels called here open
 * their own OpenMP regions, which are given one thread (omp_set_num_threads(1) inside the
 * slice's implicit task), so they run on the calling thread: a batch-1 member (one slice) never
 * pays a fork/join per kernel. The M streams are what a fused model adds over one member: at
 * batch 1 they are M independent slices, while one member's forward is one. */

/* The chunks of n items (pairs, or samples for a shared embedding) at sequence length T: about
 * CHUNK_ROWS rows each, and at least CHUNK_MIN of them (a multiple of 12, so that 1, 2, 3, 4 and
 * 6 threads get equal shares), never more than n. They depend on n and T only, never on the
 * thread count: every GEMM's row count, and so its rounding (OpenBLAS's edge kernels round
 * differently), is then the same with any number of threads (bitwise-identical predictions). */
#define CHUNK_MIN 12
static size_t n_chunks(size_t n, size_t T) {
    size_t step = CHUNK_ROWS / T > 0 ? CHUNK_ROWS / T : 1;
    size_t nc = (n + step - 1) / step;
    nc = (nc + CHUNK_MIN - 1) / CHUNK_MIN * CHUNK_MIN;
    return nc < n ? nc : n;
}
/* first item of chunk c of nc over n items (chunk_start(n, nc, nc) = n) */
static size_t chunk_start(size_t n, size_t nc, size_t c) { return n * c / nc; }


/* threads in a team that shares a chunk: the products' two column tiles (gemm.h) */
#define TEAM_MAX 2

/* Whether the team may share the chunks of a forward of `pairs` pairs at length T: every
 * product of a chunk is small enough to run as tiles (gemm.h; a large one is one call inside
 * a region), which holds for the leftover chunks of small batches (one pair each) */
static bool chunks_shareable(const hy_fused *f, size_t pairs, size_t T) {
    size_t D = f->cfg.d_model, widest = 3 * D > f->cfg.d_mlp ? 3 * D : f->cfg.d_mlp;
    size_t nc = n_chunks(pairs, T), rows = (pairs + nc - 1) / nc * T;
    return !hy_prof_on && rows * D * widest < HY_GEMM_PAR_MIN_WORK;
}

/* threads of a forward of nc chunks: at most one per chunk, but a team of up to TEAM_MAX when
 * the chunks can be shared (a batch-1 member: one chunk, two threads) */
static size_t forward_threads(const hy_fused *f, size_t pairs, size_t T) {
    int p = hy_threads();
    size_t n = p < 1 ? 1 : (size_t)p, nc = n_chunks(pairs, T);
    size_t most = chunks_shareable(f, pairs, T) && nc < TEAM_MAX ? TEAM_MAX : nc;
    return n < most ? n : most;
}

/* f->ones: n_heads ones, the attention gates of every kept head (allocated once) */
static hy_status ensure_ones(hy_fused *f) {
    if (f->ones) return HY_OK;
    f->ones = hy_xmalloc_aligned(f->cfg.n_heads * sizeof(float));
    if (!f->ones) return HY_ENOMEM;
    for (size_t h = 0; h < f->cfg.n_heads; h++) f->ones[h] = 1.0f;
    return HY_OK;
}

/* x (n, N) += bias + A W^T; A (n, K), W (N, K) */
static void linear_add(float *x, const float *a, const float *w, const float *bias, size_t n,
                       size_t K, size_t N) {
    uint64_t t0 = hy_prof_t0();
    for (size_t r = 0; r < n; r++) {
        float *xr = x + r * N;
#pragma omp simd
        for (size_t j = 0; j < N; j++) xr[j] += bias[j];
    }
    hy_prof_add(HY_PROF_BIAS, t0, 0);
    hy_gemm(CblasNoTrans, CblasTrans, n, N, K, 1.0f, a, K, w, K, 1.0f, x, N);
}

typedef struct slice {
    size_t B;           /* samples in the batch */
    size_t p0, p1;      /* pairs */
    size_t nseg;        /* member segments */
    size_t m[64], b0[64], b1[64];
} slice;

static void make_slice(slice *s, size_t p0, size_t p1, size_t M, size_t B) {
    s->B = B;
    s->p0 = p0;
    s->p1 = p1;
    s->nseg = 0;
    for (size_t m = 0; m < M; m++) {
        size_t lo = p0 > m * B ? p0 : m * B, hi = p1 < (m + 1) * B ? p1 : (m + 1) * B;
        if (lo >= hi) continue;
        s->m[s->nseg] = m;
        s->b0[s->nseg] = lo - m * B;
        s->b1[s->nseg] = hi - m * B;
        s->nseg++;
    }
}

/* A slice's kernels run whole on the calling thread (tp NULL) or, for a slice a team shares
 * (tp: this thread's part, team.h), each cut into the parts of the team, with a barrier after
 * every kernel whose output another part reads. */
static void team_sync(const hy_team_part *tp) {
    if (tp) hy_team_barrier(tp->team);
}

/* n rows of a LayerNorm from the rows given, or this part's share of them */
static void norm_rows(const hy_team_part *tp, float *out, float *mean, float *rstd,
                      const float *x, const float *w, const float *b, size_t n, size_t D,
                      float eps) {
    size_t lo = 0, hi = n;
    if (tp) hy_team_share(n, tp->part, tp->parts, &lo, &hi);
    hy_layernorm_forward(out + lo * D, mean + lo, rstd + lo, x + lo * D, w, b, hi - lo, D, eps);
}

/* LayerNorm (slot sw, sb) of rows_per_pair rows per pair of the slice: x indexed like f->x
 * (rows_per_pair = T) or f->cls (1), pair p's rows of out from pair po and of mean, rstd from
 * pair ps on (a chunk's work set: its first pair; f->x, f->cls: 0); one call when the
 * LayerNorms are shared */
static void norm_slice(hy_fused *f, const slice *s, float *out, size_t po, float *mean,
                       float *rstd, size_t ps, const float *x, size_t sw, size_t sb, size_t rpp,
                       const hy_team_part *tp) {
    size_t D = f->cfg.d_model;
    float eps = hy_xfmr_ln_eps(&f->cfg);
    bool sh = shared(f, HY_PART_LN);
    for (size_t i = 0; i < (sh ? 1 : s->nseg); i++) {
        size_t m = sh ? 0 : s->m[i], p = sh ? s->p0 : m * s->B + s->b0[i];
        size_t n = (sh ? s->p1 - s->p0 : s->b1[i] - s->b0[i]) * rpp;
        norm_rows(tp, out + (p - po) * rpp * D, mean + (p - ps) * rpp, rstd + (p - ps) * rpp,
                  x + p * rpp * D, P(f, m, sw), P(f, m, sb), n, D, eps);
    }
    team_sync(tp);
}

/* x (n, N) += bias + A W^T, and with gelu: x = GELU(x) after (out = x), the whole product or
 * this part's tiles of it (bitwise the same: gemm.h) */
static void linear_part(const hy_team_part *tp, float *out, const float *a, const float *w,
                        const float *bias, const float *res, bool gelu, size_t n, size_t K,
                        size_t N) {
    hy_linear_forward_part(out, gelu ? out : NULL, a, w, bias, res, n, K, N, tp->part,
                           tp->parts);
}

/* the embedded input [cls; embed(input)] + pos of samples [b0, b1) with member m's (or the
 * shared) embedding into dst (rows of those samples); its temporaries in w at pair m B + b0 */
static void embed_samples(hy_fused *f, size_t m, const hy_batch *in, size_t B, size_t b0,
                          size_t b1, size_t T, float *dst, const work *w) {
    const hy_xfmr_config *c = &f->cfg;
    size_t D = c->d_model, nb = b1 - b0, T1 = T - 1, p = m * B + b0 - w->p0;
    if (bert_embed(f)) {
        /* embed_norm(tok[ids] + type[type_ids] + pos) of the samples' rows, in place in dst
         * (the statistics into the pair's LayerNorm rows, free before block 0) */
        size_t ne = hy_xfmr_n_embed_slots(c), len = in->len;
        hy_bert_embed_forward(dst, in->ids + b0 * len, in->type_ids ? in->type_ids + b0 * len
                                                                    : NULL,
                              P(f, m, 1), c->type_vocab ? P(f, m, 2) : NULL, P(f, m, 0), nb * T,
                              T, D);
        hy_layernorm_forward(dst, w->mean + p * T, w->rstd + p * T, dst, P(f, m, ne - 2),
                             P(f, m, ne - 1), nb * T, D, hy_xfmr_ln_eps(c));
        return;
    }
    float *emb = w->emb + p * T1 * D;
    if (c->kind == HY_XFMR_VIT) {
        size_t F = c->channels * c->patch * c->patch;
        hy_linear_forward(emb, f->patches + b0 * T1 * F, P(f, m, HY_EMB_W), P(f, m, HY_EMB_B),
                          nb * T1, F, D);
    } else {
        hy_tokembed_forward(emb, in->ids + b0 * in->len, P(f, m, HY_EMB_W), nb * T1, D);
    }
    hy_embed_assemble_forward(dst, emb, P(f, m, HY_EMB_CLS), P(f, m, HY_EMB_POS), nb, T, D);
}

/* the embedded input of every member segment of s, each with its member's embedding */
static void embed_slice(hy_fused *f, const slice *s, const hy_batch *in, size_t T,
                        const work *w) {
    for (size_t i = 0; i < s->nseg; i++) {
        size_t m = s->m[i];
        embed_samples(f, m, in, s->B, s->b0[i], s->b1[i], T,
                      f->x + (m * s->B * T + s->b0[i] * T) * f->cfg.d_model, w);
    }
}

/* Block l's attention for the pairs of s: x_m += proj_m(attn(qkv_m(LN1(x_m)))) */
static void attn_layer(hy_fused *f, const slice *s, size_t T, const int32_t *kv,
                       const hy_team_part *tp, size_t l, const work *w) {
    const hy_xfmr_config *c = &f->cfg;
    size_t B = s->B, D = c->d_model, L = c->depth, HS = f->HS;
    const float *ones = f->ones;
    size_t s0 = hy_xfmr_slot(c, l, 0);   /* slot of block l's HY_BLK_* = s0 + HY_BLK_* */
    size_t w0 = w->p0 * T;   /* the work set's first row */
    /* the attention's input: LN1(x_m) (pre), x_m itself (post: LN1 follows the residual),
     * from row a0 on */
    const float *ain = f->x;
    size_t a0 = 0;
    if (!post_ln(f)) {
        norm_slice(f, s, w->ln, w->p0, w->mean, w->rstd, w->p0, f->x, s0 + HY_BLK_N1W,
                   s0 + HY_BLK_N1B, T, tp);
        ain = w->ln;
        a0 = w0;
    }
    /* Q/K/V: one ragged grouped GEMM, group i = member segment i (its own k_m heads):
     * qkv_m (n T, 3 k_m HS) = bias + LN1(x_m) W_qkv,m^T. The segment's qkv (n, T, 3C) and
     * ao (n, T, C) start in the work set where its rows would with every head kept. */
    hy_gemm_desc g[64];
    for (size_t i = 0; i < s->nseg; i++) {
        size_t m = s->m[i], b0 = s->b0[i], n = s->b1[i] - b0;
        size_t C = f->kept[m * L + l] * HS, rm = (m * B + b0) * T;
        float *qkv = w->qkv + (rm - w0) * 3 * D;
        const float *bias = P(f, m, s0 + HY_BLK_QKVB);
        if (tp) {
            linear_part(tp, qkv, ain + (rm - a0) * D, P(f, m, s0 + HY_BLK_QKVW), bias, NULL,
                        false, n * T, D, 3 * C);
            continue;
        }
        HY_PROF(HY_PROF_BIAS, for (size_t r = 0; r < n * T; r++)
                                  memcpy(qkv + r * 3 * C, bias, 3 * C * sizeof *qkv));
        g[i] = (hy_gemm_desc){CblasNoTrans, CblasTrans, ain + (rm - a0) * D, n * T, D, D,
                              P(f, m, s0 + HY_BLK_QKVW), 3 * C, D, D, qkv, n * T, 3 * C, 3 * C,
                              1.0f, 1.0f};
    }
    if (tp) team_sync(tp);
    else HY_ASSERT(hy_gemm_grouped(g, s->nseg) == HY_OK);   /* built here: never fails */
    /* attention over every kept head of the slice's member segments */
    for (size_t i = 0; i < s->nseg; i++) {
        size_t m = s->m[i], b0 = s->b0[i], n = s->b1[i] - b0;
        size_t k = f->kept[m * L + l], C = k * HS, rm = (m * B + b0) * T;
        float *qkv = w->qkv + (rm - w0) * 3 * D, *ao = w->ao + (rm - w0) * D;
        if (tp)
            hy_attn_forward_part(ao, NULL, qkv, ones, kv ? kv + b0 : NULL, n, T, C, k,
                                 tp->part, tp->parts);
        else
            hy_attn_forward(ao, NULL, qkv, ones, kv ? kv + b0 : NULL, n, T, C, k);
    }
    team_sync(tp);
    /* output projections: one ragged grouped GEMM, x_m += bias + ao_m W_proj,m^T */
    for (size_t i = 0; i < s->nseg; i++) {
        size_t m = s->m[i], b0 = s->b0[i], n = s->b1[i] - b0;
        size_t C = f->kept[m * L + l] * HS, rm = (m * B + b0) * T;
        float *x = f->x + rm * D;
        const float *bias = P(f, m, s0 + HY_BLK_PROJB);
        if (tp) {
            linear_part(tp, x, w->ao + (rm - w0) * D, P(f, m, s0 + HY_BLK_PROJW), bias, x,
                        false, n * T, C, D);
            continue;
        }
        uint64_t t0 = hy_prof_t0();
        for (size_t r = 0; r < n * T; r++) {
#pragma omp simd
            for (size_t j = 0; j < D; j++) x[r * D + j] += bias[j];
        }
        hy_prof_add(HY_PROF_BIAS, t0, 0);
        g[i] = (hy_gemm_desc){CblasNoTrans, CblasTrans, w->ao + (rm - w0) * D, n * T, C, C,
                              P(f, m, s0 + HY_BLK_PROJW), D, C, C, x, n * T, D, D, 1.0f, 1.0f};
    }
    if (tp) team_sync(tp);
    else HY_ASSERT(hy_gemm_grouped(g, s->nseg) == HY_OK);
    if (post_ln(f))   /* x_m = LN1(x_m + proj_m(...)), in place */
        norm_slice(f, s, f->x, 0, w->mean, w->rstd, w->p0, f->x, s0 + HY_BLK_N1W,
                   s0 + HY_BLK_N1B, T, tp);
}

/* fc1 and the activation of n rows: h (n, DM) = act(in W^T + b), exact GELU in the product's
 * epilogue (hy_linear_gelu_forward), act gelu_tanh after it (the model's kernels); a team's part
 * computes its tiles of the product only (mlp_act_part applies gelu_tanh after the barrier) */
static void mlp_fc1(const hy_fused *f, const hy_team_part *tp, float *h, const float *in,
                    const float *w, const float *b, size_t n, size_t D, size_t DM) {
    bool tanh_act = f->cfg.act == HY_ACT_GELU_TANH;
    if (tp) {
        linear_part(tp, h, in, w, b, NULL, !tanh_act, n, D, DM);
    } else if (tanh_act) {
        hy_linear_forward(h, in, w, b, n, D, DM);
        hy_gelu_tanh_forward(h, h, n * DM);
    } else {
        hy_linear_gelu_forward(h, h, in, w, b, n, D, DM);
    }
}

/* a team's share of act gelu_tanh over rows [r0, r0 + n) of h (DM wide), after fc1's barrier */
static void mlp_act_part(const hy_fused *f, const hy_team_part *tp, float *h, size_t r0,
                         size_t n, size_t DM) {
    if (f->cfg.act != HY_ACT_GELU_TANH) return;
    size_t lo = 0, hi = n;
    hy_team_share(n, tp->part, tp->parts, &lo, &hi);
    hy_gelu_tanh_forward(h + (r0 + lo) * DM, h + (r0 + lo) * DM, (hi - lo) * DM);
}

/* Block l's MLP for the pairs of s: x_m += fc2(act(fc1(LN2(x_m)))) (pre), x_m = LN2(x_m +
 * fc2(act(fc1(x_m)))) (post); shared: one GEMM over the slice's rows */
static void mlp_layer(hy_fused *f, const slice *s, size_t T, const hy_team_part *tp, size_t l,
                      const work *w) {
    const hy_xfmr_config *c = &f->cfg;
    size_t B = s->B, D = c->d_model, DM = c->d_mlp;
    size_t r0 = s->p0 * T, nr = (s->p1 - s->p0) * T;   /* the slice's rows */
    size_t s0 = hy_xfmr_slot(c, l, 0);
    size_t w0 = w->p0 * T;   /* the work set's first row (h's, and in's when it is ln) */
    bool tanh_act = c->act == HY_ACT_GELU_TANH;
    const float *in = f->x;
    size_t i0 = 0;   /* in's first row */
    if (!post_ln(f)) {
        norm_slice(f, s, w->ln, w->p0, w->mean, w->rstd, w->p0, f->x, s0 + HY_BLK_N2W,
                   s0 + HY_BLK_N2B, T, tp);
        in = w->ln;
        i0 = w0;
    }
    float *h = w->h;
    if (tp && shared(f, HY_PART_MLP)) {
        mlp_fc1(f, tp, h + (r0 - w0) * DM, in + (r0 - i0) * D, P(f, 0, s0 + HY_BLK_FC1W),
                P(f, 0, s0 + HY_BLK_FC1B), nr, D, DM);
        team_sync(tp);
        if (tanh_act) {
            mlp_act_part(f, tp, h, r0 - w0, nr, DM);
            team_sync(tp);
        }
        linear_part(tp, f->x + r0 * D, h + (r0 - w0) * DM, P(f, 0, s0 + HY_BLK_FC2W),
                    P(f, 0, s0 + HY_BLK_FC2B), f->x + r0 * D, false, nr, DM, D);
        team_sync(tp);
    } else if (tp) {
        for (size_t i = 0; i < s->nseg; i++) {
            size_t m = s->m[i], rm = (m * B + s->b0[i]) * T, n = (s->b1[i] - s->b0[i]) * T;
            mlp_fc1(f, tp, h + (rm - w0) * DM, in + (rm - i0) * D, P(f, m, s0 + HY_BLK_FC1W),
                    P(f, m, s0 + HY_BLK_FC1B), n, D, DM);
        }
        team_sync(tp);
        if (tanh_act) {
            mlp_act_part(f, tp, h, r0 - w0, nr, DM);
            team_sync(tp);
        }
        for (size_t i = 0; i < s->nseg; i++) {
            size_t m = s->m[i], rm = (m * B + s->b0[i]) * T, n = (s->b1[i] - s->b0[i]) * T;
            linear_part(tp, f->x + rm * D, h + (rm - w0) * DM, P(f, m, s0 + HY_BLK_FC2W),
                        P(f, m, s0 + HY_BLK_FC2B), f->x + rm * D, false, n, DM, D);
        }
        team_sync(tp);
    } else if (shared(f, HY_PART_MLP)) {
        mlp_fc1(f, NULL, h + (r0 - w0) * DM, in + (r0 - i0) * D, P(f, 0, s0 + HY_BLK_FC1W),
                P(f, 0, s0 + HY_BLK_FC1B), nr, D, DM);
        linear_add(f->x + r0 * D, h + (r0 - w0) * DM, P(f, 0, s0 + HY_BLK_FC2W),
                   P(f, 0, s0 + HY_BLK_FC2B), nr, DM, D);
    } else {
        for (size_t i = 0; i < s->nseg; i++) {
            size_t m = s->m[i], rm = (m * B + s->b0[i]) * T, n = (s->b1[i] - s->b0[i]) * T;
            mlp_fc1(f, NULL, h + (rm - w0) * DM, in + (rm - i0) * D, P(f, m, s0 + HY_BLK_FC1W),
                    P(f, m, s0 + HY_BLK_FC1B), n, D, DM);
            linear_add(f->x + rm * D, h + (rm - w0) * DM, P(f, m, s0 + HY_BLK_FC2W),
                       P(f, m, s0 + HY_BLK_FC2B), n, DM, D);
        }
    }
    if (post_ln(f))   /* x_m = LN2(x_m + fc2_m(...)), in place */
        norm_slice(f, s, f->x, 0, w->mean, w->rstd, w->p0, f->x, s0 + HY_BLK_N2W,
                   s0 + HY_BLK_N2B, T, tp);
}

/* logits_m = head_m(LN_f(x_m[:, 0])) of the pairs of s (norm post: no LN_f; pooler tanh:
 * head_m(tanh(pooler_m(.)))); cls / logits row = pair (a team's first part alone: a few rows) */
static void head_slice(hy_fused *f, const slice *s, size_t T, float *logits,
                       const hy_team_part *tp) {
    const hy_xfmr_config *c = &f->cfg;
    size_t B = s->B, D = c->d_model, K = c->n_classes;
    if (tp && tp->part != 0) return;
    HY_PROF(HY_PROF_COPY, for (size_t p = s->p0; p < s->p1; p++)
                              memcpy(f->cls + p * D, f->x + p * T * D, D * sizeof(float)));
    const float *hin = f->cls;
    if (!post_ln(f)) {
        norm_slice(f, s, f->lnf, 0, f->fmean, f->frstd, 0, f->cls,
                   hy_xfmr_head_slot(c, HY_HEAD_NW), hy_xfmr_head_slot(c, HY_HEAD_NB), 1, NULL);
        hin = f->lnf;
    }
    bool sh = shared(f, HY_PART_HEAD);
    size_t nseg = sh ? 1 : s->nseg;   /* shared: the slice's pairs as one segment */
    bool pool = c->pooler == HY_POOLER_TANH;
    for (size_t i = 0; i < nseg; i++) {
        size_t m = sh ? 0 : s->m[i], p = sh ? s->p0 : m * B + s->b0[i];
        size_t n = sh ? s->p1 - s->p0 : s->b1[i] - s->b0[i];
        const float *in = hin + p * D;
        if (pool) {
            hy_pooler_forward(f->pool + p * D, in, P(f, m, hy_xfmr_head_slot(c, HY_HEAD_PW)),
                              P(f, m, hy_xfmr_head_slot(c, HY_HEAD_PB)), n, D);
            in = f->pool + p * D;
        }
        hy_linear_forward(logits + p * K, in, P(f, m, hy_xfmr_head_slot(c, HY_HEAD_W)),
                          P(f, m, hy_xfmr_head_slot(c, HY_HEAD_B)), n, D, K);
    }
}

/* Sublayers [h0, h1) of the pairs of s (see above): sublayer 2l is block l's attention, 2l + 1
 * its MLP; and the head when h1 is the last one. kv: key counts or NULL */
static void forward_slice(hy_fused *f, const slice *s, size_t T, const int32_t *kv,
                          float *logits, const hy_team_part *tp, size_t h0, size_t h1,
                          const work *w) {
    for (size_t h = h0; h < h1; h++) {
        if (h % 2 == 0) attn_layer(f, s, T, kv, tp, h / 2, w);
        else mlp_layer(f, s, T, tp, h / 2, w);
    }
    if (h1 == 2 * f->cfg.depth) head_slice(f, s, T, logits, tp);
}

/* The split chunk's cut (forward): sublayer f->split_cut, where the master hands the chunk to
 * the worker. The two threads are rarely equally fast (a virtual machine's cores differ by 10 %
 * and more; the master also wakes the worker), and the one that finishes first idles: the cut
 * moves one sublayer (an attention or an MLP) towards the thread that finished first once the
 * difference of their finishing times, averaged over passes, exceeds a sublayer's cost (the
 * pass over the 3 L sublayers a thread runs). Which thread computes a sublayer never changes a
 * bit: every kernel is the same call wherever the cut is. */
static void rebalance(hy_fused *f, uint64_t done0, uint64_t done1, uint64_t start) {
    size_t H = 2 * f->cfg.depth;
    double d = (double)done0 - (double)done1;   /* > 0: the master finished last */
    double pass = (double)(done0 > done1 ? done0 : done1) - (double)start;
    double sub = pass / (1.5 * (double)H);
    f->split_skew += (d - f->split_skew) / 4;
    if (f->split_skew > sub && f->split_cut > 1) {
        f->split_cut--;
        f->split_skew = 0;
    } else if (f->split_skew < -sub && f->split_cut + 1 < H) {
        f->split_cut++;
        f->split_skew = 0;
    }
}

/* tokens of a forward: the model's T (vit), 1 + len (text), len (text_embed bert: the ids hold
 * [CLS]) */
static size_t seq_len(const hy_fused *f, const hy_batch *in) {
    if (f->cfg.kind == HY_XFMR_VIT) return f->T;
    return bert_embed(f) ? in->len : 1 + in->len;
}

static void forward(hy_fused *f, const hy_batch *in, size_t B, float *logits, size_t P) {
    const hy_xfmr_config *c = &f->cfg;
    size_t M = f->M, D = c->d_model, T = seq_len(f, in);
    size_t pairs = M * B;
    if (c->kind == HY_XFMR_VIT)
        hy_patch_extract(f->patches, in->images, B, c->channels, c->image_size, c->patch);
    for (size_t b = 0; b < B; b++)   /* valid keys: CLS and the sample's tokens */
        f->kvalid[b] = c->kind == HY_XFMR_VIT ? (int32_t)T
                       : bert_embed(f)        ? in->lengths[b]
                                              : 1 + in->lengths[b];
    const int32_t *kv = c->kind == HY_XFMR_VIT ? NULL : f->kvalid;
    bool emb_shared = shared(f, HY_PART_EMBED);
    int nth = (int)P;
    size_t nc = n_chunks(pairs, T);
    bool shareable = chunks_shareable(f, pairs, T);
    hy_team tm;
    hy_team_init(&tm);
    atomic_uint half_done;
    atomic_init(&half_done, 0);
    uint64_t done_ns[2] = {0, 0}, start_ns = hy_prof_clock();   /* split passes: the rebalance */
    if (f->split_cut == 0 || f->split_cut >= 2 * c->depth) f->split_cut = c->depth / 2 * 2;
#pragma omp parallel num_threads(nth)
    {
#ifdef _OPENMP
        /* this implicit task's regions (the engine kernels' own) get one thread: the slices
         * are the parallelism. (Without this, a region of one thread is inactive and the
         * kernels' regions would be active ones, created anew by libgomp on every call.) */
        omp_set_num_threads(1);
        size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
#else
        size_t t = 0, nt = 1;
#endif
        /* Chunks that do not divide evenly among the threads: with two threads and an odd
         * number of chunks, three or more (3 pairs at batch 1), the last one is cut between its
         * sublayers (split): the master runs its sublayers before the cut (f->split_cut, half
         * of them at first, then moved by rebalance) before its own chunks and signals, the
         * worker the rest (and the head) after its own chunks: each thread runs about one and a
         * half streams with no barrier, and every kernel is the call it is when one thread runs
         * the chunk whole. Otherwise (a batch-1 member's one pair, or
         * more threads) a leftover chunk is shared when it may be (chunks_shareable): every
         * thread first runs its equal share of whole chunks, then the team runs each leftover
         * one together, kernel by kernel (team.h). */
        bool split = nt == 2 && nc >= 3 && nc % 2 == 1;
        size_t dealt = split                                  ? nc - 1
                       : nt > 1 && nc % nt != 0 && shareable ? nc / nt * nt
                                                             : nc;
        size_t L = c->depth, H = 2 * L, cut = f->split_cut;
        slice sp;   /* the split chunk */
        if (split) make_slice(&sp, chunk_start(pairs, nc, dealt), pairs, M, B);
        /* whole chunks are dealt out to the threads, the lower threads taking the extra ones:
         * the master starts at once, a worker only once it is woken, so the master carries
         * the larger share (3 chunks on 2 threads: 2 + 1, or 1 + 1 and the last one shared) */
        size_t c0 = (dealt * t + nt - 1) / nt, c1 = (dealt * (t + 1) + nt - 1) / nt;
        size_t p0 = chunk_start(pairs, nc, c0), p1 = chunk_start(pairs, nc, c1);
        if (emb_shared) {
            /* computed once into stream 0 (fixed chunks of samples dealt out to the threads),
             * then copied */
            size_t ncb = n_chunks(B, T), e0 = (ncb * t + nt - 1) / nt;
            size_t e1 = (ncb * (t + 1) + nt - 1) / nt;
            for (size_t e = e0; e < e1; e++) {
                size_t b0 = chunk_start(B, ncb, e), b1 = chunk_start(B, ncb, e + 1);
                work w = work_for(f, t, b0);
                embed_samples(f, 0, in, B, b0, b1, T, f->x + b0 * T * D, &w);
            }
#pragma omp barrier
            /* the pairs of the thread's chunks, and the first thread those of the shared ones */
            size_t q0 = chunk_start(pairs, nc, dealt), q1 = t == 0 ? pairs : q0;
            HY_PROF(HY_PROF_COPY, {
                for (size_t p = p0 > B ? p0 : B; p < p1; p++)
                    memcpy(f->x + p * T * D, f->x + (p % B) * T * D, T * D * sizeof(float));
                for (size_t p = q0 > B ? q0 : B; p < q1; p++)
                    memcpy(f->x + p * T * D, f->x + (p % B) * T * D, T * D * sizeof(float));
            });
            /* stream 0's rows are read above until every thread has copied them */
#pragma omp barrier
        }
        /* each thread's chunks go through their layers in its own work set (the split chunk
         * too: between sublayers a chunk's state is its rows of x alone) */
        work ws = work_for(f, t, split ? sp.p0 : 0);
        if (split && t == 0) {
            if (!emb_shared) embed_slice(f, &sp, in, T, &ws);
            forward_slice(f, &sp, T, kv, logits, NULL, 0, cut, &ws);
            hy_signal_post(&half_done);
        }
        /* the thread's chunks, each through every layer: its activations stay in cache */
        for (size_t ci = c0; ci < c1; ci++) {
            slice s;
            make_slice(&s, chunk_start(pairs, nc, ci), chunk_start(pairs, nc, ci + 1), M, B);
            work w = work_for(f, t, s.p0);
            if (!emb_shared) embed_slice(f, &s, in, T, &w);
            forward_slice(f, &s, T, kv, logits, NULL, 0, H, &w);
        }
        if (split && t == 1) {
            hy_signal_wait(&half_done);
            forward_slice(f, &sp, T, kv, logits, NULL, cut, H, &ws);
        }
        if (split) done_ns[t] = hy_prof_clock();
        /* the leftover chunks, each shared by the team (none when split) */
        hy_team_part tp = {&tm, t, nt};
        hy_team_join(&tm, (unsigned)nt);
        for (size_t ci = dealt; ci < nc && !split; ci++) {
            slice s;
            make_slice(&s, chunk_start(pairs, nc, ci), chunk_start(pairs, nc, ci + 1), M, B);
            work w = work_for(f, nt, s.p0);   /* the team's set: no thread's own */
            if (!emb_shared) {
                if (t == 0) embed_slice(f, &s, in, T, &w);
                hy_team_barrier(&tm);
            }
            forward_slice(f, &s, T, kv, logits, &tp, 0, H, &w);
        }
    }
    if (done_ns[0] && done_ns[1]) rebalance(f, done_ns[0], done_ns[1], start_ns);
}

hy_status hy_fused_forward(hy_fused *f, const hy_batch *in, size_t B, float *logits) {
    HY_TRY(check_batch(f, in, B));
    if (f->M > HY_FUSED_MAX_MEMBERS)
        return hy_fail(HY_EINVAL, "fused: at most %d members (got %zu)", HY_FUSED_MAX_MEMBERS,
                       f->M);
    size_t T = seq_len(f, in);
    size_t P = forward_threads(f, f->M * B, T);
    HY_TRY(ensure_ones(f));
    HY_TRY(ensure_work(f, P + 1));   /* a set per thread and the team's */
    /* OpenBLAS single-threaded for the call: the slices are the parallelism */
    int blas_threads = openblas_get_num_threads();
    if (blas_threads != 1) openblas_set_num_threads(1);
    const hy_bf16_set *prev = f->bf16 ? hy_bf16_use(f->bf16) : NULL;
    forward(f, in, B, logits, P);
    if (f->bf16) hy_bf16_use(prev);
    if (blas_threads != 1) openblas_set_num_threads(blas_threads);
    return HY_OK;
}

hy_status hy_fused_set_precision(hy_fused *f, hy_precision want, hy_precision *used) {
    return hy_xfmr_bf16_precision(&f->bf16, want, &f->cfg, f->params, f->table, f->slot, f->M,
                                  used);
}

/* ===== predict ===== */

hy_status hy_fused_predict(hy_fused *f, const hy_dataset *ds, size_t batch_size,
                           float *member_logits, float *probs, float *member_probs) {
    if (batch_size == 0) return hy_fail(HY_EINVAL, "fused: batch_size must be >= 1 (got 0)");
    if (ds->n && batch_size > ds->n) batch_size = ds->n;     /* the same single batch */
    if (f->B_cap < batch_size || !f->acts) HY_TRY(hy_fused_alloc_acts(f, batch_size));
    size_t M = f->M, K = f->cfg.n_classes, N = ds->n;
    hy_loader ld;
    HY_TRY(hy_loader_new(&ld, ds, batch_size, 0, NULL, 0));
    hy_status st = HY_OK;
    float *lg = hy_xmalloc(M * batch_size * K * sizeof(float));
    float *pr = hy_xmalloc(batch_size * K * sizeof(float));
    double *acc = hy_xmalloc(K * sizeof(double));   /* one row's member-mean probabilities */
    if (!lg || !pr || !acc) st = HY_ENOMEM;
    size_t first = 0, B;
    while (st == HY_OK && (B = hy_loader_next(&ld)) > 0) {
        hy_batch in;
        hy_train_input(&ld, &in);
        if ((st = hy_fused_forward(f, &in, B, lg)) != HY_OK) break;
        for (size_t b = 0; b < B; b++) {
            for (size_t k = 0; k < K; k++) acc[k] = 0.0;
            for (size_t m = 0; m < M; m++) {
                const float *z = lg + (m * B + b) * K;
                hy_softmax_rows(pr, z, 1, K);
                for (size_t k = 0; k < K; k++) acc[k] += (double)pr[k];
                size_t row = (m * N + first + b) * K;
                if (member_logits) memcpy(member_logits + row, z, K * sizeof(float));
                if (member_probs) memcpy(member_probs + row, pr, K * sizeof(float));
            }
            if (probs)
                for (size_t k = 0; k < K; k++)
                    probs[(first + b) * K + k] = (float)(acc[k] / (double)M);
        }
        first += B;
    }
    hy_free(lg);
    hy_free(pr);
    hy_free(acc);
    hy_loader_release(&ld);
    return st;
}

/* ===== cost ===== */

/* the members' hy_xfmr_cost added, a shared tensor's parameters counted once and a shared
 * embedding computed once (a shared LayerNorm, MLP or head still runs on every stream) */
static void fused_cost(const hy_fused *f, size_t T, double *flops, size_t *params) {
    const hy_xfmr_config *c = &f->cfg;
    double fl = 0.0;
    size_t np = 0;
    for (size_t m = 0; m < f->M; m++) {
        hy_xfmr_costs k = hy_xfmr_cost(c, T, f->kept + m * c->depth);
        for (int p = 0; p < HY_N_PARTS; p++) {
            bool once = shared(f, (hy_xfmr_part)p);
            if (m == 0 || !once) np += k.params[p];
            if (m == 0 || !(once && p == HY_PART_EMBED)) fl += k.flops[p];
        }
    }
    if (flops) *flops = fl;
    if (params) *params = np;
}

size_t hy_fused_params(const hy_fused *f) {
    size_t n = 0;
    fused_cost(f, f->T, NULL, &n);
    return n;
}

double hy_fused_flops(const hy_fused *f, size_t T) {
    double fl = 0.0;
    fused_cost(f, T, &fl, NULL);
    return fl;
}
