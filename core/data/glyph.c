/* glyph.c: FreeType rendering of single glyphs into 28x28 MNIST-style images. */
#include "data/glyph.h"

#include <math.h>
#include <string.h>

#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_OUTLINE_H

#include "data/imgio.h"
#include "tensor/rng.h"

#define RENDER_PX 64          /* rasterisation size (pixels per em) */
#define BOX_PX 20.0           /* MNIST's normalisation box */

hy_glyph_jitter hy_glyph_default_jitter(void) {
    hy_glyph_jitter j = {0.8, 1.05, 12.0, 1.5, -0.5, 3.5};
    return j;
}

/* Renders with an already opened face. */
static hy_status render_face(FT_Face face, const char *font, uint32_t ch,
                             const hy_glyph_params *p, uint8_t *out) {
    hy_status st = HY_OK;
    unsigned char *bits = NULL;
    float *src = NULL, *tmp = NULL, *dst = NULL;
    memset(out, 0, HY_GLYPH_SIZE * HY_GLYPH_SIZE);
    FT_UInt gi = FT_Get_Char_Index(face, ch);
    if (gi == 0)
        return hy_fail(HY_EIO, "glyph: '%s' has no glyph for '%c' (U+%04X)", font,
                       ch < 128 ? (char)ch : '?', (unsigned)ch);
    FT_Error e = FT_Load_Glyph(face, gi, FT_LOAD_NO_BITMAP | FT_LOAD_NO_HINTING);
    if (e || face->glyph->format != FT_GLYPH_FORMAT_OUTLINE)
        return hy_fail(HY_EIO, "glyph: cannot load '%c' from '%s' (FreeType error %d)",
                       ch < 128 ? (char)ch : '?', font, (int)e);
    FT_Outline *ol = &face->glyph->outline;
    if (p->bold != 0) FT_Outline_Embolden(ol, (FT_Pos)lround(p->bold * 64.0));
    double th = p->rotation * 3.14159265358979323846 / 180.0;
    FT_Matrix m = {(FT_Fixed)lround(cos(th) * 65536.0), (FT_Fixed)lround(-sin(th) * 65536.0),
                   (FT_Fixed)lround(sin(th) * 65536.0), (FT_Fixed)lround(cos(th) * 65536.0)};
    FT_Outline_Transform(ol, &m);
    FT_BBox cb;
    FT_Outline_Get_CBox(ol, &cb);
    FT_Pos x0 = cb.xMin & ~63, y0 = cb.yMin & ~63;
    FT_Pos x1 = (cb.xMax + 63) & ~63, y1 = (cb.yMax + 63) & ~63;
    size_t w = (size_t)((x1 - x0) / 64), h = (size_t)((y1 - y0) / 64);
    if (w == 0 || h == 0)
        return hy_fail(HY_EINVAL, "glyph: '%c' of '%s' renders empty", ch < 128 ? (char)ch : '?',
                       font);
    FT_Outline_Translate(ol, -x0, -y0);
    bits = hy_xcalloc(w * h, 1);
    src = hy_xmalloc(w * h * sizeof *src);
    if (!bits || !src) { st = HY_ENOMEM; goto done; }
    FT_Bitmap bm;
    memset(&bm, 0, sizeof bm);
    bm.rows = (unsigned)h;
    bm.width = (unsigned)w;
    bm.pitch = (int)w;
    bm.buffer = bits;
    bm.num_grays = 256;
    bm.pixel_mode = FT_PIXEL_MODE_GRAY;
    e = FT_Outline_Get_Bitmap(face->glyph->library, ol, &bm);
    if (e) {
        st = hy_fail(HY_EIO, "glyph: cannot rasterise '%c' of '%s' (FreeType error %d)",
                     ch < 128 ? (char)ch : '?', font, (int)e);
        goto done;
    }
    for (size_t i = 0; i < w * h; i++) src[i] = bits[i];
    /* fit the longer side to the box, keeping the aspect ratio */
    double side = BOX_PX * p->scale;
    double f = side / (double)(w > h ? w : h);
    size_t dw = (size_t)lround((double)w * f), dh = (size_t)lround((double)h * f);
    if (dw < 1) dw = 1;
    if (dh < 1) dh = 1;
    if (dw > HY_GLYPH_SIZE) dw = HY_GLYPH_SIZE;
    if (dh > HY_GLYPH_SIZE) dh = HY_GLYPH_SIZE;
    tmp = hy_xmalloc(h * dw * sizeof *tmp);
    dst = hy_xmalloc(dh * dw * sizeof *dst);
    if (!tmp || !dst) { st = HY_ENOMEM; goto done; }
    hy_img_resize_area(src, w, h, tmp, dst, dw, dh);
    /* centre of mass -> image centre + shift */
    double mass = 0, mx = 0, my = 0;
    for (size_t y = 0; y < dh; y++)
        for (size_t x = 0; x < dw; x++) {
            double v = dst[y * dw + x];
            mass += v; mx += v * ((double)x + 0.5); my += v * ((double)y + 0.5);
        }
    if (!(mass > 0)) {
        st = hy_fail(HY_EINVAL, "glyph: '%c' of '%s' renders empty", ch < 128 ? (char)ch : '?',
                     font);
        goto done;
    }
    long ox = lround(HY_GLYPH_SIZE / 2.0 + p->shift_x - mx / mass);
    long oy = lround(HY_GLYPH_SIZE / 2.0 + p->shift_y - my / mass);
    for (size_t y = 0; y < dh; y++)
        for (size_t x = 0; x < dw; x++) {
            long X = (long)x + ox, Y = (long)y + oy;
            if (X < 0 || Y < 0 || X >= HY_GLYPH_SIZE || Y >= HY_GLYPH_SIZE) continue;
            double v = dst[y * dw + x];
            out[Y * HY_GLYPH_SIZE + X] = (uint8_t)(v >= 255 ? 255 : v <= 0 ? 0 : lround(v));
        }
done:
    hy_free(bits); hy_free(src); hy_free(tmp); hy_free(dst);
    return st;
}

