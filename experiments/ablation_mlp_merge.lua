-- experiments/ablation_mlp_merge.lua: one merged MLP vs each member keeping its own MLP.
--
-- Methods. Hydra (Taylor) and Hydra (Circ), 3 members of 4 of 8 heads per layer, fine-tuned
-- 1 epoch (profile sizes). fuse.mlp = average replaces the members' MLPs (fc1, fc2, weights and
-- biases) by their mean, applied to all member streams as one GEMM; fuse.mlp = member keeps
-- M MLPs (M times the MLP cost). The paper merges the MLPs to keep the cost near a single
-- model's; the question is what the merge costs in accuracy and uncertainty quality.
local hydra = require("hydra")

local opts = hydra.sweep.script_options(...)
opts.x = "fuse.mlp"
local e = hydra.sweep.run_experiment("ablation_mlp_merge", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
print("| Method | MLP | Acc | ECE | OOD avg AUROC | OOD avg FPR95 |")
print("|---|---|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(v) or "–" end
for _, m in ipairs({ "Hydra (Taylor)", "Hydra (Circ)" }) do
  for _, mlp in ipairs({ "average", "member" }) do
    local row = ("%s (fuse.mlp=%s)"):format(m, mlp)
    print(("| %s | %s | %s | %s | %s | %s |"):format(m, mlp,
      f(hydra.sweep.cell(e.table, row, "Acc ↑")), f(hydra.sweep.cell(e.table, row, "ECE ↓")),
      f(hydra.sweep.cell(e.table, row, "OOD avg AUROC ↑")),
      f(hydra.sweep.cell(e.table, row, "OOD avg FPR95 ↓"))))
  end
end
for _, m in ipairs({ "Hydra (Taylor)", "Hydra (Circ)" }) do
  local a = hydra.sweep.cell(e.table, m .. " (fuse.mlp=average)", "OOD avg AUROC ↑")
  local b = hydra.sweep.cell(e.table, m .. " (fuse.mlp=member)", "OOD avg AUROC ↑")
  if a and b then print(("%s: merging the MLPs changes OOD-avg AUROC by %+.2f points"):format(m, a - b)) end
end
print("report: " .. e.report.markdown)
return 0
