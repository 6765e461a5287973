-- lua/hydra/yaml.lua: YAML text of Lua values, the one emitter (config.to_yaml writes its block
-- layout with it; sweep point labels and report keys are its flow text). Reading YAML is
-- core.yaml_load / core.yaml_parse (libyaml).
--   yaml.kind(v [, p])    -> "null", "boolean", "integer", "float", "string", "list", "map", or
--                            "empty" (a table with no entries: an empty list or map); p, the
--                            positions of a parsed value, settles list vs map
--   yaml.number(v)        -> integers %d; floats the shortest of %.15g..%.17g that reads back
--                            exactly, with ".0" when it would read as an integer; .nan, .inf
--   yaml.string(s)        -> s plain when it reads back as the same string, else double-quoted
--   yaml.scalar(v)        -> "~" for nil / core.yaml_null, else boolean, number or string text
--   yaml.flow(v)          -> one-line flow text: [a, b], {k: v} (keys sorted), or a scalar
--   yaml.sorted_keys(t)   -> the keys of t sorted by their text
local core = require("hydra.core")

local M = {}

local NULL = core.yaml_null

function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

function M.kind(v, p)
  if v == NULL then return "null" end
  local t = type(v)
  if t == "number" then return math.type(v) == "integer" and "integer" or "float" end
  if t == "table" then
    if p and (p.kind == "list" or p.kind == "map") then return p.kind end
    local n = 0
    for _ in pairs(v) do n = n + 1 end
    if n == 0 then return "empty" end
    return n == #v and "list" or "map"
  end
  return t
end

local function float_text(v)
  if v ~= v then return ".nan" end
  if v == math.huge then return ".inf" end
  if v == -math.huge then return "-.inf" end
  local s
  for p = 15, 17 do
    s = ("%." .. p .. "g"):format(v)
    if tonumber(s) == v then break end
  end
  if not s:find("[%.eEn]") then s = s .. ".0" end
  return s
end

function M.number(v)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  return float_text(v)
end

-- plain-looking string -> whether it reads back as itself (asking libyaml costs more than the
-- rest of an emit: config hashes of a large sweep meet the same few strings again and again)
local reads_back = {}
local reads_back_n = 0

function M.string(s)
  if s:match("^[%w_./][%w_%-./+]*$") then
    local same = reads_back[s]
    if same == nil then
      local ok, v = pcall(core.yaml_parse, s, "to_yaml")
      same = ok and v == s
      if reads_back_n < 100000 then
        reads_back[s] = same
        reads_back_n = reads_back_n + 1
      end
    end
    if same then return s end
  end
  local out = s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == "\\" then return "\\\\" end
    if c == "\n" then return "\\n" end
    if c == "\t" then return "\\t" end
    if c == "\r" then return "\\r" end
    return ("\\x%02X"):format(c:byte())
  end)
  return '"' .. out .. '"'
end

function M.scalar(v)
  if v == nil or v == NULL then return "~" end
  local t = type(v)
  if t == "boolean" then return tostring(v) end
  if t == "number" then return M.number(v) end
  if t == "string" then return M.string(v) end
  error(("yaml: cannot write a %s value"):format(t), 3)
end

local function is_list(v)
  local k = M.kind(v)
  return k == "list" or k == "empty"
end
M.is_list = is_list

function M.flow(v)
  if type(v) ~= "table" then return M.scalar(v) end
  local parts = {}
  if is_list(v) then
    for i, x in ipairs(v) do parts[i] = M.flow(x) end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  for _, k in ipairs(M.sorted_keys(v)) do
    parts[#parts + 1] = M.string(tostring(k)) .. ": " .. M.flow(v[k])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

return M
