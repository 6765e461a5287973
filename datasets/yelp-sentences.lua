-- datasets/yelp-sentences.lua: text shift set: the 1,000 labelled Yelp restaurant reviews sentences of the
-- UCI Sentiment Labelled Sentences data (Kotzias et al. 2015), sentence<TAB>label (0 negative,
-- 1 positive, as in SST-2), from HYDRA_DATA_DIR. Same task, other domain: labels are kept.
local text = require("hydra.text")

return {
  name = "yelp-sentences",
  role = "text-shift",
  kind = "text",
  licence = "CC BY 4.0 (UCI Machine Learning Repository)",
  description = "UCI labelled sentences, Yelp restaurant reviews, 1,000 (covariate shift for SST-2)",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "uci-sentences/yelp_labelled.txt",
      sha256 = "c76468b7b5c6e56a0804d728345c5f84aa2142ddb214420f61cc9cfd4c00d2ea",
      source = "https://archive.ics.uci.edu/ml/datasets/Sentiment+Labelled+Sentences (yelp_labelled.txt)" },
  },
  seed = 0,
  prepare = text.prepare_uci_sentences,
}
