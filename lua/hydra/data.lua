-- lua/hydra/data.lua: the dataset registry and preparation framework (`hydra data ...`).
--
-- RECIPE CONTRACT (datasets/NAME.lua; the text recipes rely on it — change it only with them):
--   return {
--     name = "sst2",                 -- must equal the file name
--     role = "text-id",              -- image-id | image-ood | image-ood-val | image-shift |
--                                    -- text-id | text-ood | text-ood-val | text-shift |
--                                    -- text-pretrain (an unlabelled MLM corpus)
--     kind = "text",                 -- image | text
--     licence = "...", description = "...",
--     depends = { "sst2" },          -- prepared sets needed first (prepared automatically)
--     inputs = {                     -- every raw input, verified before prepare() runs
--       { name = "train", from = "data_dir", file = "sst2/train.tsv",     -- $HYDRA_DATA_DIR/file
--         sha256 = "...", source = "https://... (canonical download location)" },
--       { name = "images", from = "debian", package = "dataset-fashion-mnist",
--         path = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", sha256 = "..." },
--       { name = "digits", from = "debian-extract", package = "opencv-doc",
--         file = "usr/share/doc/opencv-doc/examples/data/digits.png", sha256 = "..." },
--         -- extracted by `make deps` into datasets/raw/debian/<package>/<file>
--     },
--     seed = 0,                      -- default seed of any randomness
--     options = { subset = 0 },      -- optional knobs, overridable: hydra data prepare NAME k=v
--     prepare = function(ctx) ... end,
--   }
--   ctx.input(name) -> absolute path (verified: exists, sha256 matches)
--   ctx.out         -> open hydra.h5 write handle (a temporary file; committed after prepare()
--                      returns, removed on any error)
--   ctx.seed, ctx.options (recipe options with overrides applied), ctx.name, ctx.recipe
--   ctx.prepared(dep) -> path of a prepared dependency (must be listed in depends)
--   ctx.meta(key, value) -> a /meta attribute (string, integer or number)
--   ctx.log(fmt, ...) -> progress line on stderr
-- The framework writes /meta attributes name, role, kind, licence, description, seed, options,
-- sources (one line per input: "name<TAB>source<TAB>sha256"), hydra_version, recipe_sha256, then
-- renames the file into datasets/prepared/NAME.h5 (atomic). A prepared file is up to date when its
-- recipe_sha256 (hash of the recipe text, the options, the input checksums, the dependencies'
-- recipe_sha256 and, for text sets, the reserved token words) matches; `prepare`
-- skips up-to-date sets unless forced.
--
-- Locations: recipes in $HYDRA_HOME/datasets (HYDRA_RECIPES_DIR overrides), prepared files in
-- $HYDRA_HOME/datasets/prepared (HYDRA_PREPARED_DIR overrides), extracted Debian files in
-- $HYDRA_HOME/datasets/raw/debian (HYDRA_DEBIAN_DIR overrides), raw data in HYDRA_DATA_DIR.
-- Every function also takes an optional opts table with the same keys (recipes_dir, prepared_dir,
-- debian_dir, data_dir) for tests and scripts.
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

M.ROLES = {
  ["image-id"] = true, ["image-ood"] = true, ["image-ood-val"] = true, ["image-shift"] = true,
  ["text-id"] = true, ["text-ood"] = true, ["text-ood-val"] = true, ["text-shift"] = true,
  ["text-pretrain"] = true,
}
M.KINDS = { image = true, text = true }
M.FROM = { data_dir = true, debian = true, ["debian-extract"] = true }

local function home()
  return rawget(_G, "HYDRA_HOME") or "."
end

local function env(name)
  local v = os.getenv(name)
  if v == "" then return nil end
  return v
end

-- Resolved locations for opts (explicit opts win over the environment).
function M.dirs(opts)
  opts = opts or {}
  return {
    recipes = opts.recipes_dir or env("HYDRA_RECIPES_DIR") or (home() .. "/datasets"),
    prepared = opts.prepared_dir or env("HYDRA_PREPARED_DIR") or (home() .. "/datasets/prepared"),
    debian = opts.debian_dir or env("HYDRA_DEBIAN_DIR") or (home() .. "/datasets/raw/debian"),
    data = opts.data_dir or env("HYDRA_DATA_DIR"),
  }
end

local function h5()
  return require("hydra.h5")
end

local read_text = require("hydra.fs").read_file

-- ===== recipes =====

local function check_recipe(r, name, file)
  local function bad(fmt, ...)
    err.fail("data: recipe %s: " .. fmt, file, ...)
  end
  if type(r) ~= "table" then bad("must return a table (got %s)", type(r)) end
  if r.name ~= name then bad("name is %q, expected %q (the file name)", tostring(r.name), name) end
  if not M.ROLES[r.role] then bad("unknown role %q", tostring(r.role)) end
  if not M.KINDS[r.kind] then bad("unknown kind %q (expected image or text)", tostring(r.kind)) end
  if type(r.prepare) ~= "function" then bad("prepare must be a function") end
  for _, k in ipairs({ "licence", "description" }) do
    if type(r[k]) ~= "string" then bad("%s must be a string", k) end
  end
  r.depends = r.depends or {}
  r.inputs = r.inputs or {}
  r.options = r.options or {}
  r.seed = r.seed or 0
  if math.type(r.seed) ~= "integer" then bad("seed must be an integer") end
  local seen = {}
  for i, inp in ipairs(r.inputs) do
    local where = ("input %d"):format(i)
    if type(inp.name) ~= "string" then bad("%s has no name", where) end
    if seen[inp.name] then bad("input '%s' listed twice", inp.name) end
    seen[inp.name] = true
    if not M.FROM[inp.from] then
      bad("input '%s': unknown from %q (expected data_dir, debian or debian-extract)", inp.name,
        tostring(inp.from))
    end
    if type(inp.sha256) ~= "string" or not inp.sha256:match("^%x+$") or #inp.sha256 ~= 64 then
      bad("input '%s': sha256 must be 64 hex digits", inp.name)
    end
    if inp.from == "debian" and (type(inp.path) ~= "string" or type(inp.package) ~= "string") then
      bad("input '%s': a debian input needs package and path", inp.name)
    end
    if inp.from ~= "debian" and type(inp.file) ~= "string" then
      bad("input '%s': needs file", inp.name)
    end
    if inp.from == "debian-extract" and type(inp.package) ~= "string" then
      bad("input '%s': a debian-extract input needs package", inp.name)
    end
  end
  return r
end

-- The recipe NAME (a table following the contract above); raises a clean error when unknown.
function M.recipe(name, opts)
  local d = M.dirs(opts)
  if type(name) ~= "string" or not name:match("^[%w][%w_%-%.]*$") then
    err.fail("data: bad dataset name %q", tostring(name))
  end
  local file = d.recipes .. "/" .. name .. ".lua"
  local chunk, msg = loadfile(file, "t", setmetatable({}, { __index = _G }))
  if not chunk then
    if not core.stat(file) then
      local s = require("hydra.strings").closest(name, M.names(opts))
      err.fail("data: unknown dataset '%s'%s (see 'hydra data list')", name,
        s and (" (did you mean '" .. s .. "'?)") or "")
    end
    error(msg, 0)
  end
  local r = check_recipe(chunk(), name, file)
  r.file = file
  return r
end

-- Names of every recipe, sorted.
function M.names(opts)
  local d = M.dirs(opts)
  local out = {}
  if not core.stat(d.recipes) then return out end
  for _, f in ipairs(core.listdir(d.recipes)) do
    local n = f:match("^([%w][%w_%-%.]*)%.lua$")
    if n then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

-- ===== inputs =====

-- Where input `inp` of recipe r is expected, and a human description of that location.
function M.input_location(inp, opts)
  local d = M.dirs(opts)
  if inp.from == "debian" then
    return inp.path, ("Debian package %s; run 'make deps'"):format(inp.package)
  elseif inp.from == "debian-extract" then
    return d.debian .. "/" .. inp.package .. "/" .. inp.file,
      ("extracted from Debian package %s; run 'make deps' or 'sh .ci/deps.sh -- %s'"):format(
        inp.package, inp.package)
  else
    if not d.data then return nil, "HYDRA_DATA_DIR is not set" end
    return d.data .. "/" .. inp.file, ("HYDRA_DATA_DIR=%s"):format(d.data)
  end
end

local hash_cache = {}

local function sha256_of(path)
  local kind, size, mtime = core.stat(path)
  local key = ("%s\0%s\0%s"):format(path, tostring(size), tostring(mtime))
  if kind ~= "file" then return nil end
  if not hash_cache[key] then hash_cache[key] = core.hash_file(path, "sha256") end
  return hash_cache[key]
end

-- Checks one input. Returns path on success, or nil and a problem message (naming the file,
-- its expected location and the canonical source). verify=false only checks existence.
function M.check_input(r, inp, opts, verify)
  local path, where = M.input_location(inp, opts)
  local src = inp.source and ("; canonical source: " .. inp.source) or ""
  if not path then
    return nil, ("missing input '%s': %s (expected $HYDRA_DATA_DIR/%s)%s"):format(
      inp.name, where, inp.file, src)
  end
  if core.stat(path) ~= "file" then
    return nil, ("missing input '%s': %s not found (%s)%s"):format(inp.name, path, where, src)
  end
  if verify ~= false then
    local got = sha256_of(path)
    if got ~= inp.sha256:lower() then
      return nil, ("checksum mismatch for input '%s': %s has sha256 %s, expected %s"):format(
        inp.name, path, tostring(got), inp.sha256:lower())
    end
  end
  return path
end

-- Checks every input; returns { name = path } or raises one error listing every problem.
function M.verify_inputs(r, opts)
  local paths, problems = {}, {}
  for _, inp in ipairs(r.inputs) do
    local p, why = M.check_input(r, inp, opts, true)
    if p then paths[inp.name] = p else problems[#problems + 1] = why end
  end
  if #problems == 1 then
    err.fail("data: %s: %s", r.name, problems[1])
  elseif #problems > 1 then
    err.fail("data: %s: %d inputs unavailable:\n  %s", r.name, #problems,
      table.concat(problems, "\n  "))
  end
  return paths
end

-- The input problems of NAME and of every dependency that is not prepared yet (recursively,
-- dependencies first), each "<set>: <problem>": checked before anything is prepared, so a bad
-- input of the set asked for is not found only after its dependencies were built.
local function chain_problems(name, opts, seen, problems)
  if seen[name] then return problems end
  seen[name] = true
  local r = M.recipe(name, opts)
  for _, dep in ipairs(r.depends) do
    if core.stat(M.prepared_path(dep, opts)) ~= "file" then
      chain_problems(dep, opts, seen, problems)
    end
  end
  for _, inp in ipairs(r.inputs) do
    local p, why = M.check_input(r, inp, opts, true)
    if not p then problems[#problems + 1] = { set = name, why = why } end
  end
  return problems
end

-- ===== prepared files =====

function M.prepared_path(name, opts)
  return M.dirs(opts).prepared .. "/" .. name .. ".h5"
end

-- Path of prepared set NAME; raises a clean error with the fix when it is not prepared.
function M.path(name, opts)
  local p = M.prepared_path(name, opts)
  if core.stat(p) ~= "file" then
    err.fail("data: dataset '%s' is not prepared (run 'hydra data prepare %s')", name, name)
  end
  return p
end

local function options_string(o)
  local keys = {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = ("%s=%s"):format(k, tostring(o[k])) end
  return table.concat(parts, ",")
end

-- Applies string overrides {k = "v"} to the recipe's options (typed like the defaults).
local function resolve_options(r, overrides)
  local o = {}
  for k, v in pairs(r.options) do o[k] = v end
  for k, v in pairs(overrides or {}) do
    local d = r.options[k]
    if d == nil then
      local known = {}
      for kk in pairs(r.options) do known[#known + 1] = kk end
      table.sort(known)
      err.fail("data: %s: unknown option '%s' (known: %s)", r.name, k,
        #known > 0 and table.concat(known, ", ") or "none")
    end
    if math.type(d) == "integer" then
      local n = math.tointeger(tonumber(v))
      if not n then err.fail("data: %s: option %s expects an integer, got '%s'", r.name, k, v) end
      -- recipe options are counts (0 = the recipe's "all"): never negative
      if n < 0 and d >= 0 then
        err.fail("data: %s: option %s must be >= 0 (got %d)", r.name, k, n)
      end
      o[k] = n
    elseif type(d) == "number" then
      local n = tonumber(v)
      if not n then err.fail("data: %s: option %s expects a number, got '%s'", r.name, k, v) end
      o[k] = n
    elseif type(d) == "boolean" then
      if v ~= "true" and v ~= "false" then
        err.fail("data: %s: option %s expects true or false, got '%s'", r.name, k, v)
      end
      o[k] = v == "true"
    else
      o[k] = tostring(v)
    end
  end
  return o
end


-- Reads the /meta attributes of a prepared file (nil when it is missing or unreadable).
local function read_meta(path)
  if core.stat(path) ~= "file" then return nil end
  local ok, res = pcall(function()
    local g <close> = h5().open(path)
    return g:attrs("/meta")
  end)
  return ok and res or nil
end

-- deps: { name = prepared path } of r.depends: a dependency's own recipe_sha256 is part of the
-- hash, so a re-prepared dependency (e.g. sst2's vocabulary) makes its dependents stale too; a
-- text set's hash also holds the reserved token words (core/data/vocab.h), which fix every word id.
local function recipe_hash(r, options, deps)
  local parts = { read_text(r.file) or "", options_string(options), tostring(r.seed) }
  for _, inp in ipairs(r.inputs) do parts[#parts + 1] = inp.name .. "=" .. inp.sha256:lower() end
  if r.kind == "text" then
    parts[#parts + 1] = "reserved " .. table.concat(core.text_reserved, " ")
  end
  for _, dep in ipairs(r.depends) do
    local m = deps and deps[dep] and read_meta(deps[dep]) or {}
    parts[#parts + 1] = "depends " .. dep .. "=" .. tostring(m.recipe_sha256)
  end
  return core.hash_string(table.concat(parts, "\n"), "sha256")
end

-- Splits of a prepared file: sorted list of { name = "train", n = 55000 } (a split is a group
-- holding images or ids; nested names like "gaussian_noise/3" for corruption sets).
local function read_splits(path)
  local out = {}
  local ok = pcall(function()
    local g <close> = h5().open(path)
    local function walk(group, prefix)
      for _, e in ipairs(g:list(group)) do
        if e.kind == "group" and e.name ~= "meta" then
          local full = prefix and (prefix .. "/" .. e.name) or e.name
          local n
          for _, c in ipairs(g:list("/" .. full)) do
            if c.kind == "dataset" and (c.name == "images" or c.name == "ids") then
              n = c.shape[1]
            end
          end
          if n then out[#out + 1] = { name = full, n = n } else walk("/" .. full, full) end
        end
      end
    end
    walk("/", nil)
  end)
  if not ok then return {} end
  return out
end

-- Status of NAME: { name, role, kind, source, prepared = bool, up_to_date = bool, path, bytes,
-- splits, available = bool, missing = {problem...} } (existence only; no hashing).
function M.status(name, opts)
  local r = M.recipe(name, opts)
  local st = { name = name, role = r.role, kind = r.kind, recipe = r }
  local froms = {}
  for _, inp in ipairs(r.inputs) do froms[inp.from] = true end
  local src = {}
  for _, k in ipairs({ "debian", "debian-extract", "data_dir" }) do
    if froms[k] then src[#src + 1] = k end
  end
  if #r.depends > 0 then src[#src + 1] = "from " .. table.concat(r.depends, ",") end
  st.source = #src > 0 and table.concat(src, "+") or "generated"
  st.missing = {}
  for _, inp in ipairs(r.inputs) do
    local p, why = M.check_input(r, inp, opts, false)
    if not p then st.missing[#st.missing + 1] = why end
  end
  for _, dep in ipairs(r.depends) do
    local ok, dst = pcall(M.status, dep, opts)
    if not ok then
      st.missing[#st.missing + 1] = err.message(dst)
    elseif not dst.available and not dst.prepared then
      st.missing[#st.missing + 1] = ("needs '%s', which is unavailable"):format(dep)
    end
  end
  st.available = #st.missing == 0
  st.path = M.prepared_path(name, opts)
  local kind, size = core.stat(st.path)
  st.prepared = kind == "file"
  if st.prepared then
    st.bytes = size
    st.splits = read_splits(st.path)
    st.meta = read_meta(st.path) or {}
  end
  return st
end

-- ===== preparation =====

local function log_line(name, fmt, ...)
  local msg = select("#", ...) > 0 and fmt:format(...) or fmt
  io.stderr:write(("data: %s: %s\n"):format(name, msg))
end

-- Prepares NAME (and, first, any dependency that is not prepared). Returns the prepared path.
-- opts.force re-prepares even when up to date (dependencies are not forced);
-- opts.options = { key = "value" } overrides recipe options; opts.quiet silences progress.
function M.prepare(name, opts, stack)
  opts = opts or {}
  stack = stack or {}
  for _, s in ipairs(stack) do
    if s == name then
      err.fail("data: dependency cycle: %s -> %s", table.concat(stack, " -> "), name)
    end
  end
  local r = M.recipe(name, opts)
  local options = resolve_options(r, stack[1] == nil and opts.options or nil)
  local final = M.prepared_path(name, opts)
  local log = opts.quiet and function() end or function(fmt, ...) log_line(name, fmt, ...) end

  -- every input of the chain first (the top-level call), then dependencies (never forced,
  -- never given this set's options)
  if #stack == 0 then
    local problems, own = chain_problems(name, opts, {}, {}), true
    for _, pr in ipairs(problems) do own = own and pr.set == name end
    if own then
      M.verify_inputs(r, opts)                 -- its own inputs alone: that message
    else
      local lines = {}
      for i, pr in ipairs(problems) do lines[i] = pr.set .. ": " .. pr.why end
      err.fail("data: %s: %d input%s unavailable (of it and the sets it depends on):\n  %s", name,
        #lines, #lines == 1 and "" or "s", table.concat(lines, "\n  "))
    end
  end
  local deps = {}
  local sub = {}
  for k, v in pairs(opts) do sub[k] = v end
  sub.force, sub.options = nil, nil
  stack[#stack + 1] = name
  for _, dep in ipairs(r.depends) do deps[dep] = M.prepare(dep, sub, stack) end
  stack[#stack] = nil

  local paths = M.verify_inputs(r, opts)
  local hash = recipe_hash(r, options, deps)
  if not opts.force then
    local meta = read_meta(final)
    if meta and meta.recipe_sha256 == hash then
      log("up to date (%s)", final)
      return final
    end
  end

  require("hydra.output").mkdir_p(M.dirs(opts).prepared, "data")
  local t0 = core.now()
  local f = h5().create(final)
  local ok, e = pcall(function()
    local ctx = {
      name = name,
      recipe = r,
      seed = r.seed,
      options = options,
      out = f,
      log = log,
    }
    function ctx.input(n)
      local p = paths[n]
      if not p then error(("data: %s: recipe asked for unknown input '%s'"):format(name, n), 2) end
      return p
    end
    function ctx.prepared(dep)
      local p = deps[dep]
      if not p then
        error(("data: %s: '%s' is not listed in depends"):format(name, dep), 2)
      end
      return p
    end
    function ctx.meta(key, value)
      f:set_attr("/meta", key, value)
    end
    r.prepare(ctx)
    local sources = {}
    for _, inp in ipairs(r.inputs) do
      sources[#sources + 1] = ("%s\t%s\t%s"):format(inp.name,
        inp.source or (inp.package and ("debian:" .. inp.package)) or "", inp.sha256:lower())
    end
    for _, dep in ipairs(r.depends) do
      local m = read_meta(deps[dep]) or {}
      sources[#sources + 1] = ("%s\tprepared:%s\t%s"):format(dep, dep, tostring(m.recipe_sha256))
    end
    f:set_attr("/meta", "name", name)
    f:set_attr("/meta", "role", r.role)
    f:set_attr("/meta", "kind", r.kind)
    f:set_attr("/meta", "licence", r.licence)
    f:set_attr("/meta", "description", r.description)
    f:set_attr("/meta", "seed", r.seed)
    f:set_attr("/meta", "options", options_string(options))
    f:set_attr("/meta", "sources", table.concat(sources, "\n"))
    f:set_attr("/meta", "hydra_version", core.version)
    f:set_attr("/meta", "recipe_sha256", hash)
    f:commit()
  end)
  if not ok then
    f:close()
    if err.is_error(e) then error(e, 0) end
    local msg = tostring(e):gsub("^[^%s:]+%.lua:%d+: ", "")
    if not msg:match("^data: ") then msg = ("data: %s: %s"):format(name, msg) end
    err.fail("%s", msg)
  end
  local _, size = core.stat(final)
  log("prepared %s (%d bytes, %.1f s)", final, size or 0, core.now() - t0)
  return final
end

-- Prepares every set whose inputs are present; returns prepared names and a list of
-- { name =, problem = } for the rest (nothing is raised for unavailable sets).
function M.prepare_all(opts)
  local done, skipped = {}, {}
  for _, name in ipairs(M.names(opts)) do
    local st = M.status(name, opts)
    if st.available then
      M.prepare(name, opts)
      done[#done + 1] = name
    else
      skipped[#skipped + 1] = { name = name, problem = table.concat(st.missing, "; ") }
    end
  end
  return done, skipped
end

-- Everything known about NAME: the status plus /meta and the splits.
function M.info(name, opts)
  return M.status(name, opts)
end

-- ===== helpers for recipes =====

-- Writes one image split: /<split>/images uint8 [N,H,W] and /<split>/labels int16 [N].
function M.write_image_split(f, split, images, labels)
  f:write("/" .. split .. "/images", images)
  f:write("/" .. split .. "/labels", labels)
end

-- An int16 [n] tensor filled with v (OOD labels are -1).
function M.const_labels(n, v)
  local t = core.tensor("int16", n)
  t:fill(v)
  return t
end

-- Any 1-d integer tensor as int16 labels (range-checked in C).
function M.as_int16(t)
  return core.labels_int16(t)
end

-- prepare() of an OOD test set read from an idx pair (inputs "images" and "labels"): split
-- `test` with labels -1 and the original classes kept in /test/orig_labels (mnist, notmnist).
function M.prepare_idx_ood(ctx)
  local core = require("hydra.core")
  local images = core.idx_read(ctx.input("images"))
  local orig = M.as_int16(core.idx_read(ctx.input("labels")))
  if images:size(1) ~= orig:size(1) then
    error(("images (%d) and labels (%d) differ in count"):format(images:size(1), orig:size(1)))
  end
  M.write_image_split(ctx.out, "test", images, M.const_labels(images:size(1), -1))
  ctx.out:write("/test/orig_labels", orig)
end

-- prepare() of a leave-one-out validation OOD set (datasets/ood-val-<set>.lua): the first
-- ctx.options.rows images of the `test` split of the OOD test set ctx.options.set (its
-- dependency) as split `val`, labels -1, so that a circuit search can use a real OOD set that is
-- then left out of the point's test sets (experiments/ablation_condition.lua). /val/source_rows:
-- the 0-based rows used.
function M.prepare_ood_val_from(ctx)
  local core = require("hydra.core")
  local h5 = require("hydra.h5")
  local g <close> = h5.open(ctx.prepared(ctx.options.set))
  local im = g:read("/test/images")
  local n = math.min(ctx.options.rows, im:size(1))
  M.write_image_split(ctx.out, "val", core.sample_slice(im, 1, n), M.const_labels(n, -1))
  local rows = core.tensor("int64", n)
  for i = 1, n do rows:set(i, i - 1) end
  ctx.out:write("/val/source_rows", rows)
  ctx.meta("source_set", ctx.options.set)
end

return M
