-- lua/hydra/diagnostics.lua: what a Hydra (Circ) run records about its members, to explain a
-- seed whose ensemble collapses (results/README.md, "Circuit diagnostics").
--
--   diagnostics.circuit(ctx, pruned, result_file, sets) -> diag
--       ctx: the method's build context; pruned: the predictor's .pruned (methods/common.lua:
--       base_path, gates, member_paths, member_keys, objectives); result_file: the method's
--       `hydra eval` result (per-sample scores and member_probs); sets: common.sets(cfg).
--       diag = { attrs = { [group] = { k = v } }, data = { [path] = Tensor }, curves = {...} },
--       paths relative to /methods/<method>/diagnostics (hydra.run writes them).
--   diagnostics.study(runs [, method]) -> rows, summary
--       the diagnostics of every run (report_sweep.collect's runs) that holds `method`
--       (default "hydra_circ") with diagnostics and the Single: one row per run, sorted by
--       seed, and what links the ensemble's OOD AUROC to its base and its search (Pearson r).
--   diagnostics.markdown(rows, summary, method) -> the text of report/circuits.md
local core = require("hydra.core")
local fs = require("hydra.fs")
local h5 = require("hydra.h5")

local M = {}

-- MSP scores of a single model on a dataset
local function msp(model, ds, B)
  local p = model:predict(ds, nil, { batch_size = B })
  return core.metrics_score("msp", p.probs)
end

local function mean_of(list)
  local s = 0
  for _, v in ipairs(list) do s = s + v end
  return #list > 0 and s / #list or 0 / 0
end

function M.circuit(ctx, pruned, result_file, sets)
  local cfg = ctx.cfg
  local common = require("hydra.methods.common")
  local model = require("hydra.model")
  local B = cfg.train.eval_batch_size
  local gates = pruned.gates
  local Mm = gates:size(1)
  local diag = { attrs = { [""] = {} }, data = {} }
  local top = diag.attrs[""]
  -- the circuits and their overlap
  local J, jmean = core.metrics_jaccard(gates)
  diag.data.gates, diag.data.overlap = gates, J
  top.members, top.overlap_mean = Mm, jmean
  top.objectives = table.concat(pruned.objectives or {}, ",")
  top.gates_stage = pruned.gates_key
  top.member_stages = table.concat(pruned.member_keys, ",")
  local curves = {}
  for m = 1, Mm do curves[m] = "/curves/member-" .. pruned.member_keys[m]:sub(1, 12) end
  diag.curves = curves
  -- member disagreement and mutual information on ID and every OOD set (means of the result's
  -- per-sample scores), each member's own MSP AUROC on every OOD set (from /member_probs)
  local f <close> = h5.open(result_file)
  local oods = fs.split_list(f:attrs("/").ood_sets)
  local function means(prefix, name)
    local a = {}
    for _, sc in ipairs({ "disagreement", "mi" }) do
      local p = prefix .. "/scores/" .. sc
      if f:exists(p) then a[sc] = core.metrics_mean(f:read(p, "float64")) end
    end
    diag.attrs["sets/" .. name] = a
  end
  means("/id", "id")
  -- one member's softmaxes [N,C] on a set (a one-member model's result has only /probs)
  local function member_probs(prefix, m)
    if f:exists(prefix .. "/member_probs") then
      return f:read(prefix .. "/member_probs", "float32"):row(m)
    end
    return f:read(prefix .. "/probs", "float32")
  end
  local member_id = {}
  for m = 1, Mm do member_id[m] = core.metrics_score("msp", member_probs("/id", m)) end
  local auroc = core.tensor("float64", Mm, math.max(#oods, 1))
  local member_avg = core.tensor("float64", Mm)
  for si, name in ipairs(oods) do
    means("/ood/" .. name, name)
    for m = 1, Mm do
      local sc = core.metrics_score("msp", member_probs("/ood/" .. name, m))
      auroc:set(m, si, core.metrics_ood(member_id[m], sc).auroc)
    end
  end
  for m = 1, Mm do
    local row = {}
    for si = 1, #oods do row[si] = auroc:get(m, si) end
    member_avg:set(m, mean_of(row))
  end
  if #oods > 0 then
    diag.data.member_ood_auroc, diag.data.member_ood_avg_auroc = auroc, member_avg
    top.ood_sets = table.concat(oods, ",")
  end
  -- the search's objective data against the test sets: each member's circuit on the base model
  -- (before fine-tuning, as the search scored it) and the fine-tuned member, MSP AUROC on the
  -- validation rows (prune.val_size of the ID val split and of data.ood_val) and on the test sets
  if cfg.data.ood_val and #oods > 0 then
    local base = model.load(pruned.base_path)
    local vid, vood = require("hydra.prune").validation(base, cfg)
    local norm = base.norm
    local test = {}
    for _, s in ipairs(sets) do
      if s.role == "id" or s.role == "ood" then test[s.name] = common.dataset(s, norm) end
    end
    local id_name = sets[1].name
    local val_base, val_member = core.tensor("float64", Mm), core.tensor("float64", Mm)
    local test_base = core.tensor("float64", Mm, #oods)
    local test_base_avg = core.tensor("float64", Mm)
    for m = 1, Mm do
      base:set_gates(gates:row(m))
      local sid = msp(base, vid, B)
      val_base:set(m, core.metrics_ood(sid, msp(base, vood, B)).auroc)
      local tid = msp(base, test[id_name], B)
      local row = {}
      for si, name in ipairs(oods) do
        row[si] = core.metrics_ood(tid, msp(base, test[name], B)).auroc
        test_base:set(m, si, row[si])
      end
      test_base_avg:set(m, mean_of(row))
      local mem = model.load(pruned.member_paths[m])
      val_member:set(m, core.metrics_ood(msp(mem, vid, B), msp(mem, vood, B)).auroc)
      mem:close()
    end
    base:close()
    diag.data.search_val_auroc, diag.data.search_test_auroc = val_base, test_base
    diag.data.search_test_ood_avg_auroc, diag.data.member_val_auroc = test_base_avg, val_member
    top.ood_val = cfg.data.ood_val
    top.val_rows = vid:size()
  end
  return diag
end

-- ===== the study over seeds (report/circuits.md) =====

local function pearson(x, y)
  local n = #x
  if n < 3 then return nil end
  local mx, my = mean_of(x), mean_of(y)
  local sxy, sxx, syy = 0, 0, 0
  for i = 1, n do
    sxy = sxy + (x[i] - mx) * (y[i] - my)
    sxx = sxx + (x[i] - mx) ^ 2
    syy = syy + (y[i] - my) ^ 2
  end
  if sxx == 0 or syy == 0 then return nil end
  return sxy / math.sqrt(sxx * syy)
end
M.pearson = pearson

local function vec(f, path)
  if not f:exists(path) then return nil end
  local t, out = f:read(path, "float64"), {}
  for i = 1, t:size(1) do out[i] = t:get(i) end
  return out
end

-- the methods whose diagnostics report_sweep.write studies (report/circuits_<method>.md)
M.STUDIED = { "hydra_circ", "hydra_circ_restarts" }

function M.study(runs, method)
  method = method or "hydra_circ"
  local rows = {}
  for _, r in ipairs(runs) do
    local f <close> = h5.open(r.dir .. "/result.h5")
    local g = "/methods/" .. method
    if f:exists(g .. "/diagnostics") and f:exists("/methods/single/metrics") then
      local top = f:attrs(g .. "/diagnostics")
      local row = { seed = tonumber(r.flat and r.flat.seed) or 0, dir = r.dir,
                    single = f:attrs("/methods/single/metrics").ood_avg_auroc,
                    ensemble = f:attrs(g .. "/metrics").ood_avg_auroc,
                    overlap = top.overlap_mean,
                    objectives = fs.split_list(top.objectives or ""),
                    search_val = vec(f, g .. "/diagnostics/search_val_auroc"),
                    search_test = vec(f, g .. "/diagnostics/search_test_ood_avg_auroc"),
                    member_val = vec(f, g .. "/diagnostics/member_val_auroc"),
                    member_test = vec(f, g .. "/diagnostics/member_ood_avg_auroc") }
      local oods = fs.split_list(top.ood_sets or "")
      local function set_means(names)
        local d, mi = {}, {}
        for _, n in ipairs(names) do
          local a = f:exists(g .. "/diagnostics/sets/" .. n) and f:attrs(g .. "/diagnostics/sets/" .. n) or {}
          d[#d + 1], mi[#mi + 1] = a.disagreement, a.mi
        end
        return mean_of(d), mean_of(mi)
      end
      row.id_disagreement, row.id_mi = set_means({ "id" })
      row.ood_disagreement, row.ood_mi = set_means(oods)
      row.delta = row.ensemble - row.single
      -- the search's largest optimism: validation AUROC minus test AUROC of a circuit
      if row.search_val and row.search_test then
        local gap = -math.huge
        for m = 1, #row.search_val do gap = math.max(gap, row.search_val[m] - row.search_test[m]) end
        row.max_gap = gap
      end
      rows[#rows + 1] = row
    end
  end
  table.sort(rows, function(a, b) return a.seed < b.seed end)
  local function col(k)
    local out = {}
    for _, row in ipairs(rows) do
      if row[k] == nil then return {} end
      out[#out + 1] = row[k]
    end
    return out
  end
  -- every circuit of every seed: does the search's validation AUROC rank circuits as the test
  -- sets do?
  local cv, ct = {}, {}
  for _, row in ipairs(rows) do
    for m = 1, row.search_val and row.search_test and #row.search_val or 0 do
      cv[#cv + 1], ct[#ct + 1] = row.search_val[m], row.search_test[m]
    end
  end
  local summary = { n = #rows, circuits = #cv, r_circuit_val_test = pearson(cv, ct),
    r_ensemble_single = pearson(col("single"), col("ensemble")),
    r_delta_gap = pearson(col("max_gap"), col("delta")),
    r_ensemble_gap = pearson(col("max_gap"), col("ensemble")),
    r_ensemble_ood_disagreement = pearson(col("ood_disagreement"), col("ensemble")) }
  return rows, summary
end

local function pts(v) return v == nil and "–" or ("%.2f"):format(100 * v) end
local function list_pts(t)
  if not t then return "–" end
  local out = {}
  for i, v in ipairs(t) do out[i] = pts(v) end
  return table.concat(out, " / ")
end
-- r with its two-sided p (t = r sqrt(n - 2) / sqrt(1 - r^2), n - 2 degrees of freedom)
local function r_text(r, n)
  if not r then return "– (fewer than 3 seeds)" end
  local verdict = require("hydra.verdict")
  local p = math.abs(r) < 1 and verdict.t_two_sided(r * math.sqrt(n - 2) / math.sqrt(1 - r * r), n - 2) or 0
  return ("%.2f (%s)"):format(r, verdict.p_text(p))
end

function M.markdown(rows, summary, method)
  method = method or "hydra_circ"
  local L = { ("# Circuit diagnostics of `%s` over seeds"):format(method), "",
    "*OOD avg AUROC (MSP, percent) of the Single and of the ensemble on the test sets; per "
    .. "circuit (in the order of the objectives): the MSP AUROC on the search's validation rows "
    .. "(ID val + `data.ood_val`, the rows the search scored) and on the test OOD sets (avg), "
    .. "both of the base model with that circuit's gates before fine-tuning, then the same for "
    .. "the fine-tuned member; gap = the largest validation − test difference of a circuit; "
    .. "overlap = mean Jaccard of the kept heads over member pairs; disagreement / MI = mean over "
    .. "the ID test set and over the OOD sets. Written by hydra.diagnostics.study from each "
    .. "run's /methods/" .. method .. "/diagnostics.*", "",
    "| seed | Single | ensemble | Δ | circuits (objectives) | search val | search test | "
    .. "member val | member test | gap | overlap | disagr. ID / OOD | MI ID / OOD |",
    "|---:|---:|---:|---:|---|---|---|---|---|---:|---:|---|---|" }
  for _, r in ipairs(rows) do
    L[#L + 1] = ("| %d | %s | %s | %+.2f | %s | %s | %s | %s | %s | %s | %.2f | %.3f / %.3f | %.3f / %.3f |")
      :format(r.seed, pts(r.single), pts(r.ensemble), 100 * r.delta,
        require("hydra.report").md_escape(table.concat(r.objectives, ", ")), list_pts(r.search_val), list_pts(r.search_test),
        list_pts(r.member_val), list_pts(r.member_test), pts(r.max_gap), r.overlap or 0 / 0,
        r.id_disagreement, r.ood_disagreement, r.id_mi, r.ood_mi)
  end
  L[#L + 1] = ""
  L[#L + 1] = ("Over %d seeds, Pearson r: ensemble with its Single %s; Δ (ensemble − Single) "
    .. "with the search gap %s; ensemble with the search gap %s; ensemble with OOD "
    .. "disagreement %s."):format(summary.n, r_text(summary.r_ensemble_single, summary.n),
    r_text(summary.r_delta_gap, summary.n), r_text(summary.r_ensemble_gap, summary.n),
    r_text(summary.r_ensemble_ood_disagreement, summary.n))
  L[#L + 1] = ""
  L[#L + 1] = ("Over the %d circuits of those seeds, Pearson r of a circuit's search-validation "
    .. "AUROC with its test AUROC (before fine-tuning): %s."):format(summary.circuits,
    r_text(summary.r_circuit_val_test, summary.circuits))
  return table.concat(L, "\n") .. "\n"
end

return M
