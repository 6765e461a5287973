-- tests/lua/test_text.lua: the text binding (corpora, vocabulary, encoding), hydra.text and the
-- text recipes, with a tiny text set prepared through the dataset framework from files made here.
local check = require("check")
local core = require("hydra.core")
local data = require("hydra.data")
local h5 = require("hydra.h5")
local text = require("hydra.text")
local T = {}

local function write(path, s) check.write_file(path, s) end

function T.normalize_binding()
  local s, n = core.text_normalize("It's <b>GREAT</b> &amp; can't miss!")
  check.eq(s, "it 's great & ca n't miss !", "normalised")
  check.eq(n, 8, "tokens")
  check.eq((core.text_normalize("LONDON (Reuters) - Oil fell.", true)), "oil fell .", "news")
  check.eq((core.text_normalize("LONDON (Reuters) - Oil fell.")), "london ( reuters ) - oil fell .",
           "news flag off")
  check.same(text.RESERVED, { "[PAD]", "[UNK]", "[CLS]", "[MASK]" })
  check.ok(text.NORMALIZATION:find("hydra-text-v1", 1, true), "normalisation description")
end

function T.corpus_and_vocab()
  local dir = check.tmpdir()
  write(dir .. "/a.tsv", "label\tsentence\n1\tA good film .\n0\ta bad film\n1\tgood good\n")
  local c = text.read_tsv(dir .. "/a.tsv", { ncols = 2, text = 2, label = 1, header = true })
  check.eq(#c, 3, "records")
  local raw, norm, label, ntok = c:get(1)
  check.eq(raw, "A good film .", "raw")
  check.eq(norm, "a good film .", "norm")
  check.eq(label, 1, "label")
  check.eq(ntok, 4, "ntok")
  check.same(c:labels():totable(), { 1, 0, 1 })
  local bytes, off = c:text()
  check.same(off:totable(), { 0, 13, 23, 32 })
  check.eq(bytes:size(1), 32, "raw bytes")
  check.raises("bad argument #1 to 'take' (entry 2 is not an index in [1, 3])",
               function() return c:take({ 1, 4 }) end)
  check.raises("bad argument #1 to 'get' (index 0 out of range [1, 3])",
               function() return c:get(0) end)

  local v = core.vocab_build(c, 1, 0)
  -- good 3, film 2, a 2 -> ties bytewise: a, film; then ., bad
  check.same(v:words(), { "[PAD]", "[UNK]", "[CLS]", "[MASK]", "good", "a", "film", ".", "bad" })
  check.eq(#v, 9, "size")
  check.eq(v:id("film"), 6, "id")
  check.eq(v:id("nope"), nil, "unknown word")
  check.eq(v:word(0), "[PAD]", "word 0")
  check.raises("bad argument #1 to 'word' (id 9 out of range [0, 8])",
               function() return v:word(9) end)
  check.same(v:counts():totable(), { 0, 0, 0, 0, 3, 2, 2, 1, 1 })
  local v2 = core.vocab_from_words(v:words())
  check.eq(v2:sha256(), v:sha256(), "vocabulary round trip")
  local ids, lengths, st = v:encode(c, 3)
  check.same(ids:totable(), { { 5, 4, 6 }, { 5, 8, 6 }, { 4, 4, 0 } })
  check.same(lengths:totable(), { 3, 3, 2 })
  check.eq(st.truncated, 1, "truncated")
  check.eq(st.unk, 0, "unk")

  local rest, held = c:split(1, 5, true)
  check.eq(#rest + #held, 3, "split")
  local kept, dropped = c:filter({ dedup = true, exclude = held })
  check.eq(#kept, 2, "filter kept")
  check.eq(dropped, 1, "filter dropped")
end

function T.reader_errors_are_clean()
  local dir = check.tmpdir()
  write(dir .. "/bad.tsv", "1\tok\n1\tno\ttab\n")
  check.raises(("text: %s/bad.tsv:2: expected 2 tab-separated fields, got 3"):format(dir),
               function() return text.read_tsv(dir .. "/bad.tsv", { ncols = 2, text = 2, label = 1 }) end)
  write(dir .. "/bad.arff", "@relation r\n@attribute Text string\n@data\n'a, \\'b\\''\n'open\n")
  check.raises(("text: %s/bad.arff:5: unterminated quoted string starting at column 1 "
                .. "(expected a closing ')"):format(dir),
               function() return text.read_arff(dir .. "/bad.arff", { attr = "Text" }) end)
  local ok, e = pcall(text.read_lines, dir .. "/none.txt")
  check.ok(not ok and require("hydra.err").is_error(e), "a clean user error")
  check.raises("bad argument #2 to 'text_read_tsv' (text must be a column in [1, ncols])",
               function() return core.text_read_tsv(dir .. "/bad.tsv", { ncols = 2, text = 3 }) end)
end

-- A tiny ID set (named sst2, so hydra.text's OOD path finds it) and an OOD set, prepared by the
-- framework from files written here.
local function tiny_world()
  local root = check.tmpdir()
  local d = { recipes_dir = root .. "/recipes", prepared_dir = root .. "/prepared",
              data_dir = root .. "/data", quiet = true }
  core.mkdir_p(d.recipes_dir)
  core.mkdir_p(d.data_dir .. "/tiny")
  local lines = { "label\tsentence" }
  for i = 1, 40 do
    lines[#lines + 1] = ("%d\t%s film number %d , it 's %s ."):format(i % 2,
      i % 2 == 1 and "A great" or "A dull", i, i % 2 == 1 and "fun" or "boring")
  end
  local train = table.concat(lines, "\n") .. "\n"
  local test = "label\tsentence\n1\tA great, &quot;new&quot; film!\n0\tDull &amp; slow<br />\n"
  local ood = "A dog runs on the grass.\nTwo men play chess\n\nA dog runs on the grass.\n"
  write(d.data_dir .. "/tiny/train.tsv", train)
  write(d.data_dir .. "/tiny/test.tsv", test)
  write(d.data_dir .. "/tiny/ood.txt", ood)
  local function sha(s) return core.hash_string(s, "sha256") end
  write(d.recipes_dir .. "/sst2.lua", ([[
local text = require("hydra.text")
return {
  name = "sst2", role = "text-id", kind = "text", licence = "test", description = "tiny ID",
  inputs = {
    { name = "train", from = "data_dir", file = "tiny/train.tsv", sha256 = "%s" },
    { name = "test", from = "data_dir", file = "tiny/test.tsv", sha256 = "%s" },
  },
  seed = 3,
  prepare = function(ctx)
    local spec = { ncols = 2, text = 2, label = 1, header = true }
    local train, val = text.read_tsv(ctx.input("train"), spec):split(4, ctx.seed, true)
    local vocab = text.build_vocab(train)
    text.write_split(ctx.out, "train", train, vocab)
    text.write_split(ctx.out, "val", val, vocab)
    text.write_split(ctx.out, "test", text.read_tsv(ctx.input("test"), spec), vocab)
    text.write_vocab(ctx.out, vocab)
    text.meta(ctx, vocab)
  end,
}]]):format(sha(train), sha(test)))
  write(d.recipes_dir .. "/tinyood.lua", ([[
local text = require("hydra.text")
return {
  name = "tinyood", role = "text-ood", kind = "text", licence = "test", description = "tiny OOD",
  depends = { "sst2" },
  inputs = { { name = "lines", from = "data_dir", file = "tiny/ood.txt", sha256 = "%s" } },
  seed = 0,
  prepare = function(ctx) text.prepare_other(ctx, text.read_lines(ctx.input("lines"))) end,
}]]):format(sha(ood)))
  return d
end

function T.prepare_tiny_text_set()
  local d = tiny_world()
  local path = data.prepare("tinyood", d)
  local id_path = data.path("sst2", d)
  local f <close> = h5.open(id_path)
  local words = f:read_strings("/vocab")
  check.same({ words[1], words[2], words[3], words[4] }, { "[PAD]", "[UNK]", "[CLS]", "[MASK]" })
  check.eq(f:read("/train/ids"):size(1), 36, "train after a 4-record hold-out")
  check.eq(f:read("/val/labels"):size(1), 4, "val")
  check.eq(f:read("/train/ids"):size(2), text.MAX_LEN, "ids width")
  local meta = f:attrs("/meta")
  check.eq(meta.max_len, 64, "meta max_len")
  check.eq(meta.vocab_size, #words, "meta vocab_size")
  check.ok(meta.tokens:find("not stored", 1, true), "CLS note")
  -- test split: every word of "a great , `` new '' film !" is known but `` new '' -> UNK
  local vocab = core.vocab_from_words(words)
  local ids = f:read("/test/ids")
  local lengths = f:read("/test/lengths")
  check.eq(lengths:get(1), 8, "test length")
  check.eq(ids:get(1, 1), vocab:id("a"), "first token")
  check.eq(ids:get(1, 5), 1, "unknown word -> UNK")
  check.eq(ids:get(1, 9), 0, "padding after the length")
  check.same(f:read("/test/labels"):totable(), { 1, 0 })
  local off = f:read("/test/text_offsets"):totable()
  check.same(off, { 0, 30, 51 })

  local g <close> = h5.open(path)
  check.same(g:read_strings("/vocab"), words)
  local gm = g:attrs("/meta")
  check.eq(gm.vocab_sha256, meta.vocab_sha256, "OOD file records the ID vocabulary hash")
  check.eq(gm.vocab_source, "sst2", "vocab source")
  check.eq(g:read("/test/labels"):size(1), 2, "duplicate line dropped")
  check.same(g:read("/test/labels"):totable(), { -1, -1 })

  -- determinism: preparing again gives a byte-identical file
  local before = check.read_file(path)
  d.force = true
  data.prepare("tinyood", d)
  check.ok(check.read_file(path) == before, "re-prepared file is byte-identical")
end

function T.malformed_input_leaves_nothing()
  local d = tiny_world()
  local bad = "label\tsentence\n1\tfine\n0\tbroken\textra\n"
  write(d.data_dir .. "/tiny/test.tsv", bad)
  local r = check.read_file(d.recipes_dir .. "/sst2.lua")
  local old = r:match('name = "test", from = "data_dir", file = "tiny/test.tsv", sha256 = "(%x+)"')
  write(d.recipes_dir .. "/sst2.lua", r:gsub(old, core.hash_string(bad, "sha256")))
  check.raises(("text: %s/tiny/test.tsv:3: expected 2 tab-separated fields, got 3"):format(
    d.data_dir), function() return data.prepare("sst2", d) end)
  local left = core.stat(d.prepared_dir) and core.listdir(d.prepared_dir) or {}
  check.same(left, {})
end

function T.recipes_follow_the_contract()
  local names = { "sst2", "trec", "multi30k", "agnews", "reuters", "fortunes", "ood-val-text",
                  "imdb-sentences", "yelp-sentences", "amazon-sentences" }
  for _, n in ipairs(names) do
    local r = data.recipe(n)
    check.eq(r.kind, "text", n .. " kind")
    if n ~= "sst2" then check.eq(r.depends[1], "sst2", n .. " depends on sst2") end
  end
  check.eq(data.recipe("ood-val-text").role, "text-ood-val", "ood-val role")
end

return T
