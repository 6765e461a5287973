-- tests/lua/test_hydra.lua: the Hydra pipeline from Lua and the CLI on the synthetic tiny data:
-- hydra.prune (Taylor / circuit members, keep tables, gates files, refusing test data),
-- `hydra prune`, `hydra finetune` (pruned heads bit-identical to the base), `hydra fuse`,
-- hydra.fuse (fused == members, save/load), `hydra predict` on a fused file, gate errors.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local model, config, prune, fuse, h5 = hydra.model, hydra.config, hydra.prune, hydra.fuse, hydra.h5
local finetune = hydra.finetune
local eq, ok, raises = check.eq, check.ok, check.raises

local T = {}

local dir_cache
local function dir()
  if not dir_cache then
    dir_cache = check.tmpdir()
    model.write_synthetic(dir_cache .. "/tiny.h5", { train = 256, val = 64, test = 48, seed = 2 })
    -- a validation OOD set in the prepared layout (inverted images), for circuit searches
    local imgs, labels = core.synth_images(40, 28, 10, 99)
    local f <close> = h5.create(dir_cache .. "/ood-val-tiny.h5")
    f:write("/val/images", imgs)
    local neg = core.tensor("int16", 40)
    for i = 1, 40 do neg:set(i, -1) end
    f:write("/val/labels", neg)
    f:set_attr("/meta", "name", "ood-val-tiny")
    f:commit()
    local _ = labels
  end
  return dir_cache
end

local function cfg_with(extra)
  local ov = { ["data.dir"] = dir(), ["data.ood_val"] = "ood-val-tiny", ["data.ood"] = "[glyphs]",
               ["prune.calib_size"] = 64, ["hydra.members"] = 3, ["hydra.keep_heads"] = 4 }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return config.load("configs/data/tiny.yaml", ov)
end

-- a trained-for-one-epoch tiny base checkpoint (shared by the tests)
local base_cache
local function base()
  if not base_cache then
    local cfg = cfg_with({ ["train.epochs"] = 1 })
    local m = model.new(cfg)
    m:train(dir() .. "/tiny.h5", cfg, { progress = false })
    base_cache = dir() .. "/base.h5"
    m:save(base_cache, { config_yaml = config.to_yaml(cfg), seed = 0 })
  end
  return base_cache
end

local function count_kept(g, m, l, H)
  local n = 0
  for h = 1, H do n = n + (g:get(m, l, h) ~= 0 and 1 or 0) end
  return n
end

