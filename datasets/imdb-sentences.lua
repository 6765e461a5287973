-- datasets/imdb-sentences.lua: text shift set: the 1,000 labelled IMDB movie reviews sentences of the
-- UCI Sentiment Labelled Sentences data (Kotzias et al. 2015), sentence<TAB>label (0 negative,
-- 1 positive, as in SST-2), from HYDRA_DATA_DIR. Same task, other domain: labels are kept.
local text = require("hydra.text")

return {
  name = "imdb-sentences",
  role = "text-shift",
  kind = "text",
  licence = "CC BY 4.0 (UCI Machine Learning Repository)",
  description = "UCI labelled sentences, IMDB movie reviews, 1,000 (covariate shift for SST-2)",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "uci-sentences/imdb_labelled.txt",
      sha256 = "a5851cfed830b68d4b18fa11f7e9fa85debee7566be0933c9a679ce747c86d67",
      source = "https://archive.ics.uci.edu/ml/datasets/Sentiment+Labelled+Sentences (imdb_labelled.txt)" },
  },
  seed = 0,
  prepare = text.prepare_uci_sentences,
}
