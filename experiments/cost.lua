-- experiments/cost.lua: inference cost (paper Fig. 3: Hydra at ~1.07x a single model vs ~3x
-- for a 3-member Deep Ensemble, on a GPU in BF16).
--
-- Methods. The cost table of `make bench` (experiments/bench_cost.lua): the reference backbone
-- vit-fm; Single (one full model); Deep Ensembles (3 full models run one after another); the 3
-- pruned members run one after another (4 of 8 heads per layer each); and the fused Hydra model
-- (grouped attention GEMMs over the 3 member streams, one merged MLP). For each: parameters,
-- forward FLOPs per sample (counted analytically) and the median time of a forward pass over a
-- batch of 1, 32 and 256 images (CPU, float32, the threads of this process; the quick profile
-- uses fewer repetitions). Weights are random: time does not depend on them. Output:
-- results/cost/cost.md, cost.json and plots/cost.png (time per batch relative to Single, one
-- bar group per method, one bar per batch size).
local hydra = require("hydra")
local core = hydra.core

local opts = hydra.experiment.script_options(...)
if not hydra.sweep.is_first(opts.shard) then  -- one measurement per repro, not one per shard
  print(("cost: measured by the first shard only (0/n or seed=0; this is shard %s)"):format(
    hydra.sweep.shard_text(opts.shard)))
  return 0
end
local home = hydra.home or "."
core.threads_init(0)
local measure = dofile(home .. "/experiments/bench_cost.lua")
local quick = (opts.profile or "quick") == "quick"
local res = measure(quick and { reps = { [1] = 20, [32] = 4, [256] = 1 } } or nil)

local dir = hydra.config.load(nil, opts.overrides).results_dir .. "/cost"  -- results_dir=... wins
core.mkdir_p(dir .. "/plots")
local methods = {
  { key = "single_s", name = "Single", params = res.params.single, flops = res.flops.single },
  { key = "deep_ensemble_s", name = "Deep Ensembles (3)", params = res.params.deep_ensemble,
    flops = res.flops.deep_ensemble },
  { key = "members_s", name = "3 pruned members, one by one", params = res.params.members,
    flops = res.flops.members },
  { key = "hydra_s", name = "Hydra (fused, 3 members)", params = res.params.hydra,
    flops = res.flops.hydra },
  { key = "packed_ensemble_s", name = "Packed-Ensembles (fused, M = 3, alpha = 2)",
    params = res.params.packed_ensemble, flops = res.flops.packed_ensemble },
  { key = "mimo_s", name = "MIMO (one model, M = 3)", params = res.params.mimo,
    flops = res.flops.mimo },
  { key = "batch_ensemble_s", name = "BatchEnsemble (3 members)",
    params = res.params.batch_ensemble, flops = res.flops.batch_ensemble },
  { key = "lora_ensemble_s", name = "LoRA-Ensemble (3 members, q v r8)",
    params = res.params.lora_ensemble, flops = res.flops.lora_ensemble },
}
local head = "| Method | Params (M) | MFLOPs / sample | FLOPs vs Single |"
local rule = "|---|---:|---:|---:|"
for _, r in ipairs(res.rows) do
  head = head .. (" ms @ %d | vs Single @ %d |"):format(r.batch, r.batch)
  rule = rule .. "---:|---:|"
end
local lines, dat = { head, rule }, { "# method_index batch ms ratio_vs_single" }
for mi, m in ipairs(methods) do
  local line = ("| %s | %.3f | %.1f | %.2fx |"):format(m.name, m.params / 1e6, m.flops / 1e6,
    m.flops / res.flops.single)
  for _, r in ipairs(res.rows) do
    local ratio = r[m.key] / r.single_s
    line = line .. (" %.3f | %.2fx |"):format(1e3 * r[m.key], ratio)
    dat[#dat + 1] = ("%d %d %.6g %.6g"):format(mi - 1, r.batch, 1e3 * r[m.key], ratio)
  end
  lines[#lines + 1] = line
end
local text = ("# cost (%s profile)\n\n%s\n\n*vit-fm, %d threads, CPU float32; time = median "
  .. "forward time per batch; FLOPs counted per forward pass. Paper (GPU, BF16): Hydra "
  .. "1.07x, Deep Ensembles ~3x a single model.*\n"):format(opts.profile or "quick",
  table.concat(lines, "\n"), res.threads)
hydra.report.write_text(dir .. "/cost.md", text)
hydra.report.write_text(dir .. "/cost.json", require("hydra.eval").json_value(res, 0) .. "\n")
io.write(text)

local tics, cmds = {}, {}
for i, m in ipairs(methods) do tics[i] = ("'%s' %d"):format(m.name, i - 1) end
for bi, r in ipairs(res.rows) do
  cmds[bi] = ("DAT using ($1 + %g):($2 == %d ? $4 : 1/0) with boxes fs solid 0.6 lc %d "
    .. "title 'batch %d'"):format((bi - (#res.rows + 1) / 2) * 0.25, r.batch, bi, r.batch)
end
local png = hydra.plot.run(dir .. "/plots/cost.png", table.concat({
  "set title 'Inference time per batch relative to Single (vit-fm, CPU)'",
  "set ylabel 'time / time(Single)'", "set grid y", "set boxwidth 0.22",
  "set xtics (" .. table.concat(tics, ", ") .. ") font ',8'",
  "set xrange [-0.6:" .. (#methods - 0.4) .. "]", "set yrange [0:*]", "set key left top",
  "plot " .. table.concat(cmds, ", \\\n     ") .. ", 1 with lines dt 2 lc rgb 'gray40' notitle",
}, "\n"), table.concat(dat, "\n") .. "\n").png
print("wrote " .. dir .. "/cost.md, " .. png)
return 0
