-- lua/hydra/run.lua: run ONE resolved config end to end into results/<experiment>/<run-id>/.
--
-- CONTRACT (hydra sweep / report / repro and the experiments build on it; change only with them)
--
--   local run = require("hydra").run
--   run.id(cfg)       -> run-id: the first 12 hex digits of hydra.config.hash of cfg with the keys
--                        that cannot change a result removed (results_dir, threads, sweep.*);
--                        when cfg.methods names a method of run.METHOD_REVISION, hashed once
--                        more with those methods' revisions.
--   run.dir(cfg [, id]) -> "<results_dir>/<experiment>/<run-id>" (id: run.id(cfg) when known)
--   run.status(cfg [, dir]) -> "complete" | "damaged" | "partial" | "absent", dir [, why]
--                        complete  = dir/result.h5 opens and holds the completion mark (its
--                                    format attribute is "hydra-run-1"; it is renamed into
--                                    place last);
--                        damaged   = dir/result.h5 exists but does not open or has no mark (a
--                                    truncated or foreign file; why says what): never taken as
--                                    complete, never overwritten without opts.force;
--                        partial   = the folder exists without result.h5 (an interrupted run);
--   run.execute(cfg, opts) -> summary      runs every method of cfg.methods (DESIGN §3), in order:
--       0. imports model.from and data.sources (stages import, data; hydra.sources) and checks
--          every data set against the imported model;
--       1. checks the datasets (data.id, data.ood, data.shift, and data.ood_val when a circuit
--          method runs) are prepared in data.dir; a missing one is a clean error naming the fix;
--       2. builds each method from cached stages (hydra.stages: base model, gates, members,
--          fused model, predictions), shared across runs, methods and worker processes;
--       3. predicts the ID test split, every OOD set and every shift set (Fashion-MNIST-C style
--          files with corruption/severity splits become one shift set per severity,
--          "<name>-s<k>", concatenating every corruption at that severity), with data.test_subset
--          applied to every set (per split; shift splits use data.shift_subset when > 0);
--       4. evaluates with hydra.eval (score eval.score, or the method's own: describe().score;
--          eval.bootstrap) into
--          dir/methods/<method>.h5 (a normal `hydra eval` result: `hydra plot` / `hydra report`
--          accept it);
--       5. writes dir/table.md, dir/table.csv (methods x metrics; hydra.report), dir/plots/
--          reliability.png, ood-hist.png, risk-coverage.png (+ .dat/.gp; methods overlaid);
--       5b. with export.stages / export.format, links the stage products and their safetensors
--          exports into dir (hydra.products);
--       6. writes dir/result.h5 LAST, atomically (temp + rename): the run is complete.
--     dir/config.resolved.yaml is written first; dir/log.txt receives every line printed
--     (appended across attempts, each attempt headed by a "== run <id> ..." line).
--     A complete run is a no-op (summary.skipped = true) unless opts.force; a damaged one is an
--     error saying to delete result.h5 or use --force.
--     Two processes executing the same run: the second waits on the first (a lock file in dir).
--     opts (all optional):
--       log       function(line): extra sink for every log line (after stdout/log.txt)
--       quiet     true: print nothing on stdout (log.txt still gets everything)
--       progress  false: no progress bars on stderr (default: only when stderr is a terminal)
--       cache_dir the stage cache (default: hydra.stages.default_dir())
--       force     true: recompute the run (cached stages are still reused)
--       dir       the run folder (default run.dir(cfg)): `hydra hydraize --out DIR`
--     summary = { id, dir, result = dir.."/result.h5", skipped = bool, seconds,
--                 methods = { name... }, table_md, table_csv,
--                 plots = { reliability =, ood_hist =, risk_coverage = },
--                 stages = { hits = n, built = n } }
--   run.load(path)    -> reads a result.h5 (or a run dir):
--       { id, experiment, config_yaml, provenance = { git_hash, hydra_version, seed, ... },
--         methods = { name... },
--         results = { r1, r2, ... } }  -- one per method, in table order, each shaped like
--                                      -- hydra.report.load's table (method, metrics, ood,
--                                      -- ood_avg, shift, ci, score, conventions, members) plus
--                                      -- r.cost = { params, flops, flops_padded (text),
--                                      --            members, batch_size, infer_ms_per_batch }
--       so hydra.report.table(run.load(p).results) gives the run's table.
--   run.method_files(dir) -> { "dir/methods/single.h5", ... } in table order (complete runs).
--
-- result.h5 layout (format "hydra-run-1"; `hydra info result.h5` shows it):
--   / attributes: format, run_id, experiment, methods (comma list, table order), score,
--                 hydra_version, git_hash, seed, config_hash, config (the resolved YAML text),
--                 conventions, wall_seconds, created (UTC ISO time)
--   /provenance attributes: git_hash, hydra_version, seed, threads, host, data_<set> (the
--                 prepared file's recipe_sha256, else its sha256) for every dataset used,
--                 stages (one line per stage: "<method> <stage> <key> hit|built")
--   /methods/<method>/...  the method's `hydra eval` result (attributes of its / on the group;
--                 id/, ood/<set>/, shift/<set>/ per-sample arrays; metrics/ attributes)
--   /methods/<method>/cost attributes: params, flops (forward FLOPs per sample: the mean over
--                 the ID test set of each sample's exact cost at its own length, text T = 1 +
--                 its tokens; images at their fixed T), flops_padded (text only: the same mean
--                 at the length the engine executes, each batch of train.eval_batch_size padded
--                 to its longest sentence; predictor:cost_on, methods/common.lua), members,
--                 batch_size, infer_ms_per_batch (median of 5 timed passes over one batch of
--                 ID test samples, after a warm-up), label,
--                 seeds (comma list of the training seeds used)
local core = require("hydra.core")
local config = require("hydra.config")
local err = require("hydra.err")
local fs = require("hydra.fs")
local h5 = require("hydra.h5")
local output = require("hydra.output")
local stages = require("hydra.stages")

