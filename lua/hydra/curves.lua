-- lua/hydra/curves.lua: learning curves of training stages (base models, member fine-tuning,
-- MLM pretraining, MIMO, BatchEnsemble, Packed-Ensembles, LoRA-Ensemble).
--
-- A curve is a list of rows, one per progress sample (about 50 per epoch: the training loops'
-- progress chunks) and one closing each epoch:
--   kind   "step" | "epoch"
--   epoch  1-based; step: optimisation steps done in total
--   loss   step rows: the last batch's mean training loss; epoch rows: the epoch's mean
--   acc    epoch rows: training accuracy of the epoch (classification), else empty
--   lr, grad_norm   the last step's learning rate and gradient norm before clipping
--   val_nll, val_acc  epoch rows: the validation split's NLL and accuracy (when evaluated)
--   seconds  wall time in the epoch so far
-- Stages write their curve beside their product in the stage cache
-- (<cache>/<stage>/<key>.curves.csv); a run gathers the curves of every stage it used into
-- <run dir>/curves.csv (columns method, stage, key first), one plot per stage under
-- <run dir>/curves/ and /curves/<stage>-<key> in result.h5. `hydra train`, `hydra finetune` and
-- `hydra pretrain --out X.h5` write X.curves.csv beside the checkpoint.
--   curves.recorder() -> r;  r:step(progress);  r:epoch(progress, val_nll, val_acc);  r.rows
--   curves.csv_text(rows [, prefix_cols, prefix_vals]) -> text (header included)
--   curves.write(path, rows)             atomic CSV
--   curves.read(path) -> rows | nil      (nil when there is no such file)
--   curves.plot(rows, png, title)        gnuplot: the step rows' loss and the epoch rows' val NLL
--                                        against the step
local output = require("hydra.output")

local M = {}

M.COLUMNS = { "kind", "epoch", "step", "loss", "acc", "lr", "grad_norm", "val_nll", "val_acc",
              "seconds" }

local Recorder = {}
Recorder.__index = Recorder

function M.recorder()
  return setmetatable({ rows = {} }, Recorder)
end

function Recorder:step(p)
  self.rows[#self.rows + 1] = { kind = "step", epoch = p.epoch, step = p.step,
                                loss = p.last_loss, lr = p.lr, grad_norm = p.grad_norm,
                                seconds = p.seconds }
end

function Recorder:epoch(p, val_nll, val_acc)
  self.rows[#self.rows + 1] = { kind = "epoch", epoch = p.epoch, step = p.step, loss = p.loss,
                                acc = p.acc, lr = p.lr, grad_norm = p.grad_norm,
                                val_nll = val_nll, val_acc = val_acc, seconds = p.seconds }
end

local function cell(v)
  if v == nil then return "" end
  if math.type(v) == "integer" then return ("%d"):format(v) end
  if type(v) == "number" then
    if v ~= v then return "nan" end
    return ("%.9g"):format(v)
  end
  return tostring(v)
end

function M.csv_text(rows, prefix_cols, prefix_vals)
  local head = {}
  for _, c in ipairs(prefix_cols or {}) do head[#head + 1] = c end
  for _, c in ipairs(M.COLUMNS) do head[#head + 1] = c end
  local lines = { table.concat(head, ",") }
  for _, r in ipairs(rows) do
    local t = {}
    for _, v in ipairs(prefix_vals or {}) do t[#t + 1] = v end
    for _, c in ipairs(M.COLUMNS) do t[#t + 1] = cell(r[c]) end
    lines[#lines + 1] = table.concat(t, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The curve file of a checkpoint written by hydra train / finetune / pretrain: X.h5 ->
-- X.curves.csv.
function M.beside(ckpt)
  return (ckpt:gsub("%.h5$", "")) .. ".curves.csv"
end

function M.write(path, rows)
  output.write_text(path, M.csv_text(rows), "curves")
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local rows, cols = {}, nil
  for line in text:gmatch("[^\n]+") do
    local vals = {}
    for v in (line .. ","):gmatch("([^,]*),") do vals[#vals + 1] = v end
    if not cols then
      cols = vals
    else
      local r = {}
      for i, c in ipairs(cols) do
        local v = vals[i]
        if v ~= nil and v ~= "" then r[c] = (c == "kind") and v or (math.tointeger(tonumber(v))
          or tonumber(v)) end
      end
      rows[#rows + 1] = r
    end
  end
  return rows
end

-- Loss (every row) and validation NLL (epoch rows) against the optimisation step.
function M.plot(rows, png, title)
  local plot = require("hydra.plot")
  local steps, epochs = {}, {}
  for _, r in ipairs(rows) do
    if r.kind == "step" and r.step and r.loss then
      steps[#steps + 1] = ("%s %s"):format(cell(r.step), cell(r.loss))
    end
    if r.kind == "epoch" and r.step and r.val_nll then
      epochs[#epochs + 1] = ("%s %s"):format(cell(r.step), cell(r.val_nll))
    end
  end
  if #steps == 0 then return nil end
  local data = "# step loss\n" .. table.concat(steps, "\n") .. "\n\n\n# step val_nll\n"
    .. (#epochs > 0 and table.concat(epochs, "\n") or "0 NaN") .. "\n"
  local script = table.concat({
    "set title " .. plot.gp_str(plot.clean_label(title)),
    "set xlabel 'optimisation step'",
    "set ylabel 'loss / NLL (nats)'",
    "set grid",
    "set key outside right top",
    "plot DAT index 0 using 1:2 with lines lw 1.5 title 'training loss', \\",
    "     DAT index 1 using 1:2 with linespoints pt 7 lw 1.5 title 'validation NLL'",
  }, "\n")
  return plot.run(png, script, data).png
end

return M
