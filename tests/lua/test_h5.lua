-- tests/lua/test_h5.lua: the HDF5 binding (hydra.h5 / hydra.H5File) and `hydra info`.
local check = require("check")
local core = require("hydra.core")
local h5 = require("hydra.h5")
local eq, ok, raises = check.eq, check.ok, check.raises

local T = {}

local DTYPES = { "float32", "float64", "uint8", "int8", "int16", "int32", "int64" }

local function exists(path) return core.stat(path) ~= nil end

local function count_tmp(dir, base)
  local n = 0
  for _, name in ipairs(core.listdir(dir)) do
    if name:find("." .. base .. ".tmp-", 1, true) == 1 then n = n + 1 end
  end
  return n
end

-- a tensor of dtype dt and the given shape with values that fit every dtype
local function sample(dt, ...)
  local t = core.tensor(dt, ...)
  local flat = {}
  for i = 1, t:numel() do
    local v = (i * 37) % 120 - (dt == "uint8" and 0 or 60)
    if dt:match("^float") then v = v + 0.5 end
    flat[i] = v
  end
  if t:numel() > 0 then return core.from_table(dt, flat, t:shape()) end
  return t
end

local function same_tensor(a, b, what)
  eq(a:dtype(), b:dtype(), what .. " dtype")
  check.same(a:shape(), b:shape(), what .. " shape")
  check.same(a:flat(), b:flat(), what .. " values")
end

function T.roundtrip_every_dtype_and_rank()
  local d = check.tmpdir()
  local p = d .. "/all.h5"
  local shapes = { {}, { 5 }, { 2, 3 }, { 2, 1, 3 }, { 1, 2, 2, 2 }, { 3, 0, 2 } }
  local want = {}
  do
    local f <close> = h5.create(p)
    for _, dt in ipairs(DTYPES) do
      for r, sh in ipairs(shapes) do
        local t = sample(dt, table.unpack(sh))
        local name = ("/%s/r%d"):format(dt, r)
        f:write(name, t)
        want[name] = t
      end
    end
    f:commit()
  end
  local g <close> = h5.open(p)
  for name, t in pairs(want) do same_tensor(g:read(name), t, name) end
  local z = g:read("/int16/r6")
  check.same(z:shape(), { 3, 0, 2 }, "zero-size dim kept")
  -- conversion on read
  local c = g:read("/int16/r3", "float64")
  eq(c:dtype(), "float64", "converted dtype")
  check.same(c:flat(), { -23.0, 14.0, 51.0, -32.0, 5.0, 42.0 }, "int16 -> float64 values")
  local s = g:read("/float64/r1", "int32")
  eq(s:dtype(), "int32", "scalar converted")
  check.same(s:shape(), {}, "rank 0 shape")
end

function T.strings_and_string_arrays()
  local p = check.tmpdir() .. "/s.h5"
  local words = { "alpha", "", "naïve café", ("x"):rep(300) }
  do
    local f <close> = h5.create(p)
    f:write_string("/meta/text", "hello, world")
    f:write_strings("/vocab", words)
    f:write_strings("/empty", {})
    f:commit()
  end
  local g <close> = h5.open(p)
  eq(g:read_string("meta/text"), "hello, world", "scalar string")
  check.same(g:read_strings("/vocab"), words, "string array")
  check.same(g:read_strings("/empty"), {}, "empty string array")
  raises(("h5: '/vocab' in '%s' holds strings, not numbers"):format(p), function()
    return g:read("/vocab")
  end)
  local f <close> = h5.create(check.tmpdir() .. "/bad.h5")
  raises("bad argument #2 to 'write_strings' (entry 2 is a number, not a string)", function()
    f:write_strings("/v", { "a", 3 })
  end)
  raises("bad argument #2 to 'write_string' (string contains a NUL byte)", function()
    f:write_string("/v", "a\0b")
  end)
end

