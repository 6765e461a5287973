-- lua/hydra/err.lua: hydra error objects.
-- A user-facing error (bad input, bad config, missing file) is raised as a table
-- { message = "...", status = 1 }; the host prints the message without a traceback and exits
-- with `status`. A usage error has status 2. Anything else raised (a string) is a bug or a
-- script error and gets a traceback.
local M = {}

local Error = {}
Error.__index = Error
Error.__tostring = function(e) return e.message end
M.Error = Error

-- Raises a user error (exit status 1). fmt/... as string.format.
function M.fail(fmt, ...)
  local msg = select("#", ...) > 0 and fmt:format(...) or fmt
  error(setmetatable({ message = msg, status = 1 }, Error), 0)
end

-- Raises a usage error (exit status 2).
function M.usage(fmt, ...)
  local msg = select("#", ...) > 0 and fmt:format(...) or fmt
  error(setmetatable({ message = msg, status = 2 }, Error), 0)
end

-- True when e is a hydra error object.
function M.is_error(e)
  return getmetatable(e) == Error
end

-- The text of any error value.
function M.message(e)
  if M.is_error(e) then return e.message end
  return tostring(e)
end

-- Calls fn(...) and turns a core error (a string from hydra.core) into a user error with the
-- given context prefix, so CLI commands print clean messages for bad inputs.
function M.wrap(prefix, fn, ...)
  local res = table.pack(pcall(fn, ...))
  if res[1] then return table.unpack(res, 2, res.n) end
  local e = res[2]
  if M.is_error(e) then error(e, 0) end
  local msg = tostring(e):gsub("^[^:]*%.lua:%d+: ", "")
  M.fail(prefix and (prefix .. ": " .. msg) or msg)
end

return M
