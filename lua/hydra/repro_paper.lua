-- lua/hydra/repro_paper.lua: `hydra repro --write` and `hydra repro --check` (lua/hydra/cli/
-- repro.lua), the document side of hydra.paper:
--   run(opts) -> exit status   opts: write | check, doc, summaries, resamples, override_list
--   write_parts(experiment, edir, by_seed, seeds, why, resamples [, say])  the seed parts of the
--                              complete seeds by_seed = { { seed, runs } } into edir/seed-<s>/,
--                              merged into edir's summary (and removed) once every seed of
--                              `seeds` has one; says what it did (say: default print)
-- The runs of an experiment are the points of its sweep (configs/sweeps/<experiment>.yaml) on
-- the paper profile; its summary is written when every one of them is complete, or built seed by
-- seed (hydra.paper's seed parts) when the seeds complete at different times, in different
-- results folders.
local core = require("hydra.core")
local err = require("hydra.err")
local paper = require("hydra.paper")

local M = {}

local function home() return rawget(_G, "HYDRA_HOME") or "." end

-- The run folders are read under the config's results_dir (a `results_dir=DIR` override:
-- runs made elsewhere); the summaries are written to --summaries (default
-- <results_dir of configs/defaults.yaml>/paper, the repository's results/paper). An experiment
-- whose script writes its summary (paper.TABLES' script = true) leaves it in
-- <results_dir>/paper/<experiment>/; --write copies it into the summaries' folder when that is
-- another place, and --check compares the two.

-- The paper-profile runs of an experiment: runs (report_sweep.collect) when every point is
-- complete, else nil, why, and by_seed = { { seed, runs } } for each seed whose points are all
-- complete (the seed parts --write can make), seeds = every seed of the sweep (sorted).
local function paper_runs(experiment, overrides)
  local rs = require("hydra.report_sweep")
  local sw = require("hydra.pretrain").load_sweep(experiment,
    ("%s/configs/sweeps/%s.yaml"):format(home(), experiment),
    { profile = "paper", overrides = overrides })
  local dir = sw.results_dir .. "/" .. sw.experiment
  local missing, points_of, seeds = {}, {}, {}
  for _, pt in ipairs(sw.points) do
    local s = math.tointeger(tonumber(pt.cfg.seed))
    if not points_of[s] then points_of[s] = {}; seeds[#seeds + 1] = s end
    table.insert(points_of[s], pt)
    if core.stat(pt.dir .. "/result.h5") ~= "file" then missing[#missing + 1] = pt.dir end
  end
  table.sort(seeds)
  if #missing == 0 then return rs.collect(dir, { ids = rs.ids_of(sw) }) end
  local by_seed = {}
  for _, s in ipairs(seeds) do
    local ids, done = {}, true
    for _, pt in ipairs(points_of[s]) do
      ids[#ids + 1] = pt.id
      done = done and core.stat(pt.dir .. "/result.h5") == "file"
    end
    if done then by_seed[#by_seed + 1] = { seed = s, runs = rs.collect(dir, { ids = ids }) } end
  end
  return nil, ("%d of %d paper runs missing (first: %s)"):format(#missing, #sw.points,
    missing[1]), by_seed, seeds
end

local parts_of = paper.seed_parts

-- removes a seed part's folder (its files, then the folder); raises naming what stays
local function remove_part(d)
  for _, name in ipairs(core.listdir(d)) do
    local ok, e = os.remove(d .. "/" .. name)
    if not ok then err.fail("hydra repro: cannot remove '%s/%s': %s", d, name, tostring(e)) end
  end
  local ok, e = os.remove(d)
  if not ok then err.fail("hydra repro: cannot remove '%s': %s", d, tostring(e)) end
end

local function list_text(t)
  local out = {}
  for i, v in ipairs(t) do out[i] = tostring(v) end
  return table.concat(out, ", ")
end

-- Writes the seed parts the complete seeds give (sumdir/<e>/seed-<s>/, paper.summarize_part),
-- and, once every seed of the sweep has one, merges them into the summary and removes them.
function M.write_parts(e, edir, by_seed, seeds, why, resamples, say)
  say = say or print
  for _, bs in ipairs(by_seed) do
    local d = ("%s/seed-%d"):format(edir, bs.seed)
    local t0 = core.now()
    local r = require("hydra.paper").summarize_part(e, bs.runs, d, { B = resamples })
    say(r.up_to_date and ("%s: seed part %s/ is up to date with the runs"):format(e, d)
      or ("%s: wrote seed part %s/ (%d rows, %d comparisons, %.1f s)"):format(e, d, r.rows,
        r.comparisons, core.now() - t0))
  end
  local parts, have = parts_of(edir)
  local todo = {}
  for _, s in ipairs(seeds) do if not parts[s] then todo[#todo + 1] = s end end
  if #have == 0 then
    say(("%s: summary kept as it is (%s)"):format(e, why))
  elseif #todo > 0 then
    say(("%s: seed parts for seed(s) %s; the summary waits for seed(s) %s (%s)"):format(e,
      list_text(have), list_text(todo), why))
  else
    local dirs = {}
    for _, s in ipairs(seeds) do dirs[#dirs + 1] = parts[s] end
    local r = require("hydra.paper").merge_parts(e, dirs, edir)
    for _, d in ipairs(dirs) do remove_part(d) end
    say(("%s: merged the seed parts of seed(s) %s into %s/{values,bootstrap}.csv (%d rows, "
      .. "%d comparisons)"):format(e, list_text(r.seeds), edir, r.rows, r.comparisons))
  end
end

-- the experiments the document's marked tables draw on
local function experiments_of(doc)
  local text = require("hydra.fs").read_file(doc)
  if not text then err.fail("hydra repro: cannot read '%s'", doc) end
  local out, seen = {}, {}
  for _, b in ipairs(paper.blocks(text, doc)) do
    local e = paper.table(b.name).experiment
    if not seen[e] then seen[e] = true; out[#out + 1] = e end
  end
  return out
end

function M.run(opts)
  local doc = opts.doc or (home() .. "/paper_repro.md")
  local sumdir = opts.summaries
    or (require("hydra.config").defaults().results_dir .. "/paper")
  local overrides = {}
  for _, o in ipairs(opts.override_list or {}) do
    overrides[#overrides + 1] = o.key .. "=" .. o.value
  end
  if opts.resamples and opts.resamples < 2 then
    err.usage("hydra repro: --resamples must be >= 2")
  end
  local exps = experiments_of(doc)
  local output = require("hydra.output")
  local fs = require("hydra.fs")
  -- the summary a script experiment wrote under the runs' results_dir, when it is not sumdir's
  local rdir = require("hydra.config").load(nil, overrides).results_dir
  local function script_source(e)
    local src, dst = rdir .. "/paper/" .. e, sumdir .. "/" .. e
    if core.stat(src .. "/values.csv") ~= "file" then return nil end
    if output.same_file(src .. "/values.csv", dst .. "/values.csv") then return nil end
    return src, dst
  end
  -- experiments whose script writes its summary (paper.TABLES' script = true) have no runs
  local function by_script(e)
    for _, t in ipairs(paper.tables_of(e)) do if not t.script then return false end end
    return true
  end
  if opts.write then
    for _, e in ipairs(exps) do
      local runs, why, by_seed, seeds = nil,
        ("its summary is written by experiments/%s.lua"):format(e), nil, nil
      if not by_script(e) then runs, why, by_seed, seeds = paper_runs(e, overrides) end
      local src, dst = nil, nil
      if by_script(e) then src, dst = script_source(e) end
      if src then
        paper.read_summary(src)   -- raises on a damaged file before anything is copied
        output.mkdir_p(dst, "hydra repro")
        local changed = false
        for _, f in ipairs({ "values.csv", "bootstrap.csv" }) do
          local text = fs.read_file(src .. "/" .. f)
          if not text then err.fail("hydra repro: cannot read '%s/%s'", src, f) end
          if fs.read_file(dst .. "/" .. f) ~= text then
            require("hydra.report").write_text(dst .. "/" .. f, text)
            changed = true
          end
        end
        print(changed and ("%s: copied %s/{values,bootstrap}.csv to %s/"):format(e, src, dst)
          or ("%s: %s/ is up to date with %s/"):format(e, dst, src))
      elseif runs then
        local t0 = core.now()
        local r = paper.summarize(e, runs, sumdir .. "/" .. e, { B = opts.resamples })
        -- the whole summary supersedes any seed parts of it
        for _, d in pairs((parts_of(sumdir .. "/" .. e))) do remove_part(d) end
        if r.up_to_date then
          print(("%s: %s and %s are up to date with the runs (%d rows, %d comparisons)")
            :format(e, r.values, r.bootstrap, r.rows, r.comparisons))
        else
          print(("%s: wrote %s and %s (%d rows, %d comparisons, %.1f s)"):format(e, r.values,
            r.bootstrap, r.rows, r.comparisons, core.now() - t0))
        end
      elseif seeds then
        M.write_parts(e, sumdir .. "/" .. e, by_seed, seeds, why, opts.resamples)
      else
        print(("%s: summary kept as it is (%s)"):format(e, why))
      end
    end
    local names, waits = paper.write(doc, sumdir)
    print(("%s: %d table(s) generated (%s)"):format(doc, #names, table.concat(names, ", ")))
    if #waits > 0 then
      print(("%s: %d table(s) wait for their summary (%s)"):format(doc, #waits,
        table.concat(waits, ", ")))
    end
    return 0
  end
  local problems, waits = paper.check(doc, sumdir)
  for _, e in ipairs(exps) do
    local src, dst = nil, nil
    if by_script(e) then src, dst = script_source(e) end
    if src then
      for _, f in ipairs({ "values.csv", "bootstrap.csv" }) do
        local want, got = fs.read_file(src .. "/" .. f), fs.read_file(dst .. "/" .. f)
        if got and want ~= got then
          problems[#problems + 1] = ("%s/%s: differs from %s/%s (written by experiments/%s.lua;"
            .. " `hydra repro --write results_dir=%s` copies it)"):format(dst, f, src, f, e, rdir)
        end
      end
    end
  end
  for _, e in ipairs(exps) do
    local runs = not by_script(e) and paper_runs(e, overrides)
    local committed = require("hydra.fs").read_file(sumdir .. "/" .. e .. "/values.csv")
    if runs and committed then
      local want = paper.values_text(e, runs)
      if want ~= committed then
        local wl, cl, n = {}, {}, 0
        for l in want:gmatch("[^\n]+") do wl[#wl + 1] = l end
        for l in committed:gmatch("[^\n]+") do cl[#cl + 1] = l end
        for i = 1, math.max(#wl, #cl) do
          if wl[i] ~= cl[i] and n < 5 then
            n = n + 1
            problems[#problems + 1] = ("%s/%s/values.csv:%d: committed '%s', the runs give '%s'")
              :format(sumdir, e, i, cl[i] or "(end of file)", wl[i] or "(end of file)")
          end
        end
      end
    end
  end
  if #problems > 0 then
    for _, p in ipairs(problems) do io.stderr:write("hydra repro --check: ", p, "\n") end
    io.stderr:write(("hydra repro --check: %d problem(s) in %s\n"):format(#problems, doc))
    return 1
  end
  print(("%s: every generated table matches %s"):format(doc, sumdir))
  for _, e in ipairs(exps) do
    local _, have = parts_of(sumdir .. "/" .. e)
    if #have > 0 then
      print(("%s: seed parts for seed(s) %s in %s/%s/ (merged into its summary when every seed "
        .. "has one)"):format(e, list_text(have), sumdir, e))
    end
  end
  if #waits > 0 then
    print(("%s: %d table(s) wait for their summary (%s)"):format(doc, #waits,
      table.concat(waits, ", ")))
  end
  return 0
end

return M
