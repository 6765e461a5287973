-- tests/lua/test_diagnostics.lua: the circuit diagnostics a Hydra (Circ) run writes into its
-- result.h5 (lua/hydra/diagnostics.lua; results/README.md, "Circuit diagnostics"), on a tiny
-- synthetic run, each number recomputed by another path.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local eq, ok, near = check.eq, check.ok, check.near

local T = {}

local function tiny_run(methods, members, seed, world)
  local root, d = world and world.root, world and world.d
  if not root then root, d = check.tiny_world({
    tinyood2 = { train = 8, val = 8, test = 20, seed = 7, classes = 3 },
    tinyoodval = { train = 8, val = 24, test = 8, seed = 6, classes = 3 },
  }) end
  local cfg = hydra.config.load("configs/data/tiny.yaml", {
    ["data.dir"] = d, ["data.test_subset"] = "0",
    ["data.ood"] = "{near: [tinyood], far: [tinyood2]}",
    ["data.ood_val"] = "tinyoodval", ["data.shift"] = "[]", results_dir = root .. "/results",
    experiment = "diag", seed = seed or "1", threads = "1", methods = methods,
    ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["train.epochs"] = "1", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32", ["hydra.keep_heads"] = "2", ["hydra.members"] = members or "3",
  })
  local s = hydra.run.execute(cfg, { quiet = true, cache_dir = root .. "/cache",
                                     progress = false })
  core.threads_init(0)
  return s, cfg, root
end

