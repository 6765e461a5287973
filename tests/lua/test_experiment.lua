-- tests/lua/test_experiment.lua: experiment scripts read results by key (hydra.report.value:
-- method name, config values, result.h5 metric keys), never by a table's display text; the
-- helpers of hydra.experiment.
local check = require("check")
local hydra = require("hydra")

local T = {}
local home = rawget(_G, "HYDRA_HOME") or "."

local function report_sweep_results(rs) return hydra.report_sweep.results(rs) end

-- A run as hydra.report_sweep.collect gives it: flat config texts and loaded results.
local function run(id, members, seed, results)
  local flat = { ["hydra.members"] = tostring(members), ["fuse.mlp"] = "average",
                 seed = tostring(seed) }
  return { id = id, flat = flat, keys = { "seed", "hydra.members", "fuse.mlp" },
           loaded = { results = results } }
end

local function result(name, label, acc, auroc)
  return { name = name, method = label, metrics = { acc = acc, disagreement = acc / 4 },
           ci = { acc = { acc - 0.125, acc + 0.125 } },
           ood_avg = { auroc = auroc }, ood = { { name = "glyphs", auroc = auroc, fpr95 = 0.25 } },
           shift = { { name = "fmnist-c-s1", acc = acc / 2 } }, cost = { flops = 1000 } }
end

local function runs()
  return {
    run("a", 1, 0, { result("hydra_circ", "Hydra (Circ)", 0.5, 0.5),
                     result("hydra_taylor", "Hydra (Taylor)", 0.25, 0.25) }),
    run("b", 1, 1, { result("hydra_circ", "Hydra (Circ)", 0.75, 0.75),
                     result("hydra_taylor", "Hydra (Taylor)", 0.25, 0.5) }),
    run("c", 2, 0, { result("hydra_circ", "Hydra (Circ)", 0.625, 0.875),
                     result("hydra_taylor", "Hydra (Taylor)", 0.125, 0.375) }),
    run("d", 2, 1, { result("hydra_circ", "Hydra (Circ)", 0.875, 0.625),
                     result("hydra_taylor", "Hydra (Taylor)", 0.375, 0.125) }),
  }
end

function T.value_is_mean_and_std_over_seeds_by_key()
  local rs = runs()
  local v = hydra.report.value
  local mean, std = v(rs, { method = "hydra_circ", ["hydra.members"] = 2 }, "ood_avg_auroc")
  check.eq(mean, 0.75, "mean of 0.875 and 0.625")
  check.eq(std, math.sqrt(2 * 0.125 ^ 2), "sample std")
  check.eq(v(rs, { method = "hydra_taylor", ["hydra.members"] = 1 }, "acc"), 0.25, "acc")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 1, seed = 1 }, "acc"), 0.75,
    "one seed")
  check.eq(select(2, v(rs, { method = "hydra_circ", ["hydra.members"] = 1, seed = 1 }, "acc")),
    nil, "no std for one run")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 1 }, "disagreement"),
    (0.5 / 4 + 0.75 / 4) / 2, "another metrics attribute")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 1 }, "acc_lo"),
    (0.375 + 0.625) / 2, "bootstrap bound")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 2 }, "ood/glyphs/auroc"), 0.75,
    "per OOD set")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 2 }, "shift/fmnist-c-s1/acc"),
    0.375, "per shift set")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 2, ["fuse.mlp"] = "average" },
    "cost/flops"), 1000, "cost attribute, filter on a string value")
  check.eq(v(rs, { method = "hydra_circ", ["hydra.members"] = 3 }, "acc"), nil, "no such run")
end

-- The sweep report's Cost table: FLOPs / sample is the attribute flops; a text run's
-- flops_padded gets its own column "FLOPs / sample (padded)", and the caption says which is which
function T.cost_table_names_its_flops_columns()
  local function cost_section(cost)
    local rs = { run("a", 1, 0, { result("hydra_circ", "Hydra (Circ)", 0.5, 0.5) }) }
    rs[1].loaded.results[1].cost = cost
    local md = hydra.report_sweep.markdown(rs, "t")
    return md:sub((assert(md:find("## Cost", 1, true))))
  end
  local img = cost_section({ params = 2e6, flops = 4.5e6, members = 3 })
  check.ok(img:find("| Method | Params | FLOPs / sample | Members | ms / batch (batch) |", 1,
    true), img)
  check.ok(img:find("| Hydra (Circ) | 2.000 M | 4.5 M | 3 | – |", 1, true), img)
  check.ok(not img:find("padded", 1, true), "no padded column or caption for images: " .. img)
  check.ok(img:find("the mean over the ID test set of each sample's exact cost at its own "
    .. "length", 1, true), img)
  local txt = cost_section({ params = 2e6, flops = 4.5e6, flops_padded = 6.3e6, members = 3 })
  check.ok(txt:find("| Method | Params | FLOPs / sample | FLOPs / sample (padded) | Members |", 1,
    true), txt)
  check.ok(txt:find("| Hydra (Circ) | 2.000 M | 4.5 M | 6.3 M | 3 | – |", 1, true), txt)
  check.ok(txt:find("FLOPs / sample (padded): the same mean at the length the engine executes",
    1, true), txt)
