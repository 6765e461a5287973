-- lua/hydra/fuse.lua: the fused Hydra model for scripts (hydra.fuse; DESIGN §3.5).
--
--   local fuse = require("hydra").fuse
--   local f = fuse.build({ m1, m2, m3 }, cfg.fuse)   -- hydra.model Models (gated); the fuse
--                                                    -- section: fuse.mlp, .ln, .embed, .head
--   local f = fuse.load("fused.h5")
--   f:save(path)   f:info()   f:gates()
--   f:flops(T)  -> forward FLOPs of one sample at sequence length T (hy_fused_flops; text: T = 1 +
--                  tokens; f:info().flops is at the full length f:info().seq_len)
--   local p = f:predict(data_file, split, { batch_size = B [, subset = N] })
--     -> { probs = [N,C] (mean of member softmaxes), member_probs = [M,N,C],
--          member_logits = [M,N,C], labels = [N] }
-- Images are normalised with the data statistics recorded by the members (the first member's
-- checkpoint /meta data_mean, data_std), saved in the fused file's /meta.
local core = require("hydra.core")

local M = {}
local Fused = {}
Fused.__index = Fused
M.Fused = Fused

local function wrap(ud, norm)
  return setmetatable({ ud = ud, norm = norm }, Fused)
end

-- models: list of hydra.model Models (or raw hydra.Model userdata); fc: the fuse section (every
-- key given; the binding reads them by name).
function M.build(models, fc)
  local uds = {}
  for i, m in ipairs(models) do uds[i] = m.ud or m end
  local ud = core.fused_new(uds, fc)
  return wrap(ud, models[1] and models[1].norm)
end

function M.load(path)
  local ud = core.fused_load(path)
  local h5 = require("hydra.h5")
  local f <close> = h5.open(path)
  local norm
  if f:exists("/meta") then
    norm = require("hydra.model").checked_norm(path, f:attrs("/meta"))
  end
  return wrap(ud, norm)
end

-- True when path is a fused Hydra file (has /fuse).
function M.is_fused(path)
  local h5 = require("hydra.h5")
  if not h5.exists(path) then return false end
  local f <close> = h5.open(path)
  return f:exists("/fuse")
end

function Fused:info() return self.ud:info() end
function Fused:flops(T) return self.ud:flops(T) end
function Fused:gates() return self.ud:gates() end
function Fused:close() self.ud:close() end

-- Saves the fused file (atomic); meta: extra /meta attributes. The data normalisation the
-- members were trained with is recorded as /meta data_mean, data_std.
function Fused:save(path, meta)
  local m = {}
  for k, v in pairs(meta or {}) do m[k] = v end
  if self.norm then m.data_mean, m.data_std = self.norm[1], self.norm[2] end
  self.ud:save(path, m)
end

-- Predictions on a split of a prepared file (or a core Dataset). opts: batch_size (required; the
-- pipeline passes train.eval_batch_size), subset.
function Fused:predict(data, split, opts)
  opts = opts or {}
  local ds = data
  if type(data) == "string" then
    local model = require("hydra.model")
    ds = model.dataset(data, split, opts.subset, self.norm)
  end
  if math.type(opts.batch_size) ~= "integer" then
    error(("predict: opts.batch_size must be an integer (train.eval_batch_size; got %s)")
      :format(tostring(opts.batch_size)), 2)
  end
  local ml, probs, mp = self.ud:predict(ds, opts.batch_size)
  return { probs = probs, member_probs = mp, member_logits = ml, labels = ds:labels() }
end

return M
