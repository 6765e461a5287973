-- experiments/bench_real.lua: the real-size section of `make bench SIZE=real|all` (DESIGN §7,
-- results/bench/README.md): hydra against PyTorch at the sizes users import, random weights
-- (speed depends on the shapes alone):
--   vit-s16-224   ViT-S/16: 224x224x3 images, patch 16 (196 patches + CLS = 197 tokens),
--                 D 384, 6 heads, 12 layers, MLP 1536, 1000 classes, pre-LN (eps 1e-6);
--   bert-base-128 BERT-base: 768 wide, 12 heads, 12 layers, MLP 3072, norm post, text_embed
--                 bert (30522 words, 2 token types, LN eps 1e-12), pooler tanh, 2 classes, every
--                 sequence 128 tokens (no padding).
-- Each model, per round (interleaved with one PyTorch process per round, alternating who goes
-- first; figures are medians over the rounds, ratios ratios of medians): one training step at
-- TRAIN_B (forward, loss, backward, clip, AdamW: bench.lua's trainer settings), one inference
-- batch of INFER_B, LAT_N batch-1 calls. The hydra training step and inference batch run with
-- the per-kernel timers on (core/tensor/prof.h: two clock reads per kernel call, against
-- kernels of milliseconds here), which gives the GEMM share and the GEMM GFLOP/s of the same
-- calls that are timed. PyTorch (tests/ref/bench_torch.py) measures training in eager mode and
-- inference / latency on three paths: eager, the nn.TransformerEncoderLayer fast path and
-- frozen TorchScript (each checked equal to eager on the logits first).
-- On a CPU with AVX-512 BF16, per round also the inference batch and the batch-1 calls at
-- precision bf16 (the same model, its linears' weights packed in BF16 between the timings;
-- core/tensor/gemm_bf16.h), against the same fastest PyTorch paths (ratio_fast_bf16).
-- Also per round, for both models (a model the fused model cannot build records the reason):
-- the fused Hydra model (M = 3 members keeping half of the heads of every layer) at
-- batch 1 against its members one by one on the team and on one thread (split efficiency) and
-- at FUSED_B against the members one by one, and against the Single at batch 1 and FUSED_B
-- (time(Hydra) / time(Single) beside FLOPs(Hydra) / FLOPs(Single)).
-- Once, after the rounds: the peak RSS of BERT-base training at batch 32 (one step), each side
-- in a fresh process (hydra: this file run standalone, `hydra run experiments/bench_real.lua
-- rss`; PyTorch: bench_torch.py with a training-only spec).
-- Batch sizes and counts keep the section to a few minutes on 2 idle cores (about 9 GFLOPs a
-- ViT-S image and 22 GFLOPs a BERT sequence forward; training ViT-S at 8, BERT at 4; inference
-- at 16 and 8: 1576 to 3152 token rows a product, where the GEMMs run near their peak): 3 rounds
-- by default (HYDRA_BENCH_ROUNDS sets them; 1 for a quick check of the plumbing), FUSED_B from
-- HYDRA_BENCH_REAL_FUSED_B (default 16: 3152 token rows; 256 is the literal figure of the small
-- model and takes ~40 s a pass).
--   local real = dofile("experiments/bench_real.lua")(ctx)   -- experiments/bench.lua
local hydra = require("hydra")
local core = require("hydra.core")
local median = require("hydra.metrics").median

local bt = dofile("experiments/bench_trainer.lua")
local SEED = 1
local RSS_B = 32
local MODELS = {
  { key = "vit-s16-224", torch_name = "vit_s16",
    model = { kind = "vit", image_size = 224, channels = 3, patch = 16, d_model = 384,
      n_heads = 6, depth = 12, d_mlp = 1536, n_classes = 1000, dropout = 0 },
    train_b = 8, infer_b = 16, lat_n = 3 },
  { key = "bert-base-128", torch_name = "bert_base",
    model = { kind = "text", vocab_size = 30522, max_len = 128, d_model = 768, n_heads = 12,
      depth = 12, d_mlp = 3072, n_classes = 2, dropout = 0, norm = "post", pooler = "tanh",
      text_embed = "bert", type_vocab = 2, ln_eps = 1e-12 },
    train_b = 4, infer_b = 8, lat_n = 3 },
}
-- targets of issue 39 (> 1 = hydra faster; fractions of the sgemm peak; RSS hydra / PyTorch)
local TARGET = { train = 2, infer_fast = 1.3, latency_fast = 2, gemm_peak_infer = 0.85,
  gemm_peak_train = 0.75, outside_gemm_infer = 0.10, split_efficiency_b1 = 0.85,
  vs_members_large = 0.95, peak_rss = 1.3 }

-- a dataset of n samples of model section c: zero images (speed does not depend on content)
-- or random word ids at full length
local function dataset(c, n)
  if c.kind == "vit" then
    local img = core.tensor("uint8", n, c.channels, c.image_size, c.image_size)
    return core.dataset_from_images(img, core.tensor("int16", n), 0.5, 0.25)
  end
  local ids, lens, labels = core.synth_text(n, c.max_len, c.vocab_size, SEED)
  lens:fill(c.max_len)
  return core.dataset_from_text(ids, lens, labels)
end

local function model_of(c) return hydra.model.new({ model = c }, SEED) end

-- the peak RSS (VmHWM) of this process, MiB
local function peak_rss_mb()
  local f = io.open("/proc/self/status", "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  local kb = tonumber(s:match("VmHWM:%s*(%d+)"))
  return kb and kb / 1024 or nil
end

-- the members of a fused Hydra model: M = 3, each keeping a seeded random half of the heads
local function members_of(c, M)
  local out = {}
  for m = 1, M do
    local g = {}
    for l = 1, c.depth do
      local perm = core.sample_permutation(c.n_heads, 7000 + m * 10 + l)
      local row = {}
      for h = 1, c.n_heads do row[h] = 0 end
      for i = 1, c.n_heads // 2 do row[perm:get(i) + 1] = 1 end
      g[l] = row
    end
    local mm = model_of(c)
    mm:set_gates(g)
    out[m] = mm
  end
  return out
end

-- standalone: `hydra run experiments/bench_real.lua rss`: one BERT-base training step at batch
-- RSS_B, then this process's peak RSS; `... infer_rss MODEL single|fused B`: one prediction of
-- B samples at batch B by the Single or the fused Hydra model (M = 3) of MODEL (vit-s16-224 |
-- bert-base-128), then the peak RSS of that prediction alone (VmHWM reset after building) and
-- the RSS before it
local standalone = type(arg) == "table" and type(arg[0]) == "string"
  and arg[0]:match("bench_real%.lua$")
if standalone then
  local usage = "usage: hydra run experiments/bench_real.lua rss | infer_rss MODEL single|fused B"
  core.threads_init(0)
  if arg[1] == "rss" then
    local c = MODELS[2].model
    local tr = bt.new(model_of(c), dataset(c, RSS_B), RSS_B, SEED)
    tr:start_epoch(1)
    tr:run(1)
    print(("peak_rss_mb %.1f"):format(peak_rss_mb()))
    return 0
  end
  local spec
  for _, sp in ipairs(MODELS) do if sp.key == arg[2] then spec = sp end end
  local B = math.tointeger(tonumber(arg[4] or ""))
  if arg[1] ~= "infer_rss" or not spec or (arg[3] ~= "single" and arg[3] ~= "fused")
    or not B or B < 1 then
    hydra.err.usage(usage)
  end
  local c = spec.model
  local ds = dataset(c, B)
  local m = arg[3] == "single" and model_of(c)
    or hydra.fuse.build(members_of(c, 3), hydra.config.defaults().fuse)
  collectgarbage("collect")   -- the members of a fused model
  local f = assert(io.open("/proc/self/clear_refs", "w"))   -- VmHWM := VmRSS
  f:write("5")
  f:close()
  local st = assert(io.open("/proc/self/status"))
  local before = tonumber(st:read("a"):match("VmRSS:%s*(%d+)")) / 1024
  st:close()
  m.ud:predict(ds, B)
  print(("infer_peak_rss_mb %.1f rss_before_mb %.1f"):format(peak_rss_mb(), before))
  return 0
end

-- ctx (from bench.lua): rounds, threads, peak (sgemm GFLOP/s), seconds(fn) (wall seconds),
-- profiled(fn) (the per-kernel timers around fn), breakdown(rounds, units, what,
-- unit, batch) (bench.lua's per-kernel table), torch = { skipped, version, run(models [, keys])
-- -> the flat table of one PyTorch process over the spec models }
return function(ctx)
  local seconds, profiled = ctx.seconds, ctx.profiled
  local rounds = ctx.rounds
  local nth = ctx.threads
  local fb_env = os.getenv("HYDRA_BENCH_REAL_FUSED_B")
  local FUSED_B = math.tointeger(tonumber(fb_env or "16"))
  if not FUSED_B or FUSED_B < 2 then
    hydra.err.fail("bench: HYDRA_BENCH_REAL_FUSED_B must be an integer >= 2 (got '%s')", fb_env)
  end
  local fuse_cfg = hydra.config.defaults().fuse
  -- hydra side, built once
  local S = {}
  for i, spec in ipairs(MODELS) do
    local c = spec.model
    local s = { spec = spec }
    s.m = model_of(c)
    local cfg = s.m:config()
    s.params, s.flops = cfg.params, cfg.flops
    s.tr = bt.new(model_of(c), dataset(c, spec.train_b), spec.train_b, SEED)
    s.infer_ds = dataset(c, spec.infer_b)
    s.lat_ds = dataset(c, spec.lat_n)
    local ok, f = pcall(function()
      local mem = members_of(c, 3)
      local singles = {}
      for m = 1, #mem do singles[m] = hydra.fuse.build({ mem[m] }, fuse_cfg) end
      local fused = hydra.fuse.build(mem, fuse_cfg)
      return { fused = fused, singles = singles, flops = fused:info().flops,
        large_ds = dataset(c, FUSED_B), b1_ds = dataset(c, 2) }
    end)
    if ok then s.fused = f
    else s.fused_skipped = (hydra.err.message(f):gsub("^[^%s:]+%.lua:%d+: ", "")) end
    collectgarbage("collect")   -- the members the fused models were built from (GBs at BERT)
    -- warm-up (allocations, first touch)
    s.tr:start_epoch(1)
    s.tr:run(1)
    s.m.ud:predict(s.infer_ds, spec.infer_b)
    s.m.ud:predict(s.lat_ds, 1)
    -- precision bf16 (core/tensor/gemm_bf16.h), where the CPU has AVX-512 BF16: the same model
    -- with its linears' weights packed in BF16 for the bf16 figures of each round
    s.bf16 = s.m:set_precision("bf16") == "bf16"
    if s.bf16 then s.m.ud:predict(s.infer_ds, spec.infer_b) end
    s.m:set_precision("fp32")
    S[i] = s
  end

  local function fused_round(s, r)
    local f = s.fused
    local function members(ds, B)
      return seconds(function() for _, x in ipairs(f.singles) do x.ud:predict(ds, B) end end)
    end
    local n1 = f.b1_ds:size()
    f.fused.ud:predict(f.b1_ds, 1)
    r.fused_b1_s = seconds(function() f.fused.ud:predict(f.b1_ds, 1) end) / n1
    r.members_b1_s = members(f.b1_ds, 1) / n1
    core.threads_init(1)
    local ok, w = pcall(members, f.b1_ds, 1)
    core.threads_init(nth)
    if not ok then error(w, 0) end
    r.members_one_thread_b1_s = w / n1
    r.fused_large_s = seconds(function() f.fused.ud:predict(f.large_ds, FUSED_B) end)
    r.members_large_s = members(f.large_ds, FUSED_B)
    -- the Single (the unpruned model) on the same inputs: time(Hydra) / time(Single)
    r.single_b1_s = seconds(function() s.m.ud:predict(f.b1_ds, 1) end) / n1
    r.single_large_s = seconds(function() s.m.ud:predict(f.large_ds, FUSED_B) end)
  end

  local raw = { hydra = {}, torch = {} }
  local prof = {}
  for i = 1, #S do prof[i] = { train = {}, infer = {} } end
  local function hydra_round(round)
    local out = {}
    for i, s in ipairs(S) do
      local r, sp = {}, s.spec
      s.tr:start_epoch(round + 1)
      local p = profiled(function() s.tr:run(1) end)
      prof[i].train[round] = p
      r.train_samples_per_s = sp.train_b / (p.ms / 1e3)
      p = profiled(function() s.m.ud:predict(s.infer_ds, sp.infer_b) end)
      prof[i].infer[round] = p
      r.infer_samples_per_s = sp.infer_b / (p.ms / 1e3)
      r.latency_ms = 1e3 * seconds(function() s.m.ud:predict(s.lat_ds, 1) end) / sp.lat_n
      if s.bf16 then   -- the same batches at precision bf16 (packing outside the timings)
        s.m:set_precision("bf16")
        r.infer_bf16_samples_per_s = sp.infer_b
          / seconds(function() s.m.ud:predict(s.infer_ds, sp.infer_b) end)
        r.latency_bf16_ms = 1e3 * seconds(function() s.m.ud:predict(s.lat_ds, 1) end) / sp.lat_n
        s.m:set_precision("fp32")
      end
      if s.fused then fused_round(s, r) end
      out[sp.key] = r
    end
    return out
  end

  -- PyTorch spec: both models, every path, the same batches
  local torch_models = {}
  for _, s in ipairs(S) do
    local sp, c = s.spec, s.spec.model
    local t = { model = c, params = s.params, optim = bt.torch_optim(), warmup_steps = 1,
      latency_warmup = 2, paths = { "eager", "fast", "jit" } }
    if c.kind == "vit" then
      t.train_batch, t.train_steps = sp.train_b, 1
      t.infer_batch, t.infer_n, t.latency_n = sp.infer_b, sp.infer_b, sp.lat_n
    else
      local function full(n)
        local l = {}
        for j = 1, n do l[j] = c.max_len end
        return l
      end
      t.train_batches = { full(sp.train_b) }
      t.infer_batch, t.infer_lengths, t.latency_lengths = sp.infer_b, full(sp.infer_b),
        full(sp.lat_n)
    end
    torch_models[sp.torch_name] = t
  end

  for round = 1, rounds do
    local th, tt = 0, 0
    local function h() th = seconds(function() raw.hydra[round] = hydra_round(round) end) end
    local function t()
      if ctx.torch.skipped then return end
      tt = seconds(function() raw.torch[round] = ctx.torch.run(torch_models) end)
    end
    if round % 2 == 1 then h() t() else t() h() end
    io.stderr:write(("bench: real sizes, round %d of %d done (hydra %.0f s, PyTorch %.0f s)\n")
      :format(round, rounds, th, tt))
  end

  -- the models' memory (several GB: parameters, gradients and AdamW state of both sizes) goes
  -- back before the RSS pair, whose fresh processes then have the memory to themselves
  for _, s in ipairs(S) do
    s.has_fused = s.fused ~= nil
    s.m:set_precision("fp32")
    s.fused_flops = s.fused and s.fused.flops
    s.m, s.tr, s.fused, s.infer_ds, s.lat_ds = nil, nil, nil, nil, nil
  end
  collectgarbage("collect")

  -- peak RSS of BERT-base training at batch RSS_B, each side in its own process
  local rss = { batch = RSS_B, seq = MODELS[2].model.max_len, target = TARGET.peak_rss }
  do
    local q = require("hydra.fs").shell_quote
    local p = assert(io.popen(("%s run experiments/bench_real.lua rss"):format(q(core.exe()))))
    local out = p:read("a")
    p:close()
    rss.hydra = tonumber(out:match("peak_rss_mb%s+([%d.]+)"))
    if not rss.hydra then
      hydra.err.fail("bench: the hydra RSS run printed no peak_rss_mb: %s", out)
    end
    if not ctx.torch.skipped then
      local c = MODELS[2].model
      local l = {}
      for j = 1, RSS_B do l[j] = c.max_len end
      local t = ctx.torch.run({ bert_base = { model = c, params = S[2].params,
        optim = bt.torch_optim(),
        warmup_steps = 0, train_batches = { l }, figures = { "train" } } })
      rss.torch = t.peak_rss_mb
      rss.ratio = rss.hydra / rss.torch
      rss.met = rss.ratio <= TARGET.peak_rss
    end
  end

  local res = {}
  for i, s in ipairs(S) do
    local sp = s.spec
    local function med(side, k)
      local xs = {}
      for j, r in ipairs(raw[side]) do xs[j] = r[sp.key][k] end
      return #xs > 0 and median(xs) or nil
    end
    local o = { model = sp.model, params = s.params, fwd_gflops_per_sample = s.flops / 1e9,
      batch = { train = sp.train_b, infer = sp.infer_b, latency_calls = sp.lat_n },
      train_samples_per_s = med("hydra", "train_samples_per_s"),
      infer_samples_per_s = med("hydra", "infer_samples_per_s"),
      latency_ms = med("hydra", "latency_ms"),
      precision_bf16 = s.bf16 and "bf16" or "unavailable (no AVX-512 BF16)",
      infer_bf16_samples_per_s = med("hydra", "infer_bf16_samples_per_s"),
      latency_bf16_ms = med("hydra", "latency_bf16_ms") }
    local bd = {
      train = ctx.breakdown(prof[i].train, 1, sp.key .. " training step", "step", sp.train_b),
      infer = ctx.breakdown(prof[i].infer, 1, sp.key .. " inference forward", "batch",
        sp.infer_b) }
    o.breakdown = bd
    -- GFLOP/s of a class's timed calls (gemm: hy_gemm; attn_products: the products inside the
    -- attention kernel) as a fraction of the sgemm peak; shares outside GEMMs and outside every
    -- matrix product
    local function peak_frac(list, class)
      local xs = {}
      for _, p in ipairs(list) do
        for _, cl in ipairs(p.classes) do
          if cl.name == class and cl.ms > 0 then
            xs[#xs + 1] = cl.gflop / (cl.ms / 1e3) / ctx.peak
          end
        end
      end
      return #xs > 0 and median(xs) or nil
    end
    o.gemm_peak_frac = { train = peak_frac(prof[i].train, "gemm"),
      infer = peak_frac(prof[i].infer, "gemm") }
    o.attn_products_peak_frac = { train = peak_frac(prof[i].train, "attn_products"),
      infer = peak_frac(prof[i].infer, "attn_products") }
    o.outside_gemm_frac = { train = bd.train.outside_gemm_pct / 100,
      infer = bd.infer.outside_gemm_pct / 100 }
    o.outside_products_frac = { train = bd.train.outside_products_pct / 100,
      infer = bd.infer.outside_products_pct / 100 }
    -- the 10 % is judged outside every matrix product, attention's q k^T and A v among them
    -- (results/bench/README.md: they run at the GEMMs' share of the peak)
    o.gemm_met = { train = (o.gemm_peak_frac.train or 0) >= TARGET.gemm_peak_train,
      infer = (o.gemm_peak_frac.infer or 0) >= TARGET.gemm_peak_infer,
      outside_infer = o.outside_products_frac.infer <= TARGET.outside_gemm_infer }
    if s.has_fused then
      local fz = { members = 3, keep_heads = sp.model.n_heads // 2, batch_large = FUSED_B,
        fused_b1_s = med("hydra", "fused_b1_s"), members_b1_s = med("hydra", "members_b1_s"),
        members_one_thread_b1_s = med("hydra", "members_one_thread_b1_s"),
        fused_large_s = med("hydra", "fused_large_s"),
        members_large_s = med("hydra", "members_large_s") }
      fz.split_efficiency_b1 = fz.members_one_thread_b1_s / nth / fz.fused_b1_s
      fz.vs_members_b1 = fz.members_b1_s / fz.fused_b1_s
      fz.vs_members_large = fz.members_large_s / fz.fused_large_s
      fz.single_b1_s = med("hydra", "single_b1_s")
      fz.single_large_s = med("hydra", "single_large_s")
      fz.flops_ratio = s.fused_flops / s.flops
      fz.hydra_over_single_b1 = fz.fused_b1_s / fz.single_b1_s
      fz.hydra_over_single_large = fz.fused_large_s / fz.single_large_s
      fz.met = { split_efficiency_b1 = fz.split_efficiency_b1 >= TARGET.split_efficiency_b1,
        vs_members_large = fz.vs_members_large >= TARGET.vs_members_large,
        time_within_flops = fz.hydra_over_single_b1 <= fz.flops_ratio
          and fz.hydra_over_single_large <= fz.flops_ratio }
      o.fused = fz
    else
      o.fused = { skipped = s.fused_skipped }
    end
    if i == 2 then o.peak_rss_mb = rss end
    if not ctx.torch.skipped then
      o.torch = ctx.torch.figures(raw.torch, sp.torch_name)
      ctx.torch.ratios(o, o.torch)
      o.met = { train = o.ratio.train >= TARGET.train,
        infer_fast = o.ratio_fast.infer >= TARGET.infer_fast,
        latency_fast = o.ratio_fast.latency >= TARGET.latency_fast }
      if o.infer_bf16_samples_per_s then   -- precision bf16 against the same fastest paths
        local t = o.torch
        o.ratio_fast_bf16 = {
          infer = o.infer_bf16_samples_per_s / t[t.fastest.infer].infer_samples_per_s,
          latency = t[t.fastest.latency].latency_ms / o.latency_bf16_ms }
        o.met.infer_fast_bf16 = o.ratio_fast_bf16.infer >= TARGET.infer_fast
        o.met.latency_fast_bf16 = o.ratio_fast_bf16.latency >= TARGET.latency_fast
      end
    else
      o.torch_skipped = ctx.torch.skipped
    end
    -- each side's whole-call GFLOP/s as a fraction of the sgemm peak (training = 3x forward):
    -- what bounds a ratio (two sides near the peak cannot be far apart)
    local function frac(sps, mult) return sps and sps * mult * s.flops / 1e9 / ctx.peak or nil end
    o.frac_peak = { hydra = { train = frac(o.train_samples_per_s, 3),
      infer = frac(o.infer_samples_per_s, 1), latency = frac(1e3 / o.latency_ms, 1) } }
    if o.torch then
      local t = o.torch
      o.frac_peak.torch = { train = frac(t.train_samples_per_s, 3),
        infer_fastest = frac(t[t.fastest.infer].infer_samples_per_s, 1),
        latency_fastest = frac(1e3 / t[t.fastest.latency].latency_ms, 1) }
    end
    o.target = TARGET
    o.raw = { hydra = {}, torch = raw.torch }
    for j, r in ipairs(raw.hydra) do o.raw.hydra[j] = r[sp.key] end
    res[sp.key] = o
  end
  return res
end
