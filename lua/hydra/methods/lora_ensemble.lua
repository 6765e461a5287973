-- lua/hydra/methods/lora_ensemble.lua: LoRA-Ensemble (Halbheer et al., 2024; core/hydra/ens.h) = the
-- trained Single model (its base stage, reused) as a frozen backbone and lora_ensemble.members
-- members, each with its own rank-lora_ensemble.rank adapters (scaled by alpha / rank) on the
-- linears of lora_ensemble.targets (q, v as the original; k, o = attn.proj, mlp = fc1 and fc2
-- optional) and its own classifier head. Fine-tuned like a pruned Hydra member (finetune.epochs
-- at finetune.learning_rate, finetune.warmup_epochs, finetune.train_subset; every other train.*
-- and optim.* setting from the config) with each batch given to every member; the backbone stays
-- bit-identical to the Single. One forward pass predicts every member (stacked member rows, the
-- adapter products as grouped GEMMs); p̄ = mean of the members' softmaxes, /member_probs keeps
-- each. finetune.epochs 0 keeps the initial adapters (B = 0: each member is the Single's features
-- through its own untrained head), which is not a meaningful baseline: it is refused.
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")
local err = require("hydra.err")
local model = require("hydra.model")
local stages = require("hydra.stages")

local M = { name = "lora_ensemble", label = "LoRA-Ensemble" }

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.lora_ensemble.members,
           seeds = { cfg.seed }, needs = { ood_val = false } }
end

-- The LoRA-Ensemble built on the single model checkpoint `base_path` (stage key base_key):
-- checkpoint path and key of the stage.
function M.train(ctx, base_path, base_key)
  local cfg = ctx.cfg
  if cfg.finetune.epochs < 1 then
    err.fail("lora_ensemble: finetune.epochs must be >= 1 (the adapters and heads are trained "
      .. "by fine-tuning; got %d)", cfg.finetune.epochs)
  end
  local inputs = {
    base = base_key, lora_ensemble = cfg.lora_ensemble, finetune = cfg.finetune,
    train = cfg.train, optim = cfg.optim, seed = cfg.seed,
    data = { id = stages.data_hash(common.data_file(cfg, cfg.data.id)),
             train_subset = cfg.data.train_subset, val_subset = cfg.data.test_subset },
  }
  return ctx.cache:get("lora_ensemble", inputs, function(tmp, key)
    local base = model.load(base_path)
    local e = base:ensemble()
    if e then
      err.fail("lora_ensemble: '%s' is a %s checkpoint (/ensemble method); the backbone must be "
        .. "a single model", base_path, e.method)
    end
    local le = cfg.lora_ensemble
    ctx.log("fine-tuning LoRA-Ensemble (%d members, rank %d, alpha %g, targets %s; %d epoch(s), "
      .. "lr %g) on the frozen Single ...", le.members, le.rank, le.alpha, le.targets,
      cfg.finetune.epochs, cfg.finetune.learning_rate)
    local m = model.new_ensemble(cfg, "lora_ensemble", cfg.seed)
    m.ud:copy_backbone(base.ud)
    local hist = require("hydra.finetune").run(m, cfg, {
      progress = ctx.progress, log = function(line) ctx.log("  %s", line) end,
      curves = ctx.cache:path("lora_ensemble", key, ".curves.csv"),
    })
    m:save(tmp, { seed = cfg.seed, stage = "lora_ensemble", stage_key = key, base_stage = base_key,
                  finetune_epochs = cfg.finetune.epochs,
                  finetune_learning_rate = cfg.finetune.learning_rate,
                  best_epoch = hist.best_epoch or 0 })
  end)
end

function M.build(ctx)
  local cfg = ctx.cfg
  local base_path, base_key = common.base_model(ctx, cfg.seed, cfg.model.dropout)
  local path, key = M.train(ctx, base_path, base_key)
  return common.model_predictor(ctx, { path }, { key }, { name = M.name, seeds = { cfg.seed } })
end

return M
