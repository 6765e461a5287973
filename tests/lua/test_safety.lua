-- tests/lua/test_safety.lua: untrusted text never reaches gnuplot as a command, names that become
-- folders are checked, outputs never overwrite inputs and are written atomically.
local check = require("check")
local core = require("hydra.core")
local hydra = require("hydra")

local T = {}

local ID_PROBS = { { 0.75, 0.125, 0.125 }, { 0.25, 0.25, 0.5 }, { 0.5, 0.5, 0 }, { 0, 0, 1 } }
local OOD_PROBS = { { 0.5, 0.25, 0.25 }, { 0.375, 0.375, 0.25 } }

local function write_preds(path, probs, labels, attrs)
  local f <close> = hydra.h5.create(path)
  f:write("/probs", core.from_table("float32", probs))
  if not labels then
    labels = {}
    for i = 1, #probs do labels[i] = -1 end
  end
  f:write("/labels", core.from_table("int32", labels))
  for k, v in pairs(attrs or {}) do f:set_attr("/", k, v) end
  f:commit()
  return path
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function exists(p) return core.stat(p) ~= nil end

-- a gnuplot payload that creates `marker` when it runs (slashes written as the octal escape
-- \057 of gnuplot's double-quoted strings, so the payload can sit in a file name)
local function payload(marker)
  return ("x\nsystem(\"touch %s\")\n#"):format((marker:gsub("/", "\\057")))
end

function T.method_attribute_cannot_run_gnuplot_commands()
  local d = check.tmpdir()
  local marker = d .. "/PWNED_preds"
  local id = write_preds(d .. "/id.h5", ID_PROBS, { 0, 1, 1, 2 },
    { method = "Single" .. payload(marker), dataset = "toy\nsystem('x')" })
  local ood = write_preds(d .. "/ood.h5", OOD_PROBS)
  local code, out, e = check.hydra(("eval --id %s --ood far=%s --out %s/r.h5"):format(id, ood, d))
  check.eq(code, 0, "eval: " .. out .. e)
  for _, kind in ipairs({ "reliability", "ood-hist", "risk-coverage" }) do
    code, out, e = check.hydra(("plot %s %s/r.h5 --out %s/%s.png"):format(kind, d, d, kind))
    check.eq(code, 0, kind .. ": " .. out .. e)
    check.ok(not exists(marker), kind .. ": the payload in the method attribute ran")
    local gp = check.read_file(("%s/%s.gp"):format(d, kind))
    check.ok(not gp:find("\nsystem", 1, true), kind .. ".gp has the payload on its own line")
    local dat = check.read_file(("%s/%s.dat"):format(d, kind))
    check.ok(not dat:find("\nsystem", 1, true), kind .. ".dat has the payload on its own line")
  end
  -- the label is kept, control characters replaced by spaces
  local r = hydra.report.load(d .. "/r.h5")
  check.eq(r.method, "Single" .. payload(marker):gsub("%c", " "), "method read from the file")
  check.eq(r.dataset, "toy system('x')", "dataset read from the file")
end

function T.plot_out_name_cannot_run_gnuplot_commands()
  local d = check.tmpdir()
  local marker = d .. "/PWNED_plot"
  local id = write_preds(d .. "/id.h5", ID_PROBS, { 0, 1, 1, 2 }, { method = "single" })
  local code, out, e = check.hydra(("eval --id %s --out %s/r.h5"):format(id, d))
  check.eq(code, 0, "eval: " .. out .. e)
  local name = d .. "/" .. payload(marker) .. "y.png"
  code, out, e = check.hydra(("plot reliability %s/r.h5 --out %s"):format(d, sh_quote(name)))
  check.eq(code, 1, "exit status: " .. out .. e)
  check.ok(e:find("hydra: plot: cannot write '", 1, true)
    and e:find("the name contains a control character", 1, true), "message: " .. e)
  check.ok(not e:find("stack traceback", 1, true), "no traceback: " .. e)
  check.ok(not exists(marker), "the payload in --out ran")
  check.eq(#core.listdir(d), 2, "nothing written beside id.h5 and r.h5")
  -- the library refuses such a path too (a script calling plot.run directly)
  check.raises_has("the name contains a control character",
    function() return hydra.plot.run(name, "plot x", "1 2\n") end)
  check.ok(not exists(marker), "the payload given to plot.run ran")
end

function T.gnuplot_strings_are_single_quoted_and_inert()
  local q = hydra.plot.gp_str
  check.eq(q("it's"), "'it''s'", "quote doubled")
  check.eq(q("a`id`b"), "'a`id`b'", "backquotes stay inside a single-quoted string")
  check.raises_has("contains a control character (byte 0x0a)", function() return q("a\nb") end)
  check.raises_has("contains a control character (byte 0x0d)", function() return q("a\rb") end)
  check.raises_has("contains a control character (byte 0x7f)", function() return q("a\127b") end)
  check.eq(hydra.plot.clean_label("a\nb\tc\0d"), "a b c d", "clean_label")
end

function T.experiment_name_from_a_config_is_checked()
  local d = check.tmpdir()
  local marker = d .. "/PWNED_exp"
  local cfg = d .. "/evil.yaml"
  check.write_file(cfg, ("methods: [single]\nexperiment: \"e\\nsystem(\\\"touch %s\\\")\\n\"\n")
    :format(marker))
  local code, out, e = check.hydra(("config --check %s"):format(cfg))
  check.eq(code, 1, "exit status: " .. out .. e)
  check.eq(e, ("hydra: %s:2:13: experiment must be a name of letters, digits, '_', '.' and '-' "
    .. "(not '.' or '..'; got 'e\\nsystem(\"touch %s\")\\n')\n"):format(cfg, marker), "message")
  code, out, e = check.hydra(("exp %s results_dir=%s/res --quiet"):format(cfg, d))
  check.eq(code, 1, "exp exit status: " .. out .. e)
  check.ok(not exists(marker), "the payload in experiment: ran")
  check.ok(not exists(d .. "/res"), "nothing written under results_dir")
  for _, bad in ipairs({ "../escaped", "a/b", "", "..", ".", "/abs" }) do
    code, out, e = check.hydra(("config --check %s %s"):format(cfg, sh_quote("experiment=" .. bad)))
    check.eq(code, 1, "experiment=" .. bad .. ": " .. out .. e)
    check.ok(e:find("must be a name of letters", 1, true), "experiment=" .. bad .. ": " .. e)
  end
  code, out, e = check.hydra(("config --check %s experiment=ok_name-1.2"):format(cfg))
  check.eq(code, 1, "the file itself is still bad")
  check.write_file(cfg, "experiment: ok_name-1.2\n")
  code, out, e = check.hydra(("config --check %s"):format(cfg))
  check.eq(code, 0, "a good name: " .. out .. e)
end

function T.experiment_name_in_a_sweep_grid_is_checked()
  local d = check.tmpdir()
  check.write_file(d .. "/base.yaml", "methods: [single]\n")
  check.write_file(d .. "/s.yaml", "base: base.yaml\ngrid:\n  experiment: [ok, '../../x']\n")
  local code, out, e = check.hydra(("sweep %s/s.yaml --list"):format(d))
  check.eq(code, 1, "exit status: " .. out .. e)
  check.eq(e, ("hydra: %s/s.yaml:3:20: grid experiment[2] must be a name of letters, digits, "
    .. "'_', '.' and '-' (not '.' or '..'; got '../../x')\n"):format(d), "message")
end

function T.sweep_series_names_are_quoted_by_the_one_quoting_function()
  -- report_sweep has no quoting function of its own
  local src = check.read_file((rawget(_G, "HYDRA_HOME") or ".") .. "/lua/hydra/report_sweep.lua")
  check.ok(not src:find("function gp_str", 1, true), "report_sweep.lua defines its own gp_str")
end

-- ===== every generated file treats data as data =====

-- the strings of reviews/reliability_2.md H-b4: newlines, quotes, ';', $(), backquotes, <script>
local function evil_strings(marker)
  return { "a\nb", "q'uo\"te", "x;touch " .. marker, "$(touch " .. marker .. ")",
           "`touch " .. marker .. "`", "<script>alert(1)</script>", "a|b\\c&d", "\r\t\127" }
end

function T.yaml_shell_markdown_csv_and_json_writers_keep_data_as_data()
  local d = check.tmpdir()
  local marker = d .. "/PWNED_gen"
  local yaml, fs, report, eval = require("hydra.yaml"), require("hydra.fs"), hydra.report,
    hydra.eval
  for _, s in ipairs(evil_strings(marker)) do
    local what = ("%q"):format(s)
    -- YAML (config.resolved.yaml, sweep labels): reads back as the same string
    check.eq(core.yaml_parse(yaml.string(s), "test"), s, "yaml.string " .. what)
    -- shell: one inert word
    local out = d .. "/sh.txt"
    check.ok(os.execute(("printf '%%s' %s >%s"):format(fs.shell_quote(s), out)), "sh " .. what)
    check.eq(check.read_file(out), s, "fs.shell_quote " .. what)
    -- Markdown: no raw HTML and no cell break
    local md = report.md_escape(s)
    check.ok(not md:find("[<>]") and not md:find("[^\\]|") and not md:find("^|"),
      "md_escape " .. what .. " -> " .. md)
    -- CSV: a field with a line break or quote is quoted, quotes doubled
    local f = report.csv_field(s)
    if s:find('[,"\r\n]') then
      check.eq(f, '"' .. s:gsub('"', '""') .. '"', "csv_field " .. what)
    end
    -- JSON: no raw control character, every '"' escaped
    local j = eval.json_value(s, 0)
    check.ok(not j:sub(2, -2):find("%c") and not j:sub(2, -2):gsub('\\.', ""):find('"'),
      "json " .. what .. " -> " .. j)
  end
  check.ok(not exists(marker), "a payload ran")
  -- config.resolved.yaml: a results_dir with quotes, ';', $() and <script> reads back the same;
  -- a control character is refused when the config is checked
  for _, s in ipairs(evil_strings(marker)) do
    if s:find("%c") then
      check.raises_has("results_dir must not contain a control character", function()
        return hydra.config.resolve({ methods = { "single" }, results_dir = s })
      end)
    else
      local cfg = hydra.config.resolve({ methods = { "single" }, results_dir = s })
      hydra.config.write(cfg, d .. "/c.yaml")
      check.eq(hydra.config.load(d .. "/c.yaml").results_dir, s, "resolved yaml " .. s)
    end
  end
  -- a Markdown table of a result named <script>|x: one cell, no HTML
  local id = write_preds(d .. "/id.h5", ID_PROBS, { 0, 1, 1, 2 },
    { method = "<script>alert(1)</script>|x" })
  local code, o, e = check.hydra(("eval --id %s --out %s/r.h5 --md %s/t.md"):format(id, d, d))
  check.eq(code, 0, "eval: " .. o .. e)
  local t = check.read_file(d .. "/t.md")
  check.ok(not t:find("<script>", 1, true), "raw <script> in the table: " .. t)
  check.ok(t:find("| &lt;script&gt;alert(1)&lt;/script&gt;\\|x |", 1, true), "escaped cell: " .. t)
end

-- ===== outputs never destroy inputs =====

local function fixture_model(d)
  hydra.model.write_synthetic(d .. "/data.h5", { train = 64, val = 16, test = 16 })
  check.write_file(d .. "/cfg.yaml", ("include: %s/configs/models/vit-fm-tiny.yaml\n"
    .. "data: {id: data, dir: %s, train_subset: 32, test_subset: 16}\ntrain: {epochs: 1}\n")
    :format(rawget(_G, "HYDRA_HOME") or ".", d))
  local code, out, e = check.hydra(("model init %s/cfg.yaml --out %s/ck.h5"):format(d, d))
  check.eq(code, 0, "model init: " .. out .. e)
  return d .. "/ck.h5"
end

local function digest(path) return core.hash_file(path, "sha256") end

-- hydra CMD must fail with `code`, say `part`, show no traceback and leave `path` unchanged
local function refuses(cmdline, code, part, path)
  local before = digest(path)
  local got, out, e = check.hydra(cmdline)
  check.eq(got, code, "exit status of hydra " .. cmdline .. ": " .. out .. e)
  check.ok(e:find(part, 1, true), ("hydra %s\n  said: %s  want: %s"):format(cmdline, e, part))
  check.ok(not e:find("stack traceback", 1, true), "traceback: " .. e)
  check.eq(digest(path), before, path .. " unchanged by hydra " .. cmdline)
end

function T.out_equal_to_an_input_is_refused()
  local d = check.tmpdir()
  local ck = fixture_model(d)
  refuses(("predict %s --data %s/data.h5 --split test --out %s"):format(ck, d, ck), 1,
    ("hydra predict: --out '%s' is the input CKPT.h5; refusing to overwrite it"):format(ck), ck)
  refuses(("predict %s --data %s/data.h5 --split test --out %s/./data.h5"):format(ck, d, d), 1,
    ("hydra predict: --out '%s/./data.h5' is the input --data '%s/data.h5'"):format(d, d),
    d .. "/data.h5")
  os.execute(("ln %s %s/hard.h5"):format(ck, d))
  refuses(("predict %s --data %s/data.h5 --split test --out %s/hard.h5"):format(ck, d, d), 1,
    ("--out '%s/hard.h5' is the input CKPT.h5 '%s'"):format(d, ck), ck)
  local code, out, e = check.hydra(("predict %s --data %s/data.h5 --split test --out %s/p.h5")
    :format(ck, d, d))
  check.eq(code, 0, "predict: " .. out .. e)
  local p = d .. "/p.h5"
  refuses(("eval --id %s --out %s"):format(p, p), 1,
    ("hydra eval: --out '%s' is the input --id"):format(p), p)
  refuses(("eval --id %s --ood far=%s --out %s/r.h5 --json %s"):format(p, ck, d, ck), 1,
    ("hydra eval: --json '%s' is the input --ood far"):format(ck), ck)
  refuses(("fuse %s %s/hard.h5 --out %s"):format(ck, d, ck), 1,
    ("hydra fuse: --out '%s' is the input MEMBER.h5 #1"):format(ck), ck)
  refuses(("train %s/cfg.yaml --out %s/cfg.yaml --quiet"):format(d, d), 1,
    ("hydra train: --out '%s/cfg.yaml' is the input CONFIG.yaml"):format(d), d .. "/cfg.yaml")
  refuses(("model init %s/cfg.yaml --out %s/cfg.yaml"):format(d, d), 1,
    ("hydra model init: --out '%s/cfg.yaml' is the input CONFIG.yaml"):format(d), d .. "/cfg.yaml")
  refuses(("prune %s --members 2 --out %s"):format(ck, ck), 1,
    ("hydra prune: --out '%s' is the input CKPT.h5"):format(ck), ck)
  refuses(("finetune %s --gates %s/g.h5 --member 1 --out %s"):format(ck, d, ck), 1,
    ("hydra finetune: --out '%s' is the input CKPT.h5"):format(ck), ck)
  refuses(("eval --id %s --out %s/r.h5 --md %s/r.h5"):format(p, d, d), 1,
    ("hydra eval: --out and --md are the same file '%s/r.h5'"):format(d), p)
end

function T.unwritable_output_fails_before_training()
  local d = check.tmpdir()
  fixture_model(d)
  local t0 = core.now()
  local code, out, e = check.hydra(("train %s/cfg.yaml train.epochs=1000 --quiet --out "
    .. "%s/nonexist/ck.h5"):format(d, d))
  check.eq(code, 1, "exit status: " .. out .. e)
  check.eq(e, ("hydra: hydra train: cannot write --out '%s/nonexist/ck.h5': folder "
    .. "'%s/nonexist' does not exist\n"):format(d, d), "message")
  check.ok(core.now() - t0 < 5, "failed before training")
  code, out, e = check.hydra(("train %s/cfg.yaml --quiet --out %s"):format(d, d))
  check.eq(e, ("hydra: hydra train: cannot write --out '%s': it is a folder\n"):format(d),
    "a folder as --out")
  -- a read-only folder (root ignores permissions, so a read-only bind mount when allowed)
  local ro = d .. "/ro"
  os.execute(("mkdir %s && mount --bind %s %s 2>/dev/null && mount -o remount,bind,ro %s "
    .. "2>/dev/null"):format(ro, ro, ro, ro))
  local f = io.open(ro .. "/probe", "wb")
  if f then
    f:close()
    os.remove(ro .. "/probe")
    io.stderr:write("  (read-only bind mount not permitted: that case skipped)\n")
  else
    code, out, e = check.hydra(("eval --id %s/p.h5 --out %s/r.h5 --md %s/t.md"):format(d, d, ro))
    check.eq(code, 1, "exit status: " .. out .. e)
    check.ok(e:find(("cannot write --md '%s/t.md': folder '%s' is not writable (Read-only file "
      .. "system)"):format(ro, ro), 1, true) or e:find("no such file", 1, true), e)
    check.eq(core.stat(d .. "/r.h5"), nil, "no --out result left behind")
  end
  os.execute(("umount %s 2>/dev/null"):format(ro))
end

-- ===== sweeps too large to enumerate are refused before enumerating =====

function T.huge_grids_are_refused_with_the_count()
  local d = check.tmpdir()
  check.write_file(d .. "/base.yaml", "methods: [single]\n")
  local vals = {}
  for i = 1, 100 do vals[i] = tostring(i) end
  local list = "[" .. table.concat(vals, ", ") .. "]"
  local keys = { "train.epochs", "deep_ensemble.members", "train.batch_size", "model.depth",
                 "train.eval_batch_size", "prune.calib_size" }
  local lines = { "base: base.yaml", "grid:" }
  for _, k in ipairs(keys) do lines[#lines + 1] = "  " .. k .. ": " .. list end
  check.write_file(d .. "/huge.yaml", table.concat(lines, "\n") .. "\n")
  local t0 = core.now()
  local code, out, e = check.hydra(("sweep %s/huge.yaml --list"):format(d))
  check.eq(code, 1, "exit status: " .. out .. e)
  check.eq(e, ("hydra: %s/huge.yaml:3:3: grid has 1000000000000 points (limit %d: split the "
    .. "sweep into several files)\n"):format(d, hydra.sweep.MAX_POINTS), "message")
  check.ok(core.now() - t0 < 20, "refused at once")
  -- seeds count: 100 x 200 seeds
  check.write_file(d .. "/s.yaml", "base: base.yaml\nseeds: 200\ngrid:\n  train.epochs: " .. list
    .. "\n")
  code, out, e = check.hydra(("sweep %s/s.yaml --list"):format(d))
  check.eq(e, ("hydra: %s/s.yaml:4:3: grid has 20000 points (limit 10000: split the sweep into "
    .. "several files)\n"):format(d), "seeds x grid")
  check.write_file(d .. "/s.yaml", "base: base.yaml\ngrid:\n  train.epochs: " .. list .. "\n")
  code, out, e = check.hydra(("sweep %s/s.yaml --list --seeds 101"):format(d))
  check.eq(e, ("hydra: sweep: '%s/s.yaml' with --seeds 101 has 10100 points (limit 10000: split "
    .. "the sweep into several files)\n"):format(d), "--seeds x grid")
  code, out, e = check.hydra(("sweep %s/s.yaml --list --seeds 10"):format(d))
  check.eq(code, 0, "10^3 points are allowed: " .. e)
  check.ok(out:find("sweep s: 1000 points", 1, true), out:sub(1, 200))
end

-- ===== a damaged result.h5 is not a complete run =====

function T.damaged_result_is_not_complete()
  local d = check.tmpdir()
  check.write_file(d .. "/exp.yaml", ("experiment: t\nresults_dir: %s/res\nmethods: [single]\n")
    :format(d))
  check.write_file(d .. "/s.yaml", "base: exp.yaml\ngrid:\n  seed: [0, 1]\n")
  local sw = hydra.sweep.load(d .. "/s.yaml")
  local pt = sw.points[1]
  os.execute("mkdir -p " .. pt.dir)
  -- a truncated HDF5 file: the first 5000 bytes of a real one
  local f <close> = hydra.h5.create(d .. "/whole.h5")
  f:set_attr("/", "format", "hydra-run-1")
  local zeros = {}
  for i = 1, 2000 do zeros[i] = 0 end
  f:write("/x", core.from_table("float32", zeros))
  f:commit()
  check.write_file(pt.dir .. "/result.h5", check.read_file(d .. "/whole.h5"):sub(1, 5000))
  local st, _, why = hydra.run.status(pt.cfg)
  check.eq(st, "damaged", "status of a truncated result.h5")
  check.ok(why:find("cannot open", 1, true), why)
  local code, out, e = check.hydra(("sweep %s/s.yaml --list"):format(d))
  check.eq(code, 0, "--list: " .. out .. e)
  check.ok(out:find("0 complete, 0 partial, 1 absent, 1 damaged", 1, true), out)
  check.ok(out:find(("   0  %s  damaged "):format(pt.id), 1, true), out)
  code, out, e = check.hydra(("sweep %s/s.yaml --jobs 1"):format(d))
  check.eq(code, 1, "sweep: " .. out .. e)
  check.ok(e:find(("hydra: sweep: point 0 (seed=0): '%s/result.h5' exists but is not a complete "
    .. "result (h5: cannot open"):format(pt.dir), 1, true) and e:find("delete it and rerun", 1,
    true), e)
  check.eq(core.stat(sw.points[2].dir), nil, "no point started")
  code, out, e = check.hydra(("exp %s/exp.yaml seed=0 --quiet"):format(d))
  check.eq(code, 1, "exp: " .. out .. e)
  check.ok(e:find(("hydra: run %s: '%s/result.h5' exists but is not a complete result (h5: "
    .. "cannot open"):format(pt.id, pt.dir), 1, true) and e:find("delete it or rerun with --force",
    1, true), e)
  -- a readable file without the completion mark
  local g <close> = hydra.h5.create(pt.dir .. "/result.h5")
  g:set_attr("/", "format", "hydra-result-1")
  g:commit()
  st, _, why = hydra.run.status(pt.cfg)
  check.eq(st, "damaged", "status of a result.h5 without the mark")
  check.eq(why, "its format attribute is 'hydra-result-1', not 'hydra-run-1'", "why")
end

-- ===== locks: only a live holder holds a lock, whatever the file records =====

-- A lock file's record (pid, host, start time, boot id) only names the owner in messages: a pid
-- reused by another process, a record from before a reboot or an old record without start time
-- hold nothing, and the lock is taken (it is the kernel's flock, gone with its holder).
function T.lock_records_without_a_holder_are_taken()
  local stages = hydra.stages
  local start1 = stages.proc_start(1)
  if not start1 or not stages.boot_id() then
    io.stderr:write("  (no /proc: lock record test skipped)\n")
    return
  end
  local me = stages.owner_text()
  check.ok(me:match(("^%d %s %%d+ [%%x%%-]+\n$"):format(core.getpid(), core.hostname())),
    "lock text: " .. me)
  local d = check.tmpdir()
  local host, boot = core.hostname(), stages.boot_id()
  local cases = {
    { ("1 %s %d %s\n"):format(host, tonumber(start1) + 1, boot), "another start time" },
    { ("1 %s %s 00000000-0000-0000-0000-000000000000\n"):format(host, start1), "another boot" },
    { ("1 %s %s %s\n"):format(host, start1, boot), "a live pid that holds no lock" },
    { ("1 %s\n"):format(host), "an old record without start time" },
  }
  for i, c in ipairs(cases) do
    local lock = ("%s/l%d.lock"):format(d, i)
    check.write_file(lock, c[1])
    local polls = 0
    local got = stages.acquire(lock, { poll = 0.01, done = function()
      polls = polls + 1
      return polls > 3
    end })
    check.eq(got, true, c[2] .. ": lock taken")
    if got then stages.release(lock) end
  end
end

function T.stage_cache_removes_temporaries_of_killed_builds()
  local d = check.tmpdir()
  local lines = {}
  local c = hydra.stages.new({ dir = d, log = function(l) lines[#lines + 1] = l end })
  local key = hydra.stages.key("t", { v = 1 })
  core.mkdir_p(d .. "/t")
  local dead = ("%s/t/%s.tmp-999999.h5"):format(d, key)
  local dead_commit = ("%s/t/.%s.tmp-999999.h5.tmp-999999-0"):format(d, key)
  local other = ("%s/t/.0123456789abcdef.tmp-999999.h5.tmp-999999-0"):format(d)
  for _, p in ipairs({ dead, dead_commit, other }) do check.write_file(p, "partial") end
  c:get("t", { v = 1 }, function(tmp) check.write_file(tmp, "x") end)
  check.eq(core.stat(dead), nil, "the build temporary of a killed builder is removed")
  check.eq(core.stat(dead_commit), nil, "the commit temporary of a killed builder is removed")
  check.eq(core.stat(other), "file", "another key's temporary is left to its builder")
  check.ok(table.concat(lines, "\n"):find("removed the temporary file", 1, true), "logged")
end

-- ===== messages that say what to do =====

function T.cli_misuse_messages()
  local d = check.tmpdir()
  local function says(cmdline, code, want)
    local got, out, e = check.hydra(cmdline)
    check.eq(got, code, "exit status of hydra " .. cmdline .. ": " .. out .. e)
    check.eq(e, "hydra: " .. want .. "\n", "message of hydra " .. cmdline)
  end
  local cfg = (rawget(_G, "HYDRA_HOME") or ".") .. "/configs/models/vit-fm-tiny.yaml"
  says(("model init %s --seed -1 --out %s/m.h5"):format(cfg, d), 2,
    "hydra model: --seed must be >= 0 (got -1)")
  says(("predict a.h5 --data b.h5 --split test --out %s/p.h5 --out %s/q.h5"):format(d, d), 2,
    "hydra predict: --out given twice")
  says(("train %s train.epochs --out %s/m.h5"):format(cfg, d), 2,
    "hydra train: unexpected argument 'train.epochs'; a config override needs '=': "
    .. "train.epochs=VALUE (usage: hydra train CONFIG.yaml [key=value ...] --out CKPT.h5 "
    .. "[--seed S] [--quiet])")
  check.write_file(d .. "/s.yaml", "base: nope.yaml\ngrid: {seed: [0]}\n")
  says(("sweep %s/s.yaml --list"):format(d), 1,
    ("%s/s.yaml:1:7: base: cannot read '%s/nope.yaml' (No such file or directory)"):format(d, d))
  check.write_file(d .. "/b.yaml", "methods: [single]\n")
  check.write_file(d .. "/s.yaml", "base: b.yaml\nprofiles:\n  quick: [b.yaml, gone.yaml]\n"
    .. "grid: {seed: [0]}\n")
  says(("sweep %s/s.yaml --list"):format(d), 1,
    ("%s/s.yaml:3:19: profiles.quick[2]: cannot read '%s/gone.yaml' (No such file or "
    .. "directory)"):format(d, d))
  says(("data prepare fashion-mnist-c subset=-3"), 1,
    "data: fashion-mnist-c: option subset must be >= 0 (got -3)")
end

-- ===== a full disk: clean errors, nothing truncated under a real name =====

-- Mounts a tmpfs of `kib` KiB at a fresh folder, filled up to `free` KiB left; nil when mounting
-- is not permitted. Unmounted when the test ends (call the returned function).
local function small_disk(kib, free)
  local d = check.tmpdir() .. "/disk"
  os.execute("mkdir -p " .. d)
  local ok = os.execute(("mount -t tmpfs -o size=%dk tmpfs %s 2>/dev/null"):format(kib, d))
  if not ok then return nil end
  os.execute(("dd if=/dev/zero of=%s/fill bs=1k count=%d 2>/dev/null"):format(d, kib - free))
  return d, function() os.execute("umount " .. d) end
end

local function listing(d)
  local names = core.listdir(d)
  return table.concat(names, " ")
end

-- reviews/reliability_2.md E26: a killed writer's ".<name>.tmp-<pid>-<n>" goes at the next write
-- of <name> (HDF5 and text alike); a live process's stays, other names' stay
function T.stale_temporaries_of_dead_writers_are_removed()
  local d = check.tmpdir()
  local dead, live = 4194305, core.getpid()   -- above the largest pid_max (2^22)
  local names = { (".x.h5.tmp-%d-0"):format(dead), (".x.h5.tmp-%d-7"):format(dead),
                  (".x.h5.tmp-%d-0"):format(live), (".y.h5.tmp-%d-0"):format(dead),
                  (".t.md.tmp-%d-3"):format(dead) }
  for _, n in ipairs(names) do check.write_file(d .. "/" .. n, "") end
  local f = hydra.h5.create(d .. "/x.h5")
  f:set_attr("/", "a", 1)
  f:commit()
  hydra.output.write_text(d .. "/t.md", "text\n")
  check.same(core.listdir(d), { names[3], names[4], "t.md", "x.h5" }, "left in the folder")
end

function T.full_disk_outputs_are_atomic()
  local disk, done = small_disk(200, 0)
  if not disk then
    io.stderr:write("  (mount -t tmpfs not permitted: full-disk test skipped)\n")
    return
  end
  local ok, e = pcall(function()
    local big = ("x"):rep(64 * 1024)
    check.raises(("report: cannot write '%s/t.md': No space left on device"):format(disk),
      function() return hydra.report.write_text(disk .. "/t.md", big) end)
    check.raises(("config: cannot write '%s/c.yaml': No space left on device"):format(disk),
      function() return hydra.config.write(hydra.config.defaults(), disk .. "/c.yaml") end)
    check.eq(listing(disk), "fill", "nothing left on the full disk")
    -- an old file under the real name stays whole when its replacement does not fit
    os.remove(disk .. "/fill")
    hydra.report.write_text(disk .. "/t.md", "old\n")
    os.execute(("dd if=/dev/zero of=%s/fill bs=1k count=196 2>/dev/null"):format(disk))
    check.raises_has("No space left on device",
      function() return hydra.report.write_text(disk .. "/t.md", big) end)
    check.eq(check.read_file(disk .. "/t.md"), "old\n", "the old file is intact")
    os.remove(disk .. "/t.md")
    os.remove(disk .. "/fill")
    os.execute(("dd if=/dev/zero of=%s/fill bs=1k count=200 2>/dev/null"):format(disk))
    -- the CLI: eval's --json / --csv, and a plot whose image does not fit
    local d = check.tmpdir()
    local id = write_preds(d .. "/id.h5", ID_PROBS, { 0, 1, 1, 2 }, { method = "single" })
    local ood = write_preds(d .. "/ood.h5", OOD_PROBS)
    local code, out, err_ = check.hydra(("eval --id %s --ood far=%s --out %s/r.h5 --json %s/r.json")
      :format(id, ood, d, disk))
    check.eq(code, 1, "eval exit status: " .. out .. err_)
    check.eq(err_, ("hydra: report: cannot write '%s/r.json': No space left on device\n")
      :format(disk), "eval message")
    check.eq(listing(disk), "fill", "no 0-byte --json left")
    check.eq(core.stat(d .. "/r.h5"), nil, "no --out left when --json fails")
    code, out, err_ = check.hydra(("eval --id %s --ood far=%s --out %s/r.h5"):format(id, ood, d))
    check.eq(code, 0, "eval: " .. out .. err_)
    os.remove(disk .. "/fill")
    os.execute(("dd if=/dev/zero of=%s/fill bs=1k count=184 2>/dev/null"):format(disk))
    code, out, err_ = check.hydra(("plot reliability %s/r.h5 --out %s/x.png"):format(d, disk))
    check.eq(code, 1, "plot exit status: " .. out .. err_)
    check.ok(err_:find(("hydra: plot: cannot write '%s/x.png': No space left on device")
      :format(disk), 1, true), "plot message: " .. err_)
    check.ok(not err_:find("traceback", 1, true), "plot: no traceback")
    check.eq(core.stat(disk .. "/x.png"), nil, "no truncated PNG under the real name")
    check.ok(not listing(disk):find("tmp", 1, true), "no temporary file left: " .. listing(disk))
  end)
  done()
  if not ok then error(e, 0) end
end

-- ===== no Lua traceback for bad input =====

function T.bad_inputs_give_one_line_errors()
  local d = check.tmpdir()
  local ck = fixture_model(d)
  local trunc = d .. "/trunc.h5"
  check.write_file(trunc, check.read_file(ck):sub(1, 5000))
  local function one_line(cmdline, code, part)
    local got, out, e = check.hydra(cmdline)
    check.eq(got, code, "exit status of hydra " .. cmdline .. ": " .. out .. e)
    check.ok(e:find(part, 1, true), ("hydra %s\n  said: %s  want: %s"):format(cmdline, e, part))
    check.ok(not e:find("traceback", 1, true), "traceback from hydra " .. cmdline .. ": " .. e)
    check.eq(select(2, e:gsub("\n", "")), 1, "one line from hydra " .. cmdline .. ": " .. e)
  end
  one_line(("predict %s --data %s/data.h5 --split test --out %s/p.h5"):format(trunc, d, d), 1,
    ("hydra predict: h5: cannot open '%s'"):format(trunc))
  check.write_file(d .. "/afile", "x")
  check.write_file(d .. "/exp.yaml", ("include: %s/cfg.yaml\nmethods: [single]\n"
    .. "data: {ood: [], shift: []}\n"):format(d))
  one_line(("exp %s/exp.yaml results_dir=%s/afile --quiet"):format(d, d), 1,
    ("run: cannot create folder '%s/afile/default'"):format(d))
  one_line(("exp %s/exp.yaml results_dir=%s/res --cache %s/afile --quiet"):format(d, d, d), 1,
    ("stages: cannot create folder '%s/afile': it is a file"):format(d))
  one_line(("eval --id %s --out %s/r.h5 --bootstrap 1000000000"):format(ck, d), 2,
    "hydra eval: --bootstrap must be at most 100000 (got 1000000000)")
  one_line(("plot ood-hist %s --out %s/x.png --bins 1000000000"):format(ck, d), 2,
    "hydra plot: --bins must be in [1, 10000] (got 1000000000)")
end

return T