end

-- Renaming the table's column titles and the methods' row labels changes the table and
-- nothing an experiment reads.
function T.renamed_titles_and_labels_do_not_change_values()
  local report = hydra.report
  local function reads(rs)
    local out = {}
    for _, m in ipairs({ "hydra_circ", "hydra_taylor" }) do
      for members = 1, 2 do
        for _, key in ipairs({ "acc", "ood_avg_auroc", "ood/glyphs/fpr95" }) do
          out[#out + 1] = { report.value(rs, { method = m, ["hydra.members"] = members }, key) }
        end
      end
    end
    return out
  end
  local before = reads(runs())
  local titles = report.TITLES
  local renamed = {}
  for k, t in pairs(titles) do renamed[k] = "renamed " .. t end
  report.TITLES = renamed
  local ok, e = pcall(function()
    local rs = runs()
    for _, r in ipairs(rs) do
      for _, res in ipairs(r.loaded.results) do res.method = "Label " .. res.method end
    end
    check.same(reads(rs), before, "values after renaming")
    local t = report.table(rs[1].loaded.results)
    check.eq(t.columns[1].title, "renamed Acc ↑", "the table did change")
    check.eq(t.rows[1].method, "Label Hydra (Circ)", "the row label did change")
  end)
  report.TITLES = titles
  if not ok then error(e, 0) end
end

function T.value_errors_name_what_is_wrong()
  local rs, v = runs(), hydra.report.value
  check.raises("report.value: no run has method 'hydra_cric' (methods: hydra_circ, hydra_taylor)",
    function() return v(rs, { method = "hydra_cric" }, "acc") end)
  check.raises("report.value: 'hydra.membrs' is not a config key of these runs",
    function() return v(rs, { method = "hydra_circ", ["hydra.membrs"] = 2 }, "acc") end)
  check.raises_has("report.value: no result has metric 'OOD avg AUROC ↑' (metrics: acc, acc_hi",
    function() return v(rs, { method = "hydra_circ", ["hydra.members"] = 2 }, "OOD avg AUROC ↑") end)
  check.raises("report.value: the runs of method=hydra_circ differ in hydra.members (name it in "
    .. "the filter)", function() return v(rs, { method = "hydra_circ" }, "acc") end)
  check.raises('report.value: the filter needs method = a method name (e.g. "hydra_circ")',
    function() return v(rs, { ["hydra.members"] = 2 }, "acc") end)
end

-- No experiment script looks a number up by a rendered title or row label.
-- A sweep point reads a set nobody prepared (the leave-one-family-out search set of
-- ablation_condition): experiment.run prepares it from its recipe before the workers start,
-- once, and leaves sets that are already there alone
function T.prepare_inputs_prepares_the_sets_a_recipe_makes()
  local core = require("hydra.core")
  if not os.getenv("HYDRA_DATA_DIR") then
    return check.skip("HYDRA_DATA_DIR is not set (mnist's raw files)")
  end
  local d = check.tmpdir()
  local f = assert(io.open(d .. "/fashion-mnist.h5", "wb"))   -- "prepared": not touched
  f:write("placeholder")
  f:close()
  local cfg = { data = { dir = d, id = "fashion-mnist", ood = { near = {}, far = {} }, shift = {},
                         ood_val = "ood-val-mnist" } }
  local sw = { points = { { cfg = cfg }, { cfg = cfg } } }
  check.same(hydra.experiment.prepare_inputs(sw), { "ood-val-mnist" }, "prepared once")
  check.eq(core.stat(d .. "/ood-val-mnist.h5"), "file", "ood-val-mnist.h5")
  check.eq(check.read_file(d .. "/fashion-mnist.h5"), "placeholder", "a prepared set untouched")
  check.same(hydra.experiment.prepare_inputs(sw), {}, "nothing left to prepare")
  -- a set without a recipe is left to the run, which names the fix
  cfg.data.ood_val = "no-such-set"
  check.same(hydra.experiment.prepare_inputs(sw), {}, "no recipe: not prepared here")
end

function T.experiments_read_by_key()
  for _, f in ipairs(hydra.core.listdir(home .. "/experiments")) do
    if f:match("%.lua$") then
      local s = check.read_file(home .. "/experiments/" .. f)
      check.ok(not s:find("%.cell%("), f .. " reads a table cell")
      check.ok(not s:find('require%("hydra%.core"%)') or f:match("^bench"),
        f .. " requires hydra.core (experiments use require(\"hydra\"))")
      for call in s:gmatch("report%.value(%b())") do
        check.ok(not call:find("[↑↓]"), f .. ": a title in " .. call)
      end
    end
  end
end

function T.script_options_split_options_from_overrides()
  local o = hydra.experiment.script_options({ profile = "paper", jobs = "2",
                                              ["train.epochs"] = "3" })
  check.same(o, { profile = "paper", jobs = 2, overrides = { "train.epochs=3" } })
  check.raises("jobs=0: expected an integer >= 1",
    function() return hydra.experiment.script_options({ jobs = "0" }) end)
end

-- ===== the experiment scripts themselves, on made-up runs =====

-- Runs for every value of each axis (a list of { key, values }) and each method, seed 0; metric
-- values differ per run and method so that a wrong lookup shows.
local function sweep_runs(axes, methods)
  local yaml = hydra.yaml
  local combos = { {} }
  for _, a in ipairs(axes) do
    local nxt = {}
    for _, c in ipairs(combos) do
      for _, v in ipairs(a.values) do
        local cc = { table.unpack(c) }
        cc[#cc + 1] = { key = a.key, value = v }
        nxt[#nxt + 1] = cc
      end
    end
    combos = nxt
  end
  local rs, points = {}, {}
  for i, c in ipairs(combos) do
    local flat, keys, labels = { seed = "0" }, { "seed" }, {}
    for _, o in ipairs(c) do
      flat[o.key] = yaml.flow(o.value)
      keys[#keys + 1] = o.key
      labels[#labels + 1] = o.key .. "=" .. yaml.flow(o.value)
    end
    local results = {}
    for j, m in ipairs(methods) do
      local x = (i * 7 + j * 3) % 16 / 32 + 0.25
      results[j] = { name = m[1], method = m[2],
        metrics = { acc = x, ece = x / 8, disagreement = x / 4 },
        ood_avg = { auroc = 1 - x / 2, fpr95 = x / 3 }, ood = {}, shift = {}, cost = {} }
    end
    rs[i] = { id = "r" .. i, flat = flat, keys = keys, loaded = { results = results } }
    local ov = {}
    for k, o in ipairs(c) do ov[k] = o end
    ov[#ov + 1] = { key = "seed", value = 0 }
    points[i] = { cfg = { seed = 0 }, overrides = ov, label = table.concat(labels, " "),
                  id = "r" .. i }
  end
  return rs, points
end

-- The printed output of experiments/<name>.lua with hydra.experiment.run returning `e`. The
-- made-up runs have no result.h5: claim lines use the seed test only (opts.boot = false).
local function script_output(name, e)
  local out = {}
  local exp, p, w = hydra.experiment, print, io.write
  local run, claim = exp.run, exp.claim_line
  exp.run = function() return e end
  exp.claim_line = function(runs, title, a, b, key, better, opts)
    local o = { boot = false }
    for k, v in pairs(opts or {}) do o[k] = v end
    return claim(runs, title, a, b, key, better, o)
  end
  print = function(...)
    local t = table.pack(...)
    for i = 1, t.n do t[i] = tostring(t[i]) end
    out[#out + 1] = table.concat(t, "\t") .. "\n"
  end
  io.write = function(...) for _, x in ipairs({ ... }) do out[#out + 1] = tostring(x) end end
  local ok, err = pcall(function()
    return assert(loadfile(home .. "/experiments/" .. name .. ".lua"))({ repro = true })
  end)
  exp.run, exp.claim_line, print, io.write = run, claim, p, w
  if not ok then error(err, 0) end
  return table.concat(out)
end

local SCRIPTS = {
  ablation_members = { { { key = "hydra.members", values = { 1, 2, 3, 4, 5, 6 } } },
    { { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } } },
  ablation_heads = { { { key = "hydra.keep_heads", values = { 8, 7, 6, 5, 4, 3, 2, 1 } } },
    { { "taylor", "Taylor" }, { "circavg", "CircAvg" } } },
  ablation_mlp_merge = { { { key = "fuse.mlp", values = { "average", "member" } } },
    { { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } } },
  ablation_diversity = { { { key = "hydra.diversity.bootstrap", values = { false, true } },
                           { key = "hydra.diversity.overlap_penalty", values = { 0.0, 0.5 } } },
    { { "hydra_circ", "Hydra (Circ)" } } },
  ablation_pruning = { {}, { { "taylor", "Taylor" }, { "circavg", "CircAvg" },
    { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" },
    { "deep_ensemble", "Deep Ensembles" } } },
  table_image = { {}, { { "deep_ensemble", "Deep Ensembles" }, { "hydra_circ", "Hydra (Circ)" } } },
  table_mnist = { {}, { { "deep_ensemble", "Deep Ensembles" }, { "hydra_circ", "Hydra (Circ)" } } },
  table_image_remedy = { {}, { { "deep_ensemble", "Deep Ensembles" }, { "hydra_circ", "Hydra (Circ)" },
    { "hydra_circ_restarts", "Hydra (Circ, restarts)" } } },
}

-- Every sweep experiment prints the same numbers whatever the table's titles and row labels,
-- and finds every number it looks for (no "–").
function T.experiment_scripts_print_the_same_with_renamed_titles()
  local report = hydra.report
  local d = check.tmpdir()
  check.write_file(d .. "/table.md", "| table |\n")
  local names = {}
  for name in pairs(SCRIPTS) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local function e(relabel)
      local rs, points = sweep_runs(SCRIPTS[name][1], SCRIPTS[name][2])
      if relabel then
        for _, r in ipairs(rs) do
          for _, res in ipairs(r.loaded.results) do res.method = "Label " .. res.method end
        end
      end
      return { runs = rs, sweep = { points = points },
               report = { markdown = d .. "/table.md", plots = {} },
               table = report.table((report_sweep_results(rs))) }
    end
    local before = script_output(name, e(false))
    local titles = report.TITLES
    local renamed = {}
    for k, t in pairs(titles) do renamed[k] = "x " .. t end
    report.TITLES = renamed
    local ok, after = pcall(script_output, name, e(true))
    report.TITLES = titles
    if not ok then error(after, 0) end
    check.eq(after, before, name .. ": output after renaming titles and labels")
    local rows = 0
    for line in before:gmatch("[^\n]+") do
      if line:match("^| [^-]") and line:find("%d%.%d%d") then
        rows = rows + 1
        check.ok(not line:find("–"), name .. ": a value not found: " .. line)
      end
    end
    check.ok(rows > 0 or name:match("^table_"), name .. ": no table rows in\n" .. before)
  end
end

-- methods=[...] without a claim's method: the scripts leave that claim's line out (no error)
-- and print the others.
function T.claim_lines_left_out_without_their_methods()
  local d = check.tmpdir()
  check.write_file(d .. "/table.md", "| table |\n")
  local function e(methods)
    local rs, points = sweep_runs({}, methods)
    return { runs = rs, sweep = { points = points },
             report = { markdown = d .. "/table.md", plots = {} } }
  end
  local out = script_output("table_image", e({ { "single", "Single" },
    { "hydra_circ", "Hydra (Circ)" } }))
  check.ok(not out:find("OOD avg AUROC:", 1, true) and not out:find("accuracy:", 1, true),
    "no Deep Ensembles, no claim line:\n" .. out)
  check.ok(out:find("report: ", 1, true) ~= nil, "the script ran to its end")
  out = script_output("table_image", e({ { "deep_ensemble", "Deep Ensembles" },
    { "hydra_circ", "Hydra (Circ)" } }))
  check.ok(out:find("\nOOD avg AUROC: Hydra (Circ) ", 1, true) ~= nil, "with both: the line")
  out = script_output("ablation_pruning", e({ { "taylor", "Taylor" },
    { "hydra_taylor", "Hydra (Taylor)" } }))
  check.ok(out:find("ensembling pruned members (Taylor), OOD avg AUROC: Hydra (Taylor) ", 1, true)
    ~= nil, "the claim whose methods ran:\n" .. out)
  check.ok(not out:find("members (Circ)", 1, true) and not out:find("circuit vs Taylor", 1, true),
    "no claim of a method not run:\n" .. out)
  check.ok(out:find("| Hydra (Circ) | – | 86.29 | – |", 1, true) ~= nil,
    "its table row without our numbers:\n" .. out)
end

return T
