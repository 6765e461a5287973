-- datasets/ood-val-mnist-id.lua: validation OOD images for the circuit search of the MNIST
-- setting ONLY (configs/data/mnist.yaml; never a test set): ood-val-image's construction
-- (datasets/ood-val-image.lua, its code, run here) applied to mnist-id's *train* split instead
-- of fashion-mnist's: 500 Gaussian-noise images N(mean, std) of mnist-id, 500 uniform-noise
-- images, 500 vertically flipped and 500 inverted train digits (disjoint train rows; never val
-- or test). /val/kind, /val/source_rows (rows of mnist-id's /train) as in ood-val-image.
-- ood-val-image is a dependency so that its recipe hash (its code) is part of this one's.
local data = require("hydra.data")

local base = data.recipe("ood-val-image")

return {
  name = "ood-val-mnist-id",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from MNIST (CC BY-SA 3.0, as commonly cited)",
  description = "validation OOD: Gaussian/uniform noise, flipped and inverted mnist-id train images",
  depends = { "mnist-id", "ood-val-image" },
  inputs = {},
  seed = 0,
  options = { per_kind = 500 },
  prepare = function(ctx)
    local id = ctx.prepared("mnist-id")
    local sub = setmetatable({
      prepared = function(name)
        if name ~= "fashion-mnist" then return ctx.prepared(name) end
        return id
      end,
      meta = function(key, value)
        ctx.meta(key, type(value) == "string" and value:gsub("fashion%-mnist", "mnist-id") or value)
      end,
    }, { __index = ctx })
    base.prepare(sub)
  end,
}
