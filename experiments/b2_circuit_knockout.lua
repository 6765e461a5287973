-- experiments/b2_circuit_knockout.lua: the paper's Appendix B.2 test, training-free: pruning the
-- uncertainty-circuit heads hurts more than pruning as many random or low-importance heads.
--
-- Methods. Per seed (configs/sweeps/b2_circuit_knockout.yaml: 3 seeds) the profile's base
-- model (the table_image Single's stage). Its uncertainty circuit: the circuit search with the
-- `ood` objective (prune.objective; MSP AUROC of prune.val_size ID val rows against the
-- validation OOD set data.ood_val), hydra.keep_heads = k heads per layer (the CircAvg-style
-- single-member gates stage). Four gate settings of the same weights, no gradient step:
--   none            every head (the base model);
--   circuit         the circuit's k heads of every layer knocked out (gate 0);
--   low_importance  the k heads of lowest Taylor importance in every layer knocked out (the
--                   Taylor gates stage keeping H - k heads);
--   random          k heads per layer drawn at random (core.sample_subset, seeded by the seed
--                   and the layer) knocked out.
-- Each is predicted on the ID test set and every OOD test set (the run's evaluation sets):
-- accuracy and MSP OOD AUROC / FPR95 (avg, near, far). The claim holds when circuit knockout
-- lowers OOD-avg AUROC more than each control, by the verdict rule (hydra.verdict: paired
-- t-test over seeds and paired bootstrap over the test samples). Writes
-- results/b2_circuit_knockout/report/{values.csv, bootstrap.csv, table.md}; on the paper
-- profile also results/paper/b2_circuit_knockout/ (the summary paper_repro.md's tables read).
local hydra = require("hydra")
local common = require("hydra.methods.common")
local paper = hydra.paper
local verdict = hydra.verdict
local core = hydra.core

local opts = hydra.experiment.script_options(...)
if not hydra.sweep.is_first(opts.shard) then
  print(("b2_circuit_knockout: run by the first shard only (0/n or seed=0; this is shard %s)")
    :format(hydra.sweep.shard_text(opts.shard)))
  return 0
end
local home = rawget(_G, "HYDRA_HOME") or "."
local sw = hydra.sweep.load(home .. "/configs/sweeps/b2_circuit_knockout.yaml", opts)
local cache = hydra.stages.new({ log = function(line) print("  " .. line) end })
local NAME = "b2_circuit_knockout"
local ROWS = { { "none", "No knockout (every head)" }, { "circuit", "Circuit heads knocked out" },
               { "low_importance", "Lowest-Taylor heads knocked out" },
               { "random", "Random heads knocked out" } }

-- gates [L,H] of a knockout: 1 everywhere but `off(l)` (a set of 1-based heads) in layer l
local function knockout(L, H, off)
  local g = {}
  for l = 1, L do
    local o = off(l)
    g[l] = {}
    for h = 1, H do g[l][h] = o[h] and 0 or 1 end
  end
  return core.from_table("float32", g)
end

local function heads_where(gates, l, value)
  local out = {}
  for h, v in ipairs(gates:row(1):row(l):totable()) do if v == value then out[h] = true end end
  return out
end

-- the samples verdict.metric reads, from the predictions of one gate setting
local function samples_of(model, sets, B)
  local s = { group = "(in memory)", score = "msp", sets = {}, ood = {}, id = { scores = {} } }
  for _, set in ipairs(sets) do
    local p = model:predict(common.dataset(set, model.norm), nil, { batch_size = B })
    local sc = core.metrics_score("msp", p.probs)
    if set.role == "id" then
      local conf, pred = core.metrics_predict(p.probs)
      s.id.conf, s.id.correct = conf, core.metrics_correct(pred, p.labels)
      s.id.nll = core.metrics_nll_probs(p.probs, p.labels)
      s.id.brier = core.metrics_brier(p.probs, p.labels)
      s.id.scores.msp = sc
    else
      s.sets[#s.sets + 1] = set.name
      s.ood[set.name] = { group = set.group or "far", scores = { msp = sc } }
    end
  end
  return s
end

local KEYS = { "acc", "ood_avg_auroc_msp", "ood_near_auroc_msp", "ood_far_auroc_msp",
               "ood_avg_fpr95_msp" }
local samples, values = {}, {}
for _, r in ipairs(ROWS) do samples[r[1]], values[r[1]] = {}, {} end
local t_all = core.now()
for _, pt in ipairs(sw.points) do
  local cfg = pt.cfg
  local seed = math.tointeger(cfg.seed)
  local t0 = core.now()
  local ctx = { cfg = cfg, cache = cache, progress = false,
                log = function(fmt, ...) print("  " .. fmt:format(...)) end }
  local base_path, base_key = common.base_model(ctx, seed, cfg.model.dropout)
  local base = hydra.model.load(base_path)
  local mc = base:config()
  local L, H, k = mc.depth, mc.n_heads, cfg.hydra.keep_heads
  if math.type(k) ~= "integer" or k < 1 or k >= H then
    hydra.fail("%s: hydra.keep_heads must be one number in [1, %d) (heads knocked out per "
      .. "layer), got %s", NAME, H, tostring(k))
  end
  local _, _, circ = common.gates(ctx, base_path, base_key,
    { method = "circuit", single = true, objective = cfg.prune.objective })
  local tcfg = hydra.config.copy(cfg)
  tcfg.hydra.keep_heads = H - k
  local _, _, tay = common.gates({ cfg = tcfg, cache = cache, progress = false, log = ctx.log },
    base_path, base_key, { method = "taylor", single = true })
  local gates = {
    none = knockout(L, H, function() return {} end),
    circuit = knockout(L, H, function(l) return heads_where(circ, l, 1) end),
    low_importance = knockout(L, H, function(l) return heads_where(tay, l, 0) end),
    random = knockout(L, H, function(l)
      local off = {}
      for _, h in ipairs(core.sample_subset(H, k, seed * 1000 + l):totable()) do
        off[h + 1] = true
      end
      return off
    end),
  }
  local sets = {}
  for _, s in ipairs(common.sets(cfg)) do
    if s.role == "id" or s.role == "ood" then sets[#sets + 1] = s end
  end
  for _, r in ipairs(ROWS) do
    base:set_gates(gates[r[1]])
    local s = samples_of(base, sets, cfg.train.eval_batch_size)
    samples[r[1]][seed] = s
    values[r[1]][seed] = {}
    for _, key in ipairs(KEYS) do values[r[1]][seed][key] = verdict.metric(s, key) end
  end
  base:close()
  print(("%s seed %d: OOD avg AUROC none %.2f, circuit %.2f, low-importance %.2f, random %.2f "
    .. "(%.1f s)"):format(NAME, seed, 100 * values.none[seed].ood_avg_auroc_msp,
    100 * values.circuit[seed].ood_avg_auroc_msp,
    100 * values.low_importance[seed].ood_avg_auroc_msp,
    100 * values.random[seed].ood_avg_auroc_msp, core.now() - t0))
end

-- the summary (hydra.paper's layout), the comparisons by the verdict rule, the table
local rows = {}
for i, r in ipairs(ROWS) do rows[i] = { id = r[1], label = r[2], values = values[r[1]] } end
local comps = paper.table(NAME .. ".verdicts").comparisons
local res = verdict.bootstrap_many(samples, comps)
local vtext = paper.values_csv(NAME, rows, KEYS)
local btext = paper.bootstrap_csv(NAME, comps, res)
local dirs = { sw.results_dir .. "/" .. NAME .. "/report" }
if sw.profile == "paper" then dirs[#dirs + 1] = sw.results_dir .. "/paper/" .. NAME end
local summary
for _, dir in ipairs(dirs) do
  hydra.output.mkdir_p(dir, NAME)
  hydra.report.write_text(dir .. "/values.csv", vtext)
  hydra.report.write_text(dir .. "/bootstrap.csv", btext)
  summary = summary or paper.read_summary(dir)
end
local md = {}
for _, t in ipairs({ NAME .. ".knockout", NAME .. ".verdicts" }) do
  md[#md + 1] = table.concat(paper.render(paper.table(t), summary, dirs[1] .. "/"), "\n")
end
local text = ("# Appendix B.2: circuit knockout (profile %s, %d seeds, %.1f s)\n\n%s\n")
  :format(sw.profile or "quick", #sw.points, core.now() - t_all, table.concat(md, "\n\n"))
hydra.report.write_text(dirs[1] .. "/table.md", text)
io.write(text)
print("report: " .. dirs[1] .. "/table.md")
return 0
