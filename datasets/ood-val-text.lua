-- datasets/ood-val-text.lua: validation OOD text for circuit search (never for reporting).
-- A seeded sample of 1,000 fortunes from four files of Debian's `fortunes` package (wisdom,
-- platitudes, humorists, people) that the `fortunes` OOD test set does not read; any text whose
-- normalisation also occurs in the fortunes test set is excluded, so the two are disjoint.
-- Why fortunes rather than TREC train questions: TREC train is the same distribution as the TREC
-- test set (same questions' source and format), so tuning on it would leak the test set's
-- distribution; these files share no text with any OOD test set (trec, multi30k, agnews,
-- reuters are other sources). Split: val.
local text = require("hydra.text")

local DIR = "/usr/share/games/fortunes/"
local FILES = {
  { "wisdom", "9b0bd6b9331a68c9172219784a411c417c055ed69734edc7b4406795b87d4e94" },
  { "platitudes", "88448274efec3d2c0908cc11525c9b065b95a32c232a2c58c67a87dd88545ee5" },
  { "humorists", "ffdf67e1f4049133bf904b769c364de45e5ae0abfb3ea7c9afb54b87b89acfc4" },
  { "people", "2afb4b9f577be114d2dca279bc5590ee8415e1405295d7d7626c888d82f338e8" },
}

local inputs = {}
for _, f in ipairs(FILES) do
  inputs[#inputs + 1] = { name = f[1], from = "debian", package = "fortunes",
                          path = DIR .. f[1], sha256 = f[2] }
end

return {
  name = "ood-val-text",
  role = "text-ood-val",
  kind = "text",
  licence = "public domain / BSD (Debian fortunes, see its copyright file)",
  description = "validation OOD for circuit search: 1,000 fortunes (wisdom, platitudes, " ..
    "humorists, people), disjoint from every text OOD test set",
  depends = { "sst2", "fortunes" },
  inputs = inputs,
  seed = 0,
  options = { n = 1000 },
  prepare = function(ctx)
    local parts = {}
    for _, f in ipairs(FILES) do parts[#parts + 1] = text.read_records(ctx.input(f[1])) end
    local test = text.load_corpus(ctx.prepared("fortunes"), "test")
    text.prepare_other(ctx, text.concat(parts), {
      split = "val", sample = ctx.options.n, exclude = test,
      meta = { files = "fortunes: wisdom, platitudes, humorists, people",
               disjoint_from = "fortunes (texts excluded after normalisation); other OOD " ..
                 "test sets are other sources" } })
  end,
}
