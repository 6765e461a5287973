/* fuzz_h5model.h: the structure-aware HDF5 fuzzing shared by fuzz_ckpt_h5, fuzz_gates_h5 and
 * fuzz_fused_h5. Mutated HDF5 bytes die inside libhdf5's parser (fuzz_ckpt reaches 21 edges of
 * hydra), so these targets never mutate bytes: the input is a program. Its first byte picks a
 * valid base file (a checkpoint, gates or fused file of a tiny model, written once per process
 * by hydra's own writers); the rest is a list of edits applied to a copy of it through the HDF5
 * API, in memory (core driver, file images): set an attribute (any key of a small dictionary or
 * an existing one; int64 from a table of edge values, float64, string, a 2-element array),
 * delete an attribute, delete an object, replace a dataset by one of another shape and type
 * (dims perturbed, filled with a chosen value), poke one element (NaN, inf, 0.5, -1, 1e30),
 * copy or rename an object under a mutated name (digits changed: blocks.1 -> blocks.7,
 * members/0 -> members/3). The edited image is then handed to hydra's loader as a file
 * (fuzz_file). Every file the loader sees is valid HDF5, so coverage grows in hydra's checks.
 * HDF5's own error printing is off. */
#ifndef HY_FUZZ_H5MODEL_H
#define HY_FUZZ_H5MODEL_H

#include "fuzz_common.h"

#include <math.h>
#include <string.h>

#include <hdf5.h>
#include <hdf5_hl.h>

#include "hydra/ens.h"
#include "hydra/fused.h"
#include "hydra/prune.h"
#include "io/h5.h"
#include "nn/ckpt.h"

/* ===== the input as a stream of choices (zeros once it runs out) ===== */

typedef struct fz_in {
    const uint8_t *p;
    size_t n, i;
} fz_in;

static unsigned fz_u8(fz_in *in) { return in->i < in->n ? in->p[in->i++] : 0u; }
static unsigned fz_u16(fz_in *in) { return fz_u8(in) | fz_u8(in) << 8; }
static int fz_more(const fz_in *in) { return in->i < in->n; }

/* ===== the base files ===== */

/* tiny models: a ViT (8x8x1 images, patch 4) and a text model, 2 layers, 2 heads */
static hy_xfmr_config fz_config(int text) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = text ? HY_XFMR_TEXT : HY_XFMR_VIT;
    if (text) {
        c.vocab_size = 20;
        c.max_len = 6;
    } else {
        c.image_size = 8;
        c.channels = 1;
        c.patch = 4;
    }
    c.d_model = 8;
    c.n_heads = 2;
    c.depth = 2;
    c.d_mlp = 16;
    c.n_classes = 3;
    return c;
}

/* a scratch folder for the writers, removed again once the base file is read back */
static char fz_scratch[64];
static const char *fz_dir(void) {
    if (!fz_scratch[0]) {
        snprintf(fz_scratch, sizeof fz_scratch, "/tmp/hydra-fuzz-XXXXXX");
        if (!mkdtemp(fz_scratch)) { perror("mkdtemp"); abort(); }
    }
    return fz_scratch;
}
static void fz_dir_done(void) {
    if (fz_scratch[0]) rmdir(fz_scratch);
    fz_scratch[0] = '\0';
}

/* Reads the whole file at path into an owned buffer and removes the file. */
static uint8_t *fz_slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) abort();
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz);
    if (!b || fread(b, 1, (size_t)sz, fp) != (size_t)sz) abort();
    fclose(fp);
    remove(path);
    *n = (size_t)sz;
    return b;
}

/* a member model: seeded weights, member-dependent head gates (at least one head per layer) */
static void fz_model(hy_xfmr *m, int text, const hy_ens_config *e, uint64_t seed) {
    hy_xfmr_config c = fz_config(text);
    hy_status st = e ? hy_ens_new(m, &c, e) : hy_xfmr_new(m, &c);
    if (st != HY_OK) { fprintf(stderr, "%s\n", hy_errmsg()); abort(); }
    hy_xfmr_init(m, seed);
    for (size_t l = 0; l < c.depth; l++)
        hy_xfmr_set_gate(m, l, (size_t)(seed + l) % c.n_heads, 0.0f);
}