function T.attributes_of_each_type()
  local p = check.tmpdir() .. "/a.h5"
  do
    local f <close> = h5.create(p)
    f:write("/params/w", sample("float32", 2, 2))
    f:set_attr("/", "kind", "vit")
    f:set_attr("/", "d_model", 128)
    f:set_attr("/", "lr", 3e-4)
    f:set_attr("/", "whole", 2.0)
    f:set_attr("/params/w", "ints", { 1, -2, 3 })
    f:set_attr("/params/w", "floats", { 0.5, 2, -1.25 })
    f:set_attr("/params", "none", {})
    f:set_attr("/config", "depth", 4)           -- creates the group
    f:set_attr("/config", "depth", 6)           -- replaces
    raises("bad argument #3 to 'set_attr' (string, number or array of numbers expected, "
      .. "got boolean)",
      function() f:set_attr("/", "flag", true) end)
    raises("bad argument #3 to 'set_attr' (entry 2 is a string, not a number)",
      function() f:set_attr("/", "mixed", { 1, "x" }) end)
    f:commit()
  end
  local g <close> = h5.open(p)
  eq(g:attr("/", "kind"), "vit", "string attr")
  eq(math.type(g:attr("/", "d_model")), "integer", "integer stays integer")
  eq(g:attr("/", "d_model"), 128, "d_model")
  eq(g:attr("/", "lr"), 3e-4, "lr")
  eq(math.type(g:attr("/", "whole")), "float", "float stays float")
  eq(g:attr("config", "depth"), 6, "replaced attribute")
  check.same(g:attr("/params/w", "ints"), { 1, -2, 3 }, "int array")
  eq(math.type(g:attr("/params/w", "floats")[2]), "float", "mixed array is float64")
  check.same(g:attr("/params/w", "floats"), { 0.5, 2.0, -1.25 }, "float array")
  check.same(g:attr("/params", "none"), {}, "empty array")
  check.same(g:attrs("/"), { kind = "vit", d_model = 128, lr = 3e-4, whole = 2.0 }, "attrs")
  check.same(g:attrs("/config"), { depth = 6 }, "attrs of a created group")
  raises(("h5: no attribute 'nope' on '/' in '%s'"):format(p), function()
    return g:attr("/", "nope")
  end)
  raises(("h5: no object '/missing' in '%s'"):format(p), function()
    return g:attrs("/missing")
  end)
end

function T.list_stat_exists_read_all()
  local p = check.tmpdir() .. "/l.h5"
  do
    local f <close> = h5.create(p)
    f:write("/params/head.weight", sample("float32", 10, 4))
    f:write("/params/blocks.0.norm1.bias", sample("float32", 4))
    f:write("/head_gates", sample("float32", 2, 3))
    f:write_string("/meta/name", "m")
    f:commit()
  end
  ok(h5.exists(p), "h5.exists on a file")
  ok(not h5.exists(p .. ".nope"), "h5.exists on a missing file")
  local g <close> = h5.open(p)
  local names = {}
  for i, e in ipairs(g:list("/")) do names[i] = e.name .. ":" .. e.kind end
  check.same(names, { "head_gates:dataset", "meta:group", "params:group" }, "sorted children")
  local ps = g:list("params")
  eq(ps[1].path, "/params/blocks.0.norm1.bias", "path")
  eq(ps[2].dtype, "float32", "dtype")
  check.same(ps[2].shape, { 10, 4 }, "shape")
  check.same(g:stat("/meta/name"), { name = "name", path = "/meta/name", kind = "dataset",
                                     dtype = "string", shape = {} }, "stat")
  ok(g:exists("/params/head.weight") and g:exists("meta") and not g:exists("/params/x/y"),
     "exists")
  eq(g:path(), p, "path()")
  ok(not g:writable(), "read-only")
  local all = h5.read_all(p)
  same_tensor(all["params/head.weight"], sample("float32", 10, 4), "read_all tensor")
  eq(all["meta/name"], "m", "read_all string")
  local params = h5.read_all(p, "/params")
  ok(params["head.weight"] and params["blocks.0.norm1.bias"] and not params["head_gates"],
     "read_all of a group")
end

function T.close_semantics_and_closed_errors()
  local d = check.tmpdir()
  local p = d .. "/c.h5"
  do
    local f <close> = h5.create(p)
    f:write("/x", sample("int32", 3))
    ok(not exists(p), "the real path does not exist before commit")
    eq(count_tmp(d, "c.h5"), 1, "one temporary file while writing")
  end                                   -- closed without commit: discarded
  ok(not exists(p), "uncommitted <close> leaves nothing under the real name")
  eq(count_tmp(d, "c.h5"), 0, "uncommitted <close> removes the temporary file")

  local ok2 = pcall(function()
    local f <close> = h5.create(p)
    f:write("/x", sample("int32", 3))
    error("boom")
  end)
  ok(not ok2 and not exists(p) and count_tmp(d, "c.h5") == 0, "an error before commit discards")

  do                                    -- garbage collection discards too
    local f = h5.create(p)
    f:write("/x", sample("int32", 3))
    f = nil                             -- luacheck: ignore
    collectgarbage()
    collectgarbage()
  end
  eq(count_tmp(d, "c.h5"), 0, "__gc removes the temporary file")

  local f = h5.create(p)
  f:write("/x", sample("int32", 3))
  f:commit()
  ok(exists(p), "committed")
  raises("h5: attempt to use a closed file", function() f:write("/y", sample("int32", 1)) end)
  raises("h5: attempt to use a closed file", function() f:commit() end)
  f:close()                             -- idempotent
  f:close()
  local g = h5.open(p)
  g:close()
  raises("h5: attempt to use a closed file", function() return g:read("/x") end)
  raises("h5: attempt to use a closed file", function() return g:list("/") end)
  eq(tostring(g), "hydra.H5File (closed)", "tostring of a closed file")
  ok(not g:is_open(), "is_open")

  -- commit over an existing file replaces it
  do
    local w <close> = h5.create(p)
    w:write_string("/v", "second")
    w:commit()
  end
  local r <close> = h5.open(p)
  ok(not r:exists("/x") and r:read_string("/v") == "second", "commit replaced the older file")
  raises(("h5: cannot write '/y': '%s' is open for reading"):format(p), function()
    r:write("/y", sample("int32", 1))
  end)
