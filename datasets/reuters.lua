-- datasets/reuters.lua: text OOD test set: the 604 Reuters-21578 (ModApte test) articles of the
-- Debian weka package's examples/ReutersCorn-test.arff (headline + body), parsed as ARFF
-- (quoted strings with escapes). The "Reuter" sign-off and the &#3; end marks are removed;
-- articles are cut at the first MAX_LEN tokens by the shared encoding.
local text = require("hydra.text")

return {
  name = "reuters",
  role = "text-ood",
  kind = "text",
  licence = "Reuters-21578: free for research use (Lewis; distributed with Weka, GPL-3+)",
  description = "Reuters-21578 newswire articles (weka ReutersCorn-test.arff), first 64 " ..
    "tokens, OOD for SST-2",
  depends = { "sst2" },
  inputs = {
    { name = "test", from = "debian-extract", package = "weka",
      file = "usr/share/doc/weka/examples/ReutersCorn-test.arff",
      sha256 = "e7b3cf0bc83bfa449abeacaef3083e3573f89b4fc2a36111fe59b18ff68e9e33",
      source = "Debian package weka 3.6.14-3 (https://packages.debian.org/bookworm/weka)" },
  },
  seed = 0,
  prepare = function(ctx)
    local c = text.read_arff(ctx.input("test"), { attr = "Text", news = true })
    text.prepare_other(ctx, c)
  end,
}
