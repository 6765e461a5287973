-- lua/hydra/eval.lua: prediction files -> metrics -> RESULT.h5 (layout: results/README.md).
--   eval.load(path, role)    reads and validates one prediction file (role "id", "ood", "shift")
--   eval.evaluate(spec)      spec = { id = PATH, ood = {{name=, path=, group = "near"|"far"}...},
--                              shift = {...}, calib = PATH (ID validation predictions: fit
--                              temperature scaling) or nil, score = "msp", bootstrap = B or
--                              nil, seed = 0, command = "..." }
--                            -> result table (the same shape report.load returns)
--   eval.write(result, out)  writes RESULT.h5 atomically (with the raw predictions of every set)
--   eval.extract(path, group, dir) -> spec   the raw predictions of a result as prediction
--                            files in dir, and the spec that recomputes the result from them
--   eval.ood_groups(data_ood) -> { {name, group}... }   the OOD sets of a data.ood value
--   eval.json(result)        -> JSON text of the metrics
-- Errors are user errors naming the file, the dataset and the first bad row.
local core = require("hydra.core")
local err = require("hydra.err")
local h5 = require("hydra.h5")
local metrics = require("hydra.metrics")
local strings = require("hydra.strings")

local M = {}

-- Marks a Lua table as a JSON array (so an empty list encodes as [] rather than {}).
local ARRAY = {}
function M.array(t) return setmetatable(t or {}, ARRAY) end

M.FORMAT = "hydra-result-1"
-- Fewest calibration rows temperature scaling is fitted on (below: T = 1, with a warning).
M.MIN_CALIB = 10

local function shape_str(t)
  return "[" .. table.concat(t:shape(), ",") .. "]"
end

-- The message of a core error, without "file.lua:N: " and the "metrics: " module prefix.
local function core_msg(e)
  return (err.message(e):gsub("^[^%s:]+%.lua:%d+: ", ""):gsub("^metrics: ", ""))
end

local function basename(path)
  return (path:match("([^/]+)$") or path):gsub("%.h5$", "")
end

-- Reads and validates one prediction file.
-- Returns { path, probs, labels?, member_probs?, logits?, member_logits?, uncertainty?, attrs,
-- method, N, C, M }.
function M.load(path, role)
  if not core.stat(path) then err.fail("eval: cannot open '%s': no such file", path) end
  local g <close> = err.wrap("eval", h5.open, path)
  local function need_shape(name, t, want)
    local ok = t:ndim() == #want
    for i = 1, #want do ok = ok and (want[i] == "*" or t:size(i) == want[i]) end
    if not ok then
      local w = {}
      for i, v in ipairs(want) do w[i] = tostring(v):gsub("%*", ({ "M", "N", "C" })[i]) end
      err.fail("eval: '%s' %s has shape %s, expected [%s]", path, name, shape_str(t),
        table.concat(w, ","))
    end
  end
  local function read(name, dtype)
    if not g:exists(name) then return nil end
    return err.wrap("eval", g.read, g, name, dtype)
  end
  local set = { path = path, attrs = g:attrs("/") }
  -- attributes are data, not trusted text: no control characters reach plots or tables
  for _, k in ipairs({ "method", "dataset", "split" }) do
    set.attrs[k] = require("hydra.strings").printable(set.attrs[k])
  end
  set.probs = read("/probs", "float32")
  if not set.probs then err.fail("eval: '%s' has no /probs (not a prediction file?)", path) end
  if set.probs:ndim() ~= 2 then
    err.fail("eval: '%s' /probs has shape %s, expected [N,C]", path, shape_str(set.probs))
  end
  local N, C = set.probs:size(1), set.probs:size(2)
  if N == 0 or C == 0 then
    err.fail("eval: '%s' /probs has shape %s (no samples or no classes)", path,
      shape_str(set.probs))
  end
  set.N, set.C = N, C
  local ok, e = pcall(metrics.check_probs, set.probs)
  if not ok then err.fail("eval: '%s' /probs: %s", path, core_msg(e)) end
  if role ~= "ood" then
    set.labels = read("/labels", "int32")
    if not set.labels then
      err.fail("eval: '%s' has no /labels (needed for the %s set)", path, role)
    end
    need_shape("/labels", set.labels, { N })
    ok, e = pcall(metrics.check_labels, set.labels, C)
    if not ok then err.fail("eval: '%s' /labels: %s", path, core_msg(e)) end
  end
  set.member_probs = read("/member_probs", "float32")
  if set.member_probs then
    need_shape("/member_probs", set.member_probs, { "*", N, C })
    ok, e = pcall(metrics.check_probs, set.member_probs)
    if not ok then err.fail("eval: '%s' /member_probs: %s", path, core_msg(e)) end
  end
  set.M = set.member_probs and set.member_probs:size(1) or 1
  set.logits = read("/logits", "float32")
  if set.logits then need_shape("/logits", set.logits, { N, C }) end
  set.member_logits = read("/member_logits", "float32")
  if set.member_logits then
    need_shape("/member_logits", set.member_logits, { set.M, N, C })
  end
  for _, name in ipairs({ "logits", "member_logits" }) do
    if set[name] then
      ok, e = pcall(metrics.check_finite, set[name], "/" .. name)
      if not ok then
        err.fail("eval: '%s' %s", path, core_msg(e))
      end
    end
  end
  -- a learned uncertainty score (methods vilu, confidnet): score "learned"
  local u = read("/uncertainty", "float32")
  if u then
    need_shape("/uncertainty", u, { N })
    ok, e = pcall(metrics.check_finite, u, "/uncertainty")
    if not ok then err.fail("eval: '%s' %s", path, core_msg(e)) end
    set.uncertainty = read("/uncertainty", "float64")   -- scores are float64 (metrics.score)
  end
  set.method = set.attrs.method or basename(path)
  return set
