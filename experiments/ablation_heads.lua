-- experiments/ablation_heads.lua: accuracy and OOD AUROC against the number of heads kept per
-- layer, Taylor vs CircAvg (paper Fig. 5).
--
-- Methods. One trained base model (profile sizes), 8 heads per layer. For k = 8 (nothing
-- pruned) down to 1 head kept per layer, prune the same base model with the Taylor criterion
-- and with the `avg` circuit (CircAvg), training-free (finetune.epochs = 0, so the curves show
-- the criterion, not the recovery), and evaluate. The paper finds that circuit pruning keeps
-- OOD detection longer than Taylor pruning as more heads go.
local hydra = require("hydra")

local opts = hydra.sweep.script_options(...)
opts.x = "hydra.keep_heads"
local e = hydra.sweep.run_experiment("ablation_heads", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
print("| heads kept / layer | Taylor Acc | CircAvg Acc | Taylor AUROC | CircAvg AUROC |")
print("|---:|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(v) or "–" end
local wins, n = 0, 0
for k = 8, 1, -1 do
  local function cell(method, title)
    return hydra.sweep.cell(e.table, ("%s (hydra.keep_heads=%d)"):format(method, k), title)
  end
  local ta, ca = cell("Taylor", "OOD avg AUROC ↑"), cell("CircAvg", "OOD avg AUROC ↑")
  if ta and ca and k < 8 then
    n = n + 1
    if ca >= ta then wins = wins + 1 end
  end
  print(("| %d | %s | %s | %s | %s |"):format(k, f(cell("Taylor", "Acc ↑")),
    f(cell("CircAvg", "Acc ↑")), f(ta), f(ca)))
end
if n > 0 then
  print(("CircAvg's OOD AUROC >= Taylor's at %d of %d pruning levels"):format(wins, n))
end
print("plots: " .. table.concat(e.report.plots, ", "))
return 0
