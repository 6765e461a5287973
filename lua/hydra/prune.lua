-- lua/hydra/prune.lua: Hydra member gates from head importance (hydra.prune; DESIGN §3.2-3.3).
--
--   local prune = require("hydra").prune
--   local res = prune.members(m, cfg [, opts])   -- m: a hydra.model Model, cfg: resolved config
--     -> { gates = Tensor [M,L,H], scores = Tensor [M,L,H], overlap = Tensor float64 [M,M],
--          method =, objectives = {...}, keep = { {k per layer} per member }, seed = }
--   prune.write_gates(path, res, attrs)          -- GATES.h5 (atomic)
--   local g = prune.read_gates(path, L, H)       -- { gates =, attrs = } (validated)
--   prune.keep_table(cfg, L, H) / prune.objectives(cfg, M)
-- Fine-tuning the members is hydra.finetune (lua/hydra/finetune.lua).
--
-- Data (opts override cfg): taylor scores on a calibration set = prune.calib_size rows of the
-- ID *train* split in a seeded order (core.sample_permutation(n, seed)); circuit scores on the
-- first prune.val_size rows (0 = all) of the ID `val` split and of the validation OOD set
-- data.ood_val (its `val` split). The circuit search never sees a test set: any split other
-- than `val`, or an OOD set listed in data.ood (the OOD test sets), is refused.
-- Resamples: with hydra.diversity.bootstrap each member scores a bootstrap resample of those
-- sets; member m uses hy_rng_split(seed, m). Overlap penalty: hydra.diversity.overlap_penalty.
--
-- Restarts (opts.restarts = { n = R, holdout = f }: the method hydra_circ_restarts, knobs
-- hydra_circ_restarts.restarts and .holdout): those validation rows of each set (ID val, OOD
-- val) are split once by a seeded permutation (seed cfg.seed * 7919 + 29) into held-out rows (a
-- fraction f, at least 1) and search rows (the rest); restart r = 1..R runs the member search on
-- the search rows only, with seed cfg.seed * R + r - 1 (its own bootstrap resamples, so
-- hydra.diversity.bootstrap must be on), and the restart kept is the one whose members (the
-- base weights with their gates, no fine-tuning), their softmaxes averaged, give the highest
-- MSP AUROC of the held-out OOD rows against the held-out ID rows (ties: the earlier restart).
-- res.restarts = { auroc = { per restart }, chosen = r, seeds = {...}, rows = { id = { search,
-- held }, ood = { search, held } } (0-based rows of the first prune.val_size) }. Image settings
-- only (a text validation set has no image rows to split).
local core = require("hydra.core")

local M = {}

local function path_of(cfg, name)
  return require("hydra.model").data_path(cfg, name)   -- prepared, or imported (data.sources)
end

local function need(path)
  if not core.stat(path) then
    local name = path:match("([^/]+)%.h5$") or path
    error(("prune: prepared dataset '%s' not found (run `hydra data prepare %s`)"):format(path,
      name), 0)
  end
end

