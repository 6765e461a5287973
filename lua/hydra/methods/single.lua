-- lua/hydra/methods/single.lua: Single model = the base model (DESIGN §3.1), one member.
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local M = { name = "single", label = "Single" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = 1, seeds = { cfg.seed },
           needs = { ood_val = false } }
end

function M.build(ctx)
  local cfg = ctx.cfg
  local path, key = common.base_model(ctx, cfg.seed, cfg.model.dropout)
  return common.model_predictor(ctx, { path }, { key }, { name = M.name, seeds = { cfg.seed } })
end

return M
