-- tests/lua/test_data.lua: the dataset framework (lua/hydra/data.lua) with small recipes written
-- into a temporary folder: prepare + /meta, missing input and checksum mismatch messages, no
-- prepared file after a failure, determinism (byte-identical re-prepare), up-to-date skipping,
-- options, dependencies, and the `hydra data` command's exit statuses.
local check = require("check")
local core = require("hydra.core")
local data = require("hydra.data")
local h5 = require("hydra.h5")

local T = {}

-- A sandbox: recipes/, prepared/, raw/ (as HYDRA_DATA_DIR) and a small idx input.
local function sandbox()
  local d = check.tmpdir()
  core.mkdir_p(d .. "/recipes")
  core.mkdir_p(d .. "/raw/toy")
  local img = core.tensor("uint8", 4, 28, 28)
  img:fill(7)
  img:set(2, 5, 5, 200)
  core.idx_write(d .. "/raw/toy/images.idx.gz", img, true)
  local lab = core.from_table("uint8", { 3, 1, 4, 1 })
  core.idx_write(d .. "/raw/toy/labels.idx", lab)
  local opts = { recipes_dir = d .. "/recipes", prepared_dir = d .. "/prepared",
                 data_dir = d .. "/raw", debian_dir = d .. "/debian", quiet = true }
  return d, opts
end

local function write_recipe(d, name, body)
  check.write_file(d .. "/recipes/" .. name .. ".lua", body)
end

local TOY = [[
local core = require("hydra.core")
local data = require("hydra.data")
return {
  name = "toy", role = "image-ood", kind = "image", licence = "test", description = "toy set",
  inputs = {
    { name = "images", from = "data_dir", file = "toy/images.idx.gz", sha256 = "%s",
      source = "https://example.org/toy" },
    { name = "labels", from = "data_dir", file = "toy/labels.idx", sha256 = "%s" },
  },
  seed = 3,
  options = { scale = 1, fail = false },
  prepare = function(ctx)
    if ctx.options.fail then error("recipe exploded on purpose") end
    local im = core.idx_read(ctx.input("images"))
    data.write_image_split(ctx.out, "test", im, data.const_labels(im:size(1), -1))
    ctx.out:write("/test/orig_labels", data.as_int16(core.idx_read(ctx.input("labels"))))
    ctx.meta("scale", ctx.options.scale)
  end,
}
]]

local function toy(d, img_sha)
  local s1 = img_sha or core.hash_file(d .. "/raw/toy/images.idx.gz", "sha256")
  local s2 = core.hash_file(d .. "/raw/toy/labels.idx", "sha256")
  write_recipe(d, "toy", TOY:format(s1, s2))
end

function T.prepare_writes_splits_and_meta()
  local d, opts = sandbox()
  toy(d)
  local p = data.prepare("toy", opts)
  check.eq(p, d .. "/prepared/toy.h5", "path")
  local g <close> = h5.open(p)
  local im = g:read("/test/images")
  check.eq(im:dtype(), "uint8", "images dtype")
  check.eq(im:get(2, 5, 5), 200, "pixel")
  check.eq(g:read("/test/labels"):get(3), -1, "OOD label")
  check.eq(g:read("/test/orig_labels"):get(3), 4, "orig label")
  local m = g:attrs("/meta")
  check.eq(m.name, "toy", "meta name")
  check.eq(m.role, "image-ood", "meta role")
  check.eq(m.seed, 3, "meta seed")
  check.eq(m.scale, 1, "recipe meta")
  check.eq(m.options, "fail=false,scale=1", "meta options")
  check.ok(m.sources:find("images\thttps://example.org/toy\t" ..
    core.hash_file(d .. "/raw/toy/images.idx.gz", "sha256"), 1, true), "sources: " .. m.sources)
  check.eq(m.hydra_version, core.version, "version")
  local st = data.status("toy", opts)
  check.ok(st.prepared and st.available, "status")
  check.eq(st.splits[1].name, "test", "split name")
  check.eq(st.splits[1].n, 4, "split size")
end

