/* fused.h: the fused Hydra model (DESIGN §3.5), inference only.
 *   Every member m keeps its own residual stream x_m (B, T, D) through every layer; the streams
 *   are stored member-major, x (M, B, T, D), so "all streams" is one (M*B*T, D) matrix.
 *   Per layer: LN1 per member (one call over all streams when fuse.ln = average); Q/K/V and
 *   the output projection as a ragged grouped GEMM (group m: LN1(x_m) (B*T, D) x member m's
 *   packed qkv (D, 3 k_m HS), resp. (k_m HS -> D) added into x_m); attention over the kept heads
 *   of every member with the single model's kernel (hy_attn_forward); LN2; the MLP with one
 *   shared weight for the rows of all streams when fuse.mlp = average (fc1/fc2 are the members'
 *   mean; executed per chunk of rows, see below), else each member's own MLP. Embeddings (cls,
 *   pos, patch / token) and the classifier head (head.*) are per member or averaged
 *   (fuse.embed, fuse.head); the LayerNorms norm1, norm2 and the final norm follow fuse.ln.
 *   With averaged embeddings the first layer's input is computed once and copied into every
 *   stream. The members' encoder options (xfmr.h) are the fused model's, each computed with the
 *   model's kernels: norm post (no LN before Q/K/V and fc1; x_m = LN1_m(x_m + proj_m(...)),
 *   x_m = LN2_m(x_m + fc2_m(...)) in place; no final LN), act gelu_tanh (hy_gelu_tanh_forward
 *   after fc1), pooler tanh (head_m(tanh(pooler_m(.))) on the CLS row; pooler.* follow
 *   fuse.head), text_embed bert (x_m = embed_norm_m(tok[ids] + type[type_ids] + pos), T = len,
 *   keys >= lengths[b] masked; pos_embed, tok/type_embed and embed_norm follow fuse.embed), and
 *   ln_eps. Execution (fused.c): the rows are split into chunks of about 256 rows --
 *   contiguous runs of (member, sample) pairs at boundaries independent of the thread count,
 *   dealt out whole to the threads, each going through every layer while it is in cache -- so
 *   the M streams are independent work that runs concurrently with no synchronisation inside
 *   the forward. Within a block, Q/K/V and
 *   the output projection are one hy_gemm_grouped call each over the block's member segments
 *   (ragged: k_m differs per member); the merged MLP is one GEMM over the block's rows across
 *   member boundaries; per-member tensors are one GEMM per member segment.
 * Parameters live in one block with a name table whose names are the file's dataset paths:
 *   "members/{m}/<timm name>" (m 0-based, like blocks.{i}) or "shared/<timm name>". The packed
 *   attention tensors keep the timm names: blocks.{i}.attn.qkv.weight (3 k HS, D) with rows
 *   q heads | k heads | v heads of the kept heads in ascending original order, qkv.bias (3 k HS),
 *   proj.weight (D, k HS), proj.bias (D). members/{m}/head_gates (L, NH) records the kept heads.
 * Entry points: hy_fused_build, hy_fused_load, hy_fused_save, hy_fused_release,
 * hy_fused_alloc_acts, hy_fused_forward, hy_fused_predict, hy_fused_params, hy_fused_flops. */
#ifndef HY_FUSED_H
#define HY_FUSED_H

#include "io/h5.h"
#include "data/loader.h"
#include "nn/xfmr.h"

typedef enum { HY_FUSE_MEMBER = 0, HY_FUSE_AVERAGE = 1 } hy_fuse_mode;

/* The most members a fused model holds (build, load and forward refuse more). */
#define HY_FUSED_MAX_MEMBERS 64

/* fuse.mlp, fuse.ln, fuse.embed, fuse.head */
typedef struct hy_fuse_config {
    hy_fuse_mode mlp, ln, embed, head;
} hy_fuse_config;

/* "member" / "average"; parse fails HY_EINVAL "fused: fuse.mlp must be average or member (got
 * 'x')" (key names the field). */
const char *hy_fuse_mode_name(hy_fuse_mode m);
hy_status hy_fuse_mode_parse(const char *key, const char *s, hy_fuse_mode *out);

typedef struct hy_fused {
    hy_xfmr_config cfg;   /* the members' common config */
    hy_fuse_config fuse;
    size_t M, T, HS;      /* members, max tokens (with CLS), head size */
    float *head_gates;    /* owned (M, L, NH), 1 kept, 0 pruned */
    size_t *kept;         /* owned (M, L): heads kept by member m in layer l */
    int32_t *heads;       /* owned (M, L, NH): original index of the j-th kept head (-1 after) */
    size_t n_tensors;
    hy_param *table;      /* owned: names are the file paths (see the header) */
    size_t *slot;         /* owned (M, S): table index of member m's tensor for xfmr slot s */
    size_t n_slots;       /* S = hy_xfmr_n_slots(&cfg): the slots of xfmr.h (HY_EMB_*, HY_BLK_*
                           * at hy_xfmr_slot, HY_HEAD_* at hy_xfmr_head_slot) */
    size_t n_params;      /* floats in params (with alignment padding) */
    float *params;        /* owned */
    /* activations (hy_fused_alloc_acts) */
    size_t B_cap;
    float *acts;          /* owned block; the pointers below point into it. Streams are
                           * member-major: pair (m, b) owns rows (m B + b) T .. + T */
    float *x;             /* (M, B, T, D) residual streams */
    float *patches;       /* vit: (B, NP, C_in p p), shared by the members */
    float *cls;           /* (M, B, D) x[:, 0] after the last block */
    float *lnf;           /* (M, B, D) LN_f(cls) */
    float *fmean, *frstd; /* (M, B) final LayerNorm statistics */
    float *pool;          /* (M, B, D) tanh(pooler(.)) (pooler tanh) */
    int32_t *kvalid;      /* (B) valid keys per sample (T for vit, 1 + length for text) */
    float *ones;          /* owned: n_heads ones, the attention gates (allocated once) */
    /* work sets (fused.c): the buffers a chunk of at most max(256, T) rows goes through its
     * layers in -- LN1 / LN2 output, LayerNorm statistics, Q/K/V (3 k_m HS floats of each row
     * used), the attention output, the MLP hidden (GELU in place), the patch / token
     * embeddings -- one per thread and one for a chunk the threads share; so the fused model's
     * memory beyond x, patches and the per-pair rows does not grow with the batch */
    float *work;          /* owned: n_work sets of hy_fused_work_floats floats */
    size_t n_work;
    /* the two-thread forward's split chunk (fused.c, rebalance): the sublayer where the master
     * hands it to the worker (0: not set yet), and the threads' finishing-time difference (ns,
     * averaged over passes) that moves it. Scheduling only: no result depends on them. */
    size_t split_cut;
    double split_skew;
    /* precision bf16 (hy_fused_set_precision): the BF16 forms of the members' linears that
     * hy_fused_forward uses; NULL: float32 */
    hy_bf16_set *bf16;    /* owned */
} hy_fused;

