/* loader.h: in-memory datasets (prepared arrays, DESIGN §5) and the batch loader that feeds the
 * model: seeded shuffling per epoch (hy_rng_split(base, epoch)), image normalisation
 * ((pixel/255 - mean) / std), augmentation switches (random crop with zero padding, horizontal
 * flip; seeded per sample, so batches do not depend on the thread count), and text batches
 * (ids + lengths, cut to the longest sequence of the batch).
 * Entry points: hy_dataset_from_images / _from_text / _load / _seq_lens, hy_loader_new /
 * _start_epoch / _next / _fill. */
#ifndef HY_LOADER_H
#define HY_LOADER_H

#include "tensor/base.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

typedef enum { HY_DATA_IMAGE = 0, HY_DATA_TEXT } hy_data_kind;

/* most image channels a dataset holds */
#define HY_DATA_MAXC 4

/* A split held in memory; every array is owned. */
typedef struct hy_dataset {
    hy_data_kind kind;
    size_t n;                /* samples */
    size_t c, h, w;          /* image channels (1 grey, 3 RGB), height, width (image) */
    uint8_t *images;         /* [n,h,w] (c = 1) or [n,c,h,w] raw pixels (image) */
    size_t max_len;          /* L: columns of ids (text) */
    int32_t *ids;            /* [n,L] token ids, 0-padded (text) */
    int32_t *lengths;        /* [n] tokens per sample, 1..L (text) */
    int32_t *type_ids;       /* [n,L] token types (text, BERT sentence pairs); NULL = all 0 */
    int32_t *labels;         /* [n] class or -1 (OOD) */
    double mean, std;        /* image normalisation (channel 0's when c > 1) */
    double cmean[HY_DATA_MAXC], cstd[HY_DATA_MAXC];   /* per channel: (p/255 - cmean)/cstd */
    char origin[256];        /* "file.h5:/split" for messages (hy_dataset_load), else "" */
} hy_dataset;

/* Copies the first `subset` samples (0 = all) of images uint8 [N,H,W] (grey) or [N,C,H,W]
 * (C <= HY_DATA_MAXC channels, planar) and labels [N] (any integer dtype) into d. std must be
 * > 0; mean/std apply to every channel (hy_dataset_set_norm sets them per channel). Fails
 * naming the mismatch ("loader: images have 100 samples but labels have 99"); d stays zeroed
 * on failure. */
hy_status hy_dataset_from_images(hy_dataset *d, const hy_tensor *images, const hy_tensor *labels,
                                 double mean, double std, size_t subset);
/* Per-channel normalisation of image dataset d: n == 1 (every channel) or n == d->c values;
 * every std finite and > 0, every mean finite. */
hy_status hy_dataset_set_norm(hy_dataset *d, const double *mean, const double *std, size_t n);
/* Copies the first `subset` samples (0 = all) of ids int32 [N,L], lengths int32 [N] and labels
 * [N]. Every length must be in [1, L] and every id >= 0 (fails naming the sample). */
hy_status hy_dataset_from_text(hy_dataset *d, const hy_tensor *ids, const hy_tensor *lengths,
                               const hy_tensor *labels, size_t subset);
/* Limits on a prepared file's datasets, checked on their shapes before anything is read
 * (hy_dataset_load): rows (N) up to HY_DATA_MAX_ROWS, image sides and text columns up to
 * HY_DATA_MAX_SIDE, and at most HY_DATA_MAX_BYTES bytes per dataset (products overflow-checked).
 * "loader: 'x.h5': /train/images dim 2 = 1048576 is out of range (expected 0 to 65536)". */
#define HY_DATA_MAX_ROWS ((int64_t)INT32_MAX)
#define HY_DATA_MAX_SIDE ((int64_t)65536)
#define HY_DATA_MAX_BYTES ((size_t)1 << 36)
/* Sets d's token types (text): the first d->n rows of type_ids int32 [N,L] (N >= d->n, L =
 * d->max_len), every value >= 0 (fails naming the sample); copied. */
hy_status hy_dataset_set_type_ids(hy_dataset *d, const hy_tensor *type_ids);
/* Reads split `split` of a prepared file (DESIGN §5): /<split>/images + /<split>/labels and the
 * /meta attributes mean/std for images (scalars, or one value per channel of [N,C,H,W] images),
 * or /<split>/ids + lengths + labels for text, with the optional /<split>/type_ids (int32 [N,L],
 * BERT's token types; all 0 when absent).
 * mean_std (2 doubles, every channel), when non-NULL, is used instead of /meta (files without it,
 * e.g. OOD sets normalised with the ID set's statistics). Errors name the file and dataset. */
