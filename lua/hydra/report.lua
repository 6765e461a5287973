-- lua/hydra/report.lua: Markdown and CSV tables from result files (RESULT.h5 of `hydra eval`).
--   report.load(path)            -> result table (method, metrics, ci, ood = {...}, ood_avg, shift)
--   report.read(f, group, path)  -> the same from a group of an open hydra.h5 file
--   report.table(results)        -> { columns = {...}, rows = {...}, caption = "..." }
--   report.markdown(results)     -> text;  report.csv(results) -> text
--   report.value(runs, filter, key) -> mean, std of a metric by method name, config values and
--                                   result.h5 metric key (what experiment scripts read; the
--                                   tables and their titles, report.TITLES, are presentation)
-- `results` is a list of result tables or paths. Rows are methods (the result's `method`
-- attribute, else its file name) in order of first appearance; several results of one method
-- (seeds) become mean ± std (sample std, n - 1). Columns: Acc, ECE, NLL, Brier, AURC, then per
-- shift set Acc / ECE, per OOD set AUROC / FPR95 / AUPR-Out, then the OOD avg of the three.
-- Rates are percentages with two decimals; NLL and Brier are raw with three decimals.
local err = require("hydra.err")
local fs = require("hydra.fs")
local h5 = require("hydra.h5")
local strings = require("hydra.strings")
local yaml = require("hydra.yaml")

local M = {}

local split_list = fs.split_list

local function basename(path)
  return (path:match("([^/]+)$") or path):gsub("%.h5$", "")
end

