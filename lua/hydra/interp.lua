-- lua/hydra/interp.lua: ${...} interpolation of config values (OmegaConf's syntax, the part FB
-- Hydra users write every day), resolved by hydra.config after every layer and override is
-- merged, so a reference sees the final value.
--   ${a.b.c}              the value of key a.b.c (absolute path)
--   ${.x} ${..x}          relative: x in the same section as the key holding the reference,
--                         one more dot per level up (OmegaConf's rule)
--   ${oc.env:VAR}         the environment variable VAR (an error when unset)
--   ${oc.env:VAR,default} ... or default when VAR is unset
--   run_${seed}_x         string interpolation: each ${...} replaced by its value's text
--   \${                   a literal "${"
-- A value that is exactly one ${key} takes the referenced value with its type (an integer
-- stays an integer, a list a list); in a longer string a reference must be a scalar. Every
-- result is checked against the key's type like any value (a string result for a non-string
-- key is read as a YAML scalar first, as an override's text is). A missing key, a cycle, an
-- unset variable or a nested ${ is an error naming the chain of keys and the file:line:col (or
-- the command-line argument) where the reference was written.
--
-- hydra.config calls:
--   interp.has(s) -> true when s holds "${" (escaped or not)
--   interp.wrap(text, info) -> a placeholder standing for the value until resolution
--   interp.resolve(cfg, check) -> cfg with every placeholder replaced: check(info, value, where)
--                                 converts and validates a resolved value for its key
--   interp.raw(cfg) -> cfg with every placeholder back to its text (hydra config without
--                      --resolve)
local core = require("hydra.core")
local err = require("hydra.err")
local yaml = require("hydra.yaml")

local M = {}

local NULL = core.yaml_null
local MARK = "__hydra_interp"

function M.has(s) return type(s) == "string" and s:find("${", 1, true) ~= nil end

function M.is(v) return type(v) == "table" and v[MARK] == true end

function M.wrap(text, info)
  return { [MARK] = true, text = text, info = info }
end

-- Segments of text: { lit = "..." } and { ref = "expr" } in order.
local function parse(text, where)
  local segs, i, buf = {}, 1, {}
  while i <= #text do
    local c = text:sub(i, i)
    if c == "\\" and text:sub(i + 1, i + 2) == "${" then
      buf[#buf + 1] = "${"
      i = i + 3
    elseif c == "$" and text:sub(i + 1, i + 1) == "{" then
      local close = text:find("}", i + 2, true)
      if not close then
        err.fail("%s: '%s': unterminated ${ (expected '}')", where, text)
      end
      local expr = text:sub(i + 2, close - 1)
      if expr:find("${", 1, true) then
        err.fail("%s: '%s': nested ${ is not supported", where, text)
      end
      if #buf > 0 then segs[#segs + 1] = { lit = table.concat(buf) }; buf = {} end
      segs[#segs + 1] = { ref = expr }
      i = close + 1
    else
      buf[#buf + 1] = c
      i = i + 1
    end
  end
  if #buf > 0 then segs[#segs + 1] = { lit = table.concat(buf) } end
  return segs
end

local function split(path)
  local parts = {}
  for part in (path .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  return parts
end

local function get(cfg, parts)
  local v = cfg
  for _, p in ipairs(parts) do
    if type(v) ~= "table" or M.is(v) then return nil end
    v = v[p]
    if v == nil then return nil end
  end
  return v
end

-- The absolute key path of reference expr written in the value of key `path`.
local function target(expr, path, where, text)
  expr = expr:match("^%s*(.-)%s*$")
  if expr == "" then err.fail("%s: '%s': empty ${}", where, text) end
  if not expr:match("^%.*[%w_][%w_.]*$") or expr:find("..", #expr:match("^%.*") + 1, true) then
    err.fail("%s: '%s': '${%s}' is not a key path (a.b.c, .sibling, ..up) or oc.env:VAR",
      where, text, expr)
  end
  local dots = #expr:match("^%.*")
  if dots == 0 then return expr end
  local base = split(path)
  base[#base] = nil                       -- the section holding the key
  for _ = 2, dots do
    if #base == 0 then
      err.fail("%s: '%s': '${%s}' goes above the top of the config", where, text, expr)
    end
    base[#base] = nil
  end
  local rest = expr:sub(dots + 1)
  return #base > 0 and (table.concat(base, ".") .. "." .. rest) or rest
end

local function scalar_text(v, ref, where, text)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return yaml.number(v) end
  if t == "boolean" then return tostring(v) end
  if v == NULL or v == nil then
    err.fail("%s: '%s': ${%s} is null: nothing to put into the string", where, text, ref)
  end
  err.fail("%s: '%s': ${%s} is a %s: only a whole value (\"${%s}\") can take it", where, text,
    ref, yaml.kind(v), ref)
end

-- Resolves every placeholder of cfg (in place) and returns cfg.
function M.resolve(cfg, check)
  local done = {}          -- path -> resolved value
  local resolve_at

  local function value_of(w, path, chain)
    local where = w.info.where
    local segs = parse(w.text, where)
    local function ref_value(expr)
      local env, def = expr:match("^%s*oc%.env:([^,]*),?(.*)$")
      if env then
        env = env:match("^%s*(.-)%s*$")
        local has_default = expr:find(",", 1, true) ~= nil
        local v = os.getenv(env)
        if v == nil then
          if not has_default then
            err.fail("%s: %s: environment variable %s is not set (give a default: "
              .. "${oc.env:%s,default})", where, path, env, env)
          end
          v = def:match("^%s*(.-)%s*$")
          local q = v:match('^"(.*)"$') or v:match("^'(.*)'$")
          if q then v = q end
        end
        return v, true
      end
      local tp = target(expr, path, where, w.text)
      local v = resolve_at(tp, chain, where)
      return v, false
    end
    if #segs == 1 and segs[1].ref then
      return ref_value(segs[1].ref)
    end
    local out = {}
    for _, s in ipairs(segs) do
      if s.lit then out[#out + 1] = s.lit
      else out[#out + 1] = scalar_text((ref_value(s.ref)), s.ref, where, w.text) end
    end
    return table.concat(out), true
  end

  -- the final value at absolute path tp, resolving a placeholder there first
  resolve_at = function(tp, chain, where)
    if done[tp] ~= nil then return done[tp] end
    for i, c in ipairs(chain) do
      if c == tp then
        local cyc = table.move(chain, i, #chain, 1, {})
        cyc[#cyc + 1] = tp
        err.fail("%s: interpolation cycle: %s", where, table.concat(cyc, " -> "))
      end
    end
    local v = get(cfg, split(tp))
    if v == nil then
      err.fail("%s: ${%s}: no such key (chain: %s)", where, tp,
        table.concat(chain, " -> ") .. " -> " .. tp)
    end
    if M.is(v) then
      chain[#chain + 1] = tp
      local raw, as_text = value_of(v, tp, chain)
      chain[#chain] = nil
      v = check(v.info, raw, as_text)
      -- store it in the config
      local parts = split(tp)
      local t = get(cfg, table.move(parts, 1, #parts - 1, 1, {}))
      t[parts[#parts]] = v
    end
    done[tp] = v
    return v
  end

  -- every placeholder, in key order (deterministic errors)
  local function walk(t, prefix)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do
      local v = t[k]
      local p = prefix and (prefix .. "." .. tostring(k)) or tostring(k)
      if M.is(v) then
        resolve_at(p, {}, v.info.where)
      elseif type(v) == "table" then
        -- a list holding placeholders: each element resolved in its place
        local is_list = #v > 0
        if is_list then
          for i, x in ipairs(v) do
            if M.is(x) then
              local raw, as_text = value_of(x, p, { p })
              v[i] = check(x.info, raw, as_text)
            end
          end
        else
          walk(v, p)
        end
      end
    end
  end
  walk(cfg, nil)
  return cfg
end

function M.raw(v)
  if M.is(v) then return v.text end
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = M.raw(x) end
  return t
end

return M
