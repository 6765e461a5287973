-- lua/hydra/pretrain.lua: masked-language-model pretraining of the text encoder (hydra.pretrain;
-- `hydra pretrain`, the text table's pretraining stage). The per-batch work is C (core/nn/mlm.h).
--
--   local pretrain = require("hydra").pretrain
--   local hist = pretrain.run(cfg, out, opts)
--     cfg: a resolved config (model.* the encoder, pretrain.* the recipe, optim.beta1/beta2/eps/
--          weight_decay/schedule, seed); out: the PRE.h5 to write.
--     Data: the prepared corpus data.dir/<pretrain.corpus>.h5, split train (the first
--     pretrain.train_subset sentences; 0 = all) and val (the first pretrain.val_subset: the
--     held-out slice of the per-epoch MLM loss/accuracy). Its vocabulary must be the ID set's
--     (data.id: the same /vocab, checked by its sha256), so that fine-tuning reads the same ids.
--     After every epoch the whole state (encoder, MLM head, both AdamW states, the step) is
--     written atomically to out .. ".partial"; a run started again with the same settings
--     resumes after the last finished epoch (a kill loses at most one epoch) and ends bitwise
--     as an uninterrupted run (masks, shuffles and dropout depend on seed, epoch and step only).
--     With other settings the partial file is an error naming it (delete it, or use the
--     settings it records). At the end out is written (atomic) and the partial file removed.
--     opts: progress (default true: a bar on stderr), log (function(line): one line per epoch),
--           stop_after (tests: return after that many epochs of this call, as a kill would).
--     hist = { epochs = { {epoch, train_loss, train_acc, val_loss, val_acc, seconds}... },
--              resumed_from (epochs found done), seconds, params, corpus = { train, val } }
--   local path, meta = pretrain.encoder(cfg, cache, name)
--     The pretrained encoder of cfg as a stage of `cache` (a hydra.stages cache; stage
--     "pretrain", keyed by M.inputs and the corpus file's hash): built by M.run on a miss (a
--     fixed work file beside the stage, so a killed pretraining resumes), found again on a hit.
--     Every experiment that fine-tunes from it (table_text, the text part of
--     table_training_free) shares the one stage. name labels the errors (the experiment).
--     meta = the file's /meta attributes (pretrain_epochs, val_mlm_loss, val_mlm_acc, ...).
--   pretrain.encoder_path(cfg, cache) -> the encoder's stage path (nothing built)
--   pretrain.load_sweep(name, path, opts [, cache_dir]) -> hydra.sweep.load's sweep, with
--     train.init = that path for the sweeps of M.FINETUNED (the runs their scripts make)
--   local o = pretrain.init_opts(opts, path)
--     A copy of experiment options opts (hydra.experiment.script_options) whose overrides end
--     with train.init=path: every run of the sweep fine-tunes from the encoder at path.
--   PRE.h5: a model checkpoint (DESIGN §2; `hydra info`, hydra.model.load and train.init read
--   it) plus /mlm/params/<name> (the head: mlm.transform.dense.*, mlm.transform.norm.*,
--   mlm.bias; the decoder is tied to tok_embed.weight) and /meta: stage "pretrain",
--   pretrain_epochs, val_mlm_loss, val_mlm_acc, corpus, corpus_hash, config_hash (of the
--   settings that determine the weights), vocab_sha256.
local core = require("hydra.core")
local config = require("hydra.config")
local err = require("hydra.err")
local h5 = require("hydra.h5")
local model = require("hydra.model")

local M = {}

-- The settings that determine the pretrained weights (what a partial file must match).
function M.inputs(cfg, corpus_hash)
  return { model = cfg.model, pretrain = cfg.pretrain, seed = cfg.seed,
           optim = { beta1 = cfg.optim.beta1, beta2 = cfg.optim.beta2, eps = cfg.optim.eps,
                     weight_decay = cfg.optim.weight_decay, schedule = cfg.optim.schedule },
           corpus = corpus_hash }
end

function M.corpus_path(cfg)
  return model.data_path(cfg, cfg.pretrain.corpus)
end

local function vocab_sha(path)
  local f <close> = h5.open(path)
  local meta = f:exists("/meta") and f:attrs("/meta") or {}
  return meta.vocab_sha256, meta.recipe_sha256, f:exists("/vocab"), meta.kind
end

function M.run(cfg, out, opts)
  opts = opts or {}
  if cfg.model.kind ~= "text" then
    err.fail("pretrain: model.kind must be text (masked-language modelling), got '%s'",
      cfg.model.kind)
  end
  local corpus = M.corpus_path(cfg)
  if core.stat(corpus) ~= "file" then
    err.fail("pretrain: corpus '%s' is not prepared (run 'hydra data prepare %s')", corpus,
      cfg.pretrain.corpus)
  end
  local idf = model.data_path(cfg, cfg.data.id)
  local csha, chash = vocab_sha(corpus)
  if core.stat(idf) == "file" then
    local isha, _, ivocab, ikind = vocab_sha(idf)
    if not ivocab then
      err.fail("pretrain: data.id '%s' ('%s') is %s, not a text set; pretraining needs the text "
        .. "set the encoder will be fine-tuned on (e.g. data.id=sst2)", cfg.data.id, idf,
        ikind and ("an " .. tostring(ikind) .. " set") or "a set without /vocab")
    end
    if csha ~= isha then
      err.fail("pretrain: the vocabulary of '%s' (%s) is not the one of data.id '%s' (%s): "
        .. "re-prepare the corpus", corpus, csha or "no vocab_sha256 recorded", idf,
        isha or "no vocab_sha256 recorded")
    end
  end
  -- the vocabulary must hold [MASK] (a file prepared before it joined the reserved words fails)
  require("hydra.text").load_vocab(corpus)
  chash = chash or core.file_sha256(corpus)
  local inputs = M.inputs(cfg, chash)
  local key = config.hash(inputs)
  local seed = math.tointeger(cfg.seed)
  local log = opts.log or function() end
  local pc = cfg.pretrain

  local m = model.new({ model = cfg.model, data = { id = cfg.pretrain.corpus, dir = cfg.data.dir },
                        seed = seed, train = {} }, seed)
  local head = core.mlm_new(m.ud)
  head:init(seed)
  local train_ds = model.dataset(corpus, "train", pc.train_subset)
  local val_ds = model.dataset(corpus, "val", pc.val_subset)
  local trainer <close> = err.wrap("pretrain", core.mlm_trainer_new, m.ud, head, train_ds, pc,
    cfg.optim, seed)
  local partial = out .. ".partial"
  local hist = { epochs = {}, resumed_from = 0, params = m:params_count(),
                 corpus = { train = train_ds:size(), val = val_ds:size() } }
  local meta = { stage = "pretrain", corpus = pc.corpus, corpus_hash = chash, config_hash = key,
                 vocab_sha256 = csha or "", seed = seed, pretrain_epochs = 0 }
  if core.stat(partial) == "file" then
    -- a damaged partial file (truncated, not HDF5, no state) names the way out too
    local function damaged(fn, ...)
      local res = table.pack(pcall(fn, ...))
      if res[1] then return table.unpack(res, 2, res.n) end
      err.fail("pretrain: '%s' is a damaged partial state (%s): delete it to start afresh",
        partial, (err.message(res[2]):gsub("^[^:]*%.lua:%d+: ", "")))
    end
    local f <close> = damaged(h5.open, partial)
    local pm = damaged(function() return f:exists("/meta") and f:attrs("/meta") or {} end)
    if pm.config_hash ~= key then
      err.fail("pretrain: '%s' is the partial state of a run with other settings (config_hash "
        .. "%s, these %s): delete it to start afresh", partial, pm.config_hash or "none", key)
    end
    f:close()
    damaged(trainer.resume, trainer, partial)
    hist.resumed_from = math.tointeger(pm.pretrain_epochs) or 0
    for _, k in ipairs({ "val_mlm_loss", "val_mlm_acc" }) do meta[k] = pm[k] end
    log(("resuming after epoch %d of %d from %s"):format(hist.resumed_from, pc.epochs, partial))
  end
  local bar = opts.progress ~= false and require("hydra.progress").new({ epochs = pc.epochs,
                                                                          tty = opts.tty }) or nil
  local t0 = core.now()
  local ran_epochs = 0
  local B = cfg.train.eval_batch_size
  local curve = require("hydra.curves").recorder()
  for e = hist.resumed_from + 1, pc.epochs do
    if opts.stop_after and ran_epochs >= opts.stop_after then return hist end
    trainer:start_epoch(e)
    local p = trainer:progress()
    local chunk = math.max(1, p.epoch_steps // 50)
    repeat
      local ran = err.wrap("pretrain", trainer.run, trainer, chunk)
      p = trainer:progress()
      if ran > 0 then curve:step(p) end
      if bar then bar:update(p) end
    until ran < chunk or p.epoch_step >= p.epoch_steps
    local vl, va, vn = err.wrap("pretrain", core.mlm_evaluate, m.ud, head, val_ds, B, pc, seed)
    local rec = { epoch = e, train_loss = p.loss, train_acc = p.acc, val_loss = vl, val_acc = va,
                  val_positions = vn, seconds = p.seconds }
    hist.epochs[#hist.epochs + 1] = rec
    curve:epoch(p, vl, va)   -- val_nll / val_acc: the held-out MLM loss and accuracy
    local extra = ("held-out MLM loss %.4f  acc %.2f%% (%d positions)"):format(vl, 100 * va, vn)
    if bar then bar:finish(p, extra) end
    log(("epoch %d/%d  MLM loss %.4f  acc %.2f%%  %s  %.1f s"):format(e, pc.epochs, p.loss,
      100 * p.acc, extra, p.seconds))
    meta.pretrain_epochs, meta.val_mlm_loss, meta.val_mlm_acc = e, vl, va
    err.wrap("pretrain", trainer.save, trainer, partial, meta, true)
    ran_epochs = ran_epochs + 1
  end
  hist.seconds = core.now() - t0
  meta.pretrain_seconds = hist.seconds
  meta.git_hash = require("hydra.run").git_hash()
  err.wrap("pretrain", trainer.save, trainer, out, meta, false)
  os.remove(partial)
  hist.val_loss, hist.val_acc = meta.val_mlm_loss, meta.val_mlm_acc
  hist.curve = curve.rows
  if opts.curves then require("hydra.curves").write(opts.curves, curve.rows) end
  return hist
end

function M.encoder(cfg, cache, name)
  local corpus = M.corpus_path(cfg)
  if core.stat(corpus) ~= "file" then
    err.fail("%s: the pretraining corpus '%s' is not prepared (run 'hydra data prepare %s')",
      name, corpus, cfg.pretrain.corpus)
  end
  local stages = require("hydra.stages")
  local inputs = M.inputs(cfg, stages.data_hash(corpus))
  local path = cache:get("pretrain", inputs, function(tmp, key)
    -- a fixed work name (not the per-process tmp) so that a killed pretraining resumes
    local work = cache:path("pretrain", key, ".work.h5")
    print(("pretraining the text encoder (%d epoch(s) on %s) -> %s"):format(cfg.pretrain.epochs,
      corpus, work))
    M.run(cfg, work, { progress = core.isatty(2), log = print,
                       curves = cache:path("pretrain", key, ".curves.csv") })
    assert(os.rename(work, tmp))
  end)
  local f <close> = h5.open(path)
  local meta = f:attrs("/meta")
  print(("pretrained encoder %s: %d epoch(s), held-out MLM loss %.4f, accuracy %.2f%%"):format(
    path, meta.pretrain_epochs, meta.val_mlm_loss, 100 * meta.val_mlm_acc))
  return path, meta
end

-- The sweeps whose runs fine-tune from the pretrained encoder: their scripts
-- (experiments/table_text.lua, experiments/table_training_free.lua) pass train.init = the
-- encoder's stage (M.init_opts), which is part of the runs' ids.
M.FINETUNED = { table_text = true, table_training_free_text = true }

-- The path of cfg's pretrained-encoder stage in `cache` (a hydra.stages cache), built or not;
-- nil when the corpus is not prepared. Builds nothing: what `hydra repro --write` and the
-- budget add as train.init to find the runs M.FINETUNED's scripts made.
function M.encoder_path(cfg, cache)
  local corpus = M.corpus_path(cfg)
  if core.stat(corpus) ~= "file" then return nil end
  local stages = require("hydra.stages")
  return cache:path("pretrain", stages.key("pretrain", M.inputs(cfg, stages.data_hash(corpus))))
end

-- The sweep `name` (configs/sweeps/<name>.yaml at path) loaded as its script runs it: for
-- M.FINETUNED, with train.init = the encoder's stage in the cache at cache_dir (default
-- hydra.stages' default). opts as hydra.sweep.load's.
function M.load_sweep(name, path, opts, cache_dir)
  local sweep = require("hydra.sweep")
  local sw = sweep.load(path, opts)
  if not M.FINETUNED[name] or #sw.points == 0 then return sw end
  local enc = M.encoder_path(sw.points[1].cfg, require("hydra.stages").new({ dir = cache_dir,
    log = function() end }))
  if not enc then return sw end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.overrides = {}
  for _, x in ipairs((opts or {}).overrides or {}) do o.overrides[#o.overrides + 1] = x end
  o.overrides[#o.overrides + 1] = "train.init=" .. enc
  return sweep.load(path, o)
end

function M.init_opts(opts, path)
  local o, ov = {}, {}
  for k, v in pairs(opts) do o[k] = v end
  for _, x in ipairs(opts.overrides or {}) do ov[#ov + 1] = x end
  ov[#ov + 1] = "train.init=" .. path
  o.overrides = ov
  return o
end

return M