/* base checkpoint v: 0 vit, 1 text, 2 a BatchEnsemble vit (3 members), 3 a LoRA text model */
#define FZ_N_CKPT 4
static inline void fz_write_ckpt(const char *path, int v) {
    hy_ens_config e;
    memset(&e, 0, sizeof e);
    if (v == 2) {
        e.kind = HY_ENS_BATCH;
        e.members = 3;
    } else if (v == 3) {
        e.kind = HY_ENS_LORA;
        e.members = 2;
        e.rank = 2;
        e.alpha = 4.0f;
        e.targets = HY_LORA_Q | HY_LORA_V;
    }
    hy_xfmr m;
    fz_model(&m, v == 1 || v == 3, v >= 2 ? &e : NULL, 7 + (uint64_t)v);
    hy_kv meta[2] = {{"seed", NULL, 7, 1}, {"data_mean", NULL, 0.25, 0}};
    if (hy_ckpt_save(path, &m, meta, 2) != HY_OK) abort();
    hy_xfmr_release(&m);
}

/* base gates file v: M = 1 + v members of the vit (v < 3), or of the text model (v = 3) */
#define FZ_N_GATES 4
static inline void fz_write_gates(const char *path, int v) {
    size_t M = v < 3 ? 1 + (size_t)v : 2, L = 2, NH = 2;
    float g[4 * 2 * 2], sc[4 * 2 * 2];
    for (size_t i = 0; i < M * L * NH; i++) {
        g[i] = (i / NH + i) % 2 ? 1.0f : 0.0f;   /* one head of two per layer */
        sc[i] = 0.1f * (float)i;
    }
    int64_t sh[3] = {(int64_t)M, (int64_t)L, (int64_t)NH};
    hy_h5 h;
    if (hy_h5_create(&h, path) != HY_OK) abort();
    if (hy_h5_write_data(&h, "/gates", HY_F32, 3, sh, g) != HY_OK ||
        hy_h5_write_data(&h, "/scores", HY_F32, 3, sh, sc) != HY_OK ||
        hy_h5_set_attr_str(&h, "/", "method", "taylor") != HY_OK ||
        hy_h5_set_attr_i64(&h, "/", "members", (int64_t)M) != HY_OK ||
        hy_h5_set_attr_str(&h, "/", "keep", M == 1 ? "1,1" : M == 2 ? "1,1;1,1" : "1,1;1,1;1,1")
            != HY_OK ||
        hy_h5_set_attr_str(&h, "/", "checkpoint_sha256", "00ff") != HY_OK)
        abort();
    if (hy_h5_commit(&h) != HY_OK) abort();
}

/* base fused file v: members and fuse.* modes per variant, vit (v < 4) or text */
#define FZ_N_FUSED 6
static hy_fuse_config fz_fuse_modes(int v) {
#define A HY_FUSE_AVERAGE
#define P HY_FUSE_MEMBER
    static const hy_fuse_mode t[FZ_N_FUSED][4] = {
        {P, P, P, P}, {A, P, P, P}, {A, A, A, A}, {P, A, P, A}, {A, P, P, P}, {P, P, A, P}};
#undef A
#undef P
    hy_fuse_config fc = {t[v][0], t[v][1], t[v][2], t[v][3]};
    return fc;
}
static size_t fz_fused_members(int v) { return 1 + (size_t)v % 3; }
static inline void fz_write_fused(const char *path, int v) {
    size_t M = fz_fused_members(v);
    hy_xfmr ms[3];
    hy_xfmr *mp[3];
    for (size_t m = 0; m < M; m++) {
        fz_model(&ms[m], v >= 4, NULL, 11 + m);
        mp[m] = &ms[m];
    }
    hy_fuse_config fc = fz_fuse_modes(v);
    hy_fused f;
    if (hy_fused_build(&f, mp, M, &fc) != HY_OK) { fprintf(stderr, "%s\n", hy_errmsg()); abort(); }
    if (hy_fused_save(path, &f) != HY_OK) abort();
    hy_fused_release(&f);
    for (size_t m = 0; m < M; m++) hy_xfmr_release(&ms[m]);
}

typedef void (*fz_writer)(const char *path, int v);

/* The image of base file v of a kind (written on first use, then cached). */
static const uint8_t *fz_base(fz_writer w, int v, size_t *n) {
    static struct { fz_writer w; int v; uint8_t *img; size_t n; } cache[16];
    static int nc;
    for (int i = 0; i < nc; i++)
        if (cache[i].w == w && cache[i].v == v) {
            *n = cache[i].n;
            return cache[i].img;
        }
    if (nc == 16) abort();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/base.h5", fz_dir());
    w(path, v);
    cache[nc].w = w;
    cache[nc].v = v;
    cache[nc].img = fz_slurp(path, &cache[nc].n);
    fz_dir_done();   /* empty again: nothing is left behind */
    *n = cache[nc].n;
    return cache[nc++].img;
}

