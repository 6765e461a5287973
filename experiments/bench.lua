-- experiments/bench.lua (run by `make bench`): throughput of the reference model vit-fm on this
-- machine, as the issue asks: training samples/s at batch 128, inference samples/s at batch 256,
-- batch-1 latency (ms), the achieved GFLOP/s and its % of the sgemm peak measured in the same
-- run (2048^3). Each figure is the median of REPS repetitions. Prints a table and writes
-- results/bench/bench.json. Data: synthetic 28x28 images (throughput does not depend on
-- content). Training FLOPs are counted as 3x the forward FLOPs.
-- Per-kernel breakdown (core.prof_*, the timers of core/prof.h inside the real kernels): the
-- time of each kernel class (GEMM, attention, GELU, LayerNorm, dropout, residual, bias, embed,
-- copies, loss, optim) over PROF_STEPS training steps at batch 128 (and over one inference pass
-- at batch 256) run with the timers on, right after the throughput measure; "other" is the
-- measured wall time minus the classes (loader batch assembly, Lua, untimed glue). Written under
-- "breakdown".
local hydra = require("hydra")
local core = require("hydra.core")
local model = hydra.model

local REPS = 5
local threads = core.threads_init(0)

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

local cfg = hydra.config.load("configs/models/vit-fm.yaml")
local m = model.new(cfg, 1)
local mc = m:config()
local flops = mc.flops
local images, labels = core.synth_images(2048, 28, 10, 1)
local ds = core.dataset_from_images(images, labels, 0.286, 0.353)
local one = core.dataset_from_images(images, labels, 0.286, 0.353, 1)

-- sgemm peak (same process, same threads)
local peak = core.bench_sgemm(2048, 3)

-- training: steps of batch 128 (forward, backward, clip, AdamW) over the synthetic set
local train_cfg = { epochs = 1, batch_size = 128, warmup_epochs = 0, grad_clip = 1.0,
  label_smoothing = 0, augment = { random_crop = false, crop_padding = 0, hflip = false } }
local optim_cfg = { learning_rate = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
  weight_decay = 0.05, schedule = "cosine", min_lr = 0 }
