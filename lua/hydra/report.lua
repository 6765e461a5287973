-- lua/hydra/report.lua: Markdown and CSV tables from result files (RESULT.h5 of `hydra eval`).
--   report.load(path)            -> result table (method, metrics, ci, ood = {...}, ood_avg, shift)
--   report.read(f, group, path)  -> the same from a group of an open hydra.h5 file
--   report.table(results [, opts]) -> { columns = {...}, rows = {...}, caption = "..." } of one
--                                   block (opts.block: main | scores | misclf | calibration)
--   report.tables(results [, opts]) -> every block that has columns, in print order
--   report.markdown(results [, opts]) -> text;  report.csv(results [, opts]) -> text
--   opts.fpr = "fpr95" (default) | "fpr95_id": the FPR convention of the OOD columns
--   report.value(runs, filter, key) -> mean, std of a metric by method name, config values and
--                                   result.h5 metric key (what experiment scripts read; the
--                                   tables and their titles, report.TITLES, are presentation)
-- `results` is a list of result tables or paths. Rows are methods (the result's `method`
-- attribute, else its file name) in order of first appearance; several results of one method
-- (seeds) become mean ± std (sample std, n - 1). Main block: Acc, ECE (+TS), NLL (+TS), Brier,
-- AURC, then per shift set Acc / ECE, per OOD set (near sets first) AUROC / FPR95 / AUPR-Out,
-- then near avg, far avg, OOD avg (all sets) and groups mean of the three (near/far/groups only
-- when both groups occur). Other blocks: every OOD score, misclassification detection,
-- temperature scaling (results/README.md).
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

-- Attribute names: "<summary>_<metric>" and "<summary>_<metric>_<score>" on /metrics, and
-- "<metric>_<score>" on /metrics/ood/<set> (results/README.md).
local SUMMARY_PREFIXES = { "ood_avg", "ood_near", "ood_far", "ood_groups_mean" }
local SUMMARY_FIELD = { ood_avg = "avg", ood_near = "near", ood_far = "far",
                        ood_groups_mean = "groups_mean" }
local OOD_KEYS = { "aupr_out", "aupr_in", "fpr95_id", "auroc", "fpr95" }   -- longest first
local ID_KEYS = { "acc", "nll", "brier", "ece", "aece", "mce", "aurc" }

