-- datasets/ood-val-mnist.lua: validation OOD images for the leave-one-out circuit search of
-- experiments/ablation_condition.lua ONLY: the first 1,000 images of mnist's test split as split
-- `val`. A point that searches on it leaves mnist out of its OOD test sets (it never sees a test set).
local data = require("hydra.data")

return {
  name = "ood-val-mnist",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from mnist (see datasets/mnist.lua)",
  description = "leave-one-out validation OOD: the first 1,000 mnist test images",
  depends = { "mnist" },
  inputs = {},
  seed = 0,
  options = { set = "mnist", rows = 1000 },
  prepare = data.prepare_ood_val_from,
}
