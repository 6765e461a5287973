-- tests/lua/test_packed.lua: Packed-Ensembles (lua/hydra/methods/packed_ensemble.lua) on a tiny
-- synthetic configuration: member widths, a few training steps, members that differ, the fused
-- one-pass predictions (/member_probs), the cost from hy_xfmr_cost, the file format.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local common = require("hydra.methods.common")
local eq, ok, near, raises = check.eq, check.ok, check.near, check.raises

local T = {}

local data_cache
local function data_dir()
  if data_cache then return data_cache end
  local d = check.tmpdir()
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 32, test = 40, seed = 2 })
  hydra.model.write_synthetic(d .. "/tinyood.h5", { train = 8, val = 8, test = 24, seed = 5,
                                                    classes = 3 })
  data_cache = d
  return d
end

local function tiny_cfg(extra)
  local ov = {
    ["data.dir"] = data_dir(), ["data.ood"] = "[tinyood]", ["data.shift"] = "[]",
    ["model.d_model"] = "24", ["model.n_heads"] = "3", ["model.depth"] = "2",
    ["model.d_mlp"] = "48", ["train.epochs"] = "1", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32",
  }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return hydra.config.load("configs/data/tiny.yaml", ov)
end

local function quiet_ctx(cfg, cache_dir)
  return { cfg = cfg, progress = false, log = function() end,
           cache = hydra.stages.new({ dir = cache_dir, log = function() end }) }
end

function T.member_widths_round_to_the_head_size()
  local pe = require("hydra.methods.packed_ensemble")
  -- vit-fm: 2 * 128 / 3 = 85.3 -> 80 (5 heads of 16); 2 * 512 / 3 = 341.3 -> 336
  local ref = hydra.config.load("configs/models/vit-fm.yaml")
  local mc = pe.member_model(ref)
  eq(mc.d_model, 80, "vit-fm member d_model")
  eq(mc.n_heads, 5, "vit-fm member heads")
  eq(mc.d_mlp, 336, "vit-fm member d_mlp")
  -- vit-fm-tiny (head size 8): 2 * 64 / 3 = 42.7 -> 40; 2 * 256 / 3 = 170.7 -> 168
  local tiny = pe.member_model(hydra.config.load("configs/models/vit-fm-tiny.yaml"))
  eq(tiny.d_model, 40, "tiny member d_model")
  eq(tiny.n_heads, 5, "tiny member heads")
  eq(tiny.d_mlp, 168, "tiny member d_mlp")
  eq(pe.packed_width(128, 3, 3, 16), 128, "alpha = M keeps the width")
  eq(pe.packed_width(8, 2, 3, 16), 16, "never narrower than one head")
  local d = pe.describe(tiny_cfg({ ["packed_ensemble.members"] = "4" }))
  eq(d.members, 4, "members from packed_ensemble.members")
  raises("command line: packed_ensemble.alpha=0 must be > 0 and <= 16 (got 0)", function()
    return tiny_cfg({ ["packed_ensemble.alpha"] = "0" })
  end)
end

function T.trains_fuses_and_predicts_every_member()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  local ctx = quiet_ctx(cfg, cache)
  local sets = common.sets(cfg)
  local pe = require("hydra.methods.packed_ensemble")
  local p = pe.build(ctx)
  eq(ctx.cache.built, 4, "3 members + the fused model")
  eq(p.cost.members, 3, "members")
  -- cost: the members' hy_xfmr_cost added (16 wide, 2 heads, d_mlp 32)
  local mc = hydra.model.core_config(pe.member_model(cfg))
  local flops, params = core.model_cost(mc)
  eq(p.cost.params, 3 * params, "params = 3 x a member")
  near(p:cost_on(sets[1]).flops, 3 * flops, 1e-9, "flops = 3 x a member")
  local g <close> = hydra.h5.open(p:predict(sets[1]))
  local mp, probs = g:read("/member_probs"), g:read("/probs")
  check.same(mp:shape(), { 3, 40, 10 }, "member_probs [M,N,C]")
  local a, b = probs:totable(), core.mean_first(mp):totable()
  for i = 1, #a do
    for c = 1, #a[i] do near(a[i][c], b[i][c], 1e-6, "probs = mean of the members") end
  end
  -- the members differ (independent inits, same batches)
  local m1, m2, m3 = mp:row(1):totable(), mp:row(2):totable(), mp:row(3):totable()
  local d12, d23 = 0, 0
  for i = 1, #m1 do
    for c = 1, #m1[i] do
      d12 = math.max(d12, math.abs(m1[i][c] - m2[i][c]))
      d23 = math.max(d23, math.abs(m2[i][c] - m3[i][c]))
    end
  end
  ok(d12 > 1e-3 and d23 > 1e-3, ("members differ (max |dp| %.3g, %.3g)"):format(d12, d23))
  -- the fused file: member-config /config, every fuse.* member, /meta method
  local fused_path
  for _, r in ipairs(ctx.cache.records) do if r.name == "fused" then fused_path = r.path end end
  local f <close> = hydra.h5.open(fused_path)
  eq(f:attrs("/config").d_model, 16, "/config is a member's")
  eq(f:attrs("/fuse").mlp, "member", "fuse.mlp member")
  eq(f:attrs("/fuse").members, 3, "/fuse members")
  eq(f:attrs("/meta").method, "packed_ensemble", "/meta method")
  eq(f:attrs("/meta").packed_alpha, 2.0, "/meta packed_alpha")
  check.same(f:read("/members/2/blocks.1.attn.qkv.weight"):shape(), { 48, 16 }, "member qkv")
  local built = ctx.cache.built
  pe.build(ctx)
  eq(ctx.cache.built, built, "a second build reuses every stage")
end

return T
