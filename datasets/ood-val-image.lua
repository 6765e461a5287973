-- datasets/ood-val-image.lua: validation OOD images for circuit search ONLY (never a test set):
-- 500 Gaussian-noise images (pixels/255 ~ N(mean, std^2) of Fashion-MNIST, clipped), 500
-- uniform-noise images, 500 vertically flipped and 500 inverted Fashion-MNIST *train* images
-- (disjoint rows of the prepared /train split; never val or test). One split, `val`.
-- /val/kind int16: 0 gaussian, 1 uniform, 2 flipped, 3 inverted; /val/source_rows int64: the
-- 0-based row of fashion-mnist's /train used (-1 for noise).
local core = require("hydra.core")
local data = require("hydra.data")
local h5 = require("hydra.h5")

return {
  name = "ood-val-image",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from Fashion-MNIST (MIT, Zalando SE)",
  description = "validation OOD: Gaussian/uniform noise, flipped and inverted Fashion-MNIST train images",
  depends = { "fashion-mnist" },
  inputs = {},
  seed = 0,
  options = { per_kind = 500 },
  prepare = function(ctx)
    local n = ctx.options.per_kind
    local g <close> = h5.open(ctx.prepared("fashion-mnist"))
    local train = g:read("/train/images")
    local mean, std = g:attr("/meta", "mean"), g:attr("/meta", "std")
    local gauss = core.noise_images("gaussian", n, 28, 28, ctx.seed * 4 + 1, mean, std)
    local unif = core.noise_images("uniform", n, 28, 28, ctx.seed * 4 + 2)
    -- 2n distinct train rows in random order: the first n flipped, the next n inverted
    local perm = core.sample_permutation(train:size(1), ctx.seed * 4 + 3)
    local flip_rows = core.sample_slice(perm, 1, n)
    local inv_rows = core.sample_slice(perm, n + 1, n)
    local flipped = core.img_flip_v(core.sample_gather(train, flip_rows))
    local inverted = core.img_invert(core.sample_gather(train, inv_rows))
    local all = core.concat({ gauss, unif, flipped, inverted })
    local kind = core.concat({ data.const_labels(n, 0), data.const_labels(n, 1),
                               data.const_labels(n, 2), data.const_labels(n, 3) })
    local none = core.tensor("int64", n)
    none:fill(-1)
    local src = core.concat({ none, none, flip_rows, inv_rows })
    data.write_image_split(ctx.out, "val", all, data.const_labels(4 * n, -1))
    ctx.out:write("/val/kind", kind)
    ctx.out:write("/val/source_rows", src)
    ctx.meta("kinds", "0 gaussian noise N(mean, std) of fashion-mnist, 1 uniform noise, " ..
      "2 vertically flipped train image, 3 inverted train image")
  end,
}
