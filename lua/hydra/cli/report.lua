-- hydra report EXPERIMENT: the aggregated tables and ablation plots of an experiment folder.
local argparse = require("hydra.argparse")

local USAGE = "hydra report EXPERIMENT|DIR [--out DIR] [--x KEY] [--no-plots] [--print] [--html]"

return {
  summary = "aggregate an experiment's runs: mean ± std over seeds (Markdown, CSV, plots)",
  usage = USAGE,
  help = [[Reads every complete run (<run-id>/result.h5) of results/EXPERIMENT/ (or of the folder
DIR) and writes report/table.md and report/table.csv: one row per method and configuration, the
configuration named by the config keys that differ between runs (seed, threads, results_dir
and sweep.* excepted), every cell mean ± std (sample std, n - 1) over the runs that differ only
by seed. report/plots/ gets one plot per metric (accuracy, ECE, NLL, OOD avg AUROC and FPR95,
groups-mean AUROC, ECE after temperature scaling) against the varying key --x (default: the
numeric varying key with the most values).
  --out DIR     write there instead of <experiment folder>/report
  --print       also print the Markdown table
  --html        also write report/report.html: one self-contained page (inline CSS, plots
                embedded) with the tables (best entry per column in bold), the cost table, the
                ablation plots and, per run, its plots, learning curves, overrides, provenance
                and resolved config; it opens offline and prints]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "report",
      usage = USAGE,
      options = { out = "string", x = "string", ["no-plots"] = "flag", print = "flag",
                  html = "flag" },
      positional = { min = 1, max = 1, names = { "EXPERIMENT" } },
    })
    local rs = require("hydra.report_sweep")
    local dir = rs.dir_of(opts.positional[1])
    local out = rs.write(dir, { out = opts.out, x = opts.x, plots = not opts["no-plots"] })
    if opts.print then
      local f = io.open(out.markdown, "rb")
      io.write(f:read("a"))
      f:close()
    end
    print(("report of %d run%s in %s:"):format(out.runs, out.runs == 1 and "" or "s", dir))
    print("  " .. out.markdown)
    print("  " .. out.csv)
    for _, p in ipairs(out.plots) do print("  " .. p) end
    for _, p in ipairs(out.circuits) do print("  " .. p) end
    if opts.html then
      print("  " .. require("hydra.report_html").write(dir, { out = opts.out, x = opts.x,
        plots = not opts["no-plots"] }))
    end
  end,
}
