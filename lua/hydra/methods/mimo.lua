-- lua/hydra/methods/mimo.lua: MIMO (Havasi et al., ICLR 2021), M = mimo.members input slots and
-- predictions in one model, trained from scratch (core/hydra/mimo.h; file format: core/README.md).
--
-- Choice of input combination: the M images are concatenated along channels, so the patch
-- projection (model.channels x M input channels) combines them: the sum of each slot's patch
-- embedding through its own weights. Heads: one classifier of M x K outputs (member m =
-- outputs [m K, (m+1) K)). Training: the loss is the sum of the M heads' cross-entropies on
-- their own slot's labels; the slots get independently shuffled copies of each batch (the
-- authors' implementation: a batch tiled mimo.batch_repetition times, shuffled, and every slot
-- reshuffles its first (1 - mimo.input_repetition) fraction of rows; defaults r = 1, rho = 0:
-- each step is one batch of train.batch_size, the same compute per epoch as the Single; the
-- paper repeats batches, r x the rows per step, and uses rho = 0.6 on ImageNet). Epoch
-- selection (train.select_best) on the ensemble's validation NLL / accuracy. Test time: the
-- same image in every slot; the members' softmaxes are /member_probs, p̄ their mean. Images
-- only (vit).
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")
local core = require("hydra.core")
local err = require("hydra.err")
local model = require("hydra.model")
local stages = require("hydra.stages")

local M = { name = "mimo", label = "MIMO" }

-- The model section of the MIMO network: cfg.model with M x channels inputs and M x n_classes
-- outputs.
function M.model_config(cfg)
  local mc = require("hydra.config").copy(cfg.model)
  if mc.kind ~= "vit" then
    err.fail("mimo: MIMO needs an image model (model.kind vit, got %s)", tostring(mc.kind))
  end
  local n = cfg.mimo.members
  mc.channels = n * cfg.model.channels
  mc.n_classes = n * cfg.model.n_classes
  return mc
end

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.mimo.members, seeds = { cfg.seed },
           needs = { ood_val = false } }
end

-- Trains (or finds) the MIMO model; returns its checkpoint path and key.
local function trained(ctx, mc)
  local cfg = ctx.cfg
  local idf = common.data_file(cfg, cfg.data.id)
  local inputs = {
    model = mc, train = cfg.train, optim = cfg.optim, mimo = cfg.mimo, seed = cfg.seed,
    data = { id = cfg.data.id, hash = stages.data_hash(idf), train_subset = cfg.data.train_subset,
             val_subset = cfg.data.test_subset },
  }
  return ctx.cache:get("mimo", inputs, function(tmp, key)
    local c = require("hydra.config").copy(cfg)
    c.model = mc
    local n = cfg.mimo.members
    ctx.log("training MIMO (%d slots, input_repetition %g, batch_repetition %d, %d epochs) ...",
      n, cfg.mimo.input_repetition, cfg.mimo.batch_repetition, c.train.epochs)
    local mod = model.new(c, cfg.seed)
    local hist = mod:train(idf, c, {
      progress = ctx.progress,
      log = function(line) ctx.log("  %s", line) end,
      -- a per-epoch work file beside the stage: a kill loses at most one epoch
      work = ctx.cache:path("mimo", key, ".work.h5"), work_tag = key,
      curves = ctx.cache:path("mimo", key, ".curves.csv"),
      trainer_new = function(ud, ds, tc, optim, seed)
        return core.mimo_trainer_new(ud, ds, tc, optim, seed, cfg.mimo)
      end,
      evaluate = function(ud, ds, b) return ud:mimo_evaluate(n, ds, b) end,
    })
    mod:save(tmp, { seed = cfg.seed, stage = "mimo", stage_key = key, method = M.name,
                    mimo_members = n, mimo_input_repetition = cfg.mimo.input_repetition,
                    mimo_batch_repetition = cfg.mimo.batch_repetition,
                    data_hash = inputs.data.hash, best_epoch = hist.best_epoch or 0 })
  end)
end

function M.build(ctx)
  local cfg = ctx.cfg
  local n = cfg.mimo.members
  local path, key = trained(ctx, M.model_config(cfg))
  local mod = model.load(path)
  local c = mod:config()
  return common.predictor({
    ctx = ctx, name = M.name,
    key_inputs = { kind = "mimo", model = key, members = n },
    dataset = function(set) return common.dataset(set, mod.norm) end,
    run = function(ds, B)
      local ml, probs, mp = mod.ud:mimo_predict(n, ds, B)
      return { probs = probs, logits = core.mean_first(ml), labels = ds:labels(),
               member_probs = mp, member_logits = ml }
    end,
    -- one forward of the M-slot model: hy_xfmr_cost of its config (M x C_in inputs, M x K outputs)
    cost = { params = c.params, members = n, seq_len = c.seq_len,
             flops_at = function(T) return mod:flops(T) end },
    seeds = { cfg.seed },
  })
end

return M
