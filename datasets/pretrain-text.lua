-- datasets/pretrain-text.lua: the unlabelled corpus of masked-language-model pretraining
-- (`hydra pretrain`, pretrain.corpus). Records, in this order: SST-2's own training sentences
-- (the sst2 `train` split, labels dropped: the GLUE train phrases minus the 5 % validation
-- hold-out), then English from Debian's wordnet-base: every synset's definition and example
-- sentences of WordNet 3.0 (data.noun, data.verb, data.adj, data.adv). Dropped: records empty
-- after normalisation, exact duplicates, and every record whose normalised text occurs in the
-- ID validation or test splits (sst2 val, test, test_sst) or in any text OOD test, OOD
-- validation or shift set (agnews, trec, multi30k, reuters, fortunes, ood-val-text,
-- yelp/amazon/imdb-sentences) -- tests/lua/test_pretrain.lua checks the result by normalised-
-- text hashes. Tokenised with sst2's vocabulary (words outside it are UNK). Splits: train, and
-- val = a seeded hold-out of options.val sentences (the per-epoch held-out MLM loss/accuracy).
-- Labels -1. The `fortunes` package is an OOD test set and is not used here.
local text = require("hydra.text")

local DIR = "usr/share/wordnet/"
local WORDNET = {
  { "data.noun", "fea17d2f9656611334eac790e5d69e47645fa180c4aa481fb4cd9b3520754ca2" },
  { "data.verb", "adcf43e35b581e8036d8b5a52d63d9cd3d3b4870b2720d3c03c799df44777bc2" },
  { "data.adj", "c89120dfc1f046ddff4a631bf9b7e9fa1a36b5e86565a23bf82dbe14f30b88a7" },
  { "data.adv", "444a63bf3955080ab7524f5079cfc07ff9bc682cb98bdb1db73b0fb9829f1139" },
}
-- every evaluation set of the text setting: { prepared set, its splits }
local EXCLUDE = {
  { "sst2", { "val", "test", "test_sst" } },
  { "agnews", { "test" } }, { "trec", { "test" } }, { "multi30k", { "test" } },
  { "reuters", { "test" } }, { "fortunes", { "test" } }, { "ood-val-text", { "val" } },
  { "yelp-sentences", { "test" } }, { "amazon-sentences", { "test" } },
  { "imdb-sentences", { "test" } },
}

local inputs = {}
for _, f in ipairs(WORDNET) do
  inputs[#inputs + 1] = { name = f[1], from = "debian-extract", package = "wordnet-base",
                          file = DIR .. f[1], sha256 = f[2],
                          source = "https://wordnetcode.princeton.edu/3.0/WNdb-3.0.tar.gz " ..
                            "(Debian wordnet-base 1:3.0-37)" }
end
local depends = {}
for _, e in ipairs(EXCLUDE) do depends[#depends + 1] = e[1] end

return {
  name = "pretrain-text",
  role = "text-pretrain",
  kind = "text",
  licence = "SST: research use (Socher et al. 2013); WordNet 3.0 licence (Princeton: use, " ..
    "copy, modify and distribute without fee, with its copyright notice)",
  description = "MLM pretraining corpus: SST-2 train sentences (no labels) + WordNet 3.0 " ..
    "definitions and examples, disjoint from every text evaluation set",
  depends = depends,
  inputs = inputs,
  seed = 0,
  options = { val = 2000 },
  prepare = function(ctx)
    local sst = text.load_corpus(ctx.prepared("sst2"), "train")
    local parts = { sst }
    for _, f in ipairs(WORDNET) do parts[#parts + 1] = text.read_wordnet(ctx.input(f[1])) end
    local all = text.concat(parts)
    local ex = {}
    for _, e in ipairs(EXCLUDE) do
      for _, split in ipairs(e[2]) do ex[#ex + 1] = text.load_corpus(ctx.prepared(e[1]), split) end
    end
    local kept, dropped = all:filter({ dedup = true, exclude = text.concat(ex) })
    ctx.log(("%d records (%d SST-2, %d WordNet); dropped %d (empty, duplicate, or in an "
      .. "evaluation set)"):format(all:size(), sst:size(), all:size() - sst:size(), dropped))
    local train, val = kept:split(ctx.options.val, ctx.seed, false)
    local vocab = text.load_vocab(ctx.prepared("sst2"))
    local st = text.write_split(ctx.out, "train", train, vocab)
    text.log_stats(ctx, "train", st)
    local sv = text.write_split(ctx.out, "val", val, vocab)
    text.log_stats(ctx, "val", sv)
    text.write_vocab(ctx.out, vocab)
    local names = {}
    for _, e in ipairs(EXCLUDE) do names[#names + 1] = e[1] .. ":" .. table.concat(e[2], "+") end
    text.meta(ctx, vocab, {
      vocab_source = "sst2", records_dropped = dropped, n_sst2 = sst:size(),
      n_wordnet = all:size() - sst:size(), n_train = st.n, n_val = sv.n,
      unk_rate_train = st.unk_rate, unk_rate_val = sv.unk_rate,
      disjoint_from = table.concat(names, " "),
    })
  end,
}
