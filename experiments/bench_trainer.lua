-- experiments/bench_trainer.lua: the trainer settings of every training figure of `make bench`
-- (experiments/bench.lua, bench_real.lua; the PyTorch side gets the same optimiser settings):
-- one epoch, no warm-up epochs, grad clip 1, no label smoothing or augmentation, AdamW at lr 1e-3
-- with weight decay 0.05 on a cosine schedule.
--   local bt = dofile("experiments/bench_trainer.lua")
--   bt.new(model, dataset, batch, seed) -> a core trainer; bt.train_cfg, bt.optim_cfg
local core = require("hydra.core")

local M = {}
M.train_cfg = { epochs = 1, batch_size = 128, warmup_epochs = 0, grad_clip = 1.0,
  label_smoothing = 0, augment = { random_crop = false, crop_padding = 0, hflip = false } }
M.optim_cfg = { learning_rate = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
  weight_decay = 0.05, schedule = "cosine", min_lr = 0 }

function M.new(mod, data, batch, seed)
  local t = {}
  for k, v in pairs(M.train_cfg) do t[k] = v end
  t.batch_size = batch
  return core.trainer_new(mod.ud, data, t, M.optim_cfg, seed)
end

-- the optimiser section of a PyTorch spec (tests/ref/bench_torch.py)
function M.torch_optim()
  local o = M.optim_cfg
  return { learning_rate = o.learning_rate, beta1 = o.beta1, beta2 = o.beta2, eps = o.eps,
    weight_decay = o.weight_decay, grad_clip = M.train_cfg.grad_clip }
end

return M
