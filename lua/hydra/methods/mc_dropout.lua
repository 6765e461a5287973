-- lua/hydra/methods/mc_dropout.lua: MC Dropout = a base model trained with dropout
-- mc_dropout.rate (attention output and MLP), sampled mc_dropout.samples times at test time with
-- dropout on (masks seeded by the run's seed). p̄ = mean of the passes' softmaxes; /member_probs
-- holds every pass. Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")
local err = require("hydra.err")

local M = { name = "mc_dropout", label = "MC Dropout" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.mc_dropout.samples,
           seeds = { cfg.seed }, needs = { ood_val = false } }
end

function M.build(ctx)
  local cfg = ctx.cfg
  local rate = cfg.mc_dropout.rate
  if rate <= 0 then
    err.fail("mc_dropout: mc_dropout.rate must be > 0 for MC Dropout (got %g)", rate)
  end
  local path, key = common.base_model(ctx, cfg.seed, rate)
  return common.model_predictor(ctx, { path }, { key }, {
    name = M.name, mc = cfg.mc_dropout.samples, mc_seed = cfg.seed, seeds = { cfg.seed },
  })
end

return M
