-- lua/hydra/prop1.lua: the measurements of the paper's Proposition 1 (experiments/prop1.lua).
--
-- Proposition 1: with a zero training gradient (grad L_D(theta) = 0), a pruning perturbation
-- dtheta with grad L_Dn(theta)^T dtheta >= 0 and a larger Hessian on noisy data
-- (H_n - H_t positive along dtheta), the noisy-vs-clean loss gap grows under pruning:
-- DeltaL(theta) <= DeltaL(theta + dtheta), DeltaL = L_Dn - L_Dt. Its second-order argument:
--   DeltaL(theta + dtheta) - DeltaL(theta)
--     ~ (grad L_Dn - grad L_Dt)^T dtheta + 1/2 dtheta^T (H_n - H_t) dtheta.
--
--   local prop1 = require("hydra.prop1")
--   local at = prop1.at_theta(base, sets, opts)          -- losses and gradients at theta (once
--                                                        -- per base model)
--   local r = prop1.measure(base, pruned_path, sets, at, opts) -- one pruned model
--
-- base: a hydra.model Model; pruned_path: a member checkpoint (the base architecture with its
-- gates set and its fine-tuned weights). dtheta = fold(pruned) - theta: the pruned model's gates folded into its
-- output projections (core.hvp_fold_gates) make it a point of the unpruned parameter space with
-- the same forward, so dtheta includes the fine-tuning when there is any.
-- sets = { train = Dataset (the training rows of condition 1), clean = { name, ds } (D_t, the
-- ID test rows), noisy = { { name, ds }... } (D_n: one per Fashion-MNIST-C severity) }.
-- OOD sets are left out: they have no labels, so L_Dn is undefined on them (a loss against the
-- model's own prediction would measure confidence, not the shift Proposition 1 is about).
-- opts: batch (rows per pass), hvp_step (the HVP's perturbation length relative to |theta|,
-- core/nn/hvp.h), bins (ECE bins).
--
-- measure returns a flat record (numbers keyed by name; per noisy set `<name>.<quantity>`):
--   theta_norm, dtheta_norm, grad_train_norm (|grad L_D(theta)| on the train rows),
--   train_gdot (grad L_D^T dtheta), train_vhv (dtheta^T H_D dtheta),
--   clean_* and <set>_*: loss0 / loss1 (at theta / theta + dtheta), gdot (grad^T dtheta),
--   vhv (dtheta^T H dtheta), ece0 / ece1, nll0 / nll1, acc0 / acc1;
--   <set>_gap0 / _gap1 (DeltaL), _dgap (gap1 - gap0, measured), _gdot_diff
--   ((grad L_Dn - grad L_Dt)^T dtheta), _vhv_diff (dtheta^T (H_n - H_t) dtheta), _pred (the
--   second-order prediction of dgap).
-- Every pass over a set is a full-batch mean (core/nn/hvp.h): gradient and HVP are those of the
-- whole set's mean loss, accumulated in double.
--
--   prop1.STATEMENTS                 the statements counted over the points: id, label (the
--                                    report's), title (paper_repro.md's), per_point (counted
--                                    once per point, not per noisy set), holds(r, set, clean)
--   prop1.summary_rows(recs, clean, noisy) -> rows, keys   the result summary (hydra.paper's
--                                    values.csv layout) of the records (measure's, with
--                                    method, ft, k, seed added): a row per pruned point
--                                    (dtheta != 0) and a row per statement, values per seed
local core = require("hydra.core")
local metrics = require("hydra.metrics")

local M = {}

M.STATEMENTS = {
  { id = "c1", per_point = true,
    label = "Condition 1 (grad L_D(theta) ~ 0: |grad L_D^T dtheta| <= 0.1 x "
      .. "|1/2 dtheta^T H_D dtheta|)",
    title = "C1: ∇L_D(θ) ≈ 0 (|∇L_Dᵀδθ| ≤ 0.1·|½δθᵀH_Dδθ| on the train rows)",
    holds = function(r) return math.abs(r.train_gdot) <= 0.1 * math.abs(0.5 * r.train_vhv) end },
  { id = "c2", label = "Condition 2 (grad L_Dn(theta)^T dtheta >= 0)",
    title = "C2: ∇L_Dn(θ)ᵀδθ ≥ 0",
    holds = function(r, s) return r[s .. "_gdot"] >= 0 end },
  { id = "c3", label = "Condition 3 (dtheta^T (H_n - H_t) dtheta > 0)",
    title = "C3: δθᵀ(H_n − H_t)δθ > 0",
    holds = function(r, s) return r[s .. "_vhv_diff"] > 0 end },
  { id = "conclusion", label = "Conclusion (DeltaL(theta) <= DeltaL(theta + dtheta))",
    title = "Conclusion: ΔL(θ) ≤ ΔL(θ + δθ)",
    holds = function(r, s) return r[s .. "_gap1"] >= r[s .. "_gap0"] end },
  { id = "second_order", label = "Second-order prediction has the sign of the measured change",
    title = "The second-order prediction has the sign of the measured change of ΔL",
    holds = function(r, s) return (r[s .. "_pred"] >= 0) == (r[s .. "_dgap"] >= 0) end },
  { id = "ece_gap", label = "Calibration gap grows (ECE_n - ECE_t larger at theta + dtheta)",
    title = "The calibration gap ECE_n − ECE_t grows",
    holds = function(r, s, clean)
      return r[s .. "_ece1"] - r[clean .. "_ece1"] >= r[s .. "_ece0"] - r[clean .. "_ece0"]
    end },
  { id = "nll_gap", label = "NLL gap grows (NLL_n - NLL_t larger at theta + dtheta)",
    title = "The NLL gap NLL_n − NLL_t grows",
    holds = function(r, s, clean)
      return r[s .. "_nll1"] - r[clean .. "_nll1"] >= r[s .. "_nll0"] - r[clean .. "_nll0"]
    end },
}

-- the summary's keys: per pruned point, and the statements' share
M.POINT_KEYS = { "dgap", "ece_gap_change", "clean_acc", "c2", "c3", "conclusion" }

-- A pruned point's row id and label (hydra.paper's row_id: the method and the sweep values)
function M.point_row(method, ft, k)
  local id = require("hydra.paper").row_id(method, { ["finetune.epochs"] = tostring(ft),
                                                     ["hydra.keep_heads"] = tostring(k) })
  return id, ("%s, %s, %d head%s kept"):format(method == "taylor" and "Taylor" or "Circuit (avg)",
    ft > 0 and ("fine-tuned %d epoch%s"):format(ft, ft == 1 and "" or "s") or "no fine-tuning",
    k, k == 1 and "" or "s")
