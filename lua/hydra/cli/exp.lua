-- hydra exp CONFIG.yaml [key=value ...]: run one config (every method of cfg.methods) into
-- results/<experiment>/<run-id>/ (hydra.run).
local argparse = require("hydra.argparse")

local USAGE = "hydra exp CONFIG.yaml [key=value ...] [--force] [--cache DIR] [--quiet] "
  .. "[--no-progress]"

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
written last: a run is complete when result.h5 exists. The run-id is a hash of the resolved
config. Rerunning a complete run does nothing (--force recomputes it, reusing cached stages).]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "exp", usage = USAGE,
      options = { force = "flag", cache = "string", quiet = "flag", ["no-progress"] = "flag" },
      positional = { min = 1, max = 1, names = { "CONFIG.yaml" } },
      overrides = true,
    })
    local config = require("hydra.config")
    local run = require("hydra.run")
    local cfg = config.load(opts.positional[1], opts.override_list)
    local ropts = { force = opts.force, cache_dir = opts.cache, quiet = opts.quiet,
                    overrides = opts.override_list }
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
  end,
}
