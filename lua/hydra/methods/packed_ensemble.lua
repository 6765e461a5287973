-- lua/hydra/methods/packed_ensemble.lua: Packed-Ensembles (Laurent et al., ICLR 2023) with the
-- authors' setting M = packed_ensemble.members = 3, alpha = packed_ensemble.alpha = 2, gamma = 1.
--
-- A packed model widens every layer by alpha and makes every linear block-diagonal over M groups
-- (torch-uncertainty's PackedLinear: a 1x1 convolution with groups = M * gamma; the first layer
-- dense, its output split by member; the last layer grouped with M * K outputs), every LayerNorm
-- a GroupNorm over the M groups (PackedLayerNorm), and attention runs each group's own heads
-- (PackedMultiheadAttention). With gamma = 1 no weight couples two groups, so the packed model
-- IS M independent narrower transformers, each of width alpha * d_model / M, that see the same
-- batches. That is how hydra builds it: member m is a plain model (model.* with the narrow
-- widths of M.member_model), trained from scratch (never from train.init: a pretrained encoder
-- has the full width, not the members') on the batch order of `seed` with the one
-- train/optim schedule, and the M members are fused with every fuse.* = member into one model
-- whose Q/K/V and output projections are the ragged grouped GEMM over the members (core/hydra/fused.c;
-- the block-diagonal layers of the packed model), so one forward pass gives every member.
-- Widths: alpha * x / M rounded to the nearest multiple of the head size HS = d_model / n_heads
-- (vit-fm: d_model 2 * 128 / 3 = 85.3 -> 80 = 5 heads of 16; d_mlp 2 * 512 / 3 = 341.3 -> 336;
-- torch-uncertainty instead keeps n_heads heads per group and rounds the width up to a multiple
-- of M). Member m is initialised from seed + m - 1; all are trained with the shuffling stream of
-- `seed`. What differs from training the packed tensor: train.grad_clip clips each member's
-- gradient norm (not the norm over the packed model), the loss of each member is its own mean
-- cross-entropy (the packed loss, a mean over the M * B rows, is 1/M of their sum: AdamW is
-- invariant to that scale up to optim.eps), and train.select_best picks each member's epoch.
-- Prediction: p̄ = mean of the members' softmaxes; /member_probs keeps each member.
-- Interface: lua/hydra/methods/common.lua. Checkpoint format: core/README.md ("Packed-Ensembles").
local common = require("hydra.methods.common")
local err = require("hydra.err")
local model = require("hydra.model")
local stages = require("hydra.stages")

local M = { name = "packed_ensemble", label = "Packed-Ensembles" }

local ALL_MEMBER = { mlp = "member", ln = "member", embed = "member", head = "member" }

-- alpha * x / members rounded to the nearest multiple of hs (at least hs).
local function packed_width(x, alpha, members, hs)
  local k = math.floor(alpha * x / (members * hs) + 0.5)
  return math.tointeger(hs * math.max(1, k))
end
M.packed_width = packed_width

-- The model section of one member: cfg.model with d_model, n_heads and d_mlp narrowed.
function M.member_model(cfg)
  local mc, pe = require("hydra.config").copy(cfg.model), cfg.packed_ensemble
  if mc.d_model % mc.n_heads ~= 0 then
    err.fail("packed_ensemble: model.d_model (%d) must be divisible by model.n_heads (%d)",
      mc.d_model, mc.n_heads)
  end
  local hs = mc.d_model // mc.n_heads
  mc.d_model = packed_width(cfg.model.d_model, pe.alpha, pe.members, hs)
  mc.n_heads = mc.d_model // hs
  mc.d_mlp = packed_width(cfg.model.d_mlp, pe.alpha, pe.members, hs)
  return mc
end

function M.describe(cfg)
  return { name = M.name, label = M.label, members = cfg.packed_ensemble.members,
           seeds = { cfg.seed }, needs = { ood_val = false } }
end

-- Member m (1-based): trained (or found in the stage cache); returns its checkpoint path, key.
local function member(ctx, mc, m)
  local cfg = common.with_seed(ctx.cfg, ctx.cfg.seed, ctx.cfg.model.dropout, true)
  local idf = common.data_file(cfg, cfg.data.id)
  local init_seed = cfg.seed + m - 1
  local inputs = {
    model = mc, train = cfg.train, optim = cfg.optim, seed = cfg.seed, init_seed = init_seed,
    data = { id = cfg.data.id, hash = stages.data_hash(idf), train_subset = cfg.data.train_subset,
             val_subset = cfg.data.test_subset },
  }
  return ctx.cache:get("packed_member", inputs, function(tmp, key)
    local c = require("hydra.config").copy(cfg)
    c.model = mc
    ctx.log("training packed member %d/%d (d_model %d, %d heads, d_mlp %d; init seed %d, "
      .. "batches of seed %d, %d epochs) ...", m, cfg.packed_ensemble.members, mc.d_model,
      mc.n_heads, mc.d_mlp, init_seed, cfg.seed, c.train.epochs)
    local mod = model.new(c, init_seed)
    local hist = mod:train(idf, c, {
      progress = ctx.progress,
      log = function(line) ctx.log("  %s", line) end,
      -- a per-epoch work file beside the stage: a kill loses at most one epoch
      work = ctx.cache:path("packed_member", key, ".work.h5"), work_tag = key,
      curves = ctx.cache:path("packed_member", key, ".curves.csv"),
    })
    mod:save(tmp, { seed = cfg.seed, init_seed = init_seed, stage = "packed_member",
                    stage_key = key, member = m, data_hash = inputs.data.hash,
                    best_epoch = hist.best_epoch or 0 })
  end)
end

function M.build(ctx)
  local cfg = ctx.cfg
  local pe = cfg.packed_ensemble
  local mc = M.member_model(cfg)
  local paths, keys = {}, {}
  for m = 1, pe.members do paths[m], keys[m] = member(ctx, mc, m) end
  local fpath, fkey = common.fused(ctx, paths, keys, ALL_MEMBER, {
    method = M.name, packed_alpha = pe.alpha, packed_gamma = 1,
    packed_d_model = cfg.model.d_model, packed_d_mlp = cfg.model.d_mlp,
  })
  return common.fused_predictor(ctx, fpath, fkey, { name = M.name, seeds = { cfg.seed } })
end

return M
