-- datasets/amazon-sentences.lua: text shift set: the 1,000 labelled Amazon cell-phone product reviews sentences of the
-- UCI Sentiment Labelled Sentences data (Kotzias et al. 2015), sentence<TAB>label (0 negative,
-- 1 positive, as in SST-2), from HYDRA_DATA_DIR. Same task, other domain: labels are kept.
local text = require("hydra.text")

return {
  name = "amazon-sentences",
  role = "text-shift",
  kind = "text",
  licence = "CC BY 4.0 (UCI Machine Learning Repository)",
  description = "UCI labelled sentences, Amazon cell-phone product reviews, 1,000 (covariate shift for SST-2)",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "uci-sentences/amazon_cells_labelled.txt",
      sha256 = "47003fc0a0d4840b00e96e715b6189bad09e7443a3da41c4cbe12ffc79f86ae3",
      source = "https://archive.ics.uci.edu/ml/datasets/Sentiment+Labelled+Sentences (amazon_cells_labelled.txt)" },
  },
  seed = 0,
  prepare = text.prepare_uci_sentences,
}
