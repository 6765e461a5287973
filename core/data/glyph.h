/* glyph.h: renders letters with FreeType into MNIST-like 28x28 uint8 images, white on black:
 * the outline is emboldened (FT_Outline_Embolden), rotated, rasterised anti-aliased at 64 px,
 * area-resampled to fit a (20 * scale) px box (aspect kept) and placed so that its centre of mass
 * sits at the image centre plus a shift, as MNIST was made.
 * Entry points: hy_glyph_render (one image, explicit parameters), hy_glyph_render_set (a seeded
 * set over fonts x letters). */
#ifndef HY_GLYPH_H
#define HY_GLYPH_H

#include "tensor/tensor.h"

#define HY_GLYPH_SIZE 28

/* Parameters of one rendering. */
typedef struct hy_glyph_params {
    double scale;        /* box side = 20 * scale pixels (1 = MNIST's 20 px box) */
    double rotation;     /* degrees, counter-clockwise */
    double shift_x;      /* centre of mass offset from the image centre, pixels (+ = right) */
    double shift_y;      /* (+ = down) */
    double bold;         /* stroke change in pixels at the 64 px rendering size (< 0 thins) */
} hy_glyph_params;

/* Jitter ranges for a set: each parameter uniform in [min, max]. */
typedef struct hy_glyph_jitter {
    double scale_min, scale_max;
    double rotation_max;           /* rotation uniform in [-max, max] degrees */
    double shift_max;              /* each axis uniform in [-max, max] pixels */
    double bold_min, bold_max;
} hy_glyph_jitter;

/* The defaults used by datasets/glyphs.lua (scale 0.8..1.05, +-12 degrees, +-1.5 px,
 * bold -0.5..3.5 px). */
hy_glyph_jitter hy_glyph_default_jitter(void);

/* Renders character `ch` (a Unicode code point) of font file `font` into out[28*28].
 * Fails with HY_EIO naming the font ("glyph: cannot load font 'f.ttf' (FreeType error 1)") or the
 * character ("glyph: 'f.ttf' has no glyph for 'A' (U+0041)"), HY_EINVAL for a glyph that
 * renders empty. */
hy_status hy_glyph_render(const char *font, uint32_t ch, const hy_glyph_params *p, uint8_t *out);

/* Renders `per` images of every (font, letter) pair, ordered font-major, then letter, then
 * repetition: images uint8 [F*K*per, 28, 28], letter int16 [F*K*per] (position in `letters`,
 * 0-based), font int16 [F*K*per] (position in fonts). Sample i uses jitter drawn from
 * hy_rng_split(seed, i), so the set is deterministic. letters: K ASCII characters. */
hy_status hy_glyph_render_set(const char *const *fonts, size_t n_fonts, const char *letters,
                              size_t per, const hy_glyph_jitter *j, uint64_t seed,
                              hy_tensor *images, hy_tensor *letter, hy_tensor *font);

#endif
