-- lua/hydra/model.lua: the transformer model for scripts (hydra.model).
--
--   local model = require("hydra").model
--   local m = model.new(cfg)                 -- cfg: a resolved config (hydra.config.load);
--                                            -- a fresh model initialised from cfg.seed
--   local m = model.load("ckpt.h5")          -- a checkpoint (DESIGN §2 schema; an ensemble's too)
--   local m = model.new_ensemble(cfg, method [, seed])  -- method "batch_ensemble" |
--                                            -- "lora_ensemble": M members (core/hydra/ens.h) from the
--                                            -- cfg[method] section; m:ensemble() describes it
--   local hist = m:train(data, cfg, opts)    -- data: a prepared file path, or
--                                            --   { train = Dataset, val = Dataset }
--   local r = m:evaluate(data, split, { batch_size = B })  -- { nll =, acc =, n = }
--   local p = m:predict(data_file, split, { batch_size = B, ... })
--                                            -- { logits =, probs =, labels = [, member_probs =] }
--                                            -- (an ensemble: member_probs, member_logits [M,N,C],
--                                            -- probs = their mean p̄, logits = mean logits)
--   m:save(path, meta)                       -- meta: extra /meta attributes (strings, numbers)
--   m:gates() -> Tensor [L,H];  m:set_gates(t);  m:set_gate(layer, head, g)   (1-based)
--   m:params_count();  m:config();  m:get_params() / m:set_params(t)  (flat float32 copies)
--   m:cost([kept [, T]]) -> flops, params, parts   (hy_xfmr_cost: kept[l] heads per layer, all
--                                            when nil; at sequence length T, tokens with CLS,
--                                            default the full length m:config().seq_len)
--   model.write_synthetic(path, opts), model.write_image_folder(dir, K, seed, splits): test data
--   model.from_checkpoint(path, dropout) -> a checkpoint's model with another dropout rate
--   m:flops(T) -> forward FLOPs of one sample at sequence length T (text: T = 1 + its tokens;
--                 hy_xfmr_cost, or hy_ens_cost for an ensemble)
--
-- train(): AdamW with decoupled weight decay (not on norms, biases, embeddings), linear warmup
-- over train.warmup_epochs then optim.schedule (cosine to optim.min_lr), clipping at
-- train.grad_clip, seeded shuffling and augmentation (train.augment), evaluation on the data's
-- `val` split after every epoch and the kept weights chosen by train.select_best (val_nll:
-- lowest validation NLL; val_acc; last). A non-finite loss stops training with an error naming
-- the step. opts: progress (default true; a bar on stderr, plain lines when stderr is not a
-- terminal), log (function(line) receiving one summary line per epoch), tty (force the mode),
-- finetune (the resolved finetune section, its warmup_epochs filled in: a fine-tuning run, whose
-- finetune.epochs, finetune.warmup_epochs and finetune.learning_rate replace train.epochs,
-- train.warmup_epochs and optim.learning_rate; hydra.finetune passes it), trainer_new (a
-- function with core.trainer_new's arguments returning such a trainer, e.g. MIMO's),
-- evaluate (function(ud, val_ds, B) -> nll, acc for the epoch selection; default ud:evaluate),
-- work (a path: after every epoch but the last, the weights, the optimiser state, the weights
-- train.select_best keeps so far and the history are written there atomically; a later call
-- with the same work path and work_tag resumes after the last finished epoch and ends bitwise
-- as an uninterrupted run; the file is removed when training ends), work_tag (a string naming
-- the training, e.g. its stage key: a work file of another tag or epoch count is refused),
-- curves (a path: the learning curve, hydra.curves' CSV, written there when training ends; the
-- history's `curve` holds the same rows) and stop_after (return nil after that many epochs of
-- this call: a simulated kill, for tests).
-- Every setting is read from cfg by its YAML key (the binding reads train.*, optim.*, seed);
-- nothing here or in the binding has a default of its own (configs/defaults.yaml has them all).
--
-- Normalisation: images are scaled to [0,1] and normalised with the training data's mean/std
-- (the prepared file's /meta), which a trained model records in its checkpoint (/meta data_mean,
-- data_std); predict uses the checkpoint's values when present (so OOD sets are normalised like
-- the ID data), else the data file's /meta.
--
-- Config mapping (YAML -> engine): model.dropout is the rate on the attention output and in the
-- MLP (DESIGN §2: no dropout on attention probabilities); text: model.max_len is the most tokens
-- per sequence, CLS excluded (as in the data files and the engine); vocab_size 0 =
-- the number of words in the data file's /vocab.
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

