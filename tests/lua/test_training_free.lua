-- tests/lua/test_training_free.lua: the training-free setting (finetune.epochs: 0, DESIGN §3.4,
-- experiments/table_training_free.lua): Taylor, CircAvg, Hydra (Taylor) and Hydra (Circ) built
-- from the trained Single with no gradient step change no weight of it (bitwise; members differ
-- only in their head gates), so the fused model's merged MLP is exactly the Single's; and the
-- learned error predictors (methods vilu, confidnet) on a very small synthetic configuration.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local common = require("hydra.methods.common")
local eq, ok = check.eq, check.ok

local T = {}

local data_cache
local function data_dir()
  if data_cache then return data_cache end
  local d = check.tmpdir()
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 48, test = 40, seed = 2 })
  hydra.model.write_synthetic(d .. "/tinyood.h5", { train = 8, val = 8, test = 24, seed = 5,
                                                    classes = 3 })
  hydra.model.write_synthetic(d .. "/tinyoodval.h5", { train = 8, val = 24, test = 8, seed = 6,
                                                       classes = 3 })
  data_cache = d
  return d
end

local function tiny_cfg(extra)
  local ov = {
    ["data.dir"] = data_dir(), ["data.ood"] = "[tinyood]", ["data.ood_val"] = "tinyoodval",
    ["data.test_subset"] = "0", ["data.shift"] = "[]",
    ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["train.epochs"] = "1", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32", ["prune.calib_size"] = "32", ["hydra.keep_heads"] = "2",
    ["hydra.members"] = "3", ["finetune.epochs"] = "0",
  }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return hydra.config.load("configs/data/tiny.yaml", ov)
end

local function quiet_ctx(cfg, cache_dir)
  return { cfg = cfg, progress = false, log = function() end,
           cache = hydra.stages.new({ dir = cache_dir, log = function() end }) }
end

-- Number of elements of two float32 tensors that differ (float32 -> Lua float is exact and
-- injective up to the sign of zero and NaN payloads, so == on the converted values is bitwise
-- but for those; -0 vs +0 is counted as a difference through 1/x).
local function differ(a, b)
  local x, y = a:flat(), b:flat()
  if #x ~= #y then return math.huge end
  local n = 0
  for i = 1, #x do
    if x[i] ~= y[i] or (x[i] == 0 and 1 / x[i] ~= 1 / y[i]) then n = n + 1 end
  end
  return n
end

local function is_attn(name) return name:match("%.attn%.") ~= nil end

