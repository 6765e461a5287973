-- tests/lua/test_pinned.lua: behaviour pins and cost consistency. A tiny fixed-seed run of every
-- method, on an image model and on a text model, must give the same run-id and bitwise the same
-- checkpoint and fused parameters, gates, predictions and metrics as when the pins were recorded
-- (PIN below, one set per kernel set). Digests are SHA-256
-- of the raw bytes of every dataset (HDF5 files themselves hold timestamps) and of the metric
-- attributes; timings, paths and stage keys are left out. A change here changes every result
-- folder: re-pin only for an intended change of numerics, and say why in the commit. The same
-- runs' cost records (result.h5 /methods/<m>/cost) must be the C cost function's (hy_xfmr_cost,
-- core.model_cost).
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local eq = check.eq

local T = {}

-- ===== digests =====

local PACK = { float32 = "<f", float64 = "<d", int8 = "<i1", uint8 = "<I1", int16 = "<i2",
               int32 = "<i4", int64 = "<i8" }

-- raw little-endian bytes of a numeric tensor
local function tensor_bytes(t)
  local flat = t:flat()
  local fmt = assert(PACK[t:dtype()], t:dtype())
  local parts = {}
  for i = 1, #flat, 2048 do
    local j = math.min(i + 2047, #flat)
    parts[#parts + 1] = string.pack(fmt:rep(j - i + 1), table.unpack(flat, i, j))
  end
  return table.concat(parts)
end

local function sha(s) return core.hash_string(s, "sha256") end

-- a stable text of an attribute table (sorted keys; numbers as %.17g; skip(key) drops keys)
local function attrs_text(a, skip)
  local keys = {}
  for k in pairs(a) do if not (skip and skip(k)) then keys[#keys + 1] = k end end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = a[k]
    if type(v) == "table" then
      local s = {}
      for i, x in ipairs(v) do s[i] = ("%.17g"):format(x) end
      v = "[" .. table.concat(s, ",") .. "]"
    elseif math.type(v) == "float" then
      v = ("%.17g"):format(v)
    end
    out[#out + 1] = k .. "=" .. tostring(v)
  end
  return table.concat(out, ";")
end

-- digest of a file: every dataset's bytes under its path; with attrs(path) -> skip function or
-- nil, also the attributes of the groups and datasets it returns a function for; groups for
-- which skip(path) is true are left out whole
local function file_digest(path, attrs, skip)
  local f <close> = hydra.h5.open(path)
  local lines = {}
  local function walk(group)
    if skip and skip(group) then return end
    if attrs then
      local skip = attrs(group)
      if skip then lines[#lines + 1] = group .. " @ " .. attrs_text(f:attrs(group), skip) end
    end
    for _, e in ipairs(f:list(group)) do
      if e.kind == "group" then
        walk(e.path)
      else
        local bytes
        if e.dtype == "string" then bytes = table.concat(f:read_strings(e.path), "\0")
        else bytes = tensor_bytes(f:read(e.path)) end
        lines[#lines + 1] = e.path .. " " .. sha(bytes)
      end
    end
  end
  walk("/")
  return sha(table.concat(lines, "\n"))
end

-- digest of every stage file of the named stages in a cache folder (order-free: stage keys are
-- not part of it)
local function stages_digest(cache, names)
  local ds = {}
  for _, name in ipairs(names) do
    local dir = cache .. "/" .. name
    if core.stat(dir) == "dir" then
      for _, fn in ipairs(core.listdir(dir)) do
        if fn:match("%.h5$") then ds[#ds + 1] = name .. ":" .. file_digest(dir .. "/" .. fn) end
      end
    end
  end
  table.sort(ds)
  return sha(table.concat(ds, "\n")), #ds
end

-- the metrics of a run: every dataset of result.h5 (per-sample arrays) and the attributes of its
-- metrics and cost groups (timings left out; with skip_flops also the cost's flops)
local TIMING = { infer_ms_per_batch = true, infer_ms = true, seconds = true }
local function metrics_digest(result, skip_flops)
  local function attrs(group)
    if group:match("/cost$") then
      return function(k)
        return TIMING[k] or (skip_flops and (k == "flops" or k == "flops_padded"))
      end
    end
    if group:match("/metrics$") or group:match("/metrics/") then
      return function(k) return k == "file" end   -- a path
    end
    return nil
  end
  -- /curves (learning curves) is left out: its seconds column is wall-clock time, and its loss
  -- values come from the same training whose products the params digest pins (the curves
  -- themselves: tests/e2e/curves.sh)
  local function skip(path) return path == "/curves" end
  local f <close> = hydra.h5.open(result)
  local names = {}
  for _, e in ipairs(f:list("/methods")) do names[#names + 1] = e.name end
  return file_digest(result, attrs, skip), table.concat(names, ",")
end

-- ===== the tiny worlds =====

local function image_world(d)
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 32, test = 40, seed = 2 })
  hydra.model.write_synthetic(d .. "/tinyood.h5", { train = 8, val = 8, test = 24, seed = 5,
                                                    classes = 3 })
  hydra.model.write_synthetic(d .. "/tinyoodval.h5", { train = 8, val = 24, test = 8, seed = 6,
                                                       classes = 3 })
  return {
    ["data.ood"] = "[tinyood]", ["data.ood_val"] = "tinyoodval", ["data.shift"] = "[]",
  }
end

local text_file = check.text_file

local function text_world(d)
  text_file(d .. "/ttiny.h5", { 96, 32, 40 }, 10)
  text_file(d .. "/ttinyood.h5", { 8, 8, 24 }, 20)
  text_file(d .. "/ttinyoodval.h5", { 8, 24, 8 }, 30)
  return {
    ["data.id"] = "ttiny", ["data.ood"] = "[ttinyood]", ["data.ood_val"] = "ttinyoodval",
    ["data.shift"] = "[]", ["model.kind"] = "text", ["model.vocab_size"] = "0",
    ["model.max_len"] = "12", ["model.n_classes"] = "2",
  }
end

-- runs every method on a world with one thread (results are bitwise the same for the same seed
-- at any thread count: core/README.md, "Threading and determinism"); returns the run-id
-- (of the config with data.dir fixed to "pinned", so that it does not depend on the temporary
-- folder), the summary and the cache
local function tiny_run(world, extra)
  local root = check.tmpdir()
  local d = root .. "/data"
  core.mkdir_p(d)
  local ov = world(d)
  local base = {
    ["data.dir"] = d, ["data.test_subset"] = "0", results_dir = root .. "/results",
    experiment = "pinned", seed = "3", threads = "1",
    ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
    ["model.d_mlp"] = "32", ["model.dropout"] = "0.1", ["train.epochs"] = "1",
    ["train.batch_size"] = "32", ["train.eval_batch_size"] = "32", ["prune.calib_size"] = "32",
    ["hydra.keep_heads"] = "2", ["hydra.members"] = "2", ["deep_ensemble.members"] = "2",
    ["mc_dropout.samples"] = "3",
  }
  for k, v in pairs(ov) do base[k] = v end
  for k, v in pairs(extra or {}) do base[k] = v end
  local cfg = hydra.config.load("configs/data/tiny.yaml", base)
  local idc = hydra.config.copy(cfg)
  idc.data.dir = "pinned"
  local id = hydra.run.id(idc)
  local cache = root .. "/cache"
  local s = hydra.run.execute(cfg, { quiet = true, cache_dir = cache, progress = false })
  core.threads_init(0)   -- back to HYDRA_THREADS / every core for the tests that follow
  return id, s, cache
end

-- one run per world for every test of this file
local runs = {}
local function run_of(world)
  if not runs[world] then
    local id, s, cache = tiny_run(world)
    runs[world] = { id = id, s = s, cache = cache }
  end
  local r = runs[world]
  return r.id, r.s, r.cache
end

local function digests(world, skip_flops)
  local id, s, cache = run_of(world)
  local params, np = stages_digest(cache, { "base", "member", "fused", "gates" })
  local preds, nq = stages_digest(cache, { "preds" })
  local metrics, methods = metrics_digest(s.result, skip_flops)
  return { id = id, params = params, n_params_files = np, preds = preds, n_preds = nq,
           metrics = metrics, methods = methods }
end

-- prints the digests (HYDRA_PIN_PRINT=1) for re-pinning
local function show(name, d)
  if os.getenv("HYDRA_PIN_PRINT") then
    io.stderr:write(("%s: id %s\n  params %s (%d files)\n  preds %s (%d files)\n  metrics %s"
      .. " (%s)\n"):format(name, d.id, d.params, d.n_params_files, d.preds, d.n_preds,
      d.metrics, d.methods))
  end
end

-- Recorded with HYDRA_PIN_PRINT=1 ./hydra run tests/lua/run.lua test_pinned, one set per kernel
-- set. "Cooperlake/avx512": OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset on an AVX-512 Zen 5;
-- "Haswell/avx512": OPENBLAS_CORETYPE=Haswell there; "Zen/avx2" and "Haswell/avx2": a
-- `-march=znver3` build on the same machine with OPENBLAS_CORETYPE=Zen resp. Haswell. The tiles
-- of a linear's product with at most 48 rows (gemm.h HY_GEMM_SMALL_ROWS: the tests' tiny batches)
-- run in hydra's small-row kernel, which rounds the same on every build, so the image digests are
-- shared by the AVX2 and AVX-512 builds; the text run's attention (its lanes follow the vector
-- unit) is not.
-- Run-ids depend on configs and hy_hash64 only; the digests also on the float kernels, so they
-- are recorded per kernel set: OpenBLAS's core (core.blas_info().corename: its GEMM
-- micro-kernels round differently on another CPU family) and the vector unit the build targets
-- (attention's lanes).
local ID = { image = "7da1a4967dbf", text = "9b1f9340b59e" }
local IMAGE_AVX = {   -- the image run rounds the same with AVX2 and AVX-512 builds
  params = "93d86973f62f532c3aafe3c1d321f9da157debcd9c9e987bf6da473601566377",
  preds = "0cbbbd5c763537a0a6b83a675f8ac07bdf21edc18edd4c6e8695e534ebcbf11f",
  metrics = "85454ae907fb07b205aeced7f08611d50e3ce0d4b80caf190486efdf44313a7f",
}
local TEXT_AVX2 = {
  params = "1d766e0afe348cd8908833c3ff7858fa218f885c4383de14293fcba96bf91e65",
  preds = "0741afd319fd7772bcf91d436ab395b8331422f26042ba583049e13d42e3a340",
  metrics = "fd39cf8b0a93c572f5e3b6fddd56080e0d116bf0b77ec29a486cce45333f69b4",
}
local PIN = {
  -- OpenBLAS's own choice on AVX-512 Zen 4/5 (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset)
  ["Cooperlake/avx512"] = {
    image = {
      params = "7b1d13f07547df209c7f32bb298a8f51d635cdebd3dab842973e0635c0c0d862",
      preds = "0883ff7a4edc6086a2be4a4b5b554263ab59036fd22069170246692e5316981e",
      metrics = "c8f623522381da4a7a507ffc1c88f6aaba49c4f085c2a6ca4af6ec2b1cd1986f",
    },
    text = {
      params = "830f544befb95768723585134e93015ececab1de0e65e43fc09f981991b3ba52",
      preds = "02aef2a4fef9417e05e93a2c15a4e981444292faaaecb9df19a81be688408890",
      metrics = "84aaa034fa2d49648b5e34c137a00ee89995492224d2f00a9de501e72ad0f2ab",
    },
  },
  ["Zen/avx2"] = { image = IMAGE_AVX, text = TEXT_AVX2 },
  ["Haswell/avx2"] = { image = IMAGE_AVX, text = TEXT_AVX2 },
  ["Haswell/avx512"] = {
    image = IMAGE_AVX,
    text = {
      params = "e236974de77ba73f856062441f4d8ddd0ea8922e23df573b2b5ecb17aada77ae",
      preds = "1895872d85012b73e6d822be009d2aa6b788d4266f01498581d280134a6e3aca",
      metrics = "9572b38fd1dfb33012270eecbc3640ffcaf144898a50db6c074decc066c9ef1b",
    },
  },
}
-- the kernel set: OpenBLAS's core and the build's vector unit (attention's lanes, attn.c)
local BLAS_CORE = core.blas_info().corename .. "/" .. core.vector_isa

-- The digests are those of the release build (make; the build that produces results) for the
-- OpenBLAS kernel set they were recorded with. On a CPU whose kernel set has no pins the digests
-- are printed and the test is reported as skipped (never passed): record them there with
-- HYDRA_PIN_PRINT=1 from the commit the pins name, and add a PIN entry. A debug
-- build (make asan: -O1 and sanitizers, core.debug) compiles the float kernels differently
-- (release vectorises attn.c and layers.c at -O3), so its bits differ: there the runs still go
-- through every method under the sanitizers and the run-id is compared, the digests are not.
local function compare(name, d)
  show(name, d)
  local pins = PIN[BLAS_CORE]
  local p = pins and pins[name]
  eq(d.id, ID[name], name .. " run-id")
  if core.debug then
    io.stderr:write(("test_pinned: %s digests not compared (debug build)\n"):format(name))
  elseif p then
    eq(d.params, p.params, name .. " checkpoints, gates and fused parameters")
    eq(d.preds, p.preds, name .. " predictions")
    eq(d.metrics, p.metrics, name .. " metrics")
  end
  eq(d.methods, "circavg,deep_ensemble,hydra_circ,hydra_taylor,mc_dropout,single,taylor",
    name .. " every method ran")
  -- seed 3: the Single's base 3 and Deep Ensembles' bases 6 and 7 (M*seed .. M*seed+M-1)
  eq(d.n_params_files, 14, name .. " stage files with parameters or gates (3 distinct members)")
  eq(d.n_preds, 21, name .. " prediction files (ID test, OOD set, ID val split per method)")
  if not p and not core.debug then
    io.stderr:write(("%s: params %s\n  preds %s\n  metrics %s\n"):format(name, d.params, d.preds,
      d.metrics))
    check.skip(("no %s digests recorded for OpenBLAS core '%s' (run-id and files checked; "
      .. "record the digests above in PIN)"):format(name, BLAS_CORE))
  end
end

function T.image_run_is_pinned()
  compare("image", digests(image_world))
end

-- the text cost's flops and flops_padded are left out: they count every sample at its own
-- length, which text_costs_are_the_core_formula checks against the core formula
function T.text_run_is_pinned()
  compare("text", digests(text_world, true))
end

-- forward FLOPs of one sample at sequence length T of model config mc keeping k heads per layer,
-- by hand (the reference: independent of core/): qkv, scores + weighted sum, proj, fc1 + fc2 per
-- layer, the head, and a ViT's patch GEMM over T - 1 patches
local function flops_by_hand(mc, T, k)
  local D, DM, C = mc.d_model, mc.d_mlp, k * (mc.d_model // mc.n_heads)
  local f = mc.depth * (2 * T * D * 3 * C + 4 * T * T * C + 2 * T * C * D + 4 * T * D * DM)
    + 2 * D * mc.n_classes
  if mc.kind == "vit" then f = f + 2 * (T - 1) * mc.channels * mc.patch ^ 2 * D end
  return f
end

-- the sequence lengths of the ID test set's samples, alone (1 + tokens) and as the engine runs
-- them (each batch of B rows in order padded to its longest), from the data file itself
local function id_lengths(cfg)
  local set = require("hydra.methods.common").sets(cfg)[1]
  local f <close> = hydra.h5.open(set.file)
  local len = f:read("/" .. set.parts[1] .. "/lengths"):totable()
  local n = set.subset > 0 and math.min(set.subset, #len) or #len
  local real, padded, B = {}, {}, cfg.train.eval_batch_size
  for i = 1, n do real[i] = 1 + len[i] end
  for first = 1, n, B do
    local last, longest = math.min(first + B - 1, n), 0
    for i = first, last do longest = math.max(longest, len[i]) end
    for i = first, last do padded[i] = 1 + longest end
  end
  return real, padded
end

local function mean_of(Ts, f)
  local sum = 0
  for _, T in ipairs(Ts) do sum = sum + f(T) end
  return sum / #Ts
end

-- every method's cost record (result.h5 /methods/<m>/cost) against the FLOPs by hand and
-- core.model_cost of the run's model config: Single one model, Deep Ensembles M models, MC
-- Dropout K forward passes of one model, Taylor and CircAvg one packed member keeping
-- hydra.keep_heads heads per layer, Hydra M such members fused with fuse.mlp = average (the
-- MLP's parameters stored once, its FLOPs run on every stream). An image's FLOPs are at its
-- fixed T; a text model's flops are the mean over the ID test set of each sample's FLOPs at its
-- own T = 1 + tokens, flops_padded the mean at the padded length of its batch.
local function check_costs(world)
  local _, s = run_of(world)
  local r = hydra.run.load(s.result)
  local cfg = hydra.config.resolve((core.yaml_parse(r.config_yaml, "result config")))
  local data_file = hydra.model.data_path(cfg, cfg.data.id)
  local mc = hydra.model.core_config(cfg.model, data_file)
  local text = mc.kind == "text"
  local full_f, full_p = core.model_cost(mc)
  local kept = {}
  for l = 1, mc.depth do kept[l] = cfg.hydra.keep_heads end
  local _, kp, parts = core.model_cost(mc, kept)
  local H, k = mc.n_heads, cfg.hydra.keep_heads
  local real, padded
  if text then
    real, padded = id_lengths(cfg)
    eq(#real, 40, "the ID test set")
    local short = 0
    for _, T in ipairs(real) do if T < 1 + mc.max_len then short = short + 1 end end
    check.ok(short > 0, "some sentences are shorter than max_len")
  else
    local T = (mc.image_size // mc.patch) ^ 2 + 1
    real = { T }
  end
  local f_all, f_kept = mean_of(real, function(T) return flops_by_hand(mc, T, H) end),
    mean_of(real, function(T) return flops_by_hand(mc, T, k) end)
  local p_all, p_kept = padded and mean_of(padded, function(T) return flops_by_hand(mc, T, H) end),
    padded and mean_of(padded, function(T) return flops_by_hand(mc, T, k) end)
  local M, K, DE = cfg.hydra.members, cfg.mc_dropout.samples, cfg.deep_ensemble.members
  eq(cfg.fuse.mlp, "average", "the run merges the MLPs")
  local function x(n, v) return v and n * v end
  local want = {   -- members, flops, flops_padded, params
    single = { 1, f_all, p_all, full_p },
    deep_ensemble = { DE, DE * f_all, x(DE, p_all), DE * full_p },
    mc_dropout = { K, K * f_all, x(K, p_all), full_p },
    taylor = { 1, f_kept, p_kept, kp },
    circavg = { 1, f_kept, p_kept, kp },
    hydra_taylor = { M, M * f_kept, x(M, p_kept), M * kp - (M - 1) * parts.mlp.params },
    hydra_circ = { M, M * f_kept, x(M, p_kept), M * kp - (M - 1) * parts.mlp.params },
  }
  local seen = 0
  for _, res in ipairs(r.results) do
    local w = assert(want[res.name], res.name)
    local tag = mc.kind .. " " .. res.name
    eq(res.cost.members, w[1], tag .. " members")
    check.near(res.cost.flops, w[2], 1e-9 * w[2], tag .. " flops")
    if text then
      check.near(res.cost.flops_padded, w[3], 1e-9 * w[3], tag .. " flops_padded")
      check.ok(res.cost.flops < res.cost.flops_padded, tag .. ": padding costs FLOPs")
    else
      eq(res.cost.flops_padded, nil, tag .. ": an image is never padded")
    end
    eq(res.cost.params, w[4], tag .. " params")
    seen = seen + 1
  end
  eq(seen, 7, "every method")
  -- the C cost at one T (the binding's T, default the full length) is the formula by hand
  local Tfull = text and 1 + mc.max_len or real[1]
  eq(full_f, flops_by_hand(mc, Tfull, H), mc.kind .. " FLOPs of the unpruned model by hand")
  eq((core.model_cost(mc, kept, real[1])), flops_by_hand(mc, real[1], k),
    mc.kind .. " FLOPs of a pruned model at T by hand")
end

function T.image_costs_are_the_core_formula()
  check_costs(image_world)
end

function T.text_costs_are_the_core_formula()
  check_costs(text_world)
end

return T
