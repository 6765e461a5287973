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
--          member_logits = [M,N,C], labels = [N], precision }
--   f:set_precision("fp32" | "bf16") -> the precision in force (Model:set_precision)
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

-- Why members (hydra.model Models loaded from paths[i]) must not be fused together, or nil:
-- the same member twice (identical files, or one gates file's row twice: /meta gates_sha256 and
-- member), members of different gates files (gates_sha256; a member recording none beside one
-- that does counts as different), members fine-tuned from different base checkpoints
-- (base_checkpoint_sha256, else the pipeline's base_stage), or a member whose gates were
-- pruned from another checkpoint than its base (gates_checkpoint_sha256). `hydra fuse` refuses
-- these unless --allow-mixed; members written by `hydra finetune` record all of it.
function M.mixed_members(models, paths)
  local file_of, row_of = {}, {}
  local function meta(i) return models[i].meta or {} end
  local function name(i) return ("MEMBER.h5 #%d '%s'"):format(i, paths[i]) end
  for i = 1, #models do
    local sha = core.file_sha256(paths[i])
    if file_of[sha] then
      return ("%s and #%d are the same member (identical files)"):format(name(file_of[sha]), i)
    end
    file_of[sha] = i
    local m = meta(i)
    if type(m.gates_sha256) == "string" and math.type(m.member) == "integer" then
      local row = m.gates_sha256 .. ":" .. m.member
      if row_of[row] then
        return ("%s and #%d are both member %d of the gates file %s"):format(name(row_of[row]),
          i, m.member, m.gates_sha256:sub(1, 16))
      end
      row_of[row] = i
    end
  end
  local g1, b1 = meta(1).gates_sha256, meta(1).base_checkpoint_sha256
    or (meta(1).base_stage and "stage " .. tostring(meta(1).base_stage))
  for i = 1, #models do
    local m = meta(i)
    local b = m.base_checkpoint_sha256 or (m.base_stage and "stage " .. tostring(m.base_stage))
    if m.gates_sha256 ~= g1 then
      return ("the members come from different gates files: #1 from %s, %s from %s (fuse the "
        .. "members of one pruning)"):format(g1 and g1:sub(1, 16) or "none recorded", name(i),
        m.gates_sha256 and m.gates_sha256:sub(1, 16) or "none recorded")
    end
    if b ~= b1 then
      return ("the members were fine-tuned from different base checkpoints: #1 from %s, %s from "
        .. "%s"):format(b1 and b1:sub(1, 16) or "none recorded", name(i),
        b and b:sub(1, 16) or "none recorded")
    end
    local gc = m.gates_checkpoint_sha256
    if type(gc) == "string" and type(m.base_checkpoint_sha256) == "string"
        and gc ~= m.base_checkpoint_sha256 then
      return ("%s applies gates pruned from another checkpoint (%s) to its base %s"):format(
        name(i), gc:sub(1, 16), m.base_checkpoint_sha256:sub(1, 16))
    end
  end
  return nil
end

-- True when path is a fused Hydra file (has /fuse).
function M.is_fused(path)
  local h5 = require("hydra.h5")
  if not h5.exists(path) then return false end
  local f <close> = h5.open(path)
  return f:exists("/fuse")
end

-- The arithmetic of predict ("fp32" | "bf16"), as Model:set_precision; returns the precision
-- in force, kept in self.precision.
function Fused:set_precision(p)
  self.precision = self.ud:set_precision(p)
  return self.precision
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
  return { probs = probs, member_probs = mp, member_logits = ml, labels = ds:labels(),
           precision = self.precision or "fp32" }
end

return M
