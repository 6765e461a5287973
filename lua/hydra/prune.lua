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
  local args = { keep = keep, objectives = objs, seed = math.tointeger(cfg.seed),
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
