-- lua/hydra/methods/deep_ensemble_scratch.lua: "Deep Ensembles (scratch)" = deep_ensemble.members
-- base models trained from their seeds alone (seeds seed, seed+1, ...), ignoring train.init:
-- with a pretrained encoder (train.init) the plain Deep Ensembles row is M fine-tunings of that
-- one encoder (the authors' protocol), and this row is the independently initialised ensemble
-- beside it. Without train.init the two rows are the same models. Interface:
-- lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local M = { name = "deep_ensemble_scratch", label = "Deep Ensembles (scratch)" }

local function seeds(cfg)
  local s = {}
  for i = 1, cfg.deep_ensemble.members do s[i] = cfg.seed + i - 1 end
  return s
end

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.deep_ensemble.members,
           seeds = seeds(cfg), needs = { ood_val = false } }
end

function M.build(ctx)
  local cfg = ctx.cfg
  local paths, keys = {}, {}
  local ss = seeds(cfg)
  for i, seed in ipairs(ss) do
    ctx.log("deep ensemble (scratch) member %d/%d (seed %d, no train.init)", i, #ss, seed)
    paths[i], keys[i] = common.base_model(ctx, seed, cfg.model.dropout, true)
  end
  return common.model_predictor(ctx, paths, keys, { name = M.name, seeds = ss })
end

return M
