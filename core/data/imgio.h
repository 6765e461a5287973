/* imgio.h: image decoding (PNG via libpng) and whole-set image operations on uint8 stacks
 * [N,H,W]: tiling a sheet into cells, padding, flips, inversion, pixel statistics.
 * Every function borrows its inputs and returns owned outputs (out is overwritten; zeroed on
 * failure). Errors name the file or the shapes involved. */
#ifndef HY_IMGIO_H
#define HY_IMGIO_H

#include "tensor/tensor.h"

/* Decodes a PNG (any bit depth / colour type) to 8-bit grey uint8 [H,W] (RGB -> grey with
 * libpng's default ITU-R weights, alpha stripped, 16-bit reduced).
 * "imgio: cannot open 'x.png': reason", "imgio: 'x.png' is not a PNG file (bad signature)",
 * "imgio: 'x.png': corrupt PNG (reason)". */
hy_status hy_png_read_gray(const char *path, hy_tensor *out);
/* Writes uint8 [H,W] as an 8-bit greyscale PNG (tests, inspection). */
hy_status hy_png_write_gray(const char *path, const hy_tensor *img);

/* Cuts sheet uint8 [H,W] into cells of th x tw, row by row (left to right, top to bottom):
 * out uint8 [(H/th)*(W/tw), th, tw]. H and W must be multiples of th and tw. */
hy_status hy_img_tiles(const hy_tensor *sheet, int64_t th, int64_t tw, hy_tensor *out);
/* Pads each image of uint8 [N,H,W] with `value` to [N, H+top+bottom, W+left+right]. */
hy_status hy_img_pad(const hy_tensor *in, int64_t top, int64_t bottom, int64_t left,
                     int64_t right, uint8_t value, hy_tensor *out);
/* Upside-down copy (row i -> row H-1-i) of uint8 [N,H,W]. */
hy_status hy_img_flip_v(const hy_tensor *in, hy_tensor *out);
/* 255 - x for every pixel of uint8 [N,H,W]. */
hy_status hy_img_invert(const hy_tensor *in, hy_tensor *out);
/* Mean and (population) standard deviation of x/255 over every pixel of a uint8 tensor
 * (accumulated exactly in integers). Fails on an empty tensor. */
hy_status hy_img_stats(const hy_tensor *in, double *mean, double *std);

/* Area (box-filter) resampling of a float image src [h, w] to dst [dh, dw], separable: a
 * horizontal pass into tmp [h, dw], then a vertical one (sums in double). Used by the glyph
 * renderer and the corruptions; never allocates or fails. */
void hy_img_resize_area(const float *src, size_t w, size_t h, float *tmp, float *dst,
                        size_t dw, size_t dh);

#endif
