-- tests/lua/test_mimo.lua: MIMO (lua/hydra/methods/mimo.lua) on a tiny synthetic configuration:
-- the M-slot model config, a few training steps, members that differ, /member_probs, the cost
-- from hy_xfmr_cost of the M-slot model, the checkpoint /meta, clear errors.
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
    ["model.d_model"] = "16", ["model.n_heads"] = "2", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["train.epochs"] = "2", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32",
  }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return hydra.config.load("configs/data/tiny.yaml", ov)
end

local function quiet_ctx(cfg, cache_dir)
  return { cfg = cfg, progress = false, log = function() end,
           cache = hydra.stages.new({ dir = cache_dir, log = function() end }) }
end

function T.model_config_stacks_slots_and_heads()
  local mimo = require("hydra.methods.mimo")
  local mc = mimo.model_config(tiny_cfg({ ["mimo.members"] = "4" }))
  eq(mc.channels, 4, "one input channel per slot")
  eq(mc.n_classes, 40, "4 heads of 10")
  eq(mc.d_model, 16, "the backbone is unchanged")
  eq(mimo.describe(tiny_cfg()).members, 3, "members from mimo.members")
  raises("mimo: MIMO needs an image model (model.kind vit, got text)", function()
    local c = tiny_cfg()
    c.model.kind = "text"
    return mimo.model_config(c)
  end)
  raises("command line: mimo.input_repetition=2 must be >= 0 and <= 1 (got 2)", function()
    return tiny_cfg({ ["mimo.input_repetition"] = "2" })
  end)
end

-- the MIMO trainer resumes from a work file as hydra.Trainer does: stopped after epoch 1 and
-- resumed, the weights are bitwise those of the uninterrupted 3-epoch run
function T.training_resumes_bitwise()
  local mimo = require("hydra.methods.mimo")
  local cfg = tiny_cfg({ ["train.epochs"] = "3" })
  local c = hydra.config.copy(cfg)
  c.model = mimo.model_config(cfg)
  local idf = common.data_file(cfg, cfg.data.id)
  local work = check.tmpdir() .. "/mimo.work.h5"
  local function opts(extra)
    local o = { progress = false,
      trainer_new = function(ud, ds, tc, optim, seed)
        return core.mimo_trainer_new(ud, ds, tc, optim, seed, cfg.mimo)
      end,
      evaluate = function(ud, ds, b) return ud:mimo_evaluate(cfg.mimo.members, ds, b) end }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end
  local a = hydra.model.new(c, cfg.seed)
  a:train(idf, c, opts())
  local b = hydra.model.new(c, cfg.seed)
  eq(b:train(idf, c, opts({ work = work, work_tag = "m", stop_after = 1 })), nil, "stopped")
  local r = hydra.model.new(c, cfg.seed)
  r:train(idf, c, opts({ work = work, work_tag = "m" }))
  local x, y = a:get_params():flat(), r:get_params():flat()
  local same = #x == #y
  for i = 1, #x do same = same and x[i] == y[i] end
  ok(same, "resumed MIMO = uninterrupted, bitwise")
  eq(core.stat(work), nil, "work file removed")
end

function T.trains_and_predicts_every_member()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  local ctx = quiet_ctx(cfg, cache)
  local sets = common.sets(cfg)
  local mimo = require("hydra.methods.mimo")
  local p = mimo.build(ctx)
  eq(ctx.cache.built, 1, "one model trained")
  eq(p.cost.members, 3, "members")
  local flops, params = core.model_cost(hydra.model.core_config(mimo.model_config(cfg)))
  eq(p.cost.params, params, "params of the 3-slot model (hy_xfmr_cost)")
  eq(p:cost_on(sets[1]).flops, flops, "one forward")
  local single_flops = core.model_cost(hydra.model.core_config(cfg.model))
  ok(flops > single_flops and flops < 1.5 * single_flops,
    "one Single forward plus the wider patch projection and head")
  local g <close> = hydra.h5.open(p:predict(sets[1]))
  local mp, probs = g:read("/member_probs"), g:read("/probs")
  check.same(mp:shape(), { 3, 40, 10 }, "member_probs [M,N,C]")
  check.same(g:read("/member_logits"):shape(), { 3, 40, 10 }, "member_logits")
  local a, b = probs:totable(), core.mean_first(mp):totable()
  for i = 1, #a do
    for c = 1, #a[i] do near(a[i][c], b[i][c], 1e-6, "probs = mean of the members") end
  end
  local m1, m2 = mp:row(1):totable(), mp:row(2):totable()
  local d = 0
  for i = 1, #m1 do
    for c = 1, #m1[i] do d = math.max(d, math.abs(m1[i][c] - m2[i][c])) end
  end
  ok(d > 1e-3, ("heads differ (max |dp| %.3g)"):format(d))
  local f <close> = hydra.h5.open(ctx.cache.records[1].path)
  eq(f:attrs("/config").channels, 3, "/config channels = M")
  eq(f:attrs("/config").n_classes, 30, "/config n_classes = M K")
  eq(f:attrs("/meta").method, "mimo", "/meta method")
  eq(f:attrs("/meta").mimo_members, 3, "/meta mimo_members")
  check.same(f:read("/params/patch_embed.proj.weight"):shape(), { 16, 3, 7, 7 }, "patch proj")
  -- the same seed gives the same model; the key changes with a mimo.* setting
  local built = ctx.cache.built
  mimo.build(ctx)
  eq(ctx.cache.built, built, "a second build reuses the stage")
  local ctx2 = quiet_ctx(tiny_cfg({ ["mimo.input_repetition"] = "0.5" }), cache)
  mimo.build(ctx2)
  eq(ctx2.cache.built, 1, "another input_repetition is another model")
end

return T
