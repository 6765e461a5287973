-- experiments/ablation_heads.lua: accuracy and OOD AUROC against the number of heads kept per
-- layer, Taylor vs CircAvg (paper Fig. 5).
--
-- Methods. One trained base model (profile sizes), 8 heads per layer. For k = 8 (nothing
-- pruned) down to 1 head kept per layer, prune the same base model with the Taylor criterion
-- and with the `avg` circuit (CircAvg), training-free (finetune.epochs = 0, so the curves show
-- the criterion, not the recovery), and evaluate. The paper finds that circuit pruning keeps
-- OOD detection longer than Taylor pruning as more heads go.
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
opts.x = "hydra.keep_heads"
local e = hydra.experiment.run("ablation_heads", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
print("| heads kept / layer | Taylor Acc | CircAvg Acc | Taylor AUROC | CircAvg AUROC |")
print("|---:|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(100 * v) or "–" end
for k = 8, 1, -1 do
  local function v(method, key)
    return hydra.report.value(e.runs, { method = method, ["hydra.keep_heads"] = k }, key)
  end
  print(("| %d | %s | %s | %s | %s |"):format(k, f(v("taylor", "acc")),
    f(v("circavg", "acc")), f(v("taylor", "ood_avg_auroc")), f(v("circavg", "ood_avg_auroc"))))
end
-- CircAvg against Taylor at each pruning level, by the rule (verdict.lua; at 8 heads both are
-- the unpruned base)
for k = 7, 1, -1 do
  local line = hydra.experiment.claim_line(e.runs, ("%d heads kept, OOD avg AUROC"):format(k),
    { method = "circavg", ["hydra.keep_heads"] = k, label = "CircAvg" },
    { method = "taylor", ["hydra.keep_heads"] = k, label = "Taylor" }, "ood_avg_auroc", "higher")
  if line then print(line) end
end
print("plots: " .. table.concat(e.report.plots, ", "))
return 0