-- The metrics of the result stored under group g ("" = the file's root; a run's result.h5 keeps
-- one per method under /methods/<name>) of an open hydra.h5 file f; path names it in res.file.
function M.read(f, g, path)
  local root = f:attrs(g == "" and "/" or g)
  -- attributes are data, not trusted text: no control characters reach tables or plots
  for _, k in ipairs({ "method", "method_name", "dataset", "score" }) do
    root[k] = strings.printable(root[k])
  end
  local m = f:exists(g .. "/metrics") and f:attrs(g .. "/metrics") or {}
  local res = {
    file = path, method = root.method or root.method_name or basename(path),
    dataset = root.dataset, score = root.score, conventions = root.conventions,
    members = root.members, metrics = {}, ci = nil, ood = {}, ood_avg = {}, shift = {},
  }
  for k, v in pairs(m) do
    local base, side = k:match("^(.-)_(lo)$")
    if not base then base, side = k:match("^(.-)_(hi)$") end
    if base and not k:match("^ood_avg_") then
      res.ci = res.ci or {}
      res.ci[base] = res.ci[base] or {}
      res.ci[base][side == "lo" and 1 or 2] = v
    elseif k:match("^ood_avg_") then
      local rest = k:sub(9)
      if rest == "auroc" or rest == "fpr95" or rest == "aupr_out" or rest == "aupr_in" then
        res.ood_avg[rest] = v
      end
    else
      res.metrics[k] = v
    end
  end
  for _, name in ipairs(split_list(root.ood_sets)) do
    local a = f:attrs(g .. "/metrics/ood/" .. name)
    local o = { name = name, file = a.file, n = a.n, auroc = a.auroc, fpr95 = a.fpr95,
                aupr_out = a.aupr_out, aupr_in = a.aupr_in }
    for _, k in ipairs({ "auroc", "fpr95", "aupr_out", "aupr_in" }) do
      if a[k .. "_lo"] then
        o.ci = o.ci or {}
        o.ci[k] = { a[k .. "_lo"], a[k .. "_hi"] }
      end
    end
    res.ood[#res.ood + 1] = o
  end
  for _, name in ipairs(split_list(root.shift_sets)) do
    local a = f:attrs(g .. "/metrics/shift/" .. name)
    a.name = name
    res.shift[#res.shift + 1] = a
  end
  return res
end

-- Reads the metrics of one RESULT.h5 (not the per-sample arrays).
function M.load(path)
  local g <close> = err.wrap("report", h5.open, path)
  local root = g:attrs("/")
  if root.format == nil or not tostring(root.format):match("^hydra%-result%-") then
    err.fail("report: '%s' is not a hydra result file (no 'format' attribute on /)", path)
  end
  return M.read(g, "", path)
end

local function pct(v) return v * 100 end
local function raw(v) return v end

-- Column titles by metric: presentation only (scripts read values by key, M.value).
M.TITLES = { acc = "Acc ↑", ece = "ECE ↓", nll = "NLL ↓", brier = "Brier ↓", aurc = "AURC ↓",
             auroc = "AUROC ↑", fpr95 = "FPR95 ↓", aupr_out = "AUPR-Out ↑" }

-- column = { title, get(result) -> number or nil, scale, fmt }
local function columns_for(results)
  local T = M.TITLES
  local cols = {
    { title = T.acc, key = "acc", get = function(r) return r.metrics.acc end, scale = pct },
    { title = T.ece, key = "ece", get = function(r) return r.metrics.ece end, scale = pct },
    { title = T.nll, key = "nll", get = function(r) return r.metrics.nll end, scale = raw,
      fmt = "%.3f" },
    { title = T.brier, key = "brier", get = function(r) return r.metrics.brier end,
      scale = raw, fmt = "%.3f" },
    { title = T.aurc, key = "aurc", get = function(r) return r.metrics.aurc end, scale = pct },
  }
  local function sets(field)
    local names, seen = {}, {}
    for _, r in ipairs(results) do
      for _, o in ipairs(r[field] or {}) do
        if not seen[o.name] then seen[o.name] = true; names[#names + 1] = o.name end
      end
    end
    return names
  end
  local function find(list, name)
    for _, o in ipairs(list or {}) do if o.name == name then return o end end
  end
  for _, name in ipairs(sets("shift")) do
    for _, k in ipairs({ "acc", "ece" }) do
      cols[#cols + 1] = { title = name .. " " .. T[k], key = "shift." .. name .. "." .. k,
        get = function(r) local o = find(r.shift, name); return o and o[k] end, scale = pct }
    end
  end
  local ood_keys = { "auroc", "fpr95", "aupr_out" }
  local names = sets("ood")
  for _, name in ipairs(names) do
    for _, k in ipairs(ood_keys) do
      cols[#cols + 1] = { title = name .. " " .. T[k], key = "ood." .. name .. "." .. k,
        get = function(r) local o = find(r.ood, name); return o and o[k] end, scale = pct }
    end
  end
  if #names > 0 then
    for _, k in ipairs(ood_keys) do
      cols[#cols + 1] = { title = "OOD avg " .. T[k], key = "ood_avg." .. k,
        get = function(r) return r.ood_avg and r.ood_avg[k] end, scale = pct }
    end
  end
  return cols
end

-- mean and sample std (n - 1; 0 for one value) of the non-nil values
local function mean_std(vals)
  local n, s = #vals, 0
  if n == 0 then return nil end
  for _, v in ipairs(vals) do s = s + v end
  local mean = s / n
  if n == 1 then return mean, nil end
  local q = 0
  for _, v in ipairs(vals) do q = q + (v - mean) ^ 2 end
  return mean, math.sqrt(q / (n - 1))
end

local function caption(results, with_ci)
  local scores, seen = {}, {}
  for _, r in ipairs(results) do
    local s = r.score or "msp"
    if not seen[s] then seen[s] = true; scores[#scores + 1] = s end
  end
  local score_text = {
    msp = "MSP s = -max p̄", entropy = "entropy H(p̄)",
    mi = "mutual information H(p̄) - mean_m H(p_m)",
    energy = "energy -logsumexp(mean logits)", disagreement = "member disagreement",
  }
  local st = {}
  for i, s in ipairs(scores) do st[i] = score_text[s] or s end
  return "Acc, ECE, AURC, AUROC, FPR95 and AUPR-Out in %; NLL (nats) and Brier (summed over "
    .. "classes) raw; mean ± std over runs (seeds) where a method has several. "
    .. "p̄ = mean of member softmaxes, conf = max p̄. ECE: 15 equal-width bins [lo,hi), "
    .. "conf = 1.0 in the last bin. AURC: samples sorted by conf descending. "
    .. "OOD is the positive class; OOD score: " .. table.concat(st, "; ")
    .. " (higher = more OOD). AUROC exact with ties counted half; FPR95 = fraction of ID with "
    .. "s >= t at the largest t keeping >= 95 % of OOD samples; AUPR-Out = step-wise average "
    .. "precision with OOD positive. OOD avg = unweighted mean over OOD sets."
    .. (with_ci and " [lo, hi] = bootstrap 95 % percentile interval." or "")
end

-- Builds the table: columns (titles), rows = { method, n, cells = { {mean, std, ci}... } }.
function M.table(results)
  local rs = {}
  for i, r in ipairs(results) do rs[i] = type(r) == "string" and M.load(r) or r end
  local cols = columns_for(rs)
  local order, by = {}, {}
  for _, r in ipairs(rs) do
    if not by[r.method] then by[r.method] = {}; order[#order + 1] = r.method end
    table.insert(by[r.method], r)
  end
  local rows = {}
  for _, method in ipairs(order) do
    local runs = by[method]
    local row = { method = method, n = #runs, cells = {} }
    for j, c in ipairs(cols) do
      local vals = {}
      for _, r in ipairs(runs) do
        local v = c.get(r)
        if v ~= nil then vals[#vals + 1] = c.scale(v) end
      end
      local mean, std = mean_std(vals)
      local cell = { mean = mean, std = std }
      if #runs == 1 and mean ~= nil then
        local r = runs[1]
        local k = c.key
        local ci
        if k:match("^ood%.") then
          local name, mk = k:match("^ood%.(.+)%.([%w_]+)$")
          for _, o in ipairs(r.ood or {}) do
            if o.name == name and o.ci then ci = o.ci[mk] end
          end
        elseif not k:find(".", 1, true) then
          ci = r.ci and r.ci[k]
        end
        if ci and ci[1] and ci[2] then cell.ci = { c.scale(ci[1]), c.scale(ci[2]) } end
      end
      row.cells[j] = cell
    end
    rows[#rows + 1] = row
  end
  local with_ci = false
  for _, row in ipairs(rows) do
    for _, cell in ipairs(row.cells) do if cell.ci then with_ci = true end end
  end
  return { columns = cols, rows = rows, caption = caption(rs, with_ci) }
end

local function fmt_cell(c, cell)
  if cell.mean == nil then return "–" end
  local f = c.fmt or "%.2f"
  local s = f:format(cell.mean)
  if cell.std then s = s .. " ± " .. f:format(cell.std) end
  if cell.ci then s = s .. " [" .. f:format(cell.ci[1]) .. ", " .. f:format(cell.ci[2]) .. "]" end
  return s
end

local function md_escape(s) return (tostring(s):gsub("|", "\\|")) end

function M.markdown(results)
  local t = M.table(results)
  local head, rule = { "Method" }, { "---" }
  for i, c in ipairs(t.columns) do head[i + 1] = c.title; rule[i + 1] = "---:" end
  local lines = { "| " .. table.concat(head, " | ") .. " |",
                  "|" .. table.concat(rule, "|") .. "|" }
  for _, r in ipairs(t.rows) do
    local cells = { md_escape(r.method) .. (r.n > 1 and (" (n=" .. r.n .. ")") or "") }
    for j, c in ipairs(t.columns) do cells[j + 1] = fmt_cell(c, r.cells[j]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "*" .. t.caption .. "*"
  return table.concat(lines, "\n") .. "\n"
end

local function csv_field(s)
  s = tostring(s)
  if s:find('[,"\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- CSV: one row per method, the same columns (titles without arrows); a "<title> std" column
-- follows each metric when some method has several runs; empty cells where a value is missing.
function M.csv(results)
  local t = M.table(results)
  local multi = false
  for _, r in ipairs(t.rows) do if r.n > 1 then multi = true end end
  local head = { "method", "runs" }
  local function clean(title) return (title:gsub(" ↑$", ""):gsub(" ↓$", "")) end
  for _, c in ipairs(t.columns) do
    head[#head + 1] = clean(c.title)
    if multi then head[#head + 1] = clean(c.title) .. " std" end
  end
  local lines = {}
  local function row(fields)
    local out = {}
    for i, f in ipairs(fields) do out[i] = csv_field(f) end
    lines[#lines + 1] = table.concat(out, ",")
  end
  row(head)
  for _, r in ipairs(t.rows) do
    local fields = { r.method, tostring(r.n) }
    for j, c in ipairs(t.columns) do
      local cell = r.cells[j]
      local f = c.fmt or "%.2f"
      fields[#fields + 1] = cell.mean and f:format(cell.mean) or ""
      if multi then fields[#fields + 1] = cell.std and f:format(cell.std) or "" end
    end
    row(fields)
  end
  return table.concat(lines, "\n") .. "\n"
end

-- Writes text to path atomically (hydra.output; raises a user error naming path on failure).
function M.write_text(path, text)
  require("hydra.output").write_text(path, text, "report")
end

-- ===== values by key =====

-- The value of metric `key` in one loaded result (run.load's results[i]), or nil.
local function metric_of(res, key)
  local kind, set, k = key:match("^(%a+)/(.+)/([%w_]+)$")
  if kind == "ood" or kind == "shift" then
    for _, o in ipairs(res[kind] or {}) do
      if o.name == set then return o[k] end
    end
    return nil
  end
  local ck = key:match("^cost/([%w_]+)$")
  if ck then return res.cost and res.cost[ck] end
  if res.metrics[key] ~= nil then return res.metrics[key] end
  local avg = key:match("^ood_avg_(.+)$")
  if avg then return res.ood_avg and res.ood_avg[avg] end
  local base, side = key:match("^(.-)_([lh][oi])$")
  if base and res.ci and res.ci[base] and (side == "lo" or side == "hi") then
    return res.ci[base][side == "lo" and 1 or 2]
  end
  return nil
end

-- Every metric key some result has (for the message of a key no result has).
local function metric_keys(runs)
  local set = {}
  for _, r in ipairs(runs) do
    for _, res in ipairs(r.loaded.results or {}) do
      for k in pairs(res.metrics or {}) do set[k] = true end
      for k in pairs(res.ood_avg or {}) do set["ood_avg_" .. k] = true end
      for k in pairs(res.ci or {}) do set[k .. "_lo"] = true; set[k .. "_hi"] = true end
      for _, field in ipairs({ "ood", "shift" }) do
        for _, o in ipairs(res[field] or {}) do
          for k, v in pairs(o) do
            if type(v) == "number" then set[field .. "/" .. o.name .. "/" .. k] = true end
          end
        end
      end
      for k in pairs(res.cost or {}) do set["cost/" .. k] = true end
    end
  end
  local keys = {}
  for k in pairs(set) do keys[#keys + 1] = k end
  table.sort(keys)
  return set, keys
end

-- Mean and std (sample std, n - 1; nil for one run) of metric `key` over the runs of `runs`
-- (hydra.report_sweep.collect's list: an experiment's e.runs) that match `filter`:
--   filter.method   a method's name (lua/hydra/methods/<name>.lua, e.g. "hydra_circ"), required
--   other keys      dotted config keys and their values (["hydra.members"] = 2, ["fuse.mlp"] =
--                   "average"), compared as YAML text with the run's stored config
--   key             a metric as result.h5 stores it under /methods/<name>: an attribute of
--                   metrics ("acc", "ece", "nll", "ood_avg_auroc", "disagreement", "acc_lo"),
--                   "ood/<set>/<metric>", "shift/<set>/<metric>" or "cost/<attribute>"
-- Values are as stored (fractions, not percent). No matching run, or matching runs without the
-- metric: nil. Errors: an unknown method, config key or metric, and matching runs that differ
-- in a config key other than seed (the filter must name it). Display text (row labels, column
-- titles) plays no part.
function M.value(runs, filter, key)
  if type(filter) ~= "table" or type(filter.method) ~= "string" then
    err.fail("report.value: the filter needs method = a method name (e.g. \"hydra_circ\")")
  end
  local methods, mseen, cfg_keys = {}, {}, {}
  for _, r in ipairs(runs) do
    for _, res in ipairs(r.loaded.results or {}) do
      if res.name and not mseen[res.name] then
        mseen[res.name] = true
        methods[#methods + 1] = res.name
      end
    end
    for k in pairs(r.flat or {}) do cfg_keys[k] = true end
  end
  if not mseen[filter.method] then
    err.fail("report.value: no run has method '%s' (methods: %s)", filter.method,
      table.concat(methods, ", "))
  end
  local want, names = {}, {}
  for _, k in ipairs(yaml.sorted_keys(filter)) do
    if k ~= "method" then
      if not cfg_keys[k] then
        err.fail("report.value: '%s' is not a config key of these runs", tostring(k))
      end
      want[k] = yaml.flow(filter[k])
      names[#names + 1] = k .. "=" .. want[k]
    end
  end
  local known, all = metric_keys(runs)
  if type(key) ~= "string" or not known[key] then
    err.fail("report.value: no result has metric '%s' (metrics: %s)", tostring(key),
      table.concat(all, ", "))
  end
  local matched = {}
  for _, r in ipairs(runs) do
    local ok = true
    for k, text in pairs(want) do
      if r.flat[k] ~= text then ok = false end
    end
    if ok then
      for _, res in ipairs(r.loaded.results or {}) do
        if res.name == filter.method then matched[#matched + 1] = { run = r, res = res } end
      end
    end
  end
  if #matched == 0 then return nil end
  local g = require("hydra.report_sweep").group(runs)
  local first = matched[1].run.group
  for _, m in ipairs(matched) do
    if m.run.group ~= first then
      local diff = {}
      for i, k in ipairs(g.varying) do
        if m.run.group.values[i] ~= first.values[i] and not want[k] then diff[#diff + 1] = k end
      end
      err.fail("report.value: the runs of method=%s%s differ in %s (name %s in the filter)",
        filter.method, #names > 0 and (", " .. table.concat(names, ", ")) or "",
        table.concat(diff, ", "), #diff == 1 and "it" or "them")
    end
  end
  local vals = {}
  for _, m in ipairs(matched) do
    local v = metric_of(m.res, key)
    if v ~= nil then vals[#vals + 1] = v end
  end
  return mean_std(vals)
end

return M
