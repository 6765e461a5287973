-- tests/lua/test_methods.lua: the UQ methods (lua/hydra/methods/), their shared pieces
-- (evaluation sets, cost formulas, predictors) and hydra.run (run folder, result.h5, reuse of
-- complete runs and cached stages) on a very small synthetic configuration.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local common = require("hydra.methods.common")
local eq, ok, near, raises = check.eq, check.ok, check.near, check.raises

local T = {}

local METHODS = { "single", "deep_ensemble", "mc_dropout", "taylor", "circavg", "hydra_taylor",
                  "hydra_circ", "hydra_circ_restarts" }

-- A data folder: tiny (ID), tinyood (OOD test), tinyoodval (OOD validation), tinyshift (two
-- corruptions x two severities of tiny's test images).
local data_cache
local function data_dir()
  if data_cache then return data_cache end
  local d = check.tmpdir()
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 32, test = 40, seed = 2 })
  hydra.model.write_synthetic(d .. "/tinyood.h5", { train = 8, val = 8, test = 24, seed = 5,
                                                    classes = 3 })
  hydra.model.write_synthetic(d .. "/tinyood2.h5", { train = 8, val = 8, test = 20, seed = 7,
                                                     classes = 3 })
  hydra.model.write_synthetic(d .. "/tinyoodval.h5", { train = 8, val = 24, test = 8, seed = 6,
                                                       classes = 3 })
  local f <close> = hydra.h5.open(d .. "/tiny.h5")
  local im, lb = f:read("/test/images"), f:read("/test/labels")
  local g <close> = hydra.h5.create(d .. "/tinyshift.h5")
  for _, c in ipairs({ "gaussian_noise", "contrast" }) do
    for s = 1, 2 do
      g:write(("/%s/%d/images"):format(c, s), core.corrupt(im, c, s, 1))
      g:write(("/%s/%d/labels"):format(c, s), lb)
    end
  end
  g:set_attr("/meta", "mean", 0.3)
  g:set_attr("/meta", "std", 0.35)
  g:commit()
  data_cache = d
  return d
end

-- A resolved config of a very small model on the synthetic data.
local function tiny_cfg(extra)
  local ov = {
    ["data.dir"] = data_dir(), ["data.ood"] = "[tinyood]", ["data.ood_val"] = "tinyoodval",
    ["data.shift"] = "[tinyshift]", ["data.shift_subset"] = "16", ["data.test_subset"] = "0",
    ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["train.epochs"] = "1", ["train.batch_size"] = "32",
    ["train.eval_batch_size"] = "32", ["prune.calib_size"] = "32", ["hydra.keep_heads"] = "2",
    ["hydra.members"] = "2", ["deep_ensemble.members"] = "2", ["mc_dropout.samples"] = "3",
  }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return hydra.config.load("configs/data/tiny.yaml", ov)
end

local function quiet_ctx(cfg, cache_dir)
  return {
    cfg = cfg, progress = false, log = function() end,
    cache = hydra.stages.new({ dir = cache_dir, log = function() end }),
  }
end