local Model = {}
Model.__index = Model
M.Model = Model

-- ===== config and data helpers =====

-- Path of prepared dataset `name` under cfg.data.dir, or of the file a data.sources entry
-- `name` was imported into (hydra.sources; run.execute imports them first).
function M.data_path(cfg, name)
  local src = cfg.data.sources and cfg.data.sources[name]
  if src ~= nil then return require("hydra.sources").data_path(cfg, name) end
  return cfg.data.dir .. "/" .. name .. ".h5"
end

local function need_file(path, what)
  if not core.stat(path) then
    local name = path:match("([^/]+)%.h5$") or path
    err.fail("%s: prepared dataset '%s' not found (run `hydra data prepare %s`)", what, path, name)
  end
end

local function vocab_count(path)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  return #f:read_strings("/vocab")
end

-- The model section the binding reads (core.model_new / core.model_cost: model.kind,
-- model.d_model, ..., model.dropout by name) from a resolved `model` section: a copy with
-- model.vocab_size 0 (text) replaced by the size of the data file's /vocab.
function M.core_config(mc, data_file)
  local c = {}
  for k, v in pairs(mc) do c[k] = v end
  if mc.kind == "text" and c.vocab_size == 0 then
    if not data_file then
      error("model: vocab_size 0 (from the data) needs the data file", 2)
    end
    c.vocab_size = vocab_count(data_file)
  end
  return c
end

-- A core Dataset for split `split` of a prepared file; norm = { mean, std } or nil (file /meta).
function M.dataset(path, split, subset, norm)
  need_file(path, "data")
  if norm then return core.dataset_load(path, split, subset or 0, norm[1], norm[2]) end
  return core.dataset_load(path, split, subset or 0)
end

local function wrap(ud, meta)
  local self = setmetatable({ ud = ud, meta = meta or {} }, Model)
  if self.meta.data_mean and self.meta.data_std then
    self.norm = { self.meta.data_mean, self.meta.data_std }
  end
  return self
end

-- Writes a small synthetic image dataset in the prepared-file layout (DESIGN §5), learnable in
-- seconds (each class is a texture; see hy_synth_images): splits train/val/test with the given
-- sizes (defaults 512/128/128), /meta name, mean, std, seed. For tests, demos and benchmarks.
function M.write_synthetic(path, opts)
  opts = opts or {}
  local h5 = require("hydra.h5")
  local seed = opts.seed or 0
  local f <close> = h5.create(path)
  local sizes = { train = opts.train or 512, val = opts.val or 128, test = opts.test or 128 }
  for i, split in ipairs({ "train", "val", "test" }) do
    local images, labels = core.synth_images(sizes[split], opts.size or 28, opts.classes or 10,
      seed * 16 + i)
    f:write("/" .. split .. "/images", images)
    f:write("/" .. split .. "/labels", labels)
  end
  f:set_attr("/meta", "name", opts.name or "synthetic")
  f:set_attr("/meta", "mean", 0.3)
  f:set_attr("/meta", "std", 0.35)
  f:set_attr("/meta", "seed", seed)
  f:commit()
end

-- Writes an ImageFolder tree of the same textures as grey 32x32 PNGs: dir/<split>/c<k>/<n>.png
-- for splits = { {"train", N}, ... } (K classes, seeded by seed), the input `hydra data import
-- images` and `hydra hydraize` read. For tests and timing runs.
function M.write_image_folder(dir, K, seed, splits)
  for i, sp in ipairs(splits) do
    local images, labels = core.synth_images(sp[2], 32, K, seed * 16 + i)
    local lab = labels:totable()
    for j = 1, images:size(1) do
      local d = ("%s/%s/c%d"):format(dir, sp[1], lab[j])
      err.wrap("write_image_folder", core.mkdir_p, d)
      core.png_write(("%s/%04d.png"):format(d, j), images:row(j))
    end
  end
