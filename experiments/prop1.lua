-- experiments/prop1.lua: the paper's Proposition 1, measured.
--
-- Proposition 1: if grad L_D(theta) = 0, grad L_Dn(theta)^T dtheta >= 0 and
-- dtheta^T (H_n - H_t) dtheta > 0, then DeltaL(theta) <= DeltaL(theta + dtheta), where
-- DeltaL = L_Dn - L_Dt is the loss gap between noisy and clean data and dtheta a pruning
-- perturbation. We measure each hypothesis and the conclusion (hydra.prop1, core/nn/hvp.h).
--
-- Methods. Per seed one base model (the table_image base of the profile). Every point of
-- configs/sweeps/prop1.yaml prunes it with Taylor or the `avg` circuit (the Taylor / CircAvg
-- stages: one member, hydra.keep_heads heads per layer), fine-tuned for finetune.epochs (0 or
-- 1), so dtheta = the member (gates folded into its projections) minus the base, fine-tuning
-- included. D = prop1.rows training rows, D_t = prop1.rows clean ID test rows, D_n = each
-- Fashion-MNIST-C severity (every corruption, data.shift_subset per split). Losses are full-set
-- mean cross-entropies; gradients exact (the model's backward, accumulated in double);
-- dtheta^T H dtheta by central differences of exact gradients along dtheta (step
-- prop1.hvp_step x |theta|; checked against an exact Hessian in tests/c/test_hvp.c); ECE (15
-- bins) and NLL of the softmax. OOD sets are not used: they have no labels, so L_Dn is not
-- defined on them. Mean ± std over seeds; the points run in this process, in sweep order (a
-- complete point, results/prop1/<run-id>/prop1.h5, is not run again; --jobs is not used).
-- Writes results/prop1/report/{table.md, prop1.csv, values.csv, bootstrap.csv, plots/*.png};
-- on the paper profile also results/paper/prop1/{values,bootstrap}.csv (the result summary
-- paper_repro.md's tables read: hydra.prop1.summary_rows).
local hydra = require("hydra")
local common = require("hydra.methods.common")
local core = hydra.core
local h5 = hydra.h5
local output = hydra.output

local opts = hydra.experiment.script_options(...)
local home = rawget(_G, "HYDRA_HOME") or "."
local sw = hydra.sweep.load(home .. "/configs/sweeps/prop1.yaml", opts)
local cache = hydra.stages.new({ log = function(line) print("  " .. line) end })

local FORMAT = "hydra-prop1-1"

-- ===== run the points =====

local theta_memo = {}   -- base stage key -> { base, sets, at }

local function sets_of(cfg, base)
  local rows = cfg.prop1.rows > 0 and cfg.prop1.rows or cfg.data.test_subset
  local out = { noisy = {} }
  for _, s in ipairs(common.sets(cfg)) do
    if s.role == "id" then
      s.subset = rows
      out.clean = { name = s.name, ds = common.dataset(s, base.norm) }
    elseif s.role == "shift" then
      out.noisy[#out.noisy + 1] = { name = s.name, ds = common.dataset(s, base.norm) }
    end
  end
  if #out.noisy == 0 then hydra.fail("prop1: data.shift lists no shift set (D_n)") end
  out.train = hydra.model.dataset(common.data_file(cfg, cfg.data.id), "train", rows, base.norm)
  return out
end

local function mopts(cfg)
  return { batch = cfg.train.eval_batch_size, hvp_step = cfg.prop1.hvp_step,
           bins = cfg.eval.ece_bins }
end

local function run_point(pt)
  local cfg = pt.cfg
  local t0 = core.now()
  local ctx = { cfg = cfg, cache = cache, progress = false,
                log = function(fmt, ...) print("  " .. fmt:format(...)) end }
  local base_path, base_key = common.base_model(ctx, cfg.seed, cfg.model.dropout)
  local variant = { method = cfg.prune.method, single = true,
                    objective = cfg.prune.method == "circuit" and "avg" or nil }
  local _, gkey, gates = common.gates(ctx, base_path, base_key, variant)
  local mpath = common.member(ctx, base_path, base_key, gkey, gates, 1)
  local th = theta_memo[base_key]
  if not th then
    local base = hydra.model.load(base_path)
    local sets = sets_of(cfg, base)
    local t1 = core.now()
    th = { base = base, sets = sets, at = hydra.prop1.at_theta(base, sets, mopts(cfg)) }
    th.seconds = core.now() - t1
    print(("  gradients at theta: %.1f s"):format(th.seconds))
    theta_memo = { [base_key] = th }   -- one base at a time (points are seed-outermost)
  end
  local t2 = core.now()
  local r = hydra.prop1.measure(th.base, mpath, th.sets, th.at, mopts(cfg))
  r.seconds_measure = core.now() - t2
  r.seconds = core.now() - t0
  output.mkdir_p(pt.dir, "prop1")
  local f <close> = h5.create(pt.dir .. "/prop1.h5")
  local names = {}
  for _, s in ipairs(th.sets.noisy) do names[#names + 1] = s.name end
  for k, v in pairs(r) do f:set_attr("/", k, v) end
  f:set_attr("/", "format", FORMAT)
  f:set_attr("/", "clean", th.sets.clean.name)
  f:set_attr("/", "noisy", table.concat(names, ","))
  f:set_attr("/", "config", hydra.config.to_yaml(cfg))
  f:commit()
  output.write_text(pt.dir .. "/config.resolved.yaml", hydra.config.to_yaml(cfg), "prop1")
  print(("  point done in %.1f s (measurement %.1f s)"):format(r.seconds, r.seconds_measure))
end

local function read_point(pt)
  local path = pt.dir .. "/prop1.h5"
  if core.stat(path) ~= "file" then return nil end
  local f <close> = h5.open(path)
  local a = f:attrs("/")
  if a.format ~= FORMAT then return nil end
  return a
end

local t_all = core.now()
for i, pt in ipairs(sw.points) do
  if not read_point(pt) then
    print(("prop1: point %d/%d %s"):format(i, #sw.points, pt.label))
    run_point(pt)
  end
end
local wall = core.now() - t_all

-- ===== report =====

local recs = {}
for _, pt in ipairs(sw.points) do
  local a = assert(read_point(pt), pt.dir)
  a.method, a.ft, a.k, a.seed = pt.cfg.prune.method, pt.cfg.finetune.epochs,
    pt.cfg.hydra.keep_heads, pt.cfg.seed
  recs[#recs + 1] = a
end
for _, r in ipairs(recs) do r.train_vhv_half = 0.5 * r.train_vhv end
local clean = recs[1].clean
local noisy = {}
for n in recs[1].noisy:gmatch("[^,]+") do noisy[#noisy + 1] = n end

local function mean_std(xs)
  local n, s = #xs, 0
  for _, x in ipairs(xs) do s = s + x end
  local m = s / n
  if n < 2 then return m, nil end
  local v = 0
  for _, x in ipairs(xs) do v = v + (x - m) ^ 2 end
  return m, math.sqrt(v / (n - 1))
end

-- configurations in sweep order (method, ft, k), each with its records over seeds
local configs, by = {}, {}
for _, r in ipairs(recs) do
  local key = ("%s/%d/%d"):format(r.method, r.ft, r.k)
  if not by[key] then
    by[key] = { method = r.method, ft = r.ft, k = r.k, recs = {} }
    configs[#configs + 1] = by[key]
  end
  table.insert(by[key].recs, r)
end
local seeds = #configs[1].recs

local function label(c)
  return ("%s, %s"):format(c.method == "taylor" and "Taylor" or "Circuit (avg)",
    c.ft > 0 and ("fine-tuned %d ep"):format(c.ft) or "no fine-tuning")
end

local function fmt(m, s, digits)
  digits = digits or 4
  local f = "%." .. digits .. "f"
  if s then return (f .. " ± " .. f):format(m, s) end
  return f:format(m)
end

-- value of `fn(rec)` for config c: "mean ± std"
local function cell(c, fn, digits)
  local xs = {}
  for _, r in ipairs(c.recs) do xs[#xs + 1] = fn(r) end
  local m, s = mean_std(xs)
  return fmt(m, s, digits), m, s
end

local md = {}
local function line(s) md[#md + 1] = s end
line(("# Proposition 1, measured (profile %s, %d seed(s))"):format(sw.points[1].cfg.profile,
  seeds))
line("")
line(("D_t = %s (%d rows), D_n = %s; dtheta = pruned (gates folded, fine-tuning included) "
  .. "minus base; mean ± std over seeds. Commands and verdicts: paper_repro.md."):format(clean,
  sw.points[1].cfg.prop1.rows, table.concat(noisy, ", ")))

local function set_table(title, fn, cols, digits)
  line("")
  line("**" .. title .. "**")
  line("")
  local head = { "| pruning | heads kept |" }
  local rule = { "|---|---:|" }
  for _, n in ipairs(cols) do head[#head + 1] = (" %s |"):format(n); rule[#rule + 1] = "---:|" end
  line(table.concat(head))
  line(table.concat(rule))
  for _, c in ipairs(configs) do
    local row = { ("| %s | %d |"):format(label(c), c.k) }
    for _, n in ipairs(cols) do
      row[#row + 1] = " " .. cell(c, function(r) return fn(r, n) end, digits) .. " |"
    end
    line(table.concat(row))
  end
end

local function A(r, key) return r[key] end
set_table("DeltaL(theta) = L_Dn - L_Dt at theta (the base)",
  function(r, n) return A(r, n .. "_gap0") end, noisy)
set_table("DeltaL(theta + dtheta) (the conclusion: >= DeltaL(theta))",
  function(r, n) return A(r, n .. "_gap1") end, noisy)
set_table("Condition 2: grad L_Dn(theta)^T dtheta (>= 0)",
  function(r, n) return A(r, n .. "_gdot") end, noisy)
set_table("Condition 3: dtheta^T (H_n - H_t) dtheta (> 0)",
  function(r, n) return A(r, n .. "_vhv_diff") end, noisy)
set_table("Change of DeltaL: measured (gap1 - gap0)",
  function(r, n) return A(r, n .. "_dgap") end, noisy)
set_table("Change of DeltaL: second-order prediction (grad L_Dn - grad L_Dt)^T dtheta + "
  .. "1/2 dtheta^T (H_n - H_t) dtheta", function(r, n) return A(r, n .. "_pred") end, noisy)
local all = { clean }
for _, n in ipairs(noisy) do all[#all + 1] = n end
set_table("ECE (%) at theta", function(r, n) return 100 * A(r, n .. "_ece0") end, all, 2)
set_table("ECE (%) at theta + dtheta", function(r, n) return 100 * A(r, n .. "_ece1") end, all, 2)
set_table("NLL at theta", function(r, n) return A(r, n .. "_nll0") end, all, 3)
set_table("NLL at theta + dtheta", function(r, n) return A(r, n .. "_nll1") end, all, 3)
set_table("Condition 1: |grad L_D(theta)| on the train rows, grad L_D^T dtheta, "
  .. "1/2 dtheta^T H_D dtheta, |dtheta|, |theta|", function(r, n) return A(r, n) end,
  { "grad_train_norm", "train_gdot", "train_vhv_half", "dtheta_norm", "theta_norm" })

-- ===== verdicts (every point with dtheta != 0, every seed and severity) =====
local function count(pred)
  local yes, n = 0, 0
  for _, r in ipairs(recs) do
    if r.dtheta_norm > 0 then
      for _, s in ipairs(noisy) do
        local v = pred(r, s)
        if v ~= nil then
          n = n + 1
          if v then yes = yes + 1 end
        end
      end
    end
  end
  return yes, n
end
local function verdict(yes, n)
  local word = yes == n and "holds" or (yes == 0 and "fails" or "holds in part")
  return ("%s: %d of %d (%.0f %%)"):format(word, yes, n, n > 0 and 100 * yes / n or 0)
end
local V = {}
for _, st in ipairs(hydra.prop1.STATEMENTS) do
  V[#V + 1] = { st.label, count(function(r, s)
    if st.per_point and s ~= noisy[1] then return nil end   -- one per point
    return st.holds(r, s, clean)
  end) }
  if st.id == "conclusion" then
    V[#V + 1] = { "Conclusion where conditions 2 and 3 hold",
      count(function(r, s)
        if not (r[s .. "_gdot"] >= 0 and r[s .. "_vhv_diff"] > 0) then return nil end
        return st.holds(r, s, clean)
      end) }
  end
end
line("")
line("**Verdicts** (over every point with dtheta != 0, every seed and severity)")
line("")
line("| statement | verdict |")
line("|---|---|")
for _, v in ipairs(V) do line(("| %s | %s |"):format(v[1], verdict(v[2], v[3]))) end
local secs = 0
for _, r in ipairs(recs) do secs = secs + r.seconds end
line("")
line(("Stage and measurement time summed over points: %.1f s; this invocation: %.1f s.")
  :format(secs, wall))

-- ===== files and plots =====
local rdir = sw.results_dir .. "/prop1/report"
output.mkdir_p(rdir .. "/plots", "prop1")
local text = table.concat(md, "\n") .. "\n"
output.write_text(rdir .. "/table.md", text, "prop1")
local keys = { "grad_train_norm", "train_gdot", "train_vhv", "dtheta_norm", "theta_norm",
               "seconds" }
local per = { "loss0", "loss1", "gap0", "gap1", "dgap", "gdot", "vhv", "vhv_diff", "pred",
              "ece0", "ece1", "nll0", "nll1", "acc0", "acc1" }
local csv = { "method,finetune_epochs,keep_heads,seed,set," .. table.concat(keys, ",") .. ","
  .. table.concat(per, ",") }
for _, r in ipairs(recs) do
  for _, s in ipairs(all) do
    local row = { r.method, r.ft, r.k, r.seed, s }
    for _, k in ipairs(keys) do row[#row + 1] = ("%.17g"):format(r[k]) end
    for _, k in ipairs(per) do
      local v = r[s .. "_" .. k]
      row[#row + 1] = v and ("%.17g"):format(v) or ""
    end
    csv[#csv + 1] = table.concat(row, ",")
  end
end
output.write_text(rdir .. "/prop1.csv", table.concat(csv, "\n") .. "\n", "prop1")

-- the result summary (hydra.paper's layout: values.csv per point and statement and seed; no
-- bootstrap: these quantities have no per-sample form), on the paper profile also in
-- <results_dir>/paper/prop1/ (paper_repro.md's tables read it)
local srows, skeys = hydra.prop1.summary_rows(recs, clean, noisy)
local sdirs = { rdir }
if sw.profile == "paper" then sdirs[#sdirs + 1] = sw.results_dir .. "/paper/prop1" end
for _, dir in ipairs(sdirs) do
  output.mkdir_p(dir, "prop1")
  output.write_text(dir .. "/values.csv", hydra.paper.values_csv("prop1", srows, skeys), "prop1")
  output.write_text(dir .. "/bootstrap.csv", hydra.paper.bootstrap_csv("prop1", {}, {}), "prop1")
end

-- one plot per quantity: the mean over the severities against heads kept, one line per
-- (criterion, fine-tuning), error bars = std over seeds
local plot = hydra.plot
local gp = plot.gp_str
local function sev_mean(r, fn)
  local s = 0
  for _, n in ipairs(noisy) do s = s + fn(r, n) end
  return s / #noisy
end
local PLOTS = {
  { "gap", "DeltaL(theta+dtheta) - DeltaL(theta) (measured)", function(r, n) return r[n .. "_dgap"] end },
  { "gap_pred", "second-order prediction of the change of DeltaL", function(r, n) return r[n .. "_pred"] end },
  { "gdot", "grad L_Dn(theta)^T dtheta (condition 2)", function(r, n) return r[n .. "_gdot"] end },
  { "curvature", "dtheta^T (H_n - H_t) dtheta (condition 3)", function(r, n) return r[n .. "_vhv_diff"] end },
  { "grad_train", "grad L_D(theta)^T dtheta on train (condition 1)", function(r) return r.train_gdot end },
  { "ece_gap", "ECE_n - ECE_t at theta+dtheta (%)", function(r, n)
      return 100 * (r[n .. "_ece1"] - r[clean .. "_ece1"]) end },
  { "nll_gap", "NLL_n - NLL_t at theta+dtheta", function(r, n)
      return r[n .. "_nll1"] - r[clean .. "_nll1"] end },
}
local plots = {}
for _, p in ipairs(PLOTS) do
  local series, blocks = {}, {}
  for _, c in ipairs(configs) do
    local name = label(c)
    if not series[name] then series[name] = {}; series[#series + 1] = name end
    local xs = {}
    for _, r in ipairs(c.recs) do xs[#xs + 1] = sev_mean(r, p[3]) end
    local m, s = mean_std(xs)
    table.insert(series[name], ("%d %.10g %.10g"):format(c.k, m, s or 0))
  end
  local cmds = {}
  for i, name in ipairs(series) do
    blocks[#blocks + 1] = "# " .. name .. "\n" .. table.concat(series[name], "\n")
    cmds[#cmds + 1] = ("DAT index %d using 1:2:3 with yerrorlines lc %d lw 2 pt 7 title %s")
      :format(i - 1, i, gp(name))
  end
  local script = table.concat({
    ("set title %s"):format(gp(p[2] .. " (mean over severities; ± std over seeds)")),
    "set xlabel 'heads kept per layer'",
    ("set ylabel %s"):format(gp(p[2])),
    "set key outside below",
    "set grid",
    "set xrange [8.5:0.5]",
    "plot " .. table.concat(cmds, ", \\\n     "),
  }, "\n")
  local png = rdir .. "/plots/" .. p[1] .. ".png"
  plot.run(png, script, table.concat(blocks, "\n\n\n") .. "\n")
  plots[#plots + 1] = png
end

print("")
io.write(text)
print("report: " .. rdir .. "/table.md, " .. rdir .. "/prop1.csv")
print("plots: " .. table.concat(plots, ", "))
return 0