function T.every_method_has_the_interface()
  local cfg = tiny_cfg()
  for _, name in ipairs(METHODS) do
    local m = require("hydra.methods." .. name)
    eq(m.name, name, name .. ".name")
    ok(type(m.label) == "string" and #m.label > 0, name .. ".label")
    ok(type(m.build) == "function", name .. ".build")
    local d = m.describe(cfg)
    eq(d.name, name, name .. " describe name")
    eq(d.label, m.label, name .. " describe label")
    ok(math.type(d.members) == "integer" and d.members >= 1, name .. " members")
  end
  eq(require("hydra.methods.deep_ensemble").describe(cfg).members, 2, "DE members")
  check.same(require("hydra.methods.deep_ensemble").describe(tiny_cfg({ seed = "5" })).seeds,
    { 10, 11 }, "DE seeds: M*seed .. M*seed+M-1")
  -- seeds 0..3 with M = 3: bases 0..11, each used once (disjoint members across seeds)
  local used = {}
  for s = 0, 3 do
    for _, name in ipairs({ "deep_ensemble", "deep_ensemble_scratch" }) do
      local d = require("hydra.methods." .. name).describe(
        tiny_cfg({ seed = tostring(s), ["deep_ensemble.members"] = "3" }))
      check.same(d.seeds, { 3 * s, 3 * s + 1, 3 * s + 2 }, name .. " seed " .. s)
      if name == "deep_ensemble" then
        for _, b in ipairs(d.seeds) do
          ok(not used[b], "base " .. b .. " in one seed's ensemble only")
          used[b] = true
        end
      end
    end
  end
  eq(require("hydra.methods.mc_dropout").describe(cfg).members, 3, "MC samples")
  eq(require("hydra.methods.hydra_circ").describe(cfg).members, 2, "Hydra members")
  eq(require("hydra.methods.hydra_circ").describe(cfg).needs.ood_val, true, "circ needs ood_val")
  eq(require("hydra.methods.taylor").describe(cfg).needs.ood_val, false, "taylor does not")
end

function T.sets_group_shift_splits_by_severity()
  local sets = common.sets(tiny_cfg())
  eq(#sets, 4, "ID + 1 OOD + 2 severities")
  eq(sets[1].name, "tiny", "ID name")
  eq(sets[1].role, "id", "ID role")
  check.same(sets[1].parts, { "test" }, "ID split")
  eq(sets[1].subset, 0, "ID subset")
  eq(sets[2].name, "tinyood", "OOD name")
  eq(sets[2].role, "ood", "OOD role")
  eq(sets[3].name, "tinyshift-s1", "severity 1")
  check.same(sets[3].parts, { "contrast/1", "gaussian_noise/1" }, "every corruption at s1")
  eq(sets[3].subset, 16, "shift_subset")
  eq(sets[4].name, "tinyshift-s2", "severity 2")
  local ds = common.dataset(sets[3], { 0.3, 0.35 })
  eq(ds:size(), 32, "2 corruptions x 16")
  local one = common.dataset(sets[2], nil)
  eq(one:size(), 24, "OOD test split")
  local sub = common.sets(tiny_cfg({ ["data.test_subset"] = "10", ["data.shift_subset"] = "0" }))
  eq(common.dataset(sub[1]):size(), 10, "test_subset on ID")
  eq(sub[3].subset, 10, "shift_subset 0 falls back to test_subset")
  eq(common.dataset(sub[3], { 0.3, 0.35 }):size(), 20, "2 x 10")
end

function T.missing_dataset_is_a_clear_error()
  local cfg = tiny_cfg({ ["data.ood"] = "[nowhere]" })
  raises(("run: OOD dataset 'nowhere' is not prepared: '%s/nowhere.h5' not found "
    .. "(run 'hydra data prepare nowhere')"):format(data_dir()), function()
    return common.sets(cfg)
  end)
end

-- Costs come from one C function (hy_xfmr_cost): a model's m:config() and m:cost(kept), a fused
-- model's f:info() and core.model_cost(config, kept) agree.
function T.cost_comes_from_the_core()
  local cfg = tiny_cfg()
  local m = hydra.model.new(cfg, 1)
  local mc = hydra.model.core_config(cfg.model)
  local flops, params, parts = core.model_cost(mc)
  local c = m:config()
  eq(c.flops, flops, "m:config().flops")
  eq(c.params, params, "m:config().params")
  local n = 0
  for _, name in ipairs(m:param_names()) do n = n + m:param(name):numel() end
  eq(params, n, "params = the sum of the tensors' sizes")
  local sum = 0
  for _, part in pairs(parts) do sum = sum + part.params end
  eq(sum, params, "parts add up")
  local fused = hydra.fuse.build({ m }, cfg.fuse)
  local info = fused:info()
  eq(info.flops, flops, "fused, every head: flops")
  eq(info.params, params, "fused, every head: params")
  -- at a sequence length T (tokens with CLS; default the full one, info.seq_len = c.seq_len)
  eq(info.seq_len, c.seq_len, "fused seq_len")
  eq(fused:flops(c.seq_len), flops, "f:flops at the full T")
  eq(fused:flops(5), m:flops(5), "f:flops(T) = m:flops(T)")
  eq((m:cost(nil, 5)), m:flops(5), "m:cost(nil, T) = m:flops(T)")
  eq((core.model_cost(mc, nil, 5)), m:flops(5), "core.model_cost(cfg, nil, T)")
  ok(m:flops(5) < flops, "fewer tokens, fewer FLOPs")
  raises("bad argument #3 to 'model_cost' (sequence length out of range)", function()
    return core.model_cost(mc, nil, c.seq_len + 1)
  end)
  raises("bad argument #1 to 'flops' (sequence length out of range)", function()
    return fused:flops(0)
  end)
  m:set_gates({ { 1, 0, 1, 0 }, { 0, 0, 0, 1 } })
  local pinfo = hydra.fuse.build({ m }, cfg.fuse):info()
  check.same(pinfo.kept, { { 2, 1 } }, "kept heads per layer")
  local kf, kp = m:cost({ 2, 1 })
  eq(pinfo.flops, kf, "flops, pruned")
  eq(pinfo.params, kp, "params, pruned")
  eq(select(1, core.model_cost(mc, { 2, 1 })), kf, "core.model_cost = m:cost")
  raises("cost: kept must list the heads of each of the 2 layers", function()
    return m:cost({ 2 })
  end)
  raises("cost: kept[2] must be in [1, 4] (got 5)", function() return m:cost({ 2, 5 }) end)
  -- DESIGN §2: vit-fm is about 41 MFLOPs per image
  local ref = hydra.config.load("configs/models/vit-fm.yaml")
  near(core.model_cost(hydra.model.core_config(ref.model)) / 1e6, 41, 1, "vit-fm MFLOPs")
end

-- ===== text costs =====

local text_file = check.text_file

local function text_cfg()
  local d = check.tmpdir()
  text_file(d .. "/ttiny.h5", { 96, 32, 40 }, 10)
  text_file(d .. "/ttinyood.h5", { 8, 8, 24 }, 20)
  return tiny_cfg({
    ["data.dir"] = d, ["data.id"] = "ttiny", ["data.ood"] = "[ttinyood]", ["data.shift"] = "[]",
    ["model.kind"] = "text", ["model.vocab_size"] = "0", ["model.max_len"] = "12",
    ["model.n_classes"] = "2", ["train.eval_batch_size"] = "16",
    ["batch_ensemble.members"] = "2", ["lora_ensemble.members"] = "2",
    ["lora_ensemble.rank"] = "4",
  })
end

-- forward FLOPs of one sample of model section mc at sequence length T, every head kept, by hand
-- (the reference, independent of core/): per layer qkv, scores + weighted sum (T x T), proj,
-- fc1 + fc2; the head; a text embedding is a lookup (no FLOPs)
local function text_flops_by_hand(mc, T)
  local D, DM = mc.d_model, mc.d_mlp
  return mc.depth * (2 * T * D * 3 * D + 4 * T * T * D + 2 * T * D * D + 4 * T * D * DM)
    + 2 * D * mc.n_classes
end

-- A text model's FLOPs per sample on the ID test set are the mean over its sentences of the
-- exact FLOPs at each one's own T = 1 + tokens (not the FLOPs at max_len, nor at the mean length),
-- and flops_padded the mean at the T its batch of train.eval_batch_size is padded to: for the
-- ensembles that run every member in one model (BatchEnsemble: M x every per-row part, the
-- elementwise scalings not counted; LoRA-Ensemble: plus 2 T r (in + out) per adapter and
-- member; Packed-Ensembles: M narrow members) as for the Single.
function T.text_costs_are_the_mean_at_each_length()
  local cfg = text_cfg()
  local ctx = quiet_ctx(cfg, check.tmpdir())
  local sets = common.sets(cfg)
  local f <close> = hydra.h5.open(sets[1].file)
  local len = f:read("/test/lengths"):totable()
  eq(#len, 40, "the ID test set")
  local B = cfg.train.eval_batch_size
  local real, padded = {}, {}
  for first = 1, #len, B do
    local last, longest = math.min(first + B - 1, #len), 0
    for i = first, last do longest = math.max(longest, len[i]) end
    for i = first, last do real[i], padded[i] = 1 + len[i], 1 + longest end
  end
  local function mean(Ts, fl)
    local sum = 0
    for _, t in ipairs(Ts) do sum = sum + fl(t) end
    return sum / #Ts
  end
  local mc = cfg.model
  local pmc = require("hydra.methods.packed_ensemble").member_model(cfg)
  local lr, D, Mb, Ml, Mp = cfg.lora_ensemble.rank, mc.d_model, cfg.batch_ensemble.members,
    cfg.lora_ensemble.members, cfg.packed_ensemble.members
  eq(cfg.lora_ensemble.targets, "q,v", "LoRA adapts q and v")
  local cases = {
    { "single", function(t) return text_flops_by_hand(mc, t) end },
    { "batch_ensemble", function(t) return Mb * text_flops_by_hand(mc, t) end },
    { "lora_ensemble", function(t)
        return Ml * (text_flops_by_hand(mc, t) + mc.depth * 2 * (2 * t * lr * (D + D)))
      end },
    { "packed_ensemble", function(t) return Mp * text_flops_by_hand(pmc, t) end },
  }
  for _, case in ipairs(cases) do
    local name, fl = case[1], case[2]
    local c = require("hydra.methods." .. name).build(ctx):cost_on(sets[1])
    local want, want_pad = mean(real, fl), mean(padded, fl)
    near(c.flops, want, 1e-9 * want, name .. " flops: the mean at each sentence's length")
    near(c.flops_padded, want_pad, 1e-9 * want_pad, name .. " flops_padded")
    ok(c.flops < c.flops_padded and c.flops_padded < fl(1 + mc.max_len),
      ("%s: %.0f < %.0f (padded) < %.0f (max_len)"):format(name, c.flops, c.flops_padded,
        fl(1 + mc.max_len)))
  end
end

function T.deep_ensemble_and_mc_dropout_predictions()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  local ctx = quiet_ctx(cfg, cache)
  local sets = common.sets(cfg)
  local de = require("hydra.methods.deep_ensemble").build(ctx)
  eq(ctx.cache.built, 2, "two base models trained")
  local single = require("hydra.methods.single").build(ctx)
  eq(ctx.cache.built, 2, "the single model is DE member 1 (cached)")
  eq(de.cost.members, 2, "DE members")
  eq(de.cost.params, 2 * single.cost.params, "DE params = 2 x single")
  local single_cost = single:cost_on(sets[1])
  near(de:cost_on(sets[1]).flops, 2 * single_cost.flops, 1e-9, "DE flops = 2 x single")
  -- images: the FLOPs at the model's fixed T (no token lengths); no padding
  eq(single_cost.flops, core.model_cost(hydra.model.core_config(cfg.model)), "image flops")
  eq(single_cost.flops_padded, nil, "images are never padded")
  local g <close> = hydra.h5.open(de:predict(sets[1]))
  local probs, mp = g:read("/probs"), g:read("/member_probs")
  check.same(mp:shape(), { 2, 40, 10 }, "member_probs shape")
  local mean = core.mean_first(mp)
  local a, b = probs:totable(), mean:totable()
  for i = 1, #a do
    for c = 1, #a[i] do near(a[i][c], b[i][c], 1e-6, "probs = mean of members") end
  end
  check.same(g:read("/labels"):shape(), { 40 }, "labels")
  local s <close> = hydra.h5.open(single:predict(sets[1]))
  local sp, m1 = s:read("/probs"):totable(), mp:row(1):totable()
  for i = 1, #sp do
    for c = 1, #sp[i] do near(sp[i][c], m1[i][c], 1e-6, "member 1 = single") end
  end
  eq(s:exists("/member_probs"), false, "single has no members")
  local built = ctx.cache.built
  de:predict(sets[1])
  eq(ctx.cache.built, built, "predictions are cached")
  local mcd = require("hydra.methods.mc_dropout").build(ctx)
  local h <close> = hydra.h5.open(mcd:predict(sets[2]))
  check.same(h:read("/member_probs"):shape(), { 3, 24, 10 }, "MC samples")
  eq(mcd.cost.members, 3, "MC members")
  near(mcd:cost_on(sets[1]).flops, 3 * single_cost.flops, 1e-9, "MC flops = K x single")
  raises("mc_dropout: mc_dropout.rate must be > 0 for MC Dropout (got 0)", function()
    return require("hydra.methods.mc_dropout").build(quiet_ctx(
      tiny_cfg({ ["mc_dropout.rate"] = "0.0" }), cache))
  end)
  local ms, n = single:time_batch(sets[1], 16, 3)
  eq(n, 16, "timed batch size")
  ok(ms > 0, "positive time")
end

function T.pruned_methods_pack_their_heads()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  local ctx = quiet_ctx(cfg, cache)
  local sets = common.sets(cfg)
  local tay = require("hydra.methods.taylor").build(ctx)
  eq(tay.cost.members, 1, "one member")
  local kf, kp = hydra.model.new(cfg, 0):cost({ 2, 2 })
  eq(tay.cost.params, kp, "2 of 4 heads kept")
  eq(tay:cost_on(sets[1]).flops, kf, "pruned flops")
  local ht = require("hydra.methods.hydra_taylor").build(ctx)
  eq(ht.cost.members, 2, "two members")
  local g <close> = hydra.h5.open(ht:predict(sets[2]))
  check.same(g:read("/member_probs"):shape(), { 2, 24, 10 }, "fused member probs")
  local names = {}
  for _, r in ipairs(ctx.cache.records) do names[#names + 1] = r.name .. ":" .. r.status end
  eq(table.concat(names, " "), "base:built gates:built member:built fused:built "
    .. "base:hit gates:built member:built member:built fused:built preds:built",
    "stages of Taylor then Hydra (Taylor)")
end

-- A cached product is checked against the run before use: a gates file with another member
-- count, or pruned from another base, under the gates stage's name is refused (it was used,
-- and the run reported a 1-member "Hydra" for a config asking for 2).
function T.cached_stages_are_checked_against_the_run()
  local cache = check.tmpdir()
  local cfg = tiny_cfg()
  local ctx = quiet_ctx(cfg, cache)
  require("hydra.methods.hydra_taylor").build(ctx)
  local gpath, gkey
  for _, r in ipairs(ctx.cache.records) do
    if r.name == "gates" then gpath, gkey = r.path, r.key end
  end
  ok(gpath, "a gates stage")
  local g
  do
    local f <close> = hydra.h5.open(gpath)
    g = f:read("/gates", "float32")
  end
  local function rewrite(rows, attrs)
    local t = {}
    for i = 1, rows do t[i] = g:row(i):totable() end
    local f <close> = hydra.h5.create(gpath)
    f:write("/gates", core.from_table("float32", t))
    for k, v in pairs(attrs) do f:set_attr("/", k, v) end
    f:commit()
  end
  local base
  for _, r in ipairs(ctx.cache.records) do
    if r.name == "base" then base = r.path end
  end
  rewrite(1, { members = 1, checkpoint_sha256 = core.file_sha256(base) })
  local msg = ("stage gates %s: the cached product '%s' does not match this run: /gates holds "
    .. "1 member(s), the config asks for hydra.members = 2 (delete it to rebuild it)"):format(gkey,
    gpath)
  raises(msg, function()
    return require("hydra.methods.hydra_taylor").build(quiet_ctx(cfg, cache))
  end)
  rewrite(2, { members = 2, checkpoint_sha256 = string.rep("0", 64) })
  check.raises_has("its gates were pruned from the checkpoint with sha256 0000000000000000, not "
    .. "from the base", function()
      return require("hydra.methods.hydra_taylor").build(quiet_ctx(cfg, cache))
    end)
  rewrite(2, { members = 2, checkpoint_sha256 = core.file_sha256(base) })
  require("hydra.methods.hydra_taylor").build(quiet_ctx(cfg, cache))   -- consistent: used
end

-- Members are keyed by their own gate row: a search for M + 1 members finds the first M rows
-- of a search for M (member m's search does not depend on M), so it fine-tunes one new member;
-- two searches that give other rows share nothing.
function T.members_are_keyed_by_their_gate_row()
  local cache = check.tmpdir()
  local function built_members(members, extra)
    local ov = { ["hydra.members"] = tostring(members) }
    for k, v in pairs(extra or {}) do ov[k] = v end
    local ctx = quiet_ctx(tiny_cfg(ov), cache)
    require("hydra.methods.hydra_circ").build(ctx)
    local n, hit = 0, 0
    for _, r in ipairs(ctx.cache.records) do
      if r.name == "member" then
        if r.status == "built" then n = n + 1 else hit = hit + 1 end
      end
    end
    return n, hit, ctx
  end
  local n2, h2 = built_members(2)
  eq(n2, 2, "M = 2: two members fine-tuned")
  eq(h2, 0, "M = 2: nothing cached before")
  local n3, h3, ctx3 = built_members(3)
  eq(n3, 1, "M = 3: only member 3 is fine-tuned")
  eq(h3, 2, "M = 3: members 1 and 2 come from the M = 2 run")
  -- the cached members are the ones the M = 3 search asks for: their gates are its rows 1, 2
  local gpath
  for _, r in ipairs(ctx3.cache.records) do if r.name == "gates" then gpath = r.path end end
  local gf <close> = hydra.h5.open(gpath)
  local g3 = gf:read("/gates", "float32")
  local k = 0
  for _, r in ipairs(ctx3.cache.records) do
    if r.name == "member" then
      k = k + 1
      check.same(hydra.model.load(r.path):gates():totable(), g3:row(k):totable(),
        "member " .. k .. " checkpoint holds gate row " .. k)
    end
  end
  local n1, h1 = built_members(1)
  eq(n1 + h1, 1, "M = 1: one member")
  eq(h1, 1, "M = 1: member 1 reused")
  -- another fine-tuning setting: every member is new
  local nl = built_members(2, { ["finetune.learning_rate"] = "0.0002" })
  eq(nl, 2, "another finetune.learning_rate fine-tunes again")
  -- the key input is the row itself (0/1 digits per layer)
  local row = common.gate_row(core.from_table("float32", { { { 1, 0, 1, 1 }, { 0, 0, 1, 0 } } }), 1)
  check.same(row, { "1011", "0010" }, "gate row key")
  check.same(common.gate_row(core.from_table("float32", { { { 1, 0.5 } } }), 1), { "1,0.5" },
    "a non-binary gate")
end

-- hydra_circ_restarts: its own gates stage (keyed by its restarts and holdout), which records
-- every restart's held-out AUROC and the one kept; hydra_circ's gates inputs have no restarts,
-- so the recipe row's stage keys stay as they were.
function T.restart_gates_are_their_own_stage()
  local cache = check.tmpdir()
  local function gates_record(method, extra)
    local ov = { ["hydra_circ_restarts.restarts"] = "2" }
    for k, v in pairs(extra or {}) do ov[k] = v end
    local ctx = quiet_ctx(tiny_cfg(ov), cache)
    require("hydra.methods." .. method).build(ctx)
    for _, r in ipairs(ctx.cache.records) do if r.name == "gates" then return r, ctx.cfg end end
  end
  local plain, cfg = gates_record("hydra_circ")
  local variant = require("hydra.methods.hydra_circ").variant
  eq(common.gates_inputs(cfg, "b", variant).restarts, nil, "hydra_circ: no restarts input")
  local rs = gates_record("hydra_circ_restarts")
  ok(rs.key ~= plain.key, "another gates stage than hydra_circ's")
  eq(rs.status, "built", "built, not taken from hydra_circ's")
  local f <close> = hydra.h5.open(rs.path)
  local a = f:attrs("/")
  eq(a.restart_chosen >= 1 and a.restart_chosen <= 2, true, "the kept restart")
  eq(#tostring(a.restart_heldout_auroc):gsub("[^,]", ""), 1, "two held-out AUROCs")
  local other = gates_record("hydra_circ_restarts", { ["hydra_circ_restarts.holdout"] = "0.25" })
  ok(other.key ~= rs.key, "another holdout, another stage")
  eq(gates_record("hydra_circ_restarts").status, "hit", "the same settings: cached")
end

function T.run_writes_a_complete_folder_and_reuses_it()
  local root = check.tmpdir()
  local cache = root .. "/cache"
  local cfg = tiny_cfg({ results_dir = root .. "/results", experiment = "t",
                         methods = "[single, deep_ensemble]" })
  local run = hydra.run
  local lines = {}
  eq((run.status(cfg)), "absent", "absent before")
  local s = run.execute(cfg, { quiet = true, cache_dir = cache, progress = false,
                               log = function(l) lines[#lines + 1] = l end })
  eq(s.skipped, false, "ran")
  eq(s.id, run.id(cfg), "id")
  eq(#s.id, 12, "short id")
  eq(s.dir, root .. "/results/t/" .. s.id, "dir")
  eq((run.status(cfg)), "complete", "complete after")
  for _, f in ipairs({ "config.resolved.yaml", "log.txt", "result.h5", "table.md", "table.csv",
                       "methods/single.h5", "methods/deep_ensemble.h5", "plots/reliability.png",
                       "plots/ood-hist.png", "plots/risk-coverage.png", "plots/reliability.gp",
                       "plots/reliability.dat" }) do
    eq(core.stat(s.dir .. "/" .. f), "file", f)
  end
  eq(s.stages.built, 2 + 2 * 5, "2 base models + 5 prediction sets (with the ID val split of "
    .. "temperature scaling) x 2 methods")
  eq(s.stages.hits, 1, "single's base reused by DE")
  -- the log file holds every line printed
  local log = check.read_file(s.dir .. "/log.txt")
  for _, l in ipairs(lines) do ok(log:find(l, 1, true), "logged: " .. l) end
  ok(log:find("| Single |", 1, true), "table logged")
  -- result.h5
  local r = run.load(s.result)
  eq(r.id, s.id, "result id")
  check.same(r.methods, { "single", "deep_ensemble" }, "methods in order")
  eq(r.provenance.seed, 0, "seed")
  ok(type(r.provenance.git_hash) == "string" and #r.provenance.git_hash > 0, "git hash")
  ok(r.provenance.data_tiny:match("^sha256:%x+$"), "data checksum")
  ok(r.provenance.stages:find("deep_ensemble base ", 1, true), "stage provenance")
  local again = hydra.config.resolve((core.yaml_parse(r.config_yaml, "result config")))
  eq(run.id(again), s.id, "the stored config resolves to the same run")
  eq(r.results[1].method, "Single", "label")
  eq(r.results[2].members, 2, "DE members")
  eq(r.results[2].cost.members, 2, "DE cost members")
  eq(r.results[2].cost.params, 2 * r.results[1].cost.params, "DE params")
  ok(r.results[1].cost.infer_ms_per_batch > 0, "timing")
  eq(r.results[1].cost.batch_size, 32, "timed batch")
  local md = hydra.report.markdown(r.results)
  eq(md, check.read_file(s.dir .. "/table.md"), "table from result.h5 = table.md")
  local f <close> = hydra.h5.open(s.result)
  check.same(f:read("/methods/single/id/conf"):shape(), { 40 }, "per-sample ID arrays")
  check.same(f:read("/methods/deep_ensemble/shift/tinyshift-s2/correct"):shape(), { 32 },
    "per-sample shift arrays")
  ok(f:exists("/methods/single/ood/tinyood/scores/msp"), "OOD scores")
  eq(f:attr("/", "format"), "hydra-run-1", "format")
  ok(f:attr("/", "config"):find("experiment: t", 1, true), "resolved config attribute")
  check.same(run.method_files(s.dir), { s.dir .. "/methods/single.h5",
                                        s.dir .. "/methods/deep_ensemble.h5" }, "method files")
  -- a complete run is a no-op
  local s2 = run.execute(cfg, { quiet = true, cache_dir = cache })
  eq(s2.skipped, true, "skipped")
  -- another run of the same stages (other experiment name) reuses every stage
  local cfg3 = tiny_cfg({ results_dir = root .. "/results", experiment = "u",
                          methods = "[deep_ensemble]" })
  local s3 = run.execute(cfg3, { quiet = true, cache_dir = cache, progress = false })
  eq(s3.stages.built, 0, "nothing rebuilt")
  eq(s3.stages.hits, 2 + 5, "2 models + 5 prediction sets")
  ok(s3.id ~= s.id, "other run id")
end

-- A run folder alone recomputes every metric: the per-sample predictions of every set (and of
-- the calibration split) are inside result.h5, so deleting the stage cache loses nothing.
function T.run_folder_recomputes_every_metric_without_the_cache()
  local root = check.tmpdir()
  local cache = root .. "/cache"
  local cfg = tiny_cfg({ results_dir = root .. "/results", experiment = "selfc",
                         methods = "[single, mc_dropout]",
                         ["data.ood"] = "{near: [tinyood], far: [tinyood2]}" })
  local run, eval = hydra.run, hydra.eval
  local s = run.execute(cfg, { quiet = true, cache_dir = cache, progress = false,
                               overrides = { "data.ood={near: [tinyood], far: [tinyood2]}" } })
  ok(os.execute(("rm -rf '%s'"):format(cache)), "cache deleted")
  eq(core.stat(cache), nil, "no cache")
  -- provenance
  local yaml = check.read_file(s.dir .. "/config.resolved.yaml")
  ok(yaml:match("^# command: "), "command in config.resolved.yaml")
  ok(yaml:find("\n# overrides: data.ood={near: [tinyood], far: [tinyood2]}\n", 1, true),
    "overrides in config.resolved.yaml")
  ok(yaml:find("\n# git: ", 1, true), "git state in config.resolved.yaml")
  local f <close> = hydra.h5.open(s.result)
  eq(f:attr("/", "overrides"), "data.ood={near: [tinyood], far: [tinyood2]}", "overrides attr")
  ok(type(f:attr("/", "command")) == "string", "command attr")
  local dirty = f:attr("/", "git_dirty")
  ok(dirty == 0 or dirty == 1 or dirty == -1, "git_dirty attr")
  local loaded = run.load(s.result)
  for i, name in ipairs({ "single", "mc_dropout" }) do
    local g = "/methods/" .. name
    local want = loaded.results[i]
    -- the names of results/README.md
    for _, a in ipairs({ "ood_near_auroc", "ood_far_fpr95", "ood_groups_mean_aupr_out",
                         "ood_avg_fpr95_id", "ood_near_fpr95_id_maxlogit", "misclf_auroc",
                         "misclf_aupr", "misclf_fpr95", "misclf_auroc_maxlogit" }) do
      ok(type(f:attr(g .. "/metrics", a)) == "number", name .. " " .. a)
    end
    ok(type(f:attr(g .. "/metrics/ood/tinyood", "fpr95_id")) == "number", "per-set fpr95_id")
    eq(f:attr(g .. "/metrics/ood/tinyood", "group"), "near", "group attribute")
    local T = f:attr(g .. "/calibration", "temperature")
    ok(T > 0, name .. " temperature")
    -- every metric again from the run folder's arrays alone
    local spec = eval.extract(s.result, g, check.tmpdir())
    local res = eval.evaluate(spec)
    eq(res.calibration.temperature, T, name .. " temperature recomputed")
    for _, k in ipairs(hydra.metrics.ID_METRICS) do
      eq(res.calibration.metrics[k], want.calibration.metrics[k], name .. " +TS " .. k)
      eq(res.metrics[k], want.metrics[k], name .. " " .. k)
    end
    for _, k in ipairs(hydra.metrics.OOD_METRICS) do
      eq(res.ood_near[k], want.ood_near[k], name .. " near " .. k)
      eq(res.ood_far[k], want.ood_far[k], name .. " far " .. k)
      eq(res.ood_avg[k], want.ood_avg[k], name .. " avg " .. k)
      eq(res.ood_groups_mean[k], want.ood_groups_mean[k], name .. " groups mean " .. k)
      eq(res.by_score_summary.maxlogit.avg[k], want.by_score_summary.maxlogit.avg[k],
        name .. " maxlogit " .. k)
      for j, o in ipairs(res.ood) do eq(o[k], want.ood[j][k], name .. " " .. o.name .. " " .. k) end
    end
    for _, k in ipairs(hydra.metrics.MISCLF_METRICS) do
      eq(res.metrics["misclf_" .. k], want.metrics["misclf_" .. k], name .. " misclf " .. k)
    end
    for j, sh in ipairs(res.calibration.shift) do
      eq(sh.ece, want.calibration.shift[j].ece, name .. " shift +TS ece")
    end
    -- groups mean = the mean of the two group averages; near = the one near set
    near(want.ood_groups_mean.auroc, (want.ood_near.auroc + want.ood_far.auroc) / 2, 1e-15,
      "groups mean")
    eq(want.ood_near.fpr95_id, want.ood[1].fpr95_id, "near avg of one set")
    -- misclassification AUROC by hand from the stored per-sample arrays
    local sc, cor = f:read(g .. "/id/scores/msp"):totable(), f:read(g .. "/id/correct"):totable()
    local u, np, nn = 0, 0, 0
    for a = 1, #sc do
      if cor[a] == 0 then
        np = np + 1
        for b = 1, #sc do
          if cor[b] == 1 then u = u + (sc[a] > sc[b] and 1 or sc[a] == sc[b] and 0.5 or 0) end
        end
      else nn = nn + 1 end
    end
    near(want.metrics.misclf_auroc, u / (np * nn), 1e-12, name .. " misclf auroc by hand")
  end
end

function T.run_id_ignores_where_results_go()
  local run = hydra.run
  local a = tiny_cfg({ results_dir = "/a", threads = "1" })
  local b = tiny_cfg({ results_dir = "/b", threads = "2", ["sweep.jobs"] = "3" })
  eq(run.id(a), run.id(b), "results_dir, threads, sweep.* do not change the id")
  ok(run.id(a) ~= run.id(tiny_cfg({ results_dir = "/a", seed = "1" })), "the seed does")
end

-- A method whose results changed for the same config (run.METHOD_REVISION: Deep Ensembles'
-- disjoint members) changes the run-id of the runs that have it, and only of those.
function T.run_id_follows_method_revisions()
  local run = hydra.run
  local without = tiny_cfg({ methods = "[single, taylor]" })
  local with = tiny_cfg({ methods = "[single, deep_ensemble]" })
  eq(run.METHOD_REVISION.deep_ensemble, 2, "deep_ensemble revision")
  local id_without, id_with = run.id(without), run.id(with)
  local saved = run.METHOD_REVISION
  run.METHOD_REVISION = {}
  local plain_without, plain_with = run.id(without), run.id(with)
  run.METHOD_REVISION = saved
  eq(id_without, plain_without, "a run without a revised method keeps its run-id")
  ok(id_with ~= plain_with, "a run with Deep Ensembles gets another run-id (not reused)")
  eq(#id_with, 12, "12 hex digits")
end

function T.run_rejects_bad_method_lists()
  local root = check.tmpdir()
  local function go(methods)
    return hydra.run.execute(tiny_cfg({ results_dir = root, methods = methods }),
      { quiet = true, cache_dir = root .. "/cache", progress = false })
  end
  local known = {}   -- every lua/hydra/methods/<name>.lua but common, in directory order
  for _, f in ipairs(core.listdir((rawget(_G, "HYDRA_HOME") or ".") .. "/lua/hydra/methods")) do
    local n = f:match("^(.+)%.lua$")
    if n and n ~= "common" then known[#known + 1] = n end
  end
  local sorted = true
  for i = 2, #known do sorted = sorted and known[i - 1] < known[i] end
  ok(#known >= 7 and sorted, "the known methods, sorted")
  raises("run: unknown method 'nope' in methods (known: " .. table.concat(known, ", ") .. ")",
    function() return go("[single, nope]") end)
  raises("run: method 'single' is listed twice in methods", function()
    return go("[single, single]")
  end)
  raises("run: methods is empty (nothing to run)", function() return go("[]") end)
end

return T
