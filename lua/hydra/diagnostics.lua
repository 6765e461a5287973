-- lua/hydra/diagnostics.lua: what a Hydra (Circ) run records about its members, to explain a
-- seed whose ensemble collapses (results/README.md, "Circuit diagnostics").
--
--   diagnostics.circuit(ctx, pruned, result_file, sets) -> diag
--       ctx: the method's build context; pruned: the predictor's .pruned (methods/common.lua:
--       base_path, gates, member_paths, member_keys, objectives); result_file: the method's
--       `hydra eval` result (per-sample scores and member_probs); sets: common.sets(cfg).
--       diag = { attrs = { [group] = { k = v } }, data = { [path] = Tensor }, curves = {...} },
--       paths relative to /methods/<method>/diagnostics (hydra.run writes them).
local core = require("hydra.core")
local fs = require("hydra.fs")
local h5 = require("hydra.h5")

local M = {}

-- MSP scores of a single model on a dataset
local function msp(model, ds, B)
  local p = model:predict(ds, nil, { batch_size = B })
  return core.metrics_score("msp", p.probs)
end

local function mean_of(list)
  local s = 0
  for _, v in ipairs(list) do s = s + v end
  return #list > 0 and s / #list or 0 / 0
end

function M.circuit(ctx, pruned, result_file, sets)
  local cfg = ctx.cfg
  local common = require("hydra.methods.common")
  local model = require("hydra.model")
  local B = cfg.train.eval_batch_size
  local gates = pruned.gates
  local Mm = gates:size(1)
  local diag = { attrs = { [""] = {} }, data = {} }
  local top = diag.attrs[""]
  -- the circuits and their overlap
  local J, jmean = core.metrics_jaccard(gates)
  diag.data.gates, diag.data.overlap = gates, J
  top.members, top.overlap_mean = Mm, jmean
  top.objectives = table.concat(pruned.objectives or {}, ",")
  top.gates_stage = pruned.gates_key
  top.member_stages = table.concat(pruned.member_keys, ",")
  local curves = {}
  for m = 1, Mm do curves[m] = "/curves/member-" .. pruned.member_keys[m]:sub(1, 12) end
  diag.curves = curves
  -- member disagreement and mutual information on ID and every OOD set (means of the result's
  -- per-sample scores), each member's own MSP AUROC on every OOD set (from /member_probs)
  local f <close> = h5.open(result_file)
  local oods = fs.split_list(f:attrs("/").ood_sets)
  local function means(prefix, name)
    local a = {}
    for _, sc in ipairs({ "disagreement", "mi" }) do
      local p = prefix .. "/scores/" .. sc
      if f:exists(p) then a[sc] = core.metrics_mean(f:read(p, "float64")) end
    end
    diag.attrs["sets/" .. name] = a
  end
  means("/id", "id")
  -- one member's softmaxes [N,C] on a set (a one-member model's result has only /probs)
  local function member_probs(prefix, m)
    if f:exists(prefix .. "/member_probs") then
      return f:read(prefix .. "/member_probs", "float32"):row(m)
    end
    return f:read(prefix .. "/probs", "float32")
  end
  local member_id = {}
  for m = 1, Mm do member_id[m] = core.metrics_score("msp", member_probs("/id", m)) end
  local auroc = core.tensor("float64", Mm, math.max(#oods, 1))
  local member_avg = core.tensor("float64", Mm)
  for si, name in ipairs(oods) do
    means("/ood/" .. name, name)
    for m = 1, Mm do
      local sc = core.metrics_score("msp", member_probs("/ood/" .. name, m))
      auroc:set(m, si, core.metrics_ood(member_id[m], sc).auroc)
    end
  end
  for m = 1, Mm do
    local row = {}
    for si = 1, #oods do row[si] = auroc:get(m, si) end
    member_avg:set(m, mean_of(row))
  end
  if #oods > 0 then
    diag.data.member_ood_auroc, diag.data.member_ood_avg_auroc = auroc, member_avg
    top.ood_sets = table.concat(oods, ",")
  end
  -- the search's objective data against the test sets: each member's circuit on the base model
  -- (before fine-tuning, as the search scored it) and the fine-tuned member, MSP AUROC on the
  -- validation rows (prune.val_size of the ID val split and of data.ood_val) and on the test sets
  if cfg.data.ood_val and #oods > 0 then
    local base = model.load(pruned.base_path)
    local vid, vood = require("hydra.prune").validation(base, cfg)
    local norm = base.norm
    local test = {}
    for _, s in ipairs(sets) do
      if s.role == "id" or s.role == "ood" then test[s.name] = common.dataset(s, norm) end
    end
    local id_name = sets[1].name
    local val_base, val_member = core.tensor("float64", Mm), core.tensor("float64", Mm)
    local test_base = core.tensor("float64", Mm, #oods)
    local test_base_avg = core.tensor("float64", Mm)
    for m = 1, Mm do
      base:set_gates(gates:row(m))
      local sid = msp(base, vid, B)
      val_base:set(m, core.metrics_ood(sid, msp(base, vood, B)).auroc)
      local tid = msp(base, test[id_name], B)
      local row = {}
      for si, name in ipairs(oods) do
        row[si] = core.metrics_ood(tid, msp(base, test[name], B)).auroc
        test_base:set(m, si, row[si])
      end
      test_base_avg:set(m, mean_of(row))
      local mem = model.load(pruned.member_paths[m])
      val_member:set(m, core.metrics_ood(msp(mem, vid, B), msp(mem, vood, B)).auroc)
      mem:close()
    end
    base:close()
    diag.data.search_val_auroc, diag.data.search_test_auroc = val_base, test_base
    diag.data.search_test_ood_avg_auroc, diag.data.member_val_auroc = test_base_avg, val_member
    top.ood_val = cfg.data.ood_val
    top.val_rows = vid:size()
  end
  return diag
end

return M
