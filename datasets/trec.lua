-- datasets/trec.lua: text OOD test set: the 500 TREC-10 test questions (Li & Roth 2002), from
-- HYDRA_DATA_DIR. Each line is "LABEL question"; the label field ("DESC:manner" in the original
-- release, a class number in this copy) is removed. Tokenised with sst2's vocabulary.
local text = require("hydra.text")

return {
  name = "trec",
  role = "text-ood",
  kind = "text",
  licence = "research use (Li & Roth, TREC question classification data)",
  description = "TREC-10 question classification test set, 500 questions, OOD for SST-2",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "data_dir", file = "trec/TREC.test.all",
      sha256 = "92a6a3cede5678b447ef5f1d7ec474134fcda211e6590e6fa627b4a2c68e4566",
      source = "https://cogcomp.seas.upenn.edu/Data/QA/QC/TREC_10.label (copy: github.com/" ..
        "harvardnlp/sent-conv-torch@d61ded09c99c0199d8c5bca946cd65864de2b296 data/TREC.test.all)" },
  },
  seed = 0,
  prepare = function(ctx)
    local c = text.read_lines(ctx.input("test"), { label_prefix = true })
    text.prepare_other(ctx, c)
  end,
}
