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

return T
