-- lua/hydra/multirun.lua: `hydra exp CONFIG -m key=a,b key2=range(0,3) ...` (FB Hydra's
-- multirun). The command-line sweep becomes an ordinary sweep file (configs/sweeps/README.md),
-- written to <results_dir>/<experiment>/multirun/<name>.yaml and run by the sweep engine, so a
-- multirun has everything a sweep has: one run folder per point, resume, --jobs, --shard,
-- --launcher slurm, --list, the aggregated report.
--
--   multirun.expand_value(text) -> list of value texts, or nil for a single value
--       "a,b,c" splits at the commas outside brackets, braces, parentheses and quotes, so
--       methods=[a,b] stays one value; "range(start, stop[, step])" lists start, start+step, ...
--       below stop (as FB Hydra's and Python's range; integers stay integers, floats are
--       start + i*step printed with at most 12 significant digits).
--   multirun.sweep_text(config_path, overrides) -> YAML text of the sweep file, name
--       overrides: list of { key, value } as hydra.argparse gives them, in command-line order.
--       Keys with several values become grid: axes in that order (the first varies slowest,
--       as in FB Hydra's cartesian product); the others go to set:.
local core = require("hydra.core")
local err = require("hydra.err")
local yaml = require("hydra.yaml")

local M = {}

-- The comma-separated parts of s at bracket depth 0 and outside quotes.
local function split_top(s)
  local parts, depth, quote, start = {}, 0, nil, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if quote then
      if c == quote then quote = nil end
    elseif c == '"' or c == "'" then
      quote = c
    elseif c == "[" or c == "{" or c == "(" then
      depth = depth + 1
    elseif c == "]" or c == "}" or c == ")" then
      depth = depth - 1
    elseif c == "," and depth == 0 then
      parts[#parts + 1] = s:sub(start, i - 1)
      start = i + 1
    end
  end
  parts[#parts + 1] = s:sub(start)
  for i, p in ipairs(parts) do parts[i] = p:match("^%s*(.-)%s*$") end
  return parts
end

M.MAX_VALUES = 10000   -- the sweep engine's point limit

local function range_values(key, args)
  local a = split_top(args)
  if #a < 2 or #a > 3 then
    err.usage("hydra exp -m: %s=range(%s): expected range(start, stop) or range(start, stop, "
      .. "step)", key, args)
  end
  local n = {}
  for i, x in ipairs(a) do
    n[i] = tonumber(x)
    if not n[i] or n[i] ~= n[i] or n[i] == math.huge or n[i] == -math.huge then
      err.usage("hydra exp -m: %s=range(%s): '%s' is not a finite number", key, args, x)
    end
  end
  local start, stop, step = n[1], n[2], n[3] or 1
  if step == 0 then err.usage("hydra exp -m: %s=range(%s): step must not be 0", key, args) end
  local ints = math.type(start) == "integer" and math.type(stop) == "integer"
    and math.type(step) == "integer"
  local count = math.ceil((stop - start) / step)
  if count < 1 then
    err.usage("hydra exp -m: %s=range(%s) is empty", key, args)
  end
  if count > M.MAX_VALUES then
    err.usage("hydra exp -m: %s=range(%s) has %d values (limit %d)", key, args, count,
      M.MAX_VALUES)
  end
  local out = {}
  for i = 0, count - 1 do
    local v = start + i * step
    if ints then out[#out + 1] = ("%d"):format(v)
    else
      local t = ("%.12g"):format(v)
      if not t:find("[%.eEn]") then t = t .. ".0" end   -- a float stays a float
      out[#out + 1] = t
    end
  end
  return out
end

function M.expand_value(key, text)
  local args = text:match("^%s*range%s*%((.*)%)%s*$")
  if args then return range_values(key, args) end
  local parts = split_top(text)
  if #parts < 2 then return nil end
  for _, p in ipairs(parts) do
    if p == "" then
      err.usage("hydra exp -m: %s=%s: an empty value in the list (a,b,c)", key, text)
    end
  end
  return parts
end

-- A value text as the sweep file's YAML: parsed as an override's value is (YAML), written back
-- by the one emitter, so the sweep reads the value the override would have given.
local function value_yaml(key, text)
  local ok, v = pcall(core.yaml_parse, text, "command line")
  if not ok then
    err.usage("hydra exp -m: %s=%s: %s", key, text,
      (err.message(v):gsub("^command line:%d+:%d+: ", "")))
  end
  return yaml.flow(v)
end

function M.sweep_text(config_path, overrides)
  local grid, set, seen = {}, {}, {}
  for _, o in ipairs(overrides) do
    if seen[o.key] then err.usage("hydra exp -m: %s is given twice", o.key) end
    seen[o.key] = true
    if o.key == "results_dir" or o.key == "experiment" then
      local vals = M.expand_value(o.key, o.value)
      if vals then
        err.usage("hydra exp -m: %s cannot take several values (every point of a multirun "
          .. "shares one results folder)", o.key)
      end
    end
    local vals = M.expand_value(o.key, o.value)
    if vals then
      local ys = {}
      for i, t in ipairs(vals) do ys[i] = value_yaml(o.key, t) end
      grid[#grid + 1] = { key = o.key, values = ys }
    else
      set[#set + 1] = { key = o.key, value = value_yaml(o.key, o.value) }
    end
  end
  if #grid == 0 then
    err.usage("hydra exp -m: no key has several values (give key=a,b or key=range(0,3))")
  end
  local lines = {
    "# a multirun of hydra exp (hydra exp CONFIG -m ...), run as a sweep: hydra sweep THIS_FILE",
    "base: " .. yaml.string(config_path),
  }
  if #set > 0 then
    lines[#lines + 1] = "set:"
    for _, s in ipairs(set) do
      lines[#lines + 1] = ("  %s: %s"):format(yaml.string(s.key), s.value)
    end
  end
  lines[#lines + 1] = "grid:"
  local label = {}
  for _, g in ipairs(grid) do
    lines[#lines + 1] = ("  %s: [%s]"):format(yaml.string(g.key), table.concat(g.values, ", "))
    label[#label + 1] = g.key
  end
  lines[#lines + 1] = "description: " .. yaml.string("multirun over " .. table.concat(label, ", "))
  local text = table.concat(lines, "\n") .. "\n"
  local name = "multirun-" .. core.hash_string(text):sub(1, 12)
  return text, name
end

return M
