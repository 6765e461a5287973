-- datasets/multi30k.lua: text OOD test set: the 1,000 English image captions of Multi30k
-- test2016 (Elliott et al. 2016), gzip-compressed, from HYDRA_DATA_DIR.
local text = require("hydra.text")

return {
  name = "multi30k",
  role = "text-ood",
  kind = "text",
  licence = "non-commercial research use (Flickr30k / Multi30k terms)",
  description = "Multi30k test2016 English captions, 1,000 sentences, OOD for SST-2",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "multi30k/test_2016_flickr.en.gz",
      sha256 = "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
      source = "https://github.com/multi30k/dataset/raw/a3d2e0d26b56f3846f66a952536ffed4e401d05a/" ..
        "data/task1/raw/test_2016_flickr.en.gz" },
  },
  seed = 0,
  prepare = function(ctx)
    text.prepare_other(ctx, text.read_lines(ctx.input("test")))
  end,
}
