-- lua/hydra/methods/common.lua: what the UQ methods share: the cached base-model stage, the
-- evaluation sets, predictors (cached predictions, timing, cost). Every cost comes from the C
-- cost functions of core/ (hy_xfmr_cost, hy_ens_cost, hy_fused_flops), which take the sequence
-- length T, through m:flops(T) and f:flops(T); nothing here re-derives a formula.
--
-- THE METHOD INTERFACE (every lua/hydra/methods/<name>.lua returns such a table):
--   M.name, M.label                      "hydra_taylor", "Hydra (Taylor)"
--   M.describe(cfg) -> { name, label, members, seeds = {...}, needs = { ood_val = bool },
--                        score = nil or the score the method is evaluated with instead of
--                        eval.score ("learned": the learned heads vilu, confidnet) }
--   M.build(ctx) -> predictor            builds (or finds in the stage cache) everything the
--                                        method needs
-- ctx = { cfg = resolved config, cache = hydra.stages cache, log = function(fmt, ...),
--         progress = bool }
-- predictor:predict(set) -> path of a prediction file (/probs [N,C], /labels [N] int32,
--                           /logits [N,C], /member_probs [M,N,C] and /member_logits [M,N,C]
--                           when the method has members; root attribute precision = "bf16"
--                           when precision bf16 ran, absent at fp32); a cached stage
--                           ("preds")
-- predictor:time_batch(set, B, reps) -> median milliseconds of one forward of B samples
-- predictor.cost = { params, members, seq_len (the model's full sequence length, tokens with CLS),
--                    flops_at = function(T) -> forward FLOPs of one sample at sequence length T
--                    (every member, every MC Dropout pass) }
-- predictor:cost_on(set) -> { params, members, flops, flops_padded }: the cost row of the
--   predictor on set (the ID test set in a run). flops = the mean over the set's samples of the
--   exact cost of each sample at its own length, flops_at(T_i) with T_i = 1 + its token count
--   (a mean of exact costs, not the cost at the mean length: attention is quadratic in T); an
--   image's T is fixed (seq_len). Text only: flops_padded = the same mean at the length the
--   engine executes, each batch of train.eval_batch_size cut to its longest sentence (every row
--   of the batch runs at that T; core/data/loader.h hy_dataset_seq_lens).
-- predictor.seeds = { training seeds used }
-- Sets come from common.sets(cfg): { name, role = "id"|"ood"|"shift", file, parts = { split... },
-- subset, hash, group = "near"|"far" (OOD sets) }; common.val_set(cfg) is the ID validation
-- split (temperature scaling).
local core = require("hydra.core")
local err = require("hydra.err")
local h5 = require("hydra.h5")
local model = require("hydra.model")
local stages = require("hydra.stages")

local C = {}

-- ===== config helpers =====

local deep_copy = require("hydra.config").copy

function C.data_file(cfg, name)
  return model.data_path(cfg, name)
end

-- The config subset that determines a trained base model (with seed and dropout applied).
-- train.init (a pretrained encoder) enters the key by its file's hash, not its path.
function C.base_inputs(cfg, seed, dropout)
  local mc = deep_copy(cfg.model)
  mc.dropout = dropout
  local idf = C.data_file(cfg, cfg.data.id)
  local tc = cfg.train
  if tc.init then
    tc = deep_copy(tc)
    tc.init = { sha256 = stages.data_hash(tc.init) }
  end
  return {
    model = mc, train = tc, optim = cfg.optim, seed = seed,
    data = { id = cfg.data.id, hash = stages.data_hash(idf), train_subset = cfg.data.train_subset,
             val_subset = cfg.data.test_subset },
  }
end

-- A copy of cfg with the seed and model.dropout changed (what the base model is trained with);
-- scratch = true drops train.init (a model trained from its seed alone).
function C.with_seed(cfg, seed, dropout, scratch)
  local c = deep_copy(cfg)
  c.seed = seed
  c.model.dropout = dropout
  if scratch then c.train.init = nil end
  return c
end

-- ===== the base model stage =====

-- Trains (or finds) the base model for seed and dropout; returns checkpoint path, key. With
-- train.init the base model is a fine-tuning of that pretrained encoder (every method's, as
-- the authors'); scratch = true trains from the seed alone (the "Deep Ensembles (scratch)" row).
-- With model.from (an imported model, hydra.sources) the base model is that import, fine-tuned
-- with train.epochs > 0; scratch is refused then.
function C.base_model(ctx, seed, dropout, scratch)
  local cfg = scratch and C.with_seed(ctx.cfg, ctx.cfg.seed, ctx.cfg.model.dropout, true)
    or ctx.cfg
  seed = seed or cfg.seed
  if dropout == nil then dropout = cfg.model.dropout end
  if cfg.model.from ~= nil then
    if scratch then
      err.fail("run: a model trained from scratch does not apply with model.from (the imported "
        .. "model is every method's base)")
    end
    return require("hydra.sources").base_model(ctx, cfg.model.from, seed, dropout)
  end
  local inputs = C.base_inputs(cfg, seed, dropout)
  local path, key = ctx.cache:get("base", inputs, function(tmp, key)
    local c = C.with_seed(cfg, seed, dropout)
    ctx.log("training base model (seed %d, dropout %g, %d epochs%s) ...", seed, dropout,
      c.train.epochs, c.train.init and (", from " .. c.train.init) or "")
    local m = model.new(c, seed)
    local hist = m:train(C.data_file(c, c.data.id), c, {
      progress = ctx.progress,
      log = function(line) ctx.log("  %s", line) end,
      -- a per-epoch work file beside the stage: a kill loses at most one epoch
      work = ctx.cache:path("base", key, ".work.h5"), work_tag = key,
      curves = ctx.cache:path("base", key, ".curves.csv"),
    })
    m:save(tmp, { seed = seed, stage = "base", stage_key = key,
                  data_hash = inputs.data.hash, best_epoch = hist.best_epoch or 0 })
  end)
  return path, key
end

-- ===== evaluation sets =====

local function list_splits(path)
  local out = {}
  local f <close> = h5.open(path)
  local function walk(group, prefix)
    for _, e in ipairs(f:list(group)) do
      if e.kind == "group" and not (prefix == nil and e.name == "meta") then
        local full = prefix and (prefix .. "/" .. e.name) or e.name
        if f:exists("/" .. full .. "/images") or f:exists("/" .. full .. "/ids") then
          out[#out + 1] = full
        else
          walk("/" .. full, full)
        end
      end
    end
  end
  walk("/", nil)
  return out
end
C.list_splits = list_splits

local function need_prepared(cfg, name, role)
  local path = C.data_file(cfg, name)
  if core.stat(path) ~= "file" then
    err.fail("run: %s dataset '%s' is not prepared: '%s' not found (run 'hydra data prepare %s')",
      role, name, path, name)
  end
  return path
end
C.need_prepared = need_prepared

-- The evaluation sets of cfg, in order: the ID test split, every OOD set, every shift set (a
-- file whose splits are "<corruption>/<severity>" gives one set per severity, "<name>-s<k>").
-- Every split is cut to its first data.test_subset samples (shift splits: data.shift_subset,
-- when > 0).
function C.sets(cfg)
  local out = {}
  local subset = cfg.data.test_subset or 0
  local shift_subset = (cfg.data.shift_subset or 0) > 0 and cfg.data.shift_subset or subset
  local function add(name, role, file, parts)
    out[#out + 1] = { name = name, role = role, file = file, parts = parts,
                      subset = role == "shift" and shift_subset or subset,
                      hash = stages.data_hash(file) }
  end
  local idf = need_prepared(cfg, cfg.data.id, "ID")
  local id_splits = list_splits(idf)
  local has = {}
  for _, s in ipairs(id_splits) do has[s] = true end
  if not has.test then
    err.fail("run: ID dataset '%s' has no 'test' split (splits: %s)", idf,
      table.concat(id_splits, ", "))
  end
  add(cfg.data.id, "id", idf, { "test" })
  for _, o in ipairs(require("hydra.eval").ood_groups(cfg.data.ood)) do
    local name = o.name
    local f = need_prepared(cfg, name, "OOD")
    local splits = list_splits(f)
    local split
    for _, s in ipairs(splits) do if s == "test" then split = s end end
    if not split and #splits == 1 then split = splits[1] end
    if not split then
      err.fail("run: OOD dataset '%s' has no 'test' split (splits: %s)", f,
        table.concat(splits, ", "))
    end
    add(name, "ood", f, { split })
    out[#out].group = o.group
  end
  for _, name in ipairs(cfg.data.shift or {}) do
    local f = need_prepared(cfg, name, "shift")
    local splits = list_splits(f)
    local test
    for _, s in ipairs(splits) do if s == "test" then test = s end end
    if test then
      add(name, "shift", f, { test })
    else
      local by_sev, sevs = {}, {}
      for _, s in ipairs(splits) do
        local sev = s:match("^[^/]+/(%d+)$")
        if not sev then
          err.fail("run: shift dataset '%s' has split '%s' (expected 'test' or "
            .. "'<corruption>/<severity>')", f, s)
        end
        sev = math.tointeger(tonumber(sev))
        if not by_sev[sev] then by_sev[sev] = {}; sevs[#sevs + 1] = sev end
        table.insert(by_sev[sev], s)
      end
      table.sort(sevs)
      for _, sev in ipairs(sevs) do add(("%s-s%d"):format(name, sev), "shift", f, by_sev[sev]) end
    end
  end
  return out
end

-- The ID validation split (the split temperature scaling is fitted on; the base models select
-- their checkpoint on it too): its first data.test_subset samples, like every test split.
function C.val_set(cfg)
  local idf = need_prepared(cfg, cfg.data.id, "ID")
  local has = false
  for _, s in ipairs(list_splits(idf)) do has = has or s == "val" end
  if not has then
    err.fail("run: eval.calibrate = temperature needs the 'val' split of the ID dataset, and "
      .. "'%s' has none (set eval.calibrate: none)", idf)
  end
  return { name = cfg.data.id .. "-val", role = "val", file = idf, parts = { "val" },
           subset = cfg.data.test_subset or 0, hash = stages.data_hash(idf) }
end

-- A core Dataset of a set; norm = { mean, std } (a model's) or nil (the file's /meta).
function C.dataset(set, norm)
  if #set.parts == 1 then return model.dataset(set.file, set.parts[1], set.subset, norm) end
  local f <close> = h5.open(set.file)
  if not norm then
    local meta = f:attrs("/meta")
    if not (meta.mean and meta.std) then
      err.fail("run: '%s' has no /meta mean and std (needed to normalise its images)", set.file)
    end
    norm = { meta.mean, meta.std }
  end
  local images, labels = {}, {}
  for i, part in ipairs(set.parts) do
    local name = "/" .. part .. "/images"
    if not f:exists(name) then
      err.fail("run: shift set '%s' needs images; '%s' has no %s", set.name, set.file, name)
    end
    local im, lb = f:read(name), f:read("/" .. part .. "/labels")
    local n = im:size(1)
    if set.subset > 0 and set.subset < n then
      im, lb = core.sample_slice(im, 1, set.subset), core.sample_slice(lb, 1, set.subset)
    end
    images[i], labels[i] = im, lb
  end
  return core.dataset_from_images(core.concat(images), core.concat(labels), norm[1], norm[2])
end

-- The identity of a set for stage keys.
function C.set_inputs(set)
  return { file = set.hash, parts = set.parts, subset = set.subset }
end

-- ===== predictors =====

local Predictor = {}
Predictor.__index = Predictor
C.Predictor = Predictor

-- spec = { ctx, name, key_inputs (identity for the preds stage), members (count),
--          run = function(ds, B) -> { probs, logits, labels, member_probs?, member_logits?,
--                                     uncertainty? (float32 [N], a learned score) },
--          dataset = function(set) -> core Dataset (normalised for the method's models),
--          cost = { params, members, seq_len, flops_at }, seeds }
function C.predictor(spec)
  return setmetatable(spec, Predictor)
end

-- sum over T of counts[T] * flops_at(T), divided by the samples (counts: a ds:seq_lens array,
-- summed in T order, so the value does not depend on table traversal)
function C.mean_flops(counts, flops_at)
  local sum, n = 0.0, 0
  for T, k in ipairs(counts) do
    if k > 0 then
      sum = sum + k * flops_at(T)
      n = n + k
    end
  end
  if n == 0 then err.fail("cost: the set has no samples (no FLOPs per sample to average)") end
  return sum / n
end

function Predictor:cost_on(set)
  local c = self.cost
  local out = { params = c.params, members = c.members }
  local ds = self.dataset(set)
  if ds:kind() ~= "text" then
    out.flops = c.flops_at(c.seq_len)
    return out
  end
  local real, padded = ds:seq_lens(self.ctx.cfg.train.eval_batch_size)
  out.flops = C.mean_flops(real, c.flops_at)
  out.flops_padded = C.mean_flops(padded, c.flops_at)
  return out
end

function Predictor:predict(set)
  local ctx = self.ctx
  local inputs = { method = self.key_inputs, set = C.set_inputs(set),
                   batch = ctx.cfg.train.eval_batch_size }
  local path = ctx.cache:get("preds", inputs, function(tmp)
    local ds = self.dataset(set)
    local p = self.run(ds, ctx.cfg.train.eval_batch_size)
    local f <close> = h5.create(tmp)
    f:write("/probs", p.probs)
    f:write("/logits", p.logits)
    f:write("/labels", p.labels)
    if p.member_probs then f:write("/member_probs", p.member_probs) end
    if p.member_logits then f:write("/member_logits", p.member_logits) end
    if p.uncertainty then f:write("/uncertainty", p.uncertainty) end
    if p.precision and p.precision ~= "fp32" then f:set_attr("/", "precision", p.precision) end
    f:set_attr("/", "method", self.name)
    f:set_attr("/", "dataset", set.name)
    f:set_attr("/", "data", set.file)
    f:set_attr("/", "split", table.concat(set.parts, ","))
    f:set_attr("/", "members", self.cost.members)
    f:commit()
  end)
  return path
end

-- Median milliseconds of one prediction of the first B samples of set (reps passes).
function Predictor:time_batch(set, B, reps)
  reps = reps or 5
  local one = { name = set.name, role = set.role, file = set.file, parts = { set.parts[1] },
                subset = B, hash = set.hash }
  local ds = self.dataset(one)
  local n = ds:size()
  self.run(ds, B)   -- warm-up (allocations, caches)
  local times = {}
  for i = 1, reps do
    local t0 = core.now()
    self.run(ds, B)
    times[i] = (core.now() - t0) * 1000
  end
  table.sort(times)
  return times[(reps + 1) // 2], n
end

-- ===== model-backed runs =====

-- Predicts ds with each loaded model (hydra.model objects) into [M,N,C] member tensors; with
-- mc = K > 0 (one model), K dropout passes (seeded by mc_seed) instead.
function C.run_models(models, ds, B, mc, mc_seed)
  if mc and mc > 0 then
    local p = models[1]:predict(ds, nil, { batch_size = B, mc_samples = mc, seed = mc_seed })
    return p
  end
  if #models == 1 then
    local p = models[1]:predict(ds, nil, { batch_size = B })
    return p
  end
  local n, K = ds:size(), models[1]:config().n_classes
  local logits = core.tensor("float32", #models, n, K)
  local probs = core.tensor("float32", #models, n, K)
  for m, mod in ipairs(models) do
    mod.ud:predict(ds, B, logits:row(m), probs:row(m))
  end
  return { probs = core.mean_first(probs), logits = core.mean_first(logits), labels = ds:labels(),
           member_probs = probs, member_logits = logits, precision = models[1].precision }
end

-- The precision a loaded model or fused model predicts at, for a predictions stage key: nil at
-- fp32 (the keys of fp32 predictions stay those from before the key precision existed).
function C.precision_key(m)
  return m.precision ~= nil and m.precision ~= "fp32" and m.precision or nil
end

-- A predictor over checkpoints (paths with their stage keys). opts: mc (samples), mc_seed,
-- name, label, seeds. Cost: the models' m:config() params added; FLOPs at T the models'
-- m:flops(T) added (hy_xfmr_cost; an ensemble's hy_ens_cost), times the samples for MC Dropout.
-- One ensemble checkpoint (BatchEnsemble, LoRA-Ensemble) predicts all its members in one pass.
function C.model_predictor(ctx, ckpts, keys, opts)
  local models = {}
  local precision = ctx.cfg.precision
  for i, p in ipairs(ckpts) do
    models[i] = model.load(p)
    if precision ~= "fp32" then models[i]:set_precision(precision) end
  end
  local mc = opts.mc or 0
  local params = 0
  for _, m in ipairs(models) do params = params + m:config().params end
  local function flops_at(T)
    local f = 0.0
    for _, m in ipairs(models) do f = f + m:flops(T) end
    return mc > 0 and f * mc or f
  end
  local members = mc > 0 and mc or #models
  local ens = #models == 1 and models[1]:ensemble()   -- one model, M members (core/hydra/ens.h)
  if ens then members = ens.members end
  return C.predictor({
    ctx = ctx, name = opts.name,
    key_inputs = { kind = mc > 0 and "mc" or "models", models = keys, mc = mc,
                   mc_seed = opts.mc_seed, precision = C.precision_key(models[1]) },
    dataset = function(set) return C.dataset(set, models[1].norm) end,
    run = function(ds, B) return C.run_models(models, ds, B, mc, opts.mc_seed) end,
    cost = { params = params, members = members, seq_len = models[1]:config().seq_len,
             flops_at = flops_at },
    seeds = opts.seeds or {},
  })
end

-- ===== pruned members and fused models (Taylor, CircAvg, Hydra) =====

-- The config the gates of a method are computed with. variant = { members, method, objective
-- (one for every member, or nil for hydra.diversity.objectives), single = true for the pruned
-- single-model baselines (one member, no resample, no overlap penalty, hydra.keep_heads) }.
function C.gates_cfg(cfg, variant)
  local c = deep_copy(cfg)
  c.prune.method = variant.method
  if variant.single then
    c.hydra.members = 1
    c.hydra.diversity.bootstrap = false
    c.hydra.diversity.keep_counts = {}
    c.hydra.diversity.overlap_penalty = 0.0
  end
  return c
end

-- SHA-256 of a stage product, memoised per path, size and modification time.
local sha_memo = {}
local function product_sha256(path)
  local _, size, mtime = core.stat(path)
  local k = ("%s\0%s\0%s"):format(path, tostring(size), tostring(mtime))
  if not sha_memo[k] then sha_memo[k] = core.file_sha256(path) end
  return sha_memo[k]
end

-- The check of a cached gates file (stages.lua opts.check): as many members as the config
-- asks for, pruned from this base (its checkpoint_sha256, else its base_stage).
local function gates_check(gc, base_path, base_key)
  return function(path)
    local f <close> = h5.open(path)
    if not f:exists("/gates") then return "it has no /gates" end
    local g = f:read("/gates", "float32")
    local n = g:ndim() == 3 and g:size(1) or 1
    if n ~= gc.hydra.members then
      return ("/gates holds %d member(s), the config asks for hydra.members = %d"):format(n,
        gc.hydra.members)
    end
    local a = f:attrs("/")
    if a.checkpoint_sha256 ~= nil then
      local want = product_sha256(base_path)
      if a.checkpoint_sha256 ~= want then
        return ("its gates were pruned from the checkpoint with sha256 %s, not from the base "
          .. "'%s' (%s)"):format(tostring(a.checkpoint_sha256):sub(1, 16), base_path,
          want:sub(1, 16))
      end
    elseif a.base_stage ~= base_key then
      return ("it records base stage %s, not %s"):format(tostring(a.base_stage), base_key)
    end
    return nil
  end
end

-- The inputs that key the gates stage of a variant pruned from the base stage base_key (and
-- the config the gates are computed with).
function C.gates_inputs(cfg, base_key, variant)
  local gc = C.gates_cfg(cfg, variant)
  -- what scores the heads: Taylor the calibration rows of the train split (prune.calib_size,
  -- prune.batch_size), the circuit search the validation sets (prune.val_size, data.ood_val)
  local pc = require("hydra.config").identity(gc.prune, "prune")   -- id_neutral keys: left out
  local inputs = {
    base = base_key, method = variant.method, objective = variant.objective,
    prune = pc, hydra = gc.hydra, seed = cfg.seed,
    data = { id = stages.data_hash(C.data_file(cfg, cfg.data.id)) },
  }
  if variant.method == "circuit" then
    pc.calib_size, pc.batch_size = nil, nil
    inputs.data.ood_val = stages.data_hash(need_prepared(cfg, cfg.data.ood_val, "OOD validation"))
    inputs.restarts = C.restarts(cfg, variant)
  else
    pc.val_size, pc.circuit_batch_size = nil, nil
  end
  return inputs, gc
end

-- The restarts of a variant's circuit search (variant.restarts: hydra_circ_restarts.*), or nil.
function C.restarts(cfg, variant)
  if not variant.restarts then return nil end
  return { n = cfg.hydra_circ_restarts.restarts, holdout = cfg.hydra_circ_restarts.holdout }
end

-- Gates stage: returns the gates file path, its key and the gate tensor [M,L,H].
function C.gates(ctx, base_path, base_key, variant)
  local cfg = ctx.cfg
  local inputs, gc = C.gates_inputs(cfg, base_key, variant)
  local path, key = ctx.cache:get("gates", inputs, function(tmp, key)
    local prune = require("hydra.prune")
    local m = model.load(base_path)
    if variant.method == "circuit" then
      local mc = m:config()
      local rs = C.restarts(cfg, variant)
      ctx.log("searching circuits (%s%d member(s); each %d layers x %d masked forward passes "
        .. "over prune.val_size = %d ID + OOD validation rows%s) ...",
        variant.objective and ("objective " .. variant.objective .. ", ") or "",
        gc.hydra.members, mc.depth, mc.n_heads + 1, gc.prune.val_size, rs and
        (", %d restarts, a fraction %g held out to choose one"):format(rs.n, rs.holdout) or "")
    else
      ctx.log("scoring heads (taylor, %d member(s), %d calibration rows) ...", gc.hydra.members,
        gc.prune.calib_size)
    end
    local show = variant.method == "circuit" and ctx.progress
    local okp, res = pcall(prune.members, m, gc, {
      method = variant.method, objective = variant.objective, restarts = C.restarts(cfg, variant),
      progress = show and require("hydra.progress").counter("  circuit search") or nil })
    if not okp then
      if err.is_error(res) then error(res, 0) end
      local msg = tostring(res):gsub("^[^%s:]+%.lua:%d+: ", "")
      err.fail("%s%s", msg:match("^prune: ") and "" or "prune: ", msg)
    end
    prune.write_gates(tmp, res, { base_stage = base_key, stage_key = key,
                                  checkpoint = base_path,
                                  checkpoint_sha256 = product_sha256(base_path) })
    if res.restarts then
      ctx.log("  restarts: held-out MSP AUROC %s; kept restart %d", table.concat((function()
        local t = {}
        for i, a in ipairs(res.restarts.auroc) do t[i] = ("%.2f"):format(100 * a) end
        return t
      end)(), ", "), res.restarts.chosen)
    end
  end, { check = gates_check(gc, base_path, base_key) })
  local f <close> = h5.open(path)
  local gates = f:read("/gates", "float32")
  if f:exists("/overlap") and gates:size(1) > 1 then
    local ov = f:read("/overlap", "float64"):totable()
    local parts = {}
    for i = 1, #ov do
      for j = i + 1, #ov do parts[#parts + 1] = ("%d-%d %.2f"):format(i, j, ov[i][j]) end
    end
    ctx.log("  head-set Jaccard overlap of the members: %s", table.concat(parts, ", "))
  end
  return path, key, gates
end

-- Member `m` (1-based) of the gates, fine-tuned from the base weights with its gates fixed
-- (hydra.finetune.member, as `hydra finetune`); finetune.epochs 0 keeps the gated base
-- weights. Returns the member checkpoint path and key.
-- The stage is keyed by the member's own gate row [L,H] (C.gate_row; C.member_inputs), not by
-- the gates stage: fine-tuning depends on the base, that row and the finetune/train/optim
-- settings only (never on the member's index or on how many members were searched), so every
-- method and every M whose search gives the same row shares one fine-tuned member (M = 1..6:
-- 6 members, not 21).
-- The checkpoint's /meta member and gates_stage name the search that built it first.
function C.member_inputs(cfg, base_key, gates, m)
  return {
    base = base_key, gate_row = C.gate_row(gates, m), finetune = cfg.finetune,
    train = cfg.train, optim = cfg.optim, seed = cfg.seed,
    data = { id = stages.data_hash(C.data_file(cfg, cfg.data.id)),
             train_subset = cfg.data.train_subset, val_subset = cfg.data.test_subset },
  }
end

function C.member(ctx, base_path, base_key, gates_key, gates, m)
  local cfg = ctx.cfg
  local inputs = C.member_inputs(cfg, base_key, gates, m)
  return ctx.cache:get("member", inputs, function(tmp, key)
    local mod = model.load(base_path)
    if cfg.finetune.epochs > 0 then
      ctx.log("fine-tuning member %d (%d epoch(s), lr %g) ...", m, cfg.finetune.epochs,
        cfg.finetune.learning_rate)
    end
    local _, meta = require("hydra.finetune").member(mod, gates, m, cfg, {
      progress = ctx.progress, log = function(line) ctx.log("  %s", line) end,
      curves = ctx.cache:path("member", key, ".curves.csv"),
    })
    meta.stage, meta.stage_key, meta.base_stage, meta.gates_stage = "member", key, base_key,
      gates_key
    mod:save(tmp, meta)
  end, { check = function(path)
    -- a cached member: fine-tuned from this base, with this member's gate row
    local f <close> = h5.open(path)
    local a = f:exists("/meta") and f:attrs("/meta") or {}
    if a.base_stage ~= base_key then
      return ("it records base stage %s, not %s"):format(tostring(a.base_stage), base_key)
    end
    local hg = f:read("/head_gates", "float32")
    local want = gates:row(m):totable()
    for l, row in ipairs(hg:totable()) do
      for h, v in ipairs(row) do
        if want[l] == nil or want[l][h] ~= v then
          return ("its /head_gates differ from member %d's gates at layer %d, head %d"):format(
            m, l, h)
        end
      end
    end
    return nil
  end })
end

-- Row m of gates [M,L,H] as a list of L strings of H digits ("1101..."; a gate that is
-- neither 0 nor 1 is written with %.17g between commas), the member stage's key input.
function C.gate_row(gates, m)
  local out = {}
  for l, row in ipairs(gates:row(m):totable()) do
    local binary = true
    for _, g in ipairs(row) do binary = binary and (g == 0 or g == 1) end
    local parts = {}
    for h, g in ipairs(row) do
      parts[h] = binary and (g == 1 and "1" or "0") or ("%.17g"):format(g)
    end
    out[l] = table.concat(parts, binary and "" or ",")
  end
  return out
end

-- Fuses member checkpoints (fuse.* modes of cfg, or the fuse section fc when given); returns
-- the fused file path and key. meta: extra /meta attributes of the fused file (e.g. the method).
function C.fused(ctx, member_paths, member_keys, fc, meta)
  local cfg = ctx.cfg
  fc = fc or cfg.fuse
  local inputs = { members = member_keys, fuse = fc }
  if meta then inputs.meta = meta end
  return ctx.cache:get("fused", inputs, function(tmp, key)
    local fuse = require("hydra.fuse")
    local models = {}
    for i, p in ipairs(member_paths) do models[i] = model.load(p) end
    local f = fuse.build(models, fc)
    local m = { stage = "fused", stage_key = key, members = #models }
    for k, v in pairs(meta or {}) do m[k] = v end
    f:save(tmp, m)
    f:close()
  end, { check = function(path)
    -- a cached fused model: as many members as fused here
    local f <close> = h5.open(path)
    local n = f:exists("/fuse") and f:attrs("/fuse").members
    if n ~= #member_paths then
      return ("/fuse members is %s, %d members are fused here"):format(tostring(n),
        #member_paths)
    end
    return nil
  end })
end

-- A predictor over a fused file: one pass gives every member (M = 1 for the pruned single
-- models, whose per-member arrays are then left out).
function C.fused_predictor(ctx, fused_path, fused_key, opts)
  local fuse = require("hydra.fuse")
  local f = fuse.load(fused_path)
  if ctx.cfg.precision ~= "fp32" then f:set_precision(ctx.cfg.precision) end
  local info = f:info()
  local M = info.members
  return C.predictor({
    ctx = ctx, name = opts.name,
    key_inputs = { kind = "fused", fused = fused_key, precision = C.precision_key(f) },
    dataset = function(set) return C.dataset(set, f.norm) end,
    run = function(ds, B)
      local ml, probs, mp = f.ud:predict(ds, B)
      local p = { probs = probs, logits = core.mean_first(ml), labels = ds:labels(),
                  precision = f.precision }
      if M > 1 then p.member_probs, p.member_logits = mp, ml end
      return p
    end,
    cost = { params = info.params, members = M, seq_len = info.seq_len,
             flops_at = function(T) return f:flops(T) end },
    seeds = opts.seeds or { ctx.cfg.seed },
  })
end

-- The whole pruned pipeline: base model -> gates (variant) -> fine-tuned members -> fused model
-- -> predictor.
-- The predictor's .pruned keeps what the pipeline used (base_path, base_key, gates_path,
-- gates_key, gates [M,L,H], objectives (the circuit search's, per member), member_paths,
-- member_keys) for the method's diagnostics (hydra.diagnostics).
function C.pruned_method(ctx, name, variant)
  local cfg = ctx.cfg
  local base_path, base_key = C.base_model(ctx, cfg.seed, cfg.model.dropout)
  local gates_path, gates_key, gates = C.gates(ctx, base_path, base_key, variant)
  local paths, keys = {}, {}
  for m = 1, gates:size(1) do
    paths[m], keys[m] = C.member(ctx, base_path, base_key, gates_key, gates, m)
  end
  local fpath, fkey = C.fused(ctx, paths, keys)
  local pred = C.fused_predictor(ctx, fpath, fkey, { name = name, seeds = { cfg.seed } })
  local objectives
  do
    local f <close> = h5.open(gates_path)
    objectives = require("hydra.fs").split_list(f:attrs("/").objectives)
  end
  pred.pruned = { base_path = base_path, base_key = base_key, gates_path = gates_path,
                  gates_key = gates_key, gates = gates, objectives = objectives,
                  member_paths = paths, member_keys = keys }
  return pred
end

-- The method table (see THE METHOD INTERFACE) of a pruned method: `variant` as in C.gates_cfg;
-- one member when variant.single, else hydra.members; a circuit search needs data.ood_val.
function C.pruned_module(name, label, variant)
  local M = { name = name, label = label, variant = variant }
  function M.describe(cfg)
    return { name = name, label = label, members = variant.single and 1 or cfg.hydra.members,
             seeds = { cfg.seed }, needs = { ood_val = variant.method == "circuit" } }
  end
  function M.build(ctx)
    return C.pruned_method(ctx, name, variant)
  end
  return M
end

-- ===== learned uncertainty heads (vilu, confidnet) =====

-- The method table of a learned uncertainty head on the frozen Single (hydra.vilu, core/hydra/vilu.h):
-- the base model's stage, then stage "uhead" (the head trained on the ID split vilu.split,
-- keyed by the base model, the kind, every vilu.* setting, the seed and the ID data), then a
-- predictor whose files add /uncertainty = the head's score; the method is evaluated with score
-- "learned" whatever eval.score is. Cost: the Single's plus the head's (which reads the CLS
-- features, so its FLOPs do not depend on T).
function C.head_module(name, label)
  local M = { name = name, label = label }
  function M.describe(cfg)
    return { name = name, label = label, members = 1, seeds = { cfg.seed },
             needs = { ood_val = false }, score = "learned" }
  end
  function M.build(ctx)
    local cfg = ctx.cfg
    local vilu = require("hydra.vilu")
    local kind = vilu.KINDS[name]
    local base_path, base_key = C.base_model(ctx, cfg.seed, cfg.model.dropout)
    local vc = deep_copy(cfg.vilu)
    vc.input, vc.loss = kind.input(cfg), kind.loss(cfg)
    local inputs = { base = base_key, kind = name, vilu = vc, seed = cfg.seed,
                     batch = cfg.train.eval_batch_size,
                     data = { id = stages.data_hash(C.data_file(cfg, cfg.data.id)) } }
    local path, key = ctx.cache:get("uhead", inputs, function(tmp, key)
      local m = model.load(base_path)
      local t0 = core.now()
      local head, info = vilu.fit(m, cfg, name)
      ctx.log("  %s: trained on %d rows of the ID %s split (%d misclassified by the Single), "
        .. "input %s, loss %s, %d epochs: final training loss %.4f (%.1f s)", label, info.rows,
        info.split, info.n_err, vc.input, vc.loss, cfg.vilu.epochs, info.loss, core.now() - t0)
      head:save(tmp, { stage = "uhead", stage_key = key, base_stage = base_key, kind = name,
                       split = info.split, rows = info.rows, n_err = info.n_err,
                       final_loss = info.loss, seed = cfg.seed })
      head:close()
    end)
    local m = model.load(base_path)
    local head = core.vilu_load(path)
    local hp, hf = vilu.cost(head)
    local mc = m:config()
    return C.predictor({
      ctx = ctx, name = name,
      key_inputs = { kind = "uhead", models = { base_key }, head = key },
      dataset = function(set) return C.dataset(set, m.norm) end,
      run = function(ds, B) return vilu.predict(head, m, ds, B) end,
      cost = { params = mc.params + hp, members = 1, seq_len = mc.seq_len,
               flops_at = function(T) return m:flops(T) + hf end },
      seeds = { cfg.seed },
    })
  end
  return M
end

return C
