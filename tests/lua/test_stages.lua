-- tests/lua/test_stages.lua: hydra.stages (canonical keys, the cache, flock locks with waiting
-- and takeover of locks nobody holds, across processes) and the l_proc.c helpers.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local stages = hydra.stages
local eq, ok, raises = check.eq, check.ok, check.raises

local T = {}

local function exe() return os.getenv("HYDRA") or "./hydra" end

local function quiet_cache(dir)
  local lines = {}
  local c = stages.new({ dir = dir, poll = 0.02, log = function(l) lines[#lines + 1] = l end })
  return c, lines
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A pid that has certainly exited.
local function dead_pid()
  local p = io.popen("sh -c 'echo $$'")
  local pid = math.tointeger(tonumber(p:read("l")))
  p:close()
  return pid
end

function T.serialize_is_canonical()
  local a = stages.serialize({ b = { 1, 2, "x" }, a = 1, c = { z = true, y = false } })
  local b = stages.serialize({ c = { y = false, z = true }, a = 1, b = { 1, 2, "x" } })
  eq(a, b, "key order does not matter")
  eq(a, '{"a"=i1,"b"=[i1,i2,"x"],"c"={"y"=false,"z"=true}}', "text")
  ok(stages.serialize({ x = 1 }) ~= stages.serialize({ x = 1.0 }), "integer vs float differ")
  eq(stages.serialize({ x = 0.1 }), '{"x"=f0.10000000000000001}', "floats exact")
  eq(stages.serialize({}), "{}", "empty table")
  raises("stages.serialize: cannot serialise a function", function()
    return stages.serialize({ f = print })
  end)
end

function T.key_depends_on_every_input()
  local base = { model = { d = 64, heads = 8 }, seed = 0, data = "recipe:abc" }
  local k = stages.key("base", base)
  eq(#k, 16, "16 hex digits")
  ok(k:match("^%x+$"), "hex")
  eq(stages.key("base", { seed = 0, data = "recipe:abc", model = { heads = 8, d = 64 } }), k,
    "same inputs, same key")
  ok(stages.key("gates", base) ~= k, "name is part of the key")
  ok(stages.key("base", { model = { d = 64, heads = 8 }, seed = 1, data = "recipe:abc" }) ~= k,
    "seed is part of the key")
  ok(stages.key("base", { model = { d = 64, heads = 4 }, seed = 0, data = "recipe:abc" }) ~= k,
    "nested config is part of the key")
  local salt = stages.SALT
  stages.SALT = salt .. "-next"
  local k2 = stages.key("base", base)
  stages.SALT = salt
  ok(k2 ~= k, "the code-version salt is part of the key")
  raises("stages.key: stage name must be letters, digits, '_' or '-', got a/b", function()
    return stages.key("a/b", {})
  end)
end

function T.key_is_stable_across_processes()
  local dir = check.tmpdir()
  write(dir .. "/k.lua", [[
local stages = require("hydra").stages
io.write(stages.key("preds", { m = { 1, 2.5, "x" }, s = { a = true } }))
]])
  local code, out = check.hydra("run " .. dir .. "/k.lua")
  eq(code, 0, "exit status")
  eq(out, stages.key("preds", { s = { a = true }, m = { 1, 2.5, "x" } }), "same key in a child")
end

function T.cache_miss_then_hit()
  local dir = check.tmpdir()
  local c, lines = quiet_cache(dir)
  local calls = 0
  local function build(tmp, key)
    calls = calls + 1
    ok(tmp:find(dir, 1, true) == 1, "tmp is inside the cache")
    write(tmp, "product " .. key)
  end
  local p1, k1, hit1 = c:get("thing", { a = 1 }, build, { ext = ".txt" })
  eq(hit1, false, "first get builds")
  eq(p1, ("%s/thing/%s.txt"):format(dir, k1), "product path")
  eq(check.read_file(p1), "product " .. k1, "product content")
  local p2, k2, hit2 = c:get("thing", { a = 1 }, build, { ext = ".txt" })
  eq(hit2, true, "second get hits")
  eq(p2, p1, "same path")
  eq(k2, k1, "same key")
  eq(calls, 1, "built once")
  eq(c.hits, 1, "hits")
  eq(c.built, 1, "built")
  eq(lines[1], ("stage thing %s: cache miss, building"):format(k1), "miss line")
  ok(lines[2]:match("^stage thing %x+: built in [%d%.]+ s$"), "built line: " .. lines[2])
  eq(lines[3], ("stage thing %s: cache hit"):format(k1), "hit line")
  ok(check.read_file(("%s/thing/%s.inputs"):format(dir, k1)):find('{"a"=i1}', 1, true),
    "inputs written beside the product")
  eq(core.stat(p1 .. ".lock"), nil, "lock released")
  local _, k3 = c:get("thing", { a = 2 }, build, { ext = ".txt" })
  ok(k3 ~= k1, "other inputs, other product")
  eq(calls, 2, "built again for other inputs")
end

function T.failed_build_leaves_nothing()
  local dir = check.tmpdir()
  local c = quiet_cache(dir)
  local key = stages.key("bad", { x = 1 })
  local ok_, e = pcall(c.get, c, "bad", { x = 1 }, function(tmp)
    write(tmp, "half")
    error("boom", 0)
  end)
  eq(ok_, false, "error propagates")
  eq(e, "boom", "the build's error")
  eq(core.stat(c:path("bad", key)), nil, "no product")
  eq(core.stat(c:path("bad", key) .. ".lock"), nil, "lock released")
  for _, f in ipairs(core.listdir(dir .. "/bad")) do
    ok(not f:find("tmp", 1, true), "temporary removed: " .. f)
  end
  raises(("stages: stage bad wrote no product (expected '%s/bad/%s.tmp-%d.h5')"):format(dir, key,
    core.getpid()), function() return c:get("bad", { x = 1 }, function() end) end)
  -- a later build succeeds
  local _, _, hit = c:get("bad", { x = 1 }, function(tmp) write(tmp, "good") end)
  eq(hit, false, "rebuilt")
end

function T.stale_lock_is_taken_over()
  local dir = check.tmpdir()
  local c, lines = quiet_cache(dir)
  local key = stages.key("s", { v = 1 })
  core.mkdir_p(dir .. "/s")
  local lock = c:path("s", key) .. ".lock"
  local pid = dead_pid()
  ok(not core.pid_alive(pid), "the pid is dead")
  write(lock, ("%d %s\n"):format(pid, core.hostname()))
  local _, _, hit = c:get("s", { v = 1 }, function(tmp) write(tmp, "x") end)
  eq(hit, false, "built after taking the lock over")
  local found = false
  for _, l in ipairs(lines) do
    if l:find("taking over stale lock", 1, true) and l:find(tostring(pid), 1, true) then
      found = true
    end
  end
  ok(found, "takeover logged")
  eq(core.stat(lock), nil, "lock released")
end

function T.empty_old_lock_is_taken()
  local dir = check.tmpdir()
  local c = quiet_cache(dir)
  local key = stages.key("e", {})
  core.mkdir_p(dir .. "/e")
  write(c:path("e", key) .. ".lock", "")
  local ok_, e = pcall(c.get, c, "e", {}, function(tmp) write(tmp, "x") end)
  ok(ok_, tostring(e))
end

-- A lock left by a worker killed on another node of the cluster (its record names another
-- host, whose pid cannot be checked from here) is taken at once: the lock is the kernel's
-- flock, which nobody holds any more, whatever the record says.
function T.lock_of_a_dead_worker_on_another_host_is_taken()
  local dir = check.tmpdir()
  local lock = dir .. "/x.lock"
  write(lock, ("1 another-node-%d 12345 00000000-0000-0000-0000-000000000000\n"):format(
    core.getpid()))
  local lines, polls = {}, 0
  local got = stages.acquire(lock, { poll = 0.01, log = function(l) lines[#lines + 1] = l end,
    done = function() polls = polls + 1; return polls > 3 end })
  eq(got, true, "taken without waiting")
  ok((lines[1] or ""):find("taking over stale lock " .. lock .. " (1 another-node-", 1, true),
    "logged: " .. tostring(lines[1]))
  eq(check.read_file(lock), stages.owner_text(), "our record written")
  stages.release(lock)
  eq(core.stat(lock), nil, "released")
end

-- A holder killed by SIGKILL (a Slurm time limit, scancel after KillWait) releases its lock with
-- its death; until then the lock is waited on.
function T.lock_of_a_killed_holder_is_free()
  local dir = check.tmpdir()
  local lock = dir .. "/k.lock"
  local ready = dir .. "/ready"
  write(dir .. "/holder.lua", ([[
local stages = require("hydra").stages
stages.acquire(%q)
local f = io.open(%q, "w"); f:close()
require("hydra.core").sleep(60)
]]):format(lock, ready))
  local pid = core.spawn({ core.exe(), "run", dir .. "/holder.lua" })
  local t0 = core.now()
  while core.stat(ready) ~= "file" and core.now() - t0 < 20 do core.sleep(0.02) end
  ok(core.stat(ready) == "file", "holder started")
  local lines, polls = {}, 0
  local got = stages.acquire(lock, { poll = 0.01, log = function(l) lines[#lines + 1] = l end,
    done = function() polls = polls + 1; return polls > 5 end })
  eq(got, false, "a live holder's lock is waited on")
  ok((lines[1] or ""):find(("waiting for pid %d ("):format(pid), 1, true),
    "wait line: " .. tostring(lines[1]))
  core.kill(pid, "KILL")
  core.wait(pid, true)
  lines = {}
  eq(stages.acquire(lock, { poll = 0.01, log = function(l) lines[#lines + 1] = l end }), true,
    "free once its holder is dead")
  ok((lines[1] or ""):find(("taking over stale lock %s (%d "):format(lock, pid), 1, true),
    "takeover logged: " .. tostring(lines[1]))
  stages.release(lock)
end

-- A second process holding the lock: the caller waits, then takes its product without building.
function T.waits_for_a_live_owner()
  local dir = check.tmpdir()
  local key = stages.key("w", { n = 3 })
  local ready = dir .. "/ready"
  write(dir .. "/owner.lua", ([[
local stages = require("hydra").stages
local core = require("hydra.core")
local c = stages.new({ dir = %q, log = function() end })
c:get("w", { n = 3 }, function(tmp)
  local f = io.open(%q, "w"); f:write("locked"); f:close()
  core.sleep(0.8)
  f = io.open(tmp, "w"); f:write("from owner"); f:close()
end)
]]):format(dir, ready))
  os.execute(("%s run %s/owner.lua >/dev/null 2>&1 &"):format(exe(), dir))
  local t0 = core.now()
  while core.stat(ready) ~= "file" and core.now() - t0 < 20 do core.sleep(0.02) end
  ok(core.stat(ready) == "file", "owner started")
  local c, lines = quiet_cache(dir)
  local path, k, hit = c:get("w", { n = 3 }, function() error("must not build", 0) end)
  eq(k, key, "key")
  eq(hit, true, "product of the other process")
  eq(check.read_file(path), "from owner", "its content")
  ok(lines[1]:match("^stage w %x+: waiting for pid %d+ %(.+%) to finish %(lock .+%)$"), "wait line: "
    .. tostring(lines[1]))
  eq(lines[#lines], ("stage w %s: cache hit (built by another process)"):format(key), "hit line")
end

-- Two processes race for the same stage: exactly one builds it.
function T.concurrent_workers_build_once()
  local dir = check.tmpdir()
  local count = dir .. "/builds"
  local go = dir .. "/go"
  write(dir .. "/worker.lua", ([[
local stages = require("hydra").stages
local core = require("hydra.core")
while core.stat(%q) ~= "file" do core.sleep(0.01) end
local c = stages.new({ dir = %q, poll = 0.02, log = function() end })
c:get("race", { same = true }, function(tmp)
  local f = io.open(%q, "a"); f:write("built\n"); f:close()
  core.sleep(0.3)
  f = io.open(tmp, "w"); f:write("p"); f:close()
end)
local f = io.open(%q .. "/done-" .. core.getpid(), "w"); f:close()
]]):format(go, dir, count, dir))
  for _ = 1, 3 do
    os.execute(("%s run %s/worker.lua >/dev/null 2>&1 &"):format(exe(), dir))
  end
  write(go, "")
  local t0 = core.now()
  local function done()
    local n = 0
    for _, f in ipairs(core.listdir(dir)) do if f:match("^done%-") then n = n + 1 end end
    return n
  end
  while done() < 3 and core.now() - t0 < 30 do core.sleep(0.05) end
  eq(done(), 3, "every worker finished")
  eq(check.read_file(count), "built\n", "built exactly once")
end

function T.with_lock_releases_on_error()
  local dir = check.tmpdir()
  local lock = dir .. "/x.lock"
  local ok_, e = pcall(stages.with_lock, lock, function() error("inner", 0) end)
  eq(ok_, false, "raised")
  eq(e, "inner", "error")
  eq(core.stat(lock), nil, "released")
  eq(stages.with_lock(lock, function() return 42 end), 42, "result passed through")
  ok(stages.acquire(lock), "acquired")
  raises(("stages: lock '%s' is already held by this process"):format(lock), function()
    return stages.acquire(lock)
  end)
  stages.release(lock)
  eq(core.stat(lock), nil, "released")
end

function T.data_hash_prefers_the_recipe_hash()
  local dir = check.tmpdir()
  local f <close> = hydra.h5.create(dir .. "/a.h5")
  f:set_attr("/meta", "recipe_sha256", "abc123")
  f:commit()
  eq(stages.data_hash(dir .. "/a.h5"), "recipe:abc123", "recipe hash")
  write(dir .. "/b.bin", "hello")
  eq(stages.data_hash(dir .. "/b.bin"),
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "file sha256")
  raises(("stages: data file '%s/none.h5' not found"):format(dir), function()
    return stages.data_hash(dir .. "/none.h5")
  end)
end

function T.proc_helpers()
  local dir = check.tmpdir()
  local p = dir .. "/l"
  local l1, old = core.flock_open(p, "1 h\n")
  ok(l1, "locked")
  eq(old, "", "a new lock file is empty")
  local got, why = core.flock_open(p, "2 h\n")
  eq(got, false, "exclusive")
  eq(why, "busy", "reason")
  eq(check.read_file(p), "1 h\n", "content kept")
  l1:close()
  local l2, prev = core.flock_open(p, "2 h\n")
  ok(l2, "free once closed")
  eq(prev, "1 h\n", "the earlier record returned")
  l2:close()
  local l3, why3 = core.flock_open(p .. "/no/such", "x")
  eq(l3, false, "no folder")
  ok(why3:find("cannot open lock", 1, true), why3)
  eq(core.pid_alive(core.getpid()), true, "self alive")
  eq(core.pid_alive(dead_pid()), false, "dead pid")
  local t0 = core.now()
  core.sleep(0.05)
  ok(core.now() - t0 >= 0.045, "slept")
  ok(#core.hostname() > 0, "hostname")
  raises("bad argument #1 to 'sleep' (seconds must be in [0, 3600])", function()
    return core.sleep(-1)
  end)
end

return T
