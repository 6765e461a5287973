-- experiments/ablation_mlp_merge.lua: one merged MLP vs each member keeping its own MLP.
--
-- Methods. Hydra (Taylor) and Hydra (Circ), 3 members of 4 of 8 heads per layer, fine-tuned
-- 1 epoch (profile sizes). fuse.mlp = average replaces the members' MLPs (fc1, fc2, weights and
-- biases) by their mean, applied to all member streams as one GEMM; fuse.mlp = member keeps
-- M MLPs (M times the MLP cost). The paper merges the MLPs to keep the cost near a single
-- model's; the question is what the merge costs in accuracy and uncertainty quality.
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
opts.x = "fuse.mlp"
local e = hydra.experiment.run("ablation_mlp_merge", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
print("| Method | MLP | Acc | ECE | OOD avg AUROC | OOD avg FPR95 |")
print("|---|---|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(100 * v) or "–" end
local methods = { { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } }
local function v(method, mlp, key)
  return hydra.report.value(e.runs, { method = method, ["fuse.mlp"] = mlp }, key)
end
for _, m in ipairs(methods) do
  for _, mlp in ipairs({ "average", "member" }) do
    print(("| %s | %s | %s | %s | %s | %s |"):format(m[2], mlp, f(v(m[1], mlp, "acc")),
      f(v(m[1], mlp, "ece")), f(v(m[1], mlp, "ood_avg_auroc")),
      f(v(m[1], mlp, "ood_avg_fpr95"))))
  end
end
-- the merge against the members' own MLPs, by the rule (verdict.lua: paired over seeds and a
-- bootstrap over test samples); the claim: merging costs nothing (merged at least as good)
for _, m in ipairs(methods) do
  local line = hydra.experiment.claim_line(e.runs, m[2] .. ", OOD avg AUROC",
    { method = m[1], ["fuse.mlp"] = "average", label = "merged MLP" },
    { method = m[1], ["fuse.mlp"] = "member", label = "per-member MLPs" },
    "ood_avg_auroc", "higher")
  if line then print(line) end
end
print("report: " .. e.report.markdown)
return 0
