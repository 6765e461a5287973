-- datasets/agnews.lua: text OOD test set: a seeded sample of 2,000 of the 7,600 AG News test
-- articles (Zhang et al. 2015), from HYDRA_DATA_DIR (text<TAB>class; the class is dropped).
-- HTML (escaped tags, entities that lost their '&'), the "\" line-break marks, source and
-- dateline prefixes ("LONDON (Reuters) - ", "AP - ") and in-text "(Reuters)"-style tags are
-- removed, so the set cannot be told apart from SST-2 by formatting.
local text = require("hydra.text")

return {
  name = "agnews",
  role = "text-ood",
  kind = "text",
  licence = "non-commercial research use (AG's corpus of news articles)",
  description = "AG News test articles, seeded sample of 2,000, OOD for SST-2",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "agnews/test.tsv",
      sha256 = "e4217edd939f618f24a42b0988c56ec3cddf656d8dc279b9afa443dd1ab6a1c1",
      source = "https://github.com/mhjabreel/CharCnn_Keras/raw/master/data/ag_news_csv/test.csv " ..
        "(TSV copy: github.com/forest-snow/alps@3c7ef2c98249fc975a897b27f275695f97d5b7a9 " ..
        "data/agnews/test.tsv)" },
  },
  seed = 0,
  options = { n = 2000 },
  prepare = function(ctx)
    local c = text.read_tsv(ctx.input("test"), { ncols = 2, text = 1, news = true })
    text.prepare_other(ctx, c, { sample = ctx.options.n,
                                 meta = { sample = "seeded uniform sample, original order" } })
  end,
}
