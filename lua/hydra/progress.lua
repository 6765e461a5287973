-- lua/hydra/progress.lua: the training progress display on stderr.
--   local bar = progress.new({ total = steps_per_epoch, epochs = E, stream = io.stderr,
--                              tty = nil (auto: core.isatty(2)) })
--   bar:update(p)   -- p = trainer:progress(): epoch, epoch_step, epoch_steps, loss, acc,
--                   --   samples_per_s, seconds
--   bar:finish(p, extra)   -- ends the epoch's line; extra: text appended (e.g. validation)
-- On a terminal the bar redraws one line ("\r"); otherwise (logs, pipes, CI) it prints a plain
-- line each time another ~10% of the epoch is done, and one at the end.
local core = require("hydra.core")

local M = {}

local Bar = {}
Bar.__index = Bar

function M.new(opts)
  opts = opts or {}
  local tty = opts.tty
  if tty == nil then tty = core.isatty(2) end
  return setmetatable({
    stream = opts.stream or io.stderr,
    epochs = opts.epochs or 1,
    tty = tty,
    next_pct = 10,
    width = 24,
  }, Bar)
end

local function fmt_time(s)
  if s ~= s or s == math.huge or s < 0 then return "--:--" end
  s = math.floor(s + 0.5)
  if s >= 3600 then
    return ("%d:%02d:%02d"):format(s // 3600, (s % 3600) // 60, s % 60)
  end
  return ("%02d:%02d"):format(s // 60, s % 60)
end
M.fmt_time = fmt_time

-- The text of one status line (shared by both modes).
function M.line(p, epochs)
  local eta = 0
  if p.epoch_step > 0 then
    eta = p.seconds / p.epoch_step * (p.epoch_steps - p.epoch_step)
  end
  return ("epoch %d/%d  step %d/%d  loss %.4f  acc %.2f%%  %.0f samples/s  ETA %s"):format(
    p.epoch, epochs, p.epoch_step, p.epoch_steps, p.loss, 100 * p.acc, p.samples_per_s,
    fmt_time(eta))
end

function Bar:update(p)
  if self.tty then
    local frac = p.epoch_steps > 0 and p.epoch_step / p.epoch_steps or 1
    local fill = math.floor(frac * self.width + 0.5)
    self.stream:write("\r[", ("#"):rep(fill), ("."):rep(self.width - fill), "] ",
      M.line(p, self.epochs), "\27[K")
    self.stream:flush()
  else
    local pct = p.epoch_steps > 0 and 100 * p.epoch_step / p.epoch_steps or 100
    if pct >= self.next_pct and p.epoch_step < p.epoch_steps then
      self.stream:write(M.line(p, self.epochs), "\n")
      while self.next_pct <= pct do self.next_pct = self.next_pct + 10 end
    end
  end
end

function Bar:finish(p, extra)
  local text = M.line(p, self.epochs) .. (extra and ("  " .. extra) or "")
  if self.tty then
    self.stream:write("\r", text, "\27[K\n")
  else
    self.stream:write(text, "\n")
  end
  self.stream:flush()
  self.next_pct = 10
end

-- A progress function for work counted in units (e.g. the circuit search's masked
-- evaluations): returns function(done, total) that draws "label [####....] done/total  ETA" on a
-- terminal, or prints a plain line at every further ~10% otherwise. opts: stream, tty.
function M.counter(label, opts)
  opts = opts or {}
  local tty = opts.tty
  if tty == nil then tty = core.isatty(2) end
  local stream = opts.stream or io.stderr
  local t0, next_pct, width = core.now(), 10, 24
  return function(done, total)
    local frac = total > 0 and done / total or 1
    local el = core.now() - t0
    local eta = done > 0 and fmt_time(el / done * (total - done)) or "--:--"
    local text = ("%s %d/%d  %s elapsed, ETA %s"):format(label, done, total, fmt_time(el), eta)
    if tty then
      local fill = math.floor(frac * width + 0.5)
      stream:write("\r[", ("#"):rep(fill), ("."):rep(width - fill), "] ", text, "\27[K",
        done >= total and "\n" or "")
      stream:flush()
    elseif 100 * frac >= next_pct or done >= total then
      stream:write(text, "\n")
      while next_pct <= 100 * frac do next_pct = next_pct + 10 end
    end
  end
end

return M
