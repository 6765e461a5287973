-- lua/hydra/plot.lua: gnuplot plots of result files (RESULT.h5 of `hydra eval`).
--   plot.reliability(paths, out)           reliability diagram (acc vs conf per bin) + bin counts
--   plot.ood_hist(paths, out [, opts])      score histograms, ID vs each OOD set, one panel per
--                                          result (opts.score: default the result's score;
--                                          opts.bins: 30)
--   plot.risk_coverage(paths, out [, opts]) risk-coverage curves overlaid (opts.points: 200)
--   plot.run(out, script, data)            the runner: writes <base>.dat and <base>.gp beside
--                                          out (<base> = out without .png) and runs gnuplot
--   plot.gp_str(s)                         s as a gnuplot string literal; the only way text
--                                          enters a script (here and in hydra.report_sweep)
-- Text in a script is inert: every string (titles, labels, legends, paths, the rerun comment)
-- goes through gp_str, a single-quoted gnuplot string (no backslash or backquote processing;
-- ' doubled), and a control character in it is an error, because a newline would end the
-- string and start a gnuplot command (`system("...")` runs a shell). Labels read from files
-- (method, dataset, score, set names) have their control characters replaced by spaces first
-- (hydra.strings.printable); paths are refused.
-- Several results are overlaid (one colour each); every plot keeps its .dat/.gp so it can be
-- rerun or restyled by hand. The terminal is pngcairo, or png when cairo is missing.
local core = require("hydra.core")
local err = require("hydra.err")
local fs = require("hydra.fs")
local h5 = require("hydra.h5")
local metrics = require("hydra.metrics")
local output = require("hydra.output")
local strings = require("hydra.strings")

local M = {}

-- most histogram bins of ood_hist (opts.bins); more only costs memory, never shows
M.MAX_BINS = 10000

local shell_quote = require("hydra.fs").shell_quote
-- s as a gnuplot single-quoted string. Gnuplot processes neither backslashes nor backquotes in
-- single quotes and reads '' as one quote, so only a line break could escape the string: every
-- control character is refused (err.fail naming the text).
function M.gp_str(s)
  s = tostring(s)
  local at = s:find("%c")
  if at then
    err.fail("plot: the text '%s' contains a control character (byte 0x%02x), which cannot go "
      .. "into a gnuplot script", strings.escape_controls(s), s:byte(at))
  end
  return "'" .. s:gsub("'", "''") .. "'"
end
local gp_str = M.gp_str

-- A label read from a file, safe for a script and a data-file comment.
M.clean_label = strings.printable

local terminal_cache
-- "pngcairo" when this gnuplot has it, else "png"; raises a user error without gnuplot.
function M.terminal()
  if terminal_cache then return terminal_cache end
  local p = io.popen("gnuplot -e 'set terminal' 2>&1 </dev/null")
  local text = p and p:read("a") or ""
  local ok, _, code = true, nil, 0
  if p then ok, _, code = p:close() end
  if not ok or code ~= 0 then
    err.fail("plot: cannot run gnuplot (install gnuplot-nox): %s", (text:gsub("%s+$", "")))
  end
  if text:find("pngcairo", 1, true) then terminal_cache = "pngcairo"
  elseif text:find("%f[%w]png%f[%W]") then terminal_cache = "png"
  else err.fail("plot: this gnuplot has neither the pngcairo nor the png terminal") end
  return terminal_cache
end

local function write_file(path, text) output.write_text(path, text, "plot") end


-- Writes data to <base>.dat and the script to <base>.gp (the script refers to the data file as
-- DAT), then runs gnuplot. Returns the paths { png, dat, gp }. Every file is written atomically:
-- .dat and .gp through hydra.output, the image by gnuplot to a temporary name (the script's OUT,
-- given with -e; run by hand it is the real name), checked complete (IEND) and renamed.
function M.run(out, script, data)
  if not out:match("%.png$") then err.fail("plot: --out must end in .png (got '%s')", out) end
  if out:find("%c") then
    err.fail("plot: cannot write '%s': the name contains a control character",
      strings.escape_controls(out))
  end
  local base = out:gsub("%.png$", "")
  local dir = output.split(out)
  if core.stat(dir) ~= "dir" then
    err.fail("plot: cannot write '%s': folder '%s' does not exist", out, dir)
  end
  local dat, gp = base .. ".dat", base .. ".gp"
  local term = M.terminal()
  local head = {
    "# written by hydra " .. core.version .. "; rerun with: gnuplot " .. gp_str(gp),
    term == "pngcairo" and "set terminal pngcairo size 900,700 noenhanced font 'DejaVu Sans,10'"
      or "set terminal png size 900,700 noenhanced",
    "if (!exists(\"OUT\")) OUT = " .. gp_str(out),
    "set output OUT",
    "DAT = " .. gp_str(dat),
  }
  local tmp = output.temp_name(out)
  local define = "OUT = " .. gp_str(tmp)
  write_file(dat, data)
  write_file(gp, table.concat(head, "\n") .. "\n" .. script .. "\nunset output\n")
  local errf = os.tmpname()
  local ok, _, code = os.execute(("gnuplot -e %s %s 2>%s </dev/null"):format(shell_quote(define),
    shell_quote(gp), shell_quote(errf)))
  local msg = (fs.read_file(errf) or ""):gsub("%s+$", "")
  os.remove(errf)
  if not ok or code ~= 0 then
    os.remove(tmp)
    err.fail("plot: gnuplot failed on '%s' (exit status %s); rerun it with: gnuplot %s%s", gp,
      tostring(code), gp, msg ~= "" and ("\n" .. msg) or "")
  end
  local complete, why = output.png_complete(tmp)
  if not complete then
    os.remove(tmp)
    local cause = output.space_problem(dir)
    err.fail("plot: cannot write '%s': %s (gnuplot's image was %s; script '%s')", out,
      cause or "the image is incomplete", why, gp)
  end
  output.rename(tmp, out, "plot")
  return { png = out, dat = dat, gp = gp }
end

-- ===== reading results =====

local function open_result(path)
  if not core.stat(path) then err.fail("plot: cannot open '%s': no such file", path) end
  local g = err.wrap("plot", h5.open, path)
  local root = g:attrs("/")
  if root.format == nil or not tostring(root.format):match("^hydra%-result%-") then
    g:close()
    err.fail("plot: '%s' is not a hydra result file (no 'format' attribute on /)", path)
  end
  return g, root
end

local function label_of(root, path)
  return strings.printable(root.method or (path:match("([^/]+)$") or path):gsub("%.h5$", ""))
end

local function need(g, path, name, dtype)
  if not g:exists(name) then err.fail("plot: '%s' has no %s", path, name) end
  return g:read(name, dtype)
end

local split_list = fs.split_list

local function check_paths(paths)
  if #paths == 0 then err.usage("plot: no result files given") end
end

-- ===== reliability =====

function M.reliability(paths, out)
  check_paths(paths)
  local blocks, plots_top, plots_bot = {}, {}, {}
  local n = #paths
  local width = 1 / metrics.BINS
  for i, path in ipairs(paths) do
    local g <close>, root = open_result(path)
    local cnt = need(g, path, "/id/reliability/count", "int64")
    local acc = need(g, path, "/id/reliability/acc", "float64")
    local conf = need(g, path, "/id/reliability/conf", "float64")
    local m = g:attrs("/metrics")
    local lines = { ("# %s: bin_lo bin_hi bin_center acc mean_conf count count_x"):format(
      label_of(root, path)) }
    for b = 1, cnt:size(1) do
      local lo = (b - 1) * width
      local c = cnt:get(b)
      -- empty bins: acc/conf are undefined, written as NaN so gnuplot skips them
      local a = c > 0 and ("%.17g"):format(acc:get(b)) or "NaN"
      local mc = c > 0 and ("%.17g"):format(conf:get(b)) or "NaN"
      local cx = lo + (i - 0.5) * width / n
      lines[#lines + 1] = ("%.17g %.17g %.17g %s %s %d %.17g"):format(lo, lo + width,
        lo + width / 2, a, mc, c, cx)
    end
    blocks[#blocks + 1] = table.concat(lines, "\n")
    local title = label_of(root, path)
    if m.ece then title = ("%s (ECE %.2f%%)"):format(title, m.ece * 100) end
    plots_top[#plots_top + 1] = ("DAT index %d using 5:4 with linespoints lc %d lw 2 pt 7 "
      .. "ps 0.8 title %s"):format(i - 1, i, gp_str(title))
    plots_bot[#plots_bot + 1] = ("DAT index %d using 7:6 with boxes lc %d fs solid 0.6 title %s")
      :format(i - 1, i, gp_str(label_of(root, path)))
  end
  local script = table.concat({
    "set multiplot",
    "set size 1,0.68", "set origin 0,0.32",
    "set title 'Reliability diagram (15 equal-width bins on conf = max p̄)'",
    "set xrange [0:1]", "set yrange [0:1]", "set grid",
    "set ylabel 'accuracy in bin'", "set format x ''", "set key left top",
    "plot x with lines dt 2 lc rgb 'gray40' title 'perfect calibration', \\",
    "     " .. table.concat(plots_top, ", \\\n     "),
    "set size 1,0.32", "set origin 0,0", "unset title",
    "set format x '%g'", "set xlabel 'confidence (max p̄)'", "set ylabel 'samples in bin'",
    "set autoscale y", "set yrange [0:*]",
    "set boxwidth " .. ("%.17g"):format(width / n * 0.9) .. " absolute",
    "set key off",
    "plot " .. table.concat(plots_bot, ", \\\n     "),
    "unset multiplot",
  }, "\n")
  return M.run(out, script, table.concat(blocks, "\n\n\n") .. "\n")
end

-- ===== OOD score histograms =====

function M.ood_hist(paths, out, opts)
  check_paths(paths)
  opts = opts or {}
  local bins = opts.bins or 30
  if math.type(bins) ~= "integer" or bins < 1 or bins > M.MAX_BINS then
    err.fail("plot: bins must be an integer in [1, %d] (got %s)", M.MAX_BINS, tostring(bins))
  end
  -- read every score array first: the histogram range is common to all panels
  local panels = {}
  local lo, hi
  for _, path in ipairs(paths) do
    local g <close>, root = open_result(path)
    local score = strings.printable(opts.score or root.score or "msp")
    local sets = { { name = "ID", data = "/id/scores/" .. score } }
    for _, name in ipairs(split_list(root.ood_sets)) do
      sets[#sets + 1] = { name = strings.printable(name),
                          data = "/ood/" .. name .. "/scores/" .. score }
    end
    if #sets == 1 then err.fail("plot: '%s' has no OOD sets (run hydra eval with --ood)", path) end
    for _, s in ipairs(sets) do
      if not g:exists(s.data) then
        err.fail("plot: '%s' has no %s (score '%s' unavailable%s)", path, s.data, score,
          root.unavailable and root.unavailable ~= "" and (": " .. root.unavailable) or "")
      end
      s.x = g:read(s.data, "float64")
      local a, b = metrics.range(s.x)
      if a then
        lo = lo and math.min(lo, a) or a
        hi = hi and math.max(hi, b) or b
      end
    end
    panels[#panels + 1] = { label = label_of(root, path), score = score, sets = sets }
  end
  if not lo then err.fail("plot: no finite scores to plot") end
  if hi <= lo then lo, hi = lo - 0.5, hi + 0.5 end
  local w = (hi - lo) / bins
  local blocks, idx = {}, 0
  local script = { ("set multiplot layout %d,1"):format(#panels), "set grid", "set key top right",
                   "set ylabel 'fraction of set'", "set style fill transparent solid 0.35" }
  for _, p in ipairs(panels) do
    local plots = {}
    for _, s in ipairs(p.sets) do
      local cnt = metrics.histogram(s.x, lo, hi, bins)
      local n = s.x:size(1)
      local lines = { ("# %s / %s (%s score, n = %d): bin_center fraction count"):format(
        p.label, s.name, p.score, n) }
      for b = 1, bins do
        local c = cnt:get(b)
        lines[#lines + 1] = ("%.17g %.17g %d"):format(lo + (b - 0.5) * w, n > 0 and c / n or 0, c)
      end
      blocks[#blocks + 1] = table.concat(lines, "\n")
      plots[#plots + 1] = ("DAT index %d using 1:2 with boxes title %s"):format(idx,
        gp_str(("%s (n=%d)"):format(s.name, n)))
      idx = idx + 1
    end
    script[#script + 1] = "set title " .. gp_str(("%s: %s score (higher = more OOD)"):format(
      p.label, p.score))
    script[#script + 1] = "set xlabel " .. gp_str(p.score .. " score")
    script[#script + 1] = ("set boxwidth %.17g absolute"):format(w)
    script[#script + 1] = "plot " .. table.concat(plots, ", \\\n     ")
  end
  script[#script + 1] = "unset multiplot"
  return M.run(out, table.concat(script, "\n"), table.concat(blocks, "\n\n\n") .. "\n")
end

-- ===== risk-coverage =====

function M.risk_coverage(paths, out, opts)
  check_paths(paths)
  opts = opts or {}
  local points = opts.points or 200
  local blocks, plots = {}, {}
  for i, path in ipairs(paths) do
    local g <close>, root = open_result(path)
    local conf = need(g, path, "/id/conf", "float64")
    local correct = need(g, path, "/id/correct", "uint8")
    local m = g:attrs("/metrics")
    local np = math.min(points, conf:size(1))
    local cov, risk = metrics.risk_coverage(conf, correct, np)
    local label = label_of(root, path)
    local lines = { ("# %s: coverage risk (conf descending, ties by index)"):format(label) }
    for j = 1, np do lines[#lines + 1] = ("%.17g %.17g"):format(cov:get(j), risk:get(j)) end
    blocks[#blocks + 1] = table.concat(lines, "\n")
    local title = m.aurc and ("%s (AURC %.2f%%)"):format(label, m.aurc * 100) or label
    plots[#plots + 1] = ("DAT index %d using 1:2 with lines lw 2 title %s"):format(i - 1,
      gp_str(title))
  end
  local script = table.concat({
    "set title 'Risk-coverage (samples sorted by conf = max p̄, descending)'",
    "set xlabel 'coverage'", "set ylabel 'selective risk (error rate)'", "set grid",
    "set xrange [0:1]", "set yrange [0:*]", "set key left top",
    "plot " .. table.concat(plots, ", \\\n     "),
  }, "\n")
  return M.run(out, script, table.concat(blocks, "\n\n\n") .. "\n")
end

return M