-- "fpr95_id_msp" -> "fpr95_id", "msp"; "auroc" -> "auroc", nil; anything else -> nil
local function split_metric(rest)
  for _, k in ipairs(OOD_KEYS) do
    if rest == k then return k, nil end
    if rest:sub(1, #k + 1) == k .. "_" then return k, rest:sub(#k + 2) end
  end
  return nil
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
  res.ood_near, res.ood_far, res.ood_groups_mean, res.by_score_summary = {}, {}, {}, {}
  for k, v in pairs(m) do
    local prefix, rest
    for _, pre in ipairs(SUMMARY_PREFIXES) do
      if k:sub(1, #pre + 1) == pre .. "_" then prefix, rest = pre, k:sub(#pre + 2) end
    end
    local base, side = k:match("^(.-)_(lo)$")
    if not base then base, side = k:match("^(.-)_(hi)$") end
    if prefix then
      local mk, sc = split_metric(rest)
      if mk and sc then
        local sm = res.by_score_summary[sc] or {}
        res.by_score_summary[sc] = sm
        local field = SUMMARY_FIELD[prefix]
        sm[field] = sm[field] or {}
        sm[field][mk] = v
      elseif mk then
        res[prefix][mk] = v
      end
    elseif base and not k:match("^misclf_") then
      res.ci = res.ci or {}
      res.ci[base] = res.ci[base] or {}
      res.ci[base][side == "lo" and 1 or 2] = v
    else
      res.metrics[k] = v
    end
  end
  for _, name in ipairs(split_list(root.ood_sets)) do
    local a = f:attrs(g .. "/metrics/ood/" .. name)
    local o = { name = name, file = a.file, n = a.n, group = a.group or "far", by_score = {} }
    for k, v in pairs(a) do
      local mk, sc = split_metric(k)
      if mk and sc and sc ~= "lo" and sc ~= "hi" then
        o.by_score[sc] = o.by_score[sc] or {}
        o.by_score[sc][mk] = v
      elseif mk and not sc then
        o[mk] = v
      end
    end
    for _, k in ipairs(OOD_KEYS) do
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
  if f:exists(g .. "/calibration") then
    local a = f:attrs(g .. "/calibration")
    local cal = { temperature = a.temperature, source = a.source, val_n = a.val_n,
                  val_nll_before = a.val_nll_before, val_nll_after = a.val_nll_after,
                  metrics = {}, shift = {} }
    for _, k in ipairs(ID_KEYS) do cal.metrics[k] = a[k] end
    for _, name in ipairs(split_list(root.shift_sets)) do
      local sg = g .. "/calibration/shift/" .. name
      if f:exists(sg) then
        local sa = f:attrs(sg)
        sa.name = name
        cal.shift[#cal.shift + 1] = sa
      end
    end
    res.calibration = cal
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
             auroc = "AUROC ↑", fpr95 = "FPR95 ↓", fpr95_id = "FPR95-ID ↓", aupr_out = "AUPR-Out ↑",
             aupr = "AUPR ↑", aece = "aECE ↓" }

-- Table labels of the OOD scores (results/README.md).
M.SCORE_LABELS = { msp = "MSP", maxlogit = "Max-logit", entropy = "Entropy", mi = "MI",
                   energy = "Energy", disagreement = "Disagreement", learned = "Learned" }
M.SCORE_ORDER = { "msp", "maxlogit", "entropy", "mi", "energy", "disagreement", "learned" }
-- The blocks of a table, in print order, with their headings (report.markdown prints each
-- block that has a value).
M.BLOCKS = {
  { name = "main", heading = nil },
  { name = "scores", heading = "OOD detection by score (OOD avg over all sets; groups mean = "
    .. "mean of the near and far averages)" },
  { name = "misclf", heading = "Misclassification detection (ID test set; misclassified = "
    .. "positive)" },
  { name = "calibration", heading = "Post-hoc calibration: temperature scaling (+TS), one T "
    .. "per method fitted on the ID validation split by NLL" },
}

local function sets_of(results, field)
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

-- OOD set names with near sets first (each group in first-appearance order), and whether
-- both groups occur.
local function ood_sets(results)
  local names = sets_of(results, "ood")
  local group = {}
  for _, r in ipairs(results) do
    for _, o in ipairs(r.ood or {}) do group[o.name] = group[o.name] or o.group or "far" end
  end
  local out, has = {}, {}
  for _, g in ipairs({ "near", "far" }) do
    for _, n in ipairs(names) do
      if group[n] == g then out[#out + 1] = n; has[g] = true end
    end
  end
  return out, has.near and has.far, has
end

local function any(results, f)
  for _, r in ipairs(results) do if f(r) ~= nil then return true end end
  return false
end

-- column = { title, key, get(result) -> number or nil, scale, fmt }
-- opts.fpr = "fpr95" (default: ID flagged at 95 % OOD recall) | "fpr95_id" (OOD accepted at
-- 95 % ID recall) picks the FPR convention of the OOD columns.
local function columns_for(results, block, opts)
  local T = M.TITLES
  local fpr = opts.fpr or "fpr95"
  local fpr_title = T[fpr]
  local cal = function(r) return r.calibration end
  local has_cal = any(results, cal)
  local cols = {}
  local function add(c) cols[#cols + 1] = c end
  local ood_names, both, has = ood_sets(results)
  local ood_keys = { { "auroc", T.auroc }, { fpr, fpr_title }, { "aupr_out", T.aupr_out } }
  local summaries = {
    { "near", "Near avg", has.near and both }, { "far", "Far avg", has.far and both },
    { "avg", "OOD avg", #ood_names > 0 }, { "groups_mean", "Groups mean", both },
  }
  local field = { near = "ood_near", far = "ood_far", avg = "ood_avg",
                  groups_mean = "ood_groups_mean" }
  if block == "main" then
    add({ title = T.acc, key = "acc", get = function(r) return r.metrics.acc end, scale = pct })
    add({ title = T.ece, key = "ece", get = function(r) return r.metrics.ece end, scale = pct })
    if has_cal then
      add({ title = "ECE +TS ↓", key = "ts.ece", scale = pct,
            get = function(r) return r.calibration and r.calibration.metrics.ece end })
    end
    add({ title = T.nll, key = "nll", get = function(r) return r.metrics.nll end, scale = raw,
          fmt = "%.3f" })
    if has_cal then
      add({ title = "NLL +TS ↓", key = "ts.nll", scale = raw, fmt = "%.3f",
            get = function(r) return r.calibration and r.calibration.metrics.nll end })
    end
    add({ title = T.brier, key = "brier", get = function(r) return r.metrics.brier end,
          scale = raw, fmt = "%.3f" })
    add({ title = T.aurc, key = "aurc", get = function(r) return r.metrics.aurc end,
          scale = pct })
    for _, name in ipairs(sets_of(results, "shift")) do
      for _, k in ipairs({ { "acc", T.acc }, { "ece", T.ece } }) do
        add({ title = name .. " " .. k[2], key = "shift." .. name .. "." .. k[1], scale = pct,
              get = function(r) local o = find(r.shift, name); return o and o[k[1]] end })
      end
    end
    for _, name in ipairs(ood_names) do
      for _, k in ipairs(ood_keys) do
        add({ title = name .. " " .. k[2], key = "ood." .. name .. "." .. k[1], scale = pct,
              get = function(r) local o = find(r.ood, name); return o and o[k[1]] end })
      end
    end
    for _, sm in ipairs(summaries) do
      if sm[3] then
        for _, k in ipairs(ood_keys) do
          add({ title = sm[2] .. " " .. k[2], key = field[sm[1]] .. "." .. k[1], scale = pct,
                get = function(r) local t = r[field[sm[1]]]; return t and t[k[1]] end })
        end
      end
    end
  elseif block == "scores" and #ood_names > 0 then
    for _, sc in ipairs(M.SCORE_ORDER) do
      local function summary(r, which)
        local t = r.by_score_summary and r.by_score_summary[sc]
        return t and t[which]
      end
      if any(results, function(r) return summary(r, "avg") end) then
        local label = M.SCORE_LABELS[sc]
        add({ title = label .. " AUROC ↑", key = "score." .. sc .. ".auroc", scale = pct,
              get = function(r) local t = summary(r, "avg"); return t and t.auroc end })
        if both then
          add({ title = label .. " groups AUROC ↑", key = "score." .. sc .. ".groups_auroc",
                scale = pct,
                get = function(r) local t = summary(r, "groups_mean"); return t and t.auroc end })
        end
        add({ title = label .. " " .. fpr_title, key = "score." .. sc .. "." .. fpr,
              scale = pct, get = function(r) local t = summary(r, "avg"); return t and t[fpr] end })
      end
    end
  elseif block == "misclf" then
    for _, k in ipairs({ { "auroc", T.auroc }, { "aupr", T.aupr }, { "fpr95", T.fpr95 } }) do
      add({ title = "Misclf " .. k[2], key = "misclf_" .. k[1], scale = pct,
            get = function(r) return r.metrics["misclf_" .. k[1]] end })
    end
    for _, sc in ipairs(M.SCORE_ORDER) do
      local key = "misclf_auroc_" .. sc
      if any(results, function(r) return r.metrics[key] end) then
        add({ title = ("Misclf AUROC (%s) ↑"):format(M.SCORE_LABELS[sc]), key = key,
              scale = pct, get = function(r) return r.metrics[key] end })
      end
    end
    if not any(results, function(r) return r.metrics.misclf_auroc end) then cols = {} end
  elseif block == "calibration" and has_cal then
    add({ title = "T", key = "ts.temperature", scale = raw, fmt = "%.3f",
          get = function(r) return r.calibration and r.calibration.temperature end })
    for _, k in ipairs({ { "ece", T.ece, pct }, { "aece", T.aece, pct },
                         { "nll", T.nll, raw, "%.3f" }, { "brier", T.brier, raw, "%.3f" } }) do
      add({ title = k[2], key = k[1], scale = k[3], fmt = k[4],
            get = function(r) return r.metrics[k[1]] end })
      add({ title = (k[2]:gsub(" ↓$", " +TS ↓")), key = "ts." .. k[1], scale = k[3],
            fmt = k[4],
            get = function(r) return r.calibration and r.calibration.metrics[k[1]] end })
    end
    for _, name in ipairs(sets_of(results, "shift")) do
      add({ title = name .. " ECE ↓", key = "shift." .. name .. ".ece", scale = pct,
            get = function(r) local o = find(r.shift, name); return o and o.ece end })
      add({ title = name .. " ECE +TS ↓", key = "ts.shift." .. name .. ".ece", scale = pct,
            get = function(r)
              local o = r.calibration and find(r.calibration.shift, name)
              return o and o.ece
            end })
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
M.mean_std = mean_std

local function caption(results, with_ci, opts)
  local scores, seen = {}, {}
  for _, r in ipairs(results) do
    local s = r.score or "msp"
    if not seen[s] then seen[s] = true; scores[#scores + 1] = s end
  end
  local score_text = {
    msp = "MSP s = -max p̄", entropy = "entropy H(p̄)", maxlogit = "max-logit -mean_m max z_m",
    mi = "mutual information H(p̄) - mean_m H(p_m)",
    energy = "energy -logsumexp(mean logits)", disagreement = "member disagreement",
    learned = "learned (the method's trained uncertainty head)",
  }
  local st = {}
  for i, s in ipairs(scores) do st[i] = score_text[s] or s end
  local names, both = ood_sets(results)
  local groups = ""
  if both then
    local g, seen_n = { near = {}, far = {} }, {}
    for _, r in ipairs(results) do
      for _, o in ipairs(r.ood or {}) do
        if not seen_n[o.name] then
          seen_n[o.name] = true
          table.insert(g[o.group or "far"], o.name)
        end
      end
    end
    groups = (" Near OOD: %s; far OOD: %s; near/far avg = unweighted mean within the group, "
      .. "OOD avg = unweighted mean over all %d sets, groups mean = mean of the near and far "
      .. "averages."):format(table.concat(g.near, ", "), table.concat(g.far, ", "), #names)
  else
    groups = " OOD avg = unweighted mean over OOD sets."
  end
  local fpr = (opts.fpr == "fpr95_id")
    and "FPR95-ID = fraction of OOD samples with s <= t at the smallest t accepting >= 95 % of "
      .. "ID samples (95 % ID recall; the other table convention, fpr95 in result files, is "
      .. "the fraction of ID flagged at 95 % OOD recall)"
    or "FPR95 = fraction of ID samples flagged (s >= t) at the largest t keeping >= 95 % of "
      .. "OOD samples (95 % OOD recall, the paper authors' convention; the other, OOD accepted "
      .. "at 95 % ID recall, is fpr95_id in result files and `hydra eval --fpr fpr95_id`)"
  local ts = any(results, function(r) return r.calibration end)
    and " +TS: after temperature scaling, p_T = softmax(log p̄ / T), T fitted on the ID "
      .. "validation split by NLL." or ""
  return "Acc, ECE, AURC, AUROC, FPR95 and AUPR-Out in %; NLL (nats) and Brier (summed over "
    .. "classes) raw; mean ± std over runs (seeds) where a method has several. "
    .. "p̄ = mean of member softmaxes, conf = max p̄. ECE: 15 equal-width bins [lo,hi), "
    .. "conf = 1.0 in the last bin. AURC: samples sorted by conf descending. "
    .. "OOD is the positive class; OOD score: " .. table.concat(st, "; ")
    .. " (higher = more OOD). AUROC exact with ties counted half; " .. fpr
    .. "; AUPR-Out = step-wise average precision with OOD positive." .. groups .. ts
    .. (with_ci and " [lo, hi] = bootstrap 95 % percentile interval." or "")
end

local BLOCK_CAPTION = {
  scores = "Every score on the same predictions; higher = more OOD; %s.",
  misclf = "Uncertainty score vs ID errors: AUROC, AUPR (step-wise average precision, "
    .. "misclassified positive), FPR95 = fraction of correct samples flagged when 95 %% of the "
    .. "errors are caught; the headline columns use the table's OOD score (%s).",
  calibration = "T = the fitted temperature (> 1 softens, < 1 sharpens); ECE, aECE in %%, "
    .. "NLL, Brier raw, before and after scaling (+TS); shift sets use the same T.%s",
}

local function load_all(results)
  local rs = {}
  for i, r in ipairs(results) do rs[i] = type(r) == "string" and M.load(r) or r end
  return rs
end

-- Builds one block of the table: columns (titles), rows = { method, n, cells = { {mean, std,
-- ci}... } }. opts.block = "main" (default) | "scores" | "misclf" | "calibration"; opts.fpr.
function M.table(results, opts)
  opts = opts or {}
  local rs = load_all(results)
  local block = opts.block or "main"
  local cols = columns_for(rs, block, opts)
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
  local cap
  if block == "main" then cap = caption(rs, with_ci, opts)
  elseif block == "scores" then
    cap = BLOCK_CAPTION.scores:format(opts.fpr == "fpr95_id"
      and "FPR95-ID = OOD accepted at 95 % ID recall" or "FPR95 = ID flagged at 95 % OOD recall")
  elseif block == "misclf" then
    local st = {}
    for _, r in ipairs(rs) do st[r.score or "msp"] = true end
    local names = {}
    for k in pairs(st) do names[#names + 1] = M.SCORE_LABELS[k] or k end
    table.sort(names)
    cap = BLOCK_CAPTION.misclf:format(table.concat(names, ", "))
  else
    cap = BLOCK_CAPTION.calibration:format("")
  end
  return { columns = cols, rows = rows, caption = cap, block = block }
end

local function fmt_cell(c, cell)
  if cell.mean == nil then return "–" end
  local f = c.fmt or "%.2f"
  local s = f:format(cell.mean)
  if cell.std then s = s .. " ± " .. f:format(cell.std) end
  if cell.ci then s = s .. " [" .. f:format(cell.ci[1]) .. ", " .. f:format(cell.ci[2]) .. "]" end
  return s
end
-- A table cell's text (mean ± std [CI]) as the Markdown and HTML tables show it.
M.fmt_cell = fmt_cell

-- A table cell's text as Markdown shows it: '|' would end the cell, and '<' '>' '&' start raw
-- HTML (a method name "<script>" stays text); control characters were already replaced.
local MD_ESCAPES = { ["\\"] = "\\\\", ["|"] = "\\|", ["<"] = "&lt;", [">"] = "&gt;",
                     ["&"] = "&amp;" }
local function md_escape(s) return (tostring(s):gsub("[\\|<>&]", MD_ESCAPES)) end
M.md_escape = md_escape

local function md_block(t)
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

-- The blocks of M.BLOCKS that have columns, as tables (opts as for M.table).
function M.tables(results, opts)
  local rs = load_all(results)
  local out = {}
  for _, b in ipairs(M.BLOCKS) do
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.block = b.name
    local t = M.table(rs, o)
    if #t.columns > 0 or b.name == "main" then
      t.heading = b.heading
      out[#out + 1] = t
    end
  end
  return out
end

-- Markdown: the main table, then each other block under its heading (opts.fpr as for M.table).
function M.markdown(results, opts)
  local parts = {}
  for _, t in ipairs(M.tables(results, opts)) do
    parts[#parts + 1] = (t.heading and ("**" .. t.heading .. "**\n\n") or "") .. md_block(t)
  end
  return table.concat(parts, "\n")
end

-- A CSV field (RFC 4180): quoted, with '"' doubled, when it holds ',', '"' or a line break.
local function csv_field(s)
  s = tostring(s)
  if s:find('[,"\r\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end
M.csv_field = csv_field

-- CSV: one row per method, the columns of every block (each metric once, by key; titles
-- without arrows); a "<title> std" column follows each metric when some method has several
-- runs; empty cells where a value is missing.
function M.csv(results, opts)
  local cols, rows, seen = {}, nil, {}
  for _, t in ipairs(M.tables(results, opts)) do
    rows = rows or {}
    for j, c in ipairs(t.columns) do
      if not seen[c.key] then
        seen[c.key] = true
        cols[#cols + 1] = c
        for i, r in ipairs(t.rows) do
          rows[i] = rows[i] or { method = r.method, n = r.n, cells = {} }
          rows[i].cells[#cols] = r.cells[j]
        end
      end
    end
  end
  rows = rows or {}
  local multi = false
  for _, r in ipairs(rows) do if r.n > 1 then multi = true end end
  local head = { "method", "runs" }
  local function clean(title) return (title:gsub(" ↑$", ""):gsub(" ↓$", "")) end
  for _, c in ipairs(cols) do
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
  for _, r in ipairs(rows) do
    local fields = { r.method, tostring(r.n) }
    for j, c in ipairs(cols) do
      local cell = r.cells[j] or {}
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
  -- "ood{a,b,c}/<metric>": the mean of "ood/<set>/<metric>" over the named sets
  local list, mk = key:match("^ood{([^}]+)}/([%w_]+)$")
  if list then
    local sum, n = 0, 0
    for name in list:gmatch("[^,]+") do
      local v = metric_of(res, "ood/" .. name .. "/" .. mk)
      if v == nil then return nil end
      sum, n = sum + v, n + 1
    end
    return n > 0 and sum / n or nil
  end
  local kind, set, k = key:match("^(%a+)/(.+)/([%w_]+)$")
  if kind == "ood" or kind == "shift" then
    for _, o in ipairs(res[kind] or {}) do
      if o.name == set then return o[k] end
    end
    return nil
  end
  local ck = key:match("^cost/([%w_]+)$")
  if ck then return res.cost and res.cost[ck] end
  local cal = key:match("^calibration/([%w_]+)$")
  if cal then
    local c = res.calibration
    if not c then return nil end
    if cal == "temperature" or cal:match("^val_") then return c[cal] end
    return c.metrics[cal]
  end
  if res.metrics[key] ~= nil then return res.metrics[key] end
  for _, pre in ipairs(SUMMARY_PREFIXES) do
    local rest = key:sub(1, #pre + 1) == pre .. "_" and key:sub(#pre + 2) or nil
    if rest then
      local mk, sc = split_metric(rest)
      if mk and sc then
        local t = res.by_score_summary and res.by_score_summary[sc]
        t = t and t[SUMMARY_FIELD[pre]]
        return t and t[mk]
      end
      return res[pre] and res[pre][rest]
    end
  end
  local base, side = key:match("^(.-)_([lh][oi])$")
  if base and res.ci and res.ci[base] and (side == "lo" or side == "hi") then
    return res.ci[base][side == "lo" and 1 or 2]
  end
  return nil
end

-- (the same for one result: hydra.paper's per-seed summaries)
M.metric_of = metric_of

-- Every metric key some result has (for the message of a key no result has).
local function metric_keys(runs)
  local set = {}
  for _, r in ipairs(runs) do
    for _, res in ipairs(r.loaded.results or {}) do
      for k in pairs(res.metrics or {}) do set[k] = true end
      for _, pre in ipairs(SUMMARY_PREFIXES) do
        for k in pairs(res[pre] or {}) do set[pre .. "_" .. k] = true end
      end
      for sc, sm in pairs(res.by_score_summary or {}) do
        for _, pre in ipairs(SUMMARY_PREFIXES) do
          for k in pairs(sm[SUMMARY_FIELD[pre]] or {}) do
            set[("%s_%s_%s"):format(pre, k, sc)] = true
          end
        end
      end
      if res.calibration then
        set["calibration/temperature"] = true
        for k in pairs(res.calibration.metrics or {}) do set["calibration/" .. k] = true end
      end
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
--                   "ood/<set>/<metric>", "shift/<set>/<metric>", "cost/<attribute>",
--                   ood_near_* / ood_far_* / ood_groups_mean_* (also with _<score>),
--                   misclf_*, "calibration/temperature" or "calibration/<metric>" (+TS)
-- Values are as stored (fractions, not percent). No matching run, or matching runs without the
-- metric: nil. Errors: an unknown method, config key or metric, and matching runs that differ
-- in a config key other than seed (the filter must name it). Display text (row labels, column
-- titles) plays no part.
function M.value(runs, filter, key)
  local vals = {}
  for _, m in ipairs(M.matching(runs, filter, key)) do
    local v = metric_of(m.res, key)
    if v ~= nil then vals[#vals + 1] = v end
  end
  return mean_std(vals)
end

-- The runs of M.value(runs, filter, key): { { run, res }... } (res = the filter's method in
-- that run), with M.value's checks and errors; hydra.verdict.compare pairs them by seed.
function M.matching(runs, filter, key)
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
  local function set_mean_known(k)
    local list, mk = tostring(k):match("^ood{([^}]+)}/([%w_]+)$")
    if not list then return false end
    for name in list:gmatch("[^,]+") do
      if not known["ood/" .. name .. "/" .. mk] then return false end
    end
    return true
  end
  if type(key) ~= "string" or not (known[key] or set_mean_known(key)) then
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
  if #matched == 0 then return matched end
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
  return matched
end

return M
