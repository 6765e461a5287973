-- lua/hydra/vilu.lua: the learned uncertainty heads on a frozen model (core/hydra/vilu.h) for the
-- methods vilu (ViLU-style error predictor) and confidnet (ConfidNet-style confidence head).
--
--   local vilu = require("hydra.vilu")
--   vilu.KINDS.vilu / vilu.KINDS.confidnet -> { input = function(cfg), loss = function(cfg) }
--   vilu.fit(m, cfg, kind [, opts]) -> head (hydra.Vilu), info = { loss, n_err, rows, split }
--     trains on the first vilu.rows rows (0 = all) of the ID split vilu.split ("val" or
--     "train", never a test split) of data.id: the frozen model m's features z (the CLS row
--     after the final LayerNorm) and logits, labels -> the head's inputs and targets
--     (core/hydra/vilu.h), every vilu.* training setting, seeded by cfg.seed. opts.data: the prepared
--     file (default: data.id's).
--   vilu.predict(head, m, ds, B) -> { probs, logits, labels, uncertainty } (one forward of m per
--     batch; uncertainty float32 [N]: higher = more likely an error, read as an OOD score too)
--   vilu.cost(head) -> params, flops per sample of the head alone (2 x multiply-adds)
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

M.KINDS = {
  vilu = { input = function(cfg) return cfg.vilu.input end,
           loss = function(cfg) return cfg.vilu.loss end },
  confidnet = { input = function() return "features" end, loss = function() return "tcp" end },
}

function M.fit(m, cfg, kind, opts)
  opts = opts or {}
  local k = M.KINDS[kind]
  if not k then err.fail("vilu: unknown head kind '%s' (vilu, confidnet)", tostring(kind)) end
  local vc = cfg.vilu
  local model = require("hydra.model")
  local path = opts.data or model.data_path(cfg, cfg.data.id)
  local ds = model.dataset(path, vc.split, vc.rows, m.norm)
  local B = cfg.train.eval_batch_size
  local z, logits = m.ud:features(ds, B)
  local head, loss, n_err = core.vilu_fit(vc, k.input(cfg), k.loss(cfg), z, logits, ds:labels(),
    m:param("head.weight"), cfg.seed)
  return head, { loss = loss, n_err = n_err, rows = ds:size(), split = vc.split }
end

function M.predict(head, m, ds, B)
  local z, logits, probs = m.ud:features(ds, B)
  return { probs = probs, logits = logits, labels = ds:labels(),
           uncertainty = head:score(z, logits, m:param("head.weight")) }
end

function M.cost(head)
  local i = head:info()
  local DI = i.input == "vilu" and 3 * i.d_features or i.d_features
  local H = i.hidden
  local params = DI * H + H + H * H + H + H + 1
  return params, 2 * (DI * H + H * H + H)
end

return M
