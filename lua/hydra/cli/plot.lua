-- hydra plot: reliability diagrams, OOD score histograms, risk-coverage curves (gnuplot).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra plot reliability|ood-hist|risk-coverage RESULT.h5 [RESULT.h5 ...] "
  .. "--out FILE.png [--score NAME] [--bins N] [--points N]"

return {
  summary = "plot result files: reliability, ood-hist, risk-coverage (gnuplot PNG)",
  usage = USAGE,
  help = [[Plots one or more RESULT.h5 files written by `hydra eval`; several files are
overlaid (one curve per method) or, for ood-hist, one panel each. Beside FILE.png it writes
FILE.dat (the data) and FILE.gp (the gnuplot script) so the plot can be rerun with
`gnuplot FILE.gp` or restyled.
  reliability     accuracy vs mean confidence in 15 equal-width bins, with the bin counts
  ood-hist        histograms of the OOD score (--score, default the result's score; --bins,
                  default 30), ID vs each OOD set, as fractions of each set
  risk-coverage   selective risk vs coverage (--points, default 200)]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "plot",
      usage = USAGE,
      options = { out = "string", score = "string", bins = "integer", points = "integer" },
      positional = { min = 2, names = { "KIND", "RESULT.h5..." } },
      required = { "out" },
    })
    local kind = opts.positional[1]
    local paths = {}
    for i = 2, #opts.positional do paths[#paths + 1] = opts.positional[i] end
    local plot = require("hydra.plot")
    if opts.out:match("%.png$") then
      local ins = {}
      for i, p in ipairs(paths) do ins[i] = { p, "RESULT.h5" } end
      local base = opts.out:gsub("%.png$", "")
      require("hydra.output").check({ { opts.out, "--out" }, { base .. ".dat", "its data file" },
        { base .. ".gp", "its script" } }, ins, "hydra plot")
    end
    local r
    if kind == "reliability" then
      r = plot.reliability(paths, opts.out)
    elseif kind == "ood-hist" then
      if opts.bins and (opts.bins < 1 or opts.bins > plot.MAX_BINS) then
        err.usage("hydra plot: --bins must be in [1, %d] (got %d)", plot.MAX_BINS, opts.bins)
      end
      r = plot.ood_hist(paths, opts.out, { score = opts.score, bins = opts.bins })
    elseif kind == "risk-coverage" then
      if opts.points and opts.points < 1 then err.usage("hydra plot: --points must be >= 1") end
      r = plot.risk_coverage(paths, opts.out, { points = opts.points })
    else
      err.usage("hydra plot: unknown plot '%s' (known: reliability, ood-hist, risk-coverage)",
        kind)
    end
    print(("wrote %s (data %s, script %s)"):format(r.png, r.dat, r.gp))
  end,
}
