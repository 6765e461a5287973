-- datasets/sst2.lua: the text ID set, GLUE SST-2 (Socher et al. 2013) from HYDRA_DATA_DIR.
-- Splits: train = GLUE train minus a seeded, label-stratified 5 % hold-out (val, used for
-- calibration / circuit search); test = GLUE dev (872); test_sst = the labelled SST-2 test set
-- (1,821 sentences whose labels GLUE withholds; this copy has them), an extra, larger test split
-- disjoint from dev (1 sentence also occurs in train). The vocabulary is built from the train
-- split only (after the hold-out) and copied into every other text set.
-- Note: GLUE train holds phrases of the same sentences, so train and val share sub-phrases; val
-- is therefore easier than test (documented, as in GLUE itself).
local text = require("hydra.text")

local SRC = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip (copy: github.com/awake020/" ..
  "pytorch_Bert_sst2@ce2ab1719d32182e6233b24b2de246bd32814fde SST-2/"
local HOLDOUT = 0.05

return {
  name = "sst2",
  role = "text-id",
  kind = "text",
  licence = "SST: research use (Socher et al. 2013); GLUE task data as distributed by GLUE",
  description = "SST-2 sentiment (binary): train 63,982 / val 3,367 (5% stratified hold-out) / " ..
    "test 872 (GLUE dev) / test_sst 1,821 (labelled SST test)",
  inputs = {
    { name = "train", from = "data_dir", file = "sst2/train.tsv", source = SRC .. "train.tsv)",
      sha256 = "e981ceb4fe6c9acd1c79851d0d091b9e78103f1f2a399ca83dda27915d41c56c" },
    { name = "dev", from = "data_dir", file = "sst2/dev.tsv", source = SRC .. "dev.tsv)",
      sha256 = "84207e6be5873fb18db798cc6faec86871f5a426554650ff64a1c34e87665f6f" },
    { name = "test", from = "data_dir", file = "sst2/test.tsv", source = SRC .. "test.tsv)",
      sha256 = "fcd46f967b7b8efd8b5398481dadf873886298d092195167af907fd532e81e1c" },
  },
  seed = 0,
  prepare = function(ctx)
    -- this copy is label<TAB>sentence with a header line
    local spec = { ncols = 2, text = 2, label = 1, header = true }
    local all = text.read_tsv(ctx.input("train"), spec)
    local nheld = math.floor(HOLDOUT * all:size() + 0.5)
    local train, val = all:split(nheld, ctx.seed, true)
    local vocab = text.build_vocab(train)
    ctx.log(("vocabulary: %d words (min_count %d, from %d train records)"):format(
      vocab:size(), text.MIN_COUNT, train:size()))
    local splits = {
      { "train", train }, { "val", val },
      { "test", text.read_tsv(ctx.input("dev"), spec) },
      { "test_sst", text.read_tsv(ctx.input("test"), spec) },
    }
    local extra = { label_names = "0 negative, 1 positive", n_classes = 2,
                    val_holdout = "5% of GLUE train, stratified by label, seeded (ctx.seed)",
                    test_sst = "labelled SST-2 test set (1,821), extra to GLUE dev" }
    for _, sp in ipairs(splits) do
      local s = text.write_split(ctx.out, sp[1], sp[2], vocab)
      text.log_stats(ctx, sp[1], s)
      extra["n_" .. sp[1]] = s.n
      extra["unk_rate_" .. sp[1]] = s.unk_rate
    end
    text.write_vocab(ctx.out, vocab)
    text.meta(ctx, vocab, extra)
  end,
}
