/* imgprep.h: colour images as a pretrained model's preprocessing sees them: RGB decoding of
 * PNG (libpng) and JPEG (libjpeg-turbo) files as PIL's Image.open(f).convert("RGB") gives them,
 * PIL's antialiased resampler (Image.resize with BICUBIC or BILINEAR), centre crops as
 * torchvision's CenterCrop takes them, the timm / HF eval pipelines built from those, and the
 * CIFAR-10/100 binary files. Images are uint8 [H,W,3] (interleaved, as decoded) until
 * hy_imgprep_apply, which returns planar [3,S,S] (the model's channel order).
 * Every function borrows its inputs and returns owned outputs (zeroed on failure); errors name
 * the file. */
#ifndef HY_IMGPREP_H
#define HY_IMGPREP_H

#include "tensor/tensor.h"

/* PIL's Image.MAX_IMAGE_PIXELS: beyond it PIL warns, at twice it refuses (decompression bomb).
 * hydra refuses anything above it, before decoding any pixel. */
#define HY_IMG_MAX_PIXELS 89478485

/* Decodes the PNG or JPEG file `path` (told apart by signature, not by name) into uint8
 * [H,W,3]. Conversion to RGB as PIL's convert("RGB"): grey replicated; alpha (RGBA, grey+alpha,
 * palette transparency) dropped without compositing; palette expanded; 1/2/4-bit grey scaled
 * to 0..255; 16-bit samples reduced to their high byte, except 16-bit grey without alpha, which
 * PIL opens as 32-bit "I" and clips at 255. JPEG: libjpeg's defaults as PIL uses them (islow
 * IDCT, fancy upsampling); grey JPEGs replicated; CMYK/YCCK JPEGs are refused. No EXIF
 * rotation (PIL and torchvision's ImageFolder apply none). Fails on an unreadable, unknown,
 * corrupt or truncated file (a JPEG cut inside its scan data too, as PIL refuses it), or one of more than max_pixels pixels (checked from the header,
 * before pixel memory is allocated): "imgprep: 'x.png' is 20000x20000 = 400000000 pixels, more
 * than the limit 89478485". */
hy_status hy_img_read_rgb(const char *path, uint64_t max_pixels, hy_tensor *out);

typedef enum { HY_RESAMPLE_BILINEAR = 0, HY_RESAMPLE_BICUBIC } hy_resample;

/* PIL's Image.resize(size=(dw, dh), resample) on uint8 [H,W,C] (C 1..4), box = the whole image,
 * no reducing_gap: separable, horizontal pass then vertical, each a convolution with the
 * filter (bilinear = triangle, support 1; bicubic a = -0.5, support 2) stretched by the
 * downscale factor, weights normalised per output pixel then rounded to 22-bit fixed point,
 * the intermediate rounded to uint8 (Pillow's Resample.c, 8 bits per channel). A pass whose
 * size does not change is skipped, as PIL skips it. Fails on a zero size. */
hy_status hy_img_resize(const hy_tensor *in, size_t dw, size_t dh, hy_resample filter,
                        hy_tensor *out);

/* torchvision CenterCrop(size) of uint8 [H,W,C]: top = round((H - size) / 2), left likewise,
 * rounding half to even as Python's round(); an image smaller than size is padded with 0 first
 * (torchvision pads left/top by (size - H) // 2 and right/bottom by the rest). */
hy_status hy_img_center_crop(const hy_tensor *in, size_t size, hy_tensor *out);

/* A model's image preprocessing (the checkpoint's /preprocess group). */
typedef struct hy_imgprep {
    int hf;                 /* 0: timm (shorter side -> floor(size / crop_pct), centre crop);
                             * 1: HF (both sides -> size) */
    hy_resample interpolation;
    size_t size;            /* S: output is S x S */
    double crop_pct;        /* timm only, in (0, 1] */
    double mean[3], std[3]; /* stored with the data; applied by the loader */
} hy_imgprep;

/* Applies p's geometry to uint8 [H,W,3]: out uint8 [3,S,S] (planar). timm: the shorter side
 * becomes floor(S / crop_pct), the longer int(that * long / short) (torchvision Resize(int)),
 * then CenterCrop(S); HF: Resize((S, S)). */
hy_status hy_imgprep_apply(const hy_imgprep *p, const hy_tensor *rgb, hy_tensor *out);

/* Reads a CIFAR binary file: records of `label_bytes` label bytes (1 for CIFAR-10; 2 for
 * CIFAR-100: coarse then fine) and 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major 32x32).
 * images uint8 [N,3,32,32] (planar, as stored), labels int16 [N] (CIFAR-100: the fine label;
 * coarse (may be NULL) int16 [N] the coarse one). The file size must be a whole number of
 * records (> 0) and every label < n_classes (10 or 100):
 * "imgprep: 'x.bin' is 3075 bytes, not a multiple of the 3073-byte CIFAR-10 record". */
hy_status hy_cifar_read(const char *path, int label_bytes, hy_tensor *images, hy_tensor *labels,
                        hy_tensor *coarse);

#endif
