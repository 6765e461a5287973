-- datasets/ood-val-glyphs.lua: validation OOD images for the leave-one-out circuit search of
-- experiments/ablation_condition.lua ONLY: the first 1,000 images of glyphs's test split as split
-- `val`. A point that searches on it leaves glyphs out of its OOD test sets (it never sees a test set).
local data = require("hydra.data")

return {
  name = "ood-val-glyphs",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from glyphs (see datasets/glyphs.lua)",
  description = "leave-one-out validation OOD: the first 1,000 glyphs test images",
  depends = { "glyphs" },
  inputs = {},
  seed = 0,
  options = { set = "glyphs", rows = 1000 },
  prepare = data.prepare_ood_val_from,
}
