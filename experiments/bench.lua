-- experiments/bench.lua (run by `make bench`): hydra against PyTorch in one run, on this machine
-- (DESIGN §7, issues 13 and 39). SIZE (HYDRA_BENCH_SIZE, `make bench SIZE=small|real|all`,
-- default small) picks the sections.
-- small: two small models, each against a PyTorch reference of the same architecture
-- (tests/ref/bench_torch.py; parameter counts checked equal):
--   vit-fm   (configs/models/vit-fm.yaml) on synthetic 28x28 images (speed does not depend on
--            content): training samples/s at batch 128 (forward, loss, backward, clip, AdamW),
--            inference samples/s at batch 256 over 2048 images, batch-1 latency (ms, 200 calls);
--   text-sst (configs/models/text-sst.yaml, the prepared sst2 vocabulary) at SST-2's real token
--            lengths, batches padded to their longest sequence with the key-padding mask:
--            training on TEXT_BATCHES seeded batches of 128 from the train split, inference
--            over the dev split (872, file order) at batch 256, latency over its first
--            TEXT_LATENCY sentences one at a time. PyTorch gets the exact same lengths.
-- PyTorch trains in eager mode and runs inference and latency on three paths (eager, the
-- nn.TransformerEncoderLayer fast path, frozen TorchScript; each checked equal to eager first):
-- `ratio` compares against eager, `ratio_fast` against the fastest path of each figure.
-- ROUNDS interleaved rounds (odd rounds hydra first, even rounds PyTorch first; one PyTorch
-- process per round); every figure is the median over the rounds and every ratio is a ratio of
-- those medians (hydra/PyTorch for samples/s, PyTorch/hydra for latency: > 1 = hydra faster).
-- Also, hydra only, interleaved in the same rounds: MC Dropout (K = mc_dropout.samples passes
-- of a model with dropout mc_dropout.rate) against K deterministic passes; dropout training
-- (rate mc_dropout.rate) against training without dropout; and the cost section
-- (experiments/bench_cost.lua: Hydra fused M = 3 against its members one by one, and against
-- Single). Then `loaded`: vit-fm inference and latency, hydra and PyTorch interleaved again for
-- ROUNDS rounds while one CPU-bound process per online core (`sh -c 'while :; do :; done'`,
-- started by the bench, killed by pid afterwards) competes with both sides alike.
-- real: ViT-S/16 at 224 and BERT-base at 128 tokens (experiments/bench_real.lua).
-- Recorded: CPU model and flags, OpenBLAS core, threads, the sgemm 2048^3 peak and each
-- figure's GFLOP/s as a fraction of it, per-round raw values, the load average. Writes
-- results/bench/bench.json (layout: results/README.md, "Benchmark"); the table printed last
-- gives every ratio.
-- Knobs (environment): HYDRA_BENCH_SIZE (small | real | all), HYDRA_BENCH_ROUNDS (default 5
-- for small, 3 for real; 1 checks the plumbing quickly), HYDRA_BENCH_REAL_FUSED_B
-- (bench_real.lua), HYDRA_BENCH_PYTHON (default /usr/bin/python3: Debian's python3-torch; when
-- it cannot import torch the PyTorch side is skipped, said so, and no ratio is written),
-- HYDRA_DATA_DIR (SST-2, prepared on first use; the text model is skipped, said so, when it is
-- missing). Training FLOPs = 3x forward FLOPs.
local hydra = require("hydra")
local core = require("hydra.core")
local json_value = require("hydra.eval").json_value
local model = hydra.model


local SIZE = os.getenv("HYDRA_BENCH_SIZE") or "small"
if SIZE == "" then SIZE = "small" end
if SIZE ~= "small" and SIZE ~= "real" and SIZE ~= "all" then
  hydra.err.fail("bench: SIZE must be small, real or all (got '%s')", SIZE)
end
local rounds_env = os.getenv("HYDRA_BENCH_ROUNDS")
local ROUNDS = math.tointeger(tonumber(rounds_env or "5"))
if not ROUNDS or ROUNDS < 1 then
  hydra.err.fail("bench: HYDRA_BENCH_ROUNDS must be an integer >= 1 (got '%s')", rounds_env)
end
local REAL_ROUNDS = rounds_env and ROUNDS or 3
local PYTHON = os.getenv("HYDRA_BENCH_PYTHON") or "/usr/bin/python3"
local TORCH_SCRIPT = "tests/ref/bench_torch.py"
local TRAIN_B, TRAIN_STEPS, INFER_B, INFER_N, LAT_N = 128, 8, 256, 2048, 200
local TEXT_BATCHES, TEXT_LATENCY = 8, 256
local SEED = 1   -- trainers (shuffling), the text batch draw, the PyTorch side's generator
local threads = core.threads_init(0)
local defaults = hydra.config.defaults()
local MC_K, MC_RATE = defaults.mc_dropout.samples, defaults.mc_dropout.rate
local bt = dofile("experiments/bench_trainer.lua")


local median = require("hydra.metrics").median

-- wall seconds of fn() (every hydra figure of this file goes through it)
local function seconds(fn)
  local t0 = core.now()
  fn()
  return core.now() - t0
end

