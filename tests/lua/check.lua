-- tests/lua/check.lua: assertions for the Lua test suite (tests/lua/run.lua collects tests).
-- A test file returns a table of test functions: `local T = {}; function T.name() ... end; return T`.
local M = {}

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

function M.eq(got, want, what)
  if got ~= want then
    error(("%s: got %s, want %s"):format(what or "eq", fmt(got), fmt(want)), 2)
  end
end

function M.ok(cond, what)
  if not cond then error(what or "check failed", 2) end
end

function M.near(got, want, tol, what)
  if type(got) ~= "number" or math.abs(got - want) > tol then
    error(("%s: got %s, want %s (tol %g)"):format(what or "near", fmt(got), fmt(want), tol), 2)
  end
end

-- Deep equality of tables (for configs).
function M.same(a, b, path)
  path = path or "value"
  if type(a) ~= type(b) then
    error(("%s: type %s vs %s"):format(path, type(a), type(b)), 2)
  end
  if type(a) ~= "table" then
    if a ~= b and not (a ~= a and b ~= b) then
      error(("%s: %s vs %s"):format(path, fmt(a), fmt(b)), 2)
    end
    return
  end
  for k, v in pairs(a) do M.same(v, b[k], path .. "." .. tostring(k)) end
  for k in pairs(b) do
    if a[k] == nil then error(("%s.%s: missing on the left"):format(path, tostring(k)), 2) end
  end
end

-- Ends the current test as skipped (not passed, not failed): run.lua counts and lists it.
local SKIP = {}
function M.skip(reason)
  error(setmetatable({ message = reason }, SKIP), 0)
end
function M.is_skip(e) return getmetatable(e) == SKIP end

-- The message of an error value (hydra error objects carry .message).
local function message(e)
  if type(e) == "table" and e.message then return e.message end
  return tostring(e)
end
M.message = message

-- fn() must raise; the message must equal `want` exactly (after stripping a "file:line: "
-- position prefix added by error()).
function M.raises(want, fn)
  local ok, e = pcall(fn)
  if ok then error(("expected an error %q, got none"):format(want), 2) end
  local msg = message(e):gsub("^[^%s:]+%.lua:%d+: ", "")
  if msg ~= want then
    error(("wrong error\n  got:  %s\n  want: %s"):format(msg, want), 2)
  end
end

-- fn() must raise an error whose message contains `part` (plain text).
function M.raises_has(part, fn)
  local ok, e = pcall(fn)
  if ok then error(("expected an error containing %q, got none"):format(part), 2) end
  if not message(e):find(part, 1, true) then
    error(("wrong error\n  got:  %s\n  want it to contain: %s"):format(message(e), part), 2)
  end
end

-- A fresh temporary folder, removed when the suite ends.
local tmpdirs = {}
function M.tmpdir()
  local p = io.popen("mktemp -d " .. (os.getenv("TMPDIR") or "/tmp") .. "/hydra-lua-XXXXXX")
  local d = p:read("l")
  p:close()
  tmpdirs[#tmpdirs + 1] = d
  return d
end

function M.cleanup()
  for _, d in ipairs(tmpdirs) do os.execute("rm -rf '" .. d .. "'") end
end

-- Runs the hydra executable with a shell command line; returns exit status, stdout, stderr.
function M.hydra(cmdline)
  local exe = os.getenv("HYDRA") or "./hydra"
  local out, errf = os.tmpname(), os.tmpname()
  local _, _, code = os.execute(("%s %s >%s 2>%s"):format(exe, cmdline, out, errf))
  local function slurp(f)
    local h = io.open(f, "rb"); local s = h:read("a"); h:close(); os.remove(f); return s
  end
  return code, slurp(out), slurp(errf)
end

function M.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

M.read_file = require("hydra.fs").read_file

-- The tiny image world of the run tests in a new folder: root/data/tiny.h5 (the ID set, 96 / 32
-- / 40 rows) and root/data/tinyood.h5 (24 OOD test rows), plus `extra` = { name = options of
-- hydra.model.write_synthetic }; returns root (a check.tmpdir) and the data folder.
function M.tiny_world(extra)
  local hydra = require("hydra")
  local root = M.tmpdir()
  local d = root .. "/data"
  require("hydra.core").mkdir_p(d)
  hydra.model.write_synthetic(d .. "/tiny.h5", { train = 96, val = 32, test = 40, seed = 2 })
  hydra.model.write_synthetic(d .. "/tinyood.h5", { train = 8, val = 8, test = 24, seed = 5,
                                                    classes = 3 })
  local names = {}
  for name in pairs(extra or {}) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    hydra.model.write_synthetic(d .. "/" .. name .. ".h5", extra[name])
  end
  return root, d
end

-- A prepared-layout text data file at path (train, val, test splits of sizes[1..3] synthetic
-- sequences from hy_synth_text, lengths in [6, 12], seeds seed + 1..3) with a 40-word vocabulary.
function M.text_file(path, sizes, seed)
  local hydra = require("hydra")
  local core = require("hydra.core")
  local f <close> = hydra.h5.create(path)
  for i, split in ipairs({ "train", "val", "test" }) do
    local ids, lengths, labels = core.synth_text(sizes[i], 12, 40, seed + i)
    f:write("/" .. split .. "/ids", ids)
    f:write("/" .. split .. "/lengths", lengths)
    f:write("/" .. split .. "/labels", labels)
  end
  local words = {}
  for i = 1, 40 do words[i] = ("w%d"):format(i) end
  f:write_strings("/vocab", words)
  f:commit()
end

return M