function T.hydra_circ_writes_its_circuit_diagnostics()
  local s, cfg, root = tiny_run("[single, hydra_circ]")
  local f <close> = hydra.h5.open(s.result)
  local g = "/methods/hydra_circ/diagnostics"
  ok(f:exists(g), "diagnostics group")
  ok(not f:exists("/methods/single/diagnostics"), "only Hydra (Circ) has them")
  local a = f:attrs(g)
  eq(a.members, 3, "members")
  eq(a.ood_sets, "tinyood,tinyood2", "OOD sets, near first")
  eq(a.ood_val, "tinyoodval", "the search's OOD validation set")
  -- the circuits: the gates stage's tensor; overlap = the Jaccard of its kept-head sets
  local gates = f:read(g .. "/gates")
  check.same(gates:shape(), { 3, 2, 4 }, "gates [M, L, H]")
  local J, jm = core.metrics_jaccard(gates)
  check.same(f:read(g .. "/overlap"):totable(), J:totable(), "overlap")
  eq(a.overlap_mean, jm, "mean overlap")
  eq(#hydra.fs.split_list(a.member_stages), 3, "member stage keys")
  -- disagreement / MI means: the result's per-sample scores
  for _, set in ipairs({ "id", "tinyood", "tinyood2" }) do
    local pre = set == "id" and "/methods/hydra_circ/id" or ("/methods/hydra_circ/ood/" .. set)
    local sa = f:attrs(g .. "/sets/" .. set)
    near(sa.disagreement, core.metrics_mean(f:read(pre .. "/scores/disagreement", "float64")),
      1e-15, set .. " disagreement")
    near(sa.mi, core.metrics_mean(f:read(pre .. "/scores/mi", "float64")), 1e-15, set .. " mi")
  end
  -- each member's AUROC: its own MSP from /member_probs, AUROC by the Mann-Whitney count
  local mid = f:read("/methods/hydra_circ/id/member_probs"):totable()
  local mood = f:read("/methods/hydra_circ/ood/tinyood2/member_probs"):totable()
  local au = f:read(g .. "/member_ood_auroc")
  for m = 1, 3 do
    local function s_of(rows)
      local out = {}
      for i, p in ipairs(rows) do
        local mx = -1
        for _, v in ipairs(p) do if v > mx then mx = v end end
        out[i] = -mx
      end
      return out
    end
    local s0, s1 = s_of(mid[m]), s_of(mood[m])
    local u = 0
    for _, x in ipairs(s1) do
      for _, y in ipairs(s0) do u = u + (x > y and 1 or x == y and 0.5 or 0) end
    end
    near(au:get(m, 2), u / (#s0 * #s1), 1e-12, "member " .. m .. " AUROC on tinyood2")
    near(f:read(g .. "/member_ood_avg_auroc"):get(m), (au:get(m, 1) + au:get(m, 2)) / 2, 1e-15,
      "member avg")
  end
  -- the search's validation AUROC: the core objective of the base model with the member's gates
  local bases = {}
  for _, e in ipairs(core.listdir(root .. "/cache/base")) do
    if e:match("%.h5$") then bases[#bases + 1] = e end
  end
  eq(#bases, 1, "one base model (Single and Hydra (Circ) share it)")
  local base = hydra.model.load(root .. "/cache/base/" .. bases[1])
  local vid, vood = require("hydra.prune").validation(base, cfg)
  local sv = f:read(g .. "/search_val_auroc")
  for m = 1, 3 do
    base:set_gates(gates:row(m))
    local _, auc = core.prune_objective(base.ud, vid, vood, 8)
    near(sv:get(m), auc, 1e-12, "member " .. m .. ": the search's objective AUROC")
  end
  check.same(f:read(g .. "/search_test_auroc"):shape(), { 3, 2 }, "test AUROC per set")
  check.same(f:read(g .. "/member_val_auroc"):shape(), { 3 }, "fine-tuned members on val")
  -- pointers to the members' fine-tuning curves, each a /curves group of the file
  local cs = hydra.fs.split_list(a.curves)
  eq(#cs, 3, "a curve per member")
  for _, c in ipairs(cs) do ok(f:exists(c .. "/loss"), c) end
end

-- one member: the result has no /member_probs (the fused model's /probs is the member's)
function T.one_member_has_its_diagnostics()
  local s = tiny_run("[hydra_circ]", "1")
  local f <close> = hydra.h5.open(s.result)
  local g = "/methods/hydra_circ/diagnostics"
  check.same(f:read(g .. "/gates"):shape(), { 1, 2, 4 }, "one circuit")
  local sid = core.metrics_score("msp", f:read("/methods/hydra_circ/id/probs"))
  local so = core.metrics_score("msp", f:read("/methods/hydra_circ/ood/tinyood/probs"))
  eq(f:read(g .. "/member_ood_auroc"):get(1, 1), core.metrics_ood(sid, so).auroc,
    "the member's AUROC = the model's")
end

-- the study over seeds: report_sweep.write puts report/circuits_hydra_circ.md beside table.md,
-- a row per seed whose numbers are the runs' own
function T.study_over_seeds_is_written_with_the_report()
  local s1, _, root = tiny_run("[single, hydra_circ]", "2", "1")
  local world = { root = root, d = root .. "/data" }   -- the same data for every seed
  ok(s1.result, "seed 1 ran")
  for _, seed in ipairs({ "2", "3" }) do tiny_run("[single, hydra_circ]", "2", seed, world) end
  local rs = require("hydra.report_sweep")
  local out = rs.write(root .. "/results/diag", { plots = false })
  eq(#out.circuits, 1, "one study: hydra_circ")
  local text = assert(io.open(out.circuits[1], "rb")):read("a")
  local runs = rs.collect(root .. "/results/diag")
  local rows, summary = hydra.diagnostics.study(runs)
  eq(#rows, 3, "a row per seed")
  eq(summary.n, 3, "n")
  for i, r in ipairs(rows) do
    eq(r.seed, i, "sorted by seed")
    local f <close> = hydra.h5.open(r.dir .. "/result.h5")
    eq(r.single, f:attrs("/methods/single/metrics").ood_avg_auroc, "Single's OOD avg AUROC")
    eq(r.ensemble, f:attrs("/methods/hydra_circ/metrics").ood_avg_auroc, "ensemble's")
    local v = f:read("/methods/hydra_circ/diagnostics/search_val_auroc", "float64")
    local t = f:read("/methods/hydra_circ/diagnostics/search_test_ood_avg_auroc", "float64")
    eq(r.max_gap, math.max(v:get(1) - t:get(1), v:get(2) - t:get(2)), "largest val - test gap")
    ok(text:find(("| %d | %.2f | %.2f |"):format(i, 100 * r.single, 100 * r.ensemble), 1, true),
      "row " .. i .. " in circuits_hydra_circ.md")
  end
  local r = summary.r_ensemble_single
  local pt = hydra.verdict.t_two_sided(r * math.sqrt(1) / math.sqrt(1 - r * r), 1)
  ok(text:find(("Over 3 seeds, Pearson r: ensemble with its Single %.2f (%s)")
    :format(r, hydra.verdict.p_text(pt)), 1, true), "r and its p (1 degree of freedom)")
  local cv, ct = {}, {}
  for _, r in ipairs(rows) do
    for m = 1, 2 do cv[#cv + 1], ct[#ct + 1] = r.search_val[m], r.search_test[m] end
  end
  eq(summary.circuits, 6, "3 seeds x 2 circuits")
  eq(summary.r_circuit_val_test, hydra.diagnostics.pearson(cv, ct), "validation vs test over circuits")
  -- Pearson r against a hand computation: x = 1, 2, 3, 4; y = 2, 4, 5, 9
  -- (mx 2.5, my 5; sxy 11, sxx 5, syy 26: r = 11 / sqrt(130))
  near(hydra.diagnostics.pearson({ 1, 2, 3, 4 }, { 2, 4, 5, 9 }), 11 / math.sqrt(130), 1e-15, "r")
  eq(hydra.diagnostics.pearson({ 1, 2 }, { 1, 2 }), nil, "r needs 3 points")
end

return T