local M = {}

M.FORMAT = "hydra-run-1"

-- Keys that cannot change a result: not part of the run-id.
M.ID_EXCLUDE = { "results_dir", "threads", "sweep" }

-- eval.score names: the hydra.metrics score names (the same words in configs, `hydra eval
-- --score`, result.h5 and the tables)
local SCORE = { msp = "msp", maxlogit = "maxlogit", entropy = "entropy", mi = "mi",
                energy = "energy", disagreement = "disagreement", learned = "learned" }

local function shallow_without(cfg, keys)
  local c = {}
  for k, v in pairs(cfg) do c[k] = v end
  for _, k in ipairs(keys) do c[k] = nil end
  return c
end

-- Methods whose definition has a revision number for the same config: a run that has one of
-- them gets another run-id per revision, so a run folder of an older revision is recomputed
-- (from the cached stages that still apply), never reused. A run without them keeps its
-- run-id. deep_ensemble 2: member i of seed s is base seed M*s + i - 1 (disjoint members across
-- seeds; revision 1 shared them: seed + i - 1).
M.METHOD_REVISION = { deep_ensemble = 2, deep_ensemble_scratch = 2 }

function M.id(cfg)
  local h = config.hash(shallow_without(cfg, M.ID_EXCLUDE))
  local rev = {}
  for _, m in ipairs(type(cfg.methods) == "table" and cfg.methods or {}) do
    if M.METHOD_REVISION[m] then rev[#rev + 1] = m .. "=" .. M.METHOD_REVISION[m] end
  end
  if #rev > 0 then
    table.sort(rev)
    h = core.hash64(h .. "\nmethod_revision " .. table.concat(rev, ","))
  end
  return h:sub(1, 12)
end

-- id: run.id(cfg) when the caller has it (hashing the config is the cost of a sweep's --list)
function M.dir(cfg, id)
  return ("%s/%s/%s"):format(cfg.results_dir, cfg.experiment, id or M.id(cfg))
end

local function is_file(p) return core.stat(p) == "file" end

-- true when the file at path opens and holds the completion mark, else false, why
function M.complete(path)
  local ok, res = pcall(function()
    local f <close> = h5.open(path)
    return f:attrs("/").format
  end)
  if not ok then return false, err.message(res):gsub("^[^:]*%.lua:%d+: ", "") end
  if res ~= M.FORMAT then
    return false, ("its format attribute is %s, not '%s'"):format(
      res == nil and "missing" or ("'" .. tostring(res) .. "'"), M.FORMAT)
  end
  return true
end

function M.status(cfg, dir)
  dir = dir or M.dir(cfg)
  if is_file(dir .. "/result.h5") then
    local ok, why = M.complete(dir .. "/result.h5")
    if ok then return "complete", dir end
    return "damaged", dir, why
  end
  if core.stat(dir) == "dir" then return "partial", dir end
  return "absent", dir
end

-- ===== helpers =====

local function git_hash()
  local home = rawget(_G, "HYDRA_HOME") or "."
  local p = io.popen(("git -C %s rev-parse HEAD 2>/dev/null"):format(fs.shell_quote(home)))
  if not p then return "unknown" end
  local out = p:read("a") or ""
  p:close()
  out = out:match("^(%x+)%s*$")
  return out or "unknown"
end
M.git_hash = git_hash

-- 1 when the work tree of HYDRA_HOME has uncommitted changes to tracked files, 0 when clean,
-- -1 when unknown (not a git checkout).
local function git_dirty()
  local home = rawget(_G, "HYDRA_HOME") or "."
  local p = io.popen(("git -C %s status --porcelain --untracked-files=no 2>/dev/null; "
    .. "echo \"rc=$?\""):format(fs.shell_quote(home)))
  if not p then return -1 end
  local out = p:read("a") or ""
  p:close()
  local rc = out:match("rc=(%d+)%s*$")
  if rc ~= "0" then return -1 end
  return out:gsub("rc=%d+%s*$", ""):match("%S") and 1 or 0
end
M.git_dirty = git_dirty

-- The command line of this process (the global `arg` of the hydra executable).
local function command_line()
  local a = rawget(_G, "arg")
  if type(a) ~= "table" then return "" end
  local t = {}
  for i = 0, #a do
    if a[i] then t[#t + 1] = tostring(a[i]) end
  end
  return table.concat(t, " ")
end

-- Overrides as text: a list of "k=v" strings or {key, value} entries.
local function overrides_text(ov)
  if type(ov) == "string" then return ov end
  local t = {}
  for _, o in ipairs(ov or {}) do
    if type(o) == "table" then t[#t + 1] = ("%s=%s"):format(o.key, tostring(o.value))
    else t[#t + 1] = tostring(o) end
  end
  return table.concat(t, " ")
end

-- The CPU model of this machine (the first "model name" of /proc/cpuinfo), for provenance.
local function cpu_model()
  local f = io.open("/proc/cpuinfo", "rb")
  if not f then return "unknown" end
  local s = f:read(65536) or ""
  f:close()
  return s:match("model name%s*:%s*([^\n]*)") or "unknown"
end

local function method_module(name)
  if type(name) ~= "string" or not name:match("^[%w_]+$") then
    err.fail("run: bad method name '%s'", tostring(name))
  end
  local ok, mod = pcall(require, "hydra.methods." .. name)
  if not ok then
    if tostring(mod):find("module 'hydra.methods." .. name .. "' not found", 1, true) then
      local known = {}
      local dir = (rawget(_G, "HYDRA_HOME") or ".") .. "/lua/hydra/methods"
      for _, f in ipairs(core.listdir(dir)) do
        local n = f:match("^(.+)%.lua$")
        if n and n ~= "common" then known[#known + 1] = n end
      end
      err.fail("run: unknown method '%s' in methods (known: %s)", name, table.concat(known, ", "))
    end
    error(mod, 0)
  end
  return mod
end
M.method = method_module

-- Copies every dataset and attribute of the open file src under group `prefix` of dst (the
-- attributes of src's root go on the prefix group).
local function copy_tree(src, dst, prefix)
  for k, v in pairs(src:attrs("/")) do dst:set_attr(prefix, k, v) end
  h5.walk(src, function(e)
    local to = prefix .. e.path
    if e.kind == "dataset" then
      if e.dtype == "string" then
        if #e.shape == 0 then dst:write_string(to, src:read_string(e.path))
        else dst:write_strings(to, src:read_strings(e.path)) end
      else
        dst:write(to, src:read(e.path))
      end
    end
    for k, v in pairs(src:attrs(e.path)) do dst:set_attr(to, k, v) end
  end)
end

-- ===== execute =====

local function opener(dir, opts)
  local logf = io.open(dir .. "/log.txt", "ab")
  if not logf then err.fail("run: cannot write '%s/log.txt'", dir) end
  local function log(fmt, ...)
    local line = select("#", ...) > 0 and fmt:format(...) or fmt
    if not opts.quiet then io.stdout:write(line, "\n"); io.stdout:flush() end
    local ok, why = logf:write(line, "\n")
    if ok then ok, why = logf:flush() end
    if not ok then err.fail("run: cannot write '%s/log.txt': %s", dir, why) end
    if opts.log then opts.log(line) end
  end
  return log, logf
end

-- "damaged" result: the error with the way out
local function refuse_damaged(summary, why)
  err.fail("run %s: '%s' exists but is not a complete result (%s); delete it or rerun with "
    .. "--force", summary.id, summary.result, why)
end

-- true when the run is complete and must be skipped (raises on a damaged result.h5)
local function skip_complete(cfg, opts, summary)
  if opts.force then return false end
  local st, _, why = M.status(cfg, summary.dir)
  if st == "damaged" then refuse_damaged(summary, why) end
  return st == "complete"
end

local function execute_locked(cfg, opts, summary)
  local dir = summary.dir
  local result = dir .. "/result.h5"
  if skip_complete(cfg, opts, summary) then
    summary.skipped = true
    return summary
  end
  local common = require("hydra.methods.common")
  local eval = require("hydra.eval")
  local report = require("hydra.report")
  local plot = require("hydra.plot")
  local log, logf = opener(dir, opts)
  local ok, e = pcall(function()
    local t0 = core.now()
    local threads = err.wrap(nil, core.threads_init, cfg.threads or 0)
    log("== run %s (experiment %s, hydra %s, %s UTC) ==", summary.id, cfg.experiment,
      core.version, os.date("!%Y-%m-%d %H:%M:%S"))
    log("seed %d, %d thread(s), folder %s", cfg.seed, threads, dir)
    local provenance = { command = opts.command or command_line(),
                         overrides = overrides_text(opts.overrides), git_hash = git_hash(),
                         git_dirty = git_dirty() }
    config.write(cfg, dir .. "/config.resolved.yaml")
    do   -- provenance as comments on top (the file stays a loadable config)
      local path = dir .. "/config.resolved.yaml"
      local fh = assert(io.open(path, "rb"))
      local text = fh:read("a")
      fh:close()
      local head = ("# command: %s\n# overrides: %s\n# git: %s%s\n"):format(
        (provenance.command:gsub("\n", " ")), (provenance.overrides:gsub("\n", " ")),
        provenance.git_hash, provenance.git_dirty == 1 and " (dirty: uncommitted changes)"
        or provenance.git_dirty == 0 and " (clean)" or " (unknown)")
      report.write_text(path, head .. text)   -- atomic (hydra.output)
    end
    do   -- overrides.yaml: the key=value overrides in command-line order (a YAML list)
      local yaml, lines = require("hydra.yaml"), {}
      for _, o in ipairs(opts.override_list or {}) do
        local t = type(o) == "table" and (o.key .. "=" .. tostring(o.value)) or tostring(o)
        -- key=value plain when it reads back as itself (FB Hydra's form), else double-quoted
        lines[#lines + 1] = "- " .. (t:match("^[%w_][%w_.%-]*=[%w_.%-/+]*$") and t or yaml.string(t))
      end
      report.write_text(dir .. "/overrides.yaml", #lines > 0 and (table.concat(lines, "\n") .. "\n")
        or "[]\n")
    end
    local score = SCORE[cfg.eval.score]
    if not score then err.fail("run: eval.score '%s' is not supported", tostring(cfg.eval.score)) end
    local metrics = require("hydra.metrics")
    if cfg.eval.ece_bins ~= metrics.BINS then
      err.fail("run: eval.ece_bins must be %d (the metrics use %d bins; got %d)", metrics.BINS,
        metrics.BINS, cfg.eval.ece_bins)
    end
    local methods = cfg.methods or {}
    if #methods == 0 then err.fail("run: methods is empty (nothing to run)") end
    local mods, descs, seen, need_ood_val = {}, {}, {}, false
    for i, name in ipairs(methods) do
      if seen[name] then err.fail("run: method '%s' is listed twice in methods", name) end
      seen[name] = true
      mods[i] = method_module(name)
      local d = mods[i].describe(cfg)
      descs[i] = d
      if d.needs and d.needs.ood_val then need_ood_val = true end
    end
    local cache = stages.new({ dir = opts.cache_dir, log = function(line) log("  %s", line) end })
    -- models and data sets from outside (model.from, data.sources): imported, then checked
    -- (M.execute did it before the run folder existed; these are cache hits)
    require("hydra.sources").prepare(cfg, cache, log, { ood_val = need_ood_val })
    local sets = common.sets(cfg)
    local calibrate = cfg.eval.calibrate == "temperature"
    local val_set = calibrate and common.val_set(cfg) or nil
    local data_hashes = {}
    data_hashes[cfg.data.id] = sets[1].hash
    for _, s in ipairs(sets) do data_hashes[s.name] = s.hash end
    if need_ood_val then
      local p = common.need_prepared(cfg, cfg.data.ood_val, "OOD validation")
      data_hashes[cfg.data.ood_val] = stages.data_hash(p)
    end
    local nsets = { id = 0, ood = 0, shift = 0 }
    for _, s in ipairs(sets) do nsets[s.role] = nsets[s.role] + 1 end
    log("sets: ID %s, %d OOD, %d shift; methods: %s", sets[1].name, nsets.ood, nsets.shift,
      table.concat(methods, ", "))
    output.mkdir_p(dir .. "/methods", "run")
    output.mkdir_p(dir .. "/plots", "run")
    local files, costs, stage_lines, used, diags, preds = {}, {}, {}, {}, {}, {}
    local B = cfg.train.eval_batch_size
    for i, mod in ipairs(mods) do
      local name = methods[i]
      local tm = core.now()
      local first = #cache.records
      log("[%d/%d] %s", i, #mods, mod.label)
      local ctx = { cfg = cfg, cache = cache, progress = opts.progress, log = log }
      local pred = mod.build(ctx)
      local paths = {}
      for _, s in ipairs(sets) do paths[s.name] = pred:predict(s) end
      local calib = val_set and pred:predict(val_set) or nil
      local oods, shifts = {}, {}
      for _, s in ipairs(sets) do
        if s.role == "ood" then
          oods[#oods + 1] = { name = s.name, path = paths[s.name], group = s.group }
        elseif s.role == "shift" then shifts[#shifts + 1] = { name = s.name, path = paths[s.name] } end
      end
      local spec = {
        id = paths[sets[1].name], ood = oods, shift = shifts, calib = calib,
        score = descs[i].score or score,   -- a learned head's own score (methods/common.lua)
        bootstrap = cfg.eval.bootstrap > 0 and cfg.eval.bootstrap or nil,
        seed = cfg.eval.bootstrap_seed or cfg.seed,
        command = ("hydra exp (run %s, method %s)"):format(summary.id, name),
      }
      preds[name] = { sets = paths, spec = spec, label = mod.label }
      local res = eval.evaluate(spec)
      res.method = mod.label
      files[i] = dir .. "/methods/" .. name .. ".h5"
      eval.write(res, files[i])
      if pred.diagnose then   -- e.g. Hydra (Circ)'s circuit diagnostics (hydra.diagnostics)
        local td = core.now()
        diags[i] = pred.diagnose(files[i], sets)
        log("  %s: diagnostics (%.1f s)", mod.label, core.now() - td)
      end
      local ms, nb = pred:time_batch(sets[1], B, 5)
      local cost = pred:cost_on(sets[1])   -- FLOPs at the ID test set's token lengths (text)
      costs[i] = { params = cost.params, flops = cost.flops, flops_padded = cost.flops_padded,
                   members = cost.members, batch_size = nb, infer_ms_per_batch = ms,
                   label = mod.label, seeds = table.concat(pred.seeds or {}, ",") }
      for r = first + 1, #cache.records do
        local rec = cache.records[r]
        stage_lines[#stage_lines + 1] = ("%s %s %s %s"):format(name, rec.name, rec.key, rec.status)
        used[#used + 1] = { method = name, stage = rec.name, key = rec.key, path = rec.path }
      end
      local m = res.metrics
      log("  %s: acc %.2f%%  ece %.2f%%  nll %.4f%s  | %.3g params, %.3g FLOPs/sample, "
        .. "%.2f ms per batch of %d  (%.1f s)", mod.label, m.acc * 100, m.ece * 100, m.nll,
        res.ood_avg.auroc and ("  ood-avg auroc %.2f%%"):format(res.ood_avg.auroc * 100) or "",
        costs[i].params, costs[i].flops, ms, nb, core.now() - tm)
      if res.calibration then
        local c = res.calibration
        for _, w in ipairs(c.warnings or {}) do log("  %s +TS warning: %s", mod.label, w) end
        log("  %s +TS: T %.3f  ece %.2f%%  nll %.4f  (validation NLL %.4f -> %.4f)", mod.label,
          c.temperature, c.metrics.ece * 100, c.metrics.nll, c.val_nll_before, c.val_nll_after)
      end
    end
    -- tables and plots
    local md = report.markdown(files)
    report.write_text(dir .. "/table.md", md)
    report.write_text(dir .. "/table.csv", report.csv(files))
    summary.table_md, summary.table_csv = dir .. "/table.md", dir .. "/table.csv"
    log("")
    log("%s", md)
    summary.plots = {
      reliability = plot.reliability(files, dir .. "/plots/reliability.png").png,
      risk_coverage = plot.risk_coverage(files, dir .. "/plots/risk-coverage.png").png,
    }
    if nsets.ood > 0 then
      summary.plots.ood_hist = plot.ood_hist(files, dir .. "/plots/ood-hist.png").png
    end
    -- learning curves of the training stages the run used: curves.csv, curves/<stage>.png
    local curve_sets = {}
    do
      local curves, seen = require("hydra.curves"), {}
      for _, u in ipairs(used) do
        local id = u.stage .. "-" .. u.key:sub(1, 12)
        local rows = not seen[id] and curves.read(cache:path(u.stage, u.key, ".curves.csv"))
        if rows and #rows > 0 then
          seen[id] = true
          curve_sets[#curve_sets + 1] = { id = id, method = u.method, stage = u.stage,
                                          key = u.key, rows = rows }
        end
      end
      if #curve_sets > 0 then
        local parts = {}
        for i, c in ipairs(curve_sets) do
          local t = curves.csv_text(c.rows, { "method", "stage", "key" },
            { c.method, c.stage, c.key })
          parts[i] = i == 1 and t or t:gsub("^[^\n]*\n", "")   -- one header
        end
        report.write_text(dir .. "/curves.csv", table.concat(parts))
        require("hydra.output").mkdir_p(dir .. "/curves", "run")
        for _, c in ipairs(curve_sets) do
          curves.plot(c.rows, dir .. "/curves/" .. c.id .. ".png",
            ("learning curve: %s, stage %s %s"):format(c.method, c.stage, c.key:sub(1, 12)))
        end
        summary.curves = dir .. "/curves.csv"
      end
    end
    -- export.stages, export.format: the stage products and their safetensors exports
    require("hydra.products").write(dir, cfg, cache, { used = used, preds = preds,
                                                       methods = methods, log = log })
    -- result.h5, last
    local wall = core.now() - t0
    -- the core's I/O errors (e.g. "h5: cannot write '...': no space left on device") are raised
    -- as strings; err.wrap makes them the one-line user error they are
    err.wrap("run " .. summary.id, function()
      local f <close> = h5.create(result)
      local root = {
        format = M.FORMAT, run_id = summary.id, experiment = cfg.experiment,
        methods = table.concat(methods, ","), score = score, hydra_version = core.version,
        git_hash = provenance.git_hash, git_dirty = provenance.git_dirty,
        command = provenance.command, overrides = provenance.overrides,
        calibrate = cfg.eval.calibrate, seed = cfg.seed, config_hash = config.hash(cfg),
        config = config.to_yaml(cfg), conventions = metrics.CONVENTIONS, wall_seconds = wall,
        created = os.date("!%Y-%m-%dT%H:%M:%SZ"),
      }
      for k, v in pairs(root) do f:set_attr("/", k, v) end
      local prov = { git_hash = root.git_hash, git_dirty = root.git_dirty, command = root.command,
                     overrides = root.overrides, hydra_version = core.version, seed = cfg.seed,
                     threads = threads, host = core.hostname(), cpu = cpu_model(),
                     stages = table.concat(stage_lines, "\n") }
      for name, hsh in pairs(data_hashes) do prov["data_" .. name] = hsh end
      for k, v in pairs(prov) do f:set_attr("/provenance", k, v) end
      for _, c in ipairs(curve_sets) do   -- /curves/<stage>-<key>: one dataset per column
        local g = "/curves/" .. c.id
        local kinds = {}
        for j, r in ipairs(c.rows) do kinds[j] = r.kind or "" end
        f:write_strings(g .. "/kind", kinds)
        for _, col in ipairs(require("hydra.curves").COLUMNS) do
          if col ~= "kind" then
            local vals = {}
            for j, r in ipairs(c.rows) do vals[j] = r[col] or (0 / 0) end
            f:write(g .. "/" .. col, core.from_table("float64", vals))
          end
        end
        f:set_attr(g, "method", c.method)
        f:set_attr(g, "stage", c.stage)
        f:set_attr(g, "key", c.key)
      end
      for i, name in ipairs(methods) do
        local src <close> = h5.open(files[i])
        copy_tree(src, f, "/methods/" .. name)
        f:set_attr("/methods/" .. name, "method_name", name)
        for k, v in pairs(costs[i]) do f:set_attr("/methods/" .. name .. "/cost", k, v) end
        local d = diags[i]
        if d then   -- /methods/<name>/diagnostics (results/README.md, "Circuit diagnostics")
          local g = "/methods/" .. name .. "/diagnostics"
          for p, t in pairs(d.data) do f:write(g .. "/" .. p, t) end
          for rel, a in pairs(d.attrs) do
            for k, v in pairs(a) do f:set_attr(rel == "" and g or (g .. "/" .. rel), k, v) end
          end
          local have, present = {}, {}
          for _, c in ipairs(curve_sets) do have["/curves/" .. c.id] = true end
          for _, c in ipairs(d.curves or {}) do if have[c] then present[#present + 1] = c end end
          f:set_attr(g, "curves", table.concat(present, ","))
        end
      end
      f:commit()
    end)
    summary.methods = methods
    summary.seconds = wall
    summary.stages = { hits = cache.hits, built = cache.built }
    log("run %s complete in %.1f s (%d stages reused, %d built): %s", summary.id, wall,
      cache.hits, cache.built, result)
  end)
  if not ok then
    pcall(log, "run %s failed: %s", summary.id, err.message(e))
    logf:close()
    error(e, 0)
  end
  logf:close()
  return summary
end

function M.execute(cfg, opts)
  opts = opts or {}
  if opts.progress == nil then opts.progress = core.isatty(2) end
  local id = M.id(cfg)
  local dir = opts.dir or M.dir(cfg, id)
  local summary = { id = id, dir = dir, result = dir .. "/result.h5", skipped = false,
                    methods = cfg.methods, plots = {}, stages = { hits = 0, built = 0 } }
  if skip_complete(cfg, opts, summary) then
    summary.skipped = true
    return summary
  end
  -- the stage cache first: a cache that cannot be created leaves no run folder behind
  output.mkdir_p(opts.cache_dir or stages.default_dir(), "stages")
  -- a model or data set from outside that is missing, unreadable or disagrees with the model
  -- fails here, before the run folder exists
  if cfg.model.from ~= nil or cfg.data.sources ~= nil then
    local need = false
    for _, name in ipairs(cfg.methods or {}) do
      local d = method_module(name).describe(cfg)
      need = need or (d.needs and d.needs.ood_val) or false
    end
    local say = opts.quiet and function() end or function(fmt, ...)
      print(select("#", ...) > 0 and fmt:format(...) or fmt)
    end
    local cache = stages.new({ dir = opts.cache_dir, log = function(line) say("  %s", line) end })
    require("hydra.sources").prepare(cfg, cache, say, { ood_val = need })
  end
  output.mkdir_p(dir, "run")
  return stages.with_lock(dir .. "/.run.lock", function()
    return execute_locked(cfg, opts, summary)
  end, { what = "run " .. id, log = not opts.quiet and function(line) print(line) end or nil })
end

-- ===== reading =====

local split_list = fs.split_list

-- One method's metrics under group g of an open result file, shaped like report.load's table,
-- plus group, name (the method's name; method is its label) and cost.
local function load_method(f, g, path)
  local res = require("hydra.report").read(f, g, path)
  local root = f:attrs(g)
  res.group, res.name = g, root.method_name
  res.cost = f:exists(g .. "/cost") and f:attrs(g .. "/cost") or {}
  return res
end

function M.load(path)
  if core.stat(path) == "dir" then path = path .. "/result.h5" end
  if not is_file(path) then err.fail("run: cannot open '%s': no such file", path) end
  local f <close> = err.wrap("run", h5.open, path)
  local root = f:attrs("/")
  if root.format ~= M.FORMAT then
    err.fail("run: '%s' is not a run result (format '%s', expected '%s')", path,
      tostring(root.format), M.FORMAT)
  end
  local out = { id = root.run_id, experiment = root.experiment, config_yaml = root.config,
                provenance = f:exists("/provenance") and f:attrs("/provenance") or {},
                methods = split_list(root.methods), results = {}, attrs = root }
  for i, name in ipairs(out.methods) do
    out.results[i] = load_method(f, "/methods/" .. name, path)
  end
  return out
end

function M.method_files(dir)
  local r = M.load(dir)
  local out = {}
  for i, name in ipairs(r.methods) do out[i] = dir .. "/methods/" .. name .. ".h5" end
  return out
end

return M
