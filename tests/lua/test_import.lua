-- tests/lua/test_import.lua: hydra.import / hydra.export (safetensors <-> hydra checkpoints),
-- against the torch fixtures of tests/ref/make_import_ref.py (tests/ref/import/): logits of the
-- imported timm ViT (F32, F16, BF16 files) and HF ViT equal the float64 torch reference; import
-- -> export -> import is bit-exact and re-export byte-identical; pruned members export
-- dense-masked and sliced and both give the gated member's logits back; every malformed file is
-- refused with its message and leaves no output; core.json_* and the tensor surgery functions.
local check = require("check")
local core = require("hydra.core")
local h5 = require("hydra.h5")
local imp = require("hydra.import")
local ex = require("hydra.export")
local eq, ok, raises_has = check.eq, check.ok, check.raises_has

local T = {}

local home = rawget(_G, "HYDRA_HOME") or "."
local REF = home .. "/tests/ref/import"
local TIMM = REF .. "/timm_vit_f32.safetensors"

local dir_cache
local function dir()
  dir_cache = dir_cache or check.tmpdir()
  return dir_cache
end

local function quiet() end

local function import(o)
  o.out = o.out or (dir() .. "/imp.h5")
  o.strict = o.strict ~= false
  o.log = o.log or quiet
  imp.run(o)
  return o.out
end

local function ref_tol()
  local f <close> = h5.open(REF .. "/ref.h5")
  return f:attr("/", "atol"), f:attr("/", "rtol")
end

