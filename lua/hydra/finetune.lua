-- lua/hydra/finetune.lua: fine-tuning one pruned Hydra member (DESIGN §3.3), for the methods
-- (methods/common.lua, stage "member") and `hydra finetune`.
--
--   local finetune = require("hydra").finetune
--   local m, meta, hist = finetune.member(m, gates, k, cfg [, opts])
--     member k of gates [M,L,H] (or [L,H]), fine-tuned in place from m's (the base's) weights
--     with its gates fixed; opts: data (prepared file, default the ID set of cfg), progress,
--     log (function(line)), curves (learning-curve CSV path); meta = the /meta attributes of a member checkpoint (member,
--     finetune_epochs = finetune.epochs, finetune_learning_rate = finetune.learning_rate);
--     hist = m:train's history (nil when finetune.epochs = 0).
--     finetune.train_subset > 0 fine-tunes on that many leading training samples, never more
--     than the base's data.train_subset (the input normalisation stays the dataset's /meta one).
--   finetune.config_of(m, overrides) -> the resolved config of a checkpoint (its /meta
--     config_yaml, else the defaults) with key=value overrides: the config `hydra finetune` and
--     `hydra prune` work with.
local core = require("hydra.core")

local M = {}

-- Gates row k of `gates` set on m (a hydra.model Model holding the base weights; changed in
-- place), then finetune.epochs epochs of training at peak learning rate finetune.learning_rate
-- with finetune.warmup_epochs of warm-up (every other train.* and optim.* setting from cfg,
-- which is not modified) on the ID train split. Pruned heads get no gradient, and their weights are restored
-- from the base afterwards so that they stay bit-identical to the base's (decoupled weight
-- decay would otherwise shrink them). finetune.epochs 0 = the gated base weights (the
-- training-free setting).
function M.member(m, gates, k, cfg, opts)
  opts = opts or {}
  local n = gates:ndim() == 3 and gates:size(1) or 1
  if math.type(k) ~= "integer" or k < 1 or k > n then
    error(("finetune: member %s does not exist (the gates hold %d member(s))"):format(
      tostring(k), n), 0)
  end
  m:set_gates(gates:ndim() == 3 and gates:row(k) or gates)
  local ft = cfg.finetune
  local hist
  if ft.epochs > 0 then
    local base = m:get_params()
    hist = M.run(m, cfg, opts)
    core.prune_restore(m.ud, base)
  end
  return m, { member = k, finetune_epochs = ft.epochs,
              finetune_learning_rate = ft.learning_rate }, hist
end

-- finetune.epochs (> 0) epochs of m:train on the ID train split with the fine-tuning schedule
-- (finetune.learning_rate, finetune.warmup_epochs), in place; the fine-tuning of a pruned member
-- and of LoRA-Ensemble's adapters (methods/lora_ensemble.lua). opts: data, progress, log,
-- curves (the learning curve's CSV path, hydra.curves).
-- Returns m:train's history.
function M.run(m, cfg, opts)
  opts = opts or {}
  local ft = cfg.finetune
  local f = require("hydra.config").copy(ft)
  -- finetune.warmup_epochs null (the default): at most half of the fine-tuning epochs
  if f.warmup_epochs == nil then
    f.warmup_epochs = math.min(cfg.train.warmup_epochs, ft.epochs / 2)
  end
  -- finetune.train_subset: that many leading training rows, never more than data.train_subset
  local rows, cur = ft.train_subset, cfg.data.train_subset
  if rows > 0 then rows = cur > 0 and math.min(cur, rows) or rows else rows = cur end
  local mod = require("hydra.model")
  local path = opts.data or mod.data_path(cfg, cfg.data.id)
  local train_ds = mod.dataset(path, "train", rows)
  m.norm = { train_ds:mean_std() }   -- as m:train(path) records it, for every kind of data
  local val_ds = mod.dataset(path, "val", cfg.data.test_subset, m.norm)
  return m:train({ train = train_ds, val = val_ds }, cfg,
    { finetune = f, progress = opts.progress, log = opts.log, curves = opts.curves })
end

function M.config_of(model, overrides)
  local config = require("hydra.config")
  local yaml = model.meta and model.meta.config_yaml
  if type(yaml) == "string" and yaml ~= "" then
    local tbl = core.yaml_parse(yaml, "checkpoint config_yaml")
    return config.resolve(tbl, overrides)
  end
  return config.load(nil, overrides)
end

return M
