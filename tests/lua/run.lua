-- tests/lua/run.lua: runs every tests/lua/test_*.lua (or those named on the command line).
-- Each file returns a table of test functions; globals are locked while tests run.
-- A test that calls check.skip(reason) is skipped: listed on stderr, counted in neither.
-- Prints "lua: N passed, N failed" (", N skipped" after it when some were) and returns exit
-- status 0 or 1.
local core = require("hydra.core")
local home = rawget(_G, "HYDRA_HOME") or "."
package.path = home .. "/tests/lua/?.lua;" .. package.path
local check = require("check")

local only = {}
for _, a in ipairs(arg) do only[a] = true end

local files = {}
for _, f in ipairs(core.listdir(home .. "/tests/lua")) do
  local name = f:match("^(test_[%w_]+)%.lua$")
  if name and (next(only) == nil or only[name] or only[f]) then files[#files + 1] = name end
end

-- lock _G: any new global is a bug
setmetatable(_G, {
  __newindex = function(_, k) error("attempt to set global '" .. tostring(k) .. "'", 2) end,
  __index = function(_, k) error("attempt to read undefined global '" .. tostring(k) .. "'", 2) end,
})

local passed, failed, skipped = 0, 0, 0
for _, name in ipairs(files) do
  local ok, T = pcall(dofile, home .. "/tests/lua/" .. name .. ".lua")
  if not ok then
    io.stderr:write(("%s: cannot load: %s\n"):format(name, check.message(T)))
    failed = failed + 1
  else
    local names = {}
    for k, v in pairs(T) do if type(v) == "function" then names[#names + 1] = k end end
    table.sort(names)
    for _, tn in ipairs(names) do
      local tok, e = xpcall(T[tn], function(m)
        if check.is_skip(m) then return m end
        return debug.traceback(check.message(m), 2)
      end)
      if tok then passed = passed + 1
      elseif check.is_skip(e) then
        skipped = skipped + 1
        io.stderr:write(("SKIP %s.%s: %s\n"):format(name, tn, e.message))
      else
        failed = failed + 1
        io.stderr:write(("FAIL %s.%s: %s\n"):format(name, tn, e))
      end
      collectgarbage()
    end
  end
end
setmetatable(_G, nil)
check.cleanup()
print(("lua: %d passed, %d failed%s"):format(passed, failed,
  skipped > 0 and (", %d skipped"):format(skipped) or ""))
return failed == 0 and 0 or 1
