-- experiments/ablation_condition.lua: when does Hydra (Circ) reach Deep Ensembles? (ours; the
-- condition under which the paper's headline would hold in our setting).
--
-- Methods. Deep Ensembles (3 independently trained models) and Hydra (Circ) (3 members pruned
-- from the first of them, profile sizes) on every point of configs/sweeps/ablation_condition.yaml:
-- the profile's reference, then one axis at a time: heads per layer at the same width (8 -> 16,
-- keeping half), width (8 heads; d_mlp = 4 d), base training length (-> 12 epochs),
-- augmentation (random crop + flip), the circuit search's OOD validation data (leave-one-out:
-- ood-val-<X> = X's first 1,000 test images, X left out of the point's test sets; compared with
-- the reference's ood-val-image search scored on the same three test sets, so that only the
-- validation data differs), and members M = 1..6 (Deep Ensembles stay at 3). The gap =
-- Hydra (Circ) minus Deep Ensembles in OOD-avg AUROC (MSP), near / far AUROC and accuracy,
-- mean ± std over seeds (the gap is formed per seed). Every stage is shared through the cache:
-- the M and leave-one-out points reuse the reference's base models, and members are keyed by
-- their gate row, so M = 1..6 fine-tunes 6 members.
-- Writes results/ablation_condition/report/ (the sweep's tables and plots) and
-- report/condition.md + plots/gap-vs-<axis>.png.
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
local e = hydra.experiment.run("ablation_condition", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

local sw = e.sweep
local by_id = {}
for _, r in ipairs(e.runs) do by_id[r.id] = r end

local function result(run, method)
  for _, res in ipairs(run.loaded.results) do
    if res.name == method then return res end
  end
  hydra.fail("ablation_condition: run %s has no %s result", run.id, method)
end

-- the OOD-set names of a run, its mean AUROC over a list of set names
local function set_auroc(res, names)
  local s, n = 0, 0
  for _, o in ipairs(res.ood) do
    for _, want in ipairs(names) do
      if o.name == want then s = s + o.auroc; n = n + 1 end
    end
  end
  if n ~= #names then
    hydra.fail("ablation_condition: a result lacks OOD sets %s", table.concat(names, ", "))
  end
  return s / n
end

-- settings (point labels without the seed) in sweep order, each with its runs per seed
local settings, by_label = {}, {}
for _, pt in ipairs(sw.points) do
  local label = pt.label:gsub("%s*seed=%d+", "")
  if label == "" then label = "reference" end
  if not by_label[label] then
    by_label[label] = { label = label, cfg = pt.cfg, runs = {}, overrides = pt.overrides }
    settings[#settings + 1] = by_label[label]
  end
  by_label[label].runs[pt.cfg.seed] = assert(by_id[pt.id], "run " .. pt.id)
end
local ref = settings[1]

local function axis_of(s)
  local c, r = s.cfg, ref.cfg
  if s == ref then return "reference", "ref" end
  if c.model.n_heads ~= r.model.n_heads then return "heads", c.model.n_heads end
  if c.model.d_model ~= r.model.d_model then return "width", c.model.d_model end
  if c.train.epochs ~= r.train.epochs then return "epochs", c.train.epochs end
  if c.train.augment.random_crop ~= r.train.augment.random_crop then return "augment", "on" end
  if c.data.ood_val ~= r.data.ood_val then return "ood_val", c.data.ood_val end
  if c.hydra.members ~= r.hydra.members then return "members", c.hydra.members end
  hydra.fail("ablation_condition: point '%s' changes no known axis", s.label)
end

local function mean_std(xs)
  local n, sum = #xs, 0
  for _, x in ipairs(xs) do sum = sum + x end
  local m = sum / n
  if n < 2 then return m, nil end
  local v = 0
  for _, x in ipairs(xs) do v = v + (x - m) ^ 2 end
  return m, math.sqrt(v / (n - 1))
end

-- per setting: gaps per seed (hydra_circ - deep_ensemble), and the values of each method
local QUANT = { "auroc", "near", "far", "acc", "auroc_same_sets" }
local rows = {}
for _, s in ipairs(settings) do
  local axis, value = axis_of(s)
  local vals = {}
  for _, q in ipairs(QUANT) do vals[q] = { gap = {}, hc = {}, de = {} } end
  for seed, run in pairs(s.runs) do
    local hc, de = result(run, "hydra_circ"), result(run, "deep_ensemble")
    local function put(q, a, b)
      table.insert(vals[q].hc, a); table.insert(vals[q].de, b); table.insert(vals[q].gap, a - b)
    end
    put("auroc", hc.ood_avg.auroc, de.ood_avg.auroc)
    put("near", hc.ood_near.auroc, de.ood_near.auroc)
    put("far", hc.ood_far.auroc, de.ood_far.auroc)
    put("acc", hc.metrics.acc, de.metrics.acc)
    -- the reference's ood-val-image search on this point's test sets (leave-one-out points)
    if axis == "ood_val" then
      local names = {}
      for _, o in ipairs(hc.ood) do names[#names + 1] = o.name end
      local rr = ref.runs[seed]
      vals.loo_sets = names
      if rr then
        local rh = set_auroc(result(rr, "hydra_circ"), names)
        put("auroc_same_sets", rh, set_auroc(result(rr, "deep_ensemble"), names))
      end
    end
  end
  rows[#rows + 1] = { s = s, axis = axis, value = value, vals = vals, seeds = #vals.auroc.gap }
end

local function pct(m, sd)
  if m == nil then return "–" end
  if sd then return ("%+.2f ± %.2f"):format(100 * m, 100 * sd) end
  return ("%+.2f"):format(100 * m)
end
local function pct0(m, sd)
  if m == nil then return "–" end
  if sd then return ("%.2f ± %.2f"):format(100 * m, 100 * sd) end
  return ("%.2f"):format(100 * m)
end
local function ms(list) if #list == 0 then return nil end return mean_std(list) end

local md = {}
local function line(x) md[#md + 1] = x end
line(("# When does Hydra (Circ) reach Deep Ensembles? (profile %s, %d seed(s))"):format(
  ref.cfg.profile, rows[1].seeds))
line("")
line("Gap = Hydra (Circ) − Deep Ensembles in percentage points (OOD score MSP; OOD avg = mean "
  .. "over the point's OOD test sets; near / far = group means; mean ± std over seeds of the "
  .. "per-seed gap). Leave-one-out rows: \"ref, same sets\" = the reference's ood-val-image "
  .. "search evaluated on that row's three test sets; \"search vs ref\" = Hydra (Circ)'s OOD "
  .. "avg AUROC with this row's search minus the reference's search on the same three sets, "
  .. "by the rule (results/README.md, \"Verdicts\": paired over seeds and a paired bootstrap "
  .. "over the test samples; claim: this row's search higher).")
line("")
line("| axis | setting | Hydra (Circ) OOD avg AUROC | Deep Ensembles OOD avg AUROC | gap OOD avg "
  .. "| gap near | gap far | gap Acc | gap OOD avg, ref on the same sets "
  .. "| search vs ref, same sets |")
line("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
local AXIS_KEYS = { "model.n_heads", "model.d_model", "train.epochs", "train.augment.random_crop",
                    "data.ood_val", "hydra.members" }
local ref_filter = {}
for _, k in ipairs(AXIS_KEYS) do ref_filter[k] = hydra.config.get(ref.cfg, k) end
for _, r in ipairs(rows) do
  local v = r.vals
  local sv = "–"
  if v.loo_sets then
    -- this point's search on its three sets against the reference's on the same sets
    local a = { method = "hydra_circ", ["data.ood_val"] = r.s.cfg.data.ood_val }
    local b = { method = "hydra_circ" }
    for k, x in pairs(ref_filter) do b[k] = x end
    local c = hydra.verdict.compare(e.runs, a, b, { a = "ood_avg_auroc",
      b = "ood{" .. table.concat(v.loo_sets, ",") .. "}/auroc" }, "higher")
    if c then sv = c.text end
  end
  line(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(r.axis, r.s.label,
    pct0(ms(v.auroc.hc)), pct0(ms(v.auroc.de)), pct(ms(v.auroc.gap)), pct(ms(v.near.gap)),
    pct(ms(v.far.gap)), pct(ms(v.acc.gap)), pct(ms(v.auroc_same_sets.gap)), sv))
end
-- Hydra (Circ) against Deep Ensembles at every setting, by the rule (hydra.verdict: paired over
-- seeds and a bootstrap over test samples); a setting is named by its overrides (the
-- reference by every axis's reference value); data.ood is implied by data.ood_val
line("")
line("Hydra (Circ) against Deep Ensembles at each setting, OOD avg AUROC, by the rule "
  .. "(results/README.md, \"Verdicts\"):")
line("")
for _, r in ipairs(rows) do
  local f = {}
  if r.s == ref then
    for k, x in pairs(ref_filter) do f[k] = x end
  else
    for _, o in ipairs(r.s.overrides or {}) do
      if o.key ~= "seed" and o.key ~= "data.ood" then f[o.key] = o.value end
    end
  end
  local a, b = { method = "hydra_circ", label = "Hydra (Circ)" },
    { method = "deep_ensemble", label = "Deep Ensembles" }
  for k, x in pairs(f) do a[k] = x; b[k] = x end
  local l = hydra.experiment.claim_line(e.runs, r.s.label, a, b, "ood_avg_auroc", "higher")
  if l then line("- " .. l) end
end

-- ===== plots: the gap against each axis =====
local plot = hydra.plot
local gp = plot.gp_str
local rdir = e.sweep.results_dir .. "/ablation_condition/report"
hydra.output.mkdir_p(rdir .. "/plots", "ablation_condition")
local AXES = {
  { "heads", "attention heads per layer (same width)", function(c) return c.model.n_heads end },
  { "width", "width d_model (8 heads, d_mlp = 4 d)", function(c) return c.model.d_model end },
  { "epochs", "base-model training epochs", function(c) return c.train.epochs end },
  { "augment", "augmentation (0 off, 1 crop + flip)",
    function(c) return c.train.augment.random_crop and 1 or 0 end },
  { "members", "Hydra members M", function(c) return c.hydra.members end },
}
local SER = { { "auroc", "OOD avg AUROC" }, { "near", "near AUROC" }, { "far", "far AUROC" },
              { "acc", "accuracy" } }
local plots = {}
for _, ax in ipairs(AXES) do
  local pts = {}
  for _, r in ipairs(rows) do
    if r.axis == ax[1] or r.axis == "reference" then pts[#pts + 1] = r end
  end
  table.sort(pts, function(a, b) return ax[3](a.s.cfg) < ax[3](b.s.cfg) end)
  if #pts >= 2 then
    local blocks, cmds = {}, {}
    for i, se in ipairs(SER) do
      local lines = { "# " .. se[2] }
      for _, r in ipairs(pts) do
        local m, sd = mean_std(r.vals[se[1]].gap)
        lines[#lines + 1] = ("%s %.6f %.6f"):format(tostring(ax[3](r.s.cfg)), 100 * m,
          100 * (sd or 0))
      end
      blocks[#blocks + 1] = table.concat(lines, "\n")
      cmds[#cmds + 1] = ("DAT index %d using 1:2:3 with yerrorlines lc %d lw 2 pt 7 title %s")
        :format(i - 1, i, gp("gap " .. se[2]))
    end
    local script = table.concat({
      ("set title %s"):format(gp("Hydra (Circ) - Deep Ensembles vs " .. ax[2]
        .. " (mean ± std over seeds)")),
      ("set xlabel %s"):format(gp(ax[2])),
      "set ylabel 'gap (percentage points)'",
      "set key outside below",
      "set grid",
      "set offsets 0.3, 0.3, 0, 0",
      "plot " .. table.concat(cmds, ", \\\n     ") .. ", 0 with lines lc 'black' dt 2 notitle",
    }, "\n")
    local png = rdir .. "/plots/gap-vs-" .. ax[1] .. ".png"
    plot.run(png, script, table.concat(blocks, "\n\n\n") .. "\n")
    plots[#plots + 1] = png
  end
end
-- the OOD validation axis is categorical: one bar group per search set
do
  local lines, labels = {}, {}
  local i = 0
  for _, r in ipairs(rows) do
    if r.axis == "ood_val" then
      i = i + 1
      local m, sd = mean_std(r.vals.auroc.gap)
      local m2, sd2 = mean_std(r.vals.auroc_same_sets.gap)
      lines[#lines + 1] = ("%d %.6f %.6f %.6f %.6f"):format(i, 100 * m, 100 * (sd or 0),
        100 * m2, 100 * (sd2 or 0))
      labels[#labels + 1] = ("%s %d"):format(gp(hydra.strings.printable(r.value)), i)
    end
  end
  if i > 0 then
    local script = table.concat({
      "set title 'OOD-avg AUROC gap: circuit search on one real OOD set (tested on the others)'",
      "set ylabel 'gap (percentage points)'",
      ("set xtics (%s)"):format(table.concat(labels, ", ")),
      "set xrange [0.5:" .. (i + 0.5) .. "]",
      "set key outside below",
      "set grid",
      "plot DAT using ($1-0.1):2:3 with yerrorbars lc 1 pt 7 title 'leave-one-out search', \\",
      "     DAT using ($1+0.1):4:5 with yerrorbars lc 2 pt 5 title 'ood-val-image search, same test sets', \\",
      "     0 with lines lc 'black' dt 2 notitle",
    }, "\n")
    local png = rdir .. "/plots/gap-vs-ood_val.png"
    plot.run(png, script, table.concat(lines, "\n") .. "\n")
    plots[#plots + 1] = png
  end
end
line("")
line("Plots: " .. table.concat(plots, ", "))
local text = table.concat(md, "\n") .. "\n"
hydra.output.write_text(rdir .. "/condition.md", text, "ablation_condition")
print("")
io.write(text)
print("report: " .. rdir .. "/condition.md, " .. e.report.markdown)
return 0
