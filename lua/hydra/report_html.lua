-- lua/hydra/report_html.lua: one self-contained report.html of an experiment folder (`hydra
-- report EXPERIMENT --html`, `hydra exp ... --html`): the aggregated tables (mean ± std, the best
-- entry of each column in bold), the ablation plots, the cost table and, per run, its plots
-- (reliability, OOD histograms, risk-coverage, learning curves when the run has them), its
-- resolved config, its overrides and its provenance.
--
-- Self-contained: inline CSS, every image a data: URI of the PNG gnuplot wrote, no script, no
-- reference to any other file or host, so the page opens offline, can be mailed and printed.
-- Every text that comes from data (method names, config values, file names, attributes) is
-- escaped (M.escape): a value holding <script> shows as text.
--   report_html.escape(s) -> s with & < > " ' as entities and control characters (but \n \t)
--                            as U+FFFD
--   report_html.base64(bytes) -> RFC 4648 base64
--   report_html.write(dir [, opts]) -> path of <dir>/report/report.html (opts.out: another
--                            folder; opts.x: the ablation plots' x key, as for hydra report)
local core = require("hydra.core")
local output = require("hydra.output")
local report = require("hydra.report")
local rs = require("hydra.report_sweep")

local M = {}

function M.escape(s)
  s = tostring(s)
  s = s:gsub("[%z\1-\8\11\12\14-\31\127]", "\239\191\189")
  return (s:gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                               ['"'] = "&quot;", ["'"] = "&#39;" }))