end

-- Checks that `set` is comparable with the ID set (same classes, same members).
local function check_compatible(set, id)
  if set.C ~= id.C then
    err.fail("eval: '%s' has %d classes, expected %d (as in the ID file '%s')", set.path, set.C,
      id.C, id.path)
  end
  if set.M ~= id.M or (set.member_probs == nil) ~= (id.member_probs == nil) then
    err.fail("eval: '%s' has %d member(s)%s, expected %d%s (as in the ID file '%s')", set.path,
      set.M, set.member_probs and "" or " (no /member_probs)", id.M,
      id.member_probs and "" or " (no /member_probs)", id.path)
  end
end

local function check_name(kind, name)
  if not name:match("^[%w_%.%-]+$") then
    err.fail("eval: %s set name '%s' may only use letters, digits, '_', '-' and '.'", kind, name)
  end
end

-- The OOD groups in table order.
M.GROUPS = { "near", "far" }

-- The OOD test sets of a data.ood value: a list of names (every set "far") or a map
-- {near = {...}, far = {...}} (either may be absent or empty). Returns { {name=, group=}... },
-- near sets first, each group in its listed order; raises a user error naming `key` on anything
-- else (unknown group, a non-string name, a set in both groups).
function M.ood_groups(ood, key)
  key = key or "data.ood"
  local out, seen = {}, {}
  local function add(name, group, where)
    if type(name) ~= "string" then
      err.fail("config: %s: expected a dataset name, got %s", where, type(name))
    end
    if seen[name] then
      err.fail("config: %s: OOD set '%s' is listed twice (in %s and %s)", key, name, seen[name],
        group)
    end
    seen[name] = group
    out[#out + 1] = { name = name, group = group }
  end
  if ood == nil then return out end
  if type(ood) ~= "table" then
    err.fail("config: %s: expected a list of dataset names or {near: [...], far: [...]}", key)
  end
  if #ood > 0 or next(ood) == nil then
    for i, name in ipairs(ood) do add(name, "far", ("%s[%d]"):format(key, i)) end
    return out
  end
  for k in pairs(ood) do
    if k ~= "near" and k ~= "far" then
      err.fail("config: %s: unknown OOD group '%s' (groups: near, far)", key, tostring(k))
    end
  end
  for _, g in ipairs(M.GROUPS) do
    local list = ood[g]
    if list ~= nil and (type(list) ~= "table" or (next(list) ~= nil and #list == 0)) then
      err.fail("config: %s.%s: expected a list of dataset names", key, g)
    end
    for i, name in ipairs(list or {}) do add(name, g, ("%s.%s[%d]"):format(key, g, i)) end
  end
  return out
end

-- Unweighted means of every metric of `list` (entries holding metric fields, or by_score[sc]
-- when sc is given) over the entries whose group is `group` (all when nil); nil when none.
local function mean_over(list, keys, group, sc)
  local sum, n = {}, 0
  for _, o in ipairs(list) do
    local m = sc and o.by_score[sc] or o
    if (group == nil or o.group == group) and m then
      n = n + 1
      for _, k in ipairs(keys) do sum[k] = (sum[k] or 0) + m[k] end
    end
  end
  if n == 0 then return nil end
  for _, k in ipairs(keys) do sum[k] = sum[k] / n end
  return sum
end

-- { avg, near, far, groups_mean } of the OOD entries for one score (nil = the headline fields):
-- groups_mean = the mean of the near and far averages, or the one non-empty group's average.
local function ood_summaries(list, sc)
  local keys = metrics.OOD_METRICS
  local out = { avg = mean_over(list, keys, nil, sc) }
  if not out.avg then return nil end
  out.near, out.far = mean_over(list, keys, "near", sc), mean_over(list, keys, "far", sc)
  if out.near and out.far then
    out.groups_mean = {}
    for _, k in ipairs(keys) do out.groups_mean[k] = (out.near[k] + out.far[k]) / 2 end
  else
    out.groups_mean = out.near or out.far
  end
  return out
end
M.ood_summaries = ood_summaries

-- Misclassification detection of a labelled set's per-sample arrays: { [score] = {auroc, aupr,
-- fpr95} } for every available score; nil and the reason when undefined (no errors, all errors).
local function misclf_of(ps)
  local by, why = {}, nil
  for _, s in ipairs(metrics.SCORES) do
    if ps.scores[s] then
      local m, e = metrics.misclf(ps.scores[s], ps.correct)
      if not m then why = e; break end
      by[s] = m
    end
  end
  if why then return nil, why end
  return by
end

-- Why score sc has no values (the learned score is absent from every file but a learned head's).
local function unavailable_why(res, sc)
  return res.unavailable[sc] or (sc == "learned" and ("no /uncertainty in '%s' (only a learned "
    .. "uncertainty head's predictions have it: methods vilu, confidnet)"):format(res.id_file))
    or "no values"
end

-- Runs every metric. See the header for spec; returns the result table.
-- spec.ood entries may carry group = "near" | "far" (default "far"); spec.calib (a labelled
-- prediction file of the ID validation split) turns on temperature scaling.
function M.evaluate(spec)
  local score = spec.score or "msp"
  local known = {}
  for _, s in ipairs(metrics.SCORES) do known[s] = true end
  if not known[score] then
    err.fail("eval: unknown score '%s' (known: %s)", score, table.concat(metrics.SCORES, ", "))
  end
  local id = M.load(spec.id, "id")
  local ps_id = metrics.per_sample(id)
  local res = {
    format = M.FORMAT, hydra_version = core.version, command = spec.command or "",
    id_file = spec.id, method = id.method, dataset = id.attrs.dataset, split = id.attrs.split,
    score = score, bins = metrics.BINS, members = id.M, conventions = metrics.CONVENTIONS,
    nll_source = ps_id.nll_source, energy_source = ps_id.energy_source,
    unavailable = {}, ood = {}, shift = {}, ood_avg = {}, by_score_avg = {},
    per_sample = { id = ps_id, ood = {}, shift = {} }, labels = { id = id.labels },
    raw = { id = id, ood = {}, shift = {} }, calibrate = spec.calib and "temperature" or "none",
  }
  for k, v in pairs(ps_id.unavailable) do res.unavailable[k] = ("%s in '%s'"):format(v, id.path) end
  res.metrics = metrics.classification(ps_id)
  res.metrics.disagreement = metrics.mean(ps_id.scores.disagreement)
  res.metrics.members = id.M
  -- misclassification detection (ID correct vs wrong)
  local mis, why = misclf_of(ps_id)
  if mis then
    res.misclf = mis
    if not mis[score] then
      err.fail("eval: score '%s' is unavailable: %s", score, unavailable_why(res, score))
    end
    for _, k in ipairs(metrics.MISCLF_METRICS) do res.metrics["misclf_" .. k] = mis[score][k] end
    for sc, m in pairs(mis) do
      for k, v in pairs(m) do res.metrics[("misclf_%s_%s"):format(k, sc)] = v end
    end
  else
    res.unavailable.misclf = ("%s in '%s'"):format(why, id.path)
  end
  if spec.bootstrap then
    local lo, hi = metrics.bootstrap_classification(ps_id, spec.bootstrap, spec.seed or 0)
    res.ci = {}
    for _, k in ipairs(metrics.ID_METRICS) do res.ci[k] = { lo[k], hi[k] } end
  end
  local seen = {}
  for i, o in ipairs(spec.ood or {}) do
    check_name("OOD", o.name)
    if seen[o.name] then err.fail("eval: OOD set name '%s' given twice", o.name) end
    seen[o.name] = true
    local group = o.group or "far"
    if group ~= "near" and group ~= "far" then
      err.fail("eval: OOD set '%s': group must be near or far, got '%s'", o.name, tostring(group))
    end
    local set = M.load(o.path, "ood")
    check_compatible(set, id)
    local ps = metrics.per_sample(set)
    for k, v in pairs(ps.unavailable) do
      res.unavailable[k] = res.unavailable[k] or ("%s in '%s'"):format(v, o.path)
    end
    local entry = { name = o.name, file = o.path, n = set.N, group = group, by_score = {} }
    for _, s in ipairs(metrics.SCORES) do
      if ps_id.scores[s] and ps.scores[s] then
        entry.by_score[s] = metrics.ood(ps_id.scores[s], ps.scores[s])
      end
    end
    local primary = entry.by_score[score]
    if not primary then
      err.fail("eval: score '%s' is unavailable: %s", score, unavailable_why(res, score))
    end
    for _, k in ipairs(metrics.OOD_METRICS) do entry[k] = primary[k] end
    if spec.bootstrap then
      local lo, hi = metrics.bootstrap_ood(ps_id.scores[score], ps.scores[score],
        spec.bootstrap, (spec.seed or 0) + i)
      entry.ci = {}
      for _, k in ipairs(metrics.OOD_METRICS) do entry.ci[k] = { lo[k], hi[k] } end
    end
    res.ood[#res.ood + 1] = entry
    res.per_sample.ood[o.name] = ps
    res.raw.ood[o.name] = set
  end
  -- OOD avg (all sets), near avg, far avg, groups mean; for the headline score and every score
  res.ood_near, res.ood_far, res.ood_groups_mean = {}, {}, {}
  res.by_score_summary = {}
  local head = ood_summaries(res.ood)
  if head then
    res.ood_avg, res.ood_near, res.ood_far = head.avg, head.near or {}, head.far or {}
    res.ood_groups_mean = head.groups_mean
    for _, sc in ipairs(metrics.SCORES) do
      if res.ood[1].by_score[sc] then
        local sm = ood_summaries(res.ood, sc)
        res.by_score_summary[sc] = sm
        res.by_score_avg[sc] = sm.avg
      end
    end
  end
  seen = {}
  for _, o in ipairs(spec.shift or {}) do
    check_name("shift", o.name)
    if seen[o.name] then err.fail("eval: shift set name '%s' given twice", o.name) end
    seen[o.name] = true
    local set = M.load(o.path, "shift")
    check_compatible(set, id)
    local ps = metrics.per_sample(set)
    local entry = metrics.classification(ps)
    entry.name, entry.file, entry.n = o.name, o.path, set.N
    res.shift[#res.shift + 1] = entry
    res.per_sample.shift[o.name] = ps
    res.labels[o.name] = set.labels
    res.raw.shift[o.name] = set
  end
  -- post-hoc calibration: temperature scaling fitted on the ID validation split. T stays 1
  -- when the calibration set is smaller than MIN_CALIB rows or the fit does not lower its NLL
  -- (a flat NLL drives the bisection to a bound: T = 0.01 made test NLL 13x worse); a T on a
  -- bound and a calibration split other than val are warned about (cal.warnings).
  if spec.calib then
    local val = M.load(spec.calib, "calibration")
    check_compatible(val, id)
    res.raw.val = val
    local warnings = {}
    local function warn(fmt, ...) warnings[#warnings + 1] = fmt:format(...) end
    local vsplit = val.attrs.split
    if vsplit ~= nil and vsplit ~= "val" then
      warn("the calibration file '%s' holds the '%s' split, not val: temperature scaling fitted "
        .. "there can leak into the reported metrics", spec.calib, strings.printable(vsplit))
    end
    local a_val, source = metrics.log_mean_probs(val)
    local nll_before = metrics.mean(metrics.calibrated(val, a_val, 1.0).nll)
    local T, nll_after = 1.0, nll_before
    if val.N < M.MIN_CALIB then
      warn("the calibration file '%s' has %d row%s (fewer than %d): temperature kept at 1",
        spec.calib, val.N, val.N == 1 and "" or "s", M.MIN_CALIB)
    else
      local ok, t, n = pcall(metrics.temperature_fit, a_val, val.labels)
      if not ok then err.fail("eval: '%s': %s", spec.calib, core_msg(t)) end
      if n < nll_before then
        T, nll_after = t, n
        if t <= metrics.TEMP_MIN * (1 + 1e-9) or t >= metrics.TEMP_MAX * (1 - 1e-9) then
          warn("the fitted temperature %.4g is on the bound of [%g, %g] (calibration file '%s')",
            t, metrics.TEMP_MIN, metrics.TEMP_MAX, spec.calib)
        end
      else
        warn("temperature scaling does not lower the NLL of '%s' (%.4f at T = 1, %.4f at T = "
          .. "%.4g): temperature kept at 1", spec.calib, nll_before, n, t)
      end
    end
    local cal = { temperature = T, source = source, val_file = spec.calib, val_n = val.N,
                  val_nll_before = nll_before, val_nll_after = nll_after, shift = {},
                  warnings = warnings }
    local a_id = metrics.log_mean_probs(id)
    cal.metrics = metrics.classification(metrics.calibrated(id, a_id, T))
    for _, sh in ipairs(res.shift) do
      local set = res.raw.shift[sh.name]
      local m = metrics.classification(metrics.calibrated(set, (metrics.log_mean_probs(set)), T))
      m.name = sh.name
      cal.shift[#cal.shift + 1] = m
    end
    res.calibration = cal
  end
  return res
end

-- ===== RESULT.h5 =====

-- The raw prediction arrays of a set (what the prediction file held), so that a result file
-- alone can recompute every metric (results/README.md, "Run folders").
local RAW = { "probs", "logits", "member_probs", "member_logits", "uncertainty" }

local function write_ps(f, prefix, ps, labels, raw)
  f:write(prefix .. "/conf", ps.conf)
  f:write(prefix .. "/pred", ps.pred)
  if ps.correct then
    f:write(prefix .. "/labels", labels)
    f:write(prefix .. "/correct", ps.correct)
    f:write(prefix .. "/nll", ps.nll)
    f:write(prefix .. "/brier", ps.brier)
    local cnt, acc, conf = metrics.reliability(ps.conf, ps.correct)
    f:write(prefix .. "/reliability/count", cnt)
    f:write(prefix .. "/reliability/acc", acc)
    f:write(prefix .. "/reliability/conf", conf)
  end
  for _, s in ipairs(metrics.SCORES) do
    if ps.scores[s] then f:write(prefix .. "/scores/" .. s, ps.scores[s]) end
  end
  for _, k in ipairs(RAW) do
    if raw and raw[k] then f:write(prefix .. "/" .. k, raw[k]) end
  end
end

local function names_of(list, group)
  local t = {}
  for _, e in ipairs(list) do
    if group == nil or e.group == group then t[#t + 1] = e.name end
  end
  return table.concat(t, ",")
end

local function files_of(list)
  local t = {}
  for i, e in ipairs(list) do t[i] = e.name .. "=" .. e.file end
  return table.concat(t, ";")
end

local function unavailable_str(res)
  local t = {}
  for k, v in pairs(res.unavailable) do t[#t + 1] = k .. ": " .. v end
  table.sort(t)
  return table.concat(t, "; ")
end

-- Attributes "<prefix>_<metric>" (and "<prefix>_<metric>_<score>") of one summary table.
local function set_summary(f, g, prefix, m, sc)
  for k, v in pairs(m or {}) do
    f:set_attr(g, sc and ("%s_%s_%s"):format(prefix, k, sc) or (prefix .. "_" .. k), v)
  end
end

function M.write(res, out)
  local f <close> = err.wrap("eval", h5.create, out)
  local root = {
    format = res.format, hydra_version = res.hydra_version, command = res.command,
    id_file = res.id_file, ood_files = files_of(res.ood), shift_files = files_of(res.shift),
    ood_sets = names_of(res.ood), ood_near_sets = names_of(res.ood, "near"),
    ood_far_sets = names_of(res.ood, "far"), shift_sets = names_of(res.shift),
    method = res.method, dataset = res.dataset, split = res.split, score = res.score,
    bins = res.bins, members = res.members, conventions = res.conventions,
    nll_source = res.nll_source, energy_source = res.energy_source,
    unavailable = unavailable_str(res), nll_eps = metrics.EPS, calibrate = res.calibrate,
  }
  for k, v in pairs(root) do f:set_attr("/", k, v) end
  write_ps(f, "/id", res.per_sample.id, res.labels.id, res.raw and res.raw.id)
  for k, v in pairs(res.metrics) do f:set_attr("/metrics", k, v) end
  for k, v in pairs(res.ci or {}) do
    f:set_attr("/metrics", k .. "_lo", v[1])
    f:set_attr("/metrics", k .. "_hi", v[2])
  end
  set_summary(f, "/metrics", "ood_avg", res.ood_avg)
  set_summary(f, "/metrics", "ood_near", res.ood_near)
  set_summary(f, "/metrics", "ood_far", res.ood_far)
  set_summary(f, "/metrics", "ood_groups_mean", res.ood_groups_mean)
  for sc, sm in pairs(res.by_score_summary or {}) do
    set_summary(f, "/metrics", "ood_avg", sm.avg, sc)
    set_summary(f, "/metrics", "ood_near", sm.near, sc)
    set_summary(f, "/metrics", "ood_far", sm.far, sc)
    set_summary(f, "/metrics", "ood_groups_mean", sm.groups_mean, sc)
  end
  for _, o in ipairs(res.ood) do
    local g = "/metrics/ood/" .. o.name
    f:set_attr(g, "file", o.file)
    f:set_attr(g, "n", o.n)
    f:set_attr(g, "group", o.group or "far")
    for _, k in ipairs(metrics.OOD_METRICS) do f:set_attr(g, k, o[k]) end
    for sc, m in pairs(o.by_score) do
      for k, v in pairs(m) do f:set_attr(g, k .. "_" .. sc, v) end
    end
    for k, v in pairs(o.ci or {}) do
      f:set_attr(g, k .. "_lo", v[1])
      f:set_attr(g, k .. "_hi", v[2])
    end
    write_ps(f, "/ood/" .. o.name, res.per_sample.ood[o.name], nil,
      res.raw and res.raw.ood[o.name])
  end
  for _, s in ipairs(res.shift) do
    local g = "/metrics/shift/" .. s.name
    f:set_attr(g, "file", s.file)
    f:set_attr(g, "n", s.n)
    for _, k in ipairs(metrics.ID_METRICS) do f:set_attr(g, k, s[k]) end
    write_ps(f, "/shift/" .. s.name, res.per_sample.shift[s.name], res.labels[s.name],
      res.raw and res.raw.shift[s.name])
  end
  local cal = res.calibration
  if cal then
    local g = "/calibration"
    for _, k in ipairs({ "temperature", "source", "val_file", "val_n", "val_nll_before",
                         "val_nll_after" }) do
      f:set_attr(g, k, cal[k])
    end
    f:set_attr(g, "method", "temperature")
    for k, v in pairs(cal.metrics) do f:set_attr(g, k, v) end
    for _, m in ipairs(cal.shift) do
      for _, k in ipairs(metrics.ID_METRICS) do f:set_attr(g .. "/shift/" .. m.name, k, m[k]) end
    end
    local val = res.raw.val
    f:write("/val/labels", val.labels)
    for _, k in ipairs(RAW) do
      if val[k] then f:write("/val/" .. k, val[k]) end
    end
  end
  err.wrap("eval", f.commit, f)
end

-- ===== recomputing from a result file =====

-- Writes the raw prediction arrays stored in a result (group g of the file at `path`: "" for a
-- `hydra eval` RESULT.h5, "/methods/<name>" in a run's result.h5) back into prediction files in
-- `dir` and returns the eval.evaluate spec that reproduces the result from them alone (same
-- sets, groups, calibration split and score). Fails naming the file when a set lacks /probs.
function M.extract(path, g, dir)
  g = g or ""
  local f <close> = err.wrap("eval", h5.open, path)
  local root = f:attrs(g == "" and "/" or g)
  local function dump(src, name, role)
    if not f:exists(src .. "/probs") then
      err.fail("eval: '%s' has no %s/probs (written before result files kept the raw "
        .. "predictions?)", path, src)
    end
    local out = ("%s/%s.h5"):format(dir, name)
    local o <close> = h5.create(out)
    for _, k in ipairs(RAW) do
      if f:exists(src .. "/" .. k) then o:write("/" .. k, f:read(src .. "/" .. k)) end
    end
    if role ~= "ood" then o:write("/labels", f:read(src .. "/labels", "int32")) end
    o:set_attr("/", "method", root.method or "")
    o:commit()
    return out
  end
  local groups = {}
  for name in (root.ood_near_sets or ""):gmatch("[^,]+") do groups[name] = "near" end
  local spec = { id = dump(g .. "/id", "id", "id"), ood = {}, shift = {}, score = root.score }
  for name in (root.ood_sets or ""):gmatch("[^,]+") do
    spec.ood[#spec.ood + 1] = { name = name, group = groups[name] or "far",
                                path = dump(g .. "/ood/" .. name, "ood-" .. name, "ood") }
  end
  for name in (root.shift_sets or ""):gmatch("[^,]+") do
    spec.shift[#spec.shift + 1] = { name = name,
                                    path = dump(g .. "/shift/" .. name, "shift-" .. name, "shift") }
  end
  if root.calibrate == "temperature" then spec.calib = dump(g .. "/val", "val", "val") end
  return spec
end

-- ===== JSON =====

local function json_value(v, indent)
  local t = type(v)
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    if math.type(v) == "integer" then return tostring(v) end
    return ("%.17g"):format(v)
  elseif t == "string" then
    return '"' .. v:gsub('[%c"\\]', function(c)
      local map = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }
      return map[c] or ("\\u%04x"):format(c:byte())
    end) .. '"'
  elseif t == "boolean" then
    return tostring(v)
  elseif t == "nil" then
    return "null"
  elseif t == "table" then
    local pad, pad2 = ("  "):rep(indent), ("  "):rep(indent + 1)
    if #v > 0 or getmetatable(v) == ARRAY or next(v) == nil then
      if next(v) == nil then return getmetatable(v) == ARRAY and "[]" or "{}" end
      local items = {}
      for i, x in ipairs(v) do items[i] = pad2 .. json_value(x, indent + 1) end
      return "[\n" .. table.concat(items, ",\n") .. "\n" .. pad .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    local items = {}
    for i, k in ipairs(keys) do
      items[i] = pad2 .. json_value(k, 0) .. ": " .. json_value(v[k], indent + 1)
    end
    return "{\n" .. table.concat(items, ",\n") .. "\n" .. pad .. "}"
  end
  error("eval.json: cannot encode a " .. t, 2)
end
M.json_value = json_value

-- The metrics of a result (no per-sample arrays) as JSON; unavailable values are null.
function M.json(res)
  local ood = M.array()
  for i, o in ipairs(res.ood) do
    ood[i] = { name = o.name, file = o.file, n = o.n, group = o.group, auroc = o.auroc,
               fpr95 = o.fpr95, fpr95_id = o.fpr95_id, aupr_out = o.aupr_out,
               aupr_in = o.aupr_in, by_score = o.by_score, ci = o.ci }
  end
  local shift = M.array()
  for i, s in ipairs(res.shift) do
    shift[i] = {}
    for k, v in pairs(s) do shift[i][k] = v end
  end
  local unavailable = {}
  for k, v in pairs(res.unavailable) do unavailable[k] = v end
  return json_value({
    format = res.format, hydra_version = res.hydra_version, command = res.command,
    id_file = res.id_file, method = res.method, dataset = res.dataset, score = res.score,
    members = res.members, conventions = res.conventions, nll_source = res.nll_source,
    metrics = res.metrics, ci = res.ci, ood = ood, ood_avg = next(res.ood_avg) and res.ood_avg
    or nil, ood_near = res.ood_near and next(res.ood_near) and res.ood_near or nil,
    ood_far = res.ood_far and next(res.ood_far) and res.ood_far or nil,
    ood_groups_mean = res.ood_groups_mean and next(res.ood_groups_mean) and res.ood_groups_mean
    or nil, misclf = res.misclf, calibration = res.calibration and {
      temperature = res.calibration.temperature, source = res.calibration.source,
      val_nll_before = res.calibration.val_nll_before,
      val_nll_after = res.calibration.val_nll_after, metrics = res.calibration.metrics,
    } or nil, shift = shift, unavailable = unavailable,
  }, 0) .. "\n"
end

return M
