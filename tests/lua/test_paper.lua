-- tests/lua/test_paper.lua: the generated tables of paper_repro.md (lua/hydra/paper.lua,
-- `hydra repro --write / --check`): summaries from real run folders (a tiny two-seed run),
-- exact generation from the committed fixture summaries (tests/ref/paper/), and --check
-- naming a changed cell and a missing summary.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local paper = require("hydra.paper")
local verdict = require("hydra.verdict")
local eq, ok, near = check.eq, check.ok, check.near

local T = {}

local FIX = "tests/ref/paper"

local function copy(src, dst)
  check.write_file(dst, assert(check.read_file(src), src))
end

-- ===== summaries of real runs =====

local runs_cache
-- two seeds of Single, Deep Ensembles and Taylor on a tiny synthetic world, as the runs of
-- experiment table_image (so that its table specs apply)
local function tiny_runs()
  if runs_cache then return runs_cache end
  local root, d = check.tiny_world()
  for _, seed in ipairs({ "0", "1" }) do
    local cfg = hydra.config.load("configs/data/tiny.yaml", {
      ["data.dir"] = d, ["data.test_subset"] = "0", ["data.ood"] = "[tinyood]",
      ["data.shift"] = "[]", results_dir = root .. "/results", experiment = "table_image",
      seed = seed, threads = "1", methods = "[single, deep_ensemble, taylor]",
      ["model.d_model"] = "16", ["model.n_heads"] = "4", ["model.depth"] = "2",
      ["model.d_mlp"] = "32", ["train.epochs"] = "1", ["train.batch_size"] = "32",
      ["train.eval_batch_size"] = "32", ["prune.calib_size"] = "32", ["hydra.keep_heads"] = "2",
      ["deep_ensemble.members"] = "2",
    })
    hydra.run.execute(cfg, { quiet = true, cache_dir = root .. "/cache", progress = false })
  end
  core.threads_init(0)
  local runs = require("hydra.report_sweep").collect(root .. "/results/table_image")
  runs_cache = { root = root, runs = runs }
  return runs_cache
end