static hy_status open_face(FT_Library lib, const char *font, FT_Face *face) {
    FT_Error e = FT_New_Face(lib, font, 0, face);
    if (e) return hy_fail(HY_EIO, "glyph: cannot load font '%s' (FreeType error %d)", font, (int)e);
    e = FT_Set_Pixel_Sizes(*face, 0, RENDER_PX);
    if (e) {
        FT_Done_Face(*face);
        return hy_fail(HY_EIO, "glyph: cannot size font '%s' (FreeType error %d)", font, (int)e);
    }
    return HY_OK;
}

hy_status hy_glyph_render(const char *font, uint32_t ch, const hy_glyph_params *p, uint8_t *out) {
    FT_Library lib;
    if (FT_Init_FreeType(&lib)) return hy_fail(HY_EIO, "glyph: cannot initialise FreeType");
    FT_Face face;
    hy_status st = open_face(lib, font, &face);
    if (st == HY_OK) {
        st = render_face(face, font, ch, p, out);
        FT_Done_Face(face);
    }
    FT_Done_FreeType(lib);
    return st;
}

static double uniform(hy_rng *r, double lo, double hi) { return lo + (hi - lo) * hy_rng_double(r); }

hy_status hy_glyph_render_set(const char *const *fonts, size_t n_fonts, const char *letters,
                              size_t per, const hy_glyph_jitter *j, uint64_t seed,
                              hy_tensor *images, hy_tensor *letter, hy_tensor *font) {
    memset(images, 0, sizeof *images);
    memset(letter, 0, sizeof *letter);
    memset(font, 0, sizeof *font);
    size_t K = strlen(letters);
    if (n_fonts == 0 || K == 0 || per == 0)
        return hy_fail(HY_EINVAL, "glyph: empty set (%zu fonts, %zu letters, %zu per pair)",
                       n_fonts, K, per);
    int64_t N = (int64_t)(n_fonts * K * per);
    int64_t shape[3] = {N, HY_GLYPH_SIZE, HY_GLYPH_SIZE};
    hy_status st = hy_tensor_alloc(images, HY_U8, 3, shape);
    if (st == HY_OK) st = hy_tensor_alloc(letter, HY_I16, 1, &N);
    if (st == HY_OK) st = hy_tensor_alloc(font, HY_I16, 1, &N);
    if (st != HY_OK) goto fail;
    FT_Library lib;
    if (FT_Init_FreeType(&lib)) { st = hy_fail(HY_EIO, "glyph: cannot initialise FreeType"); goto fail; }
    hy_rng base;
    hy_rng_seed(&base, seed);
    size_t i = 0;
    for (size_t fi = 0; fi < n_fonts && st == HY_OK; fi++) {
        FT_Face face;
        st = open_face(lib, fonts[fi], &face);
        if (st != HY_OK) break;
        for (size_t k = 0; k < K && st == HY_OK; k++)
            for (size_t r = 0; r < per && st == HY_OK; r++, i++) {
                hy_rng g = hy_rng_split(&base, (uint64_t)i);
                hy_glyph_params p;
                p.scale = uniform(&g, j->scale_min, j->scale_max);
                p.rotation = uniform(&g, -j->rotation_max, j->rotation_max);
                p.shift_x = uniform(&g, -j->shift_max, j->shift_max);
                p.shift_y = uniform(&g, -j->shift_max, j->shift_max);
                p.bold = uniform(&g, j->bold_min, j->bold_max);
                st = render_face(face, fonts[fi], (unsigned char)letters[k], &p,
                                 (uint8_t *)images->data + i * HY_GLYPH_SIZE * HY_GLYPH_SIZE);
                ((int16_t *)letter->data)[i] = (int16_t)k;
                ((int16_t *)font->data)[i] = (int16_t)fi;
            }
        FT_Done_Face(face);
    }
    FT_Done_FreeType(lib);
    if (st == HY_OK) return HY_OK;
fail:
    hy_tensor_release(images);
    hy_tensor_release(letter);
    hy_tensor_release(font);
    return st;
}
