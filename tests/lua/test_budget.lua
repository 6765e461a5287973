-- tests/lua/test_budget.lua: the budget `hydra repro` prints before it starts
-- (lua/hydra/budget.lua): a run still to do costs its stages, a cached base model and a complete
-- run cost nothing.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local budget = require("hydra.budget")
local eq, ok = check.eq, check.ok

local T = {}

function T.budget_counts_what_is_not_cached()
  local root, d = check.tiny_world()
  core.mkdir_p(root .. "/sweeps")
  check.write_file(root .. "/base.yaml", ([[
include: %s/configs/data/tiny.yaml
experiment: tinyb
methods: [single, deep_ensemble]
results_dir: %s/results
data: {dir: %s, ood: [tinyood], shift: [], test_subset: 0}
model: {d_model: 16, n_heads: 4, depth: 2, d_mlp: 32}
train: {epochs: 1, batch_size: 32, eval_batch_size: 32}
deep_ensemble: {members: 2}
threads: 1
]]):format(rawget(_G, "HYDRA_HOME") or ".", root, d))
  check.write_file(root .. "/sweeps/tinyb.yaml", "base: ../base.yaml\nseeds: 2\n")
  -- a fixed throughput: the estimates are FLOPs / 1e9 seconds, comparable across calls
  local opts = { sweep_dir = root .. "/sweeps", cache_dir = root .. "/cache", flops_per_s = 1e9 }
  local b = budget.estimate({ "tinyb" }, nil, opts)
  local r = b.rows[1]
  eq(r.points, 2, "two seeds")
  eq(r.complete, 0, "nothing complete")
  -- seed 0: Single = DE member 1 (base 0) and base 1; seed 1: base 1 (Single), bases 2, 3
  eq(r.bases, 6, "base models asked for")
  eq(r.bases_cached, 0, "none cached")
  ok(r.seconds > 0 and b.seconds == r.seconds, "an estimate")
  ok(budget.text(b):find("tinyb", 1, true) ~= nil, "the table names the experiment")
  -- run seed 0: its run is complete and its bases are cached
  local sw = hydra.sweep.load(root .. "/sweeps/tinyb.yaml")
  hydra.run.execute(sw.points[1].cfg, { quiet = true, cache_dir = root .. "/cache",
                                        progress = false })
  core.threads_init(0)
  local b2 = budget.estimate({ "tinyb" }, nil, opts)
  local r2 = b2.rows[1]
  eq(r2.complete, 1, "seed 0 complete")
  eq(r2.bases, 3, "only seed 1's bases are asked for")
  eq(r2.bases_cached, 1, "base 1 was trained by seed 0's Deep Ensemble")
  ok(r2.seconds < r.seconds, "less to do")
  -- the measured throughput: a timed forward pass
  ok(budget.throughput(sw.points[1].cfg) > 0, "measured FLOP/s")
  -- an experiment whose script runs a second sweep (table_training_free's text half) counts
  -- both in its row
  check.write_file(root .. "/sweeps/tinyb_more.yaml", "base: ../base.yaml\nseeds: 2\n"
    .. "set: {seed: 5}\n")
  budget.MORE_SWEEPS.tinyb = { "tinyb_more" }
  local ok3, b3 = pcall(budget.estimate, { "tinyb" }, nil, opts)
  budget.MORE_SWEEPS.tinyb = nil
  ok(ok3, ok3 or check.message(b3))
  eq(b3.rows[1].points, 4, "both sweeps' points")
  ok(b3.rows[1].seconds > r2.seconds, "the second sweep's runs counted")
  -- a committed seed part is named, so the other seeds can be run alone
  opts.summaries = root .. "/paper"
  eq(budget.estimate({ "tinyb" }, nil, opts).rows[1].note, nil, "no part, no note")
  core.mkdir_p(root .. "/paper/tinyb/seed-1")
  local n = budget.estimate({ "tinyb" }, nil, opts).rows[1].note
  eq(n, "seed part(s) for seed(s) 1 in " .. root .. "/paper/tinyb/: the other seeds alone with "
    .. "--shard seed=S", "the part named")
end

return T
