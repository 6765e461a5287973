-- lua/hydra/experiment.lua: the helpers of experiment scripts (experiments/*.lua, run by
-- `hydra repro NAME` or `hydra run experiments/NAME.lua k=v ...`).
--
--   experiment.script_options(...)          -> opts = { profile, jobs, seeds, shard, overrides }
--   experiment.config(name, opts)           -> the resolved config of a one-run experiment
--   experiment.run(name, opts)              -> e = { sweep, summary, report, runs, table, partial }
--                                              (a sweep experiment: configs/sweeps/<name>.yaml)
--   experiment.main_table(name, opts)       -> 0: runs a main table (table_image, table_mnist),
--                                              prints its report and the headline comparison
-- Scripts read numbers by key, never by the text of a table: hydra.report.value(e.runs,
-- { method = "hydra_circ", ["hydra.members"] = 2 }, "ood_avg_auroc") -> mean, std over seeds.
local config = require("hydra.config")
local core = require("hydra.core")
local err = require("hydra.err")
local sweep = require("hydra.sweep")

local M = {}

local function home() return rawget(_G, "HYDRA_HOME") or "." end

-- Options of an experiment script: the table `hydra repro` passes ({ profile, jobs, seeds,
-- overrides = { "k=v"... } }), or the key=value table of `hydra run SCRIPT k=v ...`, where
-- profile=, jobs= and seeds= are options and every other key a config override.
function M.script_options(a)
  if type(a) == "table" and a.repro then return a end
  local o = { overrides = {} }
  local keys = {}
  for k in pairs(type(a) == "table" and a or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = a[k]
    if k == "jobs" or k == "seeds" then
      o[k] = math.tointeger(tonumber(v))
      if not o[k] or o[k] < 1 then err.usage("%s=%s: expected an integer >= 1", k, tostring(v)) end
    elseif k == "profile" then
      o.profile = v
    else
      o.overrides[#o.overrides + 1] = k .. "=" .. tostring(v)
    end
  end
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

-- Runs configs/sweeps/<name>.yaml (opts: profile, seeds, jobs, shard, overrides), stops with a
-- clean error when a point failed or the sweep was interrupted (exit status 130), writes the
-- report of the sweep's runs (opts.x: the plots' x key) and returns
-- { sweep, summary, report = { markdown, csv, plots }, runs, table }; when some points are not
-- complete (another shard's), partial = true and no report: the script should return at once.
function M.run(name, opts)
  opts = opts or {}
  local sw = sweep.load(("%s/configs/sweeps/%s.yaml"):format(home(), name), opts)
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

-- A main table (experiments/table_image.lua, table_mnist.lua): runs the sweep, prints the
-- report and the paper's claim: Hydra (Circ) matches or beats Deep Ensembles on OOD detection at
-- about the cost of a single model.
function M.main_table(name, opts)
  local report = require("hydra.report")
  local e = M.run(name, opts)
  if e.partial then return 0 end  -- a shard: the report comes when every point is done

  print("")
  io.write(assert(io.open(e.report.markdown, "rb")):read("a"))
  print("")

  local function get(method, key) return report.value(e.runs, { method = method }, key) end
  local hc, hc_sd = get("hydra_circ", "ood_avg_auroc")
  local de, de_sd = get("deep_ensemble", "ood_avg_auroc")
  if hc and de then
    -- in AUROC points; a single-seed gap under one point is within noise (hydra.report.difference)
    local pt = function(v) return v and 100 * v end
    local diff, noise = report.difference(pt(hc), pt(de), pt(hc_sd), pt(de_sd))
    print(("OOD avg AUROC: Hydra (Circ) %.2f vs Deep Ensembles %.2f: %s (%s)"):format(100 * hc,
      100 * de, diff, noise and "no ranking can be read from this"
      or hc >= de and "Hydra (Circ) is at least as good, as in the paper"
      or "Deep Ensembles are better here, unlike the paper"))
  end
  local hacc, dacc = get("hydra_circ", "acc"), get("deep_ensemble", "acc")
  if hacc and dacc then
    print(("accuracy: Hydra (Circ) %.2f vs Deep Ensembles %.2f"):format(100 * hacc, 100 * dacc))
  end
  print("report: " .. e.report.markdown)
  return 0
end

return M