/* ===== edits through the HDF5 API ===== */

#define FZ_MAX_OBJS 256
typedef struct fz_objs {
    char *path[FZ_MAX_OBJS];
    int is_dset[FZ_MAX_OBJS];
    int n;
} fz_objs;

static herr_t fz_visit(hid_t o, const char *name, const H5O_info_t *info, void *op) {
    (void)o;
    fz_objs *ob = op;
    if (ob->n < FZ_MAX_OBJS) {
        size_t k = strlen(name);
        char *p = malloc(k + 2);
        if (!p) abort();
        p[0] = '/';
        memcpy(p + 1, name, k + 1);
        if (strcmp(name, ".") == 0) p[1] = '\0';
        ob->path[ob->n] = p;
        ob->is_dset[ob->n++] = info->type == H5O_TYPE_DATASET;
    }
    return 0;
}

static void fz_objs_free(fz_objs *ob) {
    for (int i = 0; i < ob->n; i++) free(ob->path[i]);
    ob->n = 0;
}

static const char *const FZ_KEYS[] = {
    "members", "depth", "d_model", "n_heads", "d_mlp", "n_classes", "image_size", "channels",
    "patch", "vocab_size", "max_len", "kind", "mlp", "ln", "embed", "head", "format", "method",
    "rank", "alpha", "targets", "keep", "attn_dropout", "mlp_dropout", "data_mean", "data_std",
    "checkpoint_sha256", "seed"};
#define FZ_N_KEYS (sizeof FZ_KEYS / sizeof *FZ_KEYS)
static const char *const FZ_STRS[] = {
    "vit", "text", "average", "member", "batch_ensemble", "lora_ensemble", "q,v", "q,k,v,o,mlp",
    "zz", "", "1,1;1,1", "1,1;1,1;1,1", "2,2", ";", "q,,v", "mean"};
#define FZ_N_STRS (sizeof FZ_STRS / sizeof *FZ_STRS)
static const int64_t FZ_INTS[] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 20, 63, 64, 65, 256, 257, 1024, 1025, 65536, 65537,
    -1, -2, (int64_t)1 << 31, ((int64_t)1 << 31) - 1, (int64_t)1 << 32, (int64_t)1 << 40,
    INT64_MAX, INT64_MIN, (int64_t)1 << 62};
#define FZ_N_INTS (sizeof FZ_INTS / sizeof *FZ_INTS)
static const double FZ_VALS[] = {0.0, 1.0, 0.5, -1.0, 2.0, 1e30, -1e30, 1e-45, NAN, INFINITY,
                                 -INFINITY, 3.0, 0.25, 100.0, -0.0, 7.5};
#define FZ_N_VALS (sizeof FZ_VALS / sizeof *FZ_VALS)

static int64_t fz_int(fz_in *in) {
    unsigned b = fz_u8(in);
    if (b < 0xF0) return FZ_INTS[b % FZ_N_INTS];
    int64_t v = 0;
    for (int i = 0; i < 8; i++) v = (int64_t)((uint64_t)v << 8 | fz_u8(in));
    return v;
}

/* an attribute key: one of the object's own (by index) or from the dictionary */
static void fz_key(fz_in *in, hid_t obj, char *key, size_t n) {
    unsigned b = fz_u8(in);
    H5O_info_t oi;
    if ((b & 1) && H5Oget_info(obj, &oi) >= 0 && oi.num_attrs > 0) {
        hid_t a = H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, (hsize_t)(b >> 1) %
                                 oi.num_attrs, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            ssize_t k = H5Aget_name(a, n, key);
            H5Aclose(a);
            if (k > 0) return;
        }
    }
    snprintf(key, n, "%s", FZ_KEYS[(b >> 1) % FZ_N_KEYS]);
}

