-- tests/lua/test_data_import.lua: the bindings behind `hydra data import` (core.wordpiece_*,
-- core.table_read, core.img_read_rgb / imgprep_files / cifar_read) called the way the CLI calls
-- them, with their exact error texts, and the CLI's usage errors (exit status 2).
local check = require("check")
local core = require("hydra.core")
local T = {}

local VOCAB = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "!",
                "the", "caf", "##e" }

function T.wordpiece_binding()
  local wp = core.wordpiece_from_tokens(VOCAB, "test vocab")
  check.eq(wp:size(), 12, "size")
  check.same(wp:specials(), { pad = 0, unk = 1, cls = 2, sep = 3, mask = 4 })
  -- the docstring example, accents, punctuation, an unmatchable word, a literal special
  check.same(wp:tokenize("UNAFFABLE! Café [MASK] thex"), { 5, 6, 7, 8, 10, 11, 4, 1 })
  wp:set_options({ do_lower_case = false })
  check.same(wp:tokenize("UNAFFABLE the"), { 1, 9 }, "cased: no match for UNAFFABLE")
  wp:set_options({ do_lower_case = true, strip_accents = false })
  check.same(wp:tokenize("Café"), { 1 }, "accent kept: no piece for é")
  wp:set_options({ do_lower_case = true })
  local ids, types, len = wp:encode("unaffable", "the the", 8)
  check.same(ids, { 2, 5, 6, 7, 3, 9, 9, 3 }, "pair ids")
  check.same(types, { 0, 0, 0, 0, 0, 1, 1, 1 }, "pair types")
  check.eq(len, 8, "pair length")
  local t, l, st = wp:encode_all({ "the", "unaffable unaffable" }, 5)
  check.same(t:shape(), { 2, 5 }, "encode_all shape")
  check.same(l:totable(), { 3, 5 }, "lengths")
  check.eq(st.truncated, 1, "one record truncated")
  check.eq(st.pieces, 7, "pieces before truncation")
  check.raises("wordpiece: invalid UTF-8 at byte 1 (0xff)", function() return wp:tokenize("a\255") end)
  check.raises("bad argument #2 to 'encode' (max_len must be in [2, 1048576])",
    function() return wp:encode("x", 1) end)
  check.raises("wordpiece: test vocab has no [UNK] token (1 tokens)",
    function() return core.wordpiece_from_tokens({ "[PAD]" }, "test vocab") end)
  check.raises("wordpiece: v token 1 is not valid UTF-8",
    function() return core.wordpiece_from_tokens({ "[UNK]", "\255" }, "v") end)
end

function T.table_binding()
  local dir = check.tmpdir()
  check.write_file(dir .. "/a.csv", 'text,label\n"x, ""y""",1\nz,neg\n')
  local r = core.table_read(dir .. "/a.csv", "text", "label")
  check.eq(r.n, 2, "records")
  check.same(r.texts, { 'x, "y"', "z" })
  check.same(r.labels, { "1", "neg" })
  check.same(r.lines, { 2, 3 })
  check.same(r.offsets:totable(), { 0, 6, 7 }, "offsets")
  check.eq(r.bytes:numel(), 7, "bytes")
  check.raises(("table: '%s/a.csv':1: no column 'x' in the header (columns: text, label)"):format(dir),
    function() return core.table_read(dir .. "/a.csv", "x") end)
end

function T.image_bindings()
  local t = core.img_read_rgb("tests/ref/images/left_grey_37x41.png")
  check.same(t:shape(), { 41, 37, 3 }, "grey decoded to RGB")
  check.eq(t:get(1, 1, 1), t:get(1, 1, 3), "grey replicated")
  local prep = { mode = "hf", interpolation = "bilinear", size = 8 }
  local s = core.imgprep_files({ "tests/ref/images/left_grey_37x41.png",
                                 "tests/ref/images/baboon_rgb_45x77.jpg" }, prep)
  check.same(s:shape(), { 2, 3, 8, 8 }, "stacked")
  check.raises("imgprep: mode must be timm or hf (got 'x')", function()
    return core.imgprep_files({}, { mode = "x", interpolation = "bicubic", size = 8 })
  end)
  check.raises("imgprep: prep.crop_pct must be a number", function()
    return core.imgprep_files({}, { mode = "timm", interpolation = "bicubic", size = 8 })
  end)
  check.raises("imgprep: 'tests/ref/images/baboon_rgb_45x77.jpg' is 45x77 = 3465 pixels, more " ..
    "than the limit 100", function()
    return core.imgprep_files({ "tests/ref/images/baboon_rgb_45x77.jpg" }, prep, 100)
  end)
  check.eq(core.img_max_pixels, 89478485, "PIL's limit")
end

-- per-channel normalisation through the binding: /meta arrays, ds:mean_std() arrays, and the
-- arrays a checkpoint records passed back to core.dataset_load (predict on an RGB set)
function T.per_channel_norm()
  local d = check.tmpdir()
  local h5 = require("hydra.h5")
  local f <close> = h5.create(d .. "/rgb.h5")
  f:write("/train/images", core.tensor("uint8", 2, 3, 4, 4))
  f:write("/train/labels", core.from_table("int16", { 0, 1 }))
  f:set_attr("/meta", "mean", { 0.1, 0.2, 0.3 })
  f:set_attr("/meta", "std", { 0.5, 0.25, 0.125 })
  f:commit()
  local ds = core.dataset_load(d .. "/rgb.h5", "train", 0)
  local m, s = ds:mean_std()
  check.same(m, { 0.1, 0.2, 0.3 }, "per-channel mean")
  check.same(s, { 0.5, 0.25, 0.125 }, "per-channel std")
  local ds2 = core.dataset_load(d .. "/rgb.h5", "train", 0, { 0, 0, 0 }, { 1, 2, 4 })
  m, s = ds2:mean_std()
  check.same(s, { 1, 2, 4 }, "override arrays")
  check.eq(select(1, core.dataset_load(d .. "/rgb.h5", "train", 0, 0.5, 0.5):mean_std()), 0.5,
    "scalar override for every channel")
  check.raises(("%s/rgb.h5:/train: loader: 2 normalisation values for 3 image channel(s) " ..
    "(expected 1 or 3)"):format(d), function()
    return core.dataset_load(d .. "/rgb.h5", "train", 0, { 0, 0 }, { 1, 1 })
  end)
end

function T.cli_usage_errors()
  local code, _, e = check.hydra("data import pictures x --out y.h5")
  check.eq(code, 2, "unknown kind exits 2")
  check.ok(e:find("unknown kind 'pictures' (expected images, cifar10, cifar100 or text)", 1, true), e)
  code, _, e = check.hydra("data import images tests/ref --size 0 --out /tmp/never.h5")
  check.eq(code, 2, "bad size exits 2")
  check.ok(e:find("--size must be an integer in [1, 4096]", 1, true), e)
  code, _, e = check.hydra("data import text tests/ref/x.csv --text-column t --out /tmp/never.h5")
  check.eq(code, 2, "text without a vocab exits 2")
  check.ok(e:find("--vocab vocab.txt (or --from CKPT.h5) is required", 1, true), e)
end

return T
