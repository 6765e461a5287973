-- hydra data list | prepare NAME...|all [--force] [key=value ...] | info NAME
local argparse = require("hydra.argparse")
local data = require("hydra.data")
local err = require("hydra.err")
local strings = require("hydra.strings")

local function human(n)
  if not n then return "-" end
  if n >= 1e9 then return ("%.1f GB"):format(n / 1e9) end
  if n >= 1e6 then return ("%.1f MB"):format(n / 1e6) end
  if n >= 1e3 then return ("%.1f kB"):format(n / 1e3) end
  return ("%d B"):format(n)
end

local function splits_str(splits, max)
  if not splits or #splits == 0 then return "" end
  local parts = {}
  for i, s in ipairs(splits) do
    if max and i > max then
      parts[#parts + 1] = ("... (%d splits)"):format(#splits)
      break
    end
    parts[#parts + 1] = ("%s %d"):format(s.name, s.n)
  end
  return table.concat(parts, ", ")
end

local function list()
  local names = data.names()
  local rows = { { "name", "role", "source", "status", "size" } }
  local hints = {}
  for _, name in ipairs(names) do
    local st = data.status(name)
    local status
    if st.prepared then
      status = "prepared"
    elseif st.available then
      status = "not prepared"
    else
      status = "unavailable"
      hints[#hints + 1] = ("  %s: %s"):format(name, st.missing[1])
    end
    local size = st.prepared and ("%s; %s"):format(splits_str(st.splits, 3), human(st.bytes)) or "-"
    rows[#rows + 1] = { name, st.role, st.source, status, size }
  end
  local w = {}
  for _, r in ipairs(rows) do
    for i = 1, 4 do w[i] = math.max(w[i] or 0, #r[i]) end
  end
  for _, r in ipairs(rows) do
    local cols = {}
    for i = 1, 4 do cols[i] = strings.pad(r[i], w[i]) end
    cols[5] = r[5]
    print(table.concat(cols, "  "))
  end
  if #hints > 0 then
    print("")
    print("unavailable (first missing input):")
    for _, h in ipairs(hints) do print(h) end
  end
end

local function info(name)
  local st = data.info(name)
  local r = st.recipe
  print(("%s: %s"):format(name, r.description))
  print(("  role %s, kind %s, licence %s"):format(r.role, r.kind, r.licence))
  print(("  recipe %s"):format(r.file))
  if #r.depends > 0 then print("  depends " .. table.concat(r.depends, ", ")) end
  print("  inputs:")
  for _, inp in ipairs(r.inputs) do
    local path, where = data.input_location(inp)
    print(("    %-14s %s (%s)"):format(inp.name, path or ("$HYDRA_DATA_DIR/" .. inp.file), where))
    print(("    %-14s sha256 %s"):format("", inp.sha256))
    if inp.source then print(("    %-14s source %s"):format("", inp.source)) end
  end
  if st.prepared then
    print(("  prepared %s (%s)"):format(st.path, human(st.bytes)))
    for _, s in ipairs(st.splits) do print(("    /%s: %d samples"):format(s.name, s.n)) end
    local keys = {}
    for k in pairs(st.meta) do keys[#keys + 1] = k end
    table.sort(keys)
    print("  /meta:")
    for _, k in ipairs(keys) do
      local v = st.meta[k]
      if type(v) == "table" then v = table.concat(v, " ") end
      v = tostring(v):gsub("\n", "\n      ")
      print(("    %s = %s"):format(k, v))
    end
  else
    print(("  not prepared (%s)"):format(st.available and ("run 'hydra data prepare " .. name .. "'")
      or ("unavailable: " .. table.concat(st.missing, "; "))))
  end
end

return {
  summary = "list, prepare and inspect datasets (datasets/NAME.lua -> datasets/prepared/NAME.h5)",
  usage = "hydra data list | prepare NAME...|all [--force] [option=value ...] | info NAME | " ..
    "import images|cifar10|cifar100|text ... --out DATA.h5",
  help = [[list      every recipe: role, input source, prepared or not, splits and file size
prepare   prepares the named sets (dependencies first) into datasets/prepared/NAME.h5, atomically;
          inputs are checked (present, sha256) first. Up-to-date sets are skipped unless --force.
          option=value overrides a recipe option (e.g. fashion-mnist-c subset=2000).
          'all' prepares every set whose inputs are present, then exits 1 listing the sets it
          could not prepare (e.g. HYDRA_DATA_DIR unset) if there are any.
info      the recipe, its inputs and the prepared file's splits and /meta
Raw data not in Debian comes from HYDRA_DATA_DIR; Debian inputs from `make deps`.]] .. "\n" ..
    require("hydra.cli.data_import").help,
  run = function(args)
    local sub = args[1]
    local rest = { table.unpack(args, 2) }
    if sub == "list" then
      argparse.parse(rest, { command = "data list" })
      list()
    elseif sub == "info" then
      local o = argparse.parse(rest, { command = "data info", positional = { min = 1, max = 1, names = { "NAME" } } })
      info(o.positional[1])
    elseif sub == "prepare" then
      local o = argparse.parse(rest, {
        command = "data prepare", options = { force = "flag" }, overrides = true,
        positional = { min = 1, names = { "NAME..." } },
        usage = "hydra data prepare NAME...|all [--force] [option=value ...]" })
      local names = o.positional
      local opts = { force = o.force, options = o.overrides }
      if #names == 1 and names[1] == "all" then
        if next(o.overrides) then err.usage("hydra data prepare all: options need a set name") end
        local done, skipped = data.prepare_all(opts)
        print(("prepared or up to date: %s"):format(#done > 0 and table.concat(done, ", ") or "none"))
        if #skipped > 0 then
          local lines = {}
          for _, s in ipairs(skipped) do lines[#lines + 1] = ("  %s: %s"):format(s.name, s.problem) end
          err.fail("data: %d set(s) not prepared:\n%s", #skipped, table.concat(lines, "\n"))
        end
      else
        if #names > 1 and next(o.overrides) then
          err.usage("hydra data prepare: options apply to one set at a time")
        end
        for _, n in ipairs(names) do
          local p = data.prepare(n, opts)
          print(p)
        end
      end
    elseif sub == "import" then
      require("hydra.cli.data_import").run(rest)
    elseif sub == nil then
      err.usage("hydra data: missing subcommand (usage: hydra data list | prepare NAME...|all | info NAME)")
    else
      err.usage("hydra data: unknown subcommand '%s' (expected list, prepare, info or import)", sub)
    end
  end,
}
