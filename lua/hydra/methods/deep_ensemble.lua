-- lua/hydra/methods/deep_ensemble.lua: Deep Ensembles = deep_ensemble.members base models trained
-- independently with seeds seed, seed+1, ... (member 1 is the Single model's stage); with
-- train.init (a pretrained encoder) they are M fine-tunings of that one encoder with those seeds
-- (the authors' text protocol; deep_ensemble_scratch is the row without it). Prediction:
-- p̄ = mean of the members' softmaxes; /member_probs keeps each member.
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local M = { name = "deep_ensemble", label = "Deep Ensembles" }

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
    ctx.log("deep ensemble member %d/%d (seed %d)", i, #ss, seed)
    paths[i], keys[i] = common.base_model(ctx, seed, cfg.model.dropout)
  end
  return common.model_predictor(ctx, paths, keys, { name = M.name, seeds = ss })
end

return M
