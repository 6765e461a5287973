-- tests/lua/test_sweep.lua: hydra.sweep (sweep files: checks with exact file:line:col messages,
-- the documented point order, shards, profiles, seeds), the spawn binding, and hydra.report_sweep
-- grouping on run results made here by real (tiny, synthetic-data) sweeps.
local check = require("check")
local core = require("hydra.core")
local hydra = require("hydra")

local T = {}
local home = rawget(_G, "HYDRA_HOME") or "."

local function put(dir, name, text)
  local path = dir .. "/" .. name
  check.write_file(path, text)
  return path
end

-- A folder with base.yaml (+ quick/paper profile files) pointing results into the folder.
local function setup()
  local d = check.tmpdir()
  put(d, "base.yaml", ("include: %s/configs/data/tiny.yaml\nexperiment: sw\nresults_dir: %s/results\n"
    .. "data: {dir: %s/data, ood: [], shift: []}\nmethods: [single]\n"):format(home, d, d))
  put(d, "quick.yaml", "profile: quick\nfinetune: {epochs: 2}\ntrain: {epochs: 5}\n")
  put(d, "paper.yaml", "profile: paper\nfinetune: {epochs: 3}\ntrain: {epochs: 5}\n")
  return d
end

local function sweep_fails(text, want)
  local d = setup()
  local path = put(d, "s.yaml", text)
  check.raises(want:gsub("F:", path .. ":"), function() return hydra.sweep.load(path) end)
end

-- ===== bad sweep files =====

function T.unknown_key_in_grid()
  sweep_fails("base: base.yaml\ngrid:\n  seed: [0, 1]\n  hydra.membrs: [1, 2]\n",
    "F:4:3: unknown key 'hydra.membrs' in grid (did you mean 'hydra.members'?)")
  sweep_fails("base: base.yaml\ngrid:\n  zzzzzz: [1]\n",
    "F:3:3: unknown key 'zzzzzz' in grid (keys are dotted paths of configs/defaults.yaml, "
    .. "e.g. hydra.members)")
end

function T.empty_grid()
  sweep_fails("base: base.yaml\ngrid: {}\n",
    "F:2:7: grid is empty (give dotted keys with lists of values, e.g. seed: [0, 1, 2])")
  sweep_fails("base: base.yaml\ngrid:\n",
    "F:2:6: grid is empty (give dotted keys with lists of values, e.g. seed: [0, 1, 2])")
  sweep_fails("base: base.yaml\ngrid:\n  seed: []\n", "F:3:9: grid seed: empty list of values")
end

function T.value_of_wrong_type()
  sweep_fails("base: base.yaml\ngrid:\n  hydra.members: [1, two, 3]\n",
    "F:3:22: grid hydra.members[2]: expected integer, got string 'two'")
  sweep_fails("base: base.yaml\ngrid:\n  hydra.members: [1, 0]\n",
    "F:3:22: grid hydra.members[2] must be >= 1 and <= 64 (got 0)")
  sweep_fails("base: base.yaml\ngrid:\n  fuse.mlp: [average, averge]\n",
    "F:3:23: grid fuse.mlp[2] must be one of average, member (got 'averge'; did you mean "
    .. "'average'?)")
  sweep_fails("base: base.yaml\ngrid:\n  data.ood: [[glyphs], [mnist, 3]]\n",
    "F:3:32: grid data.ood[2][2]: expected string, got integer 3")
  sweep_fails("base: base.yaml\ngrid:\n  seed: 3\n",
    "F:3:9: grid seed: expected a list of values, got integer 3")
  sweep_fails("base: base.yaml\ngrid:\n  seed: [0, 1, 0]\n",
    "F:3:16: grid seed[3]: duplicate value 0 (first at [1])")
  sweep_fails("base: base.yaml\npoints:\n  - {fuse.mlp: 3}\n",
    "F:3:16: points[1] fuse.mlp: expected string, got integer 3")
  sweep_fails("base: base.yaml\nset: {train.epochs: 1.5}\ngrid: {seed: [0]}\n",
    "F:2:21: set train.epochs: expected integer, got float 1.5")
