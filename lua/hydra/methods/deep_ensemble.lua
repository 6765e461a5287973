-- lua/hydra/methods/deep_ensemble.lua: Deep Ensembles = M = deep_ensemble.members base models
-- trained independently with base seeds M*seed, M*seed+1, ..., M*seed+M-1: the run seeds 0, 1,
-- 2, ... use disjoint members (3 members: seed 0 bases 0-2, seed 1 bases 3-5, ...), so the
-- seeds' ensembles share no member and their spread is an ensemble's, not a shared member's.
-- The Single of seed s is base s: member 1 of seed 0 is the seed-0 Single's stage, and members
-- 2 and 3 are the Singles of seeds 1 and 2 (with 5 seeds, seed 1's members 1 and 2 are the
-- Singles of seeds 3 and 4), so a row built from the Single shares those models with the Deep
-- Ensemble of another seed. With train.init (a pretrained encoder) they are M fine-tunings of
-- that one encoder with those seeds (the authors' text protocol; deep_ensemble_scratch is the
-- row without it). With model.from (an imported model,
-- hydra.sources) the members are model.from and the checkpoints of deep_ensemble.from (each
-- imported, fine-tuned when train.epochs > 0), or, without deep_ensemble.from, fine-tunings of
-- model.from with those seeds. Prediction: p̄ = mean of the members' softmaxes; /member_probs
-- keeps each member. hydra.run.METHOD_REVISION numbers this definition 2 (revision 1 shared
-- members: seed + i - 1).
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
    if cfg.model.from ~= nil and not scratch then   -- imported models (hydra.sources)
      local sources = require("hydra.sources")
      local list = sources.ensemble(cfg)
      if #list > 1 then   -- one member per source checkpoint, all with the run's seed
        for i, src in ipairs(list) do
          ctx.log("deep ensemble member %d/%d (%s)", i, #list, src)
          paths[i], keys[i] = sources.base_model(ctx, src, cfg.seed, cfg.model.dropout,
            i == 1 and "model.from" or ("deep_ensemble.from[%d]"):format(i - 1))
        end
        return common.model_predictor(ctx, paths, keys, { name = M.name, seeds = { cfg.seed } })
      end
      if cfg.train.epochs == 0 then
        require("hydra.err").fail("deep_ensemble: with model.from, the members are the models "
          .. "of deep_ensemble.from (--deep-ensemble SRC2,SRC3), or fine-tunings of model.from "
          .. "with base seeds M*seed .. M*seed+M-1 (train.epochs > 0); neither is set")
      end
    end
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