/* Packs M pruned members (each a model with binary head gates in m->gates, all with the same
 * config) into f. Borrows members. Averaged tensors are the mean over members (accumulated in
 * double). Fails, with f zeroed:
 *   "fused: need at least one member (got 0)"
 *   "fused: member 2 has a different config than member 1 (d_model 32 vs 64)"
 *   "fused: member 2 gate of layer 1, head 3 is 0.5 (expected 0 or 1)"
 *   "fused: member 1 prunes every head of layer 2 (keep at least one)"   HY_EINVAL / HY_ENOMEM */
hy_status hy_fused_build(hy_fused *f, hy_xfmr *const *members, size_t M,
                         const hy_fuse_config *fc);
/* Frees everything; accepts a zeroed or released f; zeroes f. */
void hy_fused_release(hy_fused *f);

/* Writes /config (the checkpoint attributes), /fuse (attributes mlp, ln, embed, head: "average"
 * or "member", members: M, format: 1), /members/{m}/head_gates and every parameter under its
 * table name into an open file being written; the caller commits. */
hy_status hy_fused_write(hy_h5 *file, const hy_fused *f);
/* hy_h5_create + hy_fused_write + hy_h5_commit. */
hy_status hy_fused_save(const char *path, const hy_fused *f);
/* Reads a fused file; f overwritten (zeroed on failure). Errors name the file and the tensor.
 * Every count is checked against the data it describes before anything is allocated: /fuse
 * members (1 to HY_FUSED_MAX_MEMBERS) against the groups /members/0 .. /members/{M-1} ("fused:
 * 'f.h5': /fuse members = 2 but the file holds 3 member groups under /members"), /config depth
 * against the blocks stored, the head_gates and the unpacked tensors' shapes against /config. */
hy_status hy_fused_load(hy_fused *f, const char *path);

/* Activations for batches of up to B_cap samples (frees any previous block), and work sets for
 * the threads the machine has. */
hy_status hy_fused_alloc_acts(hy_fused *f, size_t B_cap);
/* Floats of one work set: the same at every batch size and depth. */
size_t hy_fused_work_floats(const hy_fused *f);

/* Forward of B samples (hy_batch as in xfmr.h): logits (M, B, K) written, member m's logits in
 * rows [m*B, (m+1)*B). Validates the batch like hy_xfmr_forward (HY_EINVAL, logits untouched).
 * Threads: the M*B (member, sample) pairs are cut into chunks whose boundaries depend on M*B and
 * T only; whole chunks are dealt out to the threads and run the whole forward independently in
 * one OpenMP region (no per-layer barrier; see fused.c). The logits are bitwise the same
 * whatever the thread count. OpenBLAS is set to one thread for the call and restored after.
 * The only allocations are the attention gates' n_heads ones, at the first call, and more work
 * sets when a call has more threads than any before (HY_ENOMEM). */
hy_status hy_fused_forward(hy_fused *f, const hy_batch *in, size_t B, float *logits);

/* The arithmetic of hy_fused_forward, as hy_xfmr_set_precision (nn/xfmr.h) for the model:
 * bf16 takes every member's block linears (a shared tensor once) and the vit patch embedding
 * in BF16; fp32 is the default. On a CPU without AVX-512 BF16 it stays fp32; *used (may be
 * NULL) gets the precision in force. Fails HY_ENOMEM (f unchanged). */
hy_status hy_fused_set_precision(hy_fused *f, hy_precision want, hy_precision *used);

/* Every sample of ds in order, in batches of batch_size: member_logits (M, N, K), probs (N, K)
 * = mean over members of softmax, member_probs (M, N, K); any output may be NULL. */
hy_status hy_fused_predict(hy_fused *f, const hy_dataset *ds, size_t batch_size,
                           float *member_logits, float *probs, float *member_probs);

/* Parameters stored (without padding) and forward FLOPs of one sample at sequence length T: the
 * members' hy_xfmr_cost (kept heads) added, a shared (fuse.* = average) tensor's parameters
 * counted once and a shared embedding computed once. */
size_t hy_fused_params(const hy_fused *f);
double hy_fused_flops(const hy_fused *f, size_t T);

#endif
