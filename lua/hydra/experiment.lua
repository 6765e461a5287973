-- lua/hydra/experiment.lua: the helpers of experiment scripts (experiments/*.lua, run by
-- `hydra repro NAME` or `hydra run experiments/NAME.lua k=v ...`).
--
--   experiment.script_options(...)          -> opts = { profile, jobs, seeds, shard, threads,
--                                              overrides }; sets the script process's threads
--   experiment.config(name, opts)           -> the resolved config of a one-run experiment
--   experiment.run(name, opts)              -> e = { sweep, summary, report, runs, table, partial }
--                                              (a sweep experiment: configs/sweeps/<name>.yaml)
--   experiment.main_table(name, opts)       -> 0: runs a main table (table_image, table_mnist),
--                                              prints its report and the headline comparison
--   experiment.claim_line(runs, title, a, b, key, better [, opts]) -> the printed line of a
--                                              claim, by the rule of hydra.verdict, or nil
--   experiment.has_method(runs, name)      -> whether some run has that method's result
--   experiment.prepare_inputs(sw)           -> prepares the datasets a sweep's points read
--                                              that a recipe makes and nobody prepared
-- Scripts read numbers by key, never by the text of a table: hydra.report.value(e.runs,
-- { method = "hydra_circ", ["hydra.members"] = 2 }, "ood_avg_auroc") -> mean, std over seeds.
local config = require("hydra.config")
local core = require("hydra.core")
local err = require("hydra.err")
local sweep = require("hydra.sweep")

local M = {}

local function home() return rawget(_G, "HYDRA_HOME") or "." end

-- Options of an experiment script: the table `hydra repro` passes ({ profile, jobs, seeds,
-- threads, overrides = { "k=v"... } }), or the key=value table of `hydra run SCRIPT k=v ...`,
-- where profile=, jobs= and seeds= are options, threads= both the thread budget and a config
-- override, and every other key a config override.
local function parse_options(a)
  if type(a) == "table" and a.repro then return a end
  local o = { overrides = {} }
  local keys = {}
  for k in pairs(type(a) == "table" and a or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = a[k]
    if k == "jobs" or k == "seeds" or k == "threads" then
      o[k] = math.tointeger(tonumber(v))
      if not o[k] or o[k] < 1 then err.usage("%s=%s: expected an integer >= 1", k, tostring(v)) end
      if k == "threads" then o.overrides[#o.overrides + 1] = k .. "=" .. tostring(v) end
    elseif k == "profile" then
      o.profile = v
    else
      o.overrides[#o.overrides + 1] = k .. "=" .. tostring(v)
    end
  end
  return o
end

-- The script's own process builds stages too (prop1, b2_circuit_knockout, the pretrained
-- encoder), so its kernels run at the thread budget (else HYDRA_THREADS or every core), with
-- OpenBLAS at one thread as in every run (core/README.md, "Threading and determinism").
function M.script_options(a)
  local o = parse_options(a)
  err.wrap(nil, core.threads_init, o.threads or 0)
  return o
end

-- The config of an experiment on a profile: configs/experiments/<profile>.yaml (sizes), then
-- configs/experiments/<name>.yaml (the experiment's settings win), then opts.overrides.
function M.config(name, opts)
  local profile = opts.profile or "quick"
  local files = { ("%s/configs/experiments/%s.yaml"):format(home(), profile),
                  ("%s/configs/experiments/%s.yaml"):format(home(), name) }
  for _, f in ipairs(files) do
    if not core.stat(f) then err.fail("experiment %s: no config '%s'", name, f) end
  end
  return config.resolve({ include = files }, opts.overrides)
end

-- The datasets the points of sweep sw read (the ID set, every OOD and shift set, the OOD
-- validation set of a circuit search), prepared here when a recipe of datasets/ makes them and
-- they are not prepared yet, so that `hydra repro NAME` and `make repro` do not fail a point
-- on a set nobody asked for by hand (the leave-one-family-out copies ood-val-<set> of
-- ablation_condition). A set imported from a source (data.sources) or without a recipe is left
-- to the run, which names the fix. Returns the names prepared.
function M.prepare_inputs(sw)
  local data, model = require("hydra.data"), require("hydra.model")
  local eval = require("hydra.eval")
  local done, out = {}, {}
  for _, pt in ipairs(sw.points) do
    local cfg = pt.cfg
    local names = { cfg.data.id }
    for _, o in ipairs(eval.ood_groups(cfg.data.ood)) do names[#names + 1] = o.name end
    for _, n in ipairs(cfg.data.shift or {}) do names[#names + 1] = n end
    if cfg.data.ood_val then names[#names + 1] = cfg.data.ood_val end
    for _, n in ipairs(names) do
      local path = model.data_path(cfg, n)
      local key = cfg.data.dir .. "\0" .. n
      if not done[key] and not (cfg.data.sources and cfg.data.sources[n])
         and core.stat(path) ~= "file" and pcall(data.recipe, n) then
        data.prepare(n, { prepared_dir = cfg.data.dir })
        out[#out + 1] = n
      end
      done[key] = true
    end
  end
  return out
end

-- Runs configs/sweeps/<name>.yaml (opts: profile, seeds, jobs, shard, overrides), stops with a
-- clean error when a point failed or the sweep was interrupted (exit status 130), writes the
-- report of the sweep's runs (opts.x: the plots' x key) and returns
-- { sweep, summary, report = { markdown, csv, plots }, runs, table }; when some points are not
-- complete (another shard's), partial = true and no report: the script should return at once.
function M.run(name, opts)
  opts = opts or {}
  local sw = sweep.load(("%s/configs/sweeps/%s.yaml"):format(home(), name), opts)
  M.prepare_inputs(sw)
  local s = sweep.run(sw, { jobs = opts.jobs, shard = opts.shard, threads = opts.threads })
  if s.interrupted then
    error(setmetatable({ status = 130, message = ("%s: interrupted: %d of %d points complete; "
      .. "rerun the same command to finish the rest"):format(name, s.complete, s.total) },
      err.Error), 0)
  end
  if #s.failed > 0 then
    local list = {}
    for _, pt in ipairs(s.failed) do list[#list + 1] = pt.index .. " (" .. pt.dir .. ")" end
    err.fail("%s: %d point(s) failed: %s; see worker.log in each folder", name, #s.failed,
      table.concat(list, ", "))
  end
  local rs = require("hydra.report_sweep")
  local dir = sw.results_dir .. "/" .. sw.experiment
  if s.complete < s.total then
    -- a shard (--shard i/n) ran its points; the others are not complete yet: no report, and
    -- e.partial tells the script to stop before reading one
    print(("%s: %d of %d points complete; the report is written by the run that finds every "
      .. "point complete (rerun without --shard once all shards are done)"):format(name,
      s.complete, s.total))
    return { sweep = sw, summary = s, report = { plots = {} }, runs = {}, partial = true }
  end
  local ids = rs.ids_of(sw)
  local rep = rs.write(dir, { ids = ids, x = opts.x })
  local runs = rs.collect(dir, { ids = ids })
  local tbl = #runs > 0 and require("hydra.report").table((rs.results(runs))) or nil
  return { sweep = sw, summary = s, report = rep, runs = runs, table = tbl }
end

-- true when some run of `runs` has a result of method `name` (a method left out with
-- methods=[...] has none)
function M.has_method(runs, name)
  for _, r in ipairs(runs) do
    for _, res in ipairs(r.loaded.results or {}) do
      if res.name == name then return true end
    end
  end
  return false
end

-- The line an experiment prints for a claim "A is better than B on metric key" (better =
-- "higher" or "lower"), by the rule of results/README.md ("Verdicts"; hydra.verdict.compare):
--   "<title>: <A> 81.68 vs <B> 85.66 (claim: <A> higher; seeds 0, 1, 2): −3.98 (p 0.210; CI
--   −4.52, −3.41): within noise (only the sample test is beyond noise)"
-- a, b = { method = name, label = text [, ["config.key"] = value] } (the label is printed, the
-- rest is the report.value filter); key as verdict.compare takes (a string, or { a =, b = }).
-- opts.paper (true, or the paper's numbers: "77.60 vs 74.81") marks the claim as the paper's:
-- then "holds" adds ", as in the paper" and "fails" ", unlike the paper" (and the numbers);
-- "within noise" adds nothing. Means and difference in points (x 100). nil (the caller prints
-- nothing) when either method is in none of the runs (the user left it out: methods=[...]) or
-- no seed has both; opts.B, opts.seed, opts.boot: as verdict.compare.
function M.claim_line(runs, title, a, b, key, better, opts)
  opts = opts or {}
  local function filter(x)
    local f = {}
    for k, v in pairs(x) do if k ~= "label" then f[k] = v end end
    return f
  end
  if not M.has_method(runs, a.method) or not M.has_method(runs, b.method) then return nil end
  local r = require("hydra.verdict").compare(runs, filter(a), filter(b), key, better, opts)
  if not r then return nil end
  local seeds = {}
  for i, s in ipairs(r.seeds) do seeds[i] = tostring(s) end
  local paper = opts.paper and (r.verdict == "holds" and ", as in the paper"
    or r.verdict == "fails" and ", unlike the paper") or ""
  if paper ~= "" and type(opts.paper) == "string" then
    paper = paper .. " (" .. opts.paper .. ")"
  end
  return ("%s: %s %.2f vs %s %.2f (claim: %s %s; seed%s %s): %s%s"):format(title, a.label,
    100 * r.a, b.label, 100 * r.b, a.label, better, #seeds == 1 and "" or "s",
    table.concat(seeds, ", "), r.text, paper)
end

-- A main table (experiments/table_image.lua, table_mnist.lua): runs the sweep, prints the
-- report and the paper's claim: Hydra (Circ) matches or beats Deep Ensembles on OOD detection at
-- about the cost of a single model (the line is left out when the runs lack either method).
function M.main_table(name, opts)
  local e = M.run(name, opts)
  if e.partial then return 0 end  -- a shard: the report comes when every point is done

  print("")
  io.write(assert(io.open(e.report.markdown, "rb")):read("a"))
  print("")

  local hc = { method = "hydra_circ", label = "Hydra (Circ)" }
  local de = { method = "deep_ensemble", label = "Deep Ensembles" }
  local line = M.claim_line(e.runs, "OOD avg AUROC", hc, de, "ood_avg_auroc", "higher",
    { paper = true })
  if line then
    print(line)
    local report = require("hydra.report")
    print(("accuracy: Hydra (Circ) %.2f vs Deep Ensembles %.2f"):format(
      100 * report.value(e.runs, { method = "hydra_circ" }, "acc"),
      100 * report.value(e.runs, { method = "deep_ensemble" }, "acc")))
  end
  print("report: " .. e.report.markdown)
  for _, p in ipairs(e.report.circuits or {}) do print("circuit diagnostics over seeds: " .. p) end
  return 0
end

return M