end
local esc = M.escape

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
function M.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local d = (n >> (6 * k)) & 63
      q[#q + 1] = B64:sub(d + 1, d + 1)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

local read_file = require("hydra.fs").read_file

-- <figure> of a PNG file, or nil when it is missing or not a complete PNG.
local function figure(path, caption)
  if core.stat(path) ~= "file" or not output.png_complete(path) then return nil end
  local data = read_file(path)
  if not data then return nil end
  return ('<figure><img src="data:image/png;base64,%s" alt="%s"><figcaption>%s</figcaption>'
    .. '</figure>'):format(M.base64(data), esc(caption), esc(caption))
end

-- The direction of a column from its title's arrow: 1 higher is better, -1 lower, nil none.
local function direction(title)
  if title:find("↑", 1, true) then return 1 end
  if title:find("↓", 1, true) then return -1 end
  return nil
end

local fmt_cell = report.fmt_cell

-- One block of report.tables as an HTML table; the best mean of each column with an arrow in
-- bold (ties all bold).
local function html_table(t)
  local best = {}
  for j, c in ipairs(t.columns) do
    local d = direction(c.title)
    if d then
      for _, r in ipairs(t.rows) do
        local m = r.cells[j].mean
        if m ~= nil and m == m and (best[j] == nil or d * m > d * best[j]) then best[j] = m end
      end
    end
  end
  local h = { "<table>", "<thead><tr><th>Method</th>" }
  for _, c in ipairs(t.columns) do h[#h + 1] = "<th>" .. esc(c.title) .. "</th>" end
  h[#h + 1] = "</tr></thead><tbody>"
  for _, r in ipairs(t.rows) do
    h[#h + 1] = "<tr><th>" .. esc(r.method) .. (r.n > 1 and (" <small>(n=" .. r.n .. ")</small>")
      or "") .. "</th>"
    for j, c in ipairs(t.columns) do
      local text = esc(fmt_cell(c, r.cells[j]))
      local m = r.cells[j].mean
      if best[j] ~= nil and m == best[j] then text = "<b>" .. text .. "</b>" end
      h[#h + 1] = "<td>" .. text .. "</td>"
    end
    h[#h + 1] = "</tr>"
  end
  h[#h + 1] = "</tbody></table>"
  h[#h + 1] = "<p class=\"cap\">" .. esc(t.caption) .. "</p>"
  return table.concat(h)
end

local function cost_html(results)
  local rows = rs.cost_rows(results)
  if #rows == 0 then return nil end
  local h = { "<table><thead><tr><th>Method</th><th>Params</th><th>FLOPs / sample</th>"
    .. "<th>Members</th><th>ms / batch (batch)</th></tr></thead><tbody>" }
  for _, r in ipairs(rows) do
    h[#h + 1] = ("<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"):format(
      esc(r.method), esc(r.params), esc(r.flops), esc(r.members), esc(r.ms))
  end
  h[#h + 1] = "</tbody></table>"
  return table.concat(h)
end

local function kv_table(t)
  local keys = {}
  for k, v in pairs(t) do
    if type(v) ~= "table" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local h = { "<table class=\"kv\"><tbody>" }
  for _, k in ipairs(keys) do
    h[#h + 1] = ("<tr><th>%s</th><td>%s</td></tr>"):format(esc(k), esc(t[k]))
  end
  h[#h + 1] = "</tbody></table>"
  return table.concat(h)
end

local CSS = [[
body{font:15px/1.45 "DejaVu Sans",Helvetica,Arial,sans-serif;color:#111;margin:0 auto;
max-width:1180px;padding:16px 24px}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;border-bottom:1px solid #ccc;
padding-bottom:2px;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:13px;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
thead th{background:#f0f0f0;text-align:center}tbody th{text-align:left;background:#fafafa;
font-weight:normal}
table.kv td{text-align:left;white-space:pre-wrap;word-break:break-all}
.cap{font-size:12px;color:#444;max-width:100%}
figure{display:inline-block;margin:6px 12px 6px 0;vertical-align:top}
figure img{max-width:min(100%,560px);height:auto;border:1px solid #ddd}
figcaption{font-size:12px;color:#444;text-align:center}
pre{background:#f7f7f7;border:1px solid #ddd;padding:8px;font-size:12px;overflow-x:auto;
white-space:pre-wrap;word-break:break-all}
details{margin:.6em 0;border:1px solid #ddd;padding:4px 10px}summary{cursor:pointer;
font-weight:bold}
@media print{body{max-width:none;padding:0}details{border:none}table{display:table}
figure img{max-width:48%}h2{page-break-after:avoid}details>*{display:block}}
]]

-- The learning-curve PNGs of a run (written by training stages into <run>/curves/*.png, if any).
local function curve_figures(rdir)
  local out = {}
  if core.stat(rdir .. "/curves") ~= "dir" then return out end
  for _, name in ipairs(core.listdir(rdir .. "/curves")) do
    if name:match("%.png$") then
      local f = figure(rdir .. "/curves/" .. name, "learning curve: " .. name:gsub("%.png$", ""))
      if f then out[#out + 1] = f end
    end
  end
  return out
end

local RUN_PLOTS = { { "reliability.png", "reliability diagram" },
                    { "ood-hist.png", "OOD score histograms" },
                    { "risk-coverage.png", "risk-coverage curves" } }

function M.html(dir, opts)
  opts = opts or {}
  local runs = rs.collect(dir, opts)
  table.sort(runs, function(a, b) return a.id < b.id end)
  local results, g = rs.results(runs)
  local title = dir:match("([^/]+)/*$") or dir
  local seeds, seen = {}, {}
  for _, r in ipairs(runs) do
    local s = r.flat.seed or "0"
    if not seen[s] then seen[s] = true; seeds[#seeds + 1] = s end
  end
  table.sort(seeds)
  local h = { "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
              "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">",
              "<title>" .. esc("hydra report: " .. title) .. "</title><style>" .. CSS
                .. "</style></head><body>",
              "<h1>" .. esc(title) .. "</h1>",
              ("<p>%d complete run%s; seeds %s; %s.</p>"):format(#runs, #runs == 1 and "" or "s",
                esc(table.concat(seeds, ", ")), #g.varying > 0
                and ("varying: " .. esc(table.concat(g.varying, ", "))) or "one configuration") }
  h[#h + 1] = "<h2>Results</h2>"
  for _, t in ipairs(report.tables(results)) do
    if t.heading then h[#h + 1] = "<h3>" .. esc(t.heading) .. "</h3>" end
    h[#h + 1] = html_table(t)
  end
  local cost = cost_html(results)
  if cost then h[#h + 1] = "<h2>Cost</h2>" .. cost end
  local plots = {}
  if opts.plots ~= false then
    local pdir = (opts.out or (dir .. "/report")) .. "/plots"
    for _, p in ipairs(rs.plots(runs, pdir, { x = opts.x })) do
      local f = figure(p, (p:match("([^/]+)%.png$") or p))
      if f then plots[#plots + 1] = f end
    end
  end
  if #plots > 0 then h[#h + 1] = "<h2>Ablation plots</h2>" .. table.concat(plots) end
  h[#h + 1] = "<h2>Runs</h2>"
  for _, r in ipairs(runs) do
    local label = {}
    for _, k in ipairs(g.varying) do label[#label + 1] = k .. "=" .. tostring(r.flat[k]) end
    h[#h + 1] = ("<details%s><summary>run %s%s</summary>"):format(#runs == 1 and " open" or "",
      esc(r.id), #label > 0 and (": " .. esc(table.concat(label, " "))) or "")
    local figs = {}
    for _, p in ipairs(RUN_PLOTS) do
      local f = figure(r.dir .. "/plots/" .. p[1], p[2])
      if f then figs[#figs + 1] = f end
    end
    for _, f in ipairs(curve_figures(r.dir)) do figs[#figs + 1] = f end
    if #figs > 0 then h[#h + 1] = table.concat(figs) end
    local ov = read_file(r.dir .. "/overrides.yaml")
    if ov then h[#h + 1] = "<h3>Overrides</h3><pre>" .. esc(ov) .. "</pre>" end
    h[#h + 1] = "<h3>Provenance</h3>" .. kv_table(r.loaded.provenance or {})
    h[#h + 1] = "<h3>Resolved config</h3><pre>" .. esc(r.loaded.config_yaml or "") .. "</pre>"
    h[#h + 1] = "</details>"
  end
  h[#h + 1] = ("<p class=\"cap\">hydra %s; written by hydra report --html.</p>")
    :format(esc(core.version))
  h[#h + 1] = "</body></html>"
  return table.concat(h, "\n") .. "\n"
end

function M.write(dir, opts)
  opts = opts or {}
  local outdir = opts.out or (dir .. "/report")
  output.mkdir_p(outdir, "report")
  local path = outdir .. "/report.html"
  output.write_text(path, M.html(dir, opts), "report")
  return path
end

return M