local tr = core.trainer_new(m.ud, ds, train_cfg, optim_cfg, 1)
local train_rates = {}
tr:start_epoch(1)
tr:run(2)                                    -- warm-up steps
for _ = 1, REPS do
  tr:start_epoch(1)
  local t0 = core.now()
  local ran = tr:run(8)
  train_rates[#train_rates + 1] = ran * 128 / (core.now() - t0)
end
tr:close()
-- per-kernel breakdown of that step: the real step with the kernel timers on
local PROF_STEPS = 8
local function profiled(fn)
  core.prof_reset()
  core.prof_enable(true)
  local t0 = core.now()
  fn()
  local dt = core.now() - t0
  core.prof_enable(false)
  return core.prof_read(), dt * 1e3
end
tr = core.trainer_new(m.ud, ds, train_cfg, optim_cfg, 1)
tr:start_epoch(1)
tr:run(1)
local prof_train, prof_train_ms = profiled(function() tr:run(PROF_STEPS) end)
tr:close()

-- inference: batch 256 over 2048 images
local infer_rates = {}
m.ud:predict(ds, 256)
for _ = 1, REPS do
  local t0 = core.now()
  m.ud:predict(ds, 256)
  infer_rates[#infer_rates + 1] = 2048 / (core.now() - t0)
end
local prof_infer, prof_infer_ms = profiled(function() m.ud:predict(ds, 256) end)

-- batch-1 latency: one image per call, 200 calls per repetition
local lat = {}
m.ud:predict(one, 1)
for _ = 1, REPS do
  local t0 = core.now()
  for _ = 1, 200 do m.ud:predict(one, 1) end
  lat[#lat + 1] = (core.now() - t0) / 200 * 1000
end

local r = {
  model = "vit-fm", params = m:params_count(), threads = threads,
  fwd_mflops_per_sample = flops / 1e6,
  sgemm_peak_gflops = peak,
  train_samples_per_s = median(train_rates),
  infer_samples_per_s = median(infer_rates),
  latency_ms = median(lat),
  reps = REPS,
}
r.train_gflops = r.train_samples_per_s * 3 * flops / 1e9
r.infer_gflops = r.infer_samples_per_s * flops / 1e9
r.train_pct_peak = 100 * r.train_gflops / peak
r.infer_pct_peak = 100 * r.infer_gflops / peak
r.targets = { train_samples_per_s = 520, infer_samples_per_s = 1600, latency_ms = 1.0 }

print(("hydra bench: vit-fm (%d params, %.1f MFLOP/sample fwd), %d threads, median of %d")
  :format(r.params, r.fwd_mflops_per_sample, threads, REPS))
print(("%-28s %12s %10s %10s"):format("measure", "value", "target", "GFLOP/s"))
print(("%-28s %12.1f %10s %10s"):format("sgemm 2048^3 (GFLOP/s)", peak, "", ""))
print(("%-28s %12.0f %10s %7.1f (%4.1f%% of peak)"):format("training img/s (B=128)",
  r.train_samples_per_s, ">= 520", r.train_gflops, r.train_pct_peak))
print(("%-28s %12.0f %10s %7.1f (%4.1f%% of peak)"):format("inference img/s (B=256)",
  r.infer_samples_per_s, ">= 1600", r.infer_gflops, r.infer_pct_peak))
print(("%-28s %12.3f %10s"):format("batch-1 latency (ms)", r.latency_ms, "<= 1"))

-- breakdown table: classes sorted by time per step / batch, "other" = measured - classes
local function breakdown(classes, total_ms, units, what, unit, batch)
  local measured = total_ms / units
  local out = { batch = batch, measured_ms = measured, classes_ms = {} }
  local sum, rows = 0, {}
  for _, c in ipairs(classes) do
    local ms = c.ms / units
    if c.calls > 0 then
      rows[#rows + 1] = { name = c.name, ms = ms, calls = c.calls // units,
        gflop_per_s = c.gflop > 0 and c.gflop / (c.ms / 1e3) or nil }
      out.classes_ms[c.name] = ms
      sum = sum + ms
    end
  end
  local gemm = out.classes_ms.gemm or 0
  out.other_ms = measured - sum
  out.outside_gemm_pct = 100 * (measured - gemm) / measured
  rows[#rows + 1] = { name = "other (untimed)", ms = measured - sum, calls = 0 }
  table.sort(rows, function(a, b) return a.ms > b.ms end)
  print(("per-kernel breakdown: %s, batch %d (timers in the real kernels, over %d %s%s)")
    :format(what, batch, units, unit, units > 1 and (unit == "batch" and "es" or "s") or ""))
  print(("  %-18s %7s %9s %9s %8s"):format("class", "calls", "ms/" .. unit, "% of " .. unit,
    "GFLOP/s"))
  for _, row in ipairs(rows) do
    print(("  %-18s %7s %9.3f %8.1f%% %8s"):format(row.name,
      row.calls > 0 and tostring(row.calls) or "", row.ms, 100 * row.ms / measured,
      row.gflop_per_s and ("%.1f"):format(row.gflop_per_s) or ""))
  end
  print(("  %-18s %7s %9.3f   time outside GEMMs %.1f%% (target <= 15%%)")
    :format("measured " .. unit, "", measured, out.outside_gemm_pct))
  return out
end
r.breakdown = {
  method = "timers of core/prof.h inside the kernels of the real training step (trainer, "
    .. PROF_STEPS .. " steps) and inference (m:predict over 2048 images); other = measured - "
    .. "sum of the classes",
  train = breakdown(prof_train, prof_train_ms, PROF_STEPS, "training step", "step", 128),
  infer = breakdown(prof_infer, prof_infer_ms, 2048 // 256, "inference forward", "batch", 256),
}

-- the Hydra cost section (experiments/bench_cost.lua: prints its own table)
r.cost = dofile("experiments/bench_cost.lua")()

local function to_json(v, ind)
  ind = ind or ""
  if type(v) == "table" and #v > 0 then   -- an array (the cost section's rows and checks)
    local parts = {}
    for i, x in ipairs(v) do parts[i] = ind .. "  " .. to_json(x, ind .. "  ") end
    return "[\n" .. table.concat(parts, ",\n") .. "\n" .. ind .. "]"
  elseif type(v) == "boolean" then return tostring(v)
  elseif type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do
      parts[#parts + 1] = ind .. "  " .. ("%q"):format(k) .. ": " .. to_json(v[k], ind .. "  ")
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. ind .. "}"
  elseif type(v) == "string" then return ("%q"):format(v)
  elseif math.type(v) == "integer" then return tostring(v)
  else return ("%.6g"):format(v) end
end
core.mkdir_p("results/bench")
local tmp = "results/bench/.bench.json.tmp"
local f = assert(io.open(tmp, "w"))
f:write(to_json(r), "\n")
f:close()
assert(os.rename(tmp, "results/bench/bench.json"))
print("wrote results/bench/bench.json")
