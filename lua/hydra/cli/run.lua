-- hydra run SCRIPT.lua [key=value ...]: runs a Lua script with the hydra library available.
local err = require("hydra.err")

return {
  summary = "run a Lua script (experiment) with the hydra library loaded",
  usage = "hydra run SCRIPT.lua [key=value ...]",
  help = [[The script can `require("hydra")`. Arguments of the form key.path=value are
collected into a table of overrides passed as the script's first argument (`local overrides = ...`)
and also available as hydra.overrides; they are typed and checked when the script loads a config
with hydra.config.load(path, overrides). The global `arg` holds the raw arguments (arg[0] is the
script). The script's return value, when an integer, is the exit status.]],
  run = function(args)
    local script = args[1]
    if not script then err.usage("hydra run: missing SCRIPT.lua (usage: hydra run SCRIPT.lua [key=value ...])") end
    local overrides, list, rest = {}, {}, {}
    for i = 2, #args do
      local k, v = args[i]:match("^([%a_][%w_%.%-]*)=(.*)$")
      if k then
        overrides[k] = v
        list[#list + 1] = { key = k, value = v }
      else
        rest[#rest + 1] = args[i]
      end
    end
    local chunk, msg = loadfile(script)
    if not chunk then
      if not io.open(script, "r") then err.fail("hydra run: cannot open '%s'", script) end
      -- a syntax error is bad input (file:line: what), not a bug: no traceback
      err.fail("hydra run: %s", msg)
    end
    local argt = { [0] = script }
    for i = 2, #args do argt[i - 1] = args[i] end
    _G.arg = argt
    local hydra = require("hydra")
    hydra.overrides = overrides
    hydra.override_list = list
    hydra.script_args = rest
    local st = chunk(overrides, rest)
    return math.tointeger(st) or 0
  end,
}
