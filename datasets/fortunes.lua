-- datasets/fortunes.lua: text OOD test set: every fortune of the three files of Debian's
-- fortunes-min package (fortunes, literature, riddles). Records are split on "%" lines;
-- attribution lines ("\t\t-- Author") and overstrike are removed by the shared normalisation.
-- ood-val-text uses other files (from the fortunes package) and excludes these texts.
local text = require("hydra.text")

local DIR = "/usr/share/games/fortunes/"

return {
  name = "fortunes",
  role = "text-ood",
  kind = "text",
  licence = "public domain / BSD (Debian fortunes-min, see its copyright file)",
  description = "fortune(6) cookies from fortunes-min (fortunes, literature, riddles), OOD for " ..
    "SST-2",
  depends = { "sst2" },
  inputs = {
    { name = "fortunes", from = "debian", package = "fortunes-min", path = DIR .. "fortunes",
      sha256 = "8819e6b83bacd6b7e8a4a2483f41e126b3b4b3ef8cd2aca907a53b163f082fd5" },
    { name = "literature", from = "debian", package = "fortunes-min", path = DIR .. "literature",
      sha256 = "22eab7d53ce994d0466901bb0d799ae3289603e17dc0bdb7f16666931155c5a5" },
    { name = "riddles", from = "debian", package = "fortunes-min", path = DIR .. "riddles",
      sha256 = "bcaaab907b156a18a8943f0768828b4f1a18d382497d0e2ef012fe6aaa27becc" },
  },
  seed = 0,
  prepare = function(ctx)
    local parts = {}
    for _, f in ipairs({ "fortunes", "literature", "riddles" }) do
      parts[#parts + 1] = text.read_records(ctx.input(f))
    end
    text.prepare_other(ctx, text.concat(parts),
                       { meta = { files = "fortunes-min: fortunes, literature, riddles" } })
  end,
}
