/* ckpt.h: model checkpoints in the HDF5 schema of DESIGN §2.
 *   /config       attributes kind ("vit"|"text") and every field of HY_XFMR_CONFIG_FIELDS
 *                 (xfmr.h) in its order: image_size, channels, patch, vocab_size, max_len,
 *                 d_model, n_heads, depth, d_mlp, n_classes (int64, all always written; 0 for
 *                 fields of the other kind), attn_dropout, mlp_dropout (float64)
 *   /params/<timm name>   float32, PyTorch [out,in] shapes (a straight copy of the param table)
 *   /head_gates   float32 [L,H]
 *   /ensemble     (ensembles only: written by the model's extension, read by hydra/ens.h
 *                 hy_ens_load) attributes method ("batch_ensemble" | "lora_ensemble"), members
 *                 (int64), and for lora_ensemble rank (int64), alpha (float64), targets ("q,v":
 *                 words of q, k, v, o, mlp); the members' tensors are /params entries after the
 *                 base ones
 *   /meta         attributes: hydra_version (always) and the caller's (seed, git_hash,
 *                 config_hash, data_hash, ...)
 * Round trip is bit-exact. Entry points: hy_ckpt_save, hy_ckpt_write, hy_ckpt_write_config,
 * hy_ckpt_load / _with, hy_ckpt_read_config, hy_ckpt_read_params, hy_ckpt_read_encoder. */
#ifndef HY_CKPT_H
#define HY_CKPT_H

#include "io/h5.h"
#include "nn/xfmr.h"

/* One /meta attribute: a string (str != NULL) or a number (num; written as int64 when is_int). */
typedef struct hy_kv {
    const char *key;
    const char *str;
    double num;
    int is_int;
} hy_kv;

/* Writes config, params, gates and the /meta attributes (n entries, borrowed) into an open file
 * being written (f from hy_h5_create; the caller commits). */
hy_status hy_ckpt_write(hy_h5 *f, const hy_xfmr *m, const hy_kv *meta, size_t n);
/* Writes /config: kind and every field of HY_XFMR_CONFIG_FIELDS (sizes int64, rates float64),
 * in schema order. Shared by checkpoints and fused files. */
hy_status hy_ckpt_write_config(hy_h5 *f, const hy_xfmr_config *c);
/* hy_h5_create + hy_ckpt_write + hy_h5_commit: path appears complete or not at all. */
hy_status hy_ckpt_save(const char *path, const hy_xfmr *m, const hy_kv *meta, size_t n);

/* Reads /config of an open checkpoint into cfg (checked with hy_xfmr_config_check).
 * A missing attribute fails naming it: "ckpt: 'x.h5' has no /config attribute 'd_model'"; a
 * size outside [0, hy_xfmr_field_max] names the limit: "ckpt: 'x.h5': /config depth =
 * 1099511627776 is out of range (expected 0 to 1024)". */
hy_status hy_ckpt_read_config(hy_h5 *f, hy_xfmr_config *cfg);
/* Reads every /params tensor and /head_gates of an open checkpoint into an existing model of
 * the same config. A missing tensor: "ckpt: 'x.h5' has no tensor 'head.bias' (expected shape
 * [10])"; a mis-shaped one: "ckpt: 'x.h5': tensor 'head.weight' has shape [5,64], expected
 * [10,64]". On failure the model's params may be partly overwritten. */
hy_status hy_ckpt_read_params(hy_h5 *f, hy_xfmr *m);
/* train.init: reads every /params tensor of the checkpoint at path into m except the classifier
 * head (head.weight, head.bias: left as they are, i.e. initialised from the run's seed), with
 * names and shapes checked tensor by tensor against m's table ("ckpt: 'pre.h5' has no tensor
 * 'blocks.3.norm1.weight' (expected shape [128])", "ckpt: 'pre.h5': tensor 'tok_embed.weight'
 * has shape [9000,128], expected [8000,128]") and every value finite; the file's /config kind
 * must be m's. Gates are not read. All or nothing: on failure m is unchanged. *n_loaded
 * receives the tensors read. */
hy_status hy_ckpt_read_encoder(const char *path, hy_xfmr *m, size_t *n_loaded);
/* Fails when buf[0..n) holds a NaN or an infinity, naming the file, the tensor and the first bad
 * element: "ckpt: 'x.h5': tensor 'head.weight' has a non-finite value (nan) at flat index 17".
 * Every tensor of a checkpoint (and /head_gates) and of a fused model is checked on load. */
hy_status hy_ckpt_check_finite(const char *path, const char *what, const float *buf, size_t n);
/* Fails unless dataset `name` exists with shape[0..ndim) (what names it in messages):
 * "ckpt: 'x.h5' has no tensor 'head.bias' (expected shape [10])", "ckpt: 'x.h5': tensor
 * 'head.weight' has shape [5,64], expected [10,64]". Reads no data. */
hy_status hy_ckpt_check_tensor(hy_h5 *f, const char *name, const char *what, int ndim,
                               const int64_t *shape);
/* Reads float32 dataset `name` into buf after hy_ckpt_check_tensor's checks, then
 * hy_ckpt_check_finite's (the checks and messages of every tensor of a checkpoint, also of the
 * MLM head's /mlm/params). On failure buf may be partly written. */
hy_status hy_ckpt_read_tensor(hy_h5 *f, const char *name, const char *what, int ndim,
                              const int64_t *shape, float *buf);
/* Fails unless the /params of an open checkpoint hold exactly the tensors cfg describes, with
 * their shapes, and /head_gates is [depth, n_heads]; nothing is read or allocated but the table.
 * "ckpt: 'x.h5': /config depth = 4096 but /params holds 4 blocks (blocks.0 to blocks.3)". */
hy_status hy_ckpt_check_layout(hy_h5 *f, const hy_xfmr_config *cfg);
/* *n = 1 + the largest b of the children "blocks.<b>.*" of group (0 when none, or no group). */
hy_status hy_ckpt_count_blocks(hy_h5 *f, const char *group, size_t *n);
/* Builds the model m (zeroed) of an open checkpoint f whose /config is cfg: hy_xfmr_new, or an
 * extended model after reading the extension's part of f. */
typedef hy_status (*hy_ckpt_build)(hy_h5 *f, const hy_xfmr_config *cfg, hy_xfmr *m);
/* Opens path, builds m with build (m is overwritten and left zeroed on failure) and reads params
 * and gates. No activations are allocated. */
hy_status hy_ckpt_load_with(const char *path, hy_xfmr *m, hy_ckpt_build build);
/* hy_ckpt_load_with for a single model (hy_xfmr_new from /config); a file with /ensemble fails
 * (an ensemble loads with hy_ens_load). */
hy_status hy_ckpt_load(const char *path, hy_xfmr *m);

#endif