function T.missing_input_names_file_location_and_source()
  local d, opts = sandbox()
  toy(d)
  os.remove(d .. "/raw/toy/images.idx.gz")
  check.raises(("data: toy: missing input 'images': %s/raw/toy/images.idx.gz not found " ..
    "(HYDRA_DATA_DIR=%s/raw); canonical source: https://example.org/toy"):format(d, d),
    function() data.prepare("toy", opts) end)
  check.eq(core.stat(d .. "/prepared/toy.h5"), nil, "nothing prepared")
  local o2 = {}
  for k, v in pairs(opts) do o2[k] = v end
  o2.data_dir = nil
  if not os.getenv("HYDRA_DATA_DIR") then
    check.raises_has("missing input 'images': HYDRA_DATA_DIR is not set (expected " ..
      "$HYDRA_DATA_DIR/toy/images.idx.gz); canonical source: https://example.org/toy",
      function() data.prepare("toy", o2) end)
  end
end

function T.checksum_mismatch_names_both_hashes()
  local d, opts = sandbox()
  local wrong = ("ab"):rep(32)
  toy(d, wrong)
  local got = core.hash_file(d .. "/raw/toy/images.idx.gz", "sha256")
  check.raises(("data: toy: checksum mismatch for input 'images': %s/raw/toy/images.idx.gz " ..
    "has sha256 %s, expected %s"):format(d, got, wrong), function() data.prepare("toy", opts) end)
  check.eq(core.stat(d .. "/prepared/toy.h5"), nil, "nothing prepared")
end

function T.failure_leaves_nothing_behind()
  local d, opts = sandbox()
  toy(d)
  opts.options = { fail = "true" }
  check.raises_has("recipe exploded on purpose", function() data.prepare("toy", opts) end)
  check.eq(core.stat(d .. "/prepared/toy.h5"), nil, "no prepared file")
  for _, f in ipairs(core.listdir(d .. "/prepared")) do
    error("left behind in prepared/: " .. f)
  end
  -- a corrupt (truncated) idx input: clean error naming the file, nothing left
  local img = d .. "/raw/toy/labels.idx"
  local s = check.read_file(img)
  check.write_file(img, s:sub(1, 10))
  toy(d)
  opts.options = nil
  check.raises(("data: toy: idx: '%s': truncated at byte 10 (header says 12 bytes)"):format(img),
    function() data.prepare("toy", opts) end)
  check.eq(core.stat(d .. "/prepared/toy.h5"), nil, "no prepared file after a bad input")
end

function T.deterministic_and_up_to_date()
  local d, opts = sandbox()
  toy(d)
  local p = data.prepare("toy", opts)
  local a = check.read_file(p)
  local _, _, mtime = core.stat(p)
  opts.force = true
  data.prepare("toy", opts)
  check.ok(check.read_file(p) == a, "re-prepared file is byte-identical")
  opts.force = nil
  os.remove(p)
  check.write_file(p, a)       -- same content, fresh file: skipped as up to date
  data.prepare("toy", opts)
  check.ok(check.read_file(p) == a, "unchanged")
  -- an option change makes it out of date
  opts.options = { scale = "2" }
  data.prepare("toy", opts)
  local g <close> = h5.open(p)
  check.eq(g:attr("/meta", "scale"), 2, "option applied")
  check.ok(mtime ~= nil, "stat mtime")
  opts.options = { bogus = "1" }
  check.raises("data: toy: unknown option 'bogus' (known: fail, scale)", function() data.prepare("toy", opts) end)
  opts.options = { scale = "x" }
  check.raises("data: toy: option scale expects an integer, got 'x'", function() data.prepare("toy", opts) end)
end

