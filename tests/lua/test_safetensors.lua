-- tests/lua/test_safetensors.lua: the safetensors binding (core.safetensors_open / _write).
local check = require("check")
local core = require("hydra.core")
local eq, ok, raises, raises_has = check.eq, check.ok, check.raises, check.raises_has

local T = {}

local function tensor(shape, f)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  if n == 0 then return core.tensor("float32", table.unpack(shape)) end
  local flat = {}
  for i = 1, n do flat[i] = f(i) end
  return core.from_table("float32", flat, shape)
end

local function count_tmp(dir)
  local n = 0
  for _, name in ipairs(core.listdir(dir)) do
    if name:find(".tmp-", 1, true) then n = n + 1 end
  end
  return n
end

function T.write_read_round_trip()
  local d = check.tmpdir()
  local p = d .. "/m.safetensors"
  local w = tensor({ 3, 2 }, function(i) return i / 8 - 0.5 end)
  local b = tensor({ 2 }, function(i) return -i end)
  local s = tensor({}, function() return 7.25 end)
  local e = tensor({ 2, 0 }, function() return 0 end)
  core.safetensors_write(p, {
    { name = "w", tensor = w }, { name = "b", tensor = b }, { name = "s", tensor = s },
    { name = "e", tensor = e },
  }, { format = "pt", ["hydra.kind"] = "member" })
  eq(count_tmp(d), 0, "temporary files")
  local f <close> = core.safetensors_open(p)
  check.same(f:names(), { "b", "e", "s", "w" }, "names in file order")
  check.same(f:info("w"), { dtype = "F32", shape = { 3, 2 } }, "info")
  check.same(f:info("s"), { dtype = "F32", shape = {} }, "scalar info")
  check.same(f:metadata(), { format = "pt", ["hydra.kind"] = "member" }, "metadata")
  local r = f:read("w")
  eq(r:dtype(), "float32", "dtype")
  check.same(r:shape(), { 3, 2 }, "shape")
  check.same(r:flat(), w:flat(), "values")
  check.same(f:read("s"):flat(), { 7.25 }, "scalar")
  check.same(f:read("e"):shape(), { 2, 0 }, "empty shape")
  eq(tostring(f), ("SafeTensors('%s', 4 tensors)"):format(p), "tostring")
  f:close()
  f:close()
  raises("safetensors: attempt to use a closed file", function() return f:names() end)
end

function T.write_bf16_and_f16()
  local d = check.tmpdir()
  local t = tensor({ 4 }, function(i) return ({ 1, 1 + 2 ^ -8, 65520, -2 ^ -25 })[i] end)
  local cases = { { "BF16", { 1, 1, 65536, -2 ^ -25 } }, { "F16", { 1, 1 + 2 ^ -8, 1 / 0, -0.0 } } }
  for _, c in ipairs(cases) do
    local p = d .. "/n" .. c[1] .. ".safetensors"
    core.safetensors_write(p, { { name = "x", tensor = t } }, nil, c[1])
    local f <close> = core.safetensors_open(p)
    check.same(f:info("x"), { dtype = c[1], shape = { 4 } }, c[1] .. " info")
    check.same(f:read("x"):flat(), c[2], c[1] .. " values (round to nearest even)")
  end
end

function T.reads_the_torch_fixture()
  local f <close> = core.safetensors_open("tests/ref/st_dtypes.safetensors")
  eq(f:info("f16").dtype, "F16", "f16 dtype")
  local x, y = f:read("bf16"), f:read("bf16.float")
  check.same(x:shape(), y:shape(), "shape")
  -- the first 6 specials: +0, -0, +inf, -inf and two quiet NaNs
  local a, b = x:flat(), y:flat()
  for i = 1, 4 do eq(a[i], b[i], "bf16 special " .. i) end
  ok(a[5] ~= a[5] and a[6] ~= a[6], "NaN stays NaN")
  ok(f:metadata().torch_version ~= nil, "metadata")
end

