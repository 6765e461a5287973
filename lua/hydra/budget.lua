-- lua/hydra/budget.lua: the budget `hydra repro` prints before it starts (`make repro`): per
-- experiment the runs still to do, the base models missing from the stage cache, and the time
-- they should take.
--
--   budget.estimate(names, profile [, opts]) -> { rows = { row... }, seconds, flops_per_s }
--       row = { name, points, complete, bases, bases_cached, members, members_cached, seconds,
--               note }; opts: overrides, seeds, cache_dir, sweep_dir (configs/sweeps),
--               flops_per_s (instead of measuring it), summaries (results/paper: an
--               experiment's seed parts there are named in its note)
--   budget.text(b) -> the printed table
--
-- The estimate is the FLOP cost model (hy_xfmr_cost: m:flops(T) per sample) divided by one
-- measured throughput: a timed forward pass of the profile's image model at batch 128
-- (core.model_time), training counted as 3 forward passes. Per incomplete run (a sweep point
-- without result.h5): every base model the methods need (Deep Ensembles: M of them, MC Dropout
-- its own dropout) unless its stage is cached (its key: methods/common.lua base_inputs; each
-- counted once over the whole repro), each pruned member's fine-tuning and circuit search, the
-- efficient ensembles' own training (members x a base model's), the predictions of every
-- method on every evaluation set and Hydra (Circ)'s diagnostics (hydra.diagnostics). Gates
-- are looked up by their key once their base is known, members once their gates are cached
-- (their key holds the gate row); before that they count as not cached. Experiments that are
-- not sweeps (cost, quickstart) and prop1 (its own loop) count nothing. A complete run costs
-- nothing: it is only re-read. The throughput is measured at the machine's current load.
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

local function home() return rawget(_G, "HYDRA_HOME") or "." end

-- rows of a split of a prepared file (nil when the file or split is absent)
local function rows_of(path, split)
  if core.stat(path) ~= "file" then return nil end
  local ok, n = pcall(function()
    local f <close> = require("hydra.h5").open(path)
    local p = "/" .. split .. "/labels"
    if not f:exists(p) then return nil end
    return f:read(p):numel()
  end)
  return ok and n or nil
end

local function subset(n, sub)
  if not n then return sub and sub > 0 and sub or nil end
  if sub and sub > 0 and sub < n then return sub end
  return n
end

-- FLOP/s of the forward pass of cfg's model (an image model; others use vit-fm's figure)
function M.throughput(cfg)
  local model = require("hydra.model")
  local c = cfg
  if cfg.model.kind ~= "vit" then
    c = require("hydra.config").load(home() .. "/configs/models/vit-fm.yaml")
  end
  local m = model.new(c, 1)
  local B = 128
  local t = core.model_time(m.ud, B, 2)
  local f = m:flops(m:config().seq_len) * B
  m:close()
  return f / t
end

local BASE_METHODS = { single = true, taylor = true, circavg = true, hydra_taylor = true,
                       hydra_circ = true, hydra_circ_restarts = true, lora_ensemble = true,
                       vilu = true, confidnet = true }
local OWN_TRAINING = { batch_ensemble = true, packed_ensemble = true, mimo = true }
-- sweeps whose script measures its points itself instead of running their methods
M.NOT_ESTIMATED = { prop1 = "its own measurement loop (paper_repro.md section 10 has its time)" }
-- experiments whose script runs more sweeps than configs/sweeps/<name>.yaml (counted in its row)
M.MORE_SWEEPS = { table_training_free = { "table_training_free_text" } }

-- seconds of one incomplete run of cfg (adds the base keys it counts to seen)
local function run_seconds(cfg, thr, cache, seen, counts)
  local common = require("hydra.methods.common")
  local stages = require("hydra.stages")
  local run = require("hydra.run")
  local model = require("hydra.model")
  local m = model.new(cfg, 1)
  local mc = m:config()
  local F = m:flops(mc.seq_len)
  m:close()
  local idf = common.data_file(cfg, cfg.data.id)
  local n_train = subset(rows_of(idf, "train"), cfg.data.train_subset) or 0
  local n_val = subset(rows_of(idf, "val"), cfg.data.test_subset) or 0
  local n_eval = (subset(rows_of(idf, "test"), cfg.data.test_subset) or 0) + n_val
  for _, o in ipairs(require("hydra.eval").ood_groups(cfg.data.ood)) do
    n_eval = n_eval + (subset(rows_of(common.data_file(cfg, o.name), "test"),
      cfg.data.test_subset) or 0)
  end
  local base_s = cfg.train.epochs * n_train * 3 * F / thr
  local prepared = core.stat(idf) == "file"
  if not prepared then counts.unprepared = cfg.data.id end
  local s = 0
  local function cached(stage, key)
    return key and core.stat(cache:path(stage, key)) == "file"
  end
  -- adds `seconds` unless the stage is cached or already counted; returns its key
  local function stage(name, inputs, seconds)
    local key = prepared and inputs and stages.key(name, inputs())
    counts[name] = (counts[name] or 0) + 1
    if cached(name, key) then
      counts[name .. "_cached"] = (counts[name .. "_cached"] or 0) + 1
    elseif not (key and seen[key]) then
      if key then seen[key] = true end
      s = s + seconds
    end
    return key
  end
  local function base(seed, dropout)
    return stage("base", function() return common.base_inputs(cfg, seed, dropout) end, base_s)
  end
  local n_ft = subset(n_train, cfg.finetune.train_subset) or 0
  for _, name in ipairs(cfg.methods or {}) do
    local mod = run.method(name)
    local d = mod.describe(cfg)
    if name == "deep_ensemble" or name == "deep_ensemble_scratch" then
      for _, sd in ipairs(d.seeds) do base(sd, cfg.model.dropout) end
    elseif name == "mc_dropout" then
      base(cfg.seed, cfg.mc_dropout.rate)
    elseif OWN_TRAINING[name] then
      s = s + d.members * base_s
    elseif BASE_METHODS[name] then
      local bkey = base(cfg.seed, cfg.model.dropout)
      local v = mod.variant
      if v then   -- a pruned method: its search, then its fine-tuned members
        local ok, inputs, gc = pcall(common.gates_inputs, cfg, bkey, v)
        local rs = common.restarts(cfg, v)   -- restarts: R searches + held-out scoring
        local search = v.method == "circuit"
          and d.members * mc.depth * (mc.n_heads + 1) * 2 * cfg.prune.val_size * F / thr
          * (rs and rs.n * (1 + 1 / (mc.depth * (mc.n_heads + 1))) or 1) or 0
        local gkey = stage("gates", ok and bkey and function() return inputs end or nil, search)
        local gates
        if cached("gates", gkey) then
          local f <close> = require("hydra.h5").open(cache:path("gates", gkey))
          gates = f:read("/gates", "float32")
        end
        local keep = (ok and type(gc.hydra.keep_heads) == "number" and gc.hydra.keep_heads
          or mc.n_heads) / mc.n_heads
        local ft = cfg.finetune.epochs * n_ft * 3 * F * keep / thr
        for m = 1, d.members do
          stage("member", gates and function() return common.member_inputs(cfg, bkey, gates, m) end
            or nil, ft)
        end
      end
    end
    s = s + n_eval * F * (d.members or 1) / thr
    if name == "hydra_circ" or name == "hydra_circ_restarts" then   -- its diagnostics: each
                                   -- circuit on the test and search data
      s = s + d.members * (n_eval - n_val + 4 * cfg.prune.val_size) * F / thr
    end
  end
  return s
