-- lua/hydra/h5.lua: HDF5 files (checkpoints, prepared datasets, results) for Lua code.
--
--   local h5 = require("hydra.h5")
--   local f <close> = h5.create("out.h5")       -- written to a temporary name in the same folder
--   f:write("/params/w", tensor); f:write_string("/note", "text"); f:write_strings("/vocab", {...})
--   f:set_attr("/config", "d_model", 128)         -- string, integer, number or array of numbers
--   f:commit()                                    -- renamed into place (else nothing appears)
--   local g <close> = h5.open("out.h5")           -- read-only
--   g:read(name [, dtype]) -> hydra.Tensor;  g:read_string(name);  g:read_strings(name)
--   g:attr(obj, key);  g:attrs(obj) -> {key = value};  g:exists(name);  g:stat(name)
--   g:list(group) -> sorted { {name=, path=, kind="group"|"dataset", dtype=, shape=} ... }
--
-- The handle methods live in C (lua/bind/io/l_h5.c); this module adds the file-level helpers:
-- h5.exists(path), h5.walk(file, fn), h5.read_all(path [, group]) and h5.tree(file, opts), the
-- text `hydra info` prints. Errors are raised as "h5: ..." strings naming the file and object.
local core = require("hydra.core")
local strings = require("hydra.strings")

local M = {}

-- Opens `path` for writing (see the header); raises "h5: cannot create ..." on failure.
function M.create(path)
  if type(path) ~= "string" then
    error(("h5.create: path must be a string, got %s"):format(type(path)), 2)
  end
  require("hydra.output").remove_stale_temps(path)   -- a killed writer's ".<name>.tmp-<pid>-<n>"
  return core.h5_create(path)
end

-- Opens an existing file read-only; raises "h5: cannot open 'x': no such file",
-- "h5: 'x' is not an HDF5 file", ...
function M.open(path)
  if type(path) ~= "string" then
    error(("h5.open: path must be a string, got %s"):format(type(path)), 2)
  end
  return core.h5_open(path)
end

-- True when path names a readable HDF5 file (a probe: never raises).
function M.exists(path)
  return type(path) == "string" and core.h5_is_file(path)
end

-- Calls fn(entry, depth) for every object below `group` (default "/"), depth first, children
-- sorted by name; entry as in f:list. depth is 1 for the group's own children.
function M.walk(f, fn, group)
  local function visit(g, depth)
    for _, e in ipairs(f:list(g)) do
      fn(e, depth)
      if e.kind == "group" then visit(e.path, depth + 1) end
    end
  end
  visit(group or "/", 1)
end

-- Reads every dataset below `group` of the file at `path`: { ["rel/name"] = value }, where value
-- is a hydra.Tensor for numbers, a string for a scalar string, a table of strings for a string
-- array. Names are relative to the group.
function M.read_all(path, group)
  group = group or "/"
  local f <close> = M.open(path)
  local out = {}
  local prefix = group == "/" and "/" or (group:gsub("/+$", "") .. "/")
  if prefix:sub(1, 1) ~= "/" then prefix = "/" .. prefix end
  M.walk(f, function(e)
    if e.kind ~= "dataset" then return end
    local rel = e.path:sub(#prefix + 1)
    if e.dtype == "string" then
      out[rel] = #e.shape == 0 and f:read_string(e.path) or f:read_strings(e.path)
    else
      out[rel] = f:read(e.path)
    end
  end, group)
  return out
end

-- ===== text rendering (hydra info) =====

local function quote(s, max)
  max = max or 80
  local cut = #s > max
  if cut then
    s = s:sub(1, max)
    -- do not split a UTF-8 sequence: drop an incomplete last character
    local i = #s
    while i > 1 and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do i = i - 1 end
    local b = s:byte(i)
    if b and b >= 0xC0 then
      local need = b >= 0xF0 and 4 or b >= 0xE0 and 3 or 2
      if #s - i + 1 < need then s = s:sub(1, i - 1) end
    end
  end
  s = s:gsub('[%c"\\]', function(c)
    if c == "\n" then return "\\n" elseif c == "\t" then return "\\t"
    elseif c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return ("\\x%02x"):format(c:byte())
  end)
  return '"' .. s .. '"' .. (cut and "..." or "")
end

-- A number as written back: integers plainly, floats with the fewest digits that round-trip
-- (in float32 when f32 is true).
local function num(v, f32)
  if math.type(v) == "integer" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
  for p = 6, 17 do
    local s = ("%." .. p .. "g"):format(v)
    local back = tonumber(s)
    if back == v or (f32 and string.pack("f", back) == string.pack("f", v)) then
      if not s:find("[%.eEn]") then s = s .. ".0" end
      return s
    end
  end
  return ("%.17g"):format(v)
end

local function value_str(v, max_items, f32)
  max_items = max_items or 8
  if type(v) == "string" then return quote(v) end
  if type(v) == "number" then return num(v, f32) end
  if type(v) == "table" then
    local parts = {}
    for i = 1, math.min(#v, max_items) do parts[i] = value_str(v[i], max_items, f32) end
    local s = "[" .. table.concat(parts, ", ")
    if #v > max_items then s = s .. (", ... (%d values)"):format(#v) end
    return s .. "]"
  end
  return tostring(v)
end
M.value_str = value_str

local function shape_str(shape)
  local p = {}
  for i, d in ipairs(shape) do p[i] = tostring(d) end
  return "[" .. table.concat(p, ",") .. "]"
end

-- The values of a small dataset as text (opts.data), or nil.
local function data_str(f, e, limit)
  local n = 1
  for _, d in ipairs(e.shape) do n = n * d end
  if n > limit then return nil end
  if e.dtype == "string" then
    if #e.shape == 0 then return quote(f:read_string(e.path)) end
    return value_str(f:read_strings(e.path), limit)
  end
  local ok, t = pcall(f.read, f, e.path, (e.dtype:match("^float") and "float64" or "int64"))
  if not ok then return nil end
  return value_str(t:totable(), limit, e.dtype == "float32")
end

-- The tree `hydra info` prints, as one string: every object (sorted, depth first) with its
-- kind, dtype and shape, its attributes on the lines below it ("  @key = value"), and with
-- opts.data the values of datasets of at most opts.limit (default 20) elements.
function M.tree(f, opts)
  opts = opts or {}
  local limit = opts.limit or 20
  local rows = { { path = "/", kind = "group" } }
  M.walk(f, function(e) rows[#rows + 1] = e end)
  local width = 0
  for _, r in ipairs(rows) do
    local p = r.kind == "group" and r.path ~= "/" and (r.path .. "/") or r.path
    r.label = p
    if #p > width then width = #p end
  end
  width = math.min(width, 48)
  local out = {}
  for _, r in ipairs(rows) do
    local desc
    if r.kind == "group" then desc = "(group)"
    elseif r.kind == "dataset" then desc = r.dtype .. " " .. shape_str(r.shape)
    else desc = "(" .. r.kind .. ")" end
    out[#out + 1] = strings.pad(r.label, width) .. "  " .. desc
    if opts.data and r.kind == "dataset" then
      local d = data_str(f, r, limit)
      if d then out[#out + 1] = "    = " .. d end
    end
    local attrs = f:attrs(r.path)
    local keys = {}
    for k in pairs(attrs) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      out[#out + 1] = ("  @%s = %s"):format(k, value_str(attrs[k]))
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return M