static void fz_set_attr(fz_in *in, hid_t obj) {
    char key[64];
    fz_key(in, obj, key, sizeof key);
    if (H5Aexists(obj, key) > 0) H5Adelete(obj, key);
    unsigned t = fz_u8(in) % 6;
    hid_t space = H5I_INVALID_HID, type = H5I_INVALID_HID, a;
    hsize_t two = 2;
    if (t == 3 || t == 5) space = H5Screate_simple(1, &two, NULL);
    else space = H5Screate(H5S_SCALAR);
    if (t == 0 || t == 3) {
        int64_t v[2] = {fz_int(in), fz_int(in)};
        a = H5Acreate2(obj, key, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) { H5Awrite(a, H5T_NATIVE_INT64, v); H5Aclose(a); }
    } else if (t == 1 || t == 5) {
        double v[2] = {FZ_VALS[fz_u8(in) % FZ_N_VALS], FZ_VALS[fz_u8(in) % FZ_N_VALS]};
        a = H5Acreate2(obj, key, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) { H5Awrite(a, H5T_NATIVE_DOUBLE, v); H5Aclose(a); }
    } else if (t == 2) {
        const char *s = FZ_STRS[fz_u8(in) % FZ_N_STRS];
        type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        H5Tset_cset(type, H5T_CSET_UTF8);
        a = H5Acreate2(obj, key, type, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) { H5Awrite(a, type, &s); H5Aclose(a); }
    } else {   /* a fixed-length string, or an unsigned 8-bit value */
        if (fz_u8(in) & 1) {
            const char *s = FZ_STRS[fz_u8(in) % FZ_N_STRS];
            type = H5Tcopy(H5T_C_S1);
            H5Tset_size(type, strlen(s) + 1);
            a = H5Acreate2(obj, key, type, space, H5P_DEFAULT, H5P_DEFAULT);
            if (a >= 0) { H5Awrite(a, type, s); H5Aclose(a); }
        } else {
            uint8_t v = (uint8_t)fz_u8(in);
            a = H5Acreate2(obj, key, H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT);
            if (a >= 0) { H5Awrite(a, H5T_NATIVE_UINT8, &v); H5Aclose(a); }
        }
    }
    if (type >= 0) H5Tclose(type);
    H5Sclose(space);
}

/* path with its digits changed by the input: "/members/0/x" -> "/members/3/x" */
static void fz_mutate_name(fz_in *in, const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    size_t k = strlen(out);
    unsigned b = fz_u8(in);
    int changed = 0;
    for (size_t i = 0; i < k; i++)
        if (out[i] >= '0' && out[i] <= '9') {
            if ((b & 3) != 0) { out[i] = (char)('0' + fz_u8(in) % 10); changed = 1; }
            b >>= 2;
        }
    if (!changed && k + 3 < n) {
        out[k] = '_';
        out[k + 1] = (char)('a' + fz_u8(in) % 4);
        out[k + 2] = '\0';
    }
}

/* replaces dataset `path` by one with perturbed dims and type, filled with one value */
static void fz_replace(fz_in *in, hid_t file, const char *path) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0) return;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[8] = {0};
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd < 0 || nd > 8) nd = 0;
    else H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    unsigned op = fz_u8(in);
    int k = nd ? (int)(fz_u8(in) % (unsigned)nd) : 0;
    switch (op % 6) {
    case 0: if (nd) dims[k] += 1; break;
    case 1: if (nd && dims[k]) dims[k] -= 1; break;
    case 2: if (nd) dims[k] = 0; break;
    case 3: if (nd) dims[k] *= 2; break;
    case 4: if (nd < 4) dims[nd++] = 1; break;
    default: if (nd) nd--; break;
    }
    hsize_t total = 1;
    for (int i = 0; i < nd; i++) total *= dims[i];
    if (total > 1 << 16) return;
    hid_t ft;
    switch (fz_u8(in) % 6) {
    case 0: ft = H5T_IEEE_F32LE; break;
    case 1: ft = H5T_IEEE_F64LE; break;
    case 2: ft = H5T_STD_I32LE; break;
    case 3: ft = H5T_STD_U8LE; break;
    case 4: ft = H5T_IEEE_F32BE; break;
    default: ft = H5T_STD_I64LE; break;
    }
    double v = FZ_VALS[fz_u8(in) % FZ_N_VALS];
    double *buf = malloc((size_t)(total ? total : 1) * sizeof *buf);
    if (!buf) abort();
    bool fl = H5Tget_class(ft) == H5T_FLOAT;
    for (hsize_t i = 0; i < total; i++) buf[i] = (fl || isfinite(v)) ? v : 0.0;
    H5Ldelete(file, path, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    sp = nd ? H5Screate_simple(nd, dims, NULL) : H5Screate(H5S_SCALAR);
    d = H5Dcreate2(file, path, ft, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (d >= 0) {
        H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        H5Dclose(d);
    }
    H5Sclose(sp);
    H5Pclose(lcpl);
    free(buf);
}

/* one element of a float dataset set to an edge value */
static void fz_poke(fz_in *in, hid_t file, const char *path) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0) return;
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int nd = H5Sget_simple_extent_ndims(sp);
    if (n > 0 && nd >= 1 && nd <= 8) {
        hsize_t dims[8], coord[8];
        H5Sget_simple_extent_dims(sp, dims, NULL);
        hsize_t flat = (hsize_t)fz_u16(in) % (hsize_t)n;
        for (int i = nd - 1; i >= 0; i--) {
            coord[i] = flat % dims[i];
            flat /= dims[i];
        }
        H5Sselect_elements(sp, H5S_SELECT_SET, 1, coord);
        hsize_t one = 1;
        hid_t ms = H5Screate_simple(1, &one, NULL);
        double v = FZ_VALS[fz_u8(in) % FZ_N_VALS];
        H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, sp, H5P_DEFAULT, &v);
        H5Sclose(ms);
    }
    H5Sclose(sp);
    H5Dclose(d);
}