hy_status hy_dataset_load(hy_dataset *d, const char *path, const char *split, size_t subset,
                          const double *mean_std);
void hy_dataset_release(hy_dataset *d);

/* The sequence lengths (tokens with CLS) at which text dataset ds is computed, as counts per T
 * (arrays of ds->max_len + 2 entries indexed by T, written; entries 0 and 1 stay 0; either may be
 * NULL):
 *   real[T]   samples whose own length is T = 1 + lengths[i] (what the sample itself costs);
 *   padded[T] samples executed at T when ds is run in order in batches of batch_size, as every
 *             predict runs it (hy_loader without shuffling): each batch is cut to its longest
 *             sequence, so every row of it runs at T = 1 + that length (hy_loader_next).
 * A cost per sample is then sum_T counts[T] * cost(T) / n (xfmr.h's hy_xfmr_cost takes T).
 * HY_EINVAL for an image dataset or batch_size 0. */
hy_status hy_dataset_seq_lens(const hy_dataset *ds, size_t batch_size, size_t *real,
                              size_t *padded);

/* Synthetic, quickly learnable data in the prepared-file layout (tests, demos, benchmarks).
 * Images: uint8 [n,size,size] of noise (0..63) plus the class's texture (a fixed random binary
 * (size/4)^2 pattern per class, tiled over the image, lit pixels +128..191); classes <= 16;
 * labels int16 [n].
 * Text: ids int32 [n,max_len] of random tokens in [4, vocab) (0-padded), lengths int32 [n] in
 * [max_len/2, max_len], labels int16 [n] in {0, 1}: 1 iff token 3 occurs (max_len >= 2,
 * vocab >= 5). Outputs are allocated (owned by the caller); same seed, same bytes. */
hy_status hy_synth_images(hy_tensor *images, hy_tensor *labels, size_t n, size_t size,
                          size_t classes, uint64_t seed);
hy_status hy_synth_text(hy_tensor *ids, hy_tensor *lengths, hy_tensor *labels, size_t n,
                        size_t max_len, size_t vocab, uint64_t seed);

typedef struct hy_augment {
    int random_crop;         /* train.augment.random_crop: pad by crop_padding (zero pixels),
                              * crop back at a random offset */
    int crop_padding;        /* train.augment.crop_padding */
    int hflip;               /* train.augment.hflip: mirror left-right with probability 1/2 */
} hy_augment;

typedef struct hy_loader {
    const hy_dataset *ds;    /* borrowed; must outlive the loader */
    size_t batch_size;
    int shuffle;
    hy_augment aug;
    hy_rng rng;              /* base stream; epoch e uses hy_rng_split(&rng, e) */
    hy_rng epoch_rng;
    uint64_t epoch;
    int64_t *order;          /* [n] sample order of the current epoch (owned) */
    size_t pos;              /* next position in order */
    /* the current batch (owned buffers sized for batch_size) */
    size_t b;                /* samples in it */
    size_t len;              /* text: columns of ids, = max length in the batch */
    float *images;           /* [B,C,H,W] normalised (image) */
    int32_t *ids;            /* [B,len] row-major with row stride len (text) */
    int32_t *lengths;        /* [B] (text) */
    int32_t *type_ids;       /* [B,len] like ids, when the dataset has token types; else NULL */
    int32_t *labels;         /* [B] */
    int64_t *index;          /* [B] dataset index of each row */
} hy_loader;

/* A loader over ds; batch_size >= 1; aug NULL = no augmentation (images only: a text dataset
 * with augmentation fails). The first epoch is 0 and starts immediately. */
hy_status hy_loader_new(hy_loader *ld, const hy_dataset *ds, size_t batch_size, int shuffle,
                        const hy_augment *aug, uint64_t seed);
void hy_loader_release(hy_loader *ld);
/* Restarts at the beginning of epoch `epoch` (reshuffled from the seed and epoch only). */
void hy_loader_start_epoch(hy_loader *ld, uint64_t epoch);
/* Batches per epoch (the last one may be partial). */
size_t hy_loader_batches(const hy_loader *ld);
/* Fills the next batch; returns its size (0 once the epoch is exhausted). */
size_t hy_loader_next(hy_loader *ld);
/* Fills the batch with samples idx[0..b) (b <= batch_size, each < n), no augmentation. */
void hy_loader_fill(hy_loader *ld, const int64_t *idx, size_t b);
/* (The current batch as the model's input, a hy_batch: train.h hy_train_input.) */

#endif
