-- lua/hydra/sweep.lua: sweeps = many runs of one base config, run by worker processes.
--
-- A sweep file (configs/sweeps/*.yaml):
--   base: ../experiments/ablation_members.yaml   # config file(s) every point starts from
--                                                # (a path or a list, relative to this file)
--   profiles:                                    # optional: the size layer chosen by --profile
--     quick: ../experiments/quick.yaml           #   (default: quick); merged before base, so
--                                                #   the experiment's own settings win
--     paper: ../experiments/paper.yaml
--   seeds: 3                                     # optional: adds the axis seed = 0..K-1
--                                                # (or per profile: {quick: 1, paper: 3})
--   set: {data.test_subset: 500}                 # optional: overrides applied to every point
--   grid:                                        # optional: every combination of the values
--     hydra.members: [1, 2, 3, 4, 5, 6]
--     fuse.mlp: [average, member]
--   points:                                      # optional: whole override sets
--     - {prune.method: taylor}
--     - {prune.method: circuit, prune.objective: avg}
--   description: text                            # optional, shown by --list
-- Keys of set/grid/points are dotted config paths checked against configs/defaults.yaml, their
-- values are checked like config values; every problem is an error naming file:line:col.
--
-- Points, in a fixed documented order, numbered from 0:
--   for each seed s (only when `seeds` / --seeds is given; outermost, so a partial sweep has
--   every configuration at seed 0 first), for each entry of `points` (in file order; one empty
--   entry when absent), for each combination of `grid` (keys in file order, the first key
--   slowest and the last fastest, values in file order).
-- A point's config = defaults < profile file < base files < set < points entry < grid values <
-- seed < command-line overrides. --seeds K replaces the file's `seeds`; a grid over `seed`
-- and seeds/--seeds together is an error.
--
-- API:
--   sweep.load(path, opts) -> s      opts: profile, seeds, overrides (array of "k=v" strings)
--     s.points[i] = { index (0-based), label ("hydra.members=2 seed=0"), overrides, cfg, id, dir }
--   sweep.status(s) -> { complete = n, partial = n, absent = n }, and point.status set
--   sweep.run(s, opts) -> summary    opts: jobs, shard = { i, n }, threads (total budget),
--                                    quiet, log (function(line)), exe (the hydra binary)
--     summary = { total, selected, skipped, ran, others, failed = { point... }, interrupted,
--                 complete (points of the sweep complete after the run) }; skipped counts the
--                 points complete before (or, others of them, finished meanwhile by another
--                 process, e.g. a second sweep of the same file), ran those this sweep computed
--   sweep.run_point(s, index, opts) -> run summary   (in this process; used by the worker)
--   sweep.shard(text) -> { i, n }    parses "i/n" (0 <= i < n) or "auto" (Slurm array / MPI env);
--                                    "seed=S" -> { seed = S }: the points of seed S;
--   sweep.shard_text(shard), sweep.is_first(shard)  its text; nil, 0/n or seed=0
--   sweep.budget(s, opts) -> threads  the thread budget: opts.threads, the config's threads, else
--                                    HYDRA_THREADS, SLURM_CPUS_PER_TASK, every core
-- Workers: `hydra sweep FILE --point I --expect RUN-ID [same options]`, started with
-- fork + exec, each in its own process group with HYDRA_THREADS / OMP_NUM_THREADS /
-- OPENBLAS_NUM_THREADS set to its share of the thread budget (jobs x threads <= budget), stdout
-- and stderr appended to <run dir>/worker.log. A complete point (result.h5 present) is never
-- started again. SIGINT/SIGTERM: the parent sends SIGTERM to every worker's process group,
-- waits (SIGKILL after 10 s), and raises an error saying how to resume (exit status 130).
local config = require("hydra.config")
local core = require("hydra.core")
local err = require("hydra.err")
local fs = require("hydra.fs")
local strings = require("hydra.strings")
local yaml = require("hydra.yaml")

local M = {}

M.KILL_GRACE_S = 10
M.POLL_S = 0.1
-- Most points a sweep may have (seeds x points entries x grid combinations), counted before any
-- point is built: above it a sweep is refused with the count. 10^4 runs of the quick profile
-- are already weeks of compute, and `--list` of 10^4 points takes a few seconds.
M.MAX_POINTS = 10000

-- seeds x entries x the product of the grid's value counts, or nil when above M.MAX_POINTS
local function point_count(sw, seeds)
  local n = math.max(1, #sw.entries) * (seeds or 1)
  for _, a in ipairs(sw.axes) do
    n = n * #a.values
    if n > M.MAX_POINTS then return nil end
  end
  if n > M.MAX_POINTS then return nil end
  return n
end

local function too_many(sw, seeds)
  if point_count(sw, seeds) then return nil end
  -- the exact count, in floating point when it no longer fits an integer
  local total = math.max(1, #sw.entries) * (seeds or 1) + 0.0
  for _, a in ipairs(sw.axes) do total = total * #a.values end
  local text = total < 2 ^ 53 and ("%d"):format(math.floor(total)) or ("%.3g"):format(total)
  return text
end

local TOP = { "base", "profiles", "seeds", "set", "grid", "points", "description" }

-- ===== small helpers =====

local function kind_of(v, p)
  if v == core.yaml_null then return "null" end
  if p and p.kind then return p.kind end
  local t = type(v)
  if t == "number" then return math.type(v) == "integer" and "integer" or "float" end
  return t
end

local function describe(v, kind)
  if kind == "string" then return ("string '%s'"):format(v) end
  if kind == "integer" or kind == "float" or kind == "boolean" then
    return kind .. " " .. tostring(v)
  end
  return kind
end

-- YAML text of one value, as it would be written on the command line (point labels).
local value_text = yaml.flow

-- Every dotted path of the config (leaves and sections).
local function all_paths()
  local st = config._state()
  local out, set = {}, {}
  local function walk(spec)
    for _, k in ipairs(spec.order) do
      local child = spec.keys[k]
      local path = child.path
      out[#out + 1] = path
      set[path] = child
      if child.section then walk(child) end
    end
  end
  walk(st.spec)
  return out, set
end

local function nested(key, v)
  local t = {}
  local cur = t
  local parts = {}
  for part in key:gmatch("[^.]+") do parts[#parts + 1] = part end
  for i = 1, #parts - 1 do
    cur[parts[i]] = {}
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = v
  return t
end

-- ===== reading and checking a sweep file =====

local function at(file, p, key_pos)
  if not p then return file .. ":1:1" end
  if key_pos and p.key_line then return ("%s:%d:%d"):format(file, p.key_line, p.key_col) end
  return ("%s:%d:%d"):format(file, p.line or 1, p.col or 1)
end

-- Checks a dotted key; `where` = "grid" | "set" | "points[2]".
local function check_key(file, key, p, where)
  local paths, set = all_paths()
  if type(key) ~= "string" or key == "" then
    err.fail("%s: %s: keys must be dotted config paths (got %s)", at(file, p, true), where,
      tostring(key))
  end
  if key == "include" then
    err.fail("%s: %s: 'include' is not a setting (use base: in the sweep file)",
      at(file, p, true), where)
  end
  if not set[key] then
    local s = strings.closest(key, paths)
    err.fail("%s: unknown key '%s' in %s%s", at(file, p, true), key, where,
      s and (" (did you mean '" .. s .. "'?)") or
      " (keys are dotted paths of configs/defaults.yaml, e.g. hydra.members)")
  end
end

-- Checks value v of key (as a config value); `what` names it in the message.
local function check_value(file, key, v, p, what)
  local ok, e = pcall(config.resolve, nested(key, v))
  if ok then return end
  local msg = err.message(e)
  msg = msg:gsub("^config table: ", "")
  local rest
  if msg:sub(1, #key) == key then rest = msg:sub(#key + 1)
  else rest = ": " .. msg end
  -- point at the element of a list value that is wrong ("[2][1]: expected ...")
  local pos, tail = p, rest
  while true do
    local i, after = tail:match("^%[(%d+)%](.*)$")
    local sub = i and pos and pos.sub and pos.sub[tonumber(i)]
    if not sub then break end
    pos, tail = sub, after
  end
  err.fail("%s: %s%s", at(file, pos), what, rest)
end

-- Reads the overrides map m (positions p) of section `where` into a list { key, value, label }.
local function read_overrides(file, m, p, where)
  local list = {}
  if m == core.yaml_null or m == nil then return list end
  local kind = kind_of(m, p)
  if kind ~= "map" then
    err.fail("%s: %s: expected a map of dotted keys to values, got %s", at(file, p), where,
      describe(m, kind))
  end
  for _, k in ipairs(p.order) do
    local sub = p.sub[k]
    check_key(file, k, sub, where)
    check_value(file, k, m[k], sub, where .. " " .. k)
    list[#list + 1] = { key = k, value = m[k] }
  end
  return list
end

-- A config file named at position xp of the sweep file must be a readable file.
local function need_file(file, xp, what, path)
  local kind = core.stat(path)
  if kind == "file" then return path end
  err.fail("%s: %s: cannot read '%s' (%s)", at(file, xp), what, path,
    kind == "dir" and "it is a folder" or kind and "not a regular file"
    or "No such file or directory")
end

local function read_paths(file, v, p, what)
  local kind = kind_of(v, p)
  local dir = fs.dirname(file)
  if kind == "string" then return { need_file(file, p, what, fs.join(dir, v)) } end
  if kind == "list" and #v > 0 then
    local out = {}
    for i, x in ipairs(v) do
      local xp = p.sub[i]
      if type(x) ~= "string" then
        err.fail("%s: %s[%d]: expected a config file path, got %s", at(file, xp), what, i,
          describe(x, kind_of(x, xp)))
      end
      out[i] = need_file(file, xp, ("%s[%d]"):format(what, i), fs.join(dir, x))
    end
    return out
  end
  err.fail("%s: %s: expected a config file path or a list of paths, got %s", at(file, p), what,
    describe(v, kind))
end

-- Parses and checks a sweep file into { file, name, base, profiles, seeds, set, axes, entries,
-- description }.
function M.read(path)
  if type(path) ~= "string" then error("sweep.read: expected a path", 2) end
  local kind = core.stat(path)
  if not kind then err.fail("sweep: cannot open '%s': no such file", path) end
  if kind == "other" then   -- a FIFO would block the read until a writer comes
    err.fail("sweep: cannot read '%s': it is not a regular file", path)
  end
  local ok, v, p = pcall(core.yaml_load, path)
  if not ok then err.fail("sweep: %s", err.message(v)) end
  local file = path
  if kind_of(v, p) ~= "map" then
    err.fail("%s: a sweep file must be a map with base: and grid: or points: (got %s)",
      at(file, p), describe(v, kind_of(v, p)))
  end
  for _, k in ipairs(p.order) do
    local okk = false
    for _, t in ipairs(TOP) do if t == k then okk = true end end
    if not okk then
      local s = strings.closest(k, TOP)
      err.fail("%s: unknown key '%s' in sweep%s", at(file, p.sub[k], true), k,
        s and (" (did you mean '" .. s .. "'?)") or (" (known: " .. table.concat(TOP, ", ") .. ")"))
    end
  end
  local sw = { file = file, name = (file:match("([^/]+)$") or file):gsub("%.ya?ml$", ""),
               profiles = {}, axes = {}, entries = {} }
  if v.base == nil then
    err.fail("%s: sweep has no base: (the config file every point starts from)", at(file, p))
  end
  sw.base = read_paths(file, v.base, p.sub.base, "base")
  if v.profiles ~= nil then
    local pp = p.sub.profiles
    if kind_of(v.profiles, pp) ~= "map" then
      err.fail("%s: profiles: expected a map of profile names to config paths, got %s",
        at(file, pp), describe(v.profiles, kind_of(v.profiles, pp)))
    end
    sw.profile_names = {}
    for _, name in ipairs(pp.order) do
      sw.profiles[name] = read_paths(file, v.profiles[name], pp.sub[name], "profiles." .. name)
      sw.profile_names[#sw.profile_names + 1] = name
    end
  end
  if v.seeds ~= nil then
    local sp = p.sub.seeds
    local function one(x, xp, where)
      if math.type(x) ~= "integer" or x < 1 then
        err.fail("%s: %s: expected an integer >= 1, got %s", at(file, xp), where,
          describe(x, kind_of(x, xp)))
      end
      return x
    end
    if kind_of(v.seeds, sp) == "map" then   -- per profile: {quick: 1, paper: 3}
      sw.seeds_by_profile = {}
      for _, name in ipairs(sp.order) do
        if not (sw.profiles and sw.profiles[name]) then
          err.fail("%s: seeds.%s: no such profile in profiles:", at(file, sp.sub[name]), name)
        end
        sw.seeds_by_profile[name] = one(v.seeds[name], sp.sub[name], "seeds." .. name)
      end
    else
      sw.seeds = one(v.seeds, sp, "seeds")
    end
  end
  if v.description ~= nil then sw.description = tostring(v.description) end
  sw.set = read_overrides(file, v.set, p.sub.set, "set")
  if v.grid ~= nil then
    local gp = p.sub.grid
    local gk = kind_of(v.grid, gp)
    if gk == "null" or (gk == "map" and #gp.order == 0) then
      err.fail("%s: grid is empty (give dotted keys with lists of values, e.g. seed: [0, 1, 2])",
        at(file, gp))
    end
    if gk ~= "map" then
      err.fail("%s: grid: expected a map of dotted keys to lists of values, got %s", at(file, gp),
        describe(v.grid, gk))
    end
    for _, k in ipairs(gp.order) do
      local sub = gp.sub[k]
      check_key(file, k, sub, "grid")
      local vals = v.grid[k]
      local vk = kind_of(vals, sub)
      if vk ~= "list" then
        err.fail("%s: grid %s: expected a list of values, got %s", at(file, sub), k,
          describe(vals, vk))
      end
      if #vals == 0 then
        err.fail("%s: grid %s: empty list of values", at(file, sub), k)
      end
      local seen = {}
      for i, x in ipairs(vals) do
        check_value(file, k, x, sub.sub[i], ("grid %s[%d]"):format(k, i))
        local t = value_text(x)
        if seen[t] then
          err.fail("%s: grid %s[%d]: duplicate value %s (first at [%d])", at(file, sub.sub[i]), k,
            i, t, seen[t])
        end
        seen[t] = i
      end
      sw.axes[#sw.axes + 1] = { key = k, values = vals }
    end
  end
  if v.points ~= nil then
    local pp = p.sub.points
    local pk = kind_of(v.points, pp)
    if pk ~= "list" then
      err.fail("%s: points: expected a list of override maps, got %s", at(file, pp),
        describe(v.points, pk))
    end
    if #v.points == 0 then
      err.fail("%s: points is empty (give a list of override maps)", at(file, pp))
    end
    for i, e in ipairs(v.points) do
      sw.entries[i] = read_overrides(file, e, pp.sub[i], ("points[%d]"):format(i))
    end
  end
  if #sw.axes == 0 and #sw.entries == 0 and not sw.seeds and not sw.seeds_by_profile then
    err.fail("%s: sweep has no grid:, points: or seeds: (nothing to run)", at(file, p))
  end
  local n = too_many(sw, sw.seeds)
  if n then
    local where = v.grid ~= nil and p.sub.grid or (v.points ~= nil and p.sub.points) or p.sub.seeds
    err.fail("%s: %s has %s points (limit %d: split the sweep into several files)",
      at(file, where), v.grid ~= nil and "grid" or "sweep", n, M.MAX_POINTS)
  end
  return sw
end

-- ===== points =====

-- "i/n" -> { i, n }; "auto" reads SLURM_ARRAY_TASK_ID/COUNT, OMPI_COMM_WORLD_RANK/SIZE or
-- PMI_RANK/SIZE (getenv: a function(name) standing in for os.getenv, for tests).
-- A Slurm array's task ids are MIN, MIN+STEP, ..., MAX (any base, any step; a `%` limit changes
-- none of them): task id t is shard (t - MIN) / STEP of COUNT. Without MIN/STEP (old Slurm) the
-- ids are taken as 0..COUNT-1. An irregular list (--array=1,3,4) has no such map: refused.
function M.shard(text, getenv)
  getenv = getenv or os.getenv
  if text == "auto" then
    local function num(k) return math.tointeger(tonumber(getenv(k) or "")) end
    local id, count = num("SLURM_ARRAY_TASK_ID"), num("SLURM_ARRAY_TASK_COUNT")
    if id and count then
      local min, max, step = num("SLURM_ARRAY_TASK_MIN"), num("SLURM_ARRAY_TASK_MAX"),
        num("SLURM_ARRAY_TASK_STEP")
      min, step = min or 0, (step and step > 0) and step or 1
      max = max or (min + step * (count - 1))
      if (id - min) % step ~= 0 or max ~= min + step * (count - 1) or id < min or id > max then
        -- old Slurm sets no MIN: ids are then taken as 0..COUNT-1, and id COUNT means 1..COUNT
        local hint = (num("SLURM_ARRAY_TASK_MIN") == nil and id == count)
          and "; the ids look 1-based (no SLURM_ARRAY_TASK_MIN is set, so they are taken as "
            .. "0..COUNT-1 and task 0's points were not run): submit --array=0-" .. (count - 1)
          or ""
        err.usage("hydra sweep: --shard auto: the Slurm array's task ids are not evenly spaced "
          .. "(SLURM_ARRAY_TASK_ID %d, MIN %d, MAX %d, STEP %d, COUNT %d); use an array like "
          .. "0-N or 0-N:S, or --shard $SLURM_ARRAY_TASK_ID/N with your own ids%s", id, min, max,
          step, count, hint)
      end
      return M.shard(("%d/%d"):format((id - min) // step, count))
    end
    local mpi = { { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" }, { "PMI_RANK", "PMI_SIZE" } }
    for _, e in ipairs(mpi) do
      local i, n = num(e[1]), num(e[2])
      if i and n then return M.shard(("%d/%d"):format(i, n)) end
    end
    err.usage("hydra sweep: --shard auto found no SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, "
      .. "OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE in the environment")
  end
  -- seed=S: the points of one seed (a summary built seed by seed: results/README.md, "Seed
  -- parts")
  local sd = tostring(text):match("^seed=(%d+)$")
  if sd then
    local seed = math.tointeger(tonumber(sd))
    if not seed then
      err.usage("hydra sweep: --shard seed=S expects an integer S, got '%s'", text)
    end
    return { seed = seed }
  end
  local i, n = tostring(text):match("^(%d+)/(%d+)$")
  -- integers only: "1/99999999999999999999" reads n as a float (1e20), not a shard count
  i, n = math.tointeger(tonumber(i)), math.tointeger(tonumber(n))
  if not i or not n or n < 1 or i >= n then
    err.usage("hydra sweep: --shard expects i/n with 0 <= i < n (e.g. 0/4), got '%s'%s",
      tostring(text), (i and n and i == n) and " (shard numbers are 0-based: 0 to n-1)" or "")
  end
  return { i = i, n = n }
end

local function run_mod() return require("hydra.run") end

-- Loads a sweep: reads the file and resolves every point's config.
function M.load(path, opts)
  opts = opts or {}
  local sw = M.read(path)
  local profile = opts.profile
  sw.profile_files = {}
  if profile and not sw.profile_names then
    err.fail("sweep: '%s' has no profiles: (got --profile %s)", path, profile)
  end
  if sw.profile_names then
    profile = profile or "quick"
    if not sw.profiles[profile] then
      err.fail("sweep: '%s' has no profile '%s' (profiles: %s)", path, profile,
        table.concat(sw.profile_names, ", "))
    end
    sw.profile_files = sw.profiles[profile]
  end
  sw.profile = profile
  if sw.seeds_by_profile then sw.seeds = sw.seeds_by_profile[profile or "quick"] end
  local seeds = opts.seeds or sw.seeds
  if opts.seeds ~= nil and (math.type(opts.seeds) ~= "integer" or opts.seeds < 1) then
    err.usage("hydra sweep: --seeds expects an integer >= 1, got %s", tostring(opts.seeds))
  end
  if seeds then
    for _, a in ipairs(sw.axes) do
      if a.key == "seed" then
        err.fail("sweep: '%s' has a grid over seed and seeds %d; use one of them", path, seeds)
      end
    end
  end
  sw.n_seeds = seeds
  local n = too_many(sw, seeds)
  if n then
    err.fail("sweep: '%s' with --seeds %d has %s points (limit %d: split the sweep into several "
      .. "files)", path, seeds, n, M.MAX_POINTS)
  end
  sw.cli = opts.overrides or {}
  local include = {}
  for _, f in ipairs(sw.profile_files) do include[#include + 1] = f end
  for _, f in ipairs(sw.base) do include[#include + 1] = f end
  sw.include = include

  -- enumerate
  local combos = { {} }
  for _, a in ipairs(sw.axes) do
    local nxt = {}
    for _, c in ipairs(combos) do
      for _, val in ipairs(a.values) do
        local cc = table.move(c, 1, #c, 1, {})
        cc[#cc + 1] = { key = a.key, value = val }
        nxt[#nxt + 1] = cc
      end
    end
    combos = nxt
  end
  local entries = #sw.entries > 0 and sw.entries or { {} }
  local seed_list = { false }
  if seeds then
    seed_list = {}
    for s = 0, seeds - 1 do seed_list[#seed_list + 1] = s end
  end
  sw.points = {}
  local by_id = {}
  local run = run_mod()
  for _, s in ipairs(seed_list) do
    for _, e in ipairs(entries) do
      for _, c in ipairs(combos) do
        local ov, labels = {}, {}
        for _, o in ipairs(sw.set) do ov[#ov + 1] = o end
        for _, o in ipairs(e) do ov[#ov + 1] = o; labels[#labels + 1] = o end
        for _, o in ipairs(c) do ov[#ov + 1] = o; labels[#labels + 1] = o end
        if s then
          local o = { key = "seed", value = s }
          ov[#ov + 1] = o
          labels[#labels + 1] = o
        end
        local list, text = {}, {}
        for _, o in ipairs(ov) do
          list[#list + 1] = { key = o.key, value = type(o.value) == "string"
            and ("'" .. o.value:gsub("'", "''") .. "'") or o.value }
        end
        for _, o in ipairs(sw.cli) do list[#list + 1] = o end
        for i, o in ipairs(labels) do text[i] = o.key .. "=" .. value_text(o.value) end
        local index = #sw.points
        local cfg = config.resolve({ include = include }, list)
        local pt = { index = index, overrides = ov, label = table.concat(text, " "), cfg = cfg }
        pt.id = run.id(cfg)
        pt.dir = run.dir(cfg, pt.id)
        if by_id[pt.id] then
          err.fail("sweep: points %d (%s) and %d (%s) resolve to the same run %s; a grid or "
            .. "points key changes nothing that identifies a run", by_id[pt.id].index,
            by_id[pt.id].label, index, pt.label, pt.id)
        end
        by_id[pt.id] = pt
        sw.points[#sw.points + 1] = pt
      end
    end
  end
  sw.experiment = sw.points[1].cfg.experiment
  sw.results_dir = sw.points[1].cfg.results_dir
  return sw
end

function M.status(sw)
  local run = run_mod()
  local counts = { complete = 0, damaged = 0, partial = 0, absent = 0 }
  for _, pt in ipairs(sw.points) do
    local _
    pt.status, _, pt.damage = run.status(pt.cfg, pt.dir)
    counts[pt.status] = (counts[pt.status] or 0) + 1
  end
  return counts
end

-- The points with index ≡ shard.i (mod shard.n), or of seed shard.seed (all when shard is nil).
function M.select(sw, shard)
  local out = {}
  for _, pt in ipairs(sw.points) do
    local take = not shard
      or (shard.seed and math.tointeger(tonumber(pt.cfg.seed)) == shard.seed)
      or (shard.n and pt.index % shard.n == shard.i)
    if take then out[#out + 1] = pt end
  end
  return out
end

-- true when shard is nil or the first of its kind (0/n, seed=0): experiments that are not
-- sweeps of seeds (cost, b2_circuit_knockout) run in that one only
function M.is_first(shard)
  return not shard or shard.i == 0 or shard.seed == 0
end

-- the text of a shard, as --shard takes it
function M.shard_text(shard)
  if shard.seed then return "seed=" .. shard.seed end
  return ("%d/%d"):format(shard.i, shard.n)
end

-- ===== running =====

-- Runs one point in this process (the worker's job).
function M.run_point(sw, index, opts)
  opts = opts or {}
  local pt = sw.points[index + 1]
  if not pt then
    err.fail("sweep: '%s' has %d points (0..%d); no point %d", sw.file, #sw.points,
      #sw.points - 1, index)
  end
  if opts.expect and opts.expect ~= pt.id then
    err.fail("sweep: point %d of '%s' is run %s, expected %s (the sweep file, its configs or "
      .. "the options changed since the sweep started)", index, sw.file, pt.id, opts.expect)
  end
  local cfg = pt.cfg
  if opts.threads then cfg.threads = opts.threads end
  local ov = { ("sweep %s point %d (profile %s)"):format(sw.file, index, tostring(sw.profile)) }
  if pt.label ~= "" then ov[#ov + 1] = pt.label end
  for _, o in ipairs(sw.cli) do
    ov[#ov + 1] = type(o) == "table" and ("%s=%s"):format(o.key, tostring(o.value)) or tostring(o)
  end
  local yaml = require("hydra.yaml")
  local list = {}   -- overrides.yaml: the point's overrides, then the command line's
  for _, o in ipairs(pt.overrides) do
    list[#list + 1] = o.key .. "=" .. (type(o.value) == "string" and o.value or yaml.flow(o.value))
  end
  for _, o in ipairs(sw.cli) do
    list[#list + 1] = type(o) == "table" and ("%s=%s"):format(o.key, tostring(o.value)) or tostring(o)
  end
  return run_mod().execute(cfg, { quiet = opts.quiet, progress = opts.progress,
                                  overrides = table.concat(ov, " "), override_list = list })
end

local function fmt_time(s)
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%d:%02d:%02d"):format(s // 3600, (s % 3600) // 60, s % 60) end
  return ("%02d:%02d"):format(s // 60, s % 60)
end

local function tail(path, n)
  local f = io.open(path, "rb")
  if not f then return "" end
  local lines = {}
  for l in f:lines() do
    lines[#lines + 1] = l
    if #lines > n then table.remove(lines, 1) end
  end
  f:close()
  return table.concat(lines, "\n")
end

-- The thread budget: opts.threads, else the base config's `threads`, else what threads = 0
-- means (HYDRA_THREADS, else SLURM_CPUS_PER_TASK, else every core: core.threads_default).
local function budget(sw, opts)
  if opts.threads and opts.threads > 0 then return opts.threads end
  local t = sw.points[1].cfg.threads
  if t and t > 0 then return t end
  return err.wrap(nil, core.threads_default)
end
M.budget = budget

-- The worker's command line for point pt.
local function worker_argv(sw, pt, exe, threads)
  local argv = { exe, "sweep", sw.file, "--point", tostring(pt.index), "--expect", pt.id,
                 "--threads", tostring(threads) }
  if sw.profile then argv[#argv + 1] = "--profile"; argv[#argv + 1] = sw.profile end
  if sw.n_seeds and sw.n_seeds ~= sw.seeds then
    argv[#argv + 1] = "--seeds"; argv[#argv + 1] = tostring(sw.n_seeds)
  end
  for _, o in ipairs(sw.cli) do
    argv[#argv + 1] = type(o) == "string" and o or (o.key .. "=" .. tostring(o.value))
  end
  return argv
end
M.worker_argv = worker_argv

function M.run(sw, opts)
  opts = opts or {}
  local run = run_mod()
  local say = opts.log or function(line) if not opts.quiet then print(line) end end
  local jobs = opts.jobs or sw.points[1].cfg.sweep.jobs
  local total_threads = budget(sw, opts)
  if jobs > total_threads then
    say(("sweep: --jobs %d is more than the thread budget %d; using %d jobs"):format(jobs,
      total_threads, total_threads))
    jobs = total_threads
  end
  local per = math.max(1, total_threads // jobs)
  local exe = opts.exe or core.exe()
  local selected = M.select(sw, opts.shard)
  M.status(sw)
  local todo, skipped = {}, 0
  for _, pt in ipairs(selected) do
    if pt.status == "damaged" then
      err.fail("sweep: point %d (%s): '%s/result.h5' exists but is not a complete result (%s); "
        .. "delete it and rerun", pt.index, pt.label, pt.dir, pt.damage)
    end
    if pt.status == "complete" then skipped = skipped + 1 else todo[#todo + 1] = pt end
  end
  local summary = { total = #sw.points, selected = #selected, skipped = skipped, ran = 0,
                    others = 0, failed = {}, interrupted = false, started = {} }
  say(("sweep %s: %d points%s, %d complete, %d to run; %d jobs x %d threads; results in %s/%s")
    :format(sw.name, #sw.points,
      opts.shard and (" (shard %s: %d)"):format(M.shard_text(opts.shard), #selected) or "",
      skipped, #todo, jobs, per, sw.results_dir, sw.experiment))
  core.trap_signals()
  local running, nrun = {}, 0
  local t0 = core.now()
  local next_i, done = 1, 0
  local tty = not opts.quiet and core.isatty(2)
  local function status_line()
    if not tty then return end
    local names = {}
    for _, r in pairs(running) do names[#names + 1] = "#" .. r.pt.index end
    table.sort(names)
    local el = core.now() - t0
    local eta = done > 0 and fmt_time(el / done * (#todo - done)) or "--:--"
    io.stderr:write(("\r[%d/%d] running %s  elapsed %s  ETA %s\27[K"):format(done, #todo,
      table.concat(names, " "), fmt_time(el), eta))
    io.stderr:flush()
  end
  local function clear()
    if tty then io.stderr:write("\r\27[K"); io.stderr:flush() end
  end
  local function finish(r, how, code)
    running[r.pid] = nil
    nrun = nrun - 1
    done = done + 1
    local secs = core.now() - r.t
    local st = run.status(r.pt.cfg, r.pt.dir)
    clear()
    if how == "exit" and code == 0 and st == "complete" then
      -- the worker says "already complete" when another process (a second sweep of the same
      -- file, whose worker appends to the same log) finished the point while it waited for the
      -- run's lock
      local f = io.open(r.log, "rb")
      local text = ""
      if f then f:seek("set", r.log_at); text = f:read("a") or ""; f:close() end
      if text:find(("point %d: %s already complete (worker %d)"):format(r.pt.index, r.pt.dir,
          r.pid), 1, true) then
        summary.skipped, summary.others = summary.skipped + 1, summary.others + 1
        say(("  [%d/%d] point %d %s -> %s already complete (finished by another process)")
          :format(done, #todo, r.pt.index, r.pt.label, r.pt.dir))
      else
        summary.ran = summary.ran + 1
        say(("  [%d/%d] point %d %s -> %s complete (%.1f s)"):format(done, #todo, r.pt.index,
          r.pt.label, r.pt.dir, secs))
      end
    else
      r.pt.failure = how == "exit" and ("exit status " .. code) or ("signal " .. tostring(code))
      summary.failed[#summary.failed + 1] = r.pt
      say(("  [%d/%d] point %d %s FAILED (%s); log: %s"):format(done, #todo, r.pt.index,
        r.pt.label, r.pt.failure, r.log))
      local t = tail(r.log, 5)
      if t ~= "" then say("      " .. t:gsub("\n", "\n      ")) end
    end
  end
  while true do
    if core.interrupted() then break end
    while nrun < jobs and next_i <= #todo do
      local pt = todo[next_i]
      next_i = next_i + 1
      require("hydra.output").mkdir_p(pt.dir, "sweep")
      local log = pt.dir .. "/worker.log"
      local env = { HYDRA_THREADS = tostring(per), OMP_NUM_THREADS = tostring(per),
                    OPENBLAS_NUM_THREADS = tostring(per) }
      local _, log_at = core.stat(log)             -- the worker appends to its log
      local pid = core.spawn(worker_argv(sw, pt, exe, per), env, log)
      running[pid] = { pid = pid, pt = pt, t = core.now(), log = log, log_at = log_at or 0 }
      summary.started[#summary.started + 1] = pt
      nrun = nrun + 1
    end
    if nrun == 0 then break end
    for pid, r in pairs(running) do
      local how, code = core.wait(pid)
      if how then finish(r, how, code) end
    end
    status_line()
    if nrun > 0 then core.sleep(M.POLL_S) end
  end
  local sig = core.interrupted()
  if sig then
    summary.interrupted = true
    clear()
    say(("sweep: interrupted (signal %d); stopping %d worker%s"):format(sig, nrun,
      nrun == 1 and "" or "s"))
    for pid in pairs(running) do core.kill(pid, "TERM") end
    local deadline = core.now() + M.KILL_GRACE_S
    while nrun > 0 do
      for pid, r in pairs(running) do
        local how = core.wait(pid)
        if how then running[pid] = nil; nrun = nrun - 1; r.pt.failure = "stopped" end
      end
      if nrun > 0 and core.now() > deadline then
        for pid in pairs(running) do core.kill(pid, "KILL") end
        for pid in pairs(running) do core.wait(pid, true); running[pid] = nil end
        nrun = 0
      end
      if nrun > 0 then core.sleep(M.POLL_S) end
    end
  end
  clear()
  -- the signals kill again: work the caller does after the sweep (an experiment's own stages,
  -- its report) stops at SIGINT / SIGTERM instead of swallowing them
  core.trap_signals(false)
  local counts = M.status(sw)
  summary.complete = counts.complete
  summary.seconds = core.now() - t0
  return summary
end

return M
