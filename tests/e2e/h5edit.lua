-- tests/e2e/h5edit.lua IN OUT [OBJ KEY VALUE]...: copies the HDF5 file IN to OUT (every dataset
-- and every attribute of the root, of every group and of every dataset) with attribute KEY of
-- object OBJ set to VALUE (an integer when it reads as one, else a number, else a string), so
-- the bad-input tests craft files with hydra alone (no Python). "-" as VALUE deletes the
-- attribute. Run as `hydra run tests/e2e/h5edit.lua IN OUT /fuse members 2`.
local h5 = require("hydra.h5")
local inp, out = arg[1], arg[2]
assert(inp and out and #arg % 3 == 2, "usage: h5edit.lua IN OUT [OBJ KEY VALUE]...")
local edits = {}
for i = 3, #arg, 3 do
  local v = arg[i + 2]
  v = math.tointeger(tonumber(v)) or tonumber(v) or v
  edits[#edits + 1] = { obj = arg[i], key = arg[i + 1], value = v }
end
local src <close> = h5.open(inp)
local dst <close> = h5.create(out)
local function copy_attrs(obj)
  local a = src:attrs(obj)
  for _, e in ipairs(edits) do
    if e.obj == obj then a[e.key] = e.value ~= "-" and e.value or nil end
  end
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do dst:set_attr(obj, k, a[k]) end
end
copy_attrs("/")
h5.walk(src, function(e)
  if e.kind == "dataset" then
    if e.dtype == "string" then
      if #e.shape == 0 then dst:write_string(e.path, src:read_string(e.path))
      else dst:write_strings(e.path, src:read_strings(e.path)) end
    else
      dst:write(e.path, src:read(e.path))
    end
  end
  copy_attrs(e.path)
end)
dst:commit()