-- The pruned pipeline of a method, stage by stage (common.pruned_method's steps): base path,
-- gates [M,L,H], member checkpoint paths, fused file path.
local function pipeline(ctx, variant)
  local base, bkey = common.base_model(ctx)
  local _, gkey, gates = common.gates(ctx, base, bkey, variant)
  local paths, keys = {}, {}
  for m = 1, gates:size(1) do
    paths[m], keys[m] = common.member(ctx, base, bkey, gkey, gates, m)
  end
  return base, gates, paths, (common.fused(ctx, paths, keys))
end

local VARIANTS = {
  taylor = { method = "taylor", single = true },
  circavg = { method = "circuit", objective = "avg", single = true },
  hydra_taylor = { method = "taylor" },
  hydra_circ = { method = "circuit" },
}

-- Every weight of every member checkpoint and every non-attention weight of the fused file (the
-- merged MLP under /shared, each member's LayerNorms, embedding and head under /members/m)
-- bitwise the Single's; returns the count of differing tensors and a description of the first.
local function changed_weights(cfg, name, cache)
  local ctx = quiet_ctx(cfg, cache)
  local base_path, gates, members, fused = pipeline(ctx, VARIANTS[name])
  local base = hydra.model.load(base_path)
  local bad, first = 0, nil
  local function note(what) bad = bad + 1; first = first or what end
  for m, p in ipairs(members) do
    local mm = hydra.model.load(p)
    for _, pn in ipairs(base:param_names()) do
      if differ(mm:param(pn), base:param(pn)) > 0 then note(("member %d %s"):format(m, pn)) end
    end
    -- the member is the Single with member m's gates and nothing else
    if differ(mm:gates(), gates:row(m)) > 0 then note(("member %d gates"):format(m)) end
    mm:close()
  end
  local f <close> = hydra.h5.open(fused)
  for _, pn in ipairs(base:param_names()) do
    if not is_attn(pn) then
      local shared = "/shared/" .. pn
      if f:exists(shared) then
        if differ(f:read(shared, "float32"), base:param(pn)) > 0 then note(shared) end
      else
        for m = 0, #members - 1 do
          local g = ("/members/%d/%s"):format(m, pn)
          ok(f:exists(g), name .. ": the fused file has " .. g)
          if differ(f:read(g, "float32"), base:param(pn)) > 0 then note(g) end
        end
      end
    end
  end
  ok(f:exists("/shared/blocks.0.mlp.fc1.weight") or cfg.fuse.mlp == "member",
    name .. ": merged MLP under /shared")
  base:close()
  return bad, first, gates
end

function T.training_free_methods_change_no_weight_of_the_single()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  for _, name in ipairs({ "taylor", "circavg", "hydra_taylor", "hydra_circ" }) do
    local bad, first, gates = changed_weights(cfg, name, cache)
    eq(bad, 0, name .. ": tensors changed by the training-free pipeline (first: "
      .. tostring(first) .. ")")
    -- pruning happened: every member gates off heads
    local kept = 0
    for _, v in ipairs(gates:flat()) do kept = kept + v end
    eq(kept, gates:size(1) * 2 * 2, name .. ": 2 of 4 heads kept per layer and member")
  end
end

function T.members_keep_identical_mlps_when_not_merged()
  -- fuse.mlp: member keeps one MLP per member: with finetune.epochs 0 they are all the Single's
  local cache = check.tmpdir()
  local cfg = tiny_cfg({ ["fuse.mlp"] = "member" })
  local ctx = quiet_ctx(cfg, cache)
  local _, _, members, fused = pipeline(ctx, VARIANTS.hydra_circ)
  local f <close> = hydra.h5.open(fused)
  ok(not f:exists("/shared/blocks.0.mlp.fc1.weight"), "per-member MLPs")
  for l = 0, 1 do
    for _, w in ipairs({ "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" }) do
      local ref = f:read(("/members/0/blocks.%d.mlp.%s"):format(l, w), "float32")
      for m = 1, #members - 1 do
        eq(differ(f:read(("/members/%d/blocks.%d.mlp.%s"):format(m, l, w), "float32"), ref), 0,
          ("member %d blocks.%d.mlp.%s equals member 1's"):format(m + 1, l, w))
      end
    end
  end
end

function T.one_finetuning_epoch_does_change_the_weights()
  -- the check above can fail: one epoch of fine-tuning moves the MLP of every member
  local bad, first = changed_weights(tiny_cfg({ ["finetune.epochs"] = "1",
    ["finetune.learning_rate"] = "1.0e-2" }), "hydra_taylor", check.tmpdir())
  ok(bad > 0, "fine-tuned members differ from the Single")
  ok(first:match("mlp") or first:match("norm") or first:match("embed") or first:match("head")
    or first:match("cls") or first:match("pos") or first:match("attn"), "named: " .. first)
end

function T.learned_heads_run_with_their_own_score()
  local cache, results = check.tmpdir(), check.tmpdir()
  local cfg = tiny_cfg({ ["vilu.epochs"] = "5", ["vilu.hidden"] = "8", ["results_dir"] = results,
                         ["experiment"] = "tf" })
  cfg.methods = { "single", "vilu", "confidnet" }
  local s = hydra.run.execute(cfg, { quiet = true, progress = false, cache_dir = cache })
  local r = hydra.run.load(s.result)
  local by = {}
  for _, res in ipairs(r.results) do by[res.name] = res end
  eq(by.single.score, "msp", "the Single keeps eval.score")
  eq(by.vilu.score, "learned", "vilu is evaluated with its head's score")
  eq(by.confidnet.score, "learned", "confidnet too")
  -- the heads change no prediction of the Single: same accuracy, ECE, NLL
  for _, k in ipairs({ "acc", "ece", "nll", "brier" }) do
    eq(by.vilu.metrics[k], by.single.metrics[k], "vilu " .. k .. " is the Single's")
    eq(by.confidnet.metrics[k], by.single.metrics[k], "confidnet " .. k .. " is the Single's")
  end
  ok(by.vilu.metrics.misclf_auroc_learned ~= nil, "failure prediction with the learned score")
  eq(by.vilu.metrics.misclf_auroc, by.vilu.metrics.misclf_auroc_learned, "headline = learned")
  ok(by.vilu.metrics.misclf_auroc ~= by.single.metrics.misclf_auroc, "not the MSP's")
  ok(by.vilu.by_score_summary.learned.avg.auroc ~= nil, "OOD detection with the learned score")
  ok(by.single.by_score_summary.learned == nil, "the Single has no learned score")
  ok(by.vilu.cost.params > by.single.cost.params, "the head's parameters counted")
  -- the stored uncertainty is the head's score of the Single's features
  local g <close> = hydra.h5.open(s.dir .. "/methods/vilu.h5")
  eq(g:read("/id/scores/learned"):size(1), 40, "per-sample learned scores of the ID test set")
  -- a second run with another score reuses the trained heads (stage "uhead")
  local cfg2 = tiny_cfg({ ["vilu.epochs"] = "5", ["vilu.hidden"] = "8", ["results_dir"] = results,
                          ["experiment"] = "tf2", ["eval.score"] = "energy" })
  cfg2.methods = { "vilu" }
  local stages_log = {}
  local s2 = hydra.run.execute(cfg2, { quiet = true, progress = false, cache_dir = cache,
                                       log = function(line) stages_log[#stages_log + 1] = line end })
  eq(s2.stages.built, 0, "every stage reused (" .. table.concat(stages_log, " | ") .. ")")
  eq(hydra.run.load(s2.result).results[1].score, "learned", "eval.score does not apply to vilu")
  -- eval.score = learned on a method without a head: a clean error naming the file
  local cfg3 = tiny_cfg({ ["results_dir"] = results, ["experiment"] = "tf3",
                          ["eval.score"] = "learned" })
  cfg3.methods = { "single" }
  check.raises_has("eval: score 'learned' is unavailable: no /uncertainty in '", function()
    hydra.run.execute(cfg3, { quiet = true, progress = false, cache_dir = cache })
  end)
end

function T.a_head_needs_errors_to_learn_from()
  -- a config whose training rows hold no error: a clean one-line error naming the fix
  local cfg = tiny_cfg({ ["vilu.rows"] = "1" })
  local ctx = quiet_ctx(cfg, check.tmpdir())
  check.raises_has("a learned error predictor needs both outcomes", function()
    require("hydra.methods.vilu").build(ctx)
  end)
end

function T.the_vilu_section_leaves_run_ids_alone_at_its_defaults()
  -- every vilu.* key is id_neutral: at the defaults the section is left out of the config hash
  -- (run-ids published before it stay valid); any changed key changes the hash
  local a = hydra.config.load(nil, { "seed=3" })
  ok(hydra.config.to_yaml(a):find("\nvilu:\n", 1, true), "to_yaml writes the section")
  local text = hydra.config.to_yaml(a):gsub("\nvilu:\n.-\n\n", "\n")
    :gsub("\n  circuit_batch_size: 64\n", "\n"):gsub("\n  warmup_epochs: ~\n", "\n")
    :gsub("\npacked_ensemble:\n.-\n\n", "\n"):gsub("\nmimo:\n.-\n\n", "\n")   -- also neutral
    :gsub("\nprop1:\n.-\n\n", "\n")   -- another section of id_neutral keys only
    :gsub("\nbatch_ensemble:\n.-\n\n", "\n"):gsub("\nlora_ensemble:\n.-\n\n", "\n")
    :gsub("\nhydra_circ_restarts:\n.-\n\n", "\n")   -- id_neutral keys only
    :gsub("\n  init: ~\n", "\n"):gsub("\npretrain:\n.-\n\n", "\n")   -- train.init, pretrain.*
    :gsub("\n  ln_eps: 1e%-06\n", "\n"):gsub("\n  norm: pre\n", "\n")   -- model.* encoder options
    :gsub("\n  act: gelu\n", "\n"):gsub("\n  pooler: none\n", "\n")
    :gsub("\n  text_embed: hydra\n", "\n"):gsub("\n  type_vocab: 0\n", "\n")
    :gsub("\n  from: ~\n", "\n"):gsub("\n  sources: ~\n", "\n")   -- hydra.sources' keys
    :gsub("\n  text_column: text\n  label_column: label\n", "\n")
    :gsub("\nimport:\n.-\n\n", "\n"):gsub("\nexport:\n.-\n\n", "\n")
    :gsub("\nprecision: fp32\n", "\n")   -- the arithmetic of predictions, id_neutral
  eq(hydra.config.hash(a), core.hash64(text), "hash without the vilu section")
  ok(hydra.config.hash(hydra.config.load(nil, { "seed=3", "vilu.epochs=5" }))
    ~= hydra.config.hash(a), "a changed vilu key changes the hash")
end

return T
