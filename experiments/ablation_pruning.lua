-- experiments/ablation_pruning.lua: which pruning criterion makes the better ensemble
-- (paper's ablation: OOD-avg AUROC Taylor 84.38, CircAvg 85.71, Hydra (Taylor) 85.36,
-- Hydra (Circ) 86.29, Deep Ensembles 85.48).
--
-- Methods. Same data and backbone as table_image (profile sizes). From one trained base model:
-- Taylor = a single model keeping the 4 of 8 heads per layer with the largest Taylor
-- importance; CircAvg = a single model keeping the circuit found with the `avg` objective;
-- Hydra (Taylor) / Hydra (Circ) = 3 such members (bootstrap resamples; for Circ, objectives
-- acc / ood / avg), fine-tuned 1 epoch and fused; Deep Ensembles = 3 models trained from
-- scratch. The question: does ensembling pruned members beat the best single pruned model,
-- and does the circuit criterion beat Taylor, as in the paper?
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
local e = hydra.experiment.run("ablation_pruning", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

local order = { { "taylor", "Taylor" }, { "circavg", "CircAvg" },
                { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" },
                { "deep_ensemble", "Deep Ensembles" } }
local paper = { 84.38, 85.71, 85.36, 86.29, 85.48 }
print("")
print("| Method | OOD avg AUROC (ours) | paper (ImageNet-1K) | Acc (ours) |")
print("|---|---:|---:|---:|")
local ours, ours_sd = {}, {}
for i, m in ipairs(order) do
  local auroc, sd = hydra.report.value(e.runs, { method = m[1] }, "ood_avg_auroc")
  local acc = hydra.report.value(e.runs, { method = m[1] }, "acc")
  ours[m[1]], ours_sd[m[1]] = auroc, sd
  print(("| %s | %s | %.2f | %s |"):format(m[2],
    auroc and (("%.2f"):format(100 * auroc) .. (sd and (" ± %.2f"):format(100 * sd) or ""))
      or "–",
    paper[i], acc and ("%.2f"):format(100 * acc) or "–"))
end
print("")
if ours.hydra_circ and ours.circavg and ours.hydra_taylor and ours.taylor then
  -- AUROC points; single-seed gaps under one point are flagged within noise
  local function diff(a, b)
    local pt = function(v) return v and 100 * v end
    return (hydra.report.difference(pt(ours[a]), pt(ours[b]), pt(ours_sd[a]), pt(ours_sd[b])))
  end
  print(("ensembling pruned members (OOD avg AUROC over the single pruned model): Circ %s; "
    .. "Taylor %s"):format(diff("hydra_circ", "circavg"), diff("hydra_taylor", "taylor")))
  print(("circuit vs Taylor criterion (Hydra): %s"):format(diff("hydra_circ", "hydra_taylor")))
end
print("report: " .. e.report.markdown)
return 0