end

function M.estimate(names, profile, opts)
  opts = opts or {}
  local stages = require("hydra.stages")
  local cache = stages.new({ dir = opts.cache_dir, log = function() end })
  local out = { rows = {}, seconds = 0, flops_per_s = opts.flops_per_s }
  local seen = {}
  for _, name in ipairs(names) do
    local path = ("%s/%s.yaml"):format(opts.sweep_dir or (home() .. "/configs/sweeps"), name)
    local row = { name = name, points = 0, complete = 0, bases = 0, bases_cached = 0,
                  seconds = 0 }
    if M.NOT_ESTIMATED[name] then
      row.note = "not estimated: " .. M.NOT_ESTIMATED[name]
    elseif core.stat(path) ~= "file" then
      row.note = "not a sweep: not estimated"
    else
      local counts = {}
      for _, sname in ipairs({ name, table.unpack(M.MORE_SWEEPS[name] or {}) }) do
        local spath = ("%s/%s.yaml"):format(opts.sweep_dir or (home() .. "/configs/sweeps"),
          sname)
        local sw = require("hydra.pretrain").load_sweep(sname, spath, { profile = profile,
          overrides = opts.overrides, seeds = opts.seeds }, opts.cache_dir)
        row.points = row.points + #sw.points
        for _, pt in ipairs(sw.points) do
          if require("hydra.run").status(pt.cfg, pt.dir) == "complete" then
            row.complete = row.complete + 1
          else
            if not out.flops_per_s then out.flops_per_s = M.throughput(pt.cfg) end
            local ok, sec = pcall(run_seconds, pt.cfg, out.flops_per_s, cache, seen, counts)
            if ok then row.seconds = row.seconds + sec
            else row.note = "partly estimated: " .. err.message(sec) end
          end
        end
      end
      row.bases, row.bases_cached = counts.base or 0, counts.base_cached or 0
      row.members, row.members_cached = counts.member or 0, counts.member_cached or 0
      if counts.unprepared then
        row.note = ("'%s' is not prepared: training not counted"):format(counts.unprepared)
      end
    end
    -- seeds whose seed part is committed (hydra.paper; results/README.md, "Seed parts")
    local sdir = ("%s/%s"):format(opts.summaries or
      (require("hydra.config").defaults().results_dir .. "/paper"), name)
    local _, parts = require("hydra.paper").seed_parts(sdir)
    if #parts > 0 then
      local note = ("seed part(s) for seed(s) %s in %s/: the other seeds alone with --shard seed=S")
        :format(table.concat(parts, ", "), sdir)
      row.note = row.note and (row.note .. "; " .. note) or note
    end
    out.seconds = out.seconds + row.seconds
    out.rows[#out.rows + 1] = row
  end
  return out
end

local function hms(s)
  s = math.floor(s + 0.5)
  return ("%d:%02d:%02d"):format(s // 3600, (s % 3600) // 60, s % 60)
end
M.hms = hms

function M.text(b)
  local lines = { "budget (estimate before the run: FLOP cost model / measured throughput "
    .. (b.flops_per_s and ("%.1f GFLOP/s"):format(b.flops_per_s / 1e9) or "(nothing to run)")
    .. "; cached stages and complete runs cost nothing):",
    ("  %-22s %5s %9s %13s %15s %9s"):format("experiment", "runs", "complete", "bases cached",
      "members cached", "estimate") }
  for _, r in ipairs(b.rows) do
    lines[#lines + 1] = ("  %-22s %5d %9d %6d of %-6d %6d of %-6d %9s%s"):format(r.name,
      r.points, r.complete, r.bases_cached, r.bases, r.members_cached or 0, r.members or 0,
      hms(r.seconds), r.note and ("  (" .. r.note .. ")") or "")
  end
  lines[#lines + 1] = ("  %-22s %63s"):format("total", hms(b.seconds))
  return table.concat(lines, "\n")
end

return M
