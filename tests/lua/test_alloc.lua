-- tests/lua/test_alloc.lua: allocation-failure injection (CONVENTIONS §3.8, Lua's countlimit,
-- SQLite's OOM tests). Under HY_DEBUG builds (make MODE=asan) HYDRA_FAIL_ALLOC=N makes the Nth
-- hy_x* allocation fail. A child `hydra run` builds a model, saves a checkpoint and loads it
-- back; for N swept over that work every run must end in a clean Lua error: exit status 1, an
-- "out of memory" message, no sanitizer report (leaks included: LeakSanitizer runs at exit), no
-- half-written checkpoint. Skipped (with a note on stderr) when the binary is not a debug build.
local check = require("check")
local core = require("hydra.core")

local T = {}

-- The child: prints the allocation count at each phase boundary, so the parent knows which N
-- falls where. Threads are pinned to 1 by the parent, so the count is deterministic.
local CHILD = [[
local hydra = require("hydra")
local core = require("hydra.core")
local dir = arg[1]
local cfg = hydra.config.load("configs/data/tiny.yaml", { ["data.dir"] = dir })
local c0 = core.alloc_count()
local m = hydra.model.new(cfg, 3)
local c1 = core.alloc_count()
m:save(dir .. "/m.h5", { seed = 3, note = "x" })
local c2 = core.alloc_count()
local m2 = hydra.model.load(dir .. "/m.h5")
assert(m2:params_count() == m:params_count() and m2.meta.note == "x", "round trip")
local g = m2:gates()
assert(g:size(1) == cfg.model.depth and g:get(1, 1) == 1.0, "gates")
print(("debug %s phases %d %d %d %d"):format(tostring(core.debug), c0, c1, c2,
  core.alloc_count()))
]]

local function exe()
  return os.getenv("HYDRA") or "./hydra"
end

local function slurp(path)
  local s = check.read_file(path) or ""
  os.remove(path)
  return s
end

-- Runs the child in dir with HYDRA_FAIL_ALLOC=n (nil: no injection); returns status, out, err.
local function run_child(script, dir, n)
  local out, errf = dir .. "/stdout", dir .. "/stderr"
  local cmd = ("env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HYDRA_THREADS=1 %s %s run %s %s "
    .. ">%s 2>%s"):format(n and ("HYDRA_FAIL_ALLOC=" .. n) or "", exe(), script, dir, out, errf)
  local _, _, code = os.execute(cmd)
  return code, slurp(out), slurp(errf)
end

-- Names in dir (sorted), without the child's stdout/stderr captures.
local function files_in(dir)
  return table.concat(core.listdir(dir), " ")
end

local function clear(dir)
  for _, f in ipairs(core.listdir(dir)) do os.remove(dir .. "/" .. f) end
end

-- The N to try: every allocation of the (short) model build, then an evenly spaced sample of
-- save and load starting at a seed-dependent offset (HYDRA_SEED), ~`budget` runs in all.
local function pick(c0, c1, c3, budget, seed)
  local ns = {}
  for n = c0 + 1, c1 do ns[#ns + 1] = n end
  local span = c3 - c1
  local step = math.max(1, span // math.max(1, budget - #ns))
  for n = c1 + 1 + seed % step, c3, step do ns[#ns + 1] = n end
  ns[#ns + 1] = c3                                  -- the very last allocation
  return ns
end

function T.model_build_save_load_fail_cleanly()
  local dir = check.tmpdir()
  local script = dir .. "/child.lua"
  check.write_file(script, CHILD)
  local work = check.tmpdir()
  local code, out, err = run_child(script, work, nil)
  check.eq(code, 0, "child without injection: " .. err)
  local dbg, c0, c1, c2, c3 = out:match("debug (%a+) phases (%d+) (%d+) (%d+) (%d+)")
  check.ok(dbg, "child output: " .. out)
  if dbg ~= "true" then
    check.skip("not a HY_DEBUG build; use make MODE=asan")
  end
  c0, c1, c2, c3 = tonumber(c0), tonumber(c1), tonumber(c2), tonumber(c3)
  check.ok(c0 < c1 and c1 < c2 and c2 < c3, ("phases %d %d %d %d"):format(c0, c1, c2, c3))
  local seed = math.tointeger(tonumber(os.getenv("HYDRA_SEED") or "0")) or 0
  local ns = pick(c0, c1, c3, 90, seed)
  for _, n in ipairs(ns) do
    clear(work)
    code, out, err = run_child(script, work, n)
    local where = ("HYDRA_FAIL_ALLOC=%d (build %d..%d, save ..%d, load ..%d; seed %d)")
      :format(n, c0 + 1, c1, c2, c3, seed)
    check.ok(not err:find("Sanitizer", 1, true) and not err:find("runtime error", 1, true)
      and not err:find("internal error", 1, true), where .. ": sanitizer report\n" .. err)
    check.eq(code, 1, where .. ": exit status (stderr: " .. err .. ")")
    check.ok(err:find("out of memory", 1, true), where .. ": not an out-of-memory error: " .. err)
    -- a failed save leaves nothing behind (no m.h5, no temporary file)
    local want = n <= c2 and "" or "m.h5"
    check.eq(files_in(work), want, where .. ": files left")
  end
end

return T
