-- lua/hydra/methods/deep_ensemble.lua: Deep Ensembles = M = deep_ensemble.members base models
-- trained independently with base seeds M*seed, M*seed+1, ..., M*seed+M-1: the run seeds 0, 1,
-- 2, ... use disjoint members (3 members: seed 0 bases 0-2, seed 1 bases 3-5, ...), so the seeds
-- of a table are independent ensembles and their spread is an ensemble's, not a shared
-- member's. Member 1 of seed 0 is the seed-0 Single's stage. With train.init (a pretrained
-- encoder) they are M fine-tunings of that one encoder with those seeds (the authors' text
-- protocol; deep_ensemble_scratch is the row without it). Prediction: p̄ = mean of the members'
-- softmaxes; /member_probs keeps each member. hydra.run.METHOD_REVISION numbers this
-- definition 2 (revision 1 shared members: seed + i - 1).
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

local function seeds(cfg)
  local s, m = {}, cfg.deep_ensemble.members
  for i = 1, m do s[i] = m * cfg.seed + i - 1 end
  return s
end

-- A Deep Ensembles method: scratch = true trains every member from its seed alone, ignoring
-- train.init (deep_ensemble_scratch.lua).
local function method(name, label, scratch)
  local M = { name = name, label = label }
  function M.describe(cfg)
    return { name = M.name, label = M.label, members = cfg.deep_ensemble.members,
             seeds = seeds(cfg), needs = { ood_val = false } }
  end
  function M.build(ctx)
    local cfg = ctx.cfg
    local paths, keys = {}, {}
    local ss = seeds(cfg)
    for i, seed in ipairs(ss) do
      ctx.log("%s member %d/%d (seed %d%s)", scratch and "deep ensemble (scratch)"
        or "deep ensemble", i, #ss, seed, scratch and ", no train.init" or "")
      paths[i], keys[i] = common.base_model(ctx, seed, cfg.model.dropout, scratch or nil)
    end
    return common.model_predictor(ctx, paths, keys, { name = M.name, seeds = ss })
  end
  return M
end

local M = method("deep_ensemble", "Deep Ensembles", false)
M.method = method
return M
