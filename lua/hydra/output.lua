-- lua/hydra/output.lua: writing output files safely.
--   output.write_text(path, text, who)   writes text atomically: a temporary file beside path
--                                        (".<name>.tmp-<pid>-<n>", the pattern of hydra's HDF5
--                                        files), every write and the close checked, then renamed
--                                        onto path; on any failure the temporary file is removed
--                                        and err.fail says "<who>: cannot write '<path>': <why>"
--                                        (the system's text, e.g. "No space left on device")
--   output.temp_name(path)  -> ".<name>.tmp-<pid>-<n>" beside path (not created)
--   output.remove_stale_temps(path)      removes the ".<name>.tmp-<pid>-<n>" beside path of dead
--                                        processes (write_text and h5.create call it)
--   output.rename(tmp, path, who)        renames tmp onto path (removes tmp on failure)
--   output.png_complete(path) -> true | false, why   the PNG signature and a final IEND chunk
--   output.space_problem(dir) -> text | nil  tries to write 64 KiB in dir; the system's error
--                                        (e.g. "No space left on device"), or nil when it works
--   output.mkdir_p(path, who)            core.mkdir_p as a user error: "<who>: cannot create
--                                        folder '<path>': Not a directory"
--   output.check(outs, ins, who)         before any work: refuses an output that is one of the
--                                        inputs (same file: device and inode, so links and
--                                        ../ spellings count) or another output, an output that
--                                        is a folder, and an output whose folder is missing or
--                                        not writable (a probe file is created and removed).
--                                        outs/ins: lists of { path, what } (what: "--out",
--                                        "CKPT.h5", ...); nil entries are skipped.
--   output.same_file(a, b) -> boolean    a and b are one existing file (device and inode)
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

local counter = 0

local function split(path)
  local dir, base = path:match("^(.*)/([^/]*)$")
  if not dir then return ".", path end
  if dir == "" then dir = "/" end
  return dir, base
end
M.split = split

function M.temp_name(path)
  local dir, base = split(path)
  counter = counter + 1
  return ("%s/.%s.tmp-%d-%d"):format(dir, base, core.getpid(), counter)
end

-- Removes the temporary files ".<name>.tmp-<pid>-<n>" beside path (the pattern of temp_name
-- and of hydra's HDF5 files) whose process is dead: a killed writer's leftovers, removed when
-- the same file is written again. A pid alive on this host keeps its file (it may be writing);
-- the check cannot see other hosts, so two hosts writing one file in a shared folder at the
-- same moment may lose one temporary file (that writer fails, no product is damaged).
function M.remove_stale_temps(path)
  local dir, base = split(path)
  local ok, names = pcall(core.listdir, dir)
  if not ok then return end
  local prefix = "." .. base .. ".tmp-"
  local me = core.getpid()
  for _, f in ipairs(names) do
    if f:sub(1, #prefix) == prefix then
      local pid = math.tointeger(tonumber(f:sub(#prefix + 1):match("^(%d+)%-%d+$")))
      if pid and pid ~= me and not core.pid_alive(pid) then os.remove(dir .. "/" .. f) end
    end
  end
end

-- "No space left on device" from Lua's "<file>: No space left on device" or a bare message
local function why_of(msg)
  msg = tostring(msg or "unknown error")
  return (msg:gsub("^.-: ([^:]+)$", "%1"))
end

function M.rename(tmp, path, who)
  local ok, e = os.rename(tmp, path)
  if not ok then
    os.remove(tmp)
    err.fail("%s: cannot write '%s': %s", who, path, why_of(e))
  end
end

function M.write_text(path, text, who)
  who = who or "hydra"
  if core.stat(path) == "dir" then err.fail("%s: cannot write '%s': it is a folder", who, path) end
  M.remove_stale_temps(path)
  local tmp = M.temp_name(path)
  local f, e = io.open(tmp, "wb")
  if not f then
    local dir = split(path)
    if core.stat(dir) ~= "dir" then
      err.fail("%s: cannot write '%s': folder '%s' does not exist", who, path, dir)
    end
    err.fail("%s: cannot write '%s': %s", who, path, why_of(e))
  end
  local ok, werr = f:write(text)
  if ok then ok, werr = f:flush() end
  local cok, cerr = f:close()
  if ok and not cok then ok, werr = false, cerr end
  if not ok then
    os.remove(tmp)
    err.fail("%s: cannot write '%s': %s", who, path, why_of(werr))
  end
  M.rename(tmp, path, who)
end

function M.mkdir_p(path, who)
  err.wrap(who, core.mkdir_p, path)
  local kind = core.stat(path)
  if kind ~= "dir" then
    err.fail("%s: cannot create folder '%s': it is a %s", who, path,
      kind == "file" and "file" or "special file")
  end
end

local IEND = "\0\0\0\0IEND\174\66\96\130"

function M.png_complete(path)
  local f = io.open(path, "rb")
  if not f then return false, "no file" end
  local head = f:read(8) or ""
  local size = f:seek("end")
  local tail = ""
  if size and size >= 20 then
    f:seek("set", size - 12)
    tail = f:read(12) or ""
  end
  f:close()
  if head ~= "\137PNG\r\n\26\n" then return false, "not a PNG" end
  if tail ~= IEND then return false, ("truncated: no IEND chunk at the end of its %d bytes")
    :format(size or 0) end
  return true
end

function M.space_problem(dir)
  local probe = M.temp_name(dir .. "/probe")
  local f, e = io.open(probe, "wb")
  if not f then return why_of(e) end
  local ok, werr = f:write(("\0"):rep(65536))
  if ok then ok, werr = f:flush() end
  local cok, cerr = f:close()
  os.remove(probe)
  if not ok then return why_of(werr) end
  if not cok then return why_of(cerr) end
  return nil
end

local function identity(path)
  local kind, _, _, dev, ino = core.stat(path)
  if not kind then return nil end
  return kind, dev .. ":" .. ino
end

-- Whether paths a and b name the same existing file (device and inode: links count).
function M.same_file(a, b)
  local ka, ia = identity(a)
  local kb, ib = identity(b)
  return ka ~= nil and ka == kb and ia == ib
end

function M.check(outs, ins, who)
  local seen, out_seen = {}, {}
  for _, i in ipairs(ins or {}) do
    if i and i[1] then
      local kind, id = identity(i[1])
      if kind == "file" then seen[id] = seen[id] or i end
    end
  end
  for _, o in ipairs(outs or {}) do
    if o and o[1] then
      local path, what = o[1], o[2] or "--out"
      local kind, id = identity(path)
      if kind == "dir" then
        err.fail("%s: cannot write %s '%s': it is a folder", who, what, path)
      end
      if kind then
        local other = seen[id]
        if other then
          local same = other[1] == path and "" or (" '" .. other[1] .. "'")
          err.fail("%s: %s '%s' is the input %s%s; refusing to overwrite it (write to another "
            .. "file)", who, what, path, other[2] or "", same)
        end
        if out_seen[id] then
          err.fail("%s: %s and %s are the same file '%s'", who, out_seen[id], what, path)
        end
        out_seen[id] = what
      end
      local dir = split(path)
      if core.stat(dir) ~= "dir" then
        err.fail("%s: cannot write %s '%s': folder '%s' does not exist", who, what, path, dir)
      end
      local probe = M.temp_name(path)
      local f, e = io.open(probe, "wb")
      if not f then
        err.fail("%s: cannot write %s '%s': folder '%s' is not writable (%s)", who, what, path,
          dir, why_of(e))
      end
      f:close()
      os.remove(probe)
    end
  end
  -- two outputs that do not exist yet but are the same path
  local names = {}
  for _, o in ipairs(outs or {}) do
    if o and o[1] then
      local key = o[1]:gsub("/+", "/"):gsub("^%./", "")
      if names[key] then
        err.fail("%s: %s and %s are the same file '%s'", who, names[key], o[2] or "--out", o[1])
      end
      names[key] = o[2] or "--out"
    end
  end
end

return M