-- max over elements of |got - want| - (atol + rtol |want|) <= 0, and the max |got - want|
local function within(got, want, atol, rtol, what)
  local g, w = got:flat(), want:flat()
  eq(#g, #w, what .. ": element count")
  local worst = 0
  for i = 1, #w do
    local d = math.abs(g[i] - w[i])
    ok(d <= atol + rtol * math.abs(w[i]),
      ("%s: element %d: %.9g vs %.9g (|d| %.3g)"):format(what, i, g[i], w[i], d))
    if d > worst then worst = d end
  end
  return worst
end

local function images()
  local f <close> = h5.open(REF .. "/ref.h5")
  return f:read("/images")
end

local function ref_logits(name)
  local f <close> = h5.open(REF .. "/ref.h5")
  return f:read(name, "float64")
end

local function logits_of(path, gates)
  local m = core.model_load(path)
  if gates then m:set_gates(gates) end
  return m:forward({ images = images() })
end

local function same_tensor(a, b, what)
  local x, y = a:flat(), b:flat()
  eq(#x, #y, what .. ": size")
  for i = 1, #x do
    if x[i] ~= y[i] then error(("%s: element %d: %.9g vs %.9g"):format(what, i, x[i], y[i]), 2) end
  end
end

local function same_params(p1, p2)
  local a, b = core.model_load(p1), core.model_load(p2)
  local na, nb = a:param_names(), b:param_names()
  eq(#na, #nb, "tensor count")
  for i, n in ipairs(na) do
    eq(nb[i], n, "tensor order")
    same_tensor(a:param(n), b:param(n), n)
  end
  same_tensor(a:gates(), b:gates(), "head_gates")
end

local function bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A copy of the timm fixture with `edit(entries)` applied (entries: name -> tensor).
local function edited(name, edit)
  local st = core.safetensors_open(TIMM)
  local tensors = {}
  for _, n in ipairs(st:names()) do tensors[n] = st:read(n) end
  st:close()
  edit(tensors)
  local list = {}
  for n, t in pairs(tensors) do list[#list + 1] = { name = n, tensor = t } end
  local path = dir() .. "/" .. name .. ".safetensors"
  core.safetensors_write(path, list, { format = "pt" })
  return path
end

-- A copy of a JSON file with edit(obj) applied.
local function edited_json(name, path, edit)
  local j = core.json_decode(bytes(path))
  edit(j)
  local out = dir() .. "/" .. name .. ".json"
  check.write_file(out, core.json_encode(j))
  return out
end

-- ===== parity with torch =====

function T.timm_vit_logits_f32_f16_bf16()
  local atol, rtol = ref_tol()
  for _, dt in ipairs({ "F32", "F16", "BF16" }) do
    local p = import({ file = ("%s/timm_vit_%s.safetensors"):format(REF, dt:lower()),
                       format = "timm-vit", heads = 4, out = dir() .. "/timm_" .. dt .. ".h5" })
    within(logits_of(p), ref_logits("/timm_vit/logits_" .. dt), atol, rtol, "timm " .. dt)
    local f <close> = h5.open(p)
    eq(#f:read_strings("/import/name_map"), 32, "every tensor mapped")
    eq(#f:read_strings("/import/ignored"), 0, "none ignored")
    eq(f:attr("/import", "format"), "timm-vit", "format")
    eq(f:attr("/import", "sha256"), core.file_sha256(("%s/timm_vit_%s.safetensors"):format(REF,
      dt:lower())), "sha256")
    eq(f:read_strings("/import/dtypes")[1]:match("\t(.*)$"), dt, "source dtype")
    eq(f:attr("/preprocess", "mode"), "timm", "preprocess mode")
    eq(f:attr("/preprocess", "interpolation"), "bicubic", "interpolation")
    eq(f:attr("/preprocess", "size"), 32, "size")
  end
end

function T.timm_config_json_gives_heads_and_preprocessing()
  local p = import({ file = TIMM, format = "timm-vit", config = REF .. "/timm_vit_config.json",
                     out = dir() .. "/timm_cfg.h5" })
  local m = core.model_load(p)
  eq(m:config().n_heads, 4, "heads from model_args.num_heads")
  local f <close> = h5.open(p)
  eq(f:attr("/preprocess", "crop_pct"), 0.9, "crop_pct from pretrained_cfg")
  check.same(f:attr("/preprocess", "mean"), { 0.5, 0.5, 0.5 }, "mean")
end

function T.hf_vit_logits_and_eps_from_config()
  local atol, rtol = ref_tol()
  local p = import({ file = REF .. "/hf_vit/model.safetensors", format = "hf-vit",
                     config = REF .. "/hf_vit/config.json",
                     preprocessor = REF .. "/hf_vit/preprocessor_config.json",
                     out = dir() .. "/hf.h5" })
  within(logits_of(p), ref_logits("/hf_vit/logits"), atol, rtol, "hf vit")
  local m = core.model_load(p)
  eq(m:config().ln_eps, 1e-12, "layer_norm_eps")
  local f <close> = h5.open(p)
  eq(f:attr("/preprocess", "mode"), "hf", "mode")
  eq(f:attr("/preprocess", "interpolation"), "bilinear", "resample 2")
  local rows = f:read_strings("/import/name_map")
  eq(#rows, 40, "q/k/v apart")
  local found = false
  for _, r in ipairs(rows) do
    if r == "vit.encoder.layer.1.attention.attention.key.bias\tblocks.1.attn.qkv.bias\tk\tF32" then
      found = true
    end
  end
  ok(found, "the name map records the k rows of blocks.1.attn.qkv.bias")
end

-- ===== round trips =====

function T.import_export_import_bit_exact_and_same_bytes()
  local d = dir()
  for _, names in ipairs({ "timm", "hf" }) do
    local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = d .. "/rt_a.h5" })
    ex.run({ ckpt = a, names = names, out = d .. "/rt_1.safetensors" })
    import({ file = d .. "/rt_1.safetensors", format = names == "timm" and "timm-vit" or "hf-vit",
             out = d .. "/rt_b.h5" })     -- no --heads: the file's hydra.head_dim says it
    same_params(a, d .. "/rt_b.h5")
    ex.run({ ckpt = d .. "/rt_b.h5", names = names, out = d .. "/rt_2.safetensors" })
    ok(bytes(d .. "/rt_1.safetensors") == bytes(d .. "/rt_2.safetensors"),
      names .. ": re-export is byte-identical")
  end
end

function T.bf16_export_is_the_fixture_rounding()
  -- the F32 fixture exported as BF16 holds torch's .bfloat16() of it: the BF16 fixture's values
  local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = dir() .. "/b16.h5" })
  ex.run({ ckpt = a, dtype = "bf16", out = dir() .. "/b16.safetensors" })
  local e = core.safetensors_open(dir() .. "/b16.safetensors")
  local s = core.safetensors_open(REF .. "/timm_vit_bf16.safetensors")
  for _, name in ipairs(s:names()) do
    eq(e:info(name).dtype, "BF16", name .. " dtype")
    same_tensor(e:read(name), s:read(name), name)
  end
  e:close(); s:close()
  raises_has("--dtype must be f32, f16 or bf16 (got 'f8')", function()
    ex.run({ ckpt = a, dtype = "f8", out = dir() .. "/x.safetensors" })
  end)
end

function T.timm_export_equals_fixture_tensors()
  local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = dir() .. "/fx.h5" })
  ex.run({ ckpt = a, names = "timm", out = dir() .. "/fx.safetensors" })
  local e, s = core.safetensors_open(dir() .. "/fx.safetensors"), core.safetensors_open(TIMM)
  local en, sn = e:names(), s:names()
  eq(#en, #sn, "tensor count")
  for _, name in ipairs(sn) do
    check.same(e:info(name).shape, s:info(name).shape, name .. " shape")
    same_tensor(e:read(name), s:read(name), name)
  end
  eq(e:metadata()["hydra.kind"], "model", "kind")
  eq(e:metadata()["hydra.heads"], "[[0,1,2,3],[0,1,2,3]]", "kept heads")
  e:close(); s:close()
end

-- ===== pruned members =====

local GATES = { { 1, 0, 1, 0 }, { 0, 0, 0, 0 } }   -- layer 2 keeps no head

-- (m:save without meta: the form that once hung in l_writemeta)
local function member()
  local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = dir() .. "/mb_base.h5" })
  local m = core.model_load(a)
  m:set_gates(core.from_table("float32", GATES))
  local p = dir() .. "/member.h5"
  m:save(p)
  return p
