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
for i, m in ipairs(order) do
  local ran = hydra.experiment.has_method(e.runs, m[1])   -- methods=[...] may leave it out
  local auroc, sd
  if ran then auroc, sd = hydra.report.value(e.runs, { method = m[1] }, "ood_avg_auroc") end
  local acc = ran and hydra.report.value(e.runs, { method = m[1] }, "acc")
  print(("| %s | %s | %.2f | %s |"):format(m[2],
    auroc and (("%.2f"):format(100 * auroc) .. (sd and (" ± %.2f"):format(100 * sd) or ""))
      or "–",
    paper[i], acc and ("%.2f"):format(100 * acc) or "–"))
end
print("")
-- the paper's three claims, each by the rule of hydra.verdict (left out when a method is not run)
local label, paper_of = {}, {}
for i, m in ipairs(order) do
  label[m[1]], paper_of[m[1]] = { method = m[1], label = m[2] }, paper[i]
end
for _, c in ipairs({ { "ensembling pruned members (Circ)", "hydra_circ", "circavg" },
                     { "ensembling pruned members (Taylor)", "hydra_taylor", "taylor" },
                     { "circuit vs Taylor criterion (Hydra)", "hydra_circ", "hydra_taylor" } }) do
  local line = hydra.experiment.claim_line(e.runs, c[1] .. ", OOD avg AUROC", label[c[2]],
    label[c[3]], "ood_avg_auroc", "higher",
    { paper = ("%.2f vs %.2f"):format(paper_of[c[2]], paper_of[c[3]]) })
  if line then print(line) end
end
print("report: " .. e.report.markdown)
return 0
