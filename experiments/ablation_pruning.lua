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

local opts = hydra.sweep.script_options(...)
local e = hydra.sweep.run_experiment("ablation_pruning", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

local order = { "Taylor", "CircAvg", "Hydra (Taylor)", "Hydra (Circ)", "Deep Ensembles" }
local paper = { 84.38, 85.71, 85.36, 86.29, 85.48 }
print("")
print("| Method | OOD avg AUROC (ours) | paper (ImageNet-1K) | Acc (ours) |")
print("|---|---:|---:|---:|")
local ours = {}
for i, m in ipairs(order) do
  local auroc, sd = hydra.sweep.cell(e.table, m, "OOD avg AUROC ↑")
  local acc = hydra.sweep.cell(e.table, m, "Acc ↑")
  ours[m] = auroc
  print(("| %s | %s | %.2f | %s |"):format(m,
    auroc and (("%.2f"):format(auroc) .. (sd and (" ± %.2f"):format(sd) or "")) or "–",
    paper[i], acc and ("%.2f"):format(acc) or "–"))
end
print("")
if ours["Hydra (Circ)"] and ours["CircAvg"] and ours["Hydra (Taylor)"] and ours["Taylor"] then
  print(("ensembling pruned members: Circ %+.2f, Taylor %+.2f AUROC points over the single "
    .. "pruned model"):format(ours["Hydra (Circ)"] - ours["CircAvg"],
    ours["Hydra (Taylor)"] - ours["Taylor"]))
  print(("circuit vs Taylor criterion (Hydra): %+.2f AUROC points"):format(
    ours["Hydra (Circ)"] - ours["Hydra (Taylor)"]))
end
print("report: " .. e.report.markdown)
return 0
