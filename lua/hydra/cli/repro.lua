-- hydra repro NAME|all: run the paper's experiments (experiments/NAME.lua) on a profile.
local argparse = require("hydra.argparse")
local core = require("hydra.core")
local err = require("hydra.err")

local USAGE = "hydra repro NAME[,NAME...]|all [--profile quick|paper] [--jobs N] [--seeds K] "
  .. "[--shard i/n|auto|seed=S] [--threads T] [--budget] [key=value ...]\n"
  .. "       hydra repro --write|--check [--doc FILE] [--summaries DIR] [--resamples B] "
  .. "[results_dir=DIR]"

-- `all`, in this order (quickstart is the demo, not a table of the paper)
local ALL = { "table_image", "table_image_remedy", "table_text", "table_mnist",
              "ablation_pruning", "ablation_members", "ablation_mlp_merge", "ablation_heads",
              "ablation_diversity", "prop1", "ablation_condition", "cost", "table_training_free",
              "b2_circuit_knockout" }

local function home() return rawget(_G, "HYDRA_HOME") or "." end

local function names()
  local out = {}
  for _, f in ipairs(core.listdir(home() .. "/experiments")) do
    local n = f:match("^([%w_]+)%.lua$")
    if n and not n:match("^bench") then out[#out + 1] = n end
  end
  return out
end

return {
  summary = "reproduce the paper's tables and ablations (experiments/*.lua) on a profile",
  usage = USAGE,
  help = [[Runs experiments/NAME.lua (several: NAME,NAME,...; or every table and ablation with
`all`: table_image, table_image_remedy, table_text, table_mnist, ablation_pruning,
ablation_members, ablation_mlp_merge, ablation_heads, ablation_diversity, prop1,
ablation_condition, cost, table_training_free, b2_circuit_knockout) on the profile's sizes:
quick (configs/experiments/quick.yaml: the tiny ViT on a subset, minutes) or paper
(configs/experiments/paper.yaml: vit-fm on the full data, hours; see paper_repro.md). Sweep
experiments run their points with --jobs worker processes; complete runs and cached stages
are reused, so an interrupted repro resumes where it stopped. --seeds K runs K seeds (mean ±
std in the tables). key=value overrides apply to every run. `make demo` is `hydra repro
quickstart`, `make repro` is `hydra repro all --profile paper` then `hydra repro
--write`. With several experiments (a list, `all`) it first prints a budget (runs still to do,
base models not cached, estimated time: lua/hydra/budget.lua) and writes each section's wall
time beside its estimate to <results_dir>/repro/<profile>-times.csv as it finishes; --budget
prints that budget (for NAME or all) and runs nothing.

--write regenerates the tables of paper_repro.md (--doc) between `<!-- hydra:table NAME -->` and
`<!-- /hydra:table -->` (lua/hydra/paper.lua: one spec per NAME); the prose is never touched. It
first writes the result summary of every experiment whose paper-profile runs are all complete
(results/paper/<experiment>/values.csv and bootstrap.csv, --summaries; --resamples: bootstrap
resamples, default 1000; a summary that already holds what the runs give is left as it is,
without a new bootstrap); where only some seeds are complete, a seed part for each of them
(<experiment>/seed-<s>/: that seed's values and bootstrap resamples), merged into the summary
once every seed has one (results/README.md, "Seed parts"); then the tables from the summaries.
The runs are read under results_dir (default `results`; results_dir=DIR reads run folders made
elsewhere, the same override `hydra repro NAME` was run with), while the summaries still go to
--summaries (default results/paper of the repository); a summary an experiment script writes
itself (b2_circuit_knockout, prop1: DIR/paper/<experiment>/) is copied there. A table whose
summary does not exist yet keeps the one line "*Not generated yet: ...*"; a generated table
whose summary is missing is an error and nothing is written. --check compares the committed
tables with what the summaries give (and the summaries with the run folders, or with the
script's summary under results_dir, where present), names every stale cell (file, table, row,
column, committed and computed text) or missing summary, and exits 1 if any; tables still
waiting for their summary are listed and pass.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "repro",
      usage = USAGE,
      options = { profile = "string", jobs = "integer", seeds = "integer", shard = "string",
                  threads = "integer", write = "flag", check = "flag", doc = "string",
                  summaries = "string", resamples = "integer", budget = "flag" },
      positional = { min = 0, max = 1, names = { "NAME|all" } },
      overrides = true,
    })
    if opts.write or opts.check then
      if opts.write and opts.check then
        err.usage("hydra repro: --write or --check, not both")
      end
      if opts.positional[1] then
        err.usage("hydra repro: --%s takes no experiment name (got '%s')",
          opts.write and "write" or "check", opts.positional[1])
      end
      return require("hydra.repro_paper").run(opts)
    end
    if not opts.positional[1] then
      err.usage("hydra repro: expected NAME|all, --write or --check")
    end
    local profile = opts.profile or "quick"
    if profile ~= "quick" and profile ~= "paper" then
      err.usage("hydra repro: --profile must be quick or paper, got '%s'", profile)
    end
    if opts.jobs and opts.jobs < 1 then err.usage("hydra repro: --jobs must be >= 1") end
    if opts.seeds and opts.seeds < 1 then err.usage("hydra repro: --seeds must be >= 1") end
    local known = names()
    local want = opts.positional[1]
    local list
    if want == "all" then
      list = ALL
    else
      list = {}
      for one in (want .. ","):gmatch("([^,]*),") do
        local ok = false
        for _, n in ipairs(known) do if n == one then ok = true end end
        if not ok then
          local s = require("hydra.strings").closest(one, known)
          err.usage("hydra repro: unknown experiment '%s'%s (experiments: %s, all)", one,
            s and (" (did you mean '" .. s .. "'?)") or "", table.concat(known, ", "))
        end
        list[#list + 1] = one
      end
    end
    local overrides = {}
    for _, o in ipairs(opts.override_list) do overrides[#overrides + 1] = o.key .. "=" .. o.value end
    local shard = opts.shard and require("hydra.sweep").shard(opts.shard) or nil
    local times = {}
    local t_all = core.now()
    -- the budget before anything runs (several experiments: `all`, `make repro`), and the wall
    -- time of each section beside its estimate in <results_dir>/repro/<profile>-times.csv
    local est, times_csv
    if opts.budget then   -- the budget alone: nothing runs
      local budget = require("hydra.budget")
      print(budget.text(budget.estimate(list, profile, { overrides = overrides,
                                                         seeds = opts.seeds })))
      return 0
    end
    if #list > 1 then
      local budget = require("hydra.budget")
      est = budget.estimate(list, profile, { overrides = overrides, seeds = opts.seeds })
      print(budget.text(est))
      local rdir = require("hydra.config").load(nil, overrides).results_dir .. "/repro"
      require("hydra.output").mkdir_p(rdir, "hydra repro")
      times_csv = ("%s/%s-times.csv"):format(rdir, profile)
    end
    local csv_lines = { "experiment,estimate_seconds,wall_seconds" }
    for i, name in ipairs(list) do
      local path = ("%s/experiments/%s.lua"):format(home(), name)
      local chunk, msg = loadfile(path)
      if not chunk then err.fail("hydra repro: cannot load '%s': %s", path, msg) end
      print(("== %s (profile %s) =="):format(name, profile))
      local t0 = core.now()
      local st = chunk({ repro = true, profile = profile, jobs = opts.jobs, seeds = opts.seeds,
                         shard = shard, threads = opts.threads, overrides = overrides })
      times[#times + 1] = ("%s %.1f s"):format(name, core.now() - t0)
      if times_csv then   -- rewritten after every section: an interrupted repro keeps its times
        csv_lines[#csv_lines + 1] = ("%s,%.1f,%.1f"):format(name, est.rows[i].seconds,
          core.now() - t0)
        require("hydra.report").write_text(times_csv, table.concat(csv_lines, "\n") .. "\n")
      end
      if math.tointeger(st) and st ~= 0 then return st end
    end
    if #list > 1 then
      print(("repro %s (profile %s): %s; total %.1f s"):format(want, profile,
        table.concat(times, ", "), core.now() - t_all))
    end
    return 0
  end,
}
