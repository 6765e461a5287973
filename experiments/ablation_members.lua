-- experiments/ablation_members.lua: ensemble size M = 1..6 for Hydra (Taylor) and Hydra (Circ).
--
-- Methods. Same data, backbone and base model as table_image (profile sizes); every member
-- keeps 4 of 8 heads per layer and is fine-tuned 1 epoch; the members are fused into one model.
-- The sweep (configs/sweeps/ablation_members.yaml) varies hydra.members; the base model stage is
-- shared, so it is trained once (with table_image). The gates stage is keyed by the whole
-- hydra.* block, so each M runs its own search, but member m's gates do not depend on M (when
-- keep_counts is empty) and the member stage is keyed by the gate row: M = 1..6 fine-tunes 6
-- members per method, not 21. We report accuracy,
-- ECE and OOD-avg AUROC / FPR95 against M (report/plots/*-vs-hydra.members.png), mean ± std over seeds with --seeds K.
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
opts.x = "hydra.members"
local e = hydra.experiment.run("ablation_members", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
print("| M | Hydra (Taylor) AUROC | Hydra (Circ) AUROC | Hydra (Taylor) Acc | Hydra (Circ) Acc |")
print("|---:|---:|---:|---:|---:|")
local function f(v) return v and ("%.2f"):format(100 * v) or "–" end
for m = 1, 6 do
  local function v(method, key)
    return hydra.report.value(e.runs, { method = method, ["hydra.members"] = m }, key)
  end
  local tc = v("hydra_circ", "ood_avg_auroc")
  print(("| %d | %s | %s | %s | %s |"):format(m, f(v("hydra_taylor", "ood_avg_auroc")),
    f(tc), f(v("hydra_taylor", "acc")), f(v("hydra_circ", "acc"))))
end
-- M = 6 against one pruned member, and each M against M - 1, by the rule (verdict.lua)
for _, m in ipairs({ { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } }) do
  for _, k in ipairs({ { 6, 1 }, { 2, 1 }, { 3, 2 }, { 4, 3 }, { 5, 4 }, { 6, 5 } }) do
    local line = hydra.experiment.claim_line(e.runs, m[2] .. ", OOD avg AUROC",
      { method = m[1], ["hydra.members"] = k[1], label = ("M = %d"):format(k[1]) },
      { method = m[1], ["hydra.members"] = k[2], label = ("M = %d"):format(k[2]) },
      "ood_avg_auroc", "higher")
    if line then print(line) end
  end
end
print("plots: " .. table.concat(e.report.plots, ", "))
return 0
