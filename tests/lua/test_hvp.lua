-- tests/lua/test_hvp.lua: the HVP binding (core.hvp_grad, core.hvp, core.hvp_fold_gates,
-- core.vec_dot, core.vec_sub) against finite differences of m:evaluate's loss, and
-- hydra.prop1.measure (the Proposition 1 record) on a small trained model: no perturbation gives
-- zeros, a pruned member's loss is its own, and for a small perturbation the second-order
-- prediction matches the measured change of the loss gap. The exact-Hessian check of the HVP
-- itself is tests/c/test_hvp.c.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local eq, ok, near, raises_has = check.eq, check.ok, check.near, check.raises_has

local T = {}

local world
local function tiny()
  if world then return world end
  local d = check.tmpdir()
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 32, test = 40, seed = 2 })
  local cfg = hydra.config.load("configs/data/tiny.yaml", {
    ["data.dir"] = d, ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["train.epochs"] = "2", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32" })
  local m = hydra.model.new(cfg, 1)
  m:train(d .. "/tiny.h5", cfg, {})
  local base = d .. "/base.h5"
  m:save(base, {})
  local f <close> = hydra.h5.open(d .. "/tiny.h5")
  local im, lb = f:read("/test/images"), f:read("/test/labels")
  local noisy = core.dataset_from_images(core.corrupt(im, "gaussian_noise", 3, 1), lb,
    m.norm[1], m.norm[2])
  world = {
    dir = d, cfg = cfg, base = base,
    sets = { train = hydra.model.dataset(d .. "/tiny.h5", "train", 0, m.norm),
             clean = { name = "tiny", ds = hydra.model.dataset(d .. "/tiny.h5", "test", 0, m.norm) },
             noisy = { { name = "noisy", ds = noisy } } },
  }
  return world
end

local function perturbed(m, v, t)
  local th = m:get_params()
  local P, vn = th:numel(), math.sqrt(core.vec_dot(v, v))
  local q = core.tensor("float32", P)
  local a = th:flat()
  for i = 1, P do q:set(i, a[i] + t * v:get(i) / vn) end
  return q
end

function T.gradient_and_hvp_match_finite_differences_of_the_loss()
  local w = tiny()
  local m = hydra.model.load(w.base)
  local ds = w.sets.clean.ds
  local loss, g = core.hvp_grad(m.ud, ds, 16)
  near(loss, m:evaluate(ds, nil, { batch_size = 40 }).nll, 1e-6, "loss = evaluate's NLL")
  eq(g:numel(), m:params_count(), "one gradient entry per parameter")
  eq(g:dtype(), "float64", "gradient in double")
  local th = m:get_params()
  local P = th:numel()
  local v = core.tensor("float64", P)
  for i = 1, P do v:set(i, math.sin(i * 1.7)) end
  local vn = math.sqrt(core.vec_dot(v, v))
  local function L(t)
    m:set_params(perturbed(m, v, t))
    local l = m:evaluate(ds, nil, { batch_size = 40 }).nll
    m:set_params(th)
    return l
  end
  local e = 1e-2
  local slope = (L(e) - L(-e)) / (2 * e)
  near(core.vec_dot(g, v) / vn, slope, 1e-3 * math.abs(slope), "grad^T v = dL/dt")
  local hv, l2 = core.hvp(m.ud, ds, 16, v, 1e-3 * math.sqrt(core.vec_dot(th, th)))
  near(l2, loss, 1e-4, "loss at theta +- h u")
  local curv = (L(e) + L(-e) - 2 * L(0)) / (e * e)
  near(core.vec_dot(v, hv) / (vn * vn), curv, 2e-3 * math.abs(curv), "v^T H v = d2L/dt2")
  check.same(m:get_params():totable(), th:totable(), "parameters restored")
  -- a float32 direction gives the same H v
  local v32 = core.tensor("float32", P)
  for i = 1, P do v32:set(i, v:get(i)) end
  local hv32 = core.hvp(m.ud, ds, 16, v32, 1e-3 * math.sqrt(core.vec_dot(th, th)))
  near(core.vec_dot(v32, hv32), core.vec_dot(v, hv), 1e-4 * math.abs(core.vec_dot(v, hv)),
    "float32 direction")
  -- vector helpers and argument errors
  local a, b = core.from_table("float32", { 1, 2, 3 }), core.from_table("float64", { 0.5, 4, -1 })
  eq(core.vec_dot(a, b), 0.5 + 8 - 3, "vec_dot")
  check.same(core.vec_sub(a, b):totable(), { 0.5, -2, 4 }, "vec_sub")
  raises_has("hvp: argument 2 has 2 elements, expected 3", function()
    return core.vec_dot(a, core.from_table("float32", { 1, 2 }))
  end)
  raises_has("hvp: argument 4 has 3 elements", function() return core.hvp(m.ud, ds, 16, a, 1) end)
  raises_has("hvp: the step h must be a finite number > 0", function()
    return core.hvp(m.ud, ds, 16, v, 0)
  end)
  raises_has("hvp: batch size must be >= 1", function() return core.hvp_grad(m.ud, ds, 0) end)
end

local OPTS = { batch = 16, hvp_step = 1e-3, bins = 15 }

function T.prop1_record_of_the_unpruned_model_is_zero()
  local w = tiny()
  local base = hydra.model.load(w.base)
  local at = hydra.prop1.at_theta(base, w.sets, OPTS)
  ok(at.grad_train_norm > 0, "a trained model's train gradient is not exactly 0")
  local r = hydra.prop1.measure(base, w.base, w.sets, at, OPTS)
  eq(r.dtheta_norm, 0, "dtheta = 0")
  for _, k in ipairs({ "train_gdot", "train_vhv", "tiny_gdot", "tiny_vhv", "noisy_gdot",
                       "noisy_vhv", "noisy_pred" }) do
    eq(r[k], 0, k)
  end
  -- the losses at theta (hvp_grad: batch means weighted in double) and theta + dtheta (evaluate:
  -- a sum over samples) are summed in other orders: equal up to rounding
  near(r.noisy_dgap, 0, 1e-12, "noisy_dgap")
  near(r.noisy_loss1, r.noisy_loss0, 1e-6, "same loss")
  eq(r.noisy_ece1, r.noisy_ece0, "same ECE")
  ok(r.noisy_gap0 > 0, "the corrupted set has the larger loss")
end

function T.prop1_pruned_and_perturbed_members()
  local w = tiny()
  local base = hydra.model.load(w.base)
  local at = hydra.prop1.at_theta(base, w.sets, OPTS)
  -- a pruned member (one head of each layer off, no fine-tuning): its loss is its own
  local m = hydra.model.load(w.base)
  m:set_gates({ { 1, 0, 1, 1 }, { 1, 1, 0, 1 } })
  local path = w.dir .. "/pruned.h5"
  m:save(path, {})
  local r = hydra.prop1.measure(base, path, w.sets, at, OPTS)
  near(r.noisy_loss1, m:evaluate(w.sets.noisy[1].ds, nil, { batch_size = 40 }).nll, 1e-6,
    "loss at theta + dtheta = the pruned model's")
  ok(r.dtheta_norm > 0, "pruning moves theta")
  near(r.noisy_dgap, r.noisy_gap1 - r.noisy_gap0, 1e-12, "dgap")
  near(r.noisy_pred, r.noisy_gdot - r.tiny_gdot + 0.5 * (r.noisy_vhv - r.tiny_vhv), 1e-12, "pred")
  -- a small perturbation: the second-order prediction is the measured change of the gap
  local th = base:get_params()
  local P = th:numel()
  local v = core.tensor("float64", P)
  for i = 1, P do v:set(i, math.cos(i * 0.37)) end
  local q = hydra.model.load(w.base)
  q:set_params(perturbed(q, v, 0.05 * math.sqrt(core.vec_dot(th, th)) * 0.1))
  local qp = w.dir .. "/perturbed.h5"
  q:save(qp, {})
  local s = hydra.prop1.measure(base, qp, w.sets, at, OPTS)
  ok(math.abs(s.noisy_dgap) > 1e-4, "the perturbation changes the gap")
  near(s.noisy_pred, s.noisy_dgap, 0.05 * math.abs(s.noisy_dgap),
    ("second-order prediction %.6g vs measured %.6g"):format(s.noisy_pred, s.noisy_dgap))
end

return T
