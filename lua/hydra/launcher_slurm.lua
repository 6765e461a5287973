-- lua/hydra/launcher_slurm.lua: `hydra sweep FILE --launcher slurm`: a sweep as a Slurm job array.
--
--   launcher.submit(sw, opts) -> { array = id, report = id, tasks = {t...}, k = K } | nil
--     (nil: every point is complete, nothing submitted). opts: partition, time, mem (strings),
--     cpus (integer, default 1), parallelism (integer: the array's `%` limit), wait (boolean),
--     log (function(line)).
--   launcher.wait(sw, job) -> true when every point is complete and the report job succeeded
--   launcher.status(sw) -> rows { pt, state } (complete, running, pending, partial, absent,
--     damaged), printed by `hydra sweep FILE --status`
--
-- Tasks: K = min(#points, MAX_TASKS) shards; array task t runs `hydra sweep FILE --shard t/K
-- --jobs 1 --no-report` (the points whose index ≡ t mod K: one point per task when the sweep has
-- at most MAX_TASKS points) with the same profile, seeds and key=value overrides; K depends only
-- on the sweep, so a resubmission maps every point to the same task and submits only the tasks
-- that still have a point not complete. The report is a second job, `--dependency=afterany` on
-- the array, running `hydra sweep FILE --report-only` (it fails, and says which points are
-- missing, when a task did not finish). Files: results/<experiment>/slurm/<sweep>.sbatch (the
-- task script), <sweep>.report.sbatch, <sweep>.jobs (the last submission's job ids, for
-- --status and --wait), and the logs <sweep>-<array job>_<task>.log, <sweep>-report-<job>.log.
-- Every command is built with hydra.fs.shell_quote; the jobs inherit the submitting shell's
-- environment (sbatch's default), so HYDRA_CACHE_DIR, HYDRA_DATA_DIR and HYDRA_THREADS reach them.
local core = require("hydra.core")
local err = require("hydra.err")
local fs = require("hydra.fs")
local output = require("hydra.output")
local strings = require("hydra.strings")

local M = {}

-- Slurm's default MaxArraySize is 1001 (task ids 0..1000): at most 1000 tasks, shards above.
M.MAX_TASKS = 1000
M.POLL_S = tonumber(os.getenv("HYDRA_SLURM_POLL") or "") or 5
M.SBATCH, M.SQUEUE, M.SCONTROL = "sbatch", "squeue", "scontrol"

local q = fs.shell_quote

-- Runs argv (a list of words, each quoted) with stderr joined; returns ok, output.
local function run(argv)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  local p = io.popen(table.concat(words, " ") .. " 2>&1")
  local out = p:read("a") or ""
  local ok = p:close()
  return ok, out
end

local function have(prog)
  local ok = os.execute("command -v " .. q(prog) .. " >/dev/null 2>&1")
  return ok == true
end

local function cwd()
  local p = io.popen("pwd -P")
  local d = (p:read("a") or ""):gsub("%s+$", "")
  p:close()
  return d
end

local function abs(path, dir)
  if path:sub(1, 1) == "/" then return path end
  return fs.normalize(dir .. "/" .. path)
end

-- "0-3,5,7-9" from a sorted list of integers
local function ranges(list)
  local out, i = {}, 1
  while i <= #list do
    local j = i
    while j < #list and list[j + 1] == list[j] + 1 do j = j + 1 end
    out[#out + 1] = i == j and tostring(list[i]) or ("%d-%d"):format(list[i], list[j])
    i = j + 1
  end
  return table.concat(out, ",")
end
M.ranges = ranges

-- The options checked before anything is written: one-line errors naming the flag.
local PATTERNS = {
  partition = { "^[%w_.,%-]+$", "a partition name (letters, digits, '_', '-', '.', ',')" },
  time = { "^[%d:%-]+$", "a Slurm time limit (MM, HH:MM:SS, D-HH:MM)" },
  mem = { "^%d+[KMGT]?$", "a memory size (e.g. 4G, 500M)" },
}
function M.check_options(opts)
  for _, k in ipairs({ "partition", "time", "mem" }) do
    local v = opts[k]
    if v ~= nil and not tostring(v):match(PATTERNS[k][1]) then
      err.usage("hydra sweep: --slurm-%s expects %s, got '%s'", k, PATTERNS[k][2], tostring(v))
    end
  end
  if opts.cpus ~= nil and (math.type(opts.cpus) ~= "integer" or opts.cpus < 1
      or opts.cpus > 1024) then
    err.usage("hydra sweep: --slurm-cpus expects an integer in [1, 1024], got %s",
      tostring(opts.cpus))
  end
  if opts.parallelism ~= nil and (math.type(opts.parallelism) ~= "integer"
      or opts.parallelism < 1) then
    err.usage("hydra sweep: --slurm-array-parallelism expects an integer >= 1, got %s",
      tostring(opts.parallelism))
  end
end

function M.dir(sw) return ("%s/%s/slurm"):format(sw.results_dir, sw.experiment) end
local function jobs_file(sw) return ("%s/%s.jobs"):format(M.dir(sw), sw.name) end

-- The hydra command line every job runs (after `sweep FILE`), quoted, as shell words.
local function sweep_words(sw, here, extra)
  local words = { q(core.exe()), "sweep", q(abs(sw.file, here)) }
  for _, w in ipairs(extra) do words[#words + 1] = w end
  if sw.profile then words[#words + 1] = "--profile " .. q(sw.profile) end
  if sw.n_seeds and sw.n_seeds ~= sw.seeds then words[#words + 1] = "--seeds " .. sw.n_seeds end
  for _, o in ipairs(sw.cli) do
    words[#words + 1] = q(type(o) == "string" and o or (o.key .. "=" .. tostring(o.value)))
  end
  return table.concat(words, " ")
end

local function script(lines) return table.concat(lines, "\n") .. "\n" end

-- The shards (0..K-1) that hold a point not complete; K
local function missing_tasks(sw)
  local k = math.min(#sw.points, M.MAX_TASKS)
  local need, list = {}, {}
  for _, pt in ipairs(sw.points) do
    if pt.status == "damaged" then
      err.fail("sweep: point %d (%s): '%s/result.h5' exists but is not a complete result (%s); "
        .. "delete it and rerun", pt.index, pt.label, pt.dir, pt.damage)
    end
    if pt.status ~= "complete" then need[pt.index % k] = true end
  end
  for t = 0, k - 1 do if need[t] then list[#list + 1] = t end end
  return list, k
end

local function read_jobs(sw)
  local text = fs.read_file(jobs_file(sw))
  if not text then return nil end
  local a, k = text:match("array (%d+) (%d+)")
  local r = text:match("report (%d+)")
  if not a then return nil end
  return { array = a, k = tonumber(k), report = r }
end

function M.submit(sw, opts)
  opts = opts or {}
  local say = opts.log or print
  M.check_options(opts)
  if not have(M.SBATCH) then
    err.fail("hydra sweep --launcher slurm: '%s' not found in PATH (run this on a Slurm login "
      .. "node, or install Slurm's client commands)", M.SBATCH)
  end
  require("hydra.sweep").status(sw)
  local tasks, k = missing_tasks(sw)
  if #tasks == 0 then
    say(("sweep %s: all %d points complete; nothing to submit"):format(sw.name, #sw.points))
    return nil
  end
  local here = cwd()
  local dir = abs(M.dir(sw), here)
  output.mkdir_p(dir, "sweep")
  local cpus = opts.cpus or 1
  local common = {}
  if opts.partition then common[#common + 1] = "--partition=" .. opts.partition end
  if opts.time then common[#common + 1] = "--time=" .. opts.time end
  if opts.mem then common[#common + 1] = "--mem=" .. opts.mem end
  local array = ranges(tasks) .. (opts.parallelism and ("%" .. opts.parallelism) or "")
  local task_sh = ("%s/%s.sbatch"):format(dir, sw.name)
  local report_sh = ("%s/%s.report.sbatch"):format(dir, sw.name)
  local argv = { M.SBATCH, "--parsable", "--job-name=hydra-" .. sw.name, "--array=" .. array,
                 "--cpus-per-task=" .. cpus, "--ntasks=1",
                 ("--output=%s/%s-%%A_%%a.log"):format(dir, sw.name), "--open-mode=append" }
  for _, o in ipairs(common) do argv[#argv + 1] = o end
  argv[#argv + 1] = task_sh
  -- the submission as a comment line: quoted words, and control characters written as \n,
  -- \ddd (a newline inside a quoted word would end the comment and start a command)
  local function cmdline(list)
    local w = {}
    for i, a in ipairs(list) do w[i] = q(a) end
    return strings.escape_controls(table.concat(w, " "))
  end
  output.write_text(task_sh, script({
    "#!/bin/sh",
    ("# hydra sweep %s: array task t runs shard t/%d of the %d points (written by"):format(
      strings.escape_controls(sw.name), k, #sw.points),
    "# `hydra sweep ... --launcher slurm`, submitted as:",
    "#   " .. cmdline(argv),
    ("# The task ids are the shard numbers 0..%d (not renumbered): resubmit by hand with"):format(
      k - 1),
    ("# --array=0-%d (or a subset of those ids), not with a 1-based array."):format(k - 1),
    "cd " .. q(here) .. " || exit 1",
    "exec " .. sweep_words(sw, here, { ('--shard "$SLURM_ARRAY_TASK_ID/%d"'):format(k),
                                       "--jobs 1", "--no-report" }),
  }), "sweep")
  local ok, out = run(argv)
  local id = ok and out:match("^%s*(%d+)")
  if not id then
    err.fail("hydra sweep --launcher slurm: sbatch failed: %s", (out:gsub("%s+$", "")))
  end
  local rargv = { M.SBATCH, "--parsable", "--job-name=hydra-" .. sw.name .. "-report",
                  "--dependency=afterany:" .. id, "--cpus-per-task=1", "--ntasks=1",
                  ("--output=%s/%s-report-%%j.log"):format(dir, sw.name) }
  for _, o in ipairs(common) do rargv[#rargv + 1] = o end
  rargv[#rargv + 1] = report_sh
  output.write_text(report_sh, script({
    "#!/bin/sh",
    ("# hydra sweep %s: the report, after every task of array job %s, submitted as:"):format(
      strings.escape_controls(sw.name), id),
    "#   " .. cmdline(rargv),
    "cd " .. q(here) .. " || exit 1",
    "exec " .. sweep_words(sw, here, { "--report-only" }),
  }), "sweep")
  local rok, rout = run(rargv)
  local rid = rok and rout:match("^%s*(%d+)")
  if not rid then
    run({ "scancel", id })
    err.fail("hydra sweep --launcher slurm: sbatch of the report job failed (array job %s "
      .. "cancelled): %s", id, (rout:gsub("%s+$", "")))
  end
  output.write_text(jobs_file(sw), ("array %s %d\nreport %s\n"):format(id, k, rid), "sweep")
  say(("sweep %s: submitted array job %s (%d task%s: %s, %d cpu%s each) for %d of %d points; "
    .. "report job %s after it"):format(sw.name, id, #tasks, #tasks == 1 and "" or "s", array,
      cpus, cpus == 1 and "" or "s", #sw.points - (function()
        local c = 0
        for _, pt in ipairs(sw.points) do if pt.status == "complete" then c = c + 1 end end
        return c end)(), #sw.points, rid))
  say(("  scripts and logs: %s/; follow with `hydra sweep %s --status`"):format(dir, sw.file))
  local threads = os.getenv("HYDRA_THREADS")
  if threads and threads ~= "" then
    say(("  note: HYDRA_THREADS=%s is exported to the tasks and wins over --slurm-cpus")
      :format(threads))
  end
  return { array = id, report = rid, tasks = tasks, k = k }
end

-- { [task id or "report"] = state } of the jobs still known to squeue
local function queue(job)
  local ok, out = run({ M.SQUEUE, "-h", "-r", "--me", "-o", "%i %T" })
  if not ok then return nil, (out:gsub("%s+$", "")) end
  local st = {}
  for id, state in out:gmatch("(%S+) (%S+)") do
    local a, t = id:match("^(%d+)_(%d+)$")
    if a == job.array then st[tonumber(t)] = state
    elseif id == job.array or id:match("^" .. job.array .. "_%[") then st.array = state
    elseif id == job.report then st.report = state end
  end
  return st
end

-- JobState of a job that left the queue (scontrol keeps it for MinJobAge), or nil
local function final_state(id)
  local ok, out = run({ M.SCONTROL, "show", "job", "-o", id })
  return ok and out:match("JobState=(%S+)") or nil
end

local function fmt_time(s)
  s = math.floor(s + 0.5)
  return ("%02d:%02d"):format(s // 60, s % 60)
end

function M.wait(sw, job, opts)
  opts = opts or {}
  local say = opts.log or print
  local sweep = require("hydra.sweep")
  local t0 = core.now()
  local tty = core.isatty(1)
  local last = ""
  while true do
    local st, why = queue(job)
    if not st then err.fail("hydra sweep --wait: squeue failed: %s", why) end
    local c = sweep.status(sw)
    local running, pending = 0, 0
    for key, s in pairs(st) do
      if key ~= "report" then
        if s == "RUNNING" or s == "COMPLETING" then running = running + 1
        elseif s == "PENDING" then pending = pending + 1 end
      end
    end
    local line = ("[slurm %s] %d/%d points complete; tasks %d running, %d pending; report %s")
      :format(job.array, c.complete, #sw.points, running, pending,
        st.report and st.report:lower() or "done")
    if tty then
      io.stdout:write(("\r%s  elapsed %s\27[K"):format(line, fmt_time(core.now() - t0)))
      io.stdout:flush()
    elseif line ~= last then
      say(line)
    end
    last = line
    if next(st) == nil then break end
    core.sleep(M.POLL_S)
  end
  if tty then io.stdout:write("\n") end
  local c = sweep.status(sw)
  local rstate = final_state(job.report) or "unknown"
  say(("sweep %s: %d of %d points complete; report job %s %s (%.0f s)"):format(sw.name,
    c.complete, #sw.points, job.report, rstate, core.now() - t0))
  return c.complete == #sw.points and rstate == "COMPLETED", c, rstate
end

-- Each point's state: the run folder's, or the Slurm state of its task when not complete.
function M.status(sw)
  local sweep = require("hydra.sweep")
  local counts = sweep.status(sw)
  local job = read_jobs(sw)
  local st = {}
  if job and have(M.SQUEUE) then st = queue(job) or {} end
  local rows = {}
  for _, pt in ipairs(sw.points) do
    local s = pt.status
    if s ~= "complete" and s ~= "damaged" and job then
      local ts = st[pt.index % job.k] or st.array
      if ts == "RUNNING" or ts == "COMPLETING" then s = "running"
      elseif ts == "PENDING" then s = "pending" end
    end
    rows[#rows + 1] = { pt = pt, state = s }
  end
  return rows, counts, job, st
end

return M