/* Applies the edits of `in` to a copy of image img[0..n); returns the edited image (owned) and
 * its size, or NULL when HDF5 cannot produce one. */
static uint8_t *fz_edit(fz_in *in, const uint8_t *img, size_t n, size_t *out_n) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 64 * 1024, 0);
    H5Pset_file_image(fapl, (void *)(uintptr_t)img, n);
    hid_t file = H5Fopen("fuzz-image.h5", H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    if (file < 0) abort();   /* the base image is always valid */
    int edits = (int)(fz_u8(in) % 12);
    for (int e = 0; e < edits && fz_more(in); e++) {
        fz_objs ob = {.n = 0};
        H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, fz_visit, &ob);
        if (ob.n == 0) break;
        unsigned op = fz_u8(in) % 8;
        int k = (int)(fz_u8(in) % (unsigned)ob.n);
        const char *p = ob.path[k];
        char other[256];
        if (op <= 1) {   /* attributes are the commonest edit */
            hid_t o = H5Oopen(file, p, H5P_DEFAULT);
            if (o >= 0) { fz_set_attr(in, o); H5Oclose(o); }
        } else if (op == 2) {
            hid_t o = H5Oopen(file, p, H5P_DEFAULT);
            if (o >= 0) {
                char key[64];
                fz_key(in, o, key, sizeof key);
                if (H5Aexists(o, key) > 0) H5Adelete(o, key);
                H5Oclose(o);
            }
        } else if (op == 3) {
            if (strcmp(p, "/") != 0) H5Ldelete(file, p, H5P_DEFAULT);
        } else if (op == 4) {
            if (ob.is_dset[k]) fz_replace(in, file, p);
        } else if (op == 5) {
            if (ob.is_dset[k]) fz_poke(in, file, p);
        } else if (op == 6 && strcmp(p, "/") != 0) {   /* copy under a mutated name */
            fz_mutate_name(in, p, other, sizeof other);
            hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
            H5Pset_create_intermediate_group(lcpl, 1);
            if (H5Lexists(file, other, H5P_DEFAULT) <= 0)
                H5Ocopy(file, p, file, other, H5P_DEFAULT, lcpl);
            H5Pclose(lcpl);
        } else if (strcmp(p, "/") != 0) {   /* rename */
            fz_mutate_name(in, p, other, sizeof other);
            hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
            H5Pset_create_intermediate_group(lcpl, 1);
            if (H5Lexists(file, other, H5P_DEFAULT) <= 0)
                H5Lmove(file, p, file, other, lcpl, H5P_DEFAULT);
            H5Pclose(lcpl);
        }
        fz_objs_free(&ob);
    }
    uint8_t *out = NULL;
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0) {
        ssize_t sz = H5Fget_file_image(file, NULL, 0);
        if (sz > 0 && (out = malloc((size_t)sz)) != NULL &&
            H5Fget_file_image(file, out, (size_t)sz) != sz) {
            free(out);
            out = NULL;
        }
        *out_n = sz > 0 ? (size_t)sz : 0;
    }
    H5Fclose(file);
    return out;
}

/* The edited file of kind w (base variant from the first input byte, modulo nv) as a path. */
static const char *fz_file_of(fz_in *in, fz_writer w, int nv, int *variant) {
    *variant = (int)(fz_u8(in) % (unsigned)nv);
    size_t n = 0, en = 0;
    const uint8_t *img = fz_base(w, *variant, &n);
    uint8_t *ed = fz_edit(in, img, n, &en);
    if (!ed) return NULL;
    const char *path = fuzz_file(ed, en);
    free(ed);
    return path;
}

#endif