end

function M.summary_rows(recs, clean, noisy)
  local rows, by_id = {}, {}
  local function row(id, label)
    if not by_id[id] then
      by_id[id] = { id = id, label = label, values = {} }
      rows[#rows + 1] = by_id[id]
    end
    return by_id[id]
  end
  local function share(pred, r)
    local yes = 0
    for _, s in ipairs(noisy) do if pred(r, s, clean) then yes = yes + 1 end end
    return yes / #noisy
  end
  local top = noisy[#noisy]
  local st_yes, st_n = {}, {}
  for _, r in ipairs(recs) do
    if r.dtheta_norm > 0 then
      local id, label = M.point_row(r.method, r.ft, r.k)
      local dg = 0
      for _, s in ipairs(noisy) do dg = dg + r[s .. "_dgap"] end
      local by = {}
      for _, st in ipairs(M.STATEMENTS) do by[st.id] = st end
      row(id, label).values[r.seed] = {
        dgap = dg / #noisy,
        ece_gap_change = (r[top .. "_ece1"] - r[clean .. "_ece1"])
          - (r[top .. "_ece0"] - r[clean .. "_ece0"]),
        clean_acc = r[clean .. "_acc1"],
        c2 = share(by.c2.holds, r), c3 = share(by.c3.holds, r),
        conclusion = share(by.conclusion.holds, r) }
      for _, st in ipairs(M.STATEMENTS) do
        local k = st.id .. "\0" .. r.seed
        local yes, n = 0, 0
        if st.per_point then
          n, yes = 1, st.holds(r, noisy[1], clean) and 1 or 0
        else
          n, yes = #noisy, share(st.holds, r) * #noisy
        end
        st_yes[k], st_n[k] = (st_yes[k] or 0) + yes, (st_n[k] or 0) + n
      end
    end
  end
  local seeds, seen = {}, {}
  for _, r in ipairs(recs) do
    if not seen[r.seed] then seen[r.seed] = true; seeds[#seeds + 1] = r.seed end
  end
  for _, st in ipairs(M.STATEMENTS) do
    local rw = row(st.id, st.title)
    for _, seed in ipairs(seeds) do
      local k = st.id .. "\0" .. seed
      if st_n[k] then rw.values[seed] = { share = st_yes[k] / st_n[k] } end
    end
  end
  local keys = {}
  for i, k in ipairs(M.POINT_KEYS) do keys[i] = k end
  keys[#keys + 1] = "share"
  return rows, keys
end

local function calib(model, ds, opts)
  local p = model:predict(ds, nil, { batch_size = opts.batch })
  local ps = metrics.per_sample({ probs = p.probs, logits = p.logits, labels = p.labels })
  local c = metrics.classification(ps, opts.bins)
  return { ece = c.ece, nll = c.nll, acc = c.acc }
end

-- Quantities at theta (the base model), reused by every pruned model of that base: the
-- parameters, the gradient and loss on every set, calibration on the labelled test sets.
function M.at_theta(base, sets, opts)
  local ud = base.ud
  local at = { theta = ud:get_params(), grad = {}, loss = {}, cal = {} }
  at.theta_norm = math.sqrt(core.vec_dot(at.theta, at.theta))
  local function one(name, ds, with_cal)
    at.loss[name], at.grad[name] = core.hvp_grad(ud, ds, opts.batch)
    if with_cal then at.cal[name] = calib(base, ds, opts) end
  end
  one("train", sets.train, false)
  one(sets.clean.name, sets.clean.ds, true)
  for _, s in ipairs(sets.noisy) do one(s.name, s.ds, true) end
  at.grad_train_norm = math.sqrt(core.vec_dot(at.grad.train, at.grad.train))
  return at
end

function M.measure(base, pruned_path, sets, at, opts)
  local model = require("hydra.model")
  local ud = base.ud
  local r = { theta_norm = at.theta_norm, grad_train_norm = at.grad_train_norm }
  local pruned = model.load(pruned_path)
  -- theta + dtheta: the pruned weights with the gates folded in (a second copy)
  local folded = model.load(pruned_path)
  core.hvp_fold_gates(folded.ud)
  local dtheta = core.vec_sub(folded:get_params(), at.theta)
  folded:close()
  r.dtheta_norm = math.sqrt(core.vec_dot(dtheta, dtheta))
  local h = opts.hvp_step * at.theta_norm
  -- dtheta^T H dtheta on a set (0 without any pass when dtheta = 0)
  local function vhv(ds)
    local hv = core.hvp(ud, ds, opts.batch, dtheta, h)
    return core.vec_dot(dtheta, hv)
  end
  r.train_gdot = core.vec_dot(at.grad.train, dtheta)
  r.train_vhv = vhv(sets.train)
  local function side(name, ds)
    local ev = pruned:evaluate(ds, nil, { batch_size = opts.batch })
    local c1 = calib(pruned, ds, opts)
    local c0 = at.cal[name]
    r[name .. "_loss0"], r[name .. "_loss1"] = at.loss[name], ev.nll
    r[name .. "_gdot"] = core.vec_dot(at.grad[name], dtheta)
    r[name .. "_vhv"] = vhv(ds)
    r[name .. "_ece0"], r[name .. "_ece1"] = c0.ece, c1.ece
    r[name .. "_nll0"], r[name .. "_nll1"] = c0.nll, c1.nll
    r[name .. "_acc0"], r[name .. "_acc1"] = c0.acc, c1.acc
  end
  local cn = sets.clean.name
  side(cn, sets.clean.ds)
  for _, s in ipairs(sets.noisy) do
    local n = s.name
    side(n, s.ds)
    r[n .. "_gap0"] = r[n .. "_loss0"] - r[cn .. "_loss0"]
    r[n .. "_gap1"] = r[n .. "_loss1"] - r[cn .. "_loss1"]
    r[n .. "_dgap"] = r[n .. "_gap1"] - r[n .. "_gap0"]
    r[n .. "_gdot_diff"] = r[n .. "_gdot"] - r[cn .. "_gdot"]
    r[n .. "_vhv_diff"] = r[n .. "_vhv"] - r[cn .. "_vhv"]
    r[n .. "_pred"] = r[n .. "_gdot_diff"] + 0.5 * r[n .. "_vhv_diff"]
  end
  pruned:close()
  return r
end

return M
