-- experiments/ablation_diversity.lua: which source of member diversity matters for Hydra (Circ).
--
-- Methods. Hydra (Circ), 3 members of 4 of 8 heads per layer (profile sizes). Five settings
-- (configs/sweeps/ablation_diversity.yaml), switching the sources one at a time:
--   none        every member searches the same `avg` circuit on the same validation data
--   bootstrap   each member on its own bootstrap resample of the validation data
--   objectives  member objectives acc / ood / avg
--   overlap     a head kept by earlier members has its score times (1 - 0.5)
--   all         bootstrap + objectives + overlap penalty
-- Reported: OOD-avg AUROC, accuracy, member disagreement and the members' head overlap.
local hydra = require("hydra")

local opts = hydra.sweep.script_options(...)
opts.x = "hydra.diversity.overlap_penalty"
local e = hydra.sweep.run_experiment("ablation_diversity", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

local names = { "none", "bootstrap", "objectives", "overlap", "all" }
local rs = hydra.report_sweep
local g = rs.group(e.runs)
print("")
print("| setting | configuration | Acc | ECE | OOD avg AUROC | member disagreement |")
print("|---|---|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(v) or "–" end
for i, pt in ipairs(e.sweep.points) do
  if pt.cfg.seed == e.sweep.points[1].cfg.seed then
    local label
    for _, grp in ipairs(g.groups) do
      for _, r in ipairs(grp.runs) do if r.id == pt.id then label = grp.label end end
    end
    local row = "Hydra (Circ) (" .. (label or "") .. ")"
    local dis
    for _, r in ipairs(e.runs) do
      if r.id == pt.id then dis = r.loaded.results[1].metrics.disagreement end
    end
    print(("| %s | %s | %s | %s | %s | %s |"):format(names[i] or tostring(i), pt.label,
      f(hydra.sweep.cell(e.table, row, "Acc ↑")), f(hydra.sweep.cell(e.table, row, "ECE ↓")),
      f(hydra.sweep.cell(e.table, row, "OOD avg AUROC ↑")), dis and f(dis * 100) or "–"))
  end
end
print("report: " .. e.report.markdown)
return 0
