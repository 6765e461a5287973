-- datasets/ood-val-opencv-digits.lua: validation OOD images for the leave-one-out circuit search of
-- experiments/ablation_condition.lua ONLY: the first 1,000 images of opencv-digits's test split as split
-- `val`. A point that searches on it leaves opencv-digits out of its OOD test sets (it never sees a test set).
local data = require("hydra.data")

return {
  name = "ood-val-opencv-digits",
  role = "image-ood-val",
  kind = "image",
  licence = "derived from opencv-digits (see datasets/opencv-digits.lua)",
  description = "leave-one-out validation OOD: the first 1,000 opencv-digits test images",
  depends = { "opencv-digits" },
  inputs = {},
  seed = 0,
  options = { set = "opencv-digits", rows = 1000 },
  prepare = data.prepare_ood_val_from,
}
