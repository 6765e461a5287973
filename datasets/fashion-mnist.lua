-- datasets/fashion-mnist.lua: the image ID set. Fashion-MNIST (Xiao et al. 2017) from Debian's
-- dataset-fashion-mnist: train 55,000 / val 5,000 (seeded, class-stratified, 500 per class) /
-- test 10,000; /meta mean and std of the pixels (x/255) of the 60,000 original train images
-- (the conventional 0.2860 / 0.3530).
--
-- Provenance check. Zalando's README lists MD5s of its .gz files; Debian's .gz files differ
-- because the Debian build normalised their gzip headers (original file name dropped, mtime set
-- to the build date 2020-06-05) while the deflate streams, CRC-32 and sizes are unchanged. We
-- restore the original header (flag FNAME, the upstream mtime 2017-08-31 and file name, found by
-- search and recorded below) and check Zalando's MD5 over it, which proves the decompressed idx
-- content is Zalando's. The MD5 of the decompressed idx files is checked too.
local core = require("hydra.core")
local data = require("hydra.data")

local DIR = "/usr/share/datasets/fashion-mnist/"
local SRC = "https://github.com/zalandoresearch/fashion-mnist (data/fashion/)"

local function input(name, file, sha)
  return { name = name, from = "debian", package = "dataset-fashion-mnist", path = DIR .. file,
           sha256 = sha, source = SRC .. " " .. file }
end

-- upstream gzip mtime, Zalando's md5 of the .gz, md5 of the decompressed idx
local UPSTREAM = {
  train_images = { "train-images-idx3-ubyte", 1504176606, "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                   "f4a8712d7a061bf5bd6d2ca38dc4d50a" },
  train_labels = { "train-labels-idx1-ubyte", 1504176606, "25c81989df183df01b3e8a0aad5dffbe",
                   "9018921c3c673c538a1fc5bad174d6f9" },
  test_images = { "t10k-images-idx3-ubyte", 1504176627, "bef4ecab320f06d8554ea6380940ec79",
                  "8181f5470baa50b63fa0f6fddb340f0a" },
  test_labels = { "t10k-labels-idx1-ubyte", 1504176627, "bb300cfdad3c16e7a12a480ee83cd310",
                  "15d484375f8d13e6eb1aabb0c3f46965" },
}

local function verify_upstream(ctx, name)
  local u = UPSTREAM[name]
  local path = ctx.input(name)
  -- gzip header: ID1 ID2 CM=8 FLG=FNAME, MTIME (LE), XFL=0, OS=3 (Unix), name NUL
  local header = string.pack("<BBBBI4BB", 0x1f, 0x8b, 8, 8, u[2], 0, 3) .. u[1] .. "\0"
  local md5 = core.hash_file(path, "md5", { prefix = header, skip = 10 })
  if md5 ~= u[3] then
    error(("%s: restored upstream gzip has md5 %s, expected Zalando's %s"):format(path, md5, u[3]))
  end
  local raw = core.hash_file(path, "md5", { gunzip = true })
  if raw ~= u[4] then
    error(("%s: decompressed idx has md5 %s, expected %s"):format(path, raw, u[4]))
  end
end

return {
  name = "fashion-mnist",
  role = "image-id",
  kind = "image",
  licence = "MIT (Zalando SE)",
  description = "Fashion-MNIST 28x28 grey: train 55,000 / val 5,000 (500 per class, seeded) / test 10,000",
  inputs = {
    input("train_images", "train-images-idx3-ubyte.gz",
          "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"),
    input("train_labels", "train-labels-idx1-ubyte.gz",
          "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"),
    input("test_images", "t10k-images-idx3-ubyte.gz",
          "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"),
    input("test_labels", "t10k-labels-idx1-ubyte.gz",
          "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"),
  },
  seed = 0,
  options = { val_per_class = 500 },
  prepare = function(ctx)
    for _, n in ipairs({ "train_images", "train_labels", "test_images", "test_labels" }) do
      verify_upstream(ctx, n)
    end
    local images = core.idx_read(ctx.input("train_images"))
    local labels = data.as_int16(core.idx_read(ctx.input("train_labels")))
    if images:size(1) ~= labels:size(1) then
      error(("train images (%d) and labels (%d) differ in count"):format(images:size(1), labels:size(1)))
    end
    local keep, hold = core.sample_stratified(labels, 10, ctx.options.val_per_class, ctx.seed)
    local f = ctx.out
    data.write_image_split(f, "train", core.sample_gather(images, keep), core.sample_gather(labels, keep))
    data.write_image_split(f, "val", core.sample_gather(images, hold), core.sample_gather(labels, hold))
    -- rows of the original 60,000-image train file (0-based), for provenance
    f:write("/train/source_rows", keep)
    f:write("/val/source_rows", hold)
    local test = core.idx_read(ctx.input("test_images"))
    data.write_image_split(f, "test", test, data.as_int16(core.idx_read(ctx.input("test_labels"))))
    -- the conventional Fashion-MNIST statistics: over all 60,000 original train images
    local mean, std = core.img_stats(images)
    ctx.log("pixels of the 60,000 train images: mean %.4f std %.4f", mean, std)
    ctx.meta("mean", mean)
    ctx.meta("std", std)
    ctx.meta("stats_over", "all 60,000 images of train-images-idx3-ubyte (x/255)")
    ctx.meta("classes", "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot")
  end,
}
