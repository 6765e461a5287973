-- tests/lua/test_pretrain.lua: `hydra pretrain` (hydra.pretrain): a kill after an epoch resumes
-- to bitwise the weights of an uninterrupted run, a partial file of other settings is refused;
-- train.init loads every encoder tensor (names and shapes checked, the classifier head from the
-- seed) for text and for images; and, when the prepared sets are there, the pretraining corpus
-- shares no normalised sentence with any evaluation set.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local eq = check.eq

local T = {}

local WORDS = 40

-- a prepared-layout text file (splits train, val) of synthetic sequences, reserved words first
local function corpus_file(path)
  local f <close> = hydra.h5.create(path)
  for i, split in ipairs({ "train", "val" }) do
    local ids, lengths, labels = core.synth_text(i == 1 and 96 or 32, 12, WORDS, 70 + i)
    f:write("/" .. split .. "/ids", ids)
    f:write("/" .. split .. "/lengths", lengths)
    f:write("/" .. split .. "/labels", labels)
  end
  local words = { "[PAD]", "[UNK]", "[CLS]", "[MASK]" }
  for i = 5, WORDS do words[i] = ("w%d"):format(i) end
  f:write_strings("/vocab", words)
  f:set_attr("/meta", "name", "pcorpus")
  f:commit()
end