function T.dependencies_are_prepared_first()
  local d, opts = sandbox()
  toy(d)
  write_recipe(d, "derived", [[
local h5 = require("hydra.h5")
return {
  name = "derived", role = "image-ood-val", kind = "image", licence = "test", description = "d",
  depends = { "toy" }, inputs = {},
  prepare = function(ctx)
    local g <close> = h5.open(ctx.prepared("toy"))
    ctx.out:write("/val/images", g:read("/test/images"))
    ctx.out:write("/val/labels", g:read("/test/labels"))
  end,
}
]])
  data.prepare("derived", opts)
  check.eq(core.stat(d .. "/prepared/toy.h5"), "file", "dependency prepared")
  local g <close> = h5.open(d .. "/prepared/derived.h5")
  check.ok(g:attr("/meta", "sources"):find("toy\tprepared:toy\t", 1, true), "dependency in sources")
  write_recipe(d, "loop", [[return { name = "loop", role = "image-ood", kind = "image",
    licence = "t", description = "t", depends = { "loop" }, prepare = function() end }]])
  check.raises("data: dependency cycle: loop -> loop", function() data.prepare("loop", opts) end)
end

function T.bad_recipes_and_names()
  local d, opts = sandbox()
  toy(d)
  check.raises("data: unknown dataset 'tpy' (did you mean 'toy'?) (see 'hydra data list')",
    function() data.recipe("tpy", opts) end)
  write_recipe(d, "odd", [[return { name = "odd", role = "image-weird", kind = "image",
    licence = "t", description = "t", prepare = function() end }]])
  check.raises(("data: recipe %s/recipes/odd.lua: unknown role \"image-weird\""):format(d),
    function() data.recipe("odd", opts) end)
  check.raises("data: dataset 'toy' is not prepared (run 'hydra data prepare toy')",
    function() data.path("toy", opts) end)
end

function T.cli_statuses()
  local d = sandbox()
  toy(d)
  local envs = ("HYDRA_RECIPES_DIR=%s/recipes HYDRA_PREPARED_DIR=%s/prepared HYDRA_DATA_DIR=%s/raw")
    :format(d, d, d)
  local exe = os.getenv("HYDRA") or "./hydra"
  local function run(args)
    local out = os.tmpname()
    local _, _, code = os.execute(("env %s %s data %s >%s 2>&1"):format(envs, exe, args, out))
    local text = check.read_file(out)
    os.remove(out)
    return code, text
  end
  local code, out = run("list")
  check.eq(code, 0, "list status")
  check.ok(out:find("toy%s+image%-ood%s+data_dir%s+not prepared"), "list row: " .. out)
  code, out = run("prepare toy")
  check.eq(code, 0, "prepare status: " .. out)
  code, out = run("list")
  check.ok(out:find("prepared%s+test 4; ") ~= nil, "list shows size: " .. out)
  code, out = run("info toy")
  check.eq(code, 0, "info status")
  check.ok(out:find("/test: 4 samples", 1, true), "info splits: " .. out)
  code, out = run("prepare nope")
  check.eq(code, 1, "unknown set exits 1")
  check.ok(out:find("data: unknown dataset 'nope'", 1, true), out)
  code = run("frob")
  check.eq(code, 2, "unknown subcommand exits 2")
  os.remove(d .. "/raw/toy/labels.idx")
  code, out = run("prepare all")
  check.eq(code, 1, "prepare all with a missing input exits 1")
  check.ok(out:find("toy: missing input 'labels'", 1, true), out)
end

-- Row arguments that would overflow int64 arithmetic are errors, never wraps (UBSan aborts).
function T.slice_and_pad_bounds()
  local t = core.from_table("int64", { 5, 6, 7 })
  check.eq(core.sample_slice(t, 2, 2):totable()[2], 7, "slice rows 2..3")
  check.raises("bad argument #2 to 'sample_slice' (rows are numbered from 1)",
    function() return core.sample_slice(t, math.mininteger, 1) end)
  check.raises("sample: rows [1, 1 + 9223372036854775807) out of range [0, 3)",
    function() return core.sample_slice(t, 2, math.maxinteger) end)
  local img = core.tensor("uint8", 1, 2, 2)
  check.raises("imgio: padded size overflows (pads 0 0 9223372036854775807 1 on 2x2)",
    function() return core.img_pad(img, 0, 0, math.maxinteger, 1) end)
end

return T
