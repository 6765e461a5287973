-- datasets/mnist-id.lua: the second image ID set. MNIST (LeCun & Cortes) from HYDRA_DATA_DIR:
-- only its 10,000-image test file is here, so that file is split, seeded and class-stratified,
-- into test 2,000 (200 per digit) / val 1,000 (100 per digit) / train 7,000 (the rest).
-- /<split>/source_rows: 0-based rows of t10k-images; /meta mean and std of the pixels (x/255) of
-- the train split. The `mnist` OOD set of the Fashion-MNIST setting reads the same file: the
-- two settings never run together (configs/data/mnist.yaml has no `mnist` OOD set).
local core = require("hydra.core")
local data = require("hydra.data")

local mnist = data.recipe("mnist")   -- the same two input files, checked by SHA-256

return {
  name = "mnist-id",
  role = "image-id",
  kind = "image",
  licence = mnist.licence,
  description = "MNIST test file split: train 7,000 / val 1,000 / test 2,000 (seeded, per digit)",
  inputs = mnist.inputs,
  seed = 0,
  options = { test_per_class = 200, val_per_class = 100 },
  prepare = function(ctx)
    local images = core.idx_read(ctx.input("images"))
    local labels = data.as_int16(core.idx_read(ctx.input("labels")))
    if images:size(1) ~= labels:size(1) then
      error(("images (%d) and labels (%d) differ in count"):format(images:size(1), labels:size(1)))
    end
    -- test first, then val from what is left (rows of the file: rest[keep])
    local rest, test = core.sample_stratified(labels, 10, ctx.options.test_per_class, ctx.seed)
    local keep, val = core.sample_stratified(core.sample_gather(labels, rest), 10,
      ctx.options.val_per_class, ctx.seed + 1)
    local rows = { train = core.sample_gather(rest, keep), val = core.sample_gather(rest, val),
                   test = test }
    for _, split in ipairs({ "train", "val", "test" }) do
      data.write_image_split(ctx.out, split, core.sample_gather(images, rows[split]),
        core.sample_gather(labels, rows[split]))
      ctx.out:write("/" .. split .. "/source_rows", rows[split])
    end
    local mean, std = core.img_stats(core.sample_gather(images, rows.train))
    ctx.log("pixels of the 7,000 train images: mean %.4f std %.4f", mean, std)
    ctx.meta("mean", mean)
    ctx.meta("std", std)
    ctx.meta("stats_over", "the train split (x/255)")
    ctx.meta("classes", "0,1,2,3,4,5,6,7,8,9")
  end,
}