end

function T.bad_top_level()
  sweep_fails("base: base.yaml\ngrd: {seed: [0]}\n",
    "F:2:1: unknown key 'grd' in sweep (did you mean 'grid'?)")
  sweep_fails("grid: {seed: [0]}\n",
    "F:1:1: sweep has no base: (the config file every point starts from)")
  sweep_fails("base: base.yaml\n", "F:1:1: sweep has no grid:, points: or seeds: (nothing to run)")
  sweep_fails("base: base.yaml\npoints: []\n",
    "F:2:9: points is empty (give a list of override maps)")
  sweep_fails("base: base.yaml\ngrid: {seed: [0]}\nseeds: 0\n",
    "F:3:8: seeds: expected an integer >= 1, got integer 0")
  sweep_fails("- a\n", "F:1:1: a sweep file must be a map with base: and grid: or points: "
    .. "(got list)")
end

-- the duplicate message holds a run-id: check it with a pattern
function T.duplicate_runs_message_names_the_id()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\ngrid: {threads: [1, 2]}\n")
  local ok, e = pcall(hydra.sweep.load, path)
  check.ok(not ok, "duplicate points must fail")
  check.ok(check.message(e):match("^sweep: points 0 %(threads=1%) and 1 %(threads=2%) resolve "
    .. "to the same run %x+; "), check.message(e))
end

function T.cli_errors_are_clean()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\ngrid:\n  hydra.membrs: [1]\n")
  local code, out, e = check.hydra("sweep " .. path)
  check.eq(code, 1, "exit status")
  check.eq(out, "", "stdout")
  check.eq(e, ("hydra: %s:3:3: unknown key 'hydra.membrs' in grid (did you mean "
    .. "'hydra.members'?)\n"):format(path), "stderr")
  code, out, e = check.hydra("sweep " .. path .. " --jobs 0")
  check.eq(code, 2, "usage exit status")
  check.eq(e, "hydra: hydra sweep: --jobs expects an integer >= 1, got 0\n", "usage stderr")
  code, out, e = check.hydra("report " .. d .. "/nothing")
  check.eq(code, 1, "report exit status")
  check.eq(e, ("hydra: report: no experiment folder '%s/nothing' (run the experiment or sweep "
    .. "first)\n"):format(d), "report stderr")
  code, out, e = check.hydra("repro nope")
  check.eq(code, 2, "repro exit status")
  check.ok(e:find("hydra: hydra repro: unknown experiment 'nope' (experiments: ", 1, true), e)
end

-- ===== points =====

