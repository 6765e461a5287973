-- lua/hydra/methods/batch_ensemble.lua: BatchEnsemble (Wen et al., ICLR 2020; core/hydra/ens.h) =
-- one transformer whose every linear (qkv, proj, fc1, fc2, head) keeps the shared weight W and
-- per-member rank-1 fast weights: y = ((x o s_m) W^T) o r_m + b + b_m, for
-- batch_ensemble.members members. Trained from scratch like the Single model (train.*, optim.*,
-- the same data and select_best; train.init, a pretrained encoder, is not used: the method is
-- defined by its from-scratch training, and the text table shows what that costs it) with
-- every batch repeated for each member: each member sees every sample, the loss is the mean of the members' cross-entropies (torch-uncertainty's
-- `repeat_training_inputs`; the original splits the batch). One forward pass predicts every
-- member (stacked member rows, one GEMM per shared weight); p̄ = mean of the members' softmaxes,
-- /member_probs keeps each. Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")
local model = require("hydra.model")

local M = { name = "batch_ensemble", label = "BatchEnsemble" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.batch_ensemble.members,
           seeds = { cfg.seed }, needs = { ood_val = false } }
end

-- The trained ensemble stage: checkpoint path and key.
function M.train(ctx)
  local cfg = common.with_seed(ctx.cfg, ctx.cfg.seed, ctx.cfg.model.dropout, true)
  local inputs = common.base_inputs(cfg, cfg.seed, cfg.model.dropout)
  inputs.batch_ensemble = cfg.batch_ensemble
  return ctx.cache:get("batch_ensemble", inputs, function(tmp, key)
    ctx.log("training BatchEnsemble (%d members, seed %d, %d epochs) ...",
      cfg.batch_ensemble.members, cfg.seed, cfg.train.epochs)
    local m = model.new_ensemble(cfg, "batch_ensemble", cfg.seed)
    local hist = m:train(common.data_file(cfg, cfg.data.id), cfg, {
      progress = ctx.progress,
      log = function(line) ctx.log("  %s", line) end,
      -- a per-epoch work file beside the stage: a kill loses at most one epoch
      work = ctx.cache:path("batch_ensemble", key, ".work.h5"), work_tag = key,
      curves = ctx.cache:path("batch_ensemble", key, ".curves.csv"),
    })
    m:save(tmp, { seed = cfg.seed, stage = "batch_ensemble", stage_key = key,
                  data_hash = inputs.data.hash, best_epoch = hist.best_epoch or 0 })
  end)
end

function M.build(ctx)
  local path, key = M.train(ctx)
  return common.model_predictor(ctx, { path }, { key }, { name = M.name, seeds = { ctx.cfg.seed } })
end

return M
