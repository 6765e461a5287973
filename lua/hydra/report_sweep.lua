-- lua/hydra/report_sweep.lua: the report of an experiment folder (results/<experiment>/), i.e.
-- of every complete run in it (a sweep's points, repeated seeds), built on hydra.report.
--
--   rs.collect(dir [, opts])  -> runs     every complete run (dir/<run-id>/result.h5) in run-id
--                                         order; opts.ids (list of run-ids) keeps only those.
--                                         run = { id, dir, flat = { [dotted key] = text },
--                                                 keys (dotted keys in defaults order), loaded }
--   rs.group(runs)            -> { varying = { key... }, groups = { { label, values, runs } } }
--                                         varying: the config keys whose values differ between
--                                         runs, ignoring seed, threads, results_dir, experiment
--                                         and sweep.*; a group = the runs equal on every other
--                                         key (so its runs differ only by seed)
--   rs.results(runs)          -> list of hydra.report result tables, one per (run, method),
--                                         method relabelled "<method> (k=v, ...)" with the
--                                         group's varying values, so hydra.report.table gives
--                                         one row per (method, group), mean ± std over seeds
--   rs.markdown(runs) / rs.csv(runs) -> text
--   rs.plots(runs, outdir [, opts]) -> { png... }   one plot per metric against the x key
--                                         (opts.x, else the numeric varying key with the most
--                                         values, else the first varying key, categorical):
--                                         mean ± std over seeds, one series per method (and
--                                         per value of the other varying keys)
--   rs.write(dir [, opts])    -> { markdown, csv, plots = {...}, runs = n, circuits = {...} }
--                                         writes dir/report/table.md, table.csv, plots/ and,
--                                         where runs carry Hydra (Circ) diagnostics,
--                                         circuits_<method>.md (hydra.diagnostics.study)
--                                         (opts.out: another folder; opts.ids; opts.x;
--                                         opts.plots = false: no plots)
--   rs.ids_of(sweep)          -> the run-ids of a loaded sweep's points
local config = require("hydra.config")
local core = require("hydra.core")
local err = require("hydra.err")
local output = require("hydra.output")
local report = require("hydra.report")
local strings = require("hydra.strings")

local M = {}

-- Config keys that never tell runs apart in a report.
M.IGNORED = { seed = true, threads = true, results_dir = true, experiment = true }

local function ignored(key)
  return M.IGNORED[key] or key:match("^sweep%.") ~= nil
end

local value_text = require("hydra.yaml").flow

-- Flattens a parsed YAML map (value v, positions p) into ordered dotted keys.
local function flatten(v, p, prefix, flat, keys)
  for _, k in ipairs(p.order or {}) do
    local key = prefix == "" and k or (prefix .. "." .. k)
    local sub = p.sub[k]
    if sub.kind == "map" then
      flatten(v[k], sub, key, flat, keys)
    else
      flat[key] = value_text(v[k])
      keys[#keys + 1] = key
    end
  end
end

-- A stored config (parsed YAML value v, positions p) as dotted keys: flat = { [key] = value
-- text }, keys in order. An id_neutral key the config lacks (written before the key existed)
-- gets its default (config.neutral_defaults), so a run made before `precision` existed and one
-- made after at fp32 compare equal.
function M.flat_config(v, p)
  local flat, keys = {}, {}
  if p.kind == "map" then flatten(v, p, "", flat, keys) end
  for _, d in ipairs(require("hydra.config").neutral_defaults()) do
    if flat[d.path] == nil then
      flat[d.path] = value_text(d.value)
      keys[#keys + 1] = d.path
    end
  end
  return flat, keys
end

function M.collect(dir, opts)
  opts = opts or {}
  if core.stat(dir) ~= "dir" then
    err.fail("report: no experiment folder '%s' (run the experiment or sweep first)", dir)
  end
  local want
  if opts.ids then
    want = {}
    for _, id in ipairs(opts.ids) do want[id] = true end
  end
  local run = require("hydra.run")
  local runs = {}
  for _, name in ipairs(core.listdir(dir)) do
    local rdir = dir .. "/" .. name
    if (not want or want[name]) and core.stat(rdir .. "/result.h5") == "file" then
      local loaded = run.load(rdir .. "/result.h5")
      local ok, v, p = pcall(core.yaml_parse, loaded.config_yaml or "", rdir .. "/result.h5")
      if not ok then
        err.fail("report: '%s/result.h5' holds an unreadable config: %s", rdir, err.message(v))
      end
      local flat, keys = M.flat_config(v, p)
      runs[#runs + 1] = { id = loaded.id or name, dir = rdir, flat = flat, keys = keys,
                          loaded = loaded }
    end
  end
  if #runs == 0 then
    err.fail("report: no complete run in '%s' (a run is complete when its result.h5 exists)",
      dir)
  end
  return runs
end

local function numeric(text)
  return tonumber(text) ~= nil and not text:find("^'")
end

-- Compares two value texts: numbers numerically, else as text.
local function less(a, b)
  local na, nb = tonumber(a), tonumber(b)
  if na and nb then return na < nb end
  if na then return true end
  if nb then return false end
  return a < b
end

function M.group(runs)
  local keys, seen = {}, {}
  for _, r in ipairs(runs) do
    for _, k in ipairs(r.keys) do
      if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  local varying = {}
  for _, k in ipairs(keys) do
    if not ignored(k) then
      local first, differs = runs[1].flat[k], false
      for _, r in ipairs(runs) do
        if r.flat[k] ~= first then differs = true end
      end
      if differs then varying[#varying + 1] = k end
    end
  end
  local groups, by = {}, {}
  for _, r in ipairs(runs) do
    local vals, parts = {}, {}
    for i, k in ipairs(varying) do
      vals[i] = r.flat[k] or "~"
      parts[i] = k .. "=" .. vals[i]
    end
    local label = table.concat(parts, ", ")
    local g = by[label]
    if not g then
      g = { label = label, values = vals, runs = {} }
      by[label] = g
      groups[#groups + 1] = g
    end
    g.runs[#g.runs + 1] = r
    r.group = g
  end
  table.sort(groups, function(a, b)
    for i = 1, #varying do
      if a.values[i] ~= b.values[i] then return less(a.values[i], b.values[i]) end
    end
    return false
  end)
  return { varying = varying, groups = groups }
end

local function shallow(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

function M.results(runs)
  local g = M.group(runs)
  local methods, mseen = {}, {}
  for _, r in ipairs(runs) do
    for _, res in ipairs(r.loaded.results or {}) do
      if not mseen[res.method] then mseen[res.method] = true; methods[#methods + 1] = res.method end
    end
  end
  local out = {}
  for _, m in ipairs(methods) do
    for _, grp in ipairs(g.groups) do
      for _, r in ipairs(grp.runs) do
        for _, res in ipairs(r.loaded.results or {}) do
          if res.method == m then
            local c = shallow(res)
            c.base_method = m
            c.group = grp
            if grp.label ~= "" then c.method = ("%s (%s)"):format(m, grp.label) end
            out[#out + 1] = c
          end
        end
      end
    end
  end
  return out, g
end

local function seeds_of(runs)
  local s, seen = {}, {}
  for _, r in ipairs(runs) do
    local v = r.flat.seed or "0"
    if not seen[v] then seen[v] = true; s[#s + 1] = v end
  end
  table.sort(s, less)
  return s
end

-- The cost rows (result.h5 /methods/<m>/cost, run.lua), one per method (its first result), as
-- text cells: method, params, flops, flops_padded (text runs), members, ms (ms / batch (batch)).
function M.cost_rows(results)
  local rows, seen = {}, {}
  local function mflops(v) return v and ("%.1f M"):format(v / 1e6) or "–" end
  for _, r in ipairs(results) do
    local c = r.cost
    if c and not seen[r.method] then
      seen[r.method] = true
      rows[#rows + 1] = {
        method = r.method, params = c.params and ("%.3f M"):format(c.params / 1e6) or "–",
        flops = mflops(c.flops), flops_padded = c.flops_padded and mflops(c.flops_padded),
        members = c.members and tostring(c.members) or "–",
        ms = c.infer_ms_per_batch and ("%.2f (%s)"):format(c.infer_ms_per_batch,
          tostring(c.batch_size or "?")) or "–" }
    end
  end
  return rows
end

-- The cost table's Markdown lines with their caption: "FLOPs / sample" is the attribute flops,
-- "FLOPs / sample (padded)" flops_padded (text runs only).
local function cost_table(results)
  local lines, padded = {}, false
  local rows = M.cost_rows(results)
  for _, r in ipairs(rows) do
    if r.flops_padded then padded = true end
  end
  for _, r in ipairs(rows) do
    if #lines == 0 then
      lines[1] = "| Method | Params | FLOPs / sample |"
        .. (padded and " FLOPs / sample (padded) |" or "") .. " Members | ms / batch (batch) |"
      lines[2] = "|---|---:|---:|" .. (padded and "---:|" or "") .. "---:|---:|"
    end
    lines[#lines + 1] = ("| %s | %s | %s |%s %s | %s |"):format(report.md_escape(r.method),
      r.params, r.flops,
      padded and (" %s |"):format(r.flops_padded or "–") or "", r.members, r.ms)
  end
  if #lines > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "*Params: stored parameters (pruned heads not counted). FLOPs / sample: "
      .. "forward FLOPs (2 x multiply-adds; LayerNorm, GELU, softmax not counted) of every "
      .. "member / MC sample, the mean over the ID test set of each sample's exact cost at its "
      .. "own length (text: 1 + its tokens, CLS included; images: fixed)."
      .. (padded and " FLOPs / sample (padded): the same mean at the length the engine "
        .. "executes, each batch of train.eval_batch_size padded to its longest sentence." or "")
      .. " ms / batch: median of 5 timed passes over one batch of ID test samples.*"
  end
  return lines
end

function M.markdown(runs, title)
  local results, g = M.results(runs)
  local seeds = seeds_of(runs)
  local head = {
    "# " .. (title or "report"),
    "",
    ("%d complete run%s; seeds %s; %s."):format(#runs, #runs == 1 and "" or "s",
      table.concat(seeds, ", "), #g.varying > 0 and ("varying: " .. table.concat(g.varying, ", "))
      or "one configuration"),
    "",
  }
  local text = table.concat(head, "\n") .. "\n" .. report.markdown(results)
  local cost = cost_table(results)
  if #cost > 0 then
    text = text .. "\n## Cost\n\n" .. table.concat(cost, "\n") .. "\n"
  end
  return text
end

function M.csv(runs)
  local results = M.results(runs)
  return report.csv(results)
end

-- ===== plots =====

M.PLOT_METRICS = {
  { key = "acc", title = "accuracy (%)", get = function(r) return r.metrics.acc end, pct = true },
  { key = "ece", title = "ECE (%)", get = function(r) return r.metrics.ece end, pct = true },
  { key = "nll", title = "NLL (nats)", get = function(r) return r.metrics.nll end },
  { key = "auroc", title = "OOD avg AUROC (%)",
    get = function(r) return r.ood_avg and r.ood_avg.auroc end, pct = true },
  { key = "fpr95", title = "OOD avg FPR95 (%)",
    get = function(r) return r.ood_avg and r.ood_avg.fpr95 end, pct = true },
  { key = "groups_auroc", title = "OOD groups-mean AUROC (%)",
    get = function(r) return r.ood_near and r.ood_near.auroc and r.ood_far and r.ood_far.auroc
      and r.ood_groups_mean.auroc end, pct = true },
  { key = "ece_ts", title = "ECE after temperature scaling (%)",
    get = function(r) return r.calibration and r.calibration.metrics.ece end, pct = true },
}

local function mean_std(vals)
  local n = #vals
  local s = 0
  for _, v in ipairs(vals) do s = s + v end
  local mean = s / n
  local q = 0
  for _, v in ipairs(vals) do q = q + (v - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(q / (n - 1)) or 0
end

-- The gnuplot key (legend) line for series titles: outside on the right, or below the plot when
-- a title is long (e.g. several varying keys), which would otherwise squeeze the plot area to
-- a sliver.
M.KEY_RIGHT_MAX = 32
function M.key_layout(names)
  local longest = 0
  for _, n in ipairs(names) do longest = math.max(longest, utf8.len(n) or #n) end
  if longest > M.KEY_RIGHT_MAX then return "set key below Left reverse" end
  return "set key outside right top"
end

function M.plots(runs, outdir, opts)
  opts = opts or {}
  local results, g = M.results(runs)
  if #g.varying == 0 then return {} end
  local x = opts.x
  if x then
    local found = false
    for _, k in ipairs(g.varying) do if k == x then found = true end end
    if not found then
      err.fail("report: --x %s is not a key that varies between the runs (varying: %s)", x,
        table.concat(g.varying, ", "))
    end
  else
    local best, bestn = nil, 0
    for i, k in ipairs(g.varying) do
      local vals, n, allnum = {}, 0, true
      for _, grp in ipairs(g.groups) do
        local t = grp.values[i]
        if not numeric(t) then allnum = false end
        if not vals[t] then vals[t] = true; n = n + 1 end
      end
      if allnum and n > bestn then best, bestn = k, n end
    end
    x = best or g.varying[1]
  end
  local xi
  for i, k in ipairs(g.varying) do if k == x then xi = i end end
  -- x values and whether the axis is numeric
  local xs, xseen, allnum = {}, {}, true
  for _, grp in ipairs(g.groups) do
    local t = grp.values[xi]
    if not xseen[t] then xseen[t] = true; xs[#xs + 1] = t end
    if not numeric(t) then allnum = false end
  end
  table.sort(xs, less)
  local xpos = {}
  for i, t in ipairs(xs) do xpos[t] = allnum and tonumber(t) or (i - 1) end
  -- series: base method + the other varying values
  local series, sby = {}, {}
  for _, r in ipairs(results) do
    local others = {}
    for i, k in ipairs(g.varying) do
      if i ~= xi then others[#others + 1] = k .. "=" .. r.group.values[i] end
    end
    -- a label: control characters (a string value of a grid) become spaces
    local name = strings.printable(r.base_method .. (#others > 0
      and (" (" .. table.concat(others, ", ") .. ")") or ""))
    local s = sby[name]
    if not s then
      s = { name = name, at = {}, order = {} }
      sby[name] = s
      series[#series + 1] = s
    end
    local xv = r.group.values[xi]
    if not s.at[xv] then s.at[xv] = {}; s.order[#s.order + 1] = xv end
    table.insert(s.at[xv], r)
  end
  output.mkdir_p(outdir, "report")
  local plot = require("hydra.plot")
  local gp_str = plot.gp_str
  local out = {}
  local safe_x = x:gsub("[^%w_%-]", "_")
  local names = {}
  for i, s in ipairs(series) do names[i] = s.name end
  local key_line = M.key_layout(names)
  for _, m in ipairs(M.PLOT_METRICS) do
    local blocks, cmds, any = {}, {}, false
    for si, s in ipairs(series) do
      table.sort(s.order, less)
      local lines = { ("# %s: %s mean std n"):format(s.name, x) }
      for _, xv in ipairs(s.order) do
        local vals = {}
        for _, r in ipairs(s.at[xv]) do
          local v = m.get(r)
          if v then vals[#vals + 1] = m.pct and v * 100 or v end
        end
        if #vals > 0 then
          any = true
          local mean, std = mean_std(vals)
          local off = allnum and 0 or (si - (#series + 1) / 2) * 0.08
          lines[#lines + 1] = ("%.17g %.17g %.17g %d"):format(xpos[xv] + off, mean, std, #vals)
        end
      end
      blocks[#blocks + 1] = table.concat(lines, "\n")
      cmds[#cmds + 1] = ("DAT index %d using 1:2:3 with %s lc %d lw 2 pt 7 ps 0.9 title %s")
        :format(si - 1, allnum and "yerrorlines" or "yerrorbars", si, gp_str(s.name))
    end
    if any then
      local script = {
        ("set title %s"):format(gp_str(("%s vs %s (mean ± std over seeds)"):format(m.title,
          strings.printable(x)))),
        ("set xlabel %s"):format(gp_str(strings.printable(x))),
        ("set ylabel %s"):format(gp_str(m.title)),
        "set grid", key_line, "set offsets graph 0.05, graph 0.05, 0, 0",
      }
      if not allnum then
        local tics = {}
        for i, t in ipairs(xs) do
          tics[i] = ("%s %d"):format(gp_str(strings.printable(t)), i - 1)
        end
        script[#script + 1] = "set xtics (" .. table.concat(tics, ", ") .. ")"
        script[#script + 1] = ("set xrange [-0.5:%g]"):format(#xs - 0.5)
      elseif #xs > 0 then
        local tics = {}
        -- numbers written by us, never the value's text (tonumber accepts surrounding spaces)
        for _, t in ipairs(xs) do tics[#tics + 1] = ("%.17g"):format(tonumber(t)) end
        script[#script + 1] = "set xtics (" .. table.concat(tics, ", ") .. ")"
      end
      script[#script + 1] = "plot " .. table.concat(cmds, ", \\\n     ")
      local png = ("%s/%s-vs-%s.png"):format(outdir, m.key, safe_x)
      plot.run(png, table.concat(script, "\n"), table.concat(blocks, "\n\n\n") .. "\n")
      out[#out + 1] = png
    end
  end
  return out
end

-- ===== writing =====

function M.write(dir, opts)
  opts = opts or {}
  local runs = M.collect(dir, opts)
  local outdir = opts.out or (dir .. "/report")
  output.mkdir_p(outdir, "report")
  local title = (dir:match("([^/]+)/*$") or dir)
  local md, csv = outdir .. "/table.md", outdir .. "/table.csv"
  report.write_text(md, M.markdown(runs, title))
  report.write_text(csv, M.csv(runs))
  local plots = {}
  if opts.plots ~= false then plots = M.plots(runs, outdir .. "/plots", { x = opts.x }) end
  -- the circuit study over seeds, where the runs carry Hydra (Circ) diagnostics
  local diagnostics, circuits = require("hydra.diagnostics"), {}
  for _, method in ipairs(diagnostics.STUDIED) do
    local rows, summary = diagnostics.study(runs, method)
    if #rows > 0 then
      local path = ("%s/circuits_%s.md"):format(outdir, method)
      report.write_text(path, diagnostics.markdown(rows, summary, method))
      circuits[#circuits + 1] = path
    end
  end
  return { markdown = md, csv = csv, plots = plots, runs = #runs, circuits = circuits }
end

function M.ids_of(sw)
  local ids = {}
  for i, pt in ipairs(sw.points) do ids[i] = pt.id end
  return ids
end

-- The experiment folder of a name: <results_dir>/<name> (results_dir from the defaults), or
-- the name itself when it is a folder path.
function M.dir_of(name)
  if name:find("/", 1, true) or name == "." or name == ".." then return (name:gsub("/+$", "")) end
  local under = config.defaults().results_dir .. "/" .. name
  if core.stat(under) ~= "dir" and core.stat(name) == "dir" then return name end
  return under
end

return M