function T.keep_tables_and_objectives()
  local cfg = cfg_with({ ["hydra.keep_heads"] = "[2, 3, 4, 5]" })
  local k = prune.keep_table(cfg, 4, 8)
  eq(#k, 3, "members")
  eq(k[2][3], 4, "per-layer keep")
  cfg = cfg_with({ ["hydra.diversity.keep_counts"] = "[2, 3, 4]" })
  k = prune.keep_table(cfg, 4, 8)
  eq(k[1][1], 2); eq(k[3][4], 4)
  raises("prune: hydra.keep_heads lists 2 counts for 4 layers", function()
    return prune.keep_table(cfg_with({ ["hydra.keep_heads"] = "[2, 3]" }), 4, 8)
  end)
  raises("prune: member 1 keeps 9 heads in layer 1 (expected 1 to 8)", function()
    return prune.keep_table(cfg_with({ ["hydra.keep_heads"] = 9 }), 4, 8)
  end)
  local o = prune.objectives(cfg_with({ ["hydra.members"] = 4 }), 4)
  eq(table.concat(o, ","), "acc,ood,avg,acc", "objectives cycle")
end

function T.taylor_members_lua()
  local m = model.load(base())
  local cfg = cfg_with({ ["hydra.diversity.overlap_penalty"] = 0.5 })
  local res = prune.members(m, cfg, { method = "taylor" })
  eq(res.gates:size(1), 3); eq(res.gates:size(2), 4); eq(res.gates:size(3), 8)
  for mm = 1, 3 do for l = 1, 4 do eq(count_kept(res.gates, mm, l, 8), 4, "kept") end end
  eq(res.overlap:get(1, 1), 1.0, "self overlap")
  -- deterministic from the seed
  local again = prune.members(m, cfg, { method = "taylor" })
  for i, v in ipairs(res.gates:flat()) do eq(again.gates:flat()[i], v, "gate " .. i) end
end

function T.circuit_refuses_test_data()
  local m = model.load(base())
  local cfg = cfg_with()
  raises("prune: the circuit search only sees validation data (split 'test' refused; use 'val')",
    function() return prune.validation(m, cfg, { split = "test" }) end)
  raises("prune: 'glyphs' is an OOD test set (data.ood); the circuit search uses the validation "
    .. "OOD set data.ood_val", function() return prune.validation(m, cfg, { ood = "glyphs" }) end)
  -- prune.val_size rows of each validation set (data.test_subset does not size them)
  local id, ood = prune.validation(m, cfg_with({ ["prune.val_size"] = 24,
                                                  ["data.test_subset"] = 8 }))
  eq(id:size(), 24, "ID val rows"); eq(ood:size(), 24, "OOD val rows")
  id, ood = prune.validation(m, cfg_with({ ["prune.val_size"] = 0 }))
  eq(id:size(), 64, "ID val rows (all)"); eq(ood:size(), 40, "OOD val rows (all)")
  -- a real circuit search on val + the validation OOD set, one member per objective
  -- with a progress function: called after every masked evaluation, 3 x 4 x (8 + 1) in all
  local calls, last = 0, nil
  local res = prune.members(m, cfg_with({ ["prune.val_size"] = 24, ["hydra.keep_heads"] = 2 }),
    { method = "circuit", progress = function(done, total)
      calls = calls + 1
      eq(done, calls, "progress counts up")
      last = total
      if done == 5 then error("an error in the display is ignored") end
    end })
  eq(calls, 108, "progress calls"); eq(last, 108, "progress total")
  for mm = 1, 3 do for l = 1, 4 do eq(count_kept(res.gates, mm, l, 8), 2, "circuit size") end end
  eq(table.concat(res.objectives, ","), "acc,ood,avg")
  -- the plain-text display (not a terminal): a line at every further 10 %
  local out = {}
  local stream = { write = function(_, ...) for _, v in ipairs({ ... }) do out[#out + 1] = v end end,
                   flush = function() end }
  local show = require("hydra.progress").counter("circuit search", { tty = false, stream = stream })
  for i = 1, 20 do show(i, 20) end
  local text = table.concat(out)
  local _, lines = text:gsub("\n", "")
  eq(lines, 10, "one line per 10 %")
  ok(text:find("circuit search 20/20", 1, true), "last line: " .. text)
end

-- Circuit search with restarts (hydra_circ_restarts): the validation rows split into search and
-- held-out rows; each restart searched on the search rows only, with its own seed; the restart
-- kept is the one with the best held-out MSP AUROC, recomputed here by the test's own code
-- from the held-out rows it reads from the files (not from prune.heldout_auroc).
function T.restarts_keep_the_best_heldout_restart()
  local m = model.load(base())
  local cfg = cfg_with({ ["prune.val_size"] = 40, ["hydra.members"] = 2, ["hydra.keep_heads"] = 2,
                         ["train.eval_batch_size"] = 16 })
  local R = 4
  local res = prune.members(m, cfg, { method = "circuit", restarts = { n = R, holdout = 0.5 } })
  local rs = res.restarts
  eq(#rs.auroc, R, "one held-out AUROC per restart")
  -- rows: search and held-out disjoint, together the first 40 rows, 20 held out
  local mean, std = table.unpack(m.norm)
  local sets = {}
  for _, s in ipairs({ { "id", dir() .. "/tiny.h5" }, { "ood", dir() .. "/ood-val-tiny.h5" } }) do
    local seen = {}
    for _, part in ipairs({ "search", "held" }) do
      for _, r in ipairs(rs.rows[s[1]][part]:totable()) do
        ok(r >= 0 and r < 40 and not seen[r], s[1] .. ": row " .. r .. " used once, in 0..39")
        seen[r] = true
      end
    end
    eq(rs.rows[s[1]].held:numel(), 20, s[1] .. ": held-out rows")
    local f <close> = h5.open(s[2])
    local im, lb = f:read("/val/images"), f:read("/val/labels")
    sets[s[1]] = {}
    for _, part in ipairs({ "search", "held" }) do
      local rows = rs.rows[s[1]][part]
      sets[s[1]][part] = core.dataset_from_images(core.sample_gather(im, rows),
        core.sample_gather(lb, rows), mean, std)
    end
  end
  -- each restart again, from its seed on the search rows; its held-out AUROC by hand
  local open = m:gates():clone()   -- every head on: the state each search starts from
  local function msp_of(gates, ds)
    local p = {}
    for mm = 1, gates:size(1) do
      m:set_gates(gates:row(mm))
      p[mm] = m:predict(ds, nil, { batch_size = 16 }).probs:totable()
    end
    local s = core.tensor("float64", #p[1])
    for i = 1, #p[1] do
      local best = -1
      for c = 1, #p[1][i] do
        local v = 0
        for mm = 1, #p do v = v + p[mm][i][c] end
        best = math.max(best, v / #p)
      end
      s:set(i, -best)
    end
    m:set_gates(open)
    return s
  end
  local best, scores = 1, {}
  for r = 1, R do
    local g = prune.members(m, cfg, { method = "circuit", id = sets.id.search,
      ood_ds = sets.ood.search, seed = rs.seeds[r] }).gates
    -- AUROC by pairs: P(OOD score > ID score) + ties / 2
    local a, b = msp_of(g, sets.id.held):totable(), msp_of(g, sets.ood.held):totable()
    local wins = 0
    for _, x in ipairs(a) do
      for _, y in ipairs(b) do wins = wins + (y > x and 1 or (y == x and 0.5 or 0)) end
    end
    scores[r] = wins / (#a * #b)
    check.near(rs.auroc[r], scores[r], 1e-6, "restart " .. r .. ": held-out AUROC")
    if scores[r] > scores[best] then best = r end
  end
  eq(rs.chosen, best, "the restart with the best held-out AUROC is kept")
  -- the fixture is one where the best restart is not the first, so a selection that ignores the
  -- held-out scores (keeping restart 1) fails here
  ok(best ~= 1, "fixture: the best held-out restart is not the first (" ..
    table.concat(scores, ", ") .. ")")
  local again = prune.members(m, cfg, { method = "circuit", id = sets.id.search,
    ood_ds = sets.ood.search, seed = rs.seeds[best] })
  check.same(res.gates:totable(), again.gates:totable(), "the kept gates are that restart's")
  -- without resamples every restart is the same search: refused
  check.raises_has("prune: restarts > 1 need hydra.diversity.bootstrap: true", function()
    return prune.members(m, cfg_with({ ["hydra.diversity.bootstrap"] = false }),
      { method = "circuit", restarts = { n = 2, holdout = 0.5 } })
  end)
end

function T.finetune_member_lua()
  local g = core.tensor("float32", 2, 4, 8)
  for l = 1, 4 do for h = 1, 8 do g:set(1, l, h, h <= 4 and 1 or 0); g:set(2, l, h, 1) end end
  -- finetune.epochs 0: the gated base, weights untouched; the config is not modified
  local cfg = cfg_with({ ["finetune.epochs"] = 0 })
  local b = model.load(base())
  local m, meta, hist = finetune.member(model.load(base()), g, 1, cfg)
  eq(meta.member, 1); eq(meta.finetune_epochs, 0); eq(hist, nil)
  eq(m:gates():get(2, 5), 0.0, "pruned gate"); eq(m:gates():get(2, 4), 1.0, "kept gate")
  local pb, pm = b:get_params():flat(), m:get_params():flat()
  for i = 1, #pb do if pb[i] ~= pm[i] then error("epochs 0 changed weight " .. i) end end
  -- one epoch on 64 rows: kept heads move, pruned ones stay bit-identical (checked per weight
  -- in cli_chain_and_pruned_weights_identical); cfg.train is left as it was
  cfg = cfg_with({ ["finetune.epochs"] = 1, ["data.train_subset"] = 64, ["train.epochs"] = 7 })
  local lr = cfg.optim.learning_rate
  m, meta, hist = finetune.member(model.load(base()), g, 1, cfg, { progress = false })
  eq(meta.finetune_epochs, 1); eq(#hist.epochs, 1, "one fine-tuning epoch")
  eq(cfg.train.epochs, 7, "cfg.train.epochs unchanged")
  eq(cfg.optim.learning_rate, lr, "cfg.optim.learning_rate unchanged")
  local qkv_b, qkv_m = b:param("blocks.0.attn.qkv.weight"), m:param("blocks.0.attn.qkv.weight")
  eq(qkv_m:get(1, 1) ~= qkv_b:get(1, 1), true, "kept head 1 moved")
  eq(qkv_m:get(57, 1), qkv_b:get(57, 1), "pruned head 8 (q rows 57..64) unchanged")
  raises("finetune: member 3 does not exist (the gates hold 2 member(s))",
    function() return finetune.member(b, g, 3, cfg) end)
  -- finetune.train_subset: fine-tuning on 32 leading rows is exactly data.train_subset = 32, and
  -- differs from the 64 rows of data.train_subset
  local c32 = cfg_with({ ["finetune.epochs"] = 1, ["data.train_subset"] = 64,
                         ["finetune.train_subset"] = 32 })
  local m32 = finetune.member(model.load(base()), g, 1, c32, { progress = false })
  eq(c32.data.train_subset, 64, "cfg.data.train_subset unchanged")
  local ref = finetune.member(model.load(base()), g, 1,
    cfg_with({ ["finetune.epochs"] = 1, ["data.train_subset"] = 32 }), { progress = false })
  local a32, r32, a64 = m32:get_params():flat(), ref:get_params():flat(), m:get_params():flat()
  local same, diff = true, false
  for i = 1, #a32 do
    if a32[i] ~= r32[i] then same = false end
    if a32[i] ~= a64[i] then diff = true end
  end
  ok(same, "finetune.train_subset 32 == data.train_subset 32")
  ok(diff, "32 rows differ from 64 rows")
  -- never more rows than the base trained on: 128 with data.train_subset = 64 is 64 rows
  local big = finetune.member(model.load(base()), g, 1,
    cfg_with({ ["finetune.epochs"] = 1, ["data.train_subset"] = 64,
               ["finetune.train_subset"] = 128 }), { progress = false })
  local ab = big:get_params():flat()
  for i = 1, #ab do
    if ab[i] ~= a64[i] then error("finetune.train_subset 128 > 64 changed weight " .. i) end
  end
end

function T.cli_chain_and_pruned_weights_identical()
  local d = dir()
  local code, out, err = check.hydra(("prune %s --method taylor --members 2 --keep 3 --out %s/g.h5")
    :format(base(), d))
  eq(code, 0, err)
  ok(out:find("2 members, mean pairwise head overlap"), out)
  local g <close> = h5.open(d .. "/g.h5")
  eq(g:attr("/", "method"), "taylor")
  eq(g:attr("/", "keep"), "3,3,3,3;3,3,3,3")
  local gates = g:read("/gates")
  for i = 1, 2 do
    code, out, err = check.hydra(("finetune %s --gates %s/g.h5 --member %d --out %s/m%d.h5 --quiet "
      .. "finetune.epochs=1 data.train_subset=64"):format(base(), d, i, d, i))
    eq(code, 0, err)
  end
  -- pruned heads' q/k/v rows and proj columns are bit-identical to the base's; kept ones moved
  local b, m1 = model.load(base()), model.load(d .. "/m1.h5")
  local c = b:config()
  local D, H = c.d_model, c.n_heads
  local HS = D // H
  local moved = false
  for l = 1, c.depth do
    local name = ("blocks.%d.attn.qkv.weight"):format(l - 1)
    local wb, wm = b:param(name), m1:param(name)
    local pn = ("blocks.%d.attn.proj.weight"):format(l - 1)
    local pb, pm = b:param(pn), m1:param(pn)
    for h = 1, H do
      local pruned = gates:get(1, l, h) == 0
      eq(m1:gates():get(l, h), gates:get(1, l, h), "member gates")
      for s = 0, 2 do
        for r = s * D + (h - 1) * HS + 1, s * D + h * HS do
          for j = 1, D do
            local same = wb:get(r, j) == wm:get(r, j)
            if pruned then ok(same, ("layer %d head %d qkv row %d changed"):format(l, h, r))
            elseif not same then moved = true end
          end
        end
      end
      if pruned then
        for r = 1, D do
          for j = (h - 1) * HS + 1, h * HS do
            ok(pb:get(r, j) == pm:get(r, j), ("layer %d head %d proj changed"):format(l, h))
          end
        end
      end
    end
  end
  ok(moved, "fine-tuning changed no kept head")
  code, out, err = check.hydra(("fuse %s/m1.h5 %s/m2.h5 --out %s/f.h5"):format(d, d, d))
  eq(code, 0, err)
  ok(out:find("2 members %(mlp average, ln member, embed member, head member%)"), out)
  code, out, err = check.hydra(("predict %s/f.h5 --data %s/tiny.h5 --split test --out %s/p.h5")
    :format(d, d, d))
  eq(code, 0, err)
  local p <close> = h5.open(d .. "/p.h5")
  local mp = p:read("/member_probs")
  eq(mp:size(1), 2); eq(mp:size(2), 48); eq(mp:size(3), 10)
end

function T.fused_equals_members_from_lua()
  local d = dir()
  local m = model.load(base())
  local res = prune.members(m, cfg_with({ ["hydra.diversity.keep_counts"] = "[2, 5, 8]" }),
    { method = "taylor" })
  local ms = {}
  for i = 1, 3 do
    ms[i] = model.load(base())
    ms[i]:set_gates(res.gates:row(i))
  end
  local f = fuse.build(ms, { mlp = "member", ln = "member", embed = "member", head = "member" })
  local info = f:info()
  eq(info.kept[1][1], 2); eq(info.kept[3][4], 8)
  f:save(d .. "/fm.h5")
  local g = fuse.load(d .. "/fm.h5")
  local p = g:predict(d .. "/tiny.h5", "test", { batch_size = 16 })
  for i = 1, 3 do
    local q = ms[i]:predict(d .. "/tiny.h5", "test", { batch_size = 16 })
    local a, bq = p.member_probs:row(i):flat(), q.probs:flat()
    for k = 1, #bq do check.near(a[k], bq[k], 1e-5, "member " .. i .. " prob " .. k) end
  end
  eq(g.norm[1], ms[1].norm[1], "normalisation recorded")
end

function T.gate_errors()
  local d = dir()
  local function gates_file(name, t)
    local f <close> = h5.create(d .. "/" .. name)
    f:write("/gates", t)
    f:commit()
    return d .. "/" .. name
  end
  local z = core.tensor("float32", 1, 4, 8)
  for l = 1, 4 do for h = 1, 8 do z:set(1, l, h, 1) end end
  for h = 1, 8 do z:set(1, 2, h, 0) end
  local p = gates_file("allpruned.h5", z)
  local code, _, err
  code, _, err = check.hydra(("finetune %s --gates %s --member 1 --out %s/x.h5")
    :format(base(), p, d))
  eq(code, 1)
  eq(err, ("hydra: hydra finetune: prune: '%s': member 1 prunes every head of layer 2 (keep at "
    .. "least one)\n"):format(p))
  p = gates_file("empty.h5", core.tensor("float32", 0, 4, 8))
  code, _, err = check.hydra(("finetune %s --gates %s --member 1 --out %s/x.h5"):format(base(), p, d))
  eq(code, 1)
  eq(err, ("hydra: hydra finetune: prune: '%s': /gates members (its first dim) = 0 is out of "
    .. "range (expected 1 to 64)\n"):format(p))
  p = gates_file("shape.h5", core.tensor("float32", 2, 4, 6))
  code, _, err = check.hydra(("finetune %s --gates %s --member 1 --out %s/x.h5"):format(base(), p, d))
  eq(code, 1)
  eq(err, ("hydra: hydra finetune: prune: '%s': /gates has shape [2,4,6], expected [M,4,8]\n")
    :format(p))
  code, _, err = check.hydra(("fuse --out %s/x.h5"):format(d))
  eq(code, 2)
  local fc = hydra.config.defaults().fuse
  raises("fused: need at least one member (got 0)", function() return fuse.build({}, fc) end)
  raises("fused: fuse.mlp must be average or member (got 'mean')", function()
    return fuse.build({ model.load(base()) }, { mlp = "mean", ln = fc.ln, embed = fc.embed,
                                                head = fc.head })
  end)
  raises("fuse.ln must be a string (got nil)", function()
    return fuse.build({ model.load(base()) }, { mlp = "member" })
  end)
end

-- One /meta writer for checkpoints and fused files (lua/bind/io/l_h5.c): strings, integers,
-- floats, booleans (as 0 / 1) and arrays of numbers (per-channel data_mean) both ways; a bad
-- value raises before any file exists.
function T.meta_writer_shared()
  local d = check.tmpdir()
  local m = model.load(base())
  local f = fuse.build({ m }, config.defaults().fuse)
  local meta = { note = "x", n = 7, r = 0.25, flag = true, off = false, v = { 0.5, 0.25, 2 } }
  m.ud:save(d .. "/m.h5", meta)
  f.ud:save(d .. "/f.h5", meta)
  for _, p in ipairs({ d .. "/m.h5", d .. "/f.h5" }) do
    local g <close> = h5.open(p)
    local a = g:attrs("/meta")
    eq(a.note, "x", p); eq(a.n, 7, p); eq(a.r, 0.25, p); eq(a.flag, 1, p); eq(a.off, 0, p)
    eq(#a.v, 3, p); eq(a.v[1], 0.5, p); eq(a.v[3], 2.0, p)
  end
  raises("model: meta 'bad' must be a string, a number, a boolean or an array of 1 to 64 " ..
    "numbers (got table)", function() m.ud:save(d .. "/m2.h5", { bad = {} }) end)
  raises("fused: meta 'bad' must be a string, a number, a boolean or an array of 1 to 64 " ..
    "numbers (got table)", function() f.ud:save(d .. "/f2.h5", { bad = { 1, "x" } }) end)
  raises("fused: meta keys must be strings", function() f.ud:save(d .. "/f2.h5", { 1 }) end)
  eq(core.stat(d .. "/m2.h5"), nil, "nothing written"); eq(core.stat(d .. "/f2.h5"), nil)
end

-- Bindings read the resolved sections by their YAML keys, and name the key when it is wrong.
function T.bindings_name_config_keys()
  local cfg = cfg_with()
  local m = model.load(base())
  local tr = config.copy(cfg.train)
  tr.augment.hflip = nil
  raises("train.augment.hflip must be a boolean (got nil)", function()
    return core.trainer_new(m.ud, model.dataset(dir() .. "/tiny.h5", "train"), tr, cfg.optim, 0)
  end)
  local ft = config.copy(cfg.finetune)
  raises("finetune.warmup_epochs must be a number (got nil)", function()
    return core.trainer_new(m.ud, model.dataset(dir() .. "/tiny.h5", "train"), cfg.train,
      cfg.optim, 0, ft)
  end)
  local mc = config.copy(cfg.model)
  mc.dropout = "0.1"
  raises("model.dropout must be a number (got string)", function() return core.model_new(mc) end)
  local pc = config.copy(cfg.prune)
  pc.circuit_batch_size, pc.method = nil, "circuit"
  local c = m:config()
  local keep = prune.keep_table(cfg, c.depth, c.n_heads)
  raises("prune.circuit_batch_size must be a non-negative integer (got nil)", function()
    return core.prune_members(m.ud, pc, cfg.hydra, { keep = keep,
      objectives = { "acc", "acc", "acc" }, seed = 0 })
  end)
  raises("prune: keep must list the heads kept by each of the hydra.members = 3 members "
    .. "(hydra.keep_heads)", function()
    return core.prune_members(m.ud, cfg.prune, cfg.hydra, { keep = { { 1, 1 } },
      objectives = { "acc" }, seed = 0 })
  end)
end

return T