-- Per-member, per-layer keep counts: hydra.diversity.keep_counts[m] (when given) else
-- hydra.keep_heads (one count, or a list with one count per layer).
function M.keep_table(cfg, L, H)
  local hc = cfg.hydra
  local n = hc.members
  local kc = hc.diversity and hc.diversity.keep_counts or {}
  if #kc > 0 and #kc ~= n then
    error(("prune: hydra.diversity.keep_counts lists %d counts for %d members"):format(#kc, n), 0)
  end
  local out = {}
  for m = 1, n do
    local k = #kc > 0 and kc[m] or hc.keep_heads
    local row = {}
    if type(k) == "table" then
      if #k ~= L then
        error(("prune: hydra.keep_heads lists %d counts for %d layers"):format(#k, L), 0)
      end
      for l = 1, L do row[l] = k[l] end
    else
      for l = 1, L do row[l] = k end
    end
    for l = 1, L do
      if row[l] < 1 or row[l] > H then
        error(("prune: member %d keeps %d heads in layer %d (expected 1 to %d)"):format(m, row[l],
          l, H), 0)
      end
    end
    out[m] = row
  end
  return out
end

-- Circuit objective of every member: hydra.diversity.objectives cycled (prune.objective when
-- that list is empty).
function M.objectives(cfg, n)
  local list = cfg.hydra.diversity and cfg.hydra.diversity.objectives or {}
  if #list == 0 then list = { cfg.prune.objective } end
  local out = {}
  for m = 1, n do out[m] = list[(m - 1) % #list + 1] end
  return out
end

-- The validation data of a circuit search (prune.val_size rows of each); refuses test data.
function M.validation(model, cfg, opts)
  opts = opts or {}
  local split = opts.split or "val"
  local ood_name = opts.ood or cfg.data.ood_val
  local ood_split = opts.ood_split or "val"
  if split ~= "val" or ood_split ~= "val" then
    error(("prune: the circuit search only sees validation data (split '%s' refused; use 'val')")
      :format(split ~= "val" and split or ood_split), 0)
  end
  for _, o in ipairs(require("hydra.eval").ood_groups(cfg.data.ood)) do
    if o.name == ood_name then
      error(("prune: '%s' is an OOD test set (data.ood); the circuit search uses the validation "
        .. "OOD set data.ood_val"):format(ood_name), 0)
    end
  end
  local id_path = opts.data or path_of(cfg, cfg.data.id)
  need(id_path)
  local norm = model.norm
  local n = cfg.prune.val_size
  local id = norm and core.dataset_load(id_path, split, n, norm[1], norm[2])
    or core.dataset_load(id_path, split, n)
  local ood_path = opts.ood_path or path_of(cfg, ood_name)
  need(ood_path)
  local mean, std = norm and norm[1], norm and norm[2]
  if not mean then mean, std = id:mean_std() end
  local ood = core.dataset_load(ood_path, ood_split, n, mean, std)
  return id, ood
end

-- The calibration data of Taylor scoring: prune.calib_size rows of the ID train split.
function M.calibration(model, cfg, opts)
  opts = opts or {}
  local path = opts.data or path_of(cfg, cfg.data.id)
  need(path)
  local norm = model.norm
  local ds = norm and core.dataset_load(path, "train", 0, norm[1], norm[2])
    or core.dataset_load(path, "train", 0)
  local n = math.min(cfg.prune.calib_size, ds:size())
  local perm = core.sample_permutation(ds:size(), math.tointeger(cfg.seed) * 7919 + 17)
  return ds, core.sample_slice(perm, 1, n)
end

-- Member gates (see the file header). The binding reads the prune and hydra sections by their
-- keys (prune.method, prune.normalize, prune.batch_size for taylor, prune.circuit_batch_size for
-- circuit, hydra.members, hydra.diversity.bootstrap, hydra.diversity.overlap_penalty) and gets
-- the per-member keep counts (hydra.keep_heads / hydra.diversity.keep_counts, keep_table) and
-- objectives. opts: method (replaces prune.method), objective (one for all members), data, ood,
-- calib, id, ood_ds (ready datasets, for tests), progress (function(done, total) for the circuit
-- search, e.g. hydra.progress.counter("circuit search")).
function M.members(model, cfg, opts)
  opts = opts or {}
  local c = model:config()
  local L, H = c.depth, c.n_heads
  local pc = cfg.prune
  if opts.method then
    pc = require("hydra.config").copy(cfg.prune)
    pc.method = opts.method
  end
  local method = pc.method
  local n = cfg.hydra.members
  local keep = M.keep_table(cfg, L, H)
  local objs = opts.objective and {} or M.objectives(cfg, n)
  if opts.objective then for m = 1, n do objs[m] = opts.objective end end
  if opts.restarts and method == "circuit" and not opts.id then
    return M.restart_search(model, cfg, opts)
  end
  local args = { keep = keep, objectives = objs, seed = opts.seed or math.tointeger(cfg.seed),
                 progress = opts.progress }
  if method == "taylor" then
    if opts.calib then args.calib, args.calib_rows = opts.calib, opts.calib_rows
    else args.calib, args.calib_rows = M.calibration(model, cfg, opts) end
  else
    if opts.id then args.id, args.ood = opts.id, opts.ood_ds
    else args.id, args.ood = M.validation(model, cfg, opts) end
  end
  local gates, scores, overlap = core.prune_members(model.ud, pc, cfg.hydra, args)
  return { gates = gates, scores = scores, overlap = overlap, method = method,
           objectives = objs, keep = keep, seed = args.seed }
end

-- Image rows of the first prune.val_size rows of a validation split: images, labels.
local function val_images(path, what)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  if not f:exists("/val/images") then
    error(("prune: circuit-search restarts need image validation sets; %s '%s' has no "
      .. "/val/images"):format(what, path), 0)
  end
  return f:read("/val/images"), f:read("/val/labels")
end

-- {search, held} 0-based rows of n rows: a fraction `holdout` held out (at least 1, at most n-1)
local function split_rows(n, holdout, seed)
  if n < 2 then error(("prune: restarts need at least 2 validation rows per set (got %d)"):format(n), 0) end
  local nh = math.min(n - 1, math.max(1, math.floor(n * holdout + 0.5)))
  local perm = core.sample_permutation(n, seed)
  return { search = core.sample_slice(perm, nh + 1, n - nh), held = core.sample_slice(perm, 1, nh) }
end

-- MSP AUROC (OOD positive) of the members of `gates` [M,L,H] averaged, on the base weights of
-- model: held-out ID rows `id` against held-out OOD rows `ood`. The model's gates are restored.
function M.heldout_auroc(model, gates, id, ood, B)
  local saved = model:gates():clone()
  local K = model:config().n_classes
  local function msp(ds)
    local n = ds:size()
    local logits = core.tensor("float32", gates:size(1), n, K)
    local probs = core.tensor("float32", gates:size(1), n, K)
    for m = 1, gates:size(1) do
      model:set_gates(gates:row(m))
      model.ud:predict(ds, B, logits:row(m), probs:row(m))
    end
    return core.metrics_score("msp", core.mean_first(probs))
  end
  local ok, a = pcall(function() return core.metrics_ood(msp(id), msp(ood)).auroc end)
  model:set_gates(saved)
  if not ok then error(a, 0) end
  return a
end

-- The restarted circuit search (see the file header); returns members()'s result plus .restarts.
function M.restart_search(model, cfg, opts)
  local R, holdout = opts.restarts.n, opts.restarts.holdout
  if R > 1 and not cfg.hydra.diversity.bootstrap then
    error("prune: restarts > 1 need hydra.diversity.bootstrap: true (without resamples every "
      .. "restart finds the same circuits)", 0)
  end
  local vid = M.validation(model, cfg, opts)   -- its checks: validation data only
  local mean, std = table.unpack(model.norm or { vid:mean_std() })
  local parts, rows = {}, {}
  local seed = math.tointeger(cfg.seed)
  for i, set in ipairs({ { "id", opts.data or path_of(cfg, cfg.data.id), "ID set" },
                         { "ood", opts.ood_path or path_of(cfg, opts.ood or cfg.data.ood_val),
                           "OOD validation set" } }) do
    local im, lb = val_images(set[2], set[3])
    local n = im:size(1)
    if cfg.prune.val_size > 0 then n = math.min(n, cfg.prune.val_size) end
    local sp = split_rows(n, holdout, seed * 7919 + 29 + i)
    rows[set[1]] = sp
    parts[set[1]] = {}
    for _, k in ipairs({ "search", "held" }) do
      parts[set[1]][k] = core.dataset_from_images(core.sample_gather(im, sp[k]),
        core.sample_gather(lb, sp[k]), mean, std)
    end
  end
  local B = cfg.train.eval_batch_size
  local best, aurocs, seeds = nil, {}, {}
  for r = 1, R do
    seeds[r] = seed * R + r - 1
    local res = M.members(model, cfg, { method = "circuit", objective = opts.objective,
      id = parts.id.search, ood_ds = parts.ood.search, seed = seeds[r],
      progress = opts.progress })
    aurocs[r] = M.heldout_auroc(model, res.gates, parts.id.held, parts.ood.held, B)
    if not best or aurocs[r] > aurocs[best.r] then best = { r = r, res = res } end
  end
  best.res.restarts = { auroc = aurocs, chosen = best.r, seeds = seeds, rows = rows }
  return best.res
end

local function join(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = tostring(v) end
  return table.concat(s, ",")
end

-- Writes GATES.h5: /gates [M,L,H], /scores [M,L,H], /overlap [M,M] and attributes (on /)
-- method (prune.method), objectives, keep (per member, ';'-separated: hydra.keep_heads or
-- hydra.diversity.keep_counts), seed, members (hydra.members), plus attrs.
function M.write_gates(path, res, attrs)
  local h5 = require("hydra.h5")
  local f <close> = h5.create(path)
  f:write("/gates", res.gates)
  f:write("/scores", res.scores)
  f:write("/overlap", res.overlap)
  local keeps = {}
  for m, row in ipairs(res.keep) do keeps[m] = join(row) end
  f:set_attr("/", "method", res.method)
  f:set_attr("/", "objectives", res.method == "circuit" and join(res.objectives) or "")
  f:set_attr("/", "keep", table.concat(keeps, ";"))
  f:set_attr("/", "seed", res.seed)
  f:set_attr("/", "members", #res.keep)
  if res.restarts then
    f:set_attr("/", "restart_heldout_auroc", join(res.restarts.auroc))
    f:set_attr("/", "restart_chosen", res.restarts.chosen)
    f:set_attr("/", "restart_seeds", join(res.restarts.seeds))
  end
  for k, v in pairs(attrs or {}) do f:set_attr("/", k, v) end
  f:commit()
end

-- Reads and validates /gates of a gates file for a model of L layers and H heads
-- (hy_prune_read_gates: shape, values, and the members / keep attributes against /gates).
function M.read_gates(path, L, H)
  local g = core.prune_read_gates(path, L, H)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  return { gates = g, attrs = f:attrs("/") }
end

return M
