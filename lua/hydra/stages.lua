-- lua/hydra/stages.lua: the stage cache. Every expensive product (base model, head scores and
-- gates, fine-tuned members, fused model, predictions) is a file named by the hash of everything
-- that determines it, shared by all runs, methods and worker processes: a sweep never computes
-- the same stage twice.
--
--   local stages = require("hydra").stages
--   local cache = stages.new({ dir = ".cache/stages", log = function(line) ... end })
--   local path, key, hit = cache:get("base", inputs, function(tmp, key)
--     ... write the product to tmp (any writer; it is renamed into place afterwards) ...
--   end [, { ext = ".h5" }])
--
-- Keys: stages.key(name, inputs) = the first 16 hex digits of the SHA-256 of
--   SALT .. "\n" .. name .. "\n" .. stages.serialize(inputs)
-- inputs is a Lua value (tables, strings, numbers, booleans): the config subset that affects the
-- stage, the keys of its input stages and the hashes of the data files (stages.data_hash). The
-- serialisation is canonical (sorted map keys, integers and floats told apart, floats in %.17g),
-- so equal inputs give equal keys across processes. SALT names the code version: bump it when
-- a change to training, pruning, fusing or prediction makes old products wrong.
--
-- Files: <dir>/<name>/<key><ext> (ext ".h5" by default) and <key>.inputs (the serialised inputs,
-- for inspection). A stage is complete iff its product exists; products are written to a
-- temporary name in the same folder and renamed into place, so a killed build leaves no product.
--
-- Concurrency: before building, a worker takes an exclusive flock(2) on <key><ext>.lock (created
-- when missing) and writes "<pid> <host> <start> <boot-id>" into it (start: field 22 of
-- /proc/<pid>/stat; boot-id: /proc/sys/kernel/random/boot_id); the record only names the owner
-- in messages. Another worker needing the same stage waits (polling) until the product appears
-- or it gets the lock. The lock is the kernel's, not the file's: it is released when its holder
-- releases it, exits or is killed (SIGKILL, a Slurm time limit), so there is no stale lock to
-- guess at, on this host or another: a lock file nobody holds (left by a killed worker, or by an
-- older hydra that used O_EXCL records) is simply taken, and logged as taken over. Filesystems
-- (configs/sweeps/README.md "Locks"): local ones; NFSv3 (with lockd, not mounted nolock or
-- local_lock=flock|all) and NFSv4, where the client sends flock as a whole-file lock to the
-- server, and a dead node's locks go when its lease expires (NFSv4, ~90 s) or it reboots
-- (NFSv3); Lustre mounted with -o flock (with localflock two nodes may build one stage at
-- once: products are still renamed into place whole, so only work is duplicated; with noflock
-- the lock fails with an error naming it).
-- While holding a stage's lock, the temporary files of earlier builders of the same key (killed
-- ones: "<key>.tmp-<pid><ext>" of a build and ".<key>.tmp-<pid><ext>.tmp-<pid>-<n>" of its HDF5
-- commit, and ".<key>.work.h5.tmp-<pid>-<n>" of a work file's) are removed: only the lock holder
-- writes them, so any not of this process is stale. A training stage (base models,
-- BatchEnsemble, Packed-Ensembles members, MIMO, the pretraining) keeps "<key>.work.h5" beside
-- its product after every epoch: a build interrupted by a kill resumes after the last finished
-- epoch and ends bitwise as an uninterrupted one (model.lua, train opts.work); it is removed
-- when its training ends.
-- stages.with_lock(path, fn, opts) exposes the same lock for other uses (runs).
--
-- Directory: opts.dir, else $HYDRA_CACHE_DIR, else <HYDRA_HOME>/.cache/stages (git-ignored).
--
-- Logging: every lookup logs one line through opts.log (default: stderr):
--   "stage base 0123456789abcdef: cache hit"
--   "stage base 0123456789abcdef: cache miss, building"  then  "...: built in 12.3 s"
--   "stage base 0123456789abcdef: waiting for pid 1234 (host) to build it"
-- cache.records lists { name, key, status = "hit" | "built", seconds, path } in order;
-- cache.hits and cache.built count them.
--
-- Checks: a product is named by its inputs' hash, but the file under that name may not be
-- what the inputs describe (copied in by hand, or written by other code). cache:get's
-- opts.check(path) is called on every product before it is returned (a hit, or one just
-- built); it returns nil, or a text saying what disagrees ("/gates holds 2 members, the config
-- asks for 3"), and then the stage is refused: "stage gates 0123456789abcdef: the cached
-- product '<path>' does not match this run: <text> (delete it to rebuild it)".
local core = require("hydra.core")
local err = require("hydra.err")
local output = require("hydra.output")

local M = {}

M.SALT = "hydra-stages-1"

local Cache = {}
Cache.__index = Cache
M.Cache = Cache

local function env(name)
  local v = os.getenv(name)
  if v == "" then return nil end
  return v
end

function M.default_dir()
  return env("HYDRA_CACHE_DIR") or ((rawget(_G, "HYDRA_HOME") or ".") .. "/.cache/stages")
end

-- ===== keys =====

local function ser(v, out, seen)
  local t = type(v)
  if t == "nil" then
    out[#out + 1] = "~"
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif t == "number" then
    if math.type(v) == "integer" then
      out[#out + 1] = ("i%d"):format(v)
    elseif v ~= v then
      out[#out + 1] = "fnan"
    else
      out[#out + 1] = ("f%.17g"):format(v)
    end
  elseif t == "string" then
    out[#out + 1] = ("%q"):format(v)
  elseif t == "table" then
    if seen[v] then error("stages.serialize: cyclic table", 3) end
    seen[v] = true
    local n = #v
    local keys, count = {}, 0
    for k in pairs(v) do
      count = count + 1
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then
        if type(k) ~= "string" then
          error(("stages.serialize: table key of type %s (use strings)"):format(type(k)), 3)
        end
        keys[#keys + 1] = k
      end
    end
    if n > 0 and count == n then
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        ser(v[i], out, seen)
      end
      out[#out + 1] = "]"
    else
      if n > 0 then
        for i = 1, n do keys[#keys + 1] = tostring(i) end
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = ("%q="):format(k)
        local val = v[k]
        if val == nil then val = v[math.tointeger(tonumber(k))] end
        ser(val, out, seen)
      end
      out[#out + 1] = "}"
    end
    seen[v] = nil
  else
    error(("stages.serialize: cannot serialise a %s"):format(t), 3)
  end
end

-- Canonical text of a Lua value (see the header).
function M.serialize(v)
  local out = {}
  ser(v, out, {})
  return table.concat(out)
end

function M.key(name, inputs)
  if type(name) ~= "string" or not name:match("^[%w_%-]+$") then
    error(("stages.key: stage name must be letters, digits, '_' or '-', got %s"):format(
      tostring(name)), 2)
  end
  return core.hash_string(M.SALT .. "\n" .. name .. "\n" .. M.serialize(inputs), "sha256")
    :sub(1, 16)
end

-- Identity of a data file: its /meta recipe_sha256 (prepared datasets: the hash of the recipe,
-- its options and its inputs' checksums), else the SHA-256 of the file. Memoised per path, size
-- and modification time.
local data_memo = {}
function M.data_hash(path)
  local kind, size, mtime = core.stat(path)
  if kind ~= "file" then err.fail("stages: data file '%s' not found", path) end
  local memo_key = ("%s\0%d\0%d"):format(path, size, mtime or 0)
  local h = data_memo[memo_key]
  if h then return h end
  local ok, meta = pcall(function()
    local h5 = require("hydra.h5")
    local f <close> = h5.open(path)
    return f:exists("/meta") and f:attrs("/meta") or {}
  end)
  if ok and type(meta.recipe_sha256) == "string" and meta.recipe_sha256 ~= "" then
    h = "recipe:" .. meta.recipe_sha256
  else
    h = "sha256:" .. core.hash_file(path, "sha256")
  end
  data_memo[memo_key] = h
  return h
end

-- ===== locks =====

local held = {}   -- lock paths this process holds

local read_all = require("hydra.fs").read_file

-- Start time of process pid (field 22 of /proc/<pid>/stat, clock ticks after boot) as text, nil
-- without /proc or without such a process. The name (field 2) may hold spaces and ')'.
function M.proc_start(pid)
  local s = read_all("/proc/" .. pid .. "/stat")
  local rest = s and s:match("^.*%)%s+(.*)$")
  if not rest then return nil end
  local i = 2
  for field in rest:gmatch("%S+") do
    i = i + 1
    if i == 22 then return field end
  end
  return nil
end

local boot_id_memo
function M.boot_id()
  if boot_id_memo == nil then
    local s = read_all("/proc/sys/kernel/random/boot_id")
    boot_id_memo = s and s:match("^%s*(%S+)") or false
  end
  return boot_id_memo or nil
end

-- The text of this process's locks: "<pid> <host> <start> <boot-id>\n" (the last two "-" when
-- /proc does not tell).
local function my_owner()
  local pid = core.getpid()
  return ("%d %s %s %s\n"):format(pid, core.hostname(), M.proc_start(pid) or "-",
    M.boot_id() or "-")
end
M.owner_text = my_owner

-- Owner of a lock: { pid, host, start, boot } (nil when empty / unparsable), raw text (nil: no
-- lock file). start and boot are nil in a lock written without them.
local function lock_owner(path)
  local s = read_all(path)
  if s == nil then return nil, nil end
  local pid, host, start, boot = s:match("^(%d+) (%S+) ?(%S*) ?(%S*)")
  pid = math.tointeger(tonumber(pid))
  if not pid then return nil, s end
  local function opt(x) return (x ~= "" and x ~= "-") and x or nil end
  return { pid = pid, host = host, start = opt(start), boot = opt(boot) }, s
end

-- Acquires the lock file `path`. opts.done(): a probe called while waiting; when it returns true
-- the wait ends without the lock (returns false). opts.log(line), opts.poll (s, default 0.2),
-- opts.what (text for the waiting line). Returns true when the lock is held.
function M.acquire(path, opts)
  opts = opts or {}
  if held[path] then
    error(("stages: lock '%s' is already held by this process"):format(path), 2)
  end
  local poll = opts.poll or 0.2
  local announced = false
  while true do
    if opts.done and opts.done() then return false end
    local lock, why = core.flock_open(path, my_owner())
    if lock then
      held[path] = lock
      local before = why   -- the record of a holder that died without releasing, or ""
      if before:match("%S") and opts.log then
        opts.log(("taking over stale lock %s (%s: no process holds it)"):format(path,
          (before:gsub("%s+$", ""))))
      end
      return true
    end
    if why == "busy" then
      if not announced and opts.log then
        local o = lock_owner(path)
        opts.log(("%swaiting for pid %s (%s) to finish (lock %s)"):format(
          opts.what and (opts.what .. ": ") or "", tostring(o and o.pid or "?"),
          tostring(o and o.host or "?"), path))
        announced = true
      end
      core.sleep(poll)
    elseif why ~= "moved" then
      err.fail("stages: %s", why)
    end
  end
end

-- Releases a lock taken by acquire: removes the file while still holding it (a waiter that
-- opened the old file then sees it "moved" and opens the new one), then drops the lock.
function M.release(path)
  local lock = held[path]
  if lock then
    held[path] = nil
    os.remove(path)
    lock:close()
  end
end

-- Runs fn() holding the lock at path (released on return and on error); returns fn's results.
function M.with_lock(path, fn, opts)
  M.acquire(path, opts)
  local res = table.pack(pcall(fn))
  M.release(path)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- ===== the cache =====

function M.new(opts)
  opts = opts or {}
  local self = setmetatable({
    dir = opts.dir or M.default_dir(),
    log = opts.log or function(line) io.stderr:write(line, "\n") end,
    poll = opts.poll or 0.2,
    records = {}, hits = 0, built = 0,
  }, Cache)
  return self
end

function Cache:path(name, key, ext)
  return ("%s/%s/%s%s"):format(self.dir, name, key, ext or ".h5")
end

local function exists(path)
  return core.stat(path) == "file"
end

local function record(self, name, key, status, seconds, path)
  self.records[#self.records + 1] = { name = name, key = key, status = status,
                                      seconds = seconds, path = path }
  if status == "hit" then self.hits = self.hits + 1 else self.built = self.built + 1 end
end

-- Removes the temporary files left in dir/name by killed builders of key (the caller holds the
-- key's lock); see the file header.
local function clean_temps(self, name, key)
  local dir = self.dir .. "/" .. name
  local ok, names = pcall(core.listdir, dir)
  if not ok then return end
  local me = core.getpid()
  for _, f in ipairs(names) do
    local rest = f:sub(1, #key) == key and f:sub(#key + 1)
      or (f:sub(1, #key + 1) == "." .. key and f:sub(#key + 2))
    local pid = rest and math.tointeger(tonumber(rest:match("^%.tmp%-(%d+)")
      or rest:match("^%.work%.h5%.tmp%-(%d+)")))
    if pid and pid ~= me then
      os.remove(dir .. "/" .. f)
      self.log(("stage %s %s: removed the temporary file %s of an interrupted build"):format(name,
        key, f))
    end
  end
end

-- opts.check(path) -> nil | text (see the header): refuses a product that disagrees with the run
local function checked(tag, path, check)
  if not check then return end
  local ok, why = pcall(check, path)
  if not ok then why = err.message(why) end
  if why then
    err.fail("%s: the cached product '%s' does not match this run: %s (delete it to rebuild it)",
      tag, path, why)
  end
end

-- The product of stage `name` for `inputs`, built with build(tmp, key) when missing. Returns
-- path, key, hit (true when it was already there or another process built it).
-- opts.ext: the product's file extension (".h5"); opts.check: see the header.
function Cache:get(name, inputs, build, opts)
  opts = opts or {}
  local key = M.key(name, inputs)
  local ext = opts.ext or ".h5"
  local path = self:path(name, key, ext)
  local tag = ("stage %s %s"):format(name, key)
  if exists(path) then
    checked(tag, path, opts.check)
    self.log(tag .. ": cache hit")
    record(self, name, key, "hit", 0, path)
    return path, key, true
  end
  output.mkdir_p(self.dir .. "/" .. name, "stages")
  local lock = path .. ".lock"
  local got = M.acquire(lock, { done = function() return exists(path) end, log = self.log,
                                poll = self.poll, what = tag })
  if not got or exists(path) then
    if got then M.release(lock) end
    checked(tag, path, opts.check)
    self.log(tag .. ": cache hit (built by another process)")
    record(self, name, key, "hit", 0, path)
    return path, key, true
  end
  clean_temps(self, name, key)
  self.log(tag .. ": cache miss, building")
  local t0 = core.now()
  local tmp = ("%s/%s/%s.tmp-%d%s"):format(self.dir, name, key, core.getpid(), ext)
  -- the product's inputs, for inspection: written once the product is built, before its rename
  local inputs_file = ("%s/%s/%s.inputs"):format(self.dir, name, key)
  local ok, e = pcall(function()
    build(tmp, key)
    if not exists(tmp) then
      error(("stages: stage %s wrote no product (expected '%s')"):format(name, tmp), 0)
    end
    output.write_text(inputs_file, M.SALT .. "\n" .. name .. "\n" .. M.serialize(inputs) .. "\n",
      "stages")
    local rok, rerr = os.rename(tmp, path)
    if not rok then err.fail("stages: cannot rename '%s' to '%s': %s", tmp, path, rerr) end
  end)
  if not ok then
    os.remove(tmp)
    if not exists(path) then
      os.remove(inputs_file)
      os.remove(self:path(name, key, ".curves.csv"))   -- a failed build's learning curve
    end
    M.release(lock)
    -- a core error ("h5: cannot write ...: no space left on device", "loader: ...") is about the
    -- inputs or the machine, not a bug: one line naming the stage, no traceback. Lua runtime
    -- errors (bugs) keep theirs.
    if type(e) == "string" then
      local msg = e:gsub("^[^:]*%.lua:%d+: ", "")
      if msg ~= e and msg:match("^%l[%w_]*: ") and not msg:match("^bad argument") then
        err.fail("%s: %s", tag, msg)
      end
    end
    error(e, 0)
  end
  M.release(lock)
  checked(tag, path, opts.check)
  local dt = core.now() - t0
  self.log(("%s: built in %.1f s"):format(tag, dt))
  record(self, name, key, "built", dt, path)
  return path, key, false
end

return M