function T.point_order_is_documented_order()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\nset: {train.epochs: 1}\n"
    .. "points:\n  - {fuse.mlp: average}\n  - {fuse.mlp: member}\n"
    .. "grid:\n  hydra.members: [2, 1]\n  eval.score: [msp, entropy]\n")
  local sw = hydra.sweep.load(path, { seeds = 2 })
  check.eq(#sw.points, 16, "points")
  local want = {
    "fuse.mlp=average hydra.members=2 eval.score=msp seed=0",
    "fuse.mlp=average hydra.members=2 eval.score=entropy seed=0",
    "fuse.mlp=average hydra.members=1 eval.score=msp seed=0",
    "fuse.mlp=average hydra.members=1 eval.score=entropy seed=0",
    "fuse.mlp=member hydra.members=2 eval.score=msp seed=0",
  }
  for i, w in ipairs(want) do
    check.eq(sw.points[i].label, w, "label " .. i)
    check.eq(sw.points[i].index, i - 1, "index " .. i)
  end
  check.eq(sw.points[9].label, "fuse.mlp=average hydra.members=2 eval.score=msp seed=1", "9")
  local p = sw.points[6].cfg
  check.eq(p.fuse.mlp, "member", "fuse.mlp")
  check.eq(p.hydra.members, 2, "members")
  check.eq(p.eval.score, "entropy", "score")
  check.eq(p.train.epochs, 1, "set applies")
  check.eq(p.seed, 0, "seed")
  check.eq(p.results_dir, d .. "/results", "base applies")
  -- run ids are distinct and match hydra.run
  local seen = {}
  for _, pt in ipairs(sw.points) do
    check.ok(not seen[pt.id], "distinct ids")
    seen[pt.id] = true
    check.eq(pt.id, hydra.run.id(pt.cfg), "id")
    check.eq(pt.dir, d .. "/results/sw/" .. pt.id, "dir")
  end
  -- the same file loads to the same points (deterministic)
  local again = hydra.sweep.load(path, { seeds = 2 })
  for i, pt in ipairs(sw.points) do check.eq(again.points[i].id, pt.id, "same id " .. i) end
end

function T.profiles_and_overrides()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\nprofiles: {quick: quick.yaml, paper: "
    .. "paper.yaml}\ngrid: {seed: [0, 1]}\n")
  local q = hydra.sweep.load(path)
  check.eq(q.profile, "quick", "default profile")
  check.eq(q.points[1].cfg.finetune.epochs, 2, "quick profile")
  check.eq(q.points[1].cfg.train.epochs, 2, "the base (tiny.yaml) wins over the profile")
  local p = hydra.sweep.load(path, { profile = "paper", overrides = { "train.batch_size=16" } })
  check.eq(p.points[2].cfg.finetune.epochs, 3, "paper profile")
  check.eq(p.points[2].cfg.profile, "paper", "profile key")
  check.eq(p.points[2].cfg.train.batch_size, 16, "override")
  check.raises(("sweep: '%s' has no profile 'big' (profiles: quick, paper)"):format(path),
    function() return hydra.sweep.load(path, { profile = "big" }) end)
  check.raises(("sweep: '%s' has a grid over seed and seeds 3; use one of them"):format(path),
    function() return hydra.sweep.load(path, { seeds = 3 }) end)
  check.raises("command line: train.epochs=x: expected integer, got string 'x'",
    function() return hydra.sweep.load(path, { overrides = { "train.epochs=x" } }) end)
end

function T.shards_partition_the_points()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\ngrid: {seed: [0, 1, 2, 3, 4]}\n")
  local sw = hydra.sweep.load(path)
  local got = {}
  for i = 0, 2 do
    for _, pt in ipairs(hydra.sweep.select(sw, hydra.sweep.shard(i .. "/3"))) do
      check.eq(pt.index % 3, i, "shard of point " .. pt.index)
      check.ok(not got[pt.index], "each point once")
      got[pt.index] = true
    end
  end
  for i = 0, 4 do check.ok(got[i], "point " .. i .. " in a shard") end
  check.raises("hydra sweep: --shard expects i/n with 0 <= i < n (e.g. 0/4), got '3/3' "
    .. "(shard numbers are 0-based: 0 to n-1)", function() return hydra.sweep.shard("3/3") end)
  -- beyond 2^63 the numbers are no integers (reliability_2 H-b5: a traceback in select)
  for _, bad in ipairs({ "1/99999999999999999999", "99999999999999999999/99999999999999999999",
                         "0/9223372036854775808" }) do
    check.raises(("hydra sweep: --shard expects i/n with 0 <= i < n (e.g. 0/4), got '%s'")
      :format(bad), function() return hydra.sweep.shard(bad) end)
  end
  check.eq(hydra.sweep.shard("1/9223372036854775807").n, math.maxinteger, "n = 2^63 - 1")
  check.raises("hydra sweep: --shard expects i/n with 0 <= i < n (e.g. 0/4), got 'x'",
    function() return hydra.sweep.shard("x") end)
  -- seed=S: the points of one seed, whatever the other axes (a summary built seed by seed)
  local sg = hydra.sweep.load(put(d, "g.yaml", "base: base.yaml\nseeds: 3\n"
    .. "grid: {train.epochs: [1, 2]}\n"))
  local pts = hydra.sweep.select(sg, hydra.sweep.shard("seed=2"))
  check.eq(#pts, 2, "both grid values of seed 2")
  for _, pt in ipairs(pts) do check.eq(pt.cfg.seed, 2, "seed of point " .. pt.index) end
  check.same({ pts[1].index, pts[2].index }, { 4, 5 }, "their indices in the whole sweep")
  check.eq(hydra.sweep.shard_text(hydra.sweep.shard("seed=2")), "seed=2", "its text")
  check.ok(hydra.sweep.is_first(hydra.sweep.shard("seed=0"))
    and not hydra.sweep.is_first(hydra.sweep.shard("seed=1"))
    and hydra.sweep.is_first(nil) and hydra.sweep.is_first(hydra.sweep.shard("0/2")), "is_first")
  check.raises("hydra sweep: --shard expects i/n with 0 <= i < n (e.g. 0/4), got 'seed=x'",
    function() return hydra.sweep.shard("seed=x") end)
end

-- A step array (`sbatch --array=0-2:2`: tasks 0 and 2, SLURM_ARRAY_TASK_COUNT 2) must not
-- fail task 2 with "got '2/2'" and leave half the points unrun. Every array form (0-based,
-- 1-based, step, `%` limit, which leaves the variables alone) maps its tasks onto the shards
-- 0..COUNT-1, each exactly once; an irregular list is refused with a message that says why.
function T.shard_auto_maps_every_slurm_array_onto_the_shards()
  local function env_of(t) return function(k) return t[k] end end
  local function shards(min, max, step, count)
    local got = {}
    for id = min, max, step do
      local sh = hydra.sweep.shard("auto", env_of({ SLURM_ARRAY_TASK_ID = tostring(id),
        SLURM_ARRAY_TASK_MIN = tostring(min), SLURM_ARRAY_TASK_MAX = tostring(max),
        SLURM_ARRAY_TASK_STEP = tostring(step), SLURM_ARRAY_TASK_COUNT = tostring(count) }))
      check.eq(sh.n, count, ("array %d-%d:%d: n"):format(min, max, step))
      check.ok(not got[sh.i], ("array %d-%d:%d: shard %d once"):format(min, max, step, sh.i))
      got[sh.i] = true
    end
    for i = 0, count - 1 do
      check.ok(got[i], ("array %d-%d:%d: shard %d/%d has a task"):format(min, max, step, i, count))
    end
  end
  shards(0, 2, 2, 2)     -- --array=0-2:2 (the reported case)
  shards(0, 3, 1, 4)     -- --array=0-3
  shards(1, 4, 1, 4)     -- --array=1-4
  shards(1, 10, 3, 4)    -- --array=1-10:3 -> 1, 4, 7, 10
  shards(5, 5, 1, 1)     -- --array=5
  -- older Slurm without MIN/STEP: 0-based ids
  local sh = hydra.sweep.shard("auto", env_of({ SLURM_ARRAY_TASK_ID = "1",
                                                SLURM_ARRAY_TASK_COUNT = "3" }))
  check.same(sh, { i = 1, n = 3 }, "id/count only")
  -- ... where 1-based ids 1..3 leave shard 0 unrun: the task with id 3 says so
  check.raises_has("the ids look 1-based (no SLURM_ARRAY_TASK_MIN is set, so they are taken as "
    .. "0..COUNT-1 and task 0's points were not run): submit --array=0-2", function()
      return hydra.sweep.shard("auto", env_of({ SLURM_ARRAY_TASK_ID = "3",
                                                SLURM_ARRAY_TASK_COUNT = "3" })) end)
  -- --array=1,3,4: MIN 1, MAX 4, COUNT 3 fit no step
  check.raises("hydra sweep: --shard auto: the Slurm array's task ids are not evenly spaced "
    .. "(SLURM_ARRAY_TASK_ID 3, MIN 1, MAX 4, STEP 1, COUNT 3); use an array like 0-N or "
    .. "0-N:S, or --shard $SLURM_ARRAY_TASK_ID/N with your own ids",
    function() return hydra.sweep.shard("auto", env_of({ SLURM_ARRAY_TASK_ID = "3",
      SLURM_ARRAY_TASK_MIN = "1", SLURM_ARRAY_TASK_MAX = "4", SLURM_ARRAY_TASK_STEP = "1",
      SLURM_ARRAY_TASK_COUNT = "3" })) end)
  sh = hydra.sweep.shard("auto", env_of({ OMPI_COMM_WORLD_RANK = "2", OMPI_COMM_WORLD_SIZE = "4" }))
  check.same(sh, { i = 2, n = 4 }, "MPI rank/size")
end

-- A sweep task on a Slurm allocation of N CPUs runs N threads, not one per core of the node
-- (the budget follows SLURM_CPUS_PER_TASK). HYDRA_THREADS and the config's threads still win.
function T.thread_budget_follows_slurm_cpus_per_task()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\ngrid: {seed: [0, 1]}\n")
  local script = put(d, "budget.lua", ("local hydra = require('hydra')\n"
    .. "local sw = hydra.sweep.load(%q, { overrides = arg[1] and { arg[1] } or nil })\n"
    .. "print(hydra.sweep.budget(sw, {}), require('hydra.core').threads_init(0))\n"):format(path))
  local exe = os.getenv("HYDRA") or "./hydra"
  -- runs the script without the test suite's HYDRA_THREADS=1, with env; returns both counts
  local function counts(env, extra)
    local out = d .. "/out.txt"
    local ok = os.execute(("env -u HYDRA_THREADS %s %s run %s %s >%s 2>&1"):format(env, exe,
      script, extra or "", out))
    local text = check.read_file(out)
    check.ok(ok, "exit status; output: " .. text)
    local b, t = text:match("^(%d+)%s+(%d+)")
    return tonumber(b), tonumber(t)
  end
  local b, t = counts("SLURM_CPUS_PER_TASK=3")
  check.eq(b, 3, "sweep budget under SLURM_CPUS_PER_TASK=3")
  check.eq(t, 3, "threads of a run under SLURM_CPUS_PER_TASK=3")
  b, t = counts("SLURM_CPUS_PER_TASK=3 HYDRA_THREADS=1")
  check.eq(b, 1, "HYDRA_THREADS wins (budget)")
  check.eq(t, 1, "HYDRA_THREADS wins (run)")
  b = counts("SLURM_CPUS_PER_TASK=3", "threads=2")
  check.eq(b, 2, "the config's threads win")
end

function T.slurm_launcher_options_and_arrays()
  local ls = require("hydra.launcher_slurm")
  check.eq(ls.ranges({ 0, 1, 2, 3, 5, 7, 8, 9 }), "0-3,5,7-9", "ranges")
  check.eq(ls.ranges({ 4 }), "4", "one task")
  check.raises("hydra sweep: --slurm-time expects a Slurm time limit (MM, HH:MM:SS, D-HH:MM), "
    .. "got '1 hour'", function() return ls.check_options({ time = "1 hour" }) end)
  check.raises("hydra sweep: --slurm-partition expects a partition name (letters, digits, '_', "
    .. "'-', '.', ','), got 'a;rm -rf'",
    function() return ls.check_options({ partition = "a;rm -rf" }) end)
  check.raises("hydra sweep: --slurm-cpus expects an integer in [1, 1024], got 0",
    function() return ls.check_options({ cpus = 0 }) end)
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\ngrid: {seed: [0, 1]}\n")
  local code, _, errs = check.hydra(("sweep %s --wait"):format(path))
  check.eq(code, 2, "--wait without the launcher")
  check.eq(errs, "hydra: hydra sweep: --wait needs --launcher slurm\n", "message")
  code, _, errs = check.hydra(("sweep %s --launcher slurm --shard 0/2"):format(path))
  check.eq(code, 2, "--shard with the launcher")
  check.ok(errs:find("--launcher slurm makes its own shards", 1, true), errs)
  code, _, errs = check.hydra(("sweep %s --report-only"):format(path))
  check.eq(code, 1, "--report-only with missing points")
  check.eq(errs, "hydra: hydra sweep: 2 of 2 points are not complete (0, 1); no report written; "
    .. "rerun the sweep to finish them\n", "report-only message")
end

function T.worker_command_line()
  local d = setup()
  local path = put(d, "s.yaml", "base: base.yaml\nprofiles: {quick: quick.yaml}\n"
    .. "grid: {seed: [0, 1]}\n")
  local sw = hydra.sweep.load(path, { overrides = { "train.batch_size=16" } })
  local argv = hydra.sweep.worker_argv(sw, sw.points[2], "/bin/hydra", 2)
  check.same(argv, { "/bin/hydra", "sweep", path, "--point", "1", "--expect", sw.points[2].id,
    "--threads", "2", "--profile", "quick", "train.batch_size=16" }, "argv")
  check.raises(("sweep: point 1 of '%s' is run %s, expected 0123 (the sweep file, its configs "
    .. "or the options changed since the sweep started)"):format(path, sw.points[2].id),
    function() return hydra.sweep.run_point(sw, 1, { expect = "0123" }) end)
end

-- ===== the spawn binding =====

function T.spawn_wait_kill()
  local d = check.tmpdir()
  local log = d .. "/out.log"
  local pid = core.spawn({ "/bin/sh", "-c", "echo \"$HYDRA_X\"; exit 3" }, { HYDRA_X = "hi" },
    log)
  local how, code = core.wait(pid, true)
  check.eq(how, "exit", "exit")
  check.eq(code, 3, "code")
  check.eq(check.read_file(log), "hi\n", "env and log")
  pid = core.spawn({ "/bin/sleep", "30" })
  check.eq(core.wait(pid), nil, "still running")
  check.ok(core.kill(pid, "TERM"), "kill")
  how, code = core.wait(pid, true)
  check.eq(how, "signal", "killed")
  check.eq(code, 15, "SIGTERM")
  check.ok(core.ncpu() >= 1, "ncpu")
  check.eq(core.stat(core.exe()), "file", "exe")
end

-- ===== running and reporting (tiny synthetic data, single model, 1 epoch) =====

function T.sweep_runs_skips_and_reports()
  local d = setup()
  core.mkdir_p(d .. "/data")
  hydra.model.write_synthetic(d .. "/data/tiny.h5", { train = 128, val = 32, test = 32 })
  local path = put(d, "s.yaml", "base: base.yaml\nset: {train.epochs: 1, prune.calib_size: 16}\n"
    .. "grid:\n  eval.score: [msp, entropy]\n  seed: [0, 1]\n")
  local sw = hydra.sweep.load(path, { overrides = { "threads=1" } })
  local lines = {}
  -- run point 0 in this process first (cache in the temp folder), then the rest by workers
  local cache = d .. "/cache"
  local s0 = hydra.run.execute(sw.points[1].cfg, { quiet = true, progress = false,
                                                   cache_dir = cache })
  check.eq(s0.skipped, false, "point 0 ran")
  local before = check.read_file(sw.points[1].dir .. "/result.h5")
  local ok, e = pcall(function()
    -- workers get the cache through the environment
    local exe = core.exe()
    local wrapper = put(d, "hydra.sh", ("#!/bin/sh\nHYDRA_CACHE_DIR='%s' exec '%s' \"$@\"\n")
      :format(cache, exe))
    os.execute("chmod +x '" .. wrapper .. "'")
    return hydra.sweep.run(sw, { jobs = 2, threads = 2, exe = wrapper,
                                 log = function(l) lines[#lines + 1] = l end })
  end)
  check.ok(ok, ok or check.message(e))
  local s = e
  check.eq(s.total, 4, "total")
  check.eq(s.skipped, 1, "point 0 skipped")
  check.eq(s.ran, 3, "ran")
  check.eq(#s.failed, 0, "failed: " .. table.concat(lines, "\n"))
  check.eq(s.complete, 4, "complete")
  check.eq(check.read_file(sw.points[1].dir .. "/result.h5"), before, "point 0 untouched")
  -- point 2 (entropy, seed 0) reused point 0's (msp, seed 0) base model from the cache
  check.eq(sw.points[3].label, "eval.score=entropy seed=0", "point 2")
  local prov = hydra.run.load(sw.points[3].dir).provenance.stages
  check.ok(prov:find("single base %x+ hit"), "base model reused: " .. prov)
  -- the report groups by the varying key, mean ± std over the two seeds
  local rs = hydra.report_sweep
  local runs = rs.collect(d .. "/results/sw")
  check.eq(#runs, 4, "runs")
  local g = rs.group(runs)
  check.same(g.varying, { "eval.score" }, "varying keys")
  check.eq(#g.groups, 2, "groups")
  local out = rs.write(d .. "/results/sw", { plots = false })
  local md = check.read_file(out.markdown)
  check.ok(md:find("| Single (eval.score=entropy) (n=2) |", 1, true), md)
  check.ok(md:find("| Single (eval.score=msp) (n=2) |", 1, true), md)
  check.ok(md:find("4 complete runs; seeds 0, 1; varying: eval.score.", 1, true), md)
  local csv = check.read_file(out.csv)
  check.ok(csv:find("\nSingle (eval.score=msp),2,", 1, true), csv)
  -- the msp row's accuracy is the mean of the two msp runs
  local accs = {}
  for _, pt in ipairs(sw.points) do
    if pt.cfg.eval.score == "msp" then
      accs[#accs + 1] = hydra.run.load(pt.dir).results[1].metrics.acc * 100
    end
  end
  local t = hydra.report.table(rs.results(runs))
  for _, row in ipairs(t.rows) do
    if row.method == "Single (eval.score=msp)" then
      check.near(row.cells[1].mean, (accs[1] + accs[2]) / 2, 1e-9, "mean acc")
    end
  end
  -- the same number read by key from the real result files (fractions, not %)
  local acc = hydra.report.value(runs, { method = "single", ["eval.score"] = "msp" }, "acc")
  check.near(100 * acc, (accs[1] + accs[2]) / 2, 1e-9, "report.value acc")
  -- a rerun skips every complete point and starts nothing
  local again = hydra.sweep.run(hydra.sweep.load(path, { overrides = { "threads=1" } }),
    { jobs = 2, threads = 2, quiet = true })
  check.eq(again.ran, 0, "nothing to run")
  check.eq(again.skipped, 4, "all skipped")
  check.eq(#again.started, 0, "no worker started")
end


-- A run stored before an id_neutral key existed (precision, model.norm) compares equal to one
-- stored after at the key's default: collect fills the default in, so report.value does not
-- call the two "different in precision" (a sweep resumed across the key's arrival)
function T.stored_config_without_a_neutral_key_gets_its_default()
  local rs = hydra.report_sweep
  local function flat(text)
    local v, p = core.yaml_parse(text, "result.h5")
    local f, keys = rs.flat_config(v, p)
    return f, keys
  end
  local old, okeys = flat("seed: 1\nmodel:\n  depth: 2\n")
  local new = flat("seed: 2\nprecision: fp32\nmodel:\n  depth: 2\n  norm: pre\n")
  local bf = flat("seed: 3\nprecision: bf16\nmodel:\n  depth: 2\n")
  check.eq(old.precision, "fp32", "filled precision")
  check.eq(old["model.norm"], "pre", "filled model.norm")
  check.eq(new.precision, "fp32", "stored precision")
  check.eq(bf.precision, "bf16", "a stored value is kept")
  local has = {}
  for _, k in ipairs(okeys) do has[k] = true end
  check.ok(has.precision and has["model.norm"], "filled keys listed")
  local function run(f) return { flat = f, keys = (function()
    local ks = {}
    for k in pairs(f) do ks[#ks + 1] = k end
    table.sort(ks)
    return ks
  end)() } end
  local g = rs.group({ run(old), run(new) })
  check.same(g.varying, {}, "nothing varies between the old and the new run")
  g = rs.group({ run(old), run(bf) })
  check.same(g.varying, { "precision" }, "bf16 against the filled default varies")
end

-- `hydra repro NAME --shard i/n` on a shard that leaves points to the other shards must not
-- crash in the experiment script (io.open(nil) on a report it did not write): the shard
-- finishes with status 0, says how many points are complete, and writes no report.
function T.repro_shard_without_every_point_is_clean()
  local d = check.tmpdir()
  -- table_image has one point (seed 0): shard 1/2 has none, so nothing trains here
  local code, out, errs = check.hydra(("repro table_image --profile quick --shard 1/2 "
    .. "results_dir=%s/results"):format(d))
  check.eq(code, 0, "exit status; stderr: " .. errs)
  check.ok(out:find("table_image: 0 of 1 points complete; the report is written by the run "
    .. "that finds every point complete", 1, true), out)
  check.eq(core.stat(d .. "/results/table_image/report"), nil, "no report from a partial sweep")
end


-- `hydra repro cost` writes under results_dir=..., not the default results/, and measures on
-- shard 0 only: shard 1/2 does nothing.
function T.repro_cost_runs_on_shard_zero_only()
  local d = check.tmpdir()
  local code, out, errs = check.hydra(("repro cost --shard 1/2 results_dir=%s/results"):format(d))
  check.eq(code, 0, "exit status; stderr: " .. errs)
  check.ok(out:find("cost: measured by the first shard only (0/n or seed=0; this is shard 1/2)",
    1, true), out)
  check.eq(core.stat(d .. "/results/cost"), nil, "nothing measured on shard 1")
end


-- With long series titles (ablation_diversity: three varying keys) a legend on the right would
-- squeeze the plot to a sliver; long titles put the key below the plot.
function T.plot_key_goes_below_for_long_titles()
  local rs = hydra.report_sweep
  check.eq(rs.key_layout({ "Hydra (Taylor)", "Hydra (Circ)" }), "set key outside right top")
  check.eq(rs.key_layout({ "Hydra (Circ)", "Hydra (Circ) (hydra.diversity.bootstrap=false, "
    .. "hydra.diversity.objectives=[avg])" }), "set key below Left reverse")
end

-- Every shipped sweep loads on every profile it names (a knob of a profile file that the schema
-- refuses, e.g. a fractional train.warmup_epochs, was found only when `make repro` reached it).
function T.shipped_sweeps_load()
  local n = 0
  for _, f in ipairs(core.listdir("configs/sweeps")) do
    if f:match("%.yaml$") then
      local path = "configs/sweeps/" .. f
      local first = hydra.sweep.load(path)
      for _, profile in ipairs(first.profile_names or { "quick" }) do
        local sw = hydra.sweep.load(path, first.profile_names and { profile = profile } or nil)
        check.ok(#sw.points >= 1, path .. " (" .. profile .. ") has points")
        n = n + 1
      end
    end
  end
  check.ok(n >= 20, "sweeps x profiles loaded: " .. n)
end

return T
