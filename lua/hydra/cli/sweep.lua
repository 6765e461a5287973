-- hydra sweep SWEEP.yaml: run every point of a sweep file with N worker processes.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra sweep SWEEP.yaml [--jobs N] [--profile quick|paper] [--seeds K] "
  .. "[--shard i/n|auto] [--threads T] [--list] [--no-report] [key=value ...]"

return {
  summary = "run a grid of configs (one run per point) with parallel workers, then report",
  usage = USAGE,
  help = [[A sweep file names base config file(s) and a grid (`grid: {hydra.members: [1, 2, 3],
seed: [0, 1]}`) and/or `points:` (a list of whole override sets); configs/sweeps/README.md
describes the format and the order of the points. Every point is one run in
results/<experiment>/<run-id>/ (run-id from the resolved config's hash).

  --jobs N        worker processes (default: the config's sweep.jobs); each worker gets
                  T/N threads (HYDRA_THREADS), so jobs x threads <= T
  --threads T     the thread budget of the whole sweep (default: the config's threads, else
                  HYDRA_THREADS, else SLURM_CPUS_PER_TASK, else every core)
  --profile P     the size layer from the sweep file's profiles: (default quick), merged
                  before the base config
  --seeds K       adds (or replaces) the seed axis: seed = 0..K-1, outermost
  --shard i/n     run only the points whose index (from 0) is i mod n (Slurm array task, MPI
                  rank); `auto` reads the Slurm array's task id (any base, step or %
                  limit: task MIN + k*STEP is shard k of COUNT) or the MPI rank/size
  --list          print the points (index, run-id, status, overrides) and exit
  --no-report     do not write the aggregated report at the end
  key=value       overrides applied to every point, after the grid

A point whose result.h5 opens and holds its completion mark is complete and is skipped (one
that does not open is "damaged": the sweep stops and asks to delete it), so rerunning the same
command after an interruption (Ctrl-C, SIGKILL, a crash) finishes only the missing runs;
stages are shared through the stage cache. Ctrl-C stops the workers (exit status 130). When every point is
complete, the report (`hydra report EXPERIMENT`) is written to results/<experiment>/report/.
Each worker's output is appended to <run dir>/worker.log.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "sweep",
      usage = USAGE,
      options = { jobs = "integer", profile = "string", seeds = "integer", shard = "string",
                  threads = "integer", list = "flag", ["no-report"] = "flag",
                  point = "integer", expect = "string" },
      positional = { min = 1, max = 1, names = { "SWEEP.yaml" } },
      overrides = true,
    })
    if opts.jobs and opts.jobs < 1 then
      err.usage("hydra sweep: --jobs expects an integer >= 1, got %d", opts.jobs)
    end
    if opts.threads and (opts.threads < 1 or opts.threads > 1024) then   -- HY_MAX_THREADS
      err.usage("hydra sweep: --threads expects an integer in [1, 1024], got %d", opts.threads)
    end
    local sweep = require("hydra.sweep")
    local overrides = {}
    for _, o in ipairs(opts.override_list) do overrides[#overrides + 1] = o.key .. "=" .. o.value end
    local sw = sweep.load(opts.positional[1], { profile = opts.profile, seeds = opts.seeds,
                                                overrides = overrides })
    if opts.point then
      -- worker mode: one point in this process
      local s = sweep.run_point(sw, opts.point, { expect = opts.expect, threads = opts.threads,
                                                  progress = false, quiet = true })
      print(("point %d: %s %s"):format(opts.point, s.dir, s.skipped and "(already complete)"
        or ("complete in %.1f s"):format(s.seconds or 0)))
      return 0
    end
    local shard = opts.shard and sweep.shard(opts.shard) or nil
    if opts.list then
      local counts = sweep.status(sw)
      print(("sweep %s: %d points (profile %s), %d complete, %d partial, %d absent%s")
        :format(sw.name, #sw.points, sw.profile or "-", counts.complete, counts.partial,
          counts.absent, counts.damaged > 0 and (", %d damaged (a result.h5 that does not open "
          .. "or has no completion mark: delete it to rerun the point)"):format(counts.damaged)
          or ""))
      if sw.description then print(sw.description) end
      for _, pt in ipairs(sweep.select(sw, shard)) do
        print(("%4d  %s  %-8s  %s"):format(pt.index, pt.id, pt.status, pt.label))
      end
      return 0
    end
    local s = sweep.run(sw, { jobs = opts.jobs, shard = shard, threads = opts.threads })
    if s.interrupted then
      io.stderr:write(("hydra sweep: interrupted: %d of %d points complete; rerun the same "
        .. "command to finish the rest\n"):format(s.complete, s.total))
      return 130
    end
    if #s.failed > 0 then
      local list = {}
      for _, pt in ipairs(s.failed) do list[#list + 1] = tostring(pt.index) end
      err.fail("hydra sweep: %d point%s failed (%s); see each run's worker.log; rerun the same "
        .. "command to retry them", #s.failed, #s.failed == 1 and "" or "s",
        table.concat(list, ", "))
    end
    print(("sweep %s: %d of %d points complete (%d run now, %d already complete) in %.1f s")
      :format(sw.name, s.complete, s.total, s.ran, s.skipped, s.seconds))
    if s.complete == s.total and not opts["no-report"] then
      local rs = require("hydra.report_sweep")
      local out = rs.write(sw.results_dir .. "/" .. sw.experiment, { ids = rs.ids_of(sw) })
      print("report: " .. out.markdown)
      print("        " .. out.csv)
      for _, p in ipairs(out.plots) do print("        " .. p) end
    elseif s.complete < s.total then
      print(("%d points are not complete yet (other shards?); `hydra report %s` aggregates "
        .. "what is complete"):format(s.total - s.complete, sw.experiment))
    end
    return 0
  end,
}