end

function T.member_dense_masked_export()
  local p = member()
  local gated = logits_of(p)
  local full = logits_of(dir() .. "/mb_base.h5")
  local differ = false
  for i, v in ipairs(gated:flat()) do if v ~= full:flat()[i] then differ = true end end
  ok(differ, "pruning changes the logits")
  for _, names in ipairs({ "timm", "hf" }) do
    local out = dir() .. "/dense_" .. names .. ".safetensors"
    local r = ex.run({ ckpt = p, names = names, out = out })
    eq(r.kind, "member", "kind")
    local st = core.safetensors_open(out)
    local pw = names == "timm" and "blocks.0.attn.proj.weight"
      or "vit.encoder.layer.0.attention.output.dense.weight"
    check.same(st:info(pw).shape, { 32, 32 }, "original shape")
    local w = st:read(pw)
    for row = 1, 32 do
      for col = 9, 16 do eq(w:get(row, col), 0.0, "head 2's proj columns are zero") end
      ok(w:get(row, 1) ~= 0.0 or w:get(row, 2) ~= 0.0, "head 1's columns are kept")
    end
    eq(st:metadata()["hydra.heads"], "[[0,2],[]]", "kept heads")
    st:close()
    -- the file alone (every gate 1, as stock timm/HF code runs it) gives the member's logits
    local fmt = names == "timm" and "timm-vit" or "hf-vit"
    local q = import({ file = out, format = fmt, out = dir() .. "/dense_back.h5" })
    local ones = core.from_table("float32", { { 1, 1, 1, 1 }, { 1, 1, 1, 1 } })
    within(logits_of(q, ones), gated, 1e-6, 1e-6, names .. " dense-masked vs gated")
    -- re-import restores the gates
    same_tensor(core.model_load(q):gates(), core.from_table("float32", GATES), "gates")
  end
end

function T.member_sliced_export()
  local p = member()
  local gated = logits_of(p)
  for _, names in ipairs({ "timm", "hf" }) do
    local out = dir() .. "/sliced_" .. names .. ".safetensors"
    ex.run({ ckpt = p, names = names, slice = true, out = out })
    local st = core.safetensors_open(out)
    local md = st:metadata()
    eq(md["hydra.sliced"], "1", "sliced")
    eq(md["hydra.head_counts"], "[2,0]", "per-layer head counts")
    if names == "timm" then
      check.same(st:info("blocks.0.attn.qkv.weight").shape, { 48, 32 }, "qkv of 2 heads")
      check.same(st:info("blocks.0.attn.proj.weight").shape, { 32, 16 }, "proj of 2 heads")
      check.same(st:info("blocks.1.attn.qkv.weight").shape, { 0, 32 }, "qkv of 0 heads")
      check.same(st:info("blocks.1.attn.proj.weight").shape, { 32, 0 }, "proj of 0 heads")
    else
      check.same(st:info("vit.encoder.layer.0.attention.attention.key.weight").shape, { 16, 32 },
        "key of 2 heads")
      check.same(st:info("vit.encoder.layer.1.attention.attention.value.bias").shape, { 0 },
        "value bias of 0 heads")
    end
    st:close()
    local q = import({ file = out, format = names == "timm" and "timm-vit" or "hf-vit",
                       out = dir() .. "/sliced_back.h5" })
    same_tensor(core.model_load(q):gates(), core.from_table("float32", GATES), "gates")
    within(logits_of(q), gated, 1e-6, 1e-6, names .. " sliced vs gated")
    -- a sliced member re-exported sliced gives the same bytes
    ex.run({ ckpt = q, names = names, slice = true, out = dir() .. "/sliced_again.safetensors" })
    ok(bytes(out) == bytes(dir() .. "/sliced_again.safetensors"), names .. ": same bytes")
  end
end

function T.sliced_export_needs_binary_gates()
  local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = dir() .. "/half.h5" })
  local m = core.model_load(a)
  m:set_gate(1, 2, 0.5)
  m:save(dir() .. "/half_member.h5")
  raises_has("--slice needs gates 0 or 1 (layer 1 head 2 has 0.5)", function()
    ex.run({ ckpt = dir() .. "/half_member.h5", slice = true, out = dir() .. "/x.safetensors" })
  end)
  -- dense-masked scales the head's columns by its gate: same logits as the gated model
  ex.run({ ckpt = dir() .. "/half_member.h5", out = dir() .. "/half.safetensors" })
  local q = import({ file = dir() .. "/half.safetensors", format = "timm-vit",
                     out = dir() .. "/half_back.h5" })
  within(logits_of(q), logits_of(dir() .. "/half_member.h5"), 1e-6, 1e-6, "scaled head")
