-- lua/hydra/main.lua: the command-line dispatcher called by the host (lua/host/main.c).
-- `hydra COMMAND ...` runs lua/hydra/cli/COMMAND.lua, a module returning
--   { summary = "one line", usage = "hydra cmd ...", help = "longer text", run = function(args) }
-- run() returns nothing (exit 0) or an integer exit status; errors are raised (hydra.err).
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

local function cli_dir()
  return (rawget(_G, "HYDRA_HOME") or ".") .. "/lua/hydra/cli"
end

-- Every available command, sorted: name -> module.
function M.commands()
  local list = {}
  for _, f in ipairs(core.listdir(cli_dir())) do
    local name = f:match("^([%w_%-]+)%.lua$")
    if name then list[#list + 1] = name end
  end
  return list
end

local function load_command(name)
  if not name:match("^[%w_%-]+$") then return nil end
  local path = cli_dir() .. "/" .. name .. ".lua"
  if not core.stat(path) then return nil end
  return require("hydra.cli." .. name)
end

local closest = require("hydra.strings").closest

function M.help_text()
  local lines = {
    ("hydra %s: uncertainty-aware transformer ensembles (Hydra Ensembles)"):format(core.version),
    "",
    "usage: hydra COMMAND [ARGS...]",
    "       hydra help COMMAND     details of one command",
    "       hydra --version",
    "",
    "commands:",
  }
  for _, name in ipairs(M.commands()) do
    local c = load_command(name)
    lines[#lines + 1] = ("  %-10s %s"):format(name, c.summary or "")
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Environment: HYDRA_DATA_DIR (raw data folder), HYDRA_THREADS (threads),"
  lines[#lines + 1] = "HYDRA_SEED (test seed), HYDRA_HOME (where the Lua library lives)."
  return table.concat(lines, "\n")
end

function M.command_help(name)
  local c = load_command(name)
  if not c then
    local s = closest(name, M.commands())
    err.usage("unknown command '%s'%s; see 'hydra --help'", name,
      s and (" (did you mean '" .. s .. "'?)") or "")
  end
  local out = { "usage: " .. (c.usage or ("hydra " .. name)), "" , c.summary or "" }
  if c.help then out[#out + 1] = ""; out[#out + 1] = c.help end
  return table.concat(out, "\n")
end

function M.main(args)
  local cmd = args[1]
  if cmd == nil then
    io.stderr:write(M.help_text(), "\n")
    return 2
  end
  if cmd == "--help" or cmd == "-h" then
    print(M.help_text())
    return 0
  end
  if cmd == "--version" then
    print("hydra " .. core.version)
    return 0
  end
  if cmd == "help" then
    if args[2] then print(M.command_help(args[2])) else print(M.help_text()) end
    return 0
  end
  local c = load_command(cmd)
  if not c then
    local s = closest(cmd, M.commands())
    err.usage("unknown command '%s'%s; see 'hydra --help'", cmd,
      s and (" (did you mean '" .. s .. "'?)") or "")
  end
  local rest = table.move(args, 2, #args, 1, {})
  for _, a in ipairs(rest) do
    if a == "--help" or a == "-h" then
      print(M.command_help(cmd))
      return 0
    end
  end
  local status = c.run(rest)
  -- buffered output fails when it is written (`hydra config > full-disk/c.yaml`): that is the
  -- command's failure (lua/host/main.c checks the final flush and close too)
  local ok, why = io.stdout:flush()
  if not ok then err.fail("cannot write standard output: %s", tostring(why)) end
  return math.tointeger(status) or 0
end

return M
