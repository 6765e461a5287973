-- datasets/ood-val-notmnist.lua: validation OOD images for the leave-one-out circuit search of
-- experiments/ablation_condition.lua ONLY: the first 1,000 images of notmnist's test split as split
-- `val`. A point that searches on it leaves notmnist out of its OOD test sets (it never sees a test set).
local data = require("hydra.data")

return {
  name = "ood-val-notmnist",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from notmnist (see datasets/notmnist.lua)",
  description = "leave-one-out validation OOD: the first 1,000 notmnist test images",
  depends = { "notmnist" },
  inputs = {},
  seed = 0,
  options = { set = "notmnist", rows = 1000 },
  prepare = data.prepare_ood_val_from,
}
