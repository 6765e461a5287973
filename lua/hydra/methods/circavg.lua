-- lua/hydra/methods/circavg.lua: CircAvg = the base model pruned to its `avg` circuit (the
-- layer-conditioned greedy circuit search with the avg objective on the ID val split + the
-- validation OOD set data.ood_val; hydra.keep_heads circuit heads kept per layer), fine-tuned
-- (finetune.*), run as a packed one-member fused model. Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local M = { name = "circavg", label = "CircAvg" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = 1, seeds = { cfg.seed },
           needs = { ood_val = true } }
end

function M.build(ctx)
  return common.pruned_method(ctx, M.name, { method = "circuit", objective = "avg",
                                             single = true })
end

return M
