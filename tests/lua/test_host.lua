-- tests/lua/test_host.lua: the hydra executable's exit statuses and top-level commands.
local check = require("check")
local T = {}

function T.version_and_help()
  local code, out = check.hydra("--version")
  check.eq(code, 0, "--version status")
  check.ok(out:match("^hydra %d+%.%d+%.%d+\n$"), "--version output: " .. out)
  code, out = check.hydra("--help")
  check.eq(code, 0, "--help status")
  check.ok(out:find("commands:", 1, true) and out:find("  run ", 1, true), "--help lists run")
  code, out = check.hydra("help run")
  check.eq(code, 0, "help run status")
  check.ok(out:find("usage: hydra run SCRIPT.lua", 1, true), "help run text")
end

function T.usage_errors_exit_2()
  local _
  local code, _, err = check.hydra("frobnicate")
  check.eq(code, 2, "unknown command status")
  check.eq(err, "hydra: unknown command 'frobnicate'; see 'hydra --help'\n", "message")
  code, _, err = check.hydra("rnu")
  check.eq(code, 2, "misspelled command status")
  check.eq(err, "hydra: unknown command 'rnu' (did you mean 'run'?); see 'hydra --help'\n", "message")
  code = check.hydra("")
  check.eq(code, 2, "no command")
  code, _, err = check.hydra("run")
  check.eq(code, 2, "run without script")
end

function T.run_script_status_and_overrides()
  local d = check.tmpdir()
  check.write_file(d .. "/ok.lua", [[
local overrides = ...
local hydra = require("hydra")
assert(hydra.overrides == overrides)
io.write(overrides["optim.learning_rate"], " ", overrides.seed, "\n")
return 0
]])
  local code, out = check.hydra(("run %s/ok.lua optim.learning_rate=0.01 seed=3"):format(d))
  check.eq(code, 0, "ok script status")
  check.eq(out, "0.01 3\n", "overrides reach the script")

  check.write_file(d .. "/bad.lua", "local x = nil\nreturn x.field\n")
  local err, _
  code, _, err = check.hydra(("run %s/bad.lua"):format(d))
  check.eq(code, 1, "erroring script status")
  check.ok(err:find("attempt to index a nil value", 1, true), "error text: " .. err)
  check.ok(err:find("stack traceback:", 1, true), "traceback printed: " .. err)

  check.write_file(d .. "/fail.lua", "require('hydra').fail('data: file %s missing', 'x.gz')\n")
  code, _, err = check.hydra(("run %s/fail.lua"):format(d))
  check.eq(code, 1, "user error status")
  check.eq(err, "hydra: data: file x.gz missing\n", "user error has no traceback")

  code, _, err = check.hydra(("run %s/missing.lua"):format(d))
  check.eq(code, 1, "missing script status")
  check.eq(err, ("hydra: hydra run: cannot open '%s/missing.lua'\n"):format(d), "missing script")

  check.write_file(d .. "/three.lua", "return 3\n")
  code = check.hydra(("run %s/three.lua"):format(d))
  check.eq(code, 3, "script return value is the exit status")
end

function T.runs_from_another_directory()
  local exe = os.getenv("HYDRA") or "./hydra"
  if exe:sub(1, 1) ~= "/" then
    local p = io.popen("pwd"); exe = p:read("l") .. "/" .. exe; p:close()
  end
  local d = check.tmpdir()
  local h = io.popen(("cd %s && %s --help 2>&1; echo \"rc=$?\""):format(d, exe))
  local out = h:read("a")
  h:close()
  check.ok(out:find("rc=0", 1, true) and out:find("commands:", 1, true),
    "hydra --help from another folder: " .. out)
end

function T.openmp_wait_policy_passive_unless_chosen()
  local d = check.tmpdir()
  check.write_file(d .. "/env.lua", "io.write(os.getenv('OMP_WAIT_POLICY'), ' ', arg[1])\n")
  local exe = os.getenv("HYDRA") or "./hydra"
  local h = io.popen(("env -u OMP_WAIT_POLICY %s run %s/env.lua a"):format(exe, d))
  local out = h:read("a")
  h:close()
  check.eq(out, "passive a", "unset -> passive, arguments kept across the re-exec")
  h = io.popen(("OMP_WAIT_POLICY=active %s run %s/env.lua b"):format(exe, d))
  out = h:read("a")
  h:close()
  check.eq(out, "active b", "the user's choice is kept")
end

-- OpenBLAS runs at one thread in every hydra process from its start, so a stage built in a
-- script's own process (prop1, b2_circuit_knockout, the text pretraining) rounds as in a run;
-- a script runs at its --threads budget. OPENBLAS_NUM_THREADS=2 makes the test fail where
-- OpenBLAS would otherwise default to one thread (a one-core machine).
function T.blas_single_threaded_in_every_process()
  local d = check.tmpdir()
  check.write_file(d .. "/blas.lua", [[
local core = require("hydra").core
io.write(core.blas_threads(), " ", core.threads())
local o = require("hydra.experiment").script_options(...)
io.write(" ", core.blas_threads(), " ", core.threads(), " ", tostring(o.threads))
for _, v in ipairs(o.overrides) do io.write(" ", v) end
]])
  local exe = os.getenv("HYDRA") or "./hydra"
  local h = io.popen(("OPENBLAS_NUM_THREADS=2 %s run %s/blas.lua threads=2 seed=4"):format(exe, d))
  local out = h:read("a")
  h:close()
  check.eq(out, "1 1 1 2 2 seed=4 threads=2",
           "OpenBLAS at 1 thread before and after script_options; threads=2 is the budget")
  h = io.popen(("HYDRA_THREADS=3 OPENBLAS_NUM_THREADS=2 %s run %s/blas.lua"):format(exe, d))
  out = h:read("a")
  h:close()
  check.eq(out, "1 1 1 3 nil", "without threads=, the script runs at HYDRA_THREADS")
  local code, _, err = check.hydra(("run %s/blas.lua threads=x"):format(d))
  check.eq(code, 2, "threads=x status")
  check.eq(err, "hydra: threads=x: expected an integer >= 1\n", "threads=x message")
end

function T.tensor_basics()
  local core = require("hydra.core")
  local t = core.tensor("float32", 2, 3)
  check.eq(t:ndim(), 2, "ndim")
  check.eq(t:size(2), 3, "size")
  t:set(2, 3, 1.5)
  check.eq(t:get(2, 3), 1.5, "get after set")
  check.raises("bad argument #1 to 'size' (index 3 out of range [1, 2])", function() return t:size(3) end)
  local r = t:row(2)
  check.eq(r:get(3), 1.5, "row view reads the owner's data")
  t = nil
  collectgarbage()
  check.eq(r:get(3), 1.5, "view keeps its owner alive")
  local u = core.from_table("int16", { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  check.same(u:shape(), { 3, 2 })
  check.same(u:totable(), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  check.raises("bad argument #3 to 'set' (value 40000 out of range for int16)",
    function() u:set(1, 1, 40000) end)
  check.eq(tostring(u), "hydra.Tensor(int16 [3,2])", "tostring")
end

return T