-- the per-kernel timers (core/tensor/prof.h) around fn(): { classes = core.prof_read(), ms }
local function profiled(fn)
  core.prof_reset()
  core.prof_enable(true)
  local dt = seconds(fn)
  core.prof_enable(false)
  return { classes = core.prof_read(), ms = dt * 1e3 }
end

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function loadavg()
  return tonumber(((read_file("/proc/loadavg") or ""):match("^(%S+)")))
end

-- CPU model and flags (the first processor of /proc/cpuinfo)
local function cpu_info()
  local s = read_file("/proc/cpuinfo") or ""
  local flags = s:match("\nflags%s*:%s*([^\n]*)") or s:match("^flags%s*:%s*([^\n]*)") or ""
  local simd = {}
  for f in flags:gmatch("%S+") do
    if f:match("^avx") or f:match("^fma") or f:match("^sse4") or f:match("^amx") then
      simd[#simd + 1] = f
    end
  end
  return { model = s:match("model name%s*:%s*([^\n]*)") or "unknown", flags = flags,
           simd = table.concat(simd, " ") }
end

-- ===== PyTorch side (tests/ref/bench_torch.py, one process per round) =====

local shell_quote = require("hydra.fs").shell_quote

local torch = { skipped = nil }
do
  local probe = io.popen(shell_quote(PYTHON) .. " -c 'import torch; print(torch.__version__)' "
    .. "2>/dev/null")
  local v = probe and probe:read("l")
  if probe then probe:close() end
  if not v or v == "" then
    torch.skipped = ("%s cannot import torch (install Debian's python3-torch, or set "
      .. "HYDRA_BENCH_PYTHON)"):format(PYTHON)
  else
    torch.version = v
  end
end

-- one PyTorch process over spec models (name -> section of tests/ref/bench_torch.py): its flat
-- JSON object ("<name>.<figure>", "<name>.<path>.<figure>" -> numbers), every figure the
-- sections ask for checked present
local spec_path = "results/bench/.torch_spec.json"
local PATHS = { "eager", "fast", "jit" }
local function torch_run(models)
  core.mkdir_p("results/bench")
  local f = assert(io.open(spec_path, "w"))
  f:write(json_value({ threads = threads, seed = SEED, models = models }, 0), "\n")
  f:close()
  local cmd = ("OMP_WAIT_POLICY=passive %s %s %s"):format(shell_quote(PYTHON), TORCH_SCRIPT,
    spec_path)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  os.remove(spec_path)
  if not ok then
    hydra.err.fail("bench: %s failed (%s %s): %s", TORCH_SCRIPT, tostring(how), tostring(code),
      out)
  end
  local r = {}
  for k, v in out:gmatch('"([%w_%.]+)":%s*(%-?[%d%.eE+%-]+)') do r[k] = tonumber(v) end
  local want = { "peak_rss_mb" }
  for name, s in pairs(models) do
    local figs = {}
    for _, x in ipairs(s.figures or { "train", "infer", "latency" }) do figs[x] = true end
    if figs.train then want[#want + 1] = name .. ".train_samples_per_s" end
    for _, path in ipairs(s.paths or { "eager" }) do
      local pre = path == "eager" and name or name .. "." .. path
      if figs.infer then want[#want + 1] = pre .. ".infer_samples_per_s" end
      if figs.latency then want[#want + 1] = pre .. ".latency_ms" end
    end
  end
  for _, k in ipairs(want) do
    if not r[k] then hydra.err.fail("bench: %s printed no %s: %s", TORCH_SCRIPT, k, out) end
  end
  return r
end

-- PyTorch's figures of model `name` (medians over the rounds' flat tables): training samples/s
-- (eager), per path { infer_samples_per_s, latency_ms, check_rel_err }, and `fastest` = the
-- path of the highest inference rate and the path of the lowest latency
local function torch_figures(rounds, name)
  local function m(key)
    local xs = {}
    for _, r in ipairs(rounds) do xs[#xs + 1] = r[key] end
    return #xs > 0 and median(xs) or nil
  end
  local t = { train_samples_per_s = m(name .. ".train_samples_per_s") }
  local bi, bl
  for _, path in ipairs(PATHS) do
    local pre = path == "eager" and name or name .. "." .. path
    local x = { infer_samples_per_s = m(pre .. ".infer_samples_per_s"),
      latency_ms = m(pre .. ".latency_ms"), check_rel_err = m(pre .. ".check_rel_err") }
    t[path] = x
    if x.infer_samples_per_s and (not bi or x.infer_samples_per_s > t[bi].infer_samples_per_s)
    then bi = path end
    if x.latency_ms and (not bl or x.latency_ms < t[bl].latency_ms) then bl = path end
  end
  t.fastest = { infer = bi, latency = bl }
  return t
end

-- h.ratio (against eager: train, infer, latency) and h.ratio_fast (infer and latency against
-- the fastest path of each); > 1 = hydra faster
local function torch_ratios(h, t)
  h.ratio = { infer = h.infer_samples_per_s / t.eager.infer_samples_per_s,
    latency = t.eager.latency_ms / h.latency_ms }
  if h.train_samples_per_s and t.train_samples_per_s then
    h.ratio.train = h.train_samples_per_s / t.train_samples_per_s
  end
  h.ratio_fast = { infer = h.infer_samples_per_s / t[t.fastest.infer].infer_samples_per_s,
    latency = t[t.fastest.latency].latency_ms / h.latency_ms }
end


-- breakdown table: per class the median over the rounds of its time per step / batch, sorted;
-- "other" = the median of the rounds' measured - classes; the share outside GEMMs (class gemm:
-- hy_gemm's products) and the share outside every matrix product (gemm and attn_products, the
-- products inside the attention kernel) are the medians of the rounds' shares
local function breakdown(rounds, units, what, unit, batch)
  local per, measured, outside, other, calls, gflops = {}, {}, {}, {}, {}, {}
  local outside_mm = {}
  for i, p in ipairs(rounds) do
    measured[i] = p.ms / units
    local gemm, amm, timed = 0, 0, 0
    for _, c in ipairs(p.classes) do
      if c.calls > 0 then
        timed = timed + c.ms / units
        per[c.name] = per[c.name] or {}
        per[c.name][i] = c.ms / units
        calls[c.name] = c.calls // units
        if c.gflop > 0 then
          gflops[c.name] = gflops[c.name] or {}
          gflops[c.name][i] = c.gflop / (c.ms / 1e3)
        end
        if c.name == "gemm" then gemm = c.ms / units end
        if c.name == "attn_products" then amm = c.ms / units end
      end
    end
    outside[i] = 100 * (measured[i] - gemm) / measured[i]
    outside_mm[i] = 100 * (measured[i] - gemm - amm) / measured[i]
    other[i] = measured[i] - timed
  end
  local out = { batch = batch, rounds = #rounds, measured_ms = median(measured),
    classes_ms = {}, outside_gemm_pct = median(outside), outside_gemm_pct_rounds = outside,
    outside_products_pct = median(outside_mm), outside_products_pct_rounds = outside_mm }
  local rows = {}
  for name, xs in pairs(per) do
    local ms = median(xs)
    rows[#rows + 1] = { name = name, ms = ms, calls = calls[name],
      gflop_per_s = gflops[name] and median(gflops[name]) or nil }
    out.classes_ms[name] = ms
  end
  out.other_ms = median(other)   -- (medians need not add up to the measured median)
  rows[#rows + 1] = { name = "other (untimed)", ms = out.other_ms, calls = 0 }
  table.sort(rows, function(x, y) return x.ms > y.ms end)
  print(("per-kernel breakdown: %s, batch %d (timers in the real kernels, over %d %s%s, "
    .. "medians of %d rounds)"):format(what, batch, units, unit,
    units > 1 and (unit == "batch" and "es" or "s") or "", #rounds))
  print(("  %-18s %7s %9s %9s %8s"):format("class", "calls", "ms/" .. unit, "% of " .. unit,
    "GFLOP/s"))
  for _, row in ipairs(rows) do
    print(("  %-18s %7s %9.3f %8.1f%% %8s"):format(row.name,
      row.calls > 0 and tostring(row.calls) or "", row.ms, 100 * row.ms / out.measured_ms,
      row.gflop_per_s and ("%.1f"):format(row.gflop_per_s) or ""))
  end
  local function rounds_of(xs)
    local rs = {}
    for i, x in ipairs(xs) do rs[i] = ("%.1f"):format(x) end
    return table.concat(rs, " ")
  end
  print(("  %-18s %7s %9.3f   time outside GEMMs %.1f%% (target <= 15%%; rounds %s); outside "
    .. "every matrix product (gemm and attn_products) %.1f%% (rounds %s)")
    :format("measured " .. unit, "", out.measured_ms, out.outside_gemm_pct, rounds_of(outside),
    out.outside_products_pct, rounds_of(outside_mm)))
  return out
end

-- ===== the machine (every section reads its figures against it) =====

local peak = core.bench_sgemm(2048, 3)
local blas = core.blas_info()
-- OPENBLAS_CORETYPE, when the environment pins OpenBLAS's kernels (both sides inherit it)
blas.coretype_env = os.getenv("OPENBLAS_CORETYPE") or "(unset)"
local r = { size = SIZE, threads = threads, cpu = cpu_info(), openblas = blas,
  omp_wait_policy = os.getenv("OMP_WAIT_POLICY") or "(unset)", sgemm_peak_gflops = peak }
local cpu = r.cpu

local function small_section(r)
  -- ===== hydra side: models, data, trainers (built once) =====

  local function trainer(mod, data) return bt.new(mod, data, TRAIN_B, SEED) end
  local cfg = hydra.config.load("configs/models/vit-fm.yaml")
  local m = model.new(cfg, 1)         -- inference and latency (no trainer: dropout stays off)
  local m_train = model.new(cfg, 1)   -- training without dropout
  local mc = m:config()
  local flops = mc.flops
  local images, labels = core.synth_images(INFER_N, mc.image_size, mc.n_classes, 1)
  local ds = core.dataset_from_images(images, labels, 0.286, 0.353)
  local lat_ds = core.dataset_from_images(images, labels, 0.286, 0.353, LAT_N)
  local tr = trainer(m_train, ds)
  local cfg_drop = hydra.config.load("configs/models/vit-fm.yaml", { "model.dropout=" .. MC_RATE })
  local m_drop = model.new(cfg_drop, 1)      -- dropout training
  local m_mc = model.new(cfg_drop, 1)        -- MC Dropout passes (and its deterministic passes)
  local tr_drop = trainer(m_drop, ds)
  local mc_ds = core.dataset_from_images(images, labels, 0.286, 0.353, INFER_B)

  -- text-sst: SST-2 lengths from the prepared file (prepared here when missing)
  local text = { skipped = nil }
  do
    local ok, e = pcall(hydra.data.prepare, "sst2", { quiet = true })
    if not ok then
      text.skipped = "sst2 is not available (" .. hydra.err.message(e) .. ")"
    else
      local path = e
      local h5 = require("hydra.h5")
      local f <close> = h5.open(path)
      local tcfg = hydra.config.load("configs/models/text-sst.yaml",
        { "data.id=sst2", "data.dir=" .. path:match("^(.*)/[^/]+$") })
      text.m = model.new(tcfg, 1)
      text.m_train = model.new(tcfg, 1)
      text.cfg = text.m:config()
      local ids, lens = f:read("/train/ids"), f:read("/train/lengths")
      local labs = f:read("/train/labels")
      local perm = core.sample_permutation(lens:numel(), SEED)
      text.trainers, text.train_batches = {}, {}
      for b = 1, TEXT_BATCHES do
        local rows = core.sample_slice(perm, (b - 1) * TRAIN_B + 1, TRAIN_B)
        local bl = core.sample_gather(lens, rows)
        local bds = core.dataset_from_text(core.sample_gather(ids, rows), bl,
          core.sample_gather(labs, rows))
        text.trainers[b] = trainer(text.m_train, bds)
        text.train_batches[b] = bl:totable()
      end
      local dids, dlens = f:read("/test/ids"), f:read("/test/lengths")
      local dlabs = f:read("/test/labels")
      text.dev = core.dataset_from_text(dids, dlens, dlabs)
      text.lat = core.dataset_from_text(dids, dlens, dlabs, TEXT_LATENCY)
      text.infer_lengths = dlens:totable()
      text.latency_lengths = core.sample_slice(dlens, 1, TEXT_LATENCY):totable()
      text.params = text.m:config().params
      -- forward FLOPs of the exact batches (T = 1 + longest length of each batch)
      local function batch_flops(list, B)
        local s = 0
        for i = 1, #list, B do
          local L = 0
          for j = i, math.min(i + B - 1, #list) do L = math.max(L, list[j]) end
          s = s + (math.min(i + B - 1, #list) - i + 1) * text.m.ud:flops(1 + L)
        end
        return s
      end
      local tf = 0
      for _, bl in ipairs(text.train_batches) do tf = tf + batch_flops(bl, TRAIN_B) end
      text.train_flops_per_sample = tf / (TEXT_BATCHES * TRAIN_B)
      text.infer_flops_per_sample = batch_flops(text.infer_lengths, INFER_B) / #text.infer_lengths
      text.latency_flops_per_sample = batch_flops(text.latency_lengths, 1) / TEXT_LATENCY
    end
  end

  -- warm-up: allocations, first-touch, OpenBLAS buffers
  tr:start_epoch(1)
  tr:run(1)
  tr_drop:start_epoch(1)
  tr_drop:run(1)
  m.ud:predict(ds, INFER_B)
  m.ud:predict(lat_ds, 1)
  m_mc:predict(mc_ds, nil, { batch_size = INFER_B, mc_samples = 1, seed = 1 })
  if text.m then
    for _, t in ipairs(text.trainers) do t:start_epoch(1) t:run(1) end
    text.m.ud:predict(text.dev, INFER_B)
    text.m.ud:predict(text.lat, 1)
  end

  -- ===== per-kernel breakdown =====
  -- (core.prof_*, the timers of core/tensor/prof.h inside the real kernels): the time of each
  -- kernel class (GEMM, attention, GELU, LayerNorm, dropout, residual, bias, embed, copies,
  -- loss, optim) over PROF_STEPS training steps at batch 128 and over one inference pass at
  -- batch 256, run with the timers on in every round, after that round's timed figures; "other"
  -- is the measured wall time minus the classes (loader batch assembly, Lua, untimed glue). The
  -- table gives each class's median over the rounds and the median of the rounds' shares
  -- outside GEMMs (one round on a noisy host moves a single profile by a third). Written under
  -- "breakdown".
  local PROF_STEPS = 8
  local prof = { train = {}, infer = {} }

  -- one hydra round: every figure once (train after one warm-up step of its trainer)
  local function hydra_round(round)
    local r = {}
    tr:start_epoch(round + 1)
    tr:run(1)
    r.train_samples_per_s = TRAIN_STEPS * TRAIN_B / seconds(function() tr:run(TRAIN_STEPS) end)
    tr_drop:start_epoch(round + 1)
    tr_drop:run(1)
    r.dropout_train_samples_per_s = TRAIN_STEPS * TRAIN_B
      / seconds(function() tr_drop:run(TRAIN_STEPS) end)
    r.infer_samples_per_s = INFER_N / seconds(function() m.ud:predict(ds, INFER_B) end)
    r.latency_ms = 1e3 * seconds(function() m.ud:predict(lat_ds, 1) end) / LAT_N
    -- MC Dropout (the method's own path, model.lua Model:predict) against K deterministic passes,
    -- in alternating order
    local function mc_pass()
      return seconds(function()
        m_mc:predict(mc_ds, nil, { batch_size = INFER_B, mc_samples = MC_K, seed = round })
      end)
    end
    local function det_pass()
      return seconds(function() for _ = 1, MC_K do m_mc.ud:predict(mc_ds, INFER_B) end end)
    end
    if round % 2 == 1 then r.mc_s = mc_pass() r.det_s = det_pass()
    else r.det_s = det_pass() r.mc_s = mc_pass() end
    if text.m then
      local t = text.trainers
      t[1]:start_epoch(round + 1)
      t[1]:run(1)
      r.text_train_samples_per_s = TEXT_BATCHES * TRAIN_B / seconds(function()
        for _, x in ipairs(t) do x:start_epoch(round + 1) x:run(1) end
      end)
      r.text_infer_samples_per_s = #text.infer_lengths
        / seconds(function() text.m.ud:predict(text.dev, INFER_B) end)
      r.text_latency_ms = 1e3 * seconds(function() text.m.ud:predict(text.lat, 1) end)
        / TEXT_LATENCY
    end
    tr:start_epoch(ROUNDS + 1 + round)
    tr:run(1)
    prof.train[round] = profiled(function() tr:run(PROF_STEPS) end)
    prof.infer[round] = profiled(function() m.ud:predict(ds, INFER_B) end)
    return r
  end

  -- ===== PyTorch side (tests/ref/bench_torch.py, one process per round) =====

  local torch_models
  if not torch.skipped then
    local optim = bt.torch_optim()
    local function section(c)
      local s = { kind = c.kind, d_model = c.d_model, n_heads = c.n_heads, depth = c.depth,
        d_mlp = c.d_mlp, n_classes = c.n_classes }
      if c.kind == "vit" then s.image_size, s.channels, s.patch = c.image_size, c.channels, c.patch
      else s.vocab_size, s.max_len = c.vocab_size, c.max_len end
      return s
    end
    torch_models = {
      vit = { model = section(mc), params = m:config().params, optim = optim,
        train_batch = TRAIN_B, train_steps = TRAIN_STEPS, warmup_steps = 2,
        infer_batch = INFER_B, infer_n = INFER_N, latency_n = LAT_N, paths = PATHS } }
    if text.m then
      torch_models.text = { model = section(text.cfg), params = text.params, optim = optim,
        warmup_steps = 2, train_batches = text.train_batches, infer_batch = INFER_B,
        infer_lengths = text.infer_lengths, latency_lengths = text.latency_lengths,
        paths = PATHS }
    end
  end

  -- ===== the rounds =====

  local load0 = loadavg()
  local raw = { hydra = {}, torch = {} }
  for round = 1, ROUNDS do
    local function h() raw.hydra[round] = hydra_round(round) end
    local function t() if not torch.skipped then raw.torch[round] = torch_run(torch_models) end end
    if round % 2 == 1 then h() t() else t() h() end
    io.stderr:write(("bench: round %d of %d done\n"):format(round, ROUNDS))
  end
  local load1 = loadavg()

  local function med(side, key)
    local xs = {}
    for i, r in ipairs(raw[side]) do xs[i] = r[key] end
    return #xs > 0 and median(xs) or nil
  end
  local function per_round(side, key)
    local xs = {}
    for i, r in ipairs(raw[side]) do xs[i] = r[key] end
    return xs
  end

  r.model, r.params, r.rounds = "vit-fm", m:config().params, ROUNDS
  r.load_before, r.load_after = load0, load1
  r.fwd_mflops_per_sample = flops / 1e6
  r.train_samples_per_s = med("hydra", "train_samples_per_s")
  r.infer_samples_per_s = med("hydra", "infer_samples_per_s")
  r.latency_ms = med("hydra", "latency_ms")
  r.raw = { hydra = raw.hydra, torch = raw.torch }
  local function add_flops(t, train_f, infer_f, lat_f)
    t.train_gflops = t.train_samples_per_s * 3 * train_f / 1e9
    t.infer_gflops = t.infer_samples_per_s * infer_f / 1e9
    t.latency_gflops = lat_f / (t.latency_ms / 1e3) / 1e9
    t.train_frac_peak = t.train_gflops / peak
    t.infer_frac_peak = t.infer_gflops / peak
    t.latency_frac_peak = t.latency_gflops / peak
  end
  add_flops(r, flops, flops, flops)

  -- PyTorch's figures (torch_figures; the top-level three are eager's)
  local function torch_section(prefix)
    if torch.skipped then return nil end
    local t = torch_figures(raw.torch, prefix)
    t.infer_samples_per_s, t.latency_ms = t.eager.infer_samples_per_s, t.eager.latency_ms
    t.params = raw.torch[1][prefix .. ".params"]
    return t
  end
  -- ratios > 1 = hydra faster (torch_ratios), and their targets against eager (DESIGN §7):
  -- h.ratio, h.ratio_fast, h.ratio_target, h.ratio_met
  local RATIO_TARGET = { train = 2, infer = 2, latency = 3 }
  local function ratios(h, t)
    torch_ratios(h, t)
    h.ratio_target, h.ratio_met = RATIO_TARGET, {}
    for k, v in pairs(h.ratio) do h.ratio_met[k] = v >= RATIO_TARGET[k] end
  end
  r.torch = torch_section("vit")
  if r.torch then
    r.torch.version = torch.version
    add_flops(r.torch, flops, flops, flops)
    ratios(r, r.torch)
  else
    r.torch_skipped = torch.skipped
  end

  if text.m then
    r.text = { model = "text-sst", params = text.params, vocab_size = text.cfg.vocab_size,
      train_batches = TEXT_BATCHES,
      train_samples_per_s = med("hydra", "text_train_samples_per_s"),
      infer_samples_per_s = med("hydra", "text_infer_samples_per_s"),
      latency_ms = med("hydra", "text_latency_ms"),
      fwd_mflops_per_sample = { train = text.train_flops_per_sample / 1e6,
        infer = text.infer_flops_per_sample / 1e6, latency = text.latency_flops_per_sample / 1e6 } }
    add_flops(r.text, text.train_flops_per_sample, text.infer_flops_per_sample,
      text.latency_flops_per_sample)
    r.text.torch = torch_section("text")
    if r.text.torch then
      add_flops(r.text.torch, text.train_flops_per_sample, text.infer_flops_per_sample,
        text.latency_flops_per_sample)
      ratios(r.text, r.text.torch)
    end
  else
    r.text_skipped = text.skipped
  end

  -- hydra-only ratios with their targets (DESIGN §7)
  local mc_ratio = med("hydra", "mc_s") / med("hydra", "det_s")
  local drop_ratio = r.train_samples_per_s / med("hydra", "dropout_train_samples_per_s")
  r.mc_dropout = { samples = MC_K, rate = MC_RATE, batch = INFER_B, images = INFER_B,
    mc_s = med("hydra", "mc_s"), deterministic_s = med("hydra", "det_s"),
    ratio = mc_ratio, target = 1.15, met = mc_ratio <= 1.15 }
  r.dropout_train = { rate = MC_RATE,
    train_samples_per_s = med("hydra", "dropout_train_samples_per_s"),
    no_dropout_train_samples_per_s = r.train_samples_per_s,
    ratio = drop_ratio, target = 1.1, met = drop_ratio <= 1.1 }
  r.breakdown = {
    method = "timers of core/tensor/prof.h inside the kernels of the real training step (trainer, "
      .. PROF_STEPS .. " steps) and inference (m:predict over 2048 images) in every round; "
      .. "per class the median over the rounds; outside_gemm_pct (outside class gemm) and "
      .. "outside_products_pct (outside gemm and attn_products) the medians of the rounds' "
      .. "shares; other = measured - sum of the classes",
    train = breakdown(prof.train, PROF_STEPS, "training step", "step", TRAIN_B),
    infer = breakdown(prof.infer, INFER_N // INFER_B, "inference forward", "batch", INFER_B),
  }

  -- ===== the Hydra cost section (experiments/bench_cost.lua: prints its own table) =====
  r.cost = dofile("experiments/bench_cost.lua")({ rounds = ROUNDS,
    reps = { [1] = 100, [32] = 10, [256] = 2 } })

  -- ===== loaded: vit-fm inference and latency while other processes take every core =====
  -- one CPU-bound shell loop per online core, started here and killed by pid afterwards (also
  -- on an error; core.spawn's children die with the bench); ROUNDS interleaved rounds of hydra
  -- (the inference and latency figures above) and of one PyTorch process (the same two figures,
  -- every path)
  local n_load = core.ncpu()
  local lraw = { hydra = {}, torch = {} }
  local lmodels = torch_models and { vit = {} }
  if lmodels then
    for k, v in pairs(torch_models.vit) do lmodels.vit[k] = v end
    lmodels.vit.figures = { "infer", "latency" }
  end
  local lload0, lload1
  do
    local pids = {}
    for i = 1, n_load do
      pids[i] = core.spawn({ "/bin/sh", "-c", "while :; do :; done" }, nil, "/dev/null")
    end
    local ok, e = pcall(function()
      core.sleep(1)   -- the loops are running before the first figure
      lload0 = loadavg()
      for round = 1, ROUNDS do
        local function h()
          lraw.hydra[round] = {
            infer_samples_per_s = INFER_N / seconds(function() m.ud:predict(ds, INFER_B) end),
            latency_ms = 1e3 * seconds(function() m.ud:predict(lat_ds, 1) end) / LAT_N }
        end
        local function t() if lmodels then lraw.torch[round] = torch_run(lmodels) end end
        if round % 2 == 1 then h() t() else t() h() end
        io.stderr:write(("bench: loaded round %d of %d done\n"):format(round, ROUNDS))
      end
      lload1 = loadavg()
    end)
    for _, pid in ipairs(pids) do
      core.kill(pid, "KILL")
      core.wait(pid, true)
    end
    if not ok then error(e, 0) end
  end
  local function lmed(key)
    local xs = {}
    for i, x in ipairs(lraw.hydra) do xs[i] = x[key] end
    return median(xs)
  end
  r.loaded = { model = "vit-fm", load_processes = n_load,
    load = "sh -c 'while :; do :; done', one per online core", rounds = ROUNDS,
    load_before = lload0, load_after = lload1,
    infer_samples_per_s = lmed("infer_samples_per_s"), latency_ms = lmed("latency_ms"),
    target = { latency = 1, infer = 1 }, raw = lraw }
  if lmodels then
    r.loaded.torch = torch_figures(lraw.torch, "vit")
    torch_ratios(r.loaded, r.loaded.torch)
    r.loaded.met = { latency = r.loaded.ratio_fast.latency >= 1,
      infer = r.loaded.ratio_fast.infer >= 1 }
  end

  -- ===== the summary table (printed last: ratios first, then the targets, then the figures) =====

  local function summary()

    local function yes(ok) return ok and "met" or "NOT met" end
    print(("small models: median of %d interleaved rounds; load average %s -> %s; targets against "
      .. "eager: train >= %gx, infer >= %gx, latency >= %gx"):format(ROUNDS, tostring(load0),
      tostring(load1), RATIO_TARGET.train, RATIO_TARGET.infer, RATIO_TARGET.latency))
    for _, o in ipairs({ r, r.text }) do
      if o.ratio_met then
        local t = {}
        for _, k in ipairs({ "train", "infer", "latency" }) do
          t[#t + 1] = k .. " " .. yes(o.ratio_met[k])
        end
        print(("  %s against eager: %s"):format(o.model, table.concat(t, ", ")))
      end
    end
    if not r.text then print("text-sst skipped: " .. text.skipped) end
    print(("%-30s %10s %10s  %-26s %s"):format("figure", "hydra", "PyTorch", "hydra per round",
      "GFLOP/s (% of peak)"))
    local function fig(name, h, t, key, hkey, tkey, fmt)
      local hs = {}
      for i, x in ipairs(per_round("hydra", hkey)) do hs[i] = fmt:format(x) end
      local tv = t and t[key]
      local gk = key:gsub("_samples_per_s$", ""):gsub("_ms$", "")
      print(("%-30s %10s %10s  %-26s %.1f (%.1f%%)"):format(name, fmt:format(h[key]),
        tv and fmt:format(tv) or "-", table.concat(hs, " "), h[gk .. "_gflops"],
        100 * h[gk .. "_frac_peak"]))
      if tkey and t then
        local ts = {}
        for i, x in ipairs(per_round("torch", tkey)) do ts[i] = fmt:format(x) end
        print(("%-30s %10s %10s  %-26s"):format("", "", "", "PyTorch: " .. table.concat(ts, " ")))
      end
    end
    fig("vit-fm train samples/s", r, r.torch, "train_samples_per_s", "train_samples_per_s",
      "vit.train_samples_per_s", "%.0f")
    fig("vit-fm infer samples/s", r, r.torch, "infer_samples_per_s", "infer_samples_per_s",
      "vit.infer_samples_per_s", "%.0f")
    fig("vit-fm latency ms", r, r.torch, "latency_ms", "latency_ms", "vit.latency_ms", "%.3f")
    if r.text then
      fig("text-sst train samples/s", r.text, r.text.torch, "train_samples_per_s",
        "text_train_samples_per_s", "text.train_samples_per_s", "%.0f")
      fig("text-sst infer samples/s", r.text, r.text.torch, "infer_samples_per_s",
        "text_infer_samples_per_s", "text.infer_samples_per_s", "%.0f")
      fig("text-sst latency ms", r.text, r.text.torch, "latency_ms", "text_latency_ms",
        "text.latency_ms", "%.3f")
    end
    print(("MC Dropout %d passes / %d deterministic passes  %.3fx  (target <= 1.15x)  %s")
      :format(MC_K, MC_K, mc_ratio, yes(r.mc_dropout.met)))
    print(("dropout training / no-dropout training      %.3fx  (target <= 1.10x)  %s")
      :format(drop_ratio, yes(r.dropout_train.met)))
    for _, ck in ipairs(r.cost.checks) do
      print(("Hydra fused (M=3) vs members one by one, B=%-3d %.2fx  (target >= %.1fx)  %s%s")
        :format(ck.batch, ck.speedup_vs_members, ck.speedup_target, yes(ck.speedup_met),
          ck.team_speedup and ("  = %d threads / members' team %.2fx x fused split %.2f")
            :format(r.cost.threads, ck.team_speedup, ck.split_efficiency) or ""))
    end
    for _, ck in ipairs(r.cost.checks) do
      print(("time(Hydra)/time(Single), B=%-3d %.2fx vs FLOPs(Hydra)/FLOPs(Single) %.2fx  "
        .. "(target <=)  %s"):format(ck.batch, ck.time_ratio_hydra_single,
        ck.flop_ratio_hydra_single, yes(ck.time_within_flops)))
    end
  end

  return summary
end

-- ===== the sections, then the table (ratios first) =====

local small_summary = SIZE ~= "real" and small_section(r) or nil
if SIZE ~= "small" then
  local real = dofile("experiments/bench_real.lua")({ rounds = REAL_ROUNDS, threads = threads,
    peak = peak, seconds = seconds, profiled = profiled, breakdown = breakdown,
    torch = { skipped = torch.skipped, run = torch_run, figures = torch_figures,
      ratios = torch_ratios } })
  r.real_rounds = REAL_ROUNDS
  for k, v in pairs(real) do r[k] = v end
  if torch.skipped then r.torch_skipped = torch.skipped end
end

print(("hydra bench (SIZE=%s): %s (%s), %d threads, OpenBLAS core %s (OPENBLAS_CORETYPE=%s, "
  .. "for both sides), OMP_WAIT_POLICY=%s, sgemm 2048^3 %.1f GFLOP/s")
  :format(SIZE, cpu.model, cpu.simd, threads, blas.corename, blas.coretype_env,
    r.omp_wait_policy, peak))
if torch.skipped then
  print("PyTorch side skipped: " .. torch.skipped .. "; no ratios")
else
  print(("ratios hydra vs PyTorch %s (medians of interleaved rounds in this run; > 1 = hydra "
    .. "faster); eager, then the fastest of eager / TransformerEncoderLayer fast path / frozen "
    .. "TorchScript"):format(torch.version))
  print(("  %-15s %7s %7s %7s   %7s %-6s %7s %-6s  %s"):format("model", "train", "infer",
    "latency", "infer", "(path)", "latency", "(path)", "rounds"))
  local rows = {
    { "vit-fm", r, ROUNDS }, { "text-sst", r.text, ROUNDS },
    { "vit-fm loaded", r.loaded, ROUNDS },
    { "vit-s16-224", r["vit-s16-224"], REAL_ROUNDS },
    { "bert-base-128", r["bert-base-128"], REAL_ROUNDS } }
  local function x(v) return v and ("%6.2fx"):format(v) or "      -" end
  for _, row in ipairs(rows) do
    local o = row[2]
    if o and o.ratio then
      print(("  %-15s %7s %7s %7s   %7s %-6s %7s %-6s  %d"):format(row[1], x(o.ratio.train),
        x(o.ratio.infer), x(o.ratio.latency), x(o.ratio_fast.infer),
        "(" .. o.torch.fastest.infer .. ")", x(o.ratio_fast.latency),
        "(" .. o.torch.fastest.latency .. ")", row[3]))
      if o.ratio_fast_bf16 then   -- precision bf16, against the same fastest paths
        print(("  %-15s %7s %7s %7s   %7s %-6s %7s %-6s  %d"):format(row[1] .. " bf16", "",
          "", "", x(o.ratio_fast_bf16.infer), "(" .. o.torch.fastest.infer .. ")",
          x(o.ratio_fast_bf16.latency), "(" .. o.torch.fastest.latency .. ")", row[3]))
      end
    end
  end
end
if SIZE ~= "small" then
  print(("real sizes (targets: train >= 2x eager, infer >= 1.3x and latency >= 2x the fastest "
    .. "path, GEMM >= 85% / 75% of peak in inference / training, outside GEMMs <= 10%, split "
    .. "efficiency >= 0.85, fused vs members >= 0.95, peak RSS <= 1.3x)"))
  for _, key in ipairs({ "vit-s16-224", "bert-base-128" }) do
    local o = r[key]
    local fz = o.fused.skipped and ("fused: skipped (" .. o.fused.skipped .. ")")
      or ("fused: split efficiency B=1 %.2f, vs members B=%d %.2fx; time(Hydra)/time(Single) "
        .. "B=1 %.2f, B=%d %.2f vs FLOPs %.2f"):format(
        o.fused.split_efficiency_b1, o.fused.batch_large, o.fused.vs_members_large,
        o.fused.hydra_over_single_b1, o.fused.batch_large, o.fused.hydra_over_single_large,
        o.fused.flops_ratio)
    local ap = o.attn_products_peak_frac or {}
    print(("  %-14s GEMM %.0f%% of peak in training, %.0f%% in inference; attention's products "
      .. "%.0f%% / %.0f%%; outside every matrix product %.1f%% of inference (outside GEMMs "
      .. "%.1f%%); %s"):format(key, 100 * (o.gemm_peak_frac.train or 0),
      100 * (o.gemm_peak_frac.infer or 0), 100 * (ap.train or 0), 100 * (ap.infer or 0),
      100 * o.outside_products_frac.infer, 100 * o.outside_gemm_frac.infer, fz))
    local fp = o.frac_peak
    local function pc(x) return x and ("%.0f%%"):format(100 * x) or "-" end
    print(("  %-14s of the sgemm peak, hydra / PyTorch: training %s / %s, inference %s / %s "
      .. "(fastest path), batch 1 %s / %s (fastest path)"):format(key, pc(fp.hydra.train),
      pc(fp.torch and fp.torch.train), pc(fp.hydra.infer), pc(fp.torch and fp.torch.infer_fastest),
      pc(fp.hydra.latency), pc(fp.torch and fp.torch.latency_fastest)))
    local rss = o.peak_rss_mb
    if rss then
      print(("  %-14s peak RSS, training at batch %d: hydra %.0f MiB, PyTorch %s MiB%s")
        :format(key, rss.batch, rss.hydra, rss.torch and ("%.0f"):format(rss.torch) or "-",
        rss.ratio and (" (%.2fx)"):format(rss.ratio) or ""))
    end
  end
end
if small_summary then small_summary() end

core.mkdir_p("results/bench")
local tmp = "results/bench/.bench.json.tmp"
local f = assert(io.open(tmp, "w"))
f:write(json_value(r, 0), "\n")
f:close()
assert(os.rename(tmp, "results/bench/bench.json"))
print("wrote results/bench/bench.json")
