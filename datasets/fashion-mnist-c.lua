-- datasets/fashion-mnist-c.lua: image distribution shift: the Fashion-MNIST test split under 11
-- corruptions x 5 severities in the style of CIFAR-10-C, generated in C (core/data/corrupt.c),
-- deterministic from the seed. Splits are "<corruption>/<severity>": /<corruption>/<severity>/
-- images uint8 [N,28,28] and labels int16 (the true classes). Parameters per corruption are in
-- /meta (<corruption>.params: five values, severity 1..5; <corruption>.describe).
-- Size: 55 x 10,000 x 784 B = 431 MB raw; the HDF5 layer deflates it. The `subset` option
-- (hydra data prepare fashion-mnist-c subset=2000) keeps a seeded subset of the test images
-- (0 = all); /test_rows records which (0-based rows of fashion-mnist /test).
local core = require("hydra.core")
local data = require("hydra.data")
local h5 = require("hydra.h5")

return {
  name = "fashion-mnist-c",
  role = "image-shift",
  kind = "image",
  licence = "derived from Fashion-MNIST (MIT, Zalando SE)",
  description = "Fashion-MNIST test under 11 corruptions x 5 severities (CIFAR-10-C style)",
  depends = { "fashion-mnist" },
  inputs = {},
  seed = 0,
  options = { subset = 0 },
  prepare = function(ctx)
    local g <close> = h5.open(ctx.prepared("fashion-mnist"))
    local images, labels = g:read("/test/images"), g:read("/test/labels")
    local n = images:size(1)
    local k = ctx.options.subset
    local rows
    if k > 0 and k < n then
      rows = core.sample_subset(n, k, ctx.seed + 1)
      images, labels = core.sample_gather(images, rows), core.sample_gather(labels, rows)
    else
      rows = core.sample_subset(n, n, ctx.seed + 1)    -- every row, in order
    end
    ctx.out:write("/test_rows", rows)
    local names = {}
    for i, c in ipairs(core.corruptions()) do
      names[i] = c.name
      local p = {}
      for s = 1, 5 do p[s] = ("%g"):format(c.params[s]) end
      ctx.meta(c.name .. ".params", table.concat(p, " "))
      ctx.meta(c.name .. ".describe", c.describe)
      for s = 1, 5 do
        local out = core.corrupt(images, c.name, s, ctx.seed)
        data.write_image_split(ctx.out, ("%s/%d"):format(c.name, s), out, labels)
      end
      ctx.log("%s done", c.name)
    end
    ctx.meta("corruptions", table.concat(names, ","))
    ctx.meta("severities", 5)
  end,
}
