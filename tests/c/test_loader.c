/* test_loader.c: datasets from arrays and prepared files, normalisation, seeded shuffling,
 * batching, augmentation (crop + flip), text batches with dynamic length and the sequence lengths
 * they run at (hy_dataset_seq_lens), synthetic data. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <hdf5.h>

#include "check.h"
#include "io/h5.h"
#include "data/loader.h"
#include "nn/train.h"

static const double MEAN = 0.2860, STD = 0.3530;

static void make_images(hy_tensor *img, hy_tensor *lab, size_t n) {
    CHECK_OK(hy_synth_images(img, lab, n, 28, 10, 7));
}

static void test_from_images_and_errors(void) {
    hy_tensor img, lab;
    make_images(&img, &lab, 50);
    hy_dataset d;
    CHECK_OK(hy_dataset_from_images(&d, &img, &lab, MEAN, STD, 20));
    CHECK(d.n == 20 && d.h == 28 && d.w == 28 && d.kind == HY_DATA_IMAGE, "n %zu", d.n);
    CHECK(memcmp(d.images, img.data, 20 * 784) == 0, "pixels copied");
    for (size_t i = 0; i < 20; i++)
        CHECK(d.labels[i] == ((int16_t *)lab.data)[i], "label %zu", i);
    hy_dataset_release(&d);
    hy_dataset_release(&d);

    hy_tensor short_lab;
    int64_t s[1] = {49};
    CHECK_OK(hy_tensor_alloc(&short_lab, HY_I16, 1, s));
    CHECK_FAIL(hy_dataset_from_images(&d, &img, &short_lab, MEAN, STD, 0), HY_EINVAL,
               "loader: images have 50 samples but labels have shape [49]");
    CHECK(d.images == NULL && d.n == 0, "left zeroed");
    CHECK_FAIL(hy_dataset_from_images(&d, &lab, &lab, MEAN, STD, 0), HY_EINVAL,
               "loader: images must be uint8 [N,H,W] or [N,C,H,W] with C <= 4 (got int16 [50])");
    CHECK_FAIL(hy_dataset_from_images(&d, &img, &lab, MEAN, 0, 0), HY_EINVAL,
               "loader: std must be > 0 (got 0)");
    ((int16_t *)lab.data)[3] = -5;
    CHECK_FAIL(hy_dataset_from_images(&d, &img, &lab, MEAN, STD, 0), HY_EINVAL,
               "loader: label -5 of sample 3 out of range");
    hy_tensor_release(&short_lab);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

static void test_normalisation_and_batches(void) {
    hy_tensor img, lab;
    make_images(&img, &lab, 10);
    uint8_t *px = img.data;
    px[0] = 0;
    px[1] = 255;
    hy_dataset d;
    CHECK_OK(hy_dataset_from_images(&d, &img, &lab, MEAN, STD, 0));
    hy_loader ld;
    CHECK_OK(hy_loader_new(&ld, &d, 4, 0, NULL, 1));
    CHECK(hy_loader_batches(&ld) == 3, "batches %zu", hy_loader_batches(&ld));
    CHECK(hy_loader_next(&ld) == 4, "first batch");
    CHECK(fabs((double)ld.images[0] - (0 - MEAN) / STD) < 1e-6, "pixel 0 -> %g",
          (double)ld.images[0]);
    CHECK(fabs((double)ld.images[1] - (1 - MEAN) / STD) < 1e-6, "pixel 255 -> %g",
          (double)ld.images[1]);
    for (size_t i = 0; i < 784; i++) {
        double want = ((double)px[784 + i] / 255.0 - MEAN) / STD;
        if (fabs((double)ld.images[784 + i] - want) > 1e-5) {
            CHECK(0, "pixel %zu of sample 2: %g vs %g", i, (double)ld.images[784 + i], want);
            break;
        }
    }
    CHECK(ld.index[0] == 0 && ld.index[3] == 3 && ld.labels[2] == d.labels[2], "in order");
    CHECK(hy_loader_next(&ld) == 4 && hy_loader_next(&ld) == 2 && ld.index[1] == 9, "partial");
    CHECK(hy_loader_next(&ld) == 0, "end of epoch");
    hy_loader_release(&ld);
    hy_dataset_release(&d);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

/* The order of an epoch as seen through the batches. */
static void epoch_order(hy_loader *ld, uint64_t epoch, int64_t *out) {
    hy_loader_start_epoch(ld, epoch);
    size_t k = 0, b;
    while ((b = hy_loader_next(ld)) > 0)
        for (size_t i = 0; i < b; i++) out[k++] = ld->index[i];
}

