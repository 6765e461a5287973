-- lua/hydra/eval.lua: prediction files -> metrics -> RESULT.h5 (layout: results/README.md).
--   eval.load(path, role)    reads and validates one prediction file (role "id", "ood", "shift")
--   eval.evaluate(spec)      spec = { id = PATH, ood = {{name=, path=}...}, shift = {...},
--                              score = "msp", bootstrap = B or nil, seed = 0, command = "..." }
--                            -> result table (the same shape report.load returns)
--   eval.write(result, out)  writes RESULT.h5 atomically
--   eval.json(result)        -> JSON text of the metrics
-- Errors are user errors naming the file, the dataset and the first bad row.
local core = require("hydra.core")
local err = require("hydra.err")
local h5 = require("hydra.h5")
local metrics = require("hydra.metrics")

local M = {}

-- Marks a Lua table as a JSON array (so an empty list encodes as [] rather than {}).
local ARRAY = {}
function M.array(t) return setmetatable(t or {}, ARRAY) end

M.FORMAT = "hydra-result-1"

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
-- Returns { path, probs, labels?, member_probs?, logits?, member_logits?, attrs, method, N, C, M }.
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

-- Runs every metric. See the header for spec; returns the result table.
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
  }
  for k, v in pairs(ps_id.unavailable) do res.unavailable[k] = ("%s in '%s'"):format(v, id.path) end
  res.metrics = metrics.classification(ps_id)
  res.metrics.disagreement = metrics.mean(ps_id.scores.disagreement)
  res.metrics.members = id.M
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
    local set = M.load(o.path, "ood")
    check_compatible(set, id)
    local ps = metrics.per_sample(set)
    for k, v in pairs(ps.unavailable) do
      res.unavailable[k] = res.unavailable[k] or ("%s in '%s'"):format(v, o.path)
    end
    local entry = { name = o.name, file = o.path, n = set.N, by_score = {} }
    for _, s in ipairs(metrics.SCORES) do
      if ps_id.scores[s] and ps.scores[s] then
        entry.by_score[s] = metrics.ood(ps_id.scores[s], ps.scores[s])
      end
    end
    local primary = entry.by_score[score]
    if not primary then
      err.fail("eval: score '%s' is unavailable: %s", score, res.unavailable[score])
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
  end
  if #res.ood > 0 then
    for _, k in ipairs(metrics.OOD_METRICS) do
      local s = 0
      for _, o in ipairs(res.ood) do s = s + o[k] end
      res.ood_avg[k] = s / #res.ood
    end
    for _, sc in ipairs(metrics.SCORES) do
      if res.ood[1].by_score[sc] then
        local avg = {}
        for _, k in ipairs(metrics.OOD_METRICS) do
          local s = 0
          for _, o in ipairs(res.ood) do s = s + o.by_score[sc][k] end
          avg[k] = s / #res.ood
        end
        res.by_score_avg[sc] = avg
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
  end
  return res
end

-- ===== RESULT.h5 =====

local function write_ps(f, prefix, ps, labels)
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
end

local function names_of(list)
  local t = {}
  for i, e in ipairs(list) do t[i] = e.name end
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

function M.write(res, out)
  local f <close> = err.wrap("eval", h5.create, out)
  local root = {
    format = res.format, hydra_version = res.hydra_version, command = res.command,
    id_file = res.id_file, ood_files = files_of(res.ood), shift_files = files_of(res.shift),
    ood_sets = names_of(res.ood), shift_sets = names_of(res.shift), method = res.method,
    dataset = res.dataset, split = res.split, score = res.score, bins = res.bins,
    members = res.members, conventions = res.conventions, nll_source = res.nll_source,
    energy_source = res.energy_source, unavailable = unavailable_str(res),
    nll_eps = metrics.EPS,
  }
  for k, v in pairs(root) do f:set_attr("/", k, v) end
  write_ps(f, "/id", res.per_sample.id, res.labels.id)
  for k, v in pairs(res.metrics) do f:set_attr("/metrics", k, v) end
  for k, v in pairs(res.ci or {}) do
    f:set_attr("/metrics", k .. "_lo", v[1])
    f:set_attr("/metrics", k .. "_hi", v[2])
  end
  for k, v in pairs(res.ood_avg) do f:set_attr("/metrics", "ood_avg_" .. k, v) end
  for sc, avg in pairs(res.by_score_avg) do
    for k, v in pairs(avg) do f:set_attr("/metrics", ("ood_avg_%s_%s"):format(k, sc), v) end
  end
  for _, o in ipairs(res.ood) do
    local g = "/metrics/ood/" .. o.name
    f:set_attr(g, "file", o.file)
    f:set_attr(g, "n", o.n)
    for _, k in ipairs(metrics.OOD_METRICS) do f:set_attr(g, k, o[k]) end
    for sc, m in pairs(o.by_score) do
      for k, v in pairs(m) do f:set_attr(g, k .. "_" .. sc, v) end
    end
    for k, v in pairs(o.ci or {}) do
      f:set_attr(g, k .. "_lo", v[1])
      f:set_attr(g, k .. "_hi", v[2])
    end
    write_ps(f, "/ood/" .. o.name, res.per_sample.ood[o.name])
  end
  for _, s in ipairs(res.shift) do
    local g = "/metrics/shift/" .. s.name
    f:set_attr(g, "file", s.file)
    f:set_attr(g, "n", s.n)
    for _, k in ipairs(metrics.ID_METRICS) do f:set_attr(g, k, s[k]) end
    write_ps(f, "/shift/" .. s.name, res.per_sample.shift[s.name], res.labels[s.name])
  end
  err.wrap("eval", f.commit, f)
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
    ood[i] = { name = o.name, file = o.file, n = o.n, auroc = o.auroc, fpr95 = o.fpr95,
               aupr_out = o.aupr_out, aupr_in = o.aupr_in, by_score = o.by_score, ci = o.ci }
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
    or nil, shift = shift, unavailable = unavailable,
  }, 0) .. "\n"
end

return M
