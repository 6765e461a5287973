-- lua/hydra/shards.lua: a sharded Hugging Face checkpoint (model.safetensors.index.json and its
-- shard files) read as one safetensors file (`hydra import DIR`, lua/hydra/import.lua).
--
--   local shards = require("hydra.shards")
--   local h = shards.open(who, "DIR/model.safetensors.index.json")
--   h:names(), h:info(name), h:read(name), h:metadata(), h:close(), h.sha256
--
-- The index is the transformers layout: {"metadata": {...}, "weight_map": {"tensor name":
-- "shard file", ...}}, shard files relative to the index's folder. Every shard is opened with
-- the safetensors reader (core/io/safetensors.h, which validates each header), and the index
-- must name exactly the tensors found; each of these is an error naming the file and tensor:
--   a shard path that is absolute or has a ".." component (it would leave the folder);
--   a listed shard that does not exist;
--   a tensor the index puts in a shard that does not hold it;
--   a tensor held by a shard the index does not put it in (another shard, or none);
--   the same tensor in two shards;
--   a shard file of the folder ("*-NNNNN-of-NNNNN.safetensors") the index does not list.
-- Shards' __metadata__ are merged (a key with two different values fails). h.sha256 is the
-- SHA-256 of the index's bytes followed by "<shard> <sha256>\n" for each shard in sorted order:
-- the provenance of the whole checkpoint.
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

M.INDEX = "model.safetensors.index.json"

local Sharded = {}
Sharded.__index = Sharded

function Sharded:names() return self.order end

function Sharded:info(name)
  local s = self.where[name]
  if not s then err.fail("safetensors: '%s': no tensor '%s'", self.path, name) end
  return s:info(name)
end

function Sharded:read(name)
  local s = self.where[name]
  if not s then err.fail("safetensors: '%s': no tensor '%s'", self.path, name) end
  return s:read(name)
end

function Sharded:metadata() return self.meta end

function Sharded:close()
  for _, s in ipairs(self.handles) do s:close() end
  self.handles = {}
end

-- The folder of path ("." for a bare name).
local function dirname(path)
  local d = path:match("^(.*)/[^/]*$")
  if d == nil then return "." end
  return d == "" and "/" or d
end

-- A shard path of the index is a relative path inside the folder.
local function check_shard_path(who, index, shard, tensor)
  if type(shard) ~= "string" or shard == "" then
    err.fail("%s: '%s': weight_map of '%s' must be a shard file name", who, index, tensor)
  end
  if shard:sub(1, 1) == "/" then
    err.fail("%s: '%s': shard '%s' of tensor '%s' is an absolute path (shards must be inside "
      .. "the index's folder)", who, index, shard, tensor)
  end
  for part in shard:gmatch("[^/]+") do
    if part == ".." then
      err.fail("%s: '%s': shard '%s' of tensor '%s' leaves the index's folder", who, index,
        shard, tensor)
    end
  end
end

-- Opens the checkpoint of index file `index`; who prefixes the messages.
function M.open(who, index)
  local text do
    local f, e = io.open(index, "rb")
    if not f then err.fail("%s: cannot read '%s': %s", who, index, e) end
    text = f:read("a")
    f:close()
  end
  local ok, j = pcall(core.json_decode, text, index)
  if not ok then err.fail("%s: %s", who, (tostring(j):gsub("^json: ", ""))) end
  if type(j) ~= "table" or type(j.weight_map) ~= "table" then
    err.fail("%s: '%s': not a safetensors index (no weight_map object)", who, index)
  end
  local dir = dirname(index)
  -- the index: tensor -> shard, in sorted tensor order
  local listed, by_shard, shard_names = {}, {}, {}
  local tnames = {}
  for t in pairs(j.weight_map) do
    if type(t) ~= "string" then err.fail("%s: '%s': weight_map keys must be names", who, index) end
    tnames[#tnames + 1] = t
  end
  table.sort(tnames)
  if #tnames == 0 then err.fail("%s: '%s': weight_map lists no tensor", who, index) end
  for _, t in ipairs(tnames) do
    local s = j.weight_map[t]
    check_shard_path(who, index, s, t)
    listed[t] = s
    if not by_shard[s] then
      by_shard[s] = {}
      shard_names[#shard_names + 1] = s
    end
    table.insert(by_shard[s], t)
  end
  table.sort(shard_names)
  local h = setmetatable({ path = index, handles = {}, where = {}, shard_of = {}, order = {},
                           meta = {} }, Sharded)
  local okr, e = pcall(function()
    local meta_from = {}
    local hashes = { text }
    for _, s in ipairs(shard_names) do
      local p = dir .. "/" .. s
      if core.stat(p) ~= "file" then
        err.fail("%s: '%s': shard '%s' of tensor '%s' does not exist", who, index, s,
          by_shard[s][1])
      end
      local st = err.wrap(who, core.safetensors_open, p)
      h.handles[#h.handles + 1] = st
      hashes[#hashes + 1] = ("%s %s\n"):format(s, core.file_sha256(p))
      local held = {}
      for _, t in ipairs(st:names()) do
        held[t] = true
        if h.where[t] then
          err.fail("%s: '%s': tensor '%s' is in two shards ('%s' and '%s')", who, index, t,
            h.shard_of[t], s)
        end
        if listed[t] == nil then
          err.fail("%s: '%s': tensor '%s' of shard '%s' is not in the index's weight_map", who,
            index, t, s)
        end
        if listed[t] ~= s then
          err.fail("%s: '%s': tensor '%s' is in shard '%s', but the index puts it in '%s'", who,
            index, t, s, listed[t])
        end
        h.where[t], h.shard_of[t] = st, s
        h.order[#h.order + 1] = t
      end
      for _, t in ipairs(by_shard[s]) do
        if not held[t] then
          err.fail("%s: '%s': tensor '%s' is missing from its shard '%s'", who, index, t, s)
        end
      end
      for k, v in pairs(st:metadata() or {}) do
        if h.meta[k] ~= nil and h.meta[k] ~= v then
          err.fail("%s: '%s': __metadata__ %s differs between shards '%s' and '%s'", who, index,
            k, meta_from[k], s)
        end
        h.meta[k], meta_from[k] = v, s
      end
    end
    -- shard-named files of the folder that the index leaves out
    local okl, files = pcall(core.listdir, dir)
    if okl then
      local base = index:match("([^/]*)$"):gsub("%.index%.json$", "")   -- model.safetensors
      local stem = base:gsub("%.safetensors$", "")
      for _, n in ipairs(files) do
        if n:find("^" .. stem:gsub("%p", "%%%0") .. "%-%d+%-of%-%d+%.safetensors$")
            and not by_shard[n] then
          err.fail("%s: '%s': shard file '%s' of the folder is not listed in the index", who,
            index, n)
        end
      end
    end
    h.sha256 = core.hash_string(table.concat(hashes), "sha256")
  end)
  if not okr then
    h:close()
    error(e, 0)
  end
  return h
end

return M
