-- datasets/fashion-mnist-ood.lua: image OOD test set of the MNIST setting (configs/data/
-- mnist.yaml): the 10,000 test images of the prepared fashion-mnist, labels -1 (OOD), the
-- garment class kept in /test/orig_labels.
local data = require("hydra.data")
local h5 = require("hydra.h5")

return {
  name = "fashion-mnist-ood",
  role = "image-ood",
  kind = "image",
  licence = "derived from Fashion-MNIST (MIT, Zalando SE)",
  description = "Fashion-MNIST test split, 10,000 garment images, as OOD for MNIST",
  depends = { "fashion-mnist" },
  inputs = {},
  seed = 0,
  prepare = function(ctx)
    local g <close> = h5.open(ctx.prepared("fashion-mnist"))
    local images = g:read("/test/images")
    data.write_image_split(ctx.out, "test", images, data.const_labels(images:size(1), -1))
    ctx.out:write("/test/orig_labels", g:read("/test/labels"))
  end,
}