static void test_seeded_shuffle(void) {
    enum { N = 37 };
    hy_tensor img, lab;
    make_images(&img, &lab, N);
    hy_dataset d;
    CHECK_OK(hy_dataset_from_images(&d, &img, &lab, MEAN, STD, 0));
    hy_loader a, b, c;
    CHECK_OK(hy_loader_new(&a, &d, 8, 1, NULL, 99));
    CHECK_OK(hy_loader_new(&b, &d, 5, 1, NULL, 99));
    CHECK_OK(hy_loader_new(&c, &d, 8, 1, NULL, 100));
    int64_t oa0[N], oa1[N], ob1[N], oc0[N], oa0_again[N];
    epoch_order(&a, 0, oa0);
    epoch_order(&a, 1, oa1);
    epoch_order(&b, 1, ob1);
    epoch_order(&c, 0, oc0);
    epoch_order(&a, 0, oa0_again);
    int seen[N] = {0};
    for (size_t i = 0; i < N; i++) seen[oa0[i]]++;
    int perm = 1, ident = 1;
    for (size_t i = 0; i < N; i++) {
        perm &= seen[i] == 1;
        ident &= oa0[i] == (int64_t)i;
    }
    CHECK(perm && !ident, "epoch 0 is a shuffled permutation");
    CHECK(memcmp(oa0, oa0_again, sizeof oa0) == 0, "same seed + epoch -> same order");
    CHECK(memcmp(oa1, ob1, sizeof oa1) == 0, "order does not depend on the batch size");
    CHECK(memcmp(oa0, oa1, sizeof oa0) != 0, "epochs differ");
    CHECK(memcmp(oa0, oc0, sizeof oa0) != 0, "seeds differ");
    hy_loader_release(&a);
    hy_loader_release(&b);
    hy_loader_release(&c);
    hy_dataset_release(&d);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

/* Is out (normalised) the image src shifted by (dy,dx), maybe mirrored, with zero padding? */
static int matches_shift(const float *out, const uint8_t *src, int dy, int dx, int flip) {
    for (int y = 0; y < 28; y++)
        for (int x = 0; x < 28; x++) {
            int sy = y + dy, sx = (flip ? 27 - x : x) + dx;
            double p = (sy < 0 || sy >= 28 || sx < 0 || sx >= 28) ? 0 : src[sy * 28 + sx];
            if (fabs((double)out[y * 28 + x] - (p / 255.0 - MEAN) / STD) > 1e-5) return 0;
        }
    return 1;
}

static void test_augmentation(void) {
    enum { N = 64 };
    hy_tensor img, lab;
    make_images(&img, &lab, N);
    hy_dataset d;
    CHECK_OK(hy_dataset_from_images(&d, &img, &lab, MEAN, STD, 0));
    hy_augment aug = {1, 2, 1};
    hy_loader ld, ld2;
    CHECK_OK(hy_loader_new(&ld, &d, N, 1, &aug, 5));
    CHECK_OK(hy_loader_new(&ld2, &d, N, 1, &aug, 5));
    CHECK(hy_loader_next(&ld) == N && hy_loader_next(&ld2) == N, "one batch");
    CHECK(memcmp(ld.images, ld2.images, N * 784 * sizeof(float)) == 0, "augmentation seeded");
    int flips = 0, shifted = 0, explained = 0;
    for (size_t i = 0; i < N; i++) {
        const uint8_t *src = d.images + (size_t)ld.index[i] * 784;
        int found = 0;
        for (int f = 0; f < 2 && !found; f++)
            for (int dy = -2; dy <= 2 && !found; dy++)
                for (int dx = -2; dx <= 2 && !found; dx++)
                    if (matches_shift(ld.images + i * 784, src, dy, dx, f)) {
                        found = 1;
                        flips += f;
                        shifted += dy != 0 || dx != 0;
                    }
        explained += found;
    }
    CHECK(explained == N, "%d of %d outputs are a crop/flip of their source", explained, N);
    CHECK(flips > 10 && flips < 54, "flipped %d of %d", flips, N);
    CHECK(shifted > 40, "shifted %d of %d", shifted, N);
    /* fill (used for evaluation) never augments */
    int64_t idx[2] = {3, 4};
    hy_loader_fill(&ld, idx, 2);
    CHECK(matches_shift(ld.images, d.images + 3 * 784, 0, 0, 0), "fill is not augmented");
    hy_loader_release(&ld);
    hy_loader_release(&ld2);
    aug.crop_padding = 40;
    CHECK_FAIL(hy_loader_new(&ld, &d, 4, 1, &aug, 5), HY_EINVAL,
               "loader: crop_padding must be in [0, 28] (got 40)");
    CHECK_FAIL(hy_loader_new(&ld, &d, 0, 1, NULL, 5), HY_EINVAL,
               "loader: batch_size must be >= 1 (got 0)");
    hy_dataset_release(&d);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

static void test_text_batches(void) {
    hy_tensor ids, len, lab;
    CHECK_OK(hy_synth_text(&ids, &len, &lab, 30, 12, 40, 3));
    int32_t *L = len.data, *id = ids.data;
    for (size_t i = 0; i < 30; i++) {
        CHECK(L[i] >= 6 && L[i] <= 12, "length %d", L[i]);
        int has3 = 0;
        for (int j = 0; j < 12; j++) {
            has3 |= id[i * 12 + (size_t)j] == 3;
            if (j >= L[i]) CHECK(id[i * 12 + (size_t)j] == 0, "padding is 0");
        }
        CHECK(has3 == ((int16_t *)lab.data)[i], "label = token 3 present");
    }
    L[0] = 3;   /* a short first batch: samples 0..1 */
    L[1] = 4;
    hy_dataset d;
    CHECK_OK(hy_dataset_from_text(&d, &ids, &len, &lab, 0));
    hy_loader ld;
    CHECK_OK(hy_loader_new(&ld, &d, 2, 0, NULL, 0));
    CHECK(hy_loader_next(&ld) == 2 && ld.len == 4, "dynamic length %zu", ld.len);
    CHECK(ld.lengths[0] == 3 && ld.lengths[1] == 4, "lengths");
    CHECK(memcmp(ld.ids, id, 4 * sizeof(int32_t)) == 0 &&
              memcmp(ld.ids + 4, id + 12, 4 * sizeof(int32_t)) == 0, "ids with stride len");
    hy_loader_release(&ld);
    hy_augment aug = {0, 0, 1};
    CHECK_FAIL(hy_loader_new(&ld, &d, 2, 0, &aug, 0), HY_EINVAL,
               "loader: augmentation (random_crop, hflip) needs images");
    hy_dataset_release(&d);
    L[5] = 13;
    CHECK_FAIL(hy_dataset_from_text(&d, &ids, &len, &lab, 0), HY_EINVAL,
               "loader: length 13 of sample 5 outside [1, 12]");
    hy_tensor_release(&ids);
    hy_tensor_release(&len);
    hy_tensor_release(&lab);
}

/* hy_dataset_seq_lens: real[T] counts each sample at its own T = 1 + length; padded[T] counts
 * the rows of every batch the loader cuts in order (no shuffle) at T = 1 + ld.len, for batch
 * sizes that divide n, do not, exceed it; images are refused. */
static void test_seq_lens(void) {
    hy_tensor ids, len, lab;
    const size_t N = 29, L = 12;
    CHECK_OK(hy_synth_text(&ids, &len, &lab, N, L, 40, 5));
    int32_t *ln = len.data;
    ln[3] = 1;   /* the shortest length */
    hy_dataset d;
    CHECK_OK(hy_dataset_from_text(&d, &ids, &len, &lab, 0));
    size_t real[14], padded[14], want_r[14], want_p[14];
    static const size_t sizes[] = {1, 4, 29, 64};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        memset(want_r, 0, sizeof want_r);
        memset(want_p, 0, sizeof want_p);
        for (size_t i = 0; i < N; i++) want_r[1 + (size_t)ln[i]]++;
        hy_loader ld;
        CHECK_OK(hy_loader_new(&ld, &d, sizes[s], 0, NULL, 0));
        size_t b, rows = 0;
        while ((b = hy_loader_next(&ld)) > 0) {
            want_p[1 + ld.len] += b;
            rows += b;
        }
        hy_loader_release(&ld);
        CHECK(rows == N, "rows %zu", rows);
        CHECK_OK(hy_dataset_seq_lens(&d, sizes[s], real, padded));
        for (size_t T = 0; T < L + 2; T++) {
            CHECK(real[T] == want_r[T], "batch %zu: real[%zu] = %zu, want %zu", sizes[s], T,
                  real[T], want_r[T]);
            CHECK(padded[T] == want_p[T], "batch %zu: padded[%zu] = %zu, want %zu", sizes[s], T,
                  padded[T], want_p[T]);
        }
    }
    CHECK(real[2] == 1 && real[0] == 0 && real[1] == 0, "T = 1 + length (CLS included)");
    CHECK_OK(hy_dataset_seq_lens(&d, 1, real, padded));
    CHECK(memcmp(real, padded, sizeof real) == 0, "batch 1: nothing padded");
    size_t longest = 0;
    for (size_t i = 0; i < N; i++) longest = (size_t)ln[i] > longest ? (size_t)ln[i] : longest;
    CHECK_OK(hy_dataset_seq_lens(&d, 64, NULL, padded));
    CHECK(padded[1 + longest] == N, "one batch: every row at 1 + the longest (%zu)", longest);
    CHECK_FAIL(hy_dataset_seq_lens(&d, 0, real, padded), HY_EINVAL,
               "loader: batch_size must be >= 1 (got 0)");
    hy_dataset_release(&d);
    hy_tensor_release(&ids);
    hy_tensor_release(&len);
    hy_tensor_release(&lab);
    hy_tensor img, il;
    make_images(&img, &il, 3);
    CHECK_OK(hy_dataset_from_images(&d, &img, &il, MEAN, STD, 0));
    CHECK_FAIL(hy_dataset_seq_lens(&d, 2, real, padded), HY_EINVAL,
               "loader: sequence lengths need a text dataset (this one is images)");
    hy_dataset_release(&d);
    hy_tensor_release(&img);
    hy_tensor_release(&il);
}

static void test_synth_deterministic(void) {
    hy_tensor a, la, b, lb;
    CHECK_OK(hy_synth_images(&a, &la, 20, 28, 10, 11));
    CHECK_OK(hy_synth_images(&b, &lb, 20, 28, 10, 11));
    CHECK(memcmp(a.data, b.data, 20 * 784) == 0 && memcmp(la.data, lb.data, 40) == 0, "same");
    hy_tensor_release(&b);
    hy_tensor_release(&lb);
    CHECK_OK(hy_synth_images(&b, &lb, 20, 28, 10, 12));
    CHECK(memcmp(a.data, b.data, 20 * 784) != 0, "seed matters");
    hy_tensor_release(&a);
    hy_tensor_release(&la);
    hy_tensor_release(&b);
    hy_tensor_release(&lb);
    CHECK_FAIL(hy_synth_images(&a, &la, 4, 28, 17, 1), HY_EINVAL,
               "loader: synthetic images need 1..16 classes and size >= 8 (got 17 classes, "
               "size 28)");
}

static void test_load_prepared_file(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.h5", check_tmpdir());
    hy_tensor img, lab;
    make_images(&img, &lab, 12);
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_h5_write(&f, "/train/images", &img));
    CHECK_OK(hy_h5_write(&f, "/train/labels", &lab));
    CHECK_OK(hy_h5_set_attr_f64(&f, "/meta", "mean", 0.25));
    CHECK_OK(hy_h5_set_attr_f64(&f, "/meta", "std", 0.5));
    CHECK_OK(hy_h5_commit(&f));
    hy_dataset d;
    CHECK_OK(hy_dataset_load(&d, path, "train", 5, NULL));
    CHECK(d.n == 5 && d.mean == 0.25 && d.std == 0.5, "loaded n %zu mean %g", d.n, d.mean);
    CHECK(memcmp(d.images, img.data, 5 * 784) == 0, "pixels");
    hy_dataset_release(&d);
    double ms[2] = {0.1, 0.2};
    CHECK_OK(hy_dataset_load(&d, path, "train", 0, ms));
    CHECK(d.n == 12 && d.mean == 0.1 && d.std == 0.2, "mean/std override");
    hy_dataset_release(&d);
    char want[700];
    snprintf(want, sizeof want,
             "loader: '%s' has no split 'test' (neither /test/images nor /test/ids)", path);
    CHECK_FAIL(hy_dataset_load(&d, path, "test", 0, NULL), HY_EINVAL, want);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

/* A prepared file whose /train/images is an unwritten chunked dataset of the given dims: HDF5
 * stores no data for it, so a few bytes of file declare any size. */
static void write_declared(const char *path, hsize_t n, hsize_t h, hsize_t w) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {n, h, w}, chunk[3] = {1, 1, 1};
    hid_t sp = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t d = H5Dcreate2(f, "/train/images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t sp1 = H5Screate_simple(1, dims, NULL), dcpl1 = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl1, 1, chunk);
    hid_t l = H5Dcreate2(f, "/train/labels", H5T_STD_I32LE, sp1, H5P_DEFAULT, dcpl1, H5P_DEFAULT);
    CHECK(f >= 0 && d >= 0 && l >= 0, "crafted file");
    H5Dclose(l);
    H5Pclose(dcpl1);
    H5Sclose(sp1);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
}

/* Dataset shapes are checked against HY_DATA_MAX_* before anything is read or allocated. */
static void test_declared_sizes_checked(void) {
    char path[512], want[1024];
    snprintf(path, sizeof path, "%s/declared.h5", check_tmpdir());
    double ms[2] = {0.5, 0.25};
    hy_dataset d;
    write_declared(path, 4, 70000, 2);
    snprintf(want, sizeof want, "loader: '%s': /train/images dim 2 = 70000 is out of range "
             "(expected 0 to 65536)", path);
    CHECK_FAIL(hy_dataset_load(&d, path, "train", 0, ms), HY_EINVAL, want);
    write_declared(path, (hsize_t)1 << 31, 4, 4);
    snprintf(want, sizeof want, "loader: '%s': /train/images dim 1 = 2147483648 is out of range "
             "(expected 0 to 2147483647)", path);
    CHECK_FAIL(hy_dataset_load(&d, path, "train", 0, ms), HY_EINVAL, want);
    write_declared(path, 1u << 30, 65536, 65536);   /* 2^62 bytes declared */
    snprintf(want, sizeof want, "loader: '%s': /train/images holds more than 68719476736 bytes "
             "(the limit for one dataset)", path);
    CHECK_FAIL(hy_dataset_load(&d, path, "train", 0, ms), HY_EINVAL, want);
    CHECK(d.images == NULL && d.n == 0, "left zeroed");
}

/* the optional /<split>/type_ids (BERT's token types): absent = NULL (all 0) in the dataset and
 * the batch; present: subset, batches with the ids' stride, checked */
static void test_type_ids(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/types.h5", check_tmpdir());
    hy_tensor ids, len, lab, ty;
    CHECK_OK(hy_synth_text(&ids, &len, &lab, 6, 8, 40, 5));
    int64_t sh[2] = {6, 8};
    CHECK_OK(hy_tensor_alloc(&ty, HY_I32, 2, sh));
    int32_t *t = ty.data, *L = len.data;
    for (size_t i = 0; i < 48; i++) t[i] = (int32_t)(i % 8) >= L[i / 8] / 2;
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_h5_write(&f, "/train/ids", &ids));
    CHECK_OK(hy_h5_write(&f, "/train/lengths", &len));
    CHECK_OK(hy_h5_write(&f, "/train/labels", &lab));
    CHECK_OK(hy_h5_write(&f, "/val/ids", &ids));
    CHECK_OK(hy_h5_write(&f, "/val/lengths", &len));
    CHECK_OK(hy_h5_write(&f, "/val/labels", &lab));
    CHECK_OK(hy_h5_write(&f, "/val/type_ids", &ty));
    t[9] = -1;
    CHECK_OK(hy_h5_write(&f, "/bad/ids", &ids));
    CHECK_OK(hy_h5_write(&f, "/bad/lengths", &len));
    CHECK_OK(hy_h5_write(&f, "/bad/labels", &lab));
    CHECK_OK(hy_h5_write(&f, "/bad/type_ids", &ty));
    t[9] = 0;
    CHECK_OK(hy_h5_commit(&f));
    hy_dataset d;
    hy_loader ld;
    hy_batch in;
    CHECK_OK(hy_dataset_load(&d, path, "train", 0, NULL));
    CHECK(d.type_ids == NULL, "no type_ids: NULL");
    CHECK_OK(hy_loader_new(&ld, &d, 4, 0, NULL, 0));
    hy_loader_next(&ld);
    hy_train_input(&ld, &in);
    CHECK(in.type_ids == NULL, "batch without token types");
    hy_loader_release(&ld);
    hy_dataset_release(&d);
    CHECK_OK(hy_dataset_load(&d, path, "val", 5, NULL));
    CHECK(d.n == 5 && d.type_ids && memcmp(d.type_ids, t, 40 * sizeof(int32_t)) == 0,
          "type_ids loaded with the subset");
    CHECK_OK(hy_loader_new(&ld, &d, 2, 0, NULL, 0));
    hy_loader_next(&ld);
    hy_train_input(&ld, &in);
    size_t w = ld.len;
    CHECK(in.type_ids && memcmp(in.type_ids, t, w * sizeof(int32_t)) == 0 &&
          memcmp(in.type_ids + w, t + 8, w * sizeof(int32_t)) == 0, "batch token types");
    hy_loader_release(&ld);
    hy_dataset_release(&d);
    char want[700];
    snprintf(want, sizeof want, "%s:/bad: loader: negative token type -1 at sample 1, position 1",
             path);
    CHECK_FAIL(hy_dataset_load(&d, path, "bad", 0, NULL), HY_EINVAL, want);
    CHECK(d.ids == NULL, "dataset left zeroed");
    hy_tensor_release(&ids);
    hy_tensor_release(&len);
    hy_tensor_release(&lab);
    hy_tensor_release(&ty);
}

