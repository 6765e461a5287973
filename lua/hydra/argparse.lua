-- lua/hydra/argparse.lua: command-line parsing shared by every `hydra` subcommand.
--
--   local opts = argparse.parse(args, {
--     command = "train",
--     options = { out = "string", seed = "natural", ["mc-samples"] = "integer",
--                 verbose = "flag", ood = "list" },      -- "list": repeatable, values collected
--                                                        -- "natural": an integer >= 0
--     positional = { min = 1, max = 1, names = { "CONFIG" } },
--     overrides = true,                                   -- accept key.path=value arguments
--   })
--   opts.out, opts.seed, opts["mc-samples"], opts.positional[1], opts.overrides["optim.lr"]
--
-- Options are `--name value` or `--name=value`; an option other than a list given twice is an
-- error. Errors are usage errors (exit status 2) that name the command and say what was
-- expected; an unexpected argument that looks like a config key (train.epochs) says that an
-- override needs '='.
local err = require("hydra.err")

local M = {}

local function convert(cmd, name, kind, v)
  if kind == "integer" or kind == "natural" then
    local n = math.tointeger(tonumber(v))
    if not n then err.usage("%s: --%s expects an integer, got '%s'", cmd, name, v) end
    if kind == "natural" and n < 0 then
      err.usage("%s: --%s must be >= 0 (got %d)", cmd, name, n)
    end
    return n
  elseif kind == "number" then
    local n = tonumber(v)
    if not n then err.usage("%s: --%s expects a number, got '%s'", cmd, name, v) end
    return n
  end
  return v
end

-- M.capture (set by `hydra completion`): parse() raises { argspec = spec } instead of parsing,
-- so that a command's options can be listed exactly as its parser declares them.
M.capture = false

function M.parse(args, spec)
  if M.capture then error({ argspec = spec }, 0) end
  local cmd = "hydra " .. spec.command
  local opts = { positional = {}, overrides = {}, override_list = {} }
  local options = spec.options or {}
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do opts.positional[#opts.positional + 1] = args[j] end
      break
    end
    local name, val = a:match("^%-%-([%w%-_]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w%-_]+)$") end
    if name then
      local kind = options[name]
      if not kind then
        local known = {}
        for k in pairs(options) do known[#known + 1] = "--" .. k end
        table.sort(known)
        err.usage("%s: unknown option '--%s'%s", cmd, name,
          #known > 0 and (" (known: " .. table.concat(known, ", ") .. ")") or "")
      end
      if kind == "flag" then
        if val then err.usage("%s: --%s takes no value", cmd, name) end
        if opts[name] then err.usage("%s: --%s given twice", cmd, name) end
        opts[name] = true
      else
        if not val then
          i = i + 1
          val = args[i]
          if val == nil then err.usage("%s: --%s needs a value", cmd, name) end
        end
        if kind == "list" then
          opts[name] = opts[name] or {}
          table.insert(opts[name], val)
        elseif opts[name] ~= nil then
          err.usage("%s: --%s given twice", cmd, name)
        else
          opts[name] = convert(cmd, name, kind, val)
        end
      end
    elseif spec.overrides and a:match("^%+?[%a_][%w_%.%-]*=") then
      local k, v = a:match("^([^=]+)=(.*)$")
      opts.overrides[k] = v
      table.insert(opts.override_list, { key = k, value = v })
    elseif spec.overrides and a:match("^~[%a_][%w_%.%-]*$") then   -- ~key: remove an optional key
      opts.overrides[a] = ""
      table.insert(opts.override_list, { key = a, value = "" })
    elseif a:match("^%-%-?%a") and not tonumber(a) then
      err.usage("%s: unknown option '%s'", cmd, a)
    else
      opts.positional[#opts.positional + 1] = a
    end
    i = i + 1
  end
  local pos = spec.positional or { min = 0, max = 0 }
  local n = #opts.positional
  local names = pos.names and table.concat(pos.names, " ") or "arguments"
  if n < (pos.min or 0) then
    err.usage("%s: missing %s (usage: %s)", cmd, names, spec.usage or (cmd .. " " .. names))
  end
  if pos.max and n > pos.max then
    local a = opts.positional[pos.max + 1]
    local hint = ""
    if spec.overrides and a:match("^[%a_][%w_]*%.[%w_%.]+$") then
      hint = ("; a config override needs '=': %s=VALUE"):format(a)
    end
    err.usage("%s: unexpected argument '%s'%s (usage: %s)", cmd, a, hint,
      spec.usage or (cmd .. " " .. names))
  end
  for _, req in ipairs(spec.required or {}) do
    if opts[req] == nil then err.usage("%s: --%s is required", cmd, req) end
  end
  return opts
end

return M
