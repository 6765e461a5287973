-- lua/hydra/init.lua: require("hydra"), the public facade experiments use.
-- Submodules load on first use: hydra.config, hydra.h5, hydra.data, hydra.model, ... are the
-- files lua/hydra/<name>.lua. hydra.fail / hydra.usage raise clean user errors.
local err = require("hydra.err")
local core = require("hydra.core")

local M = {
  version = core.version,
  fail = err.fail,
  usage = err.usage,
  home = rawget(_G, "HYDRA_HOME"),
}

setmetatable(M, {
  __index = function(t, k)
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then return nil end
    local ok, mod = pcall(require, "hydra." .. k)
    if not ok then
      if tostring(mod):find("module 'hydra." .. k .. "' not found", 1, true) then return nil end
      error(mod, 2)
    end
    rawset(t, k, mod)
    return mod
  end,
})

return M