/* RGB [N,3,H,W] with per-channel /meta mean/std arrays: each channel normalised with its own
 * values; augmentation crops/flips all channels alike */
static void test_rgb_per_channel(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/rgb.h5", check_tmpdir());
    int64_t is[4] = {4, 3, 5, 6}, ls[1] = {4};
    hy_tensor img, lab;
    CHECK_OK(hy_tensor_alloc(&img, HY_U8, 4, is));
    CHECK_OK(hy_tensor_alloc(&lab, HY_I16, 1, ls));
    uint8_t *p = img.data;
    for (size_t i = 0; i < 4 * 3 * 30; i++) p[i] = (uint8_t)(i * 7 % 256);
    for (size_t i = 0; i < 4; i++) ((int16_t *)lab.data)[i] = (int16_t)i;
    const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_h5_write(&f, "/train/images", &img));
    CHECK_OK(hy_h5_write(&f, "/train/labels", &lab));
    CHECK_OK(hy_h5_set_attr_f64s(&f, "/meta", "mean", mean, 3));
    CHECK_OK(hy_h5_set_attr_f64s(&f, "/meta", "std", std, 3));
    CHECK_OK(hy_h5_commit(&f));
    hy_dataset d;
    CHECK_OK(hy_dataset_load(&d, path, "train", 0, NULL));
    CHECK(d.c == 3 && d.h == 5 && d.w == 6 && d.n == 4, "shape c %zu h %zu w %zu", d.c, d.h, d.w);
    hy_loader ld;
    CHECK_OK(hy_loader_new(&ld, &d, 4, 0, NULL, 1));
    CHECK(hy_loader_next(&ld) == 4, "one batch");
    double worst = 0;
    for (size_t i = 0; i < 4 * 90; i++) {
        size_t c = i / 30 % 3;
        double want = ((double)p[i] / 255.0 - mean[c]) / std[c];
        double e = fabs((double)ld.images[i] - want);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-5, "per-channel normalisation off by %g", worst);
    hy_loader_release(&ld);
    hy_augment aug = {.random_crop = 1, .crop_padding = 2, .hflip = 1};
    CHECK_OK(hy_loader_new(&ld, &d, 4, 1, &aug, 7));
    CHECK(hy_loader_next(&ld) == 4, "one batch");
    /* the same geometric transform in every channel: pixel (y,x) of channel c comes from the
     * same source position; padded positions are the zero pixel of each channel */
    int same = 1;
    for (size_t b = 0; b < 4 && same; b++) {
        const uint8_t *src = p + (size_t)ld.index[b] * 90;
        for (size_t q = 0; q < 30 && same; q++) {
            /* find the source position of channel 0's value, accept if all channels agree */
            double v0 = (double)ld.images[b * 90 + q];
            int found = 0;
            double z0 = -mean[0] / std[0];
            if (fabs(v0 - z0) < 1e-5) {
                found = fabs((double)ld.images[b * 90 + 30 + q] - (-mean[1] / std[1])) < 1e-5;
            }
            for (size_t sidx = 0; sidx < 30 && !found; sidx++) {
                int ok = 1;
                for (size_t c = 0; c < 3 && ok; c++) {
                    double want = ((double)src[c * 30 + sidx] / 255.0 - mean[c]) / std[c];
                    ok = fabs((double)ld.images[b * 90 + c * 30 + q] - want) < 1e-5;
                }
                found = ok;
            }
            same = found;
        }
    }
    CHECK(same, "channels transformed differently");
    hy_loader_release(&ld);
    double bad_std[2] = {0.5, 0.5};
    CHECK_FAIL(hy_dataset_set_norm(&d, mean, bad_std, 2), HY_EINVAL,
               "loader: 2 normalisation values for 3 image channel(s) (expected 1 or 3)");
    hy_dataset_release(&d);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

int main(void) {
    RUN(test_from_images_and_errors);
    RUN(test_normalisation_and_batches);
    RUN(test_seeded_shuffle);
    RUN(test_augmentation);
    RUN(test_text_batches);
    RUN(test_seq_lens);
    RUN(test_synth_deterministic);
    RUN(test_load_prepared_file);
    RUN(test_declared_sizes_checked);
    RUN(test_type_ids);
    RUN(test_rgb_per_channel);
    return check_exit("test_loader");
}
