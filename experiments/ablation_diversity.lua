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

local opts = hydra.experiment.script_options(...)
opts.x = "hydra.diversity.overlap_penalty"
local e = hydra.experiment.run("ablation_diversity", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

local names = { "none", "bootstrap", "objectives", "overlap", "all" }
print("")
print("| setting | configuration | Acc | ECE | OOD avg AUROC | member disagreement |")
print("|---|---|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(100 * v) or "–" end
for i, pt in ipairs(e.sweep.points) do
  if pt.cfg.seed == e.sweep.points[1].cfg.seed then
    -- this point's settings (every seed of them: mean over seeds)
    local want = { method = "hydra_circ" }
    for _, o in ipairs(pt.overrides) do
      if o.key ~= "seed" then want[o.key] = o.value end
    end
    local function v(key) return hydra.report.value(e.runs, want, key) end
    print(("| %s | %s | %s | %s | %s | %s |"):format(names[i] or tostring(i),
      (pt.label:gsub("%s*seed=%d+", "")),
      f(v("acc")), f(v("ece")), f(v("ood_avg_auroc")), f(v("disagreement"))))
  end
end
print("report: " .. e.report.markdown)
return 0
