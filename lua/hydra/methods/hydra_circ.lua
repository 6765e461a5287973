-- lua/hydra/methods/hydra_circ.lua: Hydra (Circ) = hydra.members members, member m keeping the
-- circuit found with objective hydra.diversity.objectives[m] (cycled) on the ID val split + the
-- validation OOD set data.ood_val, with the diversity switches (bootstrap resamples,
-- keep_counts, overlap_penalty), each fine-tuned from the base weights (finetune.*), fused
-- (fuse.*) and predicted in one pass. Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local M = { name = "hydra_circ", label = "Hydra (Circ)" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.hydra.members, seeds = { cfg.seed },
           needs = { ood_val = true } }
end

function M.build(ctx)
  return common.pruned_method(ctx, M.name, { method = "circuit" })
end

return M
