-- hydra sweep SWEEP.yaml: run every point of a sweep file with N worker processes.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra sweep SWEEP.yaml [--jobs N] [--profile quick|paper] [--seeds K] "
  .. "[--shard i/n|auto|seed=S] [--threads T] [--list | --status | --report-only] [--no-report] "
  .. "[--launcher local|slurm [--slurm-partition P] [--slurm-time T] [--slurm-cpus N] "
  .. "[--slurm-mem M] [--slurm-array-parallelism K] [--wait]] [key=value ...]"

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
                  limit: task MIN + k*STEP is shard k of COUNT) or the MPI rank/size;
                  `seed=S` runs the points of seed S only (a summary built seed by seed)
  --list          print the points (index, run-id, status, overrides) and exit
  --status        like --list, with the Slurm state (pending, running) of the points not
                  complete from the last --launcher slurm submission
  --no-report     do not write the aggregated report at the end
  --report-only   run nothing: write the report when every point is complete, else fail
                  naming the missing points (the Slurm launcher's report job)
  --launcher L    local (default: worker processes here) or slurm: write an sbatch array
                  script into results/<experiment>/slurm/ (one task per point; shards of the
                  points above 1000), submit it and a report job after it (afterany), print
                  the job ids; resubmitting the same command submits only the missing points
  --slurm-partition P, --slurm-time T, --slurm-mem M   sbatch's --partition, --time, --mem
  --slurm-cpus N  CPUs per task (default 1); the task's runs use N threads
  --slurm-array-parallelism K   at most K tasks at once (the array's %K)
  --wait          after submitting, follow the jobs (squeue) with a progress line until done;
                  exit status 0 only when every point is complete and the report written
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
                  point = "integer", expect = "string", status = "flag",
                  ["report-only"] = "flag", launcher = "string", wait = "flag",
                  ["slurm-partition"] = "string", ["slurm-time"] = "string",
                  ["slurm-cpus"] = "integer", ["slurm-mem"] = "string",
                  ["slurm-array-parallelism"] = "integer" },
      positional = { min = 1, max = 1, names = { "SWEEP.yaml" } },
      overrides = true,
    })
    if opts.jobs and opts.jobs < 1 then
      err.usage("hydra sweep: --jobs expects an integer >= 1, got %d", opts.jobs)
    end
    if opts.threads and (opts.threads < 1 or opts.threads > 1024) then   -- HY_MAX_THREADS
      err.usage("hydra sweep: --threads expects an integer in [1, 1024], got %d", opts.threads)
    end
    local launcher = opts.launcher or "local"
    if launcher ~= "local" and launcher ~= "slurm" then
      err.usage("hydra sweep: --launcher expects local or slurm, got '%s'", launcher)
    end
    local slurm_opts = { partition = opts["slurm-partition"], time = opts["slurm-time"],
                         cpus = opts["slurm-cpus"], mem = opts["slurm-mem"],
                         parallelism = opts["slurm-array-parallelism"] }
    if launcher ~= "slurm" then
      for _, k in ipairs({ "slurm-partition", "slurm-time", "slurm-cpus", "slurm-mem",
                           "slurm-array-parallelism", "wait" }) do
        if opts[k] ~= nil then err.usage("hydra sweep: --%s needs --launcher slurm", k) end
      end
    else
      if opts.shard or opts.jobs then
        err.usage("hydra sweep: --launcher slurm makes its own shards (one task per point); "
          .. "drop --%s", opts.shard and "shard" or "jobs")
      end
      require("hydra.launcher_slurm").check_options(slurm_opts)
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
      -- (the pid tells the sweep which of the workers sharing this log said it)
      print(("point %d: %s %s (worker %d)"):format(opts.point, s.dir, s.skipped
        and "already complete" or ("complete in %.1f s"):format(s.seconds or 0),
        require("hydra.core").getpid()))
      return 0
    end
    local shard = opts.shard and sweep.shard(opts.shard) or nil
    local rs = require("hydra.report_sweep")
    local function write_report()
      local out = rs.write(sw.results_dir .. "/" .. sw.experiment, { ids = rs.ids_of(sw) })
      print("report: " .. out.markdown)
      print("        " .. out.csv)
      for _, p in ipairs(out.plots) do print("        " .. p) end
    end
    if opts["report-only"] then
      sweep.status(sw)
      local missing = {}
      for _, pt in ipairs(sw.points) do
        if pt.status ~= "complete" then missing[#missing + 1] = tostring(pt.index) end
      end
      if #missing > 0 then
        err.fail("hydra sweep: %d of %d points are not complete (%s); no report written; rerun "
          .. "the sweep to finish them", #missing, #sw.points, table.concat(missing, ", "))
      end
      write_report()
      return 0
    end
    if opts.status then
      local rows, _, job = require("hydra.launcher_slurm").status(sw)
      local by = {}
      for _, r in ipairs(rows) do by[r.state] = (by[r.state] or 0) + 1 end
      local parts = {}
      for _, k in ipairs({ "complete", "running", "pending", "partial", "absent", "damaged" }) do
        if by[k] then parts[#parts + 1] = ("%d %s"):format(by[k], k) end
      end
      print(("sweep %s: %d points: %s%s"):format(sw.name, #sw.points, table.concat(parts, ", "),
        job and (" (Slurm array job %s, report job %s)"):format(job.array, job.report) or ""))
      for _, r in ipairs(rows) do
        print(("%4d  %s  %-8s  %s"):format(r.pt.index, r.pt.id, r.state, r.pt.label))
      end
      return 0
    end
    if launcher == "slurm" then
      local ls = require("hydra.launcher_slurm")
      local job = ls.submit(sw, slurm_opts)
      if not job then
        if not opts["no-report"] then write_report() end
        return 0
      end
      if opts.wait then
        local ok, c, rstate = ls.wait(sw, job)
        if not ok then
          err.fail("hydra sweep: %d of %d points complete, report job %s %s; see the logs in "
            .. "%s/ and rerun the same command to submit the missing points", c.complete,
            #sw.points, job.report, rstate, ls.dir(sw))
        end
        print("report: " .. sw.results_dir .. "/" .. sw.experiment .. "/report/table.md")
      end
      return 0
    end
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
    print(("sweep %s: %d of %d points complete (%d run now, %d already complete%s) in %.1f s")
      :format(sw.name, s.complete, s.total, s.ran, s.skipped, (s.others or 0) > 0
        and ("; %d of them finished by another process meanwhile"):format(s.others) or "",
        s.seconds))
    if s.complete == s.total and not opts["no-report"] then
      write_report()
    elseif s.complete < s.total then
      print(("%d points are not complete yet (other shards?); `hydra report %s` aggregates "
        .. "what is complete"):format(s.total - s.complete, sw.experiment))
    end
    return 0
  end,
}