local function cfg_for(dir, extra)
  local ov = { "model.kind=text", "model.vocab_size=0", "model.max_len=12", "model.d_model=32",
               "model.n_heads=4", "model.depth=2", "model.d_mlp=64", "model.n_classes=2",
               "data.dir=" .. dir, "data.id=pcorpus", "pretrain.corpus=pcorpus",
               "pretrain.epochs=2", "pretrain.batch_size=16", "pretrain.val_subset=0",
               "train.eval_batch_size=32", "threads=1" }
  for _, o in ipairs(extra or {}) do ov[#ov + 1] = o end
  return hydra.config.load(nil, ov)
end

local function params_of(path)
  local m = hydra.model.load(path)
  return m:get_params():totable()
end

function T.resume_is_bitwise()
  local d = check.tmpdir()
  corpus_file(d .. "/pcorpus.h5")
  local cfg = cfg_for(d)
  local full = hydra.pretrain.run(cfg, d .. "/full.h5", { progress = false })
  eq(#full.epochs, 2, "two epochs")
  check.ok(full.epochs[2].val_loss < full.epochs[1].val_loss + 1, "a finite held-out loss")
  -- a "kill" after epoch 1 leaves the partial state; the second call resumes after it
  local out = d .. "/resumed.h5"
  hydra.pretrain.run(cfg, out, { progress = false, stop_after = 1 })
  eq(core.stat(out .. ".partial"), "file", "partial state after epoch 1")
  eq(core.stat(out), nil, "no product before the end")
  local lines = {}
  local res = hydra.pretrain.run(cfg, out, { progress = false,
                                             log = function(l) lines[#lines + 1] = l end })
  eq(res.resumed_from, 1, "resumed after epoch 1")
  check.ok(lines[1]:find("resuming after epoch 1 of 2", 1, true), lines[1])
  eq(core.stat(out .. ".partial"), nil, "partial state removed")
  check.same(params_of(out), params_of(d .. "/full.h5"), "resumed weights = uninterrupted ones")
  local f <close> = hydra.h5.open(out)
  local meta = f:attrs("/meta")
  eq(meta.stage, "pretrain", "meta stage")
  eq(meta.pretrain_epochs, 2, "meta epochs")
  eq(meta.val_mlm_acc, full.val_acc, "held-out accuracy recorded")
  check.ok(f:exists("/mlm/params/mlm.bias"), "the MLM head is stored")
  check.ok(not f:exists("/mlm/state"), "no optimizer state in the product")
  -- a partial file of other settings is refused, naming it
  hydra.pretrain.run(cfg, d .. "/other.h5", { progress = false, stop_after = 1 })
  local cfg2 = cfg_for(d, { "pretrain.learning_rate=0.002" })
  check.raises_has("pretrain: '" .. d .. "/other.h5.partial' is the partial state of a run "
    .. "with other settings", function() return hydra.pretrain.run(cfg2, d .. "/other.h5",
      { progress = false }) end)
end

-- reviews/reliability_2.md E6: a truncated or random .partial names the way out
function T.damaged_partial_says_delete_it()
  local d = check.tmpdir()
  corpus_file(d .. "/pcorpus.h5")
  local cfg = cfg_for(d, { "pretrain.epochs=2" })
  local out = d .. "/k.h5"
  hydra.pretrain.run(cfg, out, { progress = false, stop_after = 1 })
  local whole = check.read_file(out .. ".partial")
  for _, bytes in ipairs({ whole:sub(1, #whole // 2), ("\1\2\3"):rep(1000) }) do
    check.write_file(out .. ".partial", bytes)
    check.raises_has("pretrain: '" .. out .. ".partial' is a damaged partial state (",
      function() return hydra.pretrain.run(cfg, out, { progress = false }) end)
    check.raises_has("): delete it to start afresh",
      function() return hydra.pretrain.run(cfg, out, { progress = false }) end)
  end
end

-- reviews/reliability_2.md E3: data.id an image set (the default) is named as the cause
function T.pretrain_needs_a_text_id_set()
  local d = check.tmpdir()
  corpus_file(d .. "/pcorpus.h5")
  hydra.model.write_synthetic(d .. "/img.h5", { train = 8, val = 8, test = 8 })
  local cfg = cfg_for(d, { "data.id=img" })
  check.raises("pretrain: data.id 'img' ('" .. d .. "/img.h5') is a set without /vocab, not a "
    .. "text set; pretraining needs the text set the encoder will be fine-tuned on (e.g. "
    .. "data.id=sst2)",
    function() return hydra.pretrain.run(cfg, d .. "/p.h5", { progress = false }) end)
end

function T.train_init_loads_the_encoder()
  local d = check.tmpdir()
  corpus_file(d .. "/pcorpus.h5")
  local cfg = cfg_for(d, { "pretrain.epochs=1" })
  local pre = d .. "/pre.h5"
  hydra.pretrain.run(cfg, pre, { progress = false })
  local p = hydra.model.load(pre)
  local ft = cfg_for(d, { "train.init=" .. pre, "seed=5" })
  local m = hydra.model.new(ft)
  local fresh = hydra.model.new(cfg_for(d, { "seed=5" }))
  eq(m.init_tensors, #m:param_names() - 2, "every tensor but head.weight and head.bias")
  for _, name in ipairs(m:param_names()) do
    local want = name:match("^head%.") and fresh or p
    check.same(m:param(name):totable(), want:param(name):totable(), name)
  end
  -- shapes are checked, naming the file, the tensor and both shapes
  local wide = cfg_for(d, { "train.init=" .. pre, "model.d_model=64" })
  check.raises_has("model: train.init: ckpt: '" .. pre .. "': tensor 'cls_token' has shape "
    .. "[1,1,32], expected [1,1,64]", function() return hydra.model.new(wide) end)
  check.raises("model: train.init '" .. d .. "/nope.h5': no such file",
    function() return hydra.model.new(cfg_for(d, { "train.init=" .. d .. "/nope.h5" })) end)
  -- images: an image checkpoint initialises an image model; a text one does not
  local vit = { "model.kind=vit", "model.image_size=8", "model.channels=1", "model.patch=4",
                "model.d_model=16", "model.n_heads=2", "model.depth=2", "model.d_mlp=32",
                "model.n_classes=3" }
  local src = hydra.model.new(hydra.config.load(nil, vit))
  src:save(d .. "/vit.h5")
  local ov = { "train.init=" .. d .. "/vit.h5", "seed=9" }
  for _, o in ipairs(vit) do ov[#ov + 1] = o end
  local v = hydra.model.new(hydra.config.load(nil, ov))
  check.same(v:param("patch_embed.proj.weight"):totable(),
    src:param("patch_embed.proj.weight"):totable(), "patch embedding loaded")
  check.ok(v:param("head.weight"):totable()[1][1] ~= src:param("head.weight"):totable()[1][1],
    "the head comes from the seed")
  local bad = { "train.init=" .. pre }
  for _, o in ipairs(vit) do bad[#bad + 1] = o end
  check.raises("model: train.init: ckpt: '" .. pre .. "' holds a text model; train.init needs "
    .. "a vit model", function() return hydra.model.new(hydra.config.load(nil, bad)) end)
end

-- `hydra repro --write` and the budget find the runs of a sweep that fine-tunes from the
-- pretrained encoder (table_text): its points get train.init = the encoder's stage, the path
-- pretrain.encoder builds, whether built yet or not; other sweeps are left as they are.
function T.load_sweep_adds_the_encoder_stage()
  local d = check.tmpdir()
  corpus_file(d .. "/pcorpus.h5")
  core.mkdir_p(d .. "/sweeps")
  check.write_file(d .. "/base.yaml", ([[
model: {kind: text, vocab_size: 0, max_len: 12, d_model: 32, n_heads: 4, depth: 2, d_mlp: 64,
        n_classes: 2}
data: {dir: %s, id: pcorpus}
pretrain: {corpus: pcorpus, epochs: 1, batch_size: 16, val_subset: 0}
results_dir: %s/results
threads: 1
]]):format(d, d))
  check.write_file(d .. "/sweeps/s.yaml", "base: ../base.yaml\nseeds: 2\n")
  local cache = hydra.stages.new({ dir = d .. "/cache", log = function() end })
  local sw = hydra.pretrain.load_sweep("table_text", d .. "/sweeps/s.yaml", {}, d .. "/cache")
  local want = hydra.pretrain.encoder_path(sw.points[1].cfg, cache)
  eq(want:sub(1, #d + 16), d .. "/cache/pretrain/", "a stage of the cache")
  eq(#sw.points, 2, "both seeds")
  for _, pt in ipairs(sw.points) do eq(pt.cfg.train.init, want, "train.init = the stage") end
  local plain = hydra.pretrain.load_sweep("other", d .. "/sweeps/s.yaml", {}, d .. "/cache")
  check.ok(plain.points[1].cfg.train.init ~= want, "other sweeps: no train.init added")
  check.ok(plain.points[1].id ~= sw.points[1].id, "so other run ids")
  -- the path is the one the build writes
  local built = hydra.pretrain.encoder(sw.points[1].cfg, cache, "test")
  eq(built, want, "encoder() builds that path")
end

-- the real corpus against every evaluation set, by hashes of the normalised text (skipped when
-- the sets are not prepared in datasets/prepared)
function T.corpus_shares_no_test_sentence()
  local dir = (rawget(_G, "HYDRA_HOME") or ".") .. "/datasets/prepared"
  local sets = {
    { "sst2", { "val", "test", "test_sst" } }, { "agnews", { "test" } }, { "trec", { "test" } },
    { "multi30k", { "test" } }, { "reuters", { "test" } }, { "fortunes", { "test" } },
    { "ood-val-text", { "val" } }, { "yelp-sentences", { "test" } },
    { "amazon-sentences", { "test" } }, { "imdb-sentences", { "test" } },
  }
  local pre = dir .. "/pretrain-text.h5"
  if core.stat(pre) ~= "file" then return check.skip("pretrain-text is not prepared") end
  for _, s in ipairs(sets) do
    if core.stat(dir .. "/" .. s[1] .. ".h5") ~= "file" then
      return check.skip(s[1] .. " is not prepared")
    end
  end
  local function hashes(path, split, into)
    local c = hydra.text.load_corpus(path, split)
    local n = 0
    for i = 1, c:size() do
      local _, norm = c:get(i)
      if norm ~= "" then into[core.hash_string(norm, "sha256")] = true; n = n + 1 end
    end
    return n
  end
  local test = {}
  local ntest = 0
  for _, s in ipairs(sets) do
    for _, split in ipairs(s[2]) do ntest = ntest + hashes(dir .. "/" .. s[1] .. ".h5", split, test) end
  end
  local shared, n = 0, 0
  for _, split in ipairs({ "train", "val" }) do
    local c = hydra.text.load_corpus(pre, split)
    for i = 1, c:size() do
      n = n + 1
      local _, norm = c:get(i)
      if test[core.hash_string(norm, "sha256")] then shared = shared + 1 end
    end
  end
  check.ok(n > 1000 and ntest > 1000, ("%d corpus, %d test sentences"):format(n, ntest))
  eq(shared, 0, "corpus sentences found in an evaluation set")
end

return T
