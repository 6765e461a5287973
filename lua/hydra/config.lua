-- lua/hydra/config.lua: YAML configs -> validated, resolved Lua tables.
--
-- Layers, later wins:  configs/defaults.yaml  <  included files  <  the file  <  overrides.
--   * Scalars are typed like YAML 1.2 core (core/io/config.c): 3 integer, 3.0 / 1e-3 float,
--     true/false, ~ or null, anything else or anything quoted a string.
--   * `include: other.yaml` or `include: [a.yaml, b.yaml]` (top level only; paths relative to
--     the including file) merges the included files first, in order, then the file's own keys.
--     Maps merge key by key (deep); lists, scalars and free-form `map` values are replaced whole.
--     A cycle is an error naming the chain.
--   * Every key must exist in defaults.yaml; its type is the default's (integer: integers only;
--     float: integers and floats, stored as floats; string; boolean; list: elements typed like
--     the default's elements). lua/hydra/config_schema.lua adds types for null / empty-list
--     defaults, unions ("integer|list<integer>"), enums and numeric bounds, keyed by dotted path.
--   * A key whose default is null (~) is optional: a null value is allowed and becomes nil.
--     A section written with no keys (`train:`) changes nothing.
--   * Overrides `key.path=value`: the value is parsed as a YAML scalar or flow collection
--     (`data.ood=[mnist,glyphs]`, `train.augment={hflip: true}`); a key whose type is a string
--     takes the text as written (`experiment=123` is the string "123").
-- Every error is raised with hydra.err.fail (exit status 1, no traceback) and names where:
--   x.yaml:4:6: did not find expected ',' or ']' (while parsing a flow sequence)
--   x.yaml:7:3: unknown key 'lerning_rate' in 'optim' (did you mean 'learning_rate'?)
--   x.yaml:5:12: train.epochs: expected integer, got string 'ten'
--   x.yaml:3:18: optim.learning_rate must be > 0 (got -0.1)
--   command line: train.epochs=ten: expected integer, got string 'ten'
-- (with no close match the unknown-key message lists the known keys: "(known: a, b, c)").
--
-- API:  load(path, overrides) -> cfg          resolve(path | table | nil, overrides) -> cfg
--       defaults() -> cfg                     to_yaml(cfg) -> text (keys in defaults' order)
--       hash(cfg) -> 16 hex digits (of to_yaml without id_neutral keys at their default)
--       write(cfg, path) (atomic: temp file + rename)
--       identity(section, "path") -> the section without id_neutral keys at their default
--       get(cfg, "a.b.c")  set_path(cfg, "a.b.c", v)  need(cfg_section, "name", {key = type})
--       check_defaults(path, schema)          (validates a defaults file + schema; for tests)
--       use_defaults(path, schema)            (switch defaults; use_defaults() switches back)
-- resolve(table) checks a Lua table like a file (errors say "config table: ..."); its
-- `include` paths are relative to the working directory.
-- overrides: { ["a.b"] = "text", ... } (applied in sorted key order), or an array of
-- "a.b=text" strings or { key =, value = } tables (applied in order). Non-string values are
-- taken as Lua values. A resolved cfg is a plain table; to_yaml then load gives the same table.
local core = require("hydra.core")
local err = require("hydra.err")
local fs = require("hydra.fs")
local strings = require("hydra.strings")
local yaml = require("hydra.yaml")
local interp = require("hydra.interp")

local M = {}

local NULL = core.yaml_null
local DEFAULTS_NAME = "configs/defaults.yaml"

-- ===== small helpers =====

local fmt_num = yaml.number

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = deep_copy(x) end
  return t
end

-- Removes null sentinels (they mean "absent" in a resolved table).
local function strip_nulls(v)
  if v == NULL then return nil end
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = strip_nulls(x) end
  return t
end

local function split_path(path)
  local parts = {}
  for part in (path .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  return parts
end

local sorted_keys = yaml.sorted_keys

-- Kind of a value: "null", "boolean", "integer", "float", "string", "list", "map", or "empty"
-- (a Lua table with no entries: both an empty list and an empty map).
local kind_of = yaml.kind

local function describe(v, kind)
  if kind == "string" then
    local s = #v > 60 and (v:sub(1, 57) .. "...") or v
    return ("string '%s'"):format(s)
  elseif kind == "integer" or kind == "float" then return kind .. " " .. fmt_num(v)
  elseif kind == "boolean" then return "boolean " .. tostring(v)
  elseif kind == "empty" then return "empty table"
  end
  return kind
end

-- ===== types =====

local WORDS = { integer = true, number = true, string = true, boolean = true, map = true }
local PLURAL = { integer = "integers", number = "numbers", string = "strings",
                 boolean = "booleans", map = "maps" }

local function parse_type(s, where)
  local alts = {}
  local function one(t)
    local inner = t:match("^list<(.+)>$")
    if inner then return { kind = "list", elem = one(inner) } end
    if not WORDS[t] then
      err.fail("%s: unknown type '%s' (types: integer, number, string, boolean, map, list<T>)",
        where, t)
    end
    return { kind = t }
  end
  for t in (s .. "|"):gmatch("([^|]*)|") do alts[#alts + 1] = one((t:gsub("%s", ""))) end
  return alts
end

local function type_name(alt, plural)
  if alt.kind == "list" then
    return (plural and "lists of " or "list of ") .. type_name(alt.elem, true)
  end
  return plural and PLURAL[alt.kind] or alt.kind
end

local function types_name(alts)
  local names = {}
  for i, a in ipairs(alts) do names[i] = type_name(a) end
  return table.concat(names, " or ")
end

local function matches(alt, kind)
  if alt.kind == "number" then return kind == "integer" or kind == "float" end
  if alt.kind == "list" or alt.kind == "map" then return kind == alt.kind or kind == "empty" end
  return alt.kind == kind
end

-- ===== error positions =====
-- src: { kind = "file", name = } | { kind = "cli", arg =, key = } | { kind = "table" }

local function fail(src, p, path, what)
  if src.kind == "cli" then
    local subject = (path == src.key) and "" or (": " .. path)
    err.fail("command line: %s%s%s", src.arg, subject, what)
  elseif src.kind == "file" then
    err.fail("%s:%d:%d: %s%s", src.name, p and p.line or 1, p and p.col or 1, path, what)
  end
  err.fail("config table: %s%s", path, what)
end

local function fail_key(src, p, msg)
  if src.kind == "cli" then err.fail("command line: %s: %s", src.arg, msg) end
  if src.kind == "file" then
    err.fail("%s:%d:%d: %s", src.name, p and p.key_line or 1, p and p.key_col or 1, msg)
  end
  err.fail("config table: %s", msg)
end

-- ===== checking values against the spec =====

local function bounds_text(leaf)
  local parts = {}
  if leaf.gt ~= nil then parts[#parts + 1] = "> " .. fmt_num(leaf.gt) end
  if leaf.ge ~= nil then parts[#parts + 1] = ">= " .. fmt_num(leaf.ge) end
  if leaf.lt ~= nil then parts[#parts + 1] = "< " .. fmt_num(leaf.lt) end
  if leaf.le ~= nil then parts[#parts + 1] = "<= " .. fmt_num(leaf.le) end
  return table.concat(parts, " and ")
end

local function in_bounds(leaf, v)
  return (leaf.gt == nil or v > leaf.gt) and (leaf.ge == nil or v >= leaf.ge)
     and (leaf.lt == nil or v < leaf.lt) and (leaf.le == nil or v <= leaf.le)
end

-- A name that becomes a folder (schema field `name`): what hydra eval accepts as a set name.
local function is_name(s)
  return s:match("^[%w_%.%-]+$") ~= nil and s ~= "." and s ~= ".."
end
M.is_name = is_name
M.NAME_RULE = "a name of letters, digits, '_', '.' and '-' (not '.' or '..')"

-- Enum, bounds, finiteness and names of one scalar (a leaf's value or one element of a list
-- leaf). Every number must be finite: no knob means anything at .inf or .nan.
local function check_constraints(v, kind, p, leaf, path, src)
  if kind == "float" and (v ~= v or v == math.huge or v == -math.huge) then
    fail(src, p, path, (" must be a finite number (got %s)"):format(fmt_num(v)))
  end
  if leaf.name and kind == "string" and not is_name(v) then
    fail(src, p, path, (" must be %s; got '%s')"):format(M.NAME_RULE:sub(1, -2),
      strings.escape_controls(v)))
  end
  if kind == "string" and v:find("%c") then
    -- paths and names reach shell scripts, gnuplot and YAML: a newline would start a new line
    fail(src, p, path, (" must not contain a control character (got '%s')"):format(
      strings.escape_controls(v)))
  end
  if leaf.enum and kind == "string" and not leaf.enum_set[v] then
    local s = strings.closest(v, leaf.enum)
    fail(src, p, path, (" must be one of %s (got '%s'%s)"):format(table.concat(leaf.enum, ", "),
      v, s and ("; did you mean '" .. s .. "'?") or ""))
  end
  if leaf.has_bounds and (kind == "integer" or kind == "float") and not in_bounds(leaf, v) then
    fail(src, p, path, (" must be %s (got %s)"):format(bounds_text(leaf), fmt_num(v)))
  end
end

-- Refuses a control character in any key or string of a free-form value (a `map` leaf).
local function no_controls(v, p, path, src)
  if type(v) == "string" and v:find("%c") then
    fail(src, p, path, (" must not contain a control character (got '%s')"):format(
      strings.escape_controls(v)))
  elseif type(v) == "table" then
    for k, x in pairs(v) do
      local sub = ("%s.%s"):format(path, strings.escape_controls(k))
      if type(k) == "string" and k:find("%c") then
        fail(src, p, sub, " (a key) must not contain a control character")
      end
      no_controls(x, p and p.sub and p.sub[k], sub, src)
    end
  end
end

local function convert_scalar(alt, v, kind)
  if alt.kind == "number" and kind == "integer" then return v + 0.0 end
  return v
end

-- Checks one element or value v against the alternatives; returns the converted value.
-- "file:line:col" / "command line: ARG" / "config table": where a value was written.
local function where_of(src, p)
  if src.kind == "cli" then return "command line: " .. tostring(src.arg) end
  if src.kind == "file" then
    return ("%s:%d:%d"):format(src.name, p and p.line or 1, p and p.col or 1)
  end
  return "config table"
end

local no_interp = false   -- set while a resolved value is checked: its text is final

local function check_alts(v, p, alts, leaf, path, src, optional)
  local kind = kind_of(v, p)
  if kind == "string" and not no_interp and interp.has(v) then
    -- ${...}: checked once resolved (after every layer and override), see M.resolve
    return interp.wrap(v, { alts = alts, leaf = leaf, path = path, src = src, p = p,
                            optional = optional, where = where_of(src, p) })
  end
  if kind == "null" and optional then return NULL end
  -- a list against a list type: check elements so the message points at the bad one
  if kind == "list" or kind == "empty" then
    for _, alt in ipairs(alts) do
      if alt.kind == "list" then
        local out = {}
        for i, x in ipairs(v) do
          local sub = p and p.sub and p.sub[i]
          out[i] = check_alts(x, sub, { alt.elem }, leaf, ("%s[%d]"):format(path, i), src, false)
        end
        return out
      end
    end
  end
  for _, alt in ipairs(alts) do
    if matches(alt, kind) then
      if alt.kind == "map" then
        no_controls(v, p, path, src)
        return deep_copy(v)
      end
      check_constraints(v, kind, p, leaf, path, src)
      return convert_scalar(alt, v, kind)
    end
  end
  local want = types_name(alts)
  if optional then want = want .. " or null" end
  fail(src, p, path, (": expected %s, got %s"):format(want, describe(v, kind)))
end

local check_section

local function check_leaf(v, p, leaf, src)
  return check_alts(v, p, leaf.types, leaf, leaf.path, src, leaf.optional)
end

local function unknown_key(spec, key)
  local where = spec.path ~= "" and (" in '" .. spec.path .. "'") or ""
  local s = strings.closest(key, spec.order)
  if not s then
    -- the same key in another section ("learning_rate" at the top -> "optim.learning_rate")
    local found = {}
    for _, leafpath in ipairs(M._state().leaf_paths) do
      if leafpath:match("([^.]+)$") == key then found[#found + 1] = leafpath end
    end
    if #found > 0 and #found <= 3 then s = table.concat(found, "' or '") end
  end
  if s then return ("unknown key '%s'%s (did you mean '%s'?)"):format(key, where, s) end
  return ("unknown key '%s'%s (known: %s)"):format(key, where, table.concat(spec.order, ", "))
end

-- Checks a map v (with positions p, or nil) against a section spec; returns a table holding
-- converted values (nulls kept as NULL for merging).
check_section = function(v, p, spec, src)
  local out = {}
  if v == NULL then return out end
  local kind = kind_of(v, p)
  if kind ~= "map" and kind ~= "empty" then
    if spec.path == "" then
      fail(src, p, "", ("expected a map of settings at the top level, got %s"):format(
        describe(v, kind)))
    end
    fail(src, p, spec.path, (": expected map, got %s"):format(describe(v, kind)))
  end
  local keys = (p and p.order) or sorted_keys(v)
  for _, k in ipairs(keys) do
    local child = type(k) == "string" and spec.keys[k]
    local sub = p and p.sub and p.sub[k]
    if not child then fail_key(src, sub, unknown_key(spec, tostring(k))) end
    if child.section then out[k] = check_section(v[k], sub, child, src)
    else out[k] = check_leaf(v[k], sub, child, src) end
  end
  return out
end

-- ===== the spec, built from defaults.yaml and the schema =====

local function infer_types(v, p, path, name)
  local kind = kind_of(v, p)
  if kind == "integer" or kind == "string" or kind == "boolean" then return { { kind = kind } } end
  if kind == "float" then return { { kind = "number" } } end
  if kind == "list" then
    local ek
    for i, x in ipairs(v) do
      local k = kind_of(x, p.sub[i])
      if k == "float" then k = "number" end
      if ek == "integer" and k == "number" or ek == "number" and k == "integer" then k = "number"
      elseif ek and ek ~= k or not WORDS[k] or k == "map" then
        err.fail("%s:%d:%d: %s: elements of a list default must share one scalar type "
          .. "(add a type in config_schema.lua)", name, p.line, p.col, path)
      end
      ek = k
    end
    if ek then return { { kind = "list", elem = { kind = ek } } } end
  end
  local why = kind == "null" and "a null default" or "an empty list default"
  err.fail("%s:%d:%d: %s: %s needs a type in lua/hydra/config_schema.lua", name,
    p.line, p.col, path, why)
end

local function build_spec(v, p, path, schema, seen, leaf_paths, name)
  local spec = { section = true, path = path, keys = {}, order = {} }
  for _, k in ipairs(p.order) do
    local full = path == "" and k or (path .. "." .. k)
    local sch = schema[full]
    local sub = p.sub[k]
    if sch then seen[full] = true end
    spec.order[#spec.order + 1] = k
    if sub.kind == "map" and not (sch and sch.type) then
      if sch then
        err.fail("config_schema: '%s' is a section of %s, not a key", full, name)
      end
      spec.keys[k] = build_spec(v[k], sub, full, schema, seen, leaf_paths, name)
    else
      sch = sch or {}
      local leaf = {
        path = full,
        optional = v[k] == NULL,
        types = sch.type and parse_type(sch.type, "config_schema: " .. full)
                or infer_types(v[k], sub, full, name),
        enum = sch.enum,
        gt = sch.gt, ge = sch.ge, lt = sch.lt, le = sch.le, name = sch.name,
        id_neutral = sch.id_neutral, default = nil,
      }
      if v[k] ~= NULL then leaf.default = v[k] end   -- a false default stays false
      leaf.has_bounds = leaf.gt ~= nil or leaf.ge ~= nil or leaf.lt ~= nil or leaf.le ~= nil
      if leaf.enum then
        leaf.enum_set = {}
        for _, e in ipairs(leaf.enum) do leaf.enum_set[e] = true end
      end
      for field in pairs(sch) do
        if not ({ type = 1, enum = 1, gt = 1, ge = 1, lt = 1, le = 1, name = 1,
                  id_neutral = 1 })[field] then
          err.fail("config_schema: '%s': unknown field '%s' (fields: type, enum, gt, ge, lt, le, "
            .. "name, id_neutral)", full, tostring(field))
        end
      end
      if sch.id_neutral and type(v[k]) == "table" then
        err.fail("config_schema: '%s': id_neutral needs a scalar or null default", full)
      end
      spec.keys[k] = leaf
      leaf_paths[#leaf_paths + 1] = full
    end
  end
  return spec
end

-- Reads a defaults file and a schema table into { spec, base, leaf_paths }.
local function build_state(path, name, schema)
  local ok, v, p = pcall(core.yaml_load, path)
  if not ok then err.fail("%s", err.message(v)) end
  if p.kind ~= "map" then
    err.fail("%s:%d:%d: defaults must be a map of settings", name, p.line, p.col)
  end
  local seen, leaf_paths = {}, {}
  local spec = build_spec(v, p, "", schema, seen, leaf_paths, name)
  for _, k in ipairs(sorted_keys(schema)) do
    if not seen[k] then err.fail("config_schema: '%s' is not a key of %s", k, name) end
  end
  local state = { spec = spec, leaf_paths = leaf_paths }
  local saved = M._current
  M._current = state                      -- unknown_key suggestions look here
  local okc, res = pcall(check_section, v, p, spec, { kind = "file", name = name })
  M._current = saved
  if not okc then error(res, 0) end
  state.base = res
  return state
end

function M._state()
  if not M._current then
    local home = rawget(_G, "HYDRA_HOME") or "."
    M._current = build_state(home .. "/" .. DEFAULTS_NAME, DEFAULTS_NAME,
      require("hydra.config_schema"))
  end
  return M._current
end

-- Validates a defaults file against a schema table (raises like load does).
function M.check_defaults(path, schema)
  build_state(path, path, schema)
end

-- Makes later calls use another defaults file and schema (tests, tools); use_defaults() goes
-- back to configs/defaults.yaml and lua/hydra/config_schema.lua.
function M.use_defaults(path, schema)
  M._current = path and build_state(path, path, schema or {}) or nil
end

-- ===== layers =====

local function merge(dst, src, spec)
  for k, v in pairs(src) do
    local child = spec and spec.keys[k]
    if child and child.section then
      if type(dst[k]) ~= "table" then dst[k] = {} end
      merge(dst[k], v, child)
    else
      dst[k] = deep_copy(v)
    end
  end
end

-- A path relative to the folder of the file that names it, normalised.
local function join(dir, rel)
  return fs.normalize(fs.join(dir, rel))
end

-- ===== config groups =====
-- `model=vit-fm` (a section key given a name) selects configs/<folder>/<name>.yaml, the group's
-- folder below: FB Hydra's config groups. A group file sets its own section only. A file's
-- `defaults:` list names group choices ({model: vit-fm}), files (paths, as include: takes) and
-- `_self_` (the file's own keys; last when not listed, as in FB Hydra 1.1+); a command-line
-- choice replaces the entry of its group wherever a defaults list names it, and is applied
-- after the config (like an override) when none does.
M.GROUPS = { model = "models", data = "data" }

local function group_dir(key)
  return (rawget(_G, "HYDRA_HOME") or ".") .. "/configs/" .. M.GROUPS[key]
end

function M.group_options(key)
  local out = {}
  local ok, names = pcall(core.listdir, group_dir(key))
  for _, n in ipairs(ok and names or {}) do
    local b = n:match("^(.+)%.yaml$")
    if b then out[#out + 1] = b end
  end
  table.sort(out)
  return out
end

-- The file of group choice key=name; `where` prefixes the error.
local function group_file(key, name, where)
  local opts = M.group_options(key)
  for _, o in ipairs(opts) do
    if o == name then return group_dir(key) .. "/" .. name .. ".yaml" end
  end
  local sgt = strings.closest(tostring(name), opts)
  err.fail("%s: no config '%s' in group %s (configs/%s/: %s)%s", where, tostring(name), key,
    M.GROUPS[key], #opts > 0 and table.concat(opts, ", ") or "none",
    sgt and ("; did you mean '" .. sgt .. "'?") or "")
end

-- The entries of a file's `defaults:` list: before = entries ahead of _self_, after = behind it;
-- each { path =, pos =, group = key|nil }.
local function defaults_of(v, p, name, state)
  local d, dp = v.defaults, p and p.sub and p.sub.defaults
  local before, after = {}, {}
  if d == nil or d == NULL then return before, after end
  local src = { kind = name and "file" or "table", name = name }
  local kind = kind_of(d, dp)
  if kind ~= "list" and kind ~= "empty" then
    fail(src, dp, "defaults", (": expected a list (e.g. [{model: vit-fm}, _self_]), got %s")
      :format(describe(d, kind)))
  end
  local list, self_seen = before, false
  for i, x in ipairs(d) do
    local xp = dp and dp.sub and dp.sub[i]
    local xk = kind_of(x, xp)
    local at = ("defaults[%d]"):format(i)
    if x == "_self_" then
      if self_seen then fail(src, xp, at, ": _self_ is listed twice") end
      self_seen, list = true, after
    elseif xk == "string" then
      list[#list + 1] = { path = x, pos = xp }
    elseif xk == "map" then
      local keys = {}
      for k in pairs(x) do keys[#keys + 1] = k end
      local key = keys[1]
      if #keys ~= 1 or not M.GROUPS[key] then
        fail(src, xp, at, (": expected {group: name} with a group of %s, got %s"):format(
          table.concat(sorted_keys(M.GROUPS), ", "), yaml.flow(x)))
      end
      local choice = x[key]
      local c = state.choices and state.choices[key]
      if c then c.used = true; choice = c.name end
      if type(choice) ~= "string" then
        fail(src, xp, at .. "." .. key, (": expected a config name, got %s"):format(
          describe(choice, kind_of(choice))))
      end
      local where = c and ("command line: " .. c.arg)
        or ("%s:%d:%d"):format(name or "config table", xp and xp.line or 1, xp and xp.col or 1)
      list[#list + 1] = { path = group_file(key, choice, where), pos = xp, group = key,
                          absolute = true }
    else
      fail(src, xp, at, (": expected _self_, a file path or {group: name}, got %s"):format(
        describe(x, xk)))
    end
  end
  return before, after
end

-- A group file's layers keep to its section: anything else is an error naming the keys.
local function check_group_layers(layers, first, key, path)
  local extra, seen = {}, {}
  for i = first, #layers do
    for k in pairs(layers[i] or {}) do   -- false: a slot dropped for a later copy
      if k ~= key and not seen[k] then seen[k] = true; extra[#extra + 1] = k end
    end
  end
  if #extra > 0 then
    table.sort(extra)
    err.fail("%s: a config of group %s sets only '%s', not %s", path, key, key,
      table.concat(extra, ", "))
  end
end

-- The include entries of a file's top-level map: list of { path =, pos = }.
local function includes_of(v, p, name)
  local inc, ip = v.include, p and p.sub and p.sub.include
  if inc == nil or inc == NULL then return {} end
  local src = { kind = name and "file" or "table", name = name }
  local kind = kind_of(inc, ip)
  if kind == "string" then return { { path = inc, pos = ip } } end
  local out = {}
  if kind == "list" or kind == "empty" then
    for i, x in ipairs(inc) do
      local xp = ip and ip.sub and ip.sub[i]
      if type(x) ~= "string" then
        fail(src, xp, ("include[%d]"):format(i), (": expected string, got %s"):format(
          describe(x, kind_of(x, xp))))
      end
      out[#out + 1] = { path = x, pos = xp }
    end
    return out
  end
  fail(src, ip, "include", (": expected string or list of strings, got %s"):format(
    describe(inc, kind)))
end

local function read_yaml(path, from)
  local ok, v, p = pcall(core.yaml_load, path)
  if ok then return v, p end
  local msg = err.message(v)
  local file, why = msg:match("^config: cannot read '(.*)' %((.*)%)$")
  if from and file then
    err.fail("%s:%d:%d: cannot include '%s' (%s: %s)", from.name, from.pos.line, from.pos.col,
      from.path, file, why)
  end
  err.fail("%s", msg)
end

-- Checked layers of files already expanded, reused while every file they came from has the same
-- content (a sweep resolves the same base files for every point: parsing and checking them once
-- keeps `hydra sweep --list` of 10^5 points fast). Layers are never modified (merge copies).
-- name -> { state, layers = {...}, files = { name = content hash }, count = include references }
local expand_memo = {}

local function content_hash(name)
  local f = io.open(name, "rb")
  if not f then return nil end
  local text = f:read(64 * 1024 * 1024 + 1)   -- HY_CONFIG_MAXBYTES + 1: /dev/zero ends too
  f:close()
  return text and core.hash64(text) or nil
end

local function memo_usable(memo, state, chain)
  if memo.state ~= state then return false end
  for _, c in ipairs(chain) do
    if memo.files[c] then return false end        -- a cycle: expand again to report it
  end
  for f, h in pairs(memo.files) do
    if content_hash(f) ~= h then return false end
  end
  return true
end

-- Include limits: the chain of files including each other (like the 64 nesting levels of a
-- YAML document), and the include references of one config in all, repeats counted (a file
-- named twice counts twice, also inside an included file).
M.MAX_INCLUDE_DEPTH = 64
M.MAX_INCLUDES = 1000

-- Layer lists hold each layer once, at its last position: merging keeps, for every setting,
-- the value of the last layer that sets it, so an earlier copy of a layer that comes again
-- later changes nothing and is dropped (a file included twice is merged once, where it comes
-- last). ctx = { layers = {...} (false: a dropped slot), at = { [layer] = index }, count }.
local function push_layer(ctx, l)
  local i = ctx.at[l]
  if i then ctx.layers[i] = false end
  ctx.layers[#ctx.layers + 1] = l
  ctx.at[l] = #ctx.layers
end

local function live_layers(list, first)
  local out = {}
  for i = first or 1, #list do
    if list[i] then out[#out + 1] = list[i] end
  end
  return out
end

local function count_includes(ctx, n, from)
  ctx.count = ctx.count + n
  if ctx.count > M.MAX_INCLUDES then
    err.fail("%s:%d:%d: more than %d includes in all (repeats counted): too many, or a file "
      .. "included again and again", from.name, from.pos.line, from.pos.col, M.MAX_INCLUDES)
  end
end

-- Appends the checked layers of file `path` (its includes first, then itself) to ctx.layers.
local function expand(path, chain, from, ctx, state)
  local name = fs.normalize(path)
  for i, c in ipairs(chain) do
    if c == name then
      local cyc = table.move(chain, i, #chain, 1, {})
      cyc[#cyc + 1] = name
      err.fail("%s:%d:%d: include cycle: %s", from.name, from.pos.line, from.pos.col,
        table.concat(cyc, " -> "))
    end
  end
  if #chain >= M.MAX_INCLUDE_DEPTH then
    err.fail("%s:%d:%d: includes nested deeper than %d levels (%s -> ... -> %s)", from.name,
      from.pos.line, from.pos.col, M.MAX_INCLUDE_DEPTH, chain[1], name)
  end
  -- a FIFO would block the read until a writer comes (and a device is no config file)
  if core.stat(name) == "other" then
    if from then
      err.fail("%s:%d:%d: cannot include '%s' (%s: it is not a regular file)", from.name,
        from.pos.line, from.pos.col, from.path, name)
    end
    err.fail("config: cannot read '%s': it is not a regular file", name)
  end
  local memo = expand_memo[name]
  if memo and not state.choices and memo_usable(memo, state, chain) then
    if from then count_includes(ctx, memo.count, from) end
    for _, l in ipairs(memo.layers) do push_layer(ctx, l) end
    return memo.files
  end
  local first = #ctx.layers + 1
  local count0 = ctx.count
  local files = { [name] = content_hash(name) }
  local v, p = read_yaml(name, from)
  local after = {}
  local function expand_entry(inc)
    local at = #ctx.layers + 1
    local from_at = { name = name, pos = inc.pos, path = inc.path }
    count_includes(ctx, 1, from_at)
    local sub = expand(inc.absolute and inc.path or join(fs.dirname(name), inc.path), chain,
      from_at, ctx, state)
    for f, h in pairs(sub) do files[f] = h end
    if inc.group then check_group_layers(ctx.layers, at, inc.group, inc.path) end
  end
  if p.kind == "map" then
    chain[#chain + 1] = name
    for _, inc in ipairs(includes_of(v, p, name)) do expand_entry(inc) end
    local before
    before, after = defaults_of(v, p, name, state)
    for _, inc in ipairs(before) do expand_entry(inc) end
    chain[#chain] = nil
    v.include, v.defaults = nil, nil
    for i = #p.order, 1, -1 do
      if p.order[i] == "include" or p.order[i] == "defaults" then table.remove(p.order, i) end
    end
  end
  push_layer(ctx, check_section(v, p, state.spec, { kind = "file", name = name }))
  if #after > 0 then
    chain[#chain + 1] = name
    for _, inc in ipairs(after) do expand_entry(inc) end
    chain[#chain] = nil
  end
  -- the file's own layers: its span of the list (a layer it brought again moved into it)
  expand_memo[name] = { state = state, layers = live_layers(ctx.layers, first), files = files,
                        count = ctx.count - count0 }
  return files
end

-- Overrides in application order: { key =, value =, arg = }.
local function override_list(overrides)
  local list = {}
  if overrides == nil then return list end
  if type(overrides) ~= "table" then
    error(("config: overrides must be a table, got %s"):format(type(overrides)), 3)
  end
  if overrides[1] ~= nil then
    for _, o in ipairs(overrides) do
      if type(o) == "string" and o:match("^~[^=]+$") then
        list[#list + 1] = { key = o, value = "" }
      elseif type(o) == "string" then
        local k, v = o:match("^([^=]*)=(.*)$")
        if not k then err.fail("command line: '%s': expected key.path=value", o) end
        list[#list + 1] = { key = k, value = v }
      else
        list[#list + 1] = { key = o.key, value = o.value }
      end
    end
  else
    for _, k in ipairs(sorted_keys(overrides)) do
      list[#list + 1] = { key = k, value = overrides[k] }
    end
  end
  for _, o in ipairs(list) do
    o.arg = strings.escape_controls(("%s=%s"):format(o.key, type(o.value) == "string"
      and o.value or (type(o.value) == "table" and "{...}" or tostring(o.value))))
    if o.key:sub(1, 1) == "+" then          -- +key=value: set a key that may be absent
      o.add, o.key = true, o.key:sub(2)
    elseif o.key:sub(1, 1) == "~" then      -- ~key: remove (null) an optional key
      o.remove, o.key, o.arg = true, o.key:sub(2), strings.escape_controls(o.key)
    end
  end
  return list
end

local function matches_any(leaf, kind)
  for _, alt in ipairs(leaf.types) do
    if matches(alt, kind) then return true end
  end
  return false
end

local function accepts_string(leaf)
  if leaf.section then return false end
  for _, alt in ipairs(leaf.types) do
    if alt.kind == "string" then return true end
  end
  return false
end

-- One override as a layer table ({ optim = { learning_rate = 0.1 } }).
-- Whether override o selects a config group (model=vit-fm): a group key given a plain name.
local function is_group_choice(o)
  return M.GROUPS[o.key] ~= nil and not o.add and not o.remove and type(o.value) == "string"
    and o.value:match("^[%w_%.%-]+$") ~= nil
end

local function override_layer(o, state)
  local src = { kind = "cli", arg = o.arg, key = o.key }
  local parts = split_path(o.key)
  local spec = state.spec
  for i, part in ipairs(parts) do
    if part == "" then err.fail("command line: %s: bad key path '%s'", o.arg, o.key) end
    if not spec.section then
      err.fail("command line: %s: '%s' is a setting, not a section", o.arg,
        table.concat(parts, ".", 1, i - 1))
    end
    local child = spec.keys[part]
    if not child then fail_key(src, nil, unknown_key(spec, part)) end
    spec = child
  end
  if (o.add or o.remove) and (spec.section or not spec.optional) then
    err.fail("command line: %s: %s %s (only a key whose default is null may be %s; set it "
      .. "with %s=VALUE)", o.arg, o.key, spec.section and "is a section" or
      ("always has a value (default " .. yaml.flow(spec.default) .. ")"),
      o.add and "added" or "removed", o.key)
  end
  if o.remove then
    local layer, t = {}, nil
    t = layer
    for i = 1, #parts - 1 do t[parts[i]] = {}; t = t[parts[i]] end
    t[parts[#parts]] = NULL
    return layer
  end
  local v, p = o.value, nil
  if type(v) == "string" then
    local ok, pv, pp = pcall(core.yaml_parse, v, "command line")
    if not ok then
      local msg = err.message(pv):gsub("^command line:%d+:%d+: ", "")
      err.fail("command line: %s: %s", o.arg, msg)
    end
    -- a plain 123 / true / ~ given to a string key is the text as written
    local scalar = pp.kind ~= "list" and pp.kind ~= "map" and pp.kind ~= "string"
    if scalar and accepts_string(spec) and not matches_any(spec, pp.kind)
       and not (pp.kind == "null" and spec.optional) then
      pv, pp = v, { line = 1, col = 1, kind = "string" }
    end
    v, p = pv, pp
  end
  local checked
  if spec.section then checked = check_section(v, p, spec, src)
  else checked = check_leaf(v, p, spec, src) end
  local layer = {}
  local t = layer
  for i = 1, #parts - 1 do
    t[parts[i]] = {}
    t = t[parts[i]]
  end
  t[parts[#parts]] = checked
  return layer
end

-- ===== public API =====

-- A resolved value of a ${...} placeholder, converted and checked for its key (info).
local function check_resolved(info, v, as_text)
  if as_text and type(v) == "string" then
    local accepts = false
    for _, alt in ipairs(info.alts) do if alt.kind == "string" then accepts = true end end
    if not accepts then     -- text for a typed key: read as a YAML scalar, as an override is
      local ok, pv = pcall(core.yaml_parse, v, "interpolation")
      if ok then v = pv end
    end
  end
  no_interp = true
  local ok, res = pcall(check_alts, v, nil, info.alts, info.leaf, info.path, info.src,
    info.optional)
  no_interp = false
  if not ok then error(res, 0) end
  return res
end

-- opts.raw: leave ${...} unresolved (their text), for printing the config as written.
function M.resolve(what, overrides, opts)
  local state = M._state()
  local ctx = { layers = {}, at = {}, count = 0 }
  local ovs = override_list(overrides)
  local choices
  for _, o in ipairs(ovs) do
    if is_group_choice(o) then
      choices = choices or {}
      choices[o.key] = { name = o.value, arg = o.arg, used = false }
      o.choice = choices[o.key]
    end
  end
  state.choices = choices
  local okx, ex = pcall(function()
  if type(what) == "string" then
    expand(what, {}, nil, ctx, state)
  elseif type(what) == "table" then
    local v = deep_copy(what)
    for _, inc in ipairs(includes_of(v, nil, nil)) do
      expand(inc.path, {}, nil, ctx, state)
    end
    v.include = nil
    ctx.layers[#ctx.layers + 1] = check_section(v, nil, state.spec, { kind = "table" })
  elseif what ~= nil then
    error(("config.resolve: expected a path, a table or nil, got %s"):format(type(what)), 2)
  end
  local list = live_layers(ctx.layers)
  for _, o in ipairs(ovs) do
    if o.choice then
      -- a group choice no defaults list named: the group's file, applied here
      if not o.choice.used then
        local gctx = { layers = {}, at = {}, count = 0 }
        local path = group_file(o.key, o.value, "command line: " .. o.arg)
        expand(path, {}, nil, gctx, state)
        local gl = live_layers(gctx.layers)
        check_group_layers(gl, 1, o.key, path)
        for _, l in ipairs(gl) do list[#list + 1] = l end
      end
    else
      list[#list + 1] = override_layer(o, state)
    end
  end
  return list
  end)
  state.choices = nil
  if not okx then error(ex, 0) end
  local layers = ex
  local cfg = deep_copy(state.base)
  for _, layer in ipairs(layers) do merge(cfg, layer, state.spec) end
  if opts and opts.raw then cfg = interp.raw(cfg)
  else cfg = interp.resolve(cfg, check_resolved) end
  return strip_nulls(cfg)
end

-- Defaults < path (with its includes) < overrides; path nil gives defaults < overrides.
function M.load(path, overrides)
  if path ~= nil and type(path) ~= "string" then
    error(("config.load: expected a path, got %s"):format(type(path)), 2)
  end
  return M.resolve(path, overrides)
end

function M.defaults()
  return strip_nulls(deep_copy(M._state().base))
end

-- ===== YAML output =====

local fmt_string, fmt_flow, is_list = yaml.string, yaml.flow, yaml.is_list

local emit_map

-- One "key: value" entry (value possibly a nested block); omit: leave out id_neutral keys that
-- hold their default (the text hash() hashes).
local function emit_entry(out, indent, key, v, spec, omit)
  local head = indent .. fmt_string(tostring(key)) .. ":"
  if indent == "" and #out > 0 and out[#out]:sub(1, 1) == " " and not (spec and spec.section) then
    out[#out + 1] = ""
  end
  if spec and spec.section then
    if indent == "" and #out > 0 then out[#out + 1] = "" end      -- sections stand apart
    out[#out + 1] = head
    emit_map(out, indent .. "  ", type(v) == "table" and v or {}, spec, omit)
  elseif type(v) == "table" and next(v) == nil and spec and spec.types
         and spec.types[1].kind == "map" then
    out[#out + 1] = head .. " {}"
  elseif type(v) == "table" and next(v) ~= nil and not is_list(v) then
    out[#out + 1] = head
    emit_map(out, indent .. "  ", v, nil)
  else
    out[#out + 1] = head .. " " .. fmt_flow(v)
  end
end

-- A key marked id_neutral in the schema (added after run-ids were published) that holds its
-- default, or a section of such keys only: left out of the text hash() hashes, hence of every
-- run-id, so earlier ids stay valid.
local function neutral(child, v)
  if child.section then
    -- a section every key of which is neutral (one added whole after run-ids were published)
    if type(v) ~= "table" then return v == nil end
    for k in pairs(v) do if not child.keys[k] then return false end end
    for _, k in ipairs(child.order) do
      if not neutral(child.keys[k], v[k]) then return false end
    end
    return true
  end
  return child.id_neutral and v == child.default
end

-- Keys of a section in the defaults' order (missing ones skipped, optional leaves written ~,
-- with omit id_neutral keys at their default left out), then any others sorted; free-form maps
-- in sorted order.
emit_map = function(out, indent, t, spec, omit)
  local done = {}
  if spec then
    for _, k in ipairs(spec.order) do
      local child = spec.keys[k]
      done[k] = true
      if not (omit and neutral(child, t[k]))
         and (t[k] ~= nil or (not child.section and child.optional)) then
        emit_entry(out, indent, k, t[k], child, omit)
      end
    end
  end
  for _, k in ipairs(sorted_keys(t)) do
    if not done[k] then emit_entry(out, indent, k, t[k], nil) end
  end
end

function M.to_yaml(cfg)
  if type(cfg) ~= "table" then
    error(("config.to_yaml: expected a table, got %s"):format(type(cfg)), 2)
  end
  local out = {}
  emit_map(out, "", cfg, M._state().spec, false)
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

-- hy_hash64 of to_yaml(cfg) without the id_neutral keys that hold their default.
function M.hash(cfg)
  if type(cfg) ~= "table" then
    error(("config.hash: expected a table, got %s"):format(type(cfg)), 2)
  end
  local out = {}
  emit_map(out, "", cfg, M._state().spec, true)
  out[#out + 1] = ""
  return core.hash64(table.concat(out, "\n"))
end

-- A copy of section `path` ("prune") of a resolved config without its id_neutral keys that hold
-- their default: what a stage key should hash, so that keys added later keep earlier keys valid.
function M.identity(section, path)
  local spec = M._state().spec
  for part in path:gmatch("[^.]+") do spec = spec.keys[part] end
  local c = deep_copy(section)
  for k, child in pairs(spec.keys) do
    if not child.section and neutral(child, c[k]) then c[k] = nil end
  end
  return c
end

-- The id_neutral keys whose default is not null, in the defaults' order: { { path, value } }.
-- A config written before such a key existed ran at its default (that is what makes the key
-- neutral), so readers of stored configs (report_sweep.collect) fill it in.
function M.neutral_defaults()
  local out = {}
  local function walk(spec)
    for _, k in ipairs(spec.order) do
      local child = spec.keys[k]
      if child.section then walk(child)
      elseif child.id_neutral and child.default ~= nil then
        out[#out + 1] = { path = child.path, value = child.default }
      end
    end
  end
  walk(M._state().spec)
  return out
end

-- A deep copy of a (resolved) config table, to change without touching the original.
M.copy = deep_copy

-- Writes to_yaml(cfg) to path atomically (a temporary file renamed into place).
function M.write(cfg, path)
  local text = ("# resolved config (hydra %s), hash %s\n"):format(core.version, M.hash(cfg))
    .. M.to_yaml(cfg)
  require("hydra.output").write_text(path, text, "config")
end

-- ===== paths =====

function M.get(cfg, path)
  local t = cfg
  for _, part in ipairs(split_path(path)) do
    if type(t) ~= "table" then return nil end
    t = t[part]
  end
  return t
end

function M.set_path(cfg, path, v)
  local parts = split_path(path)
  local t = cfg
  for i = 1, #parts - 1 do
    local nxt = t[parts[i]]
    if nxt == nil then
      nxt = {}
      t[parts[i]] = nxt
    elseif type(nxt) ~= "table" then
      error(("config.set_path: '%s' is a %s, not a table"):format(
        table.concat(parts, ".", 1, i), type(nxt)), 2)
    end
    t = nxt
  end
  t[parts[#parts]] = v
  return cfg
end

-- For modules that receive a resolved section: checks each key has the given Lua type
-- ("number", "string", "boolean", "table", or "integer").
function M.need(cfg, section, spec)
  if type(cfg) ~= "table" then
    error(("%s: expected the resolved '%s' config section, got %s"):format(section, section,
      type(cfg)), 2)
  end
  for _, k in ipairs(sorted_keys(spec)) do
    local want, v = spec[k], cfg[k]
    local got = type(v)
    local good = (want == "integer") and math.type(v) == "integer" or got == want
    if not good then
      error(("%s.%s: expected %s, got %s"):format(section, k, want,
        v == nil and "nothing" or got), 2)
    end
  end
  return cfg
end

return M