function T.errors_are_one_line()
  local d = check.tmpdir()
  local p = d .. "/bad.safetensors"
  check.write_file(p, "\1\0\0\0\0\0\0\0{")
  raises_has(("safetensors: '%s': header is not valid JSON: "):format(p), function()
    return core.safetensors_open(p)
  end)
  raises(("safetensors: cannot open '%s/none': no such file"):format(d), function()
    return core.safetensors_open(d .. "/none")
  end)
  local g = d .. "/g.safetensors"
  core.safetensors_write(g, { { name = "w", tensor = tensor({ 1 }, function() return 1 end) } })
  local f <close> = core.safetensors_open(g)
  raises(("safetensors: '%s': no tensor 'v'"):format(g), function() return f:read("v") end)
  raises(("safetensors: '%s': no tensor 'v'"):format(g), function() return f:info("v") end)
  check.same(f:metadata(), {}, "no metadata")
  local i64 = d .. "/i64.safetensors"
  local hdr = '{"position_ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}'
  check.write_file(i64, string.pack("<I8", #hdr) .. hdr .. ("\0"):rep(8))
  local h <close> = core.safetensors_open(i64)
  check.same(h:info("position_ids"), { dtype = "I64", shape = { 1 } }, "I64 listed")
  raises(("safetensors: '%s': 'position_ids' has dtype I64; only F32, F16, BF16 and F64 can be "
          .. "read as float32"):format(i64), function() return h:read("position_ids") end)
end

function T.write_argument_errors()
  local d = check.tmpdir()
  local p = d .. "/w.safetensors"
  local t = tensor({ 2 }, function(i) return i end)
  raises("safetensors_write: entry 1 must be a table {name=, tensor=} (got number)", function()
    core.safetensors_write(p, { 1 })
  end)
  raises("safetensors_write: entry 1: name must be a string (got nil)", function()
    core.safetensors_write(p, { { tensor = t } })
  end)
  raises("safetensors_write: entry 1 ('w'): tensor must be a hydra.Tensor (got table)", function()
    core.safetensors_write(p, { { name = "w", tensor = {} } })
  end)
  raises("safetensors_write: entry 1 ('w'): tensor is int32, expected float32", function()
    core.safetensors_write(p, { { name = "w", tensor = core.tensor("int32", 2) } })
  end)
  raises("safetensors_write: metadata keys and values must be strings (got string = number)",
    function() core.safetensors_write(p, { { name = "w", tensor = t } }, { n = 1 }) end)
  raises(("safetensors: cannot write '%s': tensor name 'w' appears twice"):format(p), function()
    core.safetensors_write(p, { { name = "w", tensor = t }, { name = "w", tensor = t } })
  end)
  raises("bad argument #4 to 'safetensors_write' (dtype must be F32, F16 or BF16 (got 'F64'))",
    function() core.safetensors_write(p, { { name = "w", tensor = t } }, nil, "F64") end)
  eq(core.stat(p), nil, "nothing written")
  eq(count_tmp(d), 0, "temporary files")
end

-- Allocation-failure injection (as tests/lua/test_alloc.lua): under HY_DEBUG (make MODE=asan)
-- HYDRA_FAIL_ALLOC=N fails the Nth hy_x* allocation. A child writes a file, opens it, reads a
-- tensor and reads the torch fixture; for every N the run must end in a clean "out of memory"
-- Lua error with no sanitizer report, and a failed write must leave no file at all.
local CHILD = [[
local core = require("hydra.core")
local d = arg[1]
local c0 = core.alloc_count()
local t = core.from_table("float32", { { 1, 2 }, { 3, 4 } })
core.safetensors_write(d .. "/o.safetensors",
  { { name = "b", tensor = t }, { name = "a", tensor = t } }, { format = "pt", k = "v" }, "BF16")
local c1 = core.alloc_count()
local f = core.safetensors_open(d .. "/o.safetensors")
local x = f:read("a")
assert(f:metadata().k == "v" and #f:names() == 2 and x:get(2, 2) == 4)
f:close()
local g = core.safetensors_open("tests/ref/st_dtypes.safetensors")
g:read("f16")
g:close()
print(("debug %s phases %d %d %d"):format(tostring(core.debug), c0, c1, core.alloc_count()))
]]

function T.allocation_failures_are_clean()
  local dir = check.tmpdir()
  local script = dir .. "/child.lua"
  check.write_file(script, CHILD)
  local work = check.tmpdir()
  local exe = os.getenv("HYDRA") or "./hydra"
  local function run(n)
    for _, f in ipairs(core.listdir(work)) do os.remove(work .. "/" .. f) end
    local out, errf = dir .. "/out", dir .. "/err"
    local _, _, code = os.execute(("env OMP_NUM_THREADS=1 HYDRA_THREADS=1 %s %s run %s %s >%s 2>%s")
      :format(n and ("HYDRA_FAIL_ALLOC=" .. n) or "", exe, script, work, out, errf))
    return code, check.read_file(out) or "", check.read_file(errf) or ""
  end
  local code, out, err = run(nil)
  eq(code, 0, "child without injection: " .. err)
  local dbg, c0, c1, c3 = out:match("debug (%a+) phases (%d+) (%d+) (%d+)")
  ok(dbg, "child output: " .. out)
  if dbg ~= "true" then check.skip("not a HY_DEBUG build; use make MODE=asan") end
  c0, c1, c3 = tonumber(c0), tonumber(c1), tonumber(c3)
  for n = c0 + 1, c3 do
    code, out, err = run(n)
    local where = ("HYDRA_FAIL_ALLOC=%d (write %d..%d, read ..%d)"):format(n, c0 + 1, c1, c3)
    ok(not err:find("Sanitizer", 1, true) and not err:find("runtime error", 1, true),
      where .. ": sanitizer report\n" .. err)
    eq(code, 1, where .. ": exit status (stderr: " .. err .. ")")
    ok(err:find("out of memory", 1, true), where .. ": not an out-of-memory error: " .. err)
    eq(table.concat(core.listdir(work), " "), n <= c1 and "" or "o.safetensors",
      where .. ": files left")
  end
end

return T