end

-- ===== construction =====

-- A fresh model from a resolved config, initialised from cfg.seed (or seed when given); with
-- cfg.train.init (train.init: a checkpoint path, e.g. `hydra pretrain`'s PRE.h5) every tensor
-- but the classifier head (head.weight, head.bias: from the seed) is then loaded from that
-- checkpoint, names and shapes checked (hy_ckpt_read_encoder; a mismatch is an error naming
-- the file, the tensor and both shapes), for text and for images. m.init_from = the path,
-- m.init_tensors = the tensors loaded.
function M.new(cfg, seed)
  local data_file = cfg.data and cfg.data.id and M.data_path(cfg, cfg.data.id) or nil
  if cfg.model.kind == "text" and cfg.model.vocab_size == 0 and data_file then
    need_file(data_file, "model")
  end
  local ud = core.model_new(M.core_config(cfg.model, data_file))
  ud:init(math.tointeger(seed or cfg.seed))
  local m = wrap(ud)
  local init = cfg.train and cfg.train.init
  if init then
    if core.stat(init) ~= "file" then
      err.fail("model: train.init '%s': no such file", init)
    end
    m.init_tensors = err.wrap("model: train.init", ud.load_encoder, ud, init)
    m.init_from = init
  end
  return m
end

-- A fresh ensemble (core/hydra/ens.h) of the model section of cfg: method "batch_ensemble" |
-- "lora_ensemble", its settings from cfg[method] (members, and rank, alpha, targets for LoRA),
-- initialised from cfg.seed (or seed).
function M.new_ensemble(cfg, method, seed)
  local data_file = cfg.data and cfg.data.id and M.data_path(cfg, cfg.data.id) or nil
  if cfg.model.kind == "text" and cfg.model.vocab_size == 0 and data_file then
    need_file(data_file, "model")
  end
  local ok, ud = pcall(core.ens_model_new, M.core_config(cfg.model, data_file), method,
    cfg[method])
  if not ok then   -- a bad knob (the message names its key): one line, no traceback
    err.fail("%s", (tostring(ud):gsub("^[^%s:]+%.lua:%d+: ", "")))
  end
  ud:init(math.tointeger(seed or cfg.seed))
  return wrap(ud)
end

-- A model from a checkpoint; its /meta attributes are in m.meta.
-- The input normalisation a checkpoint or fused file records (/meta data_mean, data_std), or
-- nil when it records none; an unusable one is an error naming the file (not the dataset).
function M.checked_norm(path, meta)
  local mean, std = meta.data_mean, meta.data_std
  if mean == nil and std == nil then return nil end
  local function finite(x)
    return type(x) == "number" and x == x and x > -math.huge and x < math.huge
  end
  -- numbers, or arrays of one value per image channel (a dataset normalised per channel)
  local ok = finite(mean) and finite(std) and std > 0
  if type(mean) == "table" and type(std) == "table" and #mean == #std and #mean >= 1 then
    ok = true
    for c = 1, #mean do ok = ok and finite(mean[c]) and finite(std[c]) and std[c] > 0 end
  end
  if not ok then
    local function str(v) return type(v) == "table" and table.concat(v, ",") or tostring(v) end
    error(("%s:/meta: data_mean must be finite and data_std finite and > 0 (got %s, %s)")
      :format(path, str(mean), str(std)), 0)
  end
  return { mean, std }
end

function M.load(path)
  local ud = core.model_load(path)
  local meta = {}
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  if f:exists("/meta") then meta = f:attrs("/meta") end
  M.checked_norm(path, meta)
  local m = wrap(ud, meta)
  m.path = path
  return m
end

-- The model of checkpoint `path` (weights, gates, /meta) with dropout rate `dropout` on the
-- attention output and in the MLP (model.dropout's meaning): the checkpoint itself when its rate
-- is that already, else a copy built with that rate. An imported model (rate 0) becomes the
-- base of MC Dropout or a base fine-tuned with dropout this way (hydra.sources).
function M.from_checkpoint(path, dropout)
  local src = M.load(path)
  local c = src:config()
  if c.dropout == dropout then return src end
  c.dropout = dropout
  local ud = core.model_new(c)
  ud:set_params(src.ud:get_params())
  ud:set_gates(src.ud:gates())
  local m = wrap(ud, src.meta)
  m.path = path
  src:close()
  return m
end

-- ===== methods =====

function Model:config() return self.ud:config() end
-- forward FLOPs per sample, parameters and their split by part, with kept[l] heads (all when nil)
-- at sequence length T (default the full one)
function Model:cost(kept, T) return self.ud:cost(kept, T) end
-- forward FLOPs of one sample at sequence length T in [1, seq_len] (every head kept)
function Model:flops(T) return self.ud:flops(T) end
function Model:params_count() return self.ud:params_count() end
function Model:gates() return self.ud:gates() end
function Model:get_params() return self.ud:get_params() end
function Model:set_params(t)
  self.ud:set_params(t)
  if self.precision == "bf16" then self:set_precision("bf16") end   -- re-pack the new weights
end
-- The arithmetic of predict / evaluate ("fp32" | "bf16", the config key precision; core/nn/xfmr.h
-- hy_xfmr_set_precision): bf16 packs the linears' weights as they are now. Returns the precision
-- in force ("fp32" on a CPU without AVX-512 BF16 and for an ensemble checkpoint), kept in
-- self.precision; training sets it back to fp32.
function Model:set_precision(p)
  self.precision = self.ud:set_precision(p)
  return self.precision
end
function Model:param(name) return self.ud:param(name) end
function Model:param_names() return self.ud:param_names() end
function Model:close() self.ud:close() end
-- nil for a single model, else { method, members, rank, alpha, targets } (the /ensemble attrs)
function Model:ensemble() return self.ud:ensemble() end

-- t: a float32 Tensor [L,H] or a nested Lua table { {g11, g12, ...}, ... }.
function Model:set_gates(t)
  if type(t) == "table" then t = core.from_table("float32", t) end
  self.ud:set_gates(t)
end

-- layer, head: 1-based.
function Model:set_gate(layer, head, g)
  self.ud:set_gate(layer, head, g)
end

-- Saves a checkpoint (atomic). meta: extra /meta attributes; the data normalisation the model
-- was trained with is always recorded.
function Model:save(path, meta)
  local m = {}
  for k, v in pairs(self.meta) do
    if type(v) == "string" or type(v) == "number" then m[k] = v end
  end
  for k, v in pairs(meta or {}) do m[k] = v end
  m.hydra_version = nil
  if self.norm then m.data_mean, m.data_std = self.norm[1], self.norm[2] end
  require("hydra.output").remove_stale_temps(path)   -- a killed writer's ".<name>.tmp-<pid>-<n>"
  self.ud:save(path, m)
end

-- The kind of split `split` of a prepared file ("text": /<split>/ids, "image": /images), or nil
-- when the file cannot say (missing split, not HDF5: the loader's own error names it then).
local function data_kind(path, split)
  local ok, kind = pcall(function()
    local f <close> = require("hydra.h5").open(path)
    if f:exists("/" .. split .. "/ids") then return "text" end
    if f:exists("/" .. split .. "/images") then return "image" end
    return nil
  end)
  return ok and kind or nil
end

local function as_dataset(self, data, split, subset)
  if type(data) == "string" then
    need_file(data, "data")
    local want = self.ud:config().kind == "text" and "text" or "image"
    local got = data_kind(data, split)
    if got and got ~= want then
      err.fail("%s is %s model; '%s' is %s set (its split '%s')",
        self.path and ("'" .. self.path .. "'") or "the model", want == "text" and "a text" or
        "an image", data, got == "text" and "a text" or "an image", split)
    end
    return M.dataset(data, split, subset, self.norm)
  end
  return data
end

-- Trains in place (see the file header). Returns the history:
-- { epochs = { {epoch, train_loss, train_acc, val_nll, val_acc, seconds, samples_per_s}... },
--   best_epoch, best_val_nll, best_val_acc, seed }
function Model:train(data, cfg, opts)
  opts = opts or {}
  if self.precision == "bf16" then self:set_precision("fp32") end
  local tc, ft = cfg.train, opts.finetune
  local epochs = ft and ft.epochs or tc.epochs
  local train_ds, val_ds
  if type(data) == "string" then
    need_file(data, "train")
    train_ds = core.dataset_load(data, "train", cfg.data.train_subset)
    self.norm = { train_ds:mean_std() }
    val_ds = core.dataset_load(data, "val", cfg.data.test_subset, self.norm[1], self.norm[2])
  else
    train_ds, val_ds = data.train, data.val
    if train_ds:kind() == "image" then self.norm = { train_ds:mean_std() } end
  end
  local trainer <close> = (opts.trainer_new or core.trainer_new)(self.ud, train_ds, tc,
    cfg.optim, math.tointeger(cfg.seed), ft)
  local evaluate = opts.evaluate or function(ud, ds, b) return ud:evaluate(ds, b) end
  local select = tc.select_best
  local show = opts.progress ~= false
  local bar = show and require("hydra.progress").new({ epochs = epochs, tty = opts.tty }) or nil
  local hist = { epochs = {}, seed = cfg.seed }
  local curve = require("hydra.curves").recorder()   -- opts.curves: written there at the end
  local best, best_params
  local eval_b = tc.eval_batch_size
  local work, tag = opts.work, opts.work_tag or ""
  local FIELDS = { "train_loss", "train_acc", "val_nll", "val_acc", "seconds", "samples_per_s" }
  local first = 1
  if work and core.stat(work) == "file" then
    local h5 = require("hydra.h5")
    local f <close> = err.wrap("train", h5.open, work)
    local wm = f:exists("/meta") and f:attrs("/meta") or {}
    f:close()
    local done = math.tointeger(wm.epochs_done)
    if wm.work_of ~= tag or wm.epochs ~= epochs or not done or done < 1 or done >= epochs then
      err.fail("train: '%s' is the work file of another training (%s, %s epochs, %s done; this "
        .. "is %s, %d epochs): delete it to start afresh", work, tostring(wm.work_of),
        tostring(wm.epochs), tostring(wm.epochs_done), tag, epochs)
    end
    best_params = err.wrap("train", trainer.resume, trainer, work)
    for e = 1, done do
      local rec = { epoch = e }
      for _, k in ipairs(FIELDS) do rec[k] = wm[("e%d_%s"):format(e, k)] end
      hist.epochs[e] = rec
    end
    best = hist.epochs[math.tointeger(wm.best_epoch) or done]
    for e = 1, done do   -- the resumed epochs' closing rows (their step rows were not kept)
      local r = hist.epochs[e]
      curve:epoch({ epoch = e, loss = r.train_loss, acc = r.train_acc, seconds = r.seconds },
        r.val_nll, r.val_acc)
    end
    first = done + 1
    if opts.log then
      opts.log(("resuming after epoch %d of %d from %s"):format(done, epochs, work))
    end
  end
  local ran_epochs = 0
  for e = first, epochs do
    trainer:start_epoch(e)
    local p = trainer:progress()
    local chunk = math.max(1, p.epoch_steps // 50)
    repeat
      local ran = trainer:run(chunk)
      p = trainer:progress()
      if ran > 0 then curve:step(p) end
      if bar then bar:update(p) end
    until ran < chunk or p.epoch_step >= p.epoch_steps
    local rec = { epoch = e, train_loss = p.loss, train_acc = p.acc, seconds = p.seconds,
                  samples_per_s = p.samples_per_s }
    if val_ds and val_ds:size() > 0 then
      rec.val_nll, rec.val_acc = evaluate(self.ud, val_ds, eval_b)
    end
    hist.epochs[e] = rec
    curve:epoch(p, rec.val_nll, rec.val_acc)
    local better
    if select == "last" or not rec.val_nll then better = true
    elseif select == "val_nll" then better = not best or rec.val_nll < best.val_nll
    else better = not best or rec.val_acc > best.val_acc end
    if better then
      best = rec
      if select ~= "last" and e < epochs then best_params = self.ud:get_params() end
      if e == epochs then best_params = nil end   -- the current weights are the best
    end
    local extra = rec.val_nll and ("val nll %.4f  val acc %.2f%%%s"):format(rec.val_nll,
      100 * rec.val_acc, better and " *" or "") or nil
    if bar then bar:finish(p, extra) end
    if opts.log then
      opts.log(("epoch %d/%d  train loss %.4f  train acc %.2f%%  %s  %.1f s  %.0f samples/s")
        :format(e, epochs, p.loss, 100 * p.acc, extra or "", p.seconds, p.samples_per_s))
    end
    if work and e < epochs then
      local wm = { work_of = tag, epochs = epochs, epochs_done = e, best_epoch = best.epoch }
      for i = 1, e do
        for _, k in ipairs(FIELDS) do
          local v = hist.epochs[i][k]
          if v ~= nil then wm[("e%d_%s"):format(i, k)] = v end
        end
      end
      err.wrap("train", trainer.save, trainer, work, wm, best_params)
    end
    ran_epochs = ran_epochs + 1
    if opts.stop_after and ran_epochs >= opts.stop_after and e < epochs then return nil end
  end
  if work then os.remove(work) end
  hist.curve = curve.rows
  if opts.curves then require("hydra.curves").write(opts.curves, curve.rows) end
  if best_params then self.ud:set_params(best_params) end
  hist.best_epoch = best.epoch
  hist.best_val_nll, hist.best_val_acc = best.val_nll, best.val_acc
  return hist
end

-- opts.batch_size, required: the pipeline passes train.eval_batch_size (GEMM rounding depends
-- on the batch's row count, so it is never guessed here).
local function batch_size(opts, what)
  if math.type(opts.batch_size) ~= "integer" then
    error(("%s: opts.batch_size must be an integer (train.eval_batch_size; got %s)"):format(what,
      tostring(opts.batch_size)), 3)
  end
  return opts.batch_size
end

-- Mean NLL and accuracy on a split: data is a prepared file path (split, default "val") or a
-- core Dataset. opts.batch_size (required), opts.subset.
function Model:evaluate(data, split, opts)
  opts = opts or {}
  local B = batch_size(opts, "evaluate")
  local ds = as_dataset(self, data, split or "val", opts.subset)
  local nll, acc = self.ud:evaluate(ds, B)
  return { nll = nll, acc = acc, n = ds:size() }
end

-- Predictions on a split of a prepared file (or a core Dataset).
-- opts: batch_size (required), subset (first N samples, 0 = all), mc_samples (K >= 1: MC dropout,
-- dropout on, K passes; probs = mean of the passes' softmaxes, logits = mean logits,
-- member_probs [K,N,C]), seed (MC dropout masks, default 0).
-- Returns { logits = Tensor [N,C], probs = Tensor [N,C], labels = Tensor int32 [N] (-1 OOD),
--           member_probs = Tensor [K,N,C] (MC only), precision = "fp32" | "bf16" (in force) }.
function Model:predict(data, split, opts)
  opts = opts or {}
  local B = batch_size(opts, "predict")
  local ds = as_dataset(self, data, split, opts.subset)
  local K = opts.mc_samples
  if self.ud:ensemble() then   -- one pass: every member's rows
    if K and K > 0 then error("predict: mc_samples needs a single model (this is an ensemble)", 2) end
    local logits, probs = self.ud:predict(ds, B)
    return { logits = core.mean_first(logits), probs = core.mean_first(probs),
             labels = ds:labels(), member_probs = probs, member_logits = logits,
             precision = self.precision or "fp32" }
  end
  if not K or K == 0 then
    local logits, probs = self.ud:predict(ds, B)
    return { logits = logits, probs = probs, labels = ds:labels(),
             precision = self.precision or "fp32" }
  end
  local c = self.ud:config()
  if c.dropout == 0 then
    error("predict: mc_samples needs a model with dropout (model.dropout is 0)", 2)
  end
  local n, C = ds:size(), c.n_classes
  local all_logits = core.tensor("float32", K, n, C)
  local all_probs = core.tensor("float32", K, n, C)
  local ok, e = pcall(function()
    for k = 1, K do
      self.ud:set_dropout(true, math.tointeger(opts.seed or 0) * 1000003 + k)
      self.ud:predict(ds, B, all_logits:row(k), all_probs:row(k))
    end
  end)
  self.ud:set_dropout(false)
  if not ok then error(e, 0) end
  return { logits = core.mean_first(all_logits), probs = core.mean_first(all_probs),
           labels = ds:labels(), member_probs = all_probs, precision = self.precision or "fp32" }
end

return M