end

function T.error_messages()
  local d = check.tmpdir()
  raises(("h5: cannot open '%s/missing.h5': no such file"):format(d), function()
    return h5.open(d .. "/missing.h5")
  end)
  check.write_file(d .. "/text.h5", "just some text, not HDF5 at all, but long enough\n")
  raises(("h5: '%s/text.h5' is not an HDF5 file"):format(d), function()
    return h5.open(d .. "/text.h5")
  end)
  raises(("h5: cannot create '%s/no/x.h5': folder '%s/no' does not exist"):format(d, d), function()
    return h5.create(d .. "/no/x.h5")
  end)
  local p = d .. "/e.h5"
  do
    local f <close> = h5.create(p)
    f:write("/w", sample("float32", 2, 3))
    raises(("h5: '/w' already exists in '%s'"):format(p), function()
      f:write("/w", sample("float32", 1))
    end)
    f:commit()
  end
  local g <close> = h5.open(p)
  raises(("h5: no dataset '/train/images' in '%s'"):format(p), function()
    return g:read("/train/images")
  end)
  raises("bad argument #2 to 'read' (tensor: unknown dtype 'float8' (known: float32, float64, "
    .. "uint8, int8, int16, int32, int64))", function() return g:read("/w", "float8") end)
  raises("h5.open: path must be a string, got nil", function() return h5.open() end)
end

-- the same content written by two processes gives byte-identical files
function T.byte_identical_across_processes()
  local d = check.tmpdir()
  local script = d .. "/w.lua"
  check.write_file(script, [[
local out = ...
local core = require("hydra.core")
local h5 = require("hydra").h5
local f <close> = h5.create(out.path)
local t = core.tensor("float32", 100, 300)   -- 120 KB: chunked + compressed
for i = 1, 100 do t:set(i, 1 + (i % 300), i * 0.5) end
f:write("/data/x", t)
f:write_strings("/vocab", { "a", "bb", "ccc" })
f:set_attr("/meta", "name", "same")
f:set_attr("/meta", "n", { 1, 2, 3 })
f:commit()
]])
  local c1 = check.hydra(("run %s path=%s/one.h5"):format(script, d))
  local c2 = check.hydra(("run %s path=%s/two.h5"):format(script, d))
  eq(c1, 0, "first writer")
  eq(c2, 0, "second writer")
  local a, b = check.read_file(d .. "/one.h5"), check.read_file(d .. "/two.h5")
  ok(a and #a > 0 and a == b, "byte-identical files")
end

function T.info_command()
  local d = check.tmpdir()
  local p = d .. "/m.h5"
  do
    local f <close> = h5.create(p)
    f:set_attr("/", "kind", "vit")
    f:set_attr("/", "d_model", 128)
    f:write("/params/head.weight", sample("float32", 10, 128))
    f:write("/params/head.bias", core.from_table("float32", { 0.5, -1 }))
    f:set_attr("/params/head.bias", "note", { 1.5, 2 })
    f:write_string("/meta/name", 'say "hi"\n')
    f:commit()
  end
  local code, out, err = check.hydra("info " .. p)
  eq(code, 0, "info status")
  eq(err, "", "info stderr")
  eq(out, table.concat({
    "/                    (group)",
    "  @d_model = 128",
    '  @kind = "vit"',
    "/meta/               (group)",
    "/meta/name           string []",
    "/params/             (group)",
    "/params/head.bias    float32 [2]",
    "  @note = [1.5, 2.0]",
    "/params/head.weight  float32 [10,128]",
    "" }, "\n"), "info output")
  code, out = check.hydra("info --data " .. p)
  eq(code, 0, "info --data status")
  ok(out:find('/meta/name           string []\n    = "say \\"hi\\"\\n"\n', 1, true),
     "--data shows a quoted string: " .. out)
  ok(out:find("/params/head.bias    float32 [2]\n    = [0.5, -1.0]\n", 1, true),
     "--data shows small values")
  ok(not out:find("head.weight   float32 [10,128]\n    =", 1, true), "large datasets skipped")

  code, out, err = check.hydra("info " .. d .. "/missing.h5")
  eq(code, 1, "missing file status")
  eq(err, ("hydra: h5: cannot open '%s/missing.h5': no such file\n"):format(d), "missing file")
  check.write_file(d .. "/t.txt", "text\n")
  code, out, err = check.hydra("info " .. d .. "/t.txt")
  eq(code, 1, "non-HDF5 status")
  eq(err, ("hydra: h5: '%s/t.txt' is not an HDF5 file\n"):format(d), "non-HDF5")
  code, out, err = check.hydra("info")
  eq(code, 2, "missing argument status")
  eq(err, "hydra: hydra info: missing FILE.h5 (usage: hydra info FILE.h5 [--data] [--limit N])\n",
     "usage message")
end

return T
