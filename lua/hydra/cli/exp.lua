-- hydra exp CONFIG.yaml [key=value ...]: run one config (every method of cfg.methods) into
-- results/<experiment>/<run-id>/ (hydra.run).
local argparse = require("hydra.argparse")

local USAGE = "hydra exp CONFIG.yaml [key=value ...] [--force] [--cache DIR] [--quiet] "
  .. "[--no-progress] [--html]\n       hydra exp CONFIG.yaml -m|--multirun key=a,b key2=range(0,3) ... "
  .. "[hydra sweep options: --jobs N, --list, --launcher slurm, ...]"

-- The options of `hydra exp` that a multirun does not take (its runs are a sweep's points).
local SINGLE_ONLY = { force = true, cache = true, quiet = true, ["no-progress"] = true }

-- -m: the command-line sweep as a sweep file (hydra.multirun), run by `hydra sweep`.
local function multirun(args)
  local config = require("hydra.config")
  local mr = require("hydra.multirun")
  local cfg_path, rest, overrides = nil, {}, {}
  local i = 1
  while i <= #args do
    local a = args[i]
    local name = a:match("^%-%-([%w%-_]+)")
    if name then
      if SINGLE_ONLY[name] then
        require("hydra.err").usage("hydra exp -m: --%s applies to a single run, not to a "
          .. "multirun (its points run as `hydra sweep` points)", name)
      end
      rest[#rest + 1] = a
      if not a:find("=", 1, true) and args[i + 1] and not args[i + 1]:match("^%-%-")
         and not args[i + 1]:find("=", 1, true) then
        rest[#rest + 1] = args[i + 1]     -- the option's value
        i = i + 1
      end
    elseif a:find("=", 1, true) then
      local k, v = a:match("^([^=]*)=(.*)$")
      overrides[#overrides + 1] = { key = k, value = v }
    elseif not cfg_path then
      cfg_path = a
    else
      require("hydra.err").usage("hydra exp -m: unexpected argument '%s' (one CONFIG.yaml, then "
        .. "key=value overrides)", a)
    end
    i = i + 1
  end
  if not cfg_path then require("hydra.err").usage("hydra exp -m: expected CONFIG.yaml") end
  local abs = cfg_path
  if abs:sub(1, 1) ~= "/" then abs = require("hydra.core").getcwd() .. "/" .. abs end
  local text, name = mr.sweep_text(abs, overrides)
  -- the folder of the experiment the points run in (single-valued overrides applied)
  local single = {}
  for _, o in ipairs(overrides) do
    if not mr.expand_value(o.key, o.value) then single[#single + 1] = o end
  end
  local cfg = config.load(cfg_path, single)
  local out = require("hydra.output")
  local dir = cfg.results_dir .. "/" .. cfg.experiment .. "/multirun"
  out.mkdir_p(dir, "hydra exp -m")
  local path = dir .. "/" .. name .. ".yaml"
  out.write_text(path, text, "hydra exp -m")
  print("multirun: " .. path)
  local sweep_args = { path }
  for _, a in ipairs(rest) do sweep_args[#sweep_args + 1] = a end
  return require("hydra.cli.sweep").run(sweep_args)
end

return {
  summary = "run one experiment config: every method, evaluated into one result folder",
  usage = USAGE,
  help = [[Resolves CONFIG.yaml (defaults < the file < key=value overrides), then builds every
method of `methods` from cached stages (base models, gates, members, fused models, predictions;
the cache is shared by all runs: HYDRA_CACHE_DIR or .cache/stages, or --cache DIR), predicts the
ID test set, every OOD set and every shift set, evaluates them, and writes
<results_dir>/<experiment>/<run-id>/: config.resolved.yaml, log.txt (everything printed),
methods/<method>.h5 (one `hydra eval` result per method), table.md and table.csv, plots/
(reliability.png, ood-hist.png, risk-coverage.png with their .dat/.gp), and result.h5 (every
method's per-sample arrays and metrics, cost figures, the resolved config and provenance),
written last: a run is complete when result.h5 exists; overrides.yaml lists the run's key=value
overrides in command-line order (FB Hydra's .hydra/overrides.yaml). The run-id is a hash of the resolved
config. Rerunning a complete run does nothing (--force recomputes it, reusing cached stages).

-m / --multirun (FB Hydra's multirun): every key=a,b,c (commas inside [..], {..} and quotes do
not split) and key=range(start, stop[, step]) (stop excluded) is an axis of a grid; the
cartesian product (first key slowest) is written as a sweep file to
<results_dir>/<experiment>/multirun/multirun-<hash>.yaml and run by `hydra sweep` with the
remaining options (--jobs N, --list, --shard, --launcher slurm ...): the same run folders,
resume and aggregated report as any sweep.

--html also writes <run dir>/report.html: this run's tables, plots, learning curves, cost,
overrides, provenance and resolved config in one self-contained page (hydra report --html).]],
  run = function(args)
    for i, a in ipairs(args) do
      if a == "-m" or a == "--multirun" then
        return multirun(table.move(args, i + 1, #args, i, table.move(args, 1, i - 1, 1, {})))
      end
    end
    local opts = argparse.parse(args, {
      command = "exp", usage = USAGE,
      options = { force = "flag", cache = "string", quiet = "flag", ["no-progress"] = "flag",
                  html = "flag" },
      positional = { min = 1, max = 1, names = { "CONFIG.yaml" } },
      overrides = true,
    })
    local config = require("hydra.config")
    local run = require("hydra.run")
    local cfg = config.load(opts.positional[1], opts.override_list)
    local ropts = { force = opts.force, cache_dir = opts.cache, quiet = opts.quiet,
                    overrides = opts.override_list, override_list = opts.override_list }
    if opts["no-progress"] then ropts.progress = false end
    local s = run.execute(cfg, ropts)
    if s.skipped then
      print(("run %s is complete: %s (nothing to do; --force recomputes it)"):format(s.id,
        s.result))
    elseif not opts.quiet then
      print("results:  " .. s.dir)
      print("table:    " .. s.table_md)
      for _, k in ipairs({ "reliability", "ood_hist", "risk_coverage" }) do
        if s.plots[k] then print(("plot:     %s"):format(s.plots[k])) end
      end
    end
    if opts.html then   -- this run's page: <run dir>/report.html
      print("report:   " .. require("hydra.report_html").write(s.dir:match("^(.*)/[^/]+/*$"),
        { ids = { s.id }, out = s.dir, plots = false }))
    end
  end,
}