-- the tiny runs of one seed
local function runs_of_seed(w, seed)
  local out = {}
  for _, r in ipairs(w.runs) do
    if math.tointeger(tonumber(r.flat.seed)) == seed then out[#out + 1] = r end
  end
  return out
end

-- comparisons over different OOD sets (ablation_condition's leave-one-out rows) go to separate
-- paired bootstraps, each drawing rows for its own sets; the order within a group is kept
function T.comparisons_are_grouped_by_their_ood_sets()
  local four, three = { sets = { "mnist", "opencv", "notmnist", "glyphs" } },
    { sets = { "opencv", "notmnist", "glyphs" } }
  local samples = { ref = { [0] = four }, de = { [0] = four, [1] = four },
                    loo = { [1] = three }, de_loo = { [1] = three } }
  local comps = { { a = "ref", b = "de" }, { a = "loo", b = "de_loo" }, { a = "de", b = "ref" } }
  local g = paper.set_groups(comps, samples)
  eq(#g, 2, "two groups")
  check.same(g[1].at, { 1, 3 }, "the four-set comparisons")
  check.same(g[2].at, { 2 }, "the three-set one")
  eq(g[2].comps[1], comps[2], "comparison kept")
end

function T.summaries_hold_the_runs_numbers()
  local w = tiny_runs()
  local dir = w.root .. "/paper/table_image"
  local r = paper.summarize("table_image", w.runs, dir, { B = 40 })
  eq(r.rows, 3, "rows: every method")
  local s = assert(paper.read_summary(dir))
  check.same(s.seeds, { 0, 1 }, "seeds")
  eq(s.rows[1].id, "single", "first row")
  eq(s.rows[2].label, "Deep Ensembles", "label from the result")
  -- every stored value is the run's metric, bit for bit (%.17g)
  for _, run in ipairs(w.runs) do
    local seed = math.tointeger(tonumber(run.flat.seed))
    for _, res in ipairs(run.loaded.results) do
      for _, k in ipairs({ "acc", "calibration/nll", "ood_avg_auroc_msp",
                           "ood_avg_fpr95_id_maxlogit",
                           "misclf_auroc_maxlogit" }) do
        eq(s.values[res.name][k][seed], hydra.report.metric_of(res, k), res.name .. " " .. k)
      end
    end
  end
  -- the bootstrap's point estimate is the mean of the per-seed differences
  local b = s.boot["single\0deep_ensemble\0ood_avg_auroc_msp"]
  ok(b ~= nil, "Single vs Deep Ensembles bootstrapped")
  eq(b.B, 40, "resamples")
  eq(b.n, 2, "seeds")
  local v = s.values
  near(b.diff, ((v.single.ood_avg_auroc_msp[0] - v.deep_ensemble.ood_avg_auroc_msp[0])
    + (v.single.ood_avg_auroc_msp[1] - v.deep_ensemble.ood_avg_auroc_msp[1])) / 2, 1e-12,
    "bootstrap point = mean difference")
  ok(b.lo <= b.diff and b.diff <= b.hi, "interval around it")
  eq(s.boot["deep_ensemble\0deep_ensemble\0acc"], nil, "the reference row is not compared")
  -- values_text is what --check compares with the runs: the same text as the file
  eq(paper.values_text("table_image", w.runs), check.read_file(dir .. "/values.csv"),
    "values.csv = values_text")
  -- a second summary of the same runs at the same resamples runs no bootstrap; another B, or a
  -- bootstrap.csv that lost a comparison, is recomputed
  local boot = check.read_file(dir .. "/bootstrap.csv")
  ok(paper.summarize("table_image", w.runs, dir, { B = 40 }).up_to_date, "same runs: up to date")
  eq(check.read_file(dir .. "/bootstrap.csv"), boot, "bootstrap.csv untouched")
  ok(not paper.summarize("table_image", w.runs, dir, { B = 41 }).up_to_date, "B 41: recomputed")
  ok(check.read_file(dir .. "/bootstrap.csv"):find(",41,", 1, true), "written at B 41")
  local lines = {}
  for line in check.read_file(dir .. "/bootstrap.csv"):gmatch("[^\n]+\n") do
    lines[#lines + 1] = line
  end
  local f = assert(io.open(dir .. "/bootstrap.csv", "wb"))
  f:write(table.concat(lines, "", 1, #lines - 1))
  f:close()
  ok(not paper.summarize("table_image", w.runs, dir, { B = 41 }).up_to_date,
    "a comparison missing: recomputed")
  eq(select(2, check.read_file(dir .. "/bootstrap.csv"):gsub("\n", "")), #lines, "every line back")
end

-- A summary built seed by seed (one part per seed, merged when every seed has one) is the
-- summary of all the runs at once, byte for byte; parts that disagree are refused by name.
function T.seed_parts_merge_to_the_whole_summary()
  local w = tiny_runs()
  local whole = w.root .. "/paper_whole/table_image"
  paper.summarize("table_image", w.runs, whole, { B = 30 })
  local dirs = {}
  for _, seed in ipairs({ 1, 0 }) do   -- out of order: merge sorts by seed
    local runs = runs_of_seed(w, seed)
    local d = ("%s/paper_parts/table_image/seed-%d"):format(w.root, seed)
    local r = paper.summarize_part("table_image", runs, d, { B = 30 })
    eq(r.seed, seed, "part's seed")
    ok(not r.up_to_date, "written")
    ok(paper.summarize_part("table_image", runs, d, { B = 30 }).up_to_date, "then up to date")
    dirs[#dirs + 1] = d
  end
  local merged = w.root .. "/paper_parts/table_image"
  local m = paper.merge_parts("table_image", dirs, merged)
  check.same(m.seeds, { 0, 1 }, "seeds merged")
  for _, f in ipairs({ "values.csv", "bootstrap.csv" }) do
    eq(check.read_file(merged .. "/" .. f), check.read_file(whole .. "/" .. f), f .. ": identical")
  end
  -- one seed twice, or parts resampled differently: refused, naming the parts
  check.raises_has("both hold seed 1",
    function() paper.merge_parts("table_image", { dirs[1], dirs[1] }, merged) end)
  local runs0 = runs_of_seed(w, 0)
  ok(not paper.summarize_part("table_image", runs0, dirs[2], { B = 31 }).up_to_date,
    "another B: written again")
  check.raises_has(dirs[1] .. " was resampled 30 times with seed 0, " .. dirs[2] .. " 31 times",
    function() paper.merge_parts("table_image", dirs, merged) end)
  check.raises_has("a part of experiment 'table_image', expected 'table_b'",
    function() paper.merge_parts("table_b", dirs, merged) end)
  check.raises_has("takes the runs of one seed",
    function() paper.summarize_part("table_image", w.runs, dirs[1]) end)
  check.write_file(dirs[1] .. "/replicates.h5", "not hdf5")
  check.raises_has(dirs[1] .. "/replicates.h5",
    function() paper.merge_parts("table_image", dirs, merged) end)
  -- a part that lost an attribute or a dataset: refused, naming the file and what is missing
  local function fake(attrs, strings)
    local f <close> = hydra.h5.create(dirs[1] .. "/replicates.h5")
    for k, v in pairs(attrs) do f:set_attr("/", k, v) end
    if strings then f:write_strings("/comparisons", strings) end
    f:commit()
  end
  local base = { format = paper.PART_FORMAT, experiment = "table_image", seed = 1,
                 resamples = 30, boot_seed = 0 }
  fake(base)
  check.raises_has(dirs[1] .. "/replicates.h5: expected an integer attribute groups >= 0, got "
    .. "nil", function() paper.merge_parts("table_image", dirs, merged) end)
  base.groups = 1
  fake(base)
  check.raises_has("paper: " .. dirs[1] .. "/replicates.h5: ",
    function() paper.merge_parts("table_image", dirs, merged) end)
  -- such a file is no part of the runs: --write makes it again
  local runs1 = runs_of_seed(w, 1)
  ok(not paper.summarize_part("table_image", runs1, dirs[1], { B = 30 }).up_to_date,
    "a damaged part is written again")
  ok(paper.summarize_part("table_image", runs1, dirs[1], { B = 30 }).up_to_date, "and then whole")
end

-- `hydra repro --write` with the seeds complete one at a time: a part per complete seed, the
-- summary once the last seed has one (byte for byte the summary of all runs), parts removed.
function T.repro_write_builds_the_summary_seed_by_seed()
  local w = tiny_runs()
  local rp = require("hydra.repro_paper")
  local whole = w.root .. "/paper_whole2/table_image"
  paper.summarize("table_image", w.runs, whole, { B = 25 })
  local edir = w.root .. "/paper_seedwise/table_image"
  local function of_seed(seed) return { seed = seed, runs = runs_of_seed(w, seed) } end
  local lines = {}
  local function say(l) lines[#lines + 1] = l end
  rp.write_parts("table_image", edir, { of_seed(1) }, { 0, 1 }, "1 of 2 paper runs missing", 25,
    say)
  local out = table.concat(lines, "\n")
  ok(out:find("wrote seed part " .. edir .. "/seed-1/", 1, true) ~= nil
    and out:find("seed parts for seed(s) 1; the "
    .. "summary waits for seed(s) 0 (1 of 2 paper runs missing)", 1, true) ~= nil, out)
  eq(core.stat(edir .. "/values.csv"), nil, "no summary yet")
  eq(core.stat(edir .. "/seed-1/replicates.h5"), "file", "seed 1's part")
  -- later, in another results folder: seed 1's runs are gone, seed 0's are complete
  lines = {}
  rp.write_parts("table_image", edir, { of_seed(0) }, { 0, 1 }, "1 of 2 paper runs missing", 25,
    say)
  out = table.concat(lines, "\n")
  ok(out:find("merged the seed parts of seed(s) 0, 1", 1, true) ~= nil, out)
  for _, f in ipairs({ "values.csv", "bootstrap.csv" }) do
    eq(check.read_file(edir .. "/" .. f), check.read_file(whole .. "/" .. f), f .. ": identical")
  end
  eq(core.stat(edir .. "/seed-0"), nil, "part removed")
  eq(core.stat(edir .. "/seed-1"), nil, "part removed")
end

function T.write_then_check_on_real_runs()
  local w = tiny_runs()
  local sum = w.root .. "/paper2"
  paper.summarize("table_image", w.runs, sum .. "/table_image", { B = 20 })
  local doc = w.root .. "/doc.md"
  check.write_file(doc, "# doc\n\nprose stays\n\n<!-- hydra:table table_image.ood_msp -->\n"
    .. "old text\n<!-- /hydra:table -->\n\nmore prose\n\n"
    .. "<!-- hydra:table table_image.verdicts -->\n<!-- /hydra:table -->\n")
  check.same(paper.write(doc, sum), { "table_image.ood_msp", "table_image.verdicts" }, "written")
  local text = check.read_file(doc)
  ok(text:find("^# doc\n\nprose stays\n\n<!%-%- hydra:table table_image.ood_msp %-%->\n%*Generated")
    ~= nil, "prose kept, block regenerated")
  ok(text:find("\n<!%-%- /hydra:table %-%->\n\nmore prose\n\n", 1) ~= nil, "prose between kept")
  -- the claims whose rows the runs have, each with a verdict; the others left out
  ok(text:find("\n| Taylor | Single | ECE | A > B | ", 1, true) ~= nil, "pruning vs calibration")
  ok(text:find("| Hydra (Circ) |", 1, true) == nil, "no Hydra (Circ) row without its runs")
  ok(text:find("| Deep Ensembles |", 1, true) ~= nil, "a row per method")
  ok(text:find("Seeds 0, 1;", 1, true) ~= nil, "the caption states the seeds")
  eq(#paper.check(doc, sum), 0, "fresh tables pass")
  eq(paper.write(doc, sum)[2], "table_image.verdicts", "a second write")
  eq(check.read_file(doc), text, "is a fixed point")
end

-- Blocks without their summary keep (or get) the placeholder line; --write fills the others,
-- --check passes and lists the waiting ones; a generated block whose summary is gone is an error.
-- A script's summary under results_dir (results_dir=DIR) is copied to --summaries by --write
-- and compared by --check.
function T.waiting_tables_and_script_summaries()
  local dir = check.tmpdir()
  local sum = dir .. "/sum"
  core.mkdir_p(sum)
  os.execute(("cp -r %s/summaries/prop1 %s/"):format(FIX, sum))
  local doc = dir .. "/doc.md"
  local t_b2 = paper.table("b2_circuit_knockout.knockout")
  local ph = paper.placeholder(t_b2, sum .. "/b2_circuit_knockout/")
  eq(ph, "*Not generated yet: `make repro` (or `hydra repro b2_circuit_knockout --profile paper` "
    .. "then `hydra repro --write`) writes this table from `" .. sum .. "/b2_circuit_knockout/`.*",
    "placeholder text")
  check.write_file(doc, "a\n\n<!-- hydra:table prop1.statements -->\n<!-- /hydra:table -->\n\n"
    .. "<!-- hydra:table b2_circuit_knockout.knockout -->\n<!-- /hydra:table -->\n")
  local names, waits = paper.write(doc, sum)
  check.same(names, { "prop1.statements" }, "generated")
  check.same(waits, { "b2_circuit_knockout.knockout" }, "waiting")
  local text = check.read_file(doc)
  ok(text:find("\n<!-- hydra:table b2_circuit_knockout.knockout -->\n" .. ph
    .. "\n<!-- /hydra:table -->\n", 1, true) ~= nil, "the placeholder written")
  local problems, w = paper.check(doc, sum)
  eq(#problems, 0, "a waiting table passes: " .. table.concat(problems, "; "))
  check.same(w, { "b2_circuit_knockout.knockout" }, "listed as waiting")
  -- a changed placeholder is no longer "waiting": the missing summary is named
  check.write_file(doc, (text:gsub("Not generated yet", "Not yet")))
  problems = paper.check(doc, sum)
  eq(#problems, 1, "one problem")
  ok(problems[1]:find("missing result summary " .. sum .. "/b2_circuit_knockout/values.csv", 1,
    true) ~= nil, problems[1])
  -- the script's summary under results_dir: --write copies it and fills the table
  check.write_file(doc, text)
  local rdir = dir .. "/runs"
  core.mkdir_p(rdir .. "/paper")
  local rows = {}
  for i, r in ipairs({ "none", "circuit", "low_importance", "random" }) do
    rows[i] = { id = r, label = r, values = { [0] = { acc = 0.8 + 0.01 * i,
      ood_avg_auroc_msp = 0.7 + 0.01 * i }, [1] = { acc = 0.81, ood_avg_auroc_msp = 0.72 } } }
  end
  core.mkdir_p(rdir .. "/paper/b2_circuit_knockout")
  check.write_file(rdir .. "/paper/b2_circuit_knockout/values.csv",
    paper.values_csv("b2_circuit_knockout", rows, { "acc", "ood_avg_auroc_msp" }))
  check.write_file(rdir .. "/paper/b2_circuit_knockout/bootstrap.csv",
    paper.bootstrap_csv("b2_circuit_knockout", {}, {}))
  local args = ("--doc %s --summaries %s results_dir=%s"):format(doc, sum, rdir)
  local code, out, e = check.hydra("repro --write " .. args)
  eq(code, 0, "write: " .. e)
  ok(out:find("b2_circuit_knockout: copied " .. rdir .. "/paper/b2_circuit_knockout", 1, true)
    ~= nil, out)
  eq(check.read_file(sum .. "/b2_circuit_knockout/values.csv"),
    check.read_file(rdir .. "/paper/b2_circuit_knockout/values.csv"), "copied")
  ok(check.read_file(doc):find("| Circuit heads knocked out |", 1, true) == nil
    and check.read_file(doc):find("| circuit | ", 1, true) ~= nil, "the table generated")
  code = check.hydra("repro --check " .. args)
  eq(code, 0, "check after write")
  -- a newer script summary under results_dir: --check names the stale copy
  check.write_file(rdir .. "/paper/b2_circuit_knockout/values.csv",
    check.read_file(rdir .. "/paper/b2_circuit_knockout/values.csv"):gsub("0%.81", "0.82"))
  local _
  code, _, e = check.hydra("repro --check " .. args)
  eq(code, 1, "stale copy: exit 1")
  ok(e:find(sum .. "/b2_circuit_knockout/values.csv: differs from " .. rdir
    .. "/paper/b2_circuit_knockout/values.csv", 1, true) ~= nil, e)
  -- a generated table whose summary disappears: --write refuses, the document is untouched
  local before = check.read_file(doc)
  os.execute(("rm -r %s/b2_circuit_knockout %s/paper/b2_circuit_knockout"):format(sum, rdir))
  check.raises_has("unchanged: missing result summary " .. sum
    .. "/b2_circuit_knockout/values.csv", function() return paper.write(doc, sum) end)
  eq(check.read_file(doc), before, "untouched")
end

-- A comparison of two scores (the training-free tables: each row its own score): key_a and
-- key_b are each side's metric, so the observed difference is that of the two metrics.
function T.bootstrap_of_two_scores()
  local w = tiny_runs()
  local r = w.runs[1]
  local res
  for _, x in ipairs(r.loaded.results) do if x.name == "taylor" then res = x end end
  local f <close> = hydra.h5.open(r.dir .. "/result.h5")
  local s = verdict.samples(f, res.group)
  local out = verdict.bootstrap_many({ a = { [0] = s }, b = { [0] = s } }, { { a = "a", b = "b",
    key = "ood_avg_auroc_{score}", key_a = "ood_avg_auroc_msp",
    key_b = "ood_avg_auroc_maxlogit" } }, { B = 20 })
  local want = hydra.report.metric_of(res, "ood_avg_auroc_msp")
    - hydra.report.metric_of(res, "ood_avg_auroc_maxlogit")
  ok(want ~= 0, "the two scores differ on this run")
  check.near(out[1].diff, want, 1e-9, "MSP minus max-logit AUROC")
  ok(out[1].lo <= out[1].diff and out[1].diff <= out[1].hi, "interval around it")
end

-- ===== exact generation from the committed fixture summaries =====

-- The committed document with every block emptied.
local function emptied(text)
  return (text:gsub("(<!%-%- hydra:table [%w_.%-]+ %-%->\n).-(<!%-%- /hydra:table %-%->)",
    "%1%2"))
end

function T.fixture_tables_are_generated_exactly()
  local dir = check.tmpdir()
  local committed = check.read_file(FIX .. "/doc.md")
  check.write_file(dir .. "/doc.md", emptied(committed))
  ok(emptied(committed) ~= committed, "the fixture has generated blocks")
  paper.write(dir .. "/doc.md", FIX .. "/summaries")
  eq(check.read_file(dir .. "/doc.md"), committed, "generated = committed")
  -- cells checked by hand (tests/ref/paper/make_fixture.py chose the values; t and p of
  -- df 2 in closed form: t = mean / (sd / sqrt 3), p = 1 - |t| / sqrt(t^2 + 2))
  ok(committed:find("| Taylor | 73.00 ± 1.00 |", 1, true) ~= nil, "mean ± sample std")
  for _, want in ipairs({
    -- d = 1, 2, 3 points: t = 3.46, p 0.074; the CI excludes 0 but the seed test does not
    "| CircAvg | Taylor | OOD avg AUROC (MSP) | A > B | 75.00 ± 2.00 | 73.00 ± 1.00 | +2.00 | "
      .. "t(2) = 3.46, p 0.074 | +1.10, +2.90 | within noise |",
    -- d = 1.9, 2.0, 2.1: t = 34.64, p = 0.00083, CI above 0
    "| Hydra (Taylor) | Taylor | OOD avg AUROC (MSP) | A > B | 75.00 ± 1.10 | 73.00 ± 1.00 | "
      .. "+2.00 | t(2) = 34.64, p < 0.001 | +1.50, +2.50 | holds |",
    -- d = 2.2, 3.0, 3.8: t = 6.50, p 0.023, but the CI keeps 0
    "| Hydra (Circ) | Hydra (Taylor) | OOD avg AUROC (MSP) | A > B | 78.00 ± 1.90 | "
      .. "75.00 ± 1.10 | +3.00 | t(2) = 6.50, p 0.023 | −0.50, +6.50 | within noise |",
    -- d = −5.1, −5.0, −4.9: t = −86.60, CI below 0
    "| Hydra (Circ) | Deep Ensembles | OOD avg AUROC (MSP) | A > B | 78.00 ± 1.90 | "
      .. "83.00 ± 1.80 | −5.00 | t(2) = −86.60, p < 0.001 | −5.40, −4.60 | fails |",
    -- accuracy d = −2, −1.5, −1: t = −5.20, p 0.035
    "| Hydra (Circ) | Deep Ensembles | Acc | A > B | 87.00 ± 1.00 | 88.50 ± 0.50 | −1.50 | "
      .. "t(2) = −5.20, p 0.035 | −2.10, −0.90 | fails |",
  }) do
    ok(committed:find(want, 1, true) ~= nil, "hand-checked row: " .. want)
  end
  eq(#paper.check(FIX .. "/doc.md", FIX .. "/summaries"), 0, "the committed fixture passes")
end

function T.check_names_a_changed_cell()
  local dir = check.tmpdir()
  -- results_dir apart: the repository's own results/paper/ holds script summaries (prop1) that
  -- --check compares with the fixture's
  local rd = " results_dir=" .. dir .. "/results"
  local text = check.read_file(FIX .. "/doc.md")
  local changed, n = text:gsub("| Taylor | 73.00 ± 1.00 |", "| Taylor | 73.01 ± 1.00 |", 1)
  eq(n, 1, "one cell changed")
  check.write_file(dir .. "/doc.md", changed)
  local p = paper.check(dir .. "/doc.md", FIX .. "/summaries")
  eq(#p, 1, "one problem")
  eq(p[1], dir .. "/doc.md: table ablation_pruning.ood_msp, row 'Taylor', column 'OOD avg AUROC "
    .. "↑': committed '73.01 ± 1.00', computed '73.00 ± 1.00' (" .. FIX
    .. "/summaries/ablation_pruning/values.csv)", "file, table, row, column, both texts")
  -- the command exits 1 and names the cell; with the summaries absent it names what is missing
  local code, _, e = check.hydra(("repro --check --doc %s --summaries %s"):format(dir .. "/doc.md",
    FIX .. "/summaries") .. rd)
  eq(code, 1, "exit status")
  ok(e:find("row 'Taylor', column 'OOD avg AUROC ↑': committed '73.01 ± 1.00'", 1, true) ~= nil,
    "message: " .. e)
  code, _, e = check.hydra(("repro --check --doc %s --summaries %s"):format(dir .. "/doc.md",
    dir .. "/none") .. rd)
  eq(code, 1, "missing summaries: exit status")
  ok(e:find("missing result summary " .. dir .. "/none/ablation_pruning/values.csv (table "
    .. "ablation_pruning.id): run `hydra repro ablation_pruning --profile paper`, then "
    .. "`hydra repro --write`", 1, true) ~= nil, "missing: " .. e)
  code = check.hydra(("repro --check --doc %s --summaries %s"):format(FIX .. "/doc.md",
    FIX .. "/summaries") .. rd)
  eq(code, 0, "the committed fixture: exit 0")
  -- --write changes nothing when a summary is missing
  code, _, e = check.hydra(("repro --write --doc %s --summaries %s"):format(dir .. "/doc.md",
    dir .. "/none") .. rd)
  ok(code ~= 0 and e:find("unchanged", 1, true) ~= nil, "write refuses: " .. e)
  eq(check.read_file(dir .. "/doc.md"), changed, "document untouched")
end

-- The shift columns of table_image, the condition ablation's table and the training-free
-- tables (each row its own score): hand-checked cells of the committed fixture (tests/ref/paper/make_fixture.py), and a changed cell of each is named.
function T.fixture_shift_condition_and_training_free_tables()
  local committed = check.read_file(FIX .. "/doc.md")
  for _, want in ipairs({
    -- s5 Acc 0.56, 0.575, 0.59: mean 57.50, sample std 1.50
    "| Single | 90.10 ± 0.10 | 85.10 ± 0.10 | 80.10 ± 0.10 | 75.10 ± 0.10 | 57.50 ± 1.50 |",
    -- d = −7, −6, −5 points: t = −10.39, p = 1 − 10.39 / sqrt(10.39^2 + 2) = 0.009
    "| Hydra (Circ), reference | 70.70 ± 0.20 | 78.00 ± 2.00 | 72.70 ± 0.20 | 73.70 ± 0.20 | "
      .. "74.70 ± 0.20 | Deep Ensembles, reference: −6.00 (p 0.009; CI −7.50, −4.50): fails |",
    -- d = 3, 3.5, 4: t = 12.12, p 0.007, CI above 0
    "| Hydra (Circ), search on ood-val-mnist, mnist not tested | 75.70 ± 0.20 | 84.50 ± 1.50 |",
    "Deep Ensembles, search on ood-val-mnist, mnist not tested: +3.50 (p 0.007; CI +2.00, "
      .. "+5.00): holds |",
    -- OOD all AUROC (MSP) 77, 78, 79 against the head's (its output) 75, 75.5, 76: d = 2, 2.5,
    -- 3, t = 8.66, p = 1 − 8.66 / sqrt(8.66^2 + 2) = 0.013
    "| Hydra (Circ), no fine-tuning (MSP) | 68.70 ± 0.20 | 69.20 ± 0.20 | 78.00 ± 1.00 | "
      .. "70.20 ± 0.20 | 70.70 ± 0.20 | ViLU-style head, trained (its output): +2.50 (p 0.013; "
      .. "CI +1.00, +4.00): holds |",
  }) do
    ok(committed:find(want, 1, true) ~= nil, "hand-checked cell: " .. want)
  end
  local dir = check.tmpdir()
  for _, c in ipairs({
    { "| 57.50 ± 1.50 |", "| 57.49 ± 1.50 |", "table table_image.shift, row 'Single', column "
      .. "'s5 Acc ↑': committed '57.49 ± 1.50', computed '57.50 ± 1.50'" },
    { "| Deep Ensembles, M = 4 | 81.20 ± 0.20 |", "| Deep Ensembles, M = 4 | 81.30 ± 0.20 |",
      "table ablation_condition.acc_ood, row 'Deep Ensembles, M = 4', column 'Acc ↑': "
      .. "committed '81.30 ± 0.20', computed '81.20 ± 0.20'" },
    { "| 78.00 ± 1.00 | 70.20 ± 0.20 |", "| 78.00 ± 1.00 | 70.30 ± 0.20 |",
      "table table_training_free.ood, row 'Hydra (Circ), no fine-tuning (MSP)', column 'OOD all "
      .. "FPR95 ↓': committed '70.30 ± 0.20', computed '70.20 ± 0.20'" },
  }) do
    local changed, n = committed:gsub(c[1]:gsub("%p", "%%%0"), (c[2]:gsub("%%", "%%%%")), 1)
    eq(n, 1, "one cell changed: " .. c[1])
    check.write_file(dir .. "/doc.md", changed)
    local p = paper.check(dir .. "/doc.md", FIX .. "/summaries")
    eq(#p, 1, "one problem")
    ok(p[1]:find(c[3], 1, true) ~= nil, "named: " .. p[1])
  end
end

-- Proposition 1's tables (experiments/prop1.lua writes the summary): hand-checked cells of the
-- committed fixture, a changed cell named, and hydra.prop1.summary_rows on constructed records.
function T.fixture_prop1_tables()
  local committed = check.read_file(FIX .. "/doc.md")
  for _, want in ipairs({
    -- dgap 0.01, 0.02, 0.03: mean 0.020, sample std 0.010
    "| Taylor, no fine-tuning, 6 heads kept | 0.020 ± 0.010 |",
    -- C2 shares 0.2, 0.3, 0.4: 30.00 ± 10.00 percent
    "| C2: ∇L_Dn(θ)ᵀδθ ≥ 0 | 30.00 ± 10.00 |",
  }) do
    ok(committed:find(want, 1, true) ~= nil, "hand-checked cell: " .. want)
  end
  local dir = check.tmpdir()
  local changed, n = committed:gsub("| C2: ∇L_Dn%(θ%)ᵀδθ ≥ 0 | 30%.00 ± 10%.00 |",
    "| C2: ∇L_Dn(θ)ᵀδθ ≥ 0 | 30.00 ± 10.01 |", 1)
  eq(n, 1, "one cell changed")
  check.write_file(dir .. "/doc.md", changed)
  local p = paper.check(dir .. "/doc.md", FIX .. "/summaries")
  eq(#p, 1, "one problem")
  ok(p[1]:find("table prop1.statements, row 'C2: ∇L_Dn(θ)ᵀδθ ≥ 0', column 'Holds in (% of "
    .. "pruned points × severities)': committed '30.00 ± 10.01', computed '30.00 ± 10.00'", 1,
    true) ~= nil, "named: " .. p[1])
  -- summary_rows: two seeds, two severities; the control point (dtheta = 0) has no row
  local prop1 = require("hydra.prop1")
  local function rec(seed, method, k, dtheta, v)
    local r = { seed = seed, method = method, ft = 0, k = k, dtheta_norm = dtheta,
                train_gdot = v.tg, train_vhv = 1,
                clean_ece0 = 0.01, clean_ece1 = 0.02, clean_nll0 = 0.3, clean_nll1 = 0.3,
                clean_acc1 = v.acc }
    for i, s in ipairs({ "s1", "s2" }) do
      r[s .. "_dgap"], r[s .. "_gdot"], r[s .. "_vhv_diff"] = v.dgap[i], v.gdot[i], v.vhv[i]
      r[s .. "_gap0"], r[s .. "_gap1"] = 0, v.dgap[i]
      r[s .. "_pred"] = v.pred[i]
      r[s .. "_ece0"], r[s .. "_ece1"] = 0.05, v.ece1[i]
      r[s .. "_nll0"], r[s .. "_nll1"] = 0.5, 0.4
    end
    return r
  end
  local recs = {
    rec(0, "taylor", 8, 0, { tg = 0, acc = 0.9, dgap = { 0, 0 }, gdot = { 0, 0 },
      vhv = { 0, 0 }, pred = { 0, 0 }, ece1 = { 0.05, 0.05 } }),
    rec(0, "taylor", 4, 1, { tg = 0.01, acc = 0.8, dgap = { 0.1, 0.3 }, gdot = { 1, -1 },
      vhv = { 1, 1 }, pred = { 1, -1 }, ece1 = { 0.05, 0.10 } }),
    rec(1, "taylor", 4, 1, { tg = 1, acc = 0.7, dgap = { -0.1, -0.3 }, gdot = { -1, -1 },
      vhv = { -1, 1 }, pred = { -1, -1 }, ece1 = { 0.05, 0.01 } }),
  }
  local rows, keys = prop1.summary_rows(recs, "clean", { "s1", "s2" })
  check.same(keys, { "dgap", "ece_gap_change", "clean_acc", "c2", "c3", "conclusion", "share" },
    "keys")
  eq(#rows, 1 + #prop1.STATEMENTS, "one pruned point and the statements")
  eq(rows[1].id, "taylor[finetune.epochs=0,hydra.keep_heads=4]", "point id")
  eq(rows[1].label, "Taylor, no fine-tuning, 4 heads kept", "point label")
  local v0, v1 = rows[1].values[0], rows[1].values[1]
  near(v0.dgap, 0.2, 1e-12, "mean change over the severities")
  near(v0.ece_gap_change, (0.10 - 0.02) - (0.05 - 0.01), 1e-12, "ECE-gap change at s2")
  eq(v0.clean_acc, 0.8, "clean accuracy of the pruned model")
  eq(v0.c2, 0.5, "C2 on one of two severities")
  eq(v1.c3, 0.5, "C3 on one of two severities")
  eq(v1.conclusion, 0, "the gap shrinks on both")
  local st = {}
  for _, r in ipairs(rows) do st[r.id] = r.values end
  eq(st.c1[0].share, 1, "C1 counted once per point: |0.01| <= 0.05")
  eq(st.c1[1].share, 0, "|1| > 0.05")
  eq(st.second_order[0].share, 0.5, "the prediction's sign on one severity")
  eq(st.conclusion[0].share, 1, "the control point is not counted")
end

function T.bad_documents_and_summaries()
  local dir = check.tmpdir()
  local function doc(text)
    check.write_file(dir .. "/d.md", text)
    return dir .. "/d.md"
  end
  check.raises_has("d.md:2: unknown table 'nope' (tables: table_image.id,", function()
    return paper.check(doc("x\n<!-- hydra:table nope -->\n<!-- /hydra:table -->\n"), dir)
  end)
  check.raises_has("d.md:1: table 'table_image.id' is not closed", function()
    return paper.check(doc("<!-- hydra:table table_image.id -->\n| a |\n"), dir)
  end)
  check.raises_has("d.md:3: '<!-- /hydra:table -->' without an opening marker", function()
    return paper.check(doc("a\nb\n<!-- /hydra:table -->\n"), dir)
  end)
  core.mkdir_p(dir .. "/s/x")
  check.write_file(dir .. "/s/x/values.csv", "row,label,seed,key,value\nsingle,Single,zero,acc,1\n")
  check.write_file(dir .. "/s/x/bootstrap.csv", "a,b,key,resamples,boot_seed,seeds,diff,lo,hi\n")
  check.raises_has("values.csv:2: seed 'zero' is not a number",
    function() return paper.read_summary(dir .. "/s/x") end)
  check.write_file(dir .. "/s/x/values.csv", "row,seed\n")
  check.raises_has("values.csv:1: expected the header 'row,label,seed,key,value'",
    function() return paper.read_summary(dir .. "/s/x") end)
  eq(select(2, paper.read_summary(dir .. "/s/none")), dir .. "/s/none/values.csv", "absent")
end

-- The repository's own document: every generated table of paper_repro.md equals what the
-- committed summaries in results/paper/ give (the others wait with their placeholder line).
function T.paper_repro_matches_its_summaries()
  local problems, waits = paper.check("paper_repro.md", "results/paper")
  eq(#problems, 0, "paper_repro.md: " .. table.concat(problems, "; "))
  ok(#waits < #paper.TABLES, "some table is generated")
end

-- the rule the tables apply is hydra.verdict's (no second copy)
function T.tables_use_the_verdict_rule()
  local s = assert(paper.read_summary(FIX .. "/summaries/ablation_pruning"))
  local t = verdict.paired_t({ s.values.circavg.ood_avg_auroc_msp[0],
    s.values.circavg.ood_avg_auroc_msp[1], s.values.circavg.ood_avg_auroc_msp[2] },
    { s.values.taylor.ood_avg_auroc_msp[0], s.values.taylor.ood_avg_auroc_msp[1],
      s.values.taylor.ood_avg_auroc_msp[2] })
  near(t.p, 1 - t.t / math.sqrt(t.t ^ 2 + 2), 1e-9, "p of the fixture's CircAvg - Taylor")
end

return T