end

-- ===== malformed imports =====

local function refused(part, o)
  local out = dir() .. "/refused.h5"
  os.remove(out)
  o.out = out
  raises_has(part, function() import(o) end)
  ok(not core.stat(out), "nothing written: " .. part)
end

function T.malformed_imports()
  refused("has no tensor 'head.bias' (expected shape [10])", {
    file = edited("missing", function(t) t["head.bias"] = nil end), format = "timm-vit",
    heads = 4 })
  refused("has no tensor 'blocks.1.attn.qkv.weight' (expected shape [96,32])", {
    file = edited("missing_qkv", function(t) t["blocks.1.attn.qkv.weight"] = nil end),
    format = "timm-vit", heads = 4 })
  local extra = edited("extra", function(t) t["blocks.0.attn.extra"] = core.tensor("float32", 3) end)
  refused("has 1 tensor the timm-vit name map does not use: blocks.0.attn.extra (--no-strict "
    .. "ignores them)", { file = extra, format = "timm-vit", heads = 4 })
  local lines = {}
  import({ file = extra, format = "timm-vit", heads = 4, strict = false,
           log = function(s) lines[#lines + 1] = s end, out = dir() .. "/nostrict.h5" })
  ok(table.concat(lines, "\n"):find("ignored 1 tensor: blocks.0.attn.extra", 1, true),
    "--no-strict lists what it ignored")
  local f <close> = h5.open(dir() .. "/nostrict.h5")
  check.same(f:read_strings("/import/ignored"), { "blocks.0.attn.extra" }, "/import/ignored")
  refused("'blocks.0.mlp.fc2.bias' has shape [31], expected [32]", {
    file = edited("shape", function(t) t["blocks.0.mlp.fc2.bias"] = core.tensor("float32", 31) end),
    format = "timm-vit", heads = 4 })
  refused("unsupported feature LayerScale (blocks.0.ls1.gamma)", {
    file = edited("ls", function(t) t["blocks.0.ls1.gamma"] = core.tensor("float32", 32) end),
    format = "timm-vit", heads = 4 })
  refused("unsupported feature register tokens (reg_token)", {
    file = edited("reg", function(t) t["reg_token"] = core.tensor("float32", 1, 4, 32) end),
    format = "timm-vit", heads = 4 })
  refused("unsupported feature q/k-norm (blocks.1.attn.q_norm.weight)", {
    file = edited("qn", function(t) t["blocks.1.attn.q_norm.weight"] = core.tensor("float32", 8) end),
    format = "timm-vit", heads = 4 })
  refused("unsupported feature fc_norm (average pooling) (fc_norm.weight)", {
    file = edited("fcn", function(t) t["fc_norm.weight"] = core.tensor("float32", 32) end),
    format = "timm-vit", heads = 4 })
  refused("unsupported feature a pre-norm (norm_pre) (norm_pre.weight)", {
    file = edited("np", function(t) t["norm_pre.weight"] = core.tensor("float32", 32) end),
    format = "timm-vit", heads = 4 })
  refused("cannot be read from its tensor shapes: give --heads H, --arch NAME or --config "
    .. "config.json", { file = TIMM, format = "timm-vit" })
  refused("the head count is 4 by --heads but 8 by '" .. dir() .. "/h8.json' model_args.num_heads",
    { file = TIMM, format = "timm-vit", heads = 4, config = edited_json("h8",
      REF .. "/timm_vit_config.json", function(j) j.model_args.num_heads = 8 end) })
  refused("has d_model 32, but --arch vit_tiny_patch16_224 has 192",
    { file = TIMM, format = "timm-vit", arch = "vit_tiny_patch16_224" })
  refused("3 heads do not divide d_model 32", { file = TIMM, format = "timm-vit", heads = 3 })
  refused("'blocks.0.attn.qkv.weight' has a non-finite value (nan)", {
    file = edited("nan", function(t)
      local w = t["blocks.0.attn.qkv.weight"]
      w:set(3, 5, 0 / 0)
    end), format = "timm-vit", heads = 4 })
  -- an HF export records layer_norm_eps 1e-12 in its metadata; a config.json saying 1e-6
  local hf = import({ file = REF .. "/hf_vit/model.safetensors", format = "hf-vit",
                      config = REF .. "/hf_vit/config.json", out = dir() .. "/hf_eps.h5" })
  ex.run({ ckpt = hf, out = dir() .. "/hf_eps.safetensors" })
  refused("the LayerNorm epsilon is 1e-06 by '" .. dir() .. "/eps.json' layer_norm_eps but "
    .. "1e-12 by '" .. dir() .. "/hf_eps.safetensors' __metadata__ hydra.ln_eps", {
    file = dir() .. "/hf_eps.safetensors", format = "hf-vit",
    config = edited_json("eps", REF .. "/hf_vit/config.json", function(j) j.layer_norm_eps = 1e-6 end) })
  refused("has no tensor 'vit.embeddings.patch_embeddings.projection.weight' (the patch "
    .. "embedding: [D, C, p, p])", { file = TIMM, format = "hf-vit", heads = 4 })
end

-- ===== fresh head =====

function T.classes_replace_the_head()
  local lines = {}
  local p = import({ file = TIMM, format = "timm-vit", heads = 4, classes = 3, seed = 7,
                     log = function(s) lines[#lines + 1] = s end, out = dir() .. "/k3.h5" })
  local m = core.model_load(p)
  eq(m:config().n_classes, 3, "classes")
  check.same(m:param("head.weight"):shape(), { 3, 32 }, "fresh head")
  ok(lines[1]:find("a fresh head of 3 classes (seed 7) replaces the file's (10 classes)", 1, true),
    "said on stdout: " .. tostring(lines[1]))
  local f <close> = h5.open(p)
  eq(f:attr("/import", "fresh_head"), 1, "recorded")
end

-- ===== fused export =====

function T.fused_export_name_map_rebuilds_members()
  local d = dir()
  local a = import({ file = TIMM, format = "timm-vit", heads = 4, out = d .. "/fz_base.h5" })
  local gates = { { { 1, 0, 1, 0 }, { 0, 1, 0, 0 } }, { { 0, 1, 1, 1 }, { 1, 0, 0, 1 } } }
  local ms = {}
  for i, g in ipairs(gates) do
    local m = core.model_load(a)
    m:set_gates(core.from_table("float32", g))
    m:save(d .. "/fz_m" .. i .. ".h5")
    ms[i] = core.model_load(d .. "/fz_m" .. i .. ".h5")
  end
  local fz = core.fused_new(ms, { mlp = "average", ln = "member", embed = "member", head = "member" })
  fz:save(d .. "/fz.h5")
  local r = ex.run({ ckpt = d .. "/fz.h5", out = d .. "/fz.safetensors" })
  eq(r.kind, "fused", "kind")
  eq(r.name_map, d .. "/fz.name_map.json", "name map beside the file")
  ex.run({ ckpt = d .. "/fz.h5", out = d .. "/fz2.safetensors" })
  ok(bytes(d .. "/fz.safetensors") == bytes(d .. "/fz2.safetensors"), "deterministic")
  local map = core.json_decode(bytes(r.name_map))
  local st = core.safetensors_open(d .. "/fz.safetensors")
  eq(st:metadata()["hydra.name_map"] .. "\n", bytes(r.name_map), "map in __metadata__ too")
  local n = 0
  for _, name in ipairs(st:names()) do
    local row = map[name]
    ok(row, "every tensor in the map: " .. name)
    local t = st:read(name)
    if row.member and row.source then   -- the member's own tensor, rows / columns as the map says
      local want = ms[row.member + 1]:param(row.source)
      if row.rows then want = core.tensor_select(want, 1, row.rows) end
      if row.cols then want = core.tensor_select(want, 2, row.cols) end
      same_tensor(t, want, name)
      n = n + 1
    elseif row.reduce == "mean" then   -- the merged MLP: the members' mean
      local x, y = ms[1]:param(row.source):flat(), ms[2]:param(row.source):flat()
      local got = t:flat()
      for i = 1, #got do
        ok(math.abs(got[i] - (x[i] + y[i]) / 2) <= 1e-7, name .. ": the members' mean")
      end
      n = n + 1
    end
  end
  st:close()
  eq(n, 2 * 24 + 8, "member tensors and shared MLP tensors checked")
  -- member m's stream of the fused forward = member m with the merged MLP substituted
  local lg = fz:forward({ images = images() })
  for i = 1, 2 do
    local m = core.model_load(d .. "/fz_m" .. i .. ".h5")
    for l = 0, 1 do
      for _, w in ipairs({ "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" }) do
        local name = ("blocks.%d.mlp.%s"):format(l, w)
        local s2 = core.safetensors_open(d .. "/fz.safetensors")
        m:set_param(name, s2:read("shared." .. name))
        s2:close()
      end
    end
    local want = m:forward({ images = images() }):flat()
    local got = lg:row(i):flat()
    for j = 1, #want do ok(math.abs(got[j] - want[j]) <= 1e-5, "fused stream = member") end
  end
end

-- ===== HF BERT =====

local BERT = REF .. "/hf_bert"

local function bert_inputs()
  local f <close> = h5.open(REF .. "/ref.h5")
  return { ids = f:read("/hf_bert/ids"), lengths = f:read("/hf_bert/lengths"),
           type_ids = f:read("/hf_bert/type_ids") }
end

local function bert_import(o)
  o.file = o.file or BERT .. "/model.safetensors"
  o.format = "hf-bert"
  o.config = o.config == nil and BERT .. "/config.json" or o.config or nil
  o.vocab = o.vocab or BERT .. "/vocab.txt"
  o.tokenizer_config = BERT .. "/tokenizer_config.json"
  return import(o)
end

function T.hf_bert_logits_positions_and_preprocessing()
  local atol, rtol = ref_tol()
  local lines = {}
  local p = bert_import({ out = dir() .. "/bert.h5", log = function(s) lines[#lines + 1] = s end })
  local m = core.model_load(p)
  within(m:forward(bert_inputs()), ref_logits("/hf_bert/logits"), atol, rtol, "hf bert")
  local c = m:config()
  eq(c.norm, "post", "post-LN")
  eq(c.pooler, "tanh", "pooler")
  eq(c.text_embed, "bert", "BERT embedding")
  eq(c.type_vocab, 2, "token types")
  eq(c.max_len, 40, "every position")
  ok(table.concat(lines, "\n"):find("ignored 1 tensor: bert.embeddings.position_ids", 1, true),
    "the position_ids buffer is ignored, and said so")
  local f <close> = h5.open(p)
  eq(f:attr("/preprocess", "tokenizer"), "wordpiece", "tokenizer")
  eq(f:attr("/preprocess", "do_lower_case"), 1, "do_lower_case")
  eq(f:attr("/preprocess", "max_len"), 40, "max_len")
  local vocab = f:read_strings("/preprocess/vocab")
  eq(#vocab, 60, "vocab size")
  eq(vocab[3], "[CLS]", "ids are line numbers")
  -- --max-len keeps the first positions; the batch (length 12) gives the same logits
  local q = bert_import({ max_len = 16, out = dir() .. "/bert16.h5" })
  local m16 = core.model_load(q)
  eq(m16:config().max_len, 16, "positions kept")
  check.same(m16:param("pos_embed"):shape(), { 1, 16, 32 }, "pos_embed")
  within(m16:forward(bert_inputs()), ref_logits("/hf_bert/logits"), atol, rtol, "hf bert 16")
  local g <close> = h5.open(q)
  local found
  for _, r in ipairs(g:read_strings("/import/name_map")) do
    if r:find("^bert%.embeddings%.position_embeddings%.weight\tpos_embed\tpos:0:16\t") then
      found = true
    end
  end
  ok(found, "the name map records the cut")
end

function T.hf_bert_round_trip_members_and_errors()
  local d = dir()
  local a = bert_import({ out = d .. "/b_a.h5" })
  ex.run({ ckpt = a, out = d .. "/b_1.safetensors" })
  local b = bert_import({ file = d .. "/b_1.safetensors", config = false, out = d .. "/b_b.h5" })
  same_params(a, b)
  ex.run({ ckpt = b, out = d .. "/b_2.safetensors" })
  ok(bytes(d .. "/b_1.safetensors") == bytes(d .. "/b_2.safetensors"), "same bytes")
  -- members
  local m = core.model_load(a)
  m:set_gates(core.from_table("float32", GATES))
  m:save(d .. "/b_member.h5")
  local gated = m:forward(bert_inputs())
  for _, slice in ipairs({ false, true }) do
    local out = d .. "/b_member_" .. tostring(slice) .. ".safetensors"
    ex.run({ ckpt = d .. "/b_member.h5", slice = slice, out = out })
    local q = bert_import({ file = out, config = false, out = d .. "/b_back.h5" })
    within(core.model_load(q):forward(bert_inputs()), gated, 1e-6, 1e-6,
      "bert member, slice " .. tostring(slice))
  end
  -- old TF-converted names: LayerNorm.gamma / .beta
  local st = core.safetensors_open(BERT .. "/model.safetensors")
  local list = {}
  for _, n in ipairs(st:names()) do
    if n ~= "bert.embeddings.position_ids" then
      list[#list + 1] = { name = (n:gsub("LayerNorm%.weight$", "LayerNorm.gamma")
        :gsub("LayerNorm%.bias$", "LayerNorm.beta")), tensor = st:read(n) }
    end
  end
  st:close()
  core.safetensors_write(d .. "/gamma.safetensors", list, {})
  local g = bert_import({ file = d .. "/gamma.safetensors", out = d .. "/gamma.h5" })
  same_params(a, g)
  -- a 300-row position table does not fit hydra's attention without --max-len
  local long = {}
  local st2 = core.safetensors_open(BERT .. "/model.safetensors")
  for _, n in ipairs(st2:names()) do
    if n ~= "bert.embeddings.position_ids" then
      local t = st2:read(n)
      if n == "bert.embeddings.position_embeddings.weight" then
        t = core.tensor_cat({ t, t, t, t, t, t, t, t })   -- 320 rows
      end
      long[#long + 1] = { name = n, tensor = t }
    end
  end
  st2:close()
  core.safetensors_write(d .. "/long.safetensors", long, {})
  refused("has 320 positions, more than hydra's attention takes (" .. core.attn_max_t
    .. " tokens): give --max-len N with N <= " .. core.attn_max_t, {
    file = d .. "/long.safetensors", format = "hf-bert", heads = 4,
    vocab = BERT .. "/vocab.txt" })
  local ok320 = bert_import({ file = d .. "/long.safetensors", config = false, heads = 4,
                              max_len = 40, out = d .. "/long40.h5" })
  same_params(a, ok320)
  refused("hf-bert needs the vocabulary: give --vocab vocab.txt",
    { file = BERT .. "/model.safetensors", format = "hf-bert", heads = 4 })
  refused("has 5 tokens, but the model's word embeddings have 60 rows", {
    file = BERT .. "/model.safetensors", format = "hf-bert", heads = 4,
    vocab = (function()
      check.write_file(d .. "/v5.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
      return d .. "/v5.txt"
    end)() })
  refused("unsupported feature relative positions (position_embedding_type relative_key)", {
    file = BERT .. "/model.safetensors", format = "hf-bert", vocab = BERT .. "/vocab.txt",
    config = edited_json("rel", BERT .. "/config.json",
      function(j) j.position_embedding_type = "relative_key" end) })
end

-- ===== pieces =====

-- The imported BERT's pruned members fused (every part per member): f:forward of the fused
-- model on a padded batch with token types gives each member's own logits (1e-5), and the
-- fused file predicts the same after a save / load.
function T.hf_bert_fused_equals_members()
  local d = dir()
  local base = core.model_load(bert_import({ out = d .. "/fb_base.h5" }))
  local ms, want = {}, {}
  for i, g in ipairs({ { { 1, 0, 1, 0 }, { 0, 1, 0, 0 } }, { { 0, 1, 1, 1 }, { 1, 0, 0, 1 } } }) do
    base:set_gates(core.from_table("float32", g))
    base:save(d .. "/fb_m" .. i .. ".h5", {})
    ms[i] = core.model_load(d .. "/fb_m" .. i .. ".h5")
    want[i] = ms[i]:forward(bert_inputs())
  end
  local all = { mlp = "member", ln = "member", embed = "member", head = "member" }
  local fz = core.fused_new(ms, all)
  fz:save(d .. "/fb_fused.h5")
  for _, f in ipairs({ fz, core.fused_load(d .. "/fb_fused.h5") }) do
    local lg = f:forward(bert_inputs())
    local K = lg:size(3)
    for m = 1, 2 do
      for b = 1, lg:size(2) do
        for k = 1, K do
          local got, w = lg:get(m, b, k), want[m]:get(b, k)
          ok(math.abs(got - w) <= 1e-5, ("member %d row %d class %d: %.9g vs %.9g"):format(m, b,
            k, got, w))
        end
      end
    end
  end
end

-- ===== sharded checkpoints (hydra.shards) =====

local SHARDED = REF .. "/hf_bert_sharded"
local SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"

-- The committed sharded BERT imports to exactly the single-file import (every tensor, the same
-- logits), and the checkpoint records the index as its source.
function T.sharded_import_equals_one_file()
  local d = dir()
  local one = core.model_load(bert_import({ out = d .. "/one.h5" }))
  local p = bert_import({ file = SHARDED .. "/model.safetensors.index.json",
                          out = d .. "/sharded.h5" })
  local sh = core.model_load(p)
  for _, n in ipairs(one:param_names()) do
    check.same(sh:param(n):flat(), one:param(n):flat(), n)
  end
  check.same(sh:forward(bert_inputs()):flat(), one:forward(bert_inputs()):flat(), "logits")
  local f <close> = h5.open(p)
  eq(f:attr("/import", "source"), SHARDED .. "/model.safetensors.index.json", "source")
end

-- a copy of the sharded folder with index `wm` (weight_map) and the shard files `files`
-- ({name = bytes}); returns the index's path
local function shard_dir(name, wm, files)
  local d = dir() .. "/" .. name
  assert(os.execute("mkdir -p '" .. d .. "'"))
  for fn, bytes in pairs(files) do
    local f = assert(io.open(d .. "/" .. fn, "wb"))
    f:write(bytes)
    f:close()
  end
  local f = assert(io.open(d .. "/model.safetensors.index.json", "w"))
  f:write(core.json_encode({ metadata = { total_size = 0 }, weight_map = wm }))
  f:close()
  return d .. "/model.safetensors.index.json"
end

-- Every inconsistency of index and shards is an error naming the index file, the tensor and
-- the shard; no output is left.
function T.sharded_index_errors()
  local f <close> = assert(io.open(SHARDED .. "/model.safetensors.index.json"))
  local wm0 = core.json_decode(f:read("a")).weight_map
  local s1, s2 = bytes(SHARDED .. "/" .. SHARD1), bytes(SHARDED .. "/" .. SHARD2)
  local function wm(edit)
    local t = {}
    for k, v in pairs(wm0) do t[k] = v end
    edit(t)
    return t
  end
  local cases = {
    { "missing", wm(function(t) t["bert.extra.weight"] = SHARD1 end), { [SHARD2] = s2 },
      "tensor 'bert.extra.weight' is missing from its shard '" .. SHARD1 .. "'" },
    { "unlisted", wm0, { [SHARD2] = s2, ["model-00003-of-00003.safetensors"] = s2 },
      "shard file 'model-00003-of-00003.safetensors' of the folder is not listed in the index" },
    { "twice", wm0, { [SHARD2] = s1 },
      "tensor 'bert.embeddings.position_ids' is in two shards ('" .. SHARD1 .. "' and '"
      .. SHARD2 .. "')" },
    { "escape", wm(function(t) t["classifier.bias"] = "../hf_bert/model.safetensors" end),
      { [SHARD2] = s2 }, "shard '../hf_bert/model.safetensors' of tensor 'classifier.bias' "
      .. "leaves the index's folder" },
    { "absolute", wm(function(t) t["classifier.bias"] = "/etc/passwd" end), { [SHARD2] = s2 },
      "shard '/etc/passwd' of tensor 'classifier.bias' is an absolute path" },
    { "unindexed", wm(function(t) t["classifier.bias"] = nil end), { [SHARD2] = s2 },
      "tensor 'classifier.bias' of shard '" .. SHARD2 .. "' is not in the index's weight_map" },
    { "elsewhere", wm(function(t) t["bert.embeddings.LayerNorm.bias"] = SHARD2 end),
      { [SHARD2] = s2 }, "tensor 'bert.embeddings.LayerNorm.bias' is in shard '" .. SHARD1
      .. "', but the index puts it in '" .. SHARD2 .. "'" },
    { "absent", wm(function(t)
        for k, v in pairs(t) do if v == SHARD2 then t[k] = "model-00002-of-00003.safetensors" end end
      end), { [SHARD2] = s2 }, "shard 'model-00002-of-00003.safetensors' of tensor "
      .. "'bert.encoder.layer.1.attention.output.LayerNorm.bias' does not exist" },
  }
  for _, c in ipairs(cases) do
    local files = { [SHARD1] = s1 }
    for k, v in pairs(c[3]) do files[k] = v end
    local idx = shard_dir(c[1], c[2], files)
    local out = dir() .. "/bad_" .. c[1] .. ".h5"
    raises_has("hydra import: '" .. idx .. "': " .. c[4], function()
      bert_import({ file = idx, out = out })
    end)
    ok(core.stat(out) == nil, c[1] .. ": no output left")
  end
end

function T.json_decode_encode()
  local v = core.json_decode('{"a": [1, 2.5, "x", null, true], "b": {"c": 1e-12}}')
  eq(math.type(v.a[1]), "integer", "integers stay integers")
  eq(v.a[2], 2.5, "real")
  eq(v.a[4], core.json_null, "null")
  eq(v.b.c, 1e-12, "exponent")
  eq(core.json_encode({ z = 1, a = { { 0, 1 }, {} }, s = "q\"" }), '{"a":[[0,1],[]],"s":"q\\"","z":1}',
    "compact, keys sorted, {} an array")
  raises_has("duplicate object key", function() core.json_decode('{"a":1,"a":2}', "d.json") end)
  raises_has("json: 'x.json': line 1, column", function() core.json_decode("{", "x.json") end)
  raises_has("table keys must be 1..n or strings", function() core.json_encode({ 1, x = 2 }) end)
end

function T.tensor_surgery()
  local t = core.from_table("float32", { { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } })
  check.same(core.tensor_select(t, 2, { { 1, 2 }, { 3, 4 } }):totable(),
    { { 2, 4 }, { 6, 8 }, { 10, 12 } }, "columns")
  check.same(core.tensor_select(t, 1, { { 2, 3 } }):totable(), { { 9, 10, 11, 12 } }, "rows")
  check.same(core.tensor_scatter(core.tensor_select(t, 2, { { 1, 2 }, { 3, 4 } }), 2,
    { { 1, 2 }, { 3, 4 } }, 4):totable(), { { 0, 2, 0, 4 }, { 0, 6, 0, 8 }, { 0, 10, 0, 12 } },
    "scatter inverts select")
  check.same(core.tensor_cat({ t, core.tensor_select(t, 1, { { 0, 1 } }) }):shape(), { 4, 4 }, "cat")
  check.same(core.tensor_scale_ranges(t, 2, { { 0, 1 } }, { 0 }):totable()[2], { 0, 6, 7, 8 },
    "scale 0")
  check.same(core.tensor_reshape(t, { 2, 6 }):shape(), { 2, 6 }, "reshape")
  raises_has("outside [0, 4]", function() core.tensor_select(t, 2, { { 3, 5 } }) end)
end

return T
