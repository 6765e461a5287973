-- hydra eval: prediction files -> metrics (RESULT.h5, optional JSON / Markdown / CSV table).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra eval --id PREDS.h5 [--near NAME=PREDS.h5 ...] [--ood NAME=PREDS.h5 ...] "
  .. "[--shift NAME=PREDS.h5 ...] [--calib VAL_PREDS.h5] "
  .. "[--score msp|maxlogit|entropy|mi|energy|disagreement] [--bootstrap B] [--seed S] "
  .. "--out RESULT.h5 [--json METRICS.json] [--md TABLE.md] [--csv TABLE.csv] "
  .. "[--fpr fpr95|fpr95_id]"

-- the same bound as the config key eval.bootstrap (lua/hydra/config_schema.lua)
local MAX_BOOTSTRAP = require("hydra.config_schema")["eval.bootstrap"].le

local function pairs_of(list, opt, group, out)
  out = out or {}
  for _, v in ipairs(list or {}) do
    local name, path = v:match("^([^=]+)=(.+)$")
    if not name then err.usage("hydra eval: --%s expects NAME=PREDS.h5, got '%s'", opt, v) end
    out[#out + 1] = { name = name, path = path, group = group }
  end
  return out
end

return {
  summary = "compute accuracy, calibration and OOD metrics from prediction files",
  usage = USAGE,
  help = [[Reads prediction files written by `hydra predict` (/probs float32 [N,C], /labels
int32 [N] (-1 for OOD), optional /member_probs [M,N,C], /logits [N,C], /member_logits [M,N,C])
and writes RESULT.h5: per-sample arrays (conf, correct, NLL, Brier, every OOD score) for the ID,
each OOD and each shift set, and /metrics with Acc, NLL, Brier, ECE, aECE, MCE, AURC, member
disagreement, per-OOD-set AUROC / FPR95 / AUPR-Out / AUPR-In for every available score, their
unweighted mean over OOD sets (OOD avg), and the conventions and provenance as attributes.
--near NAME=PREDS.h5 adds a near-OOD set, --ood NAME=PREDS.h5 a far one; the tables show each
set, the near and far averages, "OOD avg" over all sets and "Groups mean" (mean of the two group
averages). --score picks the score used for the headline OOD and misclassification numbers
(default msp = -max p̄; maxlogit = -mean_m max logits). --calib VAL_PREDS.h5 (labelled predictions
of the ID validation split; not the --id file) fits temperature scaling and adds ECE/NLL/Brier
after it ("+TS"); T stays 1, with a warning, below 10 rows or when the fit does not help.
--fpr fpr95_id makes --md/--csv show FPR95 at 95 % ID recall instead of at 95 % OOD recall
(both are always in RESULT.h5).
--bootstrap B adds percentile 95 % intervals from B seeded resamples (--seed, default 0).
Every formula is in results/README.md. Bad inputs (class-count mismatch, NaN, rows not summing to
1 within 1e-4, labels out of range) are errors naming the file and the first bad row.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "eval",
      usage = USAGE,
      options = { id = "string", ood = "list", near = "list", shift = "list", score = "string",
                  out = "string", json = "string", md = "string", csv = "string",
                  bootstrap = "integer", seed = "natural", calib = "string", fpr = "string" },
      required = { "id", "out" },
    })
    if opts.bootstrap and opts.bootstrap < 2 then
      err.usage("hydra eval: --bootstrap needs at least 2 resamples, got %d", opts.bootstrap)
    end
    if opts.bootstrap and opts.bootstrap > MAX_BOOTSTRAP then
      err.usage("hydra eval: --bootstrap must be at most %d (got %d)", MAX_BOOTSTRAP,
        opts.bootstrap)
    end
    if opts.fpr and opts.fpr ~= "fpr95" and opts.fpr ~= "fpr95_id" then
      err.usage("hydra eval: --fpr must be fpr95 or fpr95_id, got '%s'", opts.fpr)
    end
    local ood = pairs_of(opts.ood, "ood", "far", pairs_of(opts.near, "near", "near"))
    local shift = pairs_of(opts.shift, "shift")
    local ins = { { opts.id, "--id" } }
    for _, o in ipairs(ood) do
      ins[#ins + 1] = { o.path, (o.group == "near" and "--near " or "--ood ") .. o.name }
    end
    for _, o in ipairs(shift) do ins[#ins + 1] = { o.path, "--shift " .. o.name } end
    if opts.calib then ins[#ins + 1] = { opts.calib, "--calib" } end
    require("hydra.output").check({ { opts.out, "--out" }, { opts.json, "--json" },
      { opts.md, "--md" }, { opts.csv, "--csv" } }, ins, "hydra eval")
    if opts.calib and require("hydra.output").same_file(opts.calib, opts.id) then
      err.usage("hydra eval: --calib '%s' is the --id file: temperature scaling would be fitted "
        .. "on the rows it is scored on; give the validation split's predictions (hydra predict "
        .. "... --split val)", opts.calib)
    end
    local eval = require("hydra.eval")
    local report = require("hydra.report")
    local cmd = { "hydra", "eval" }
    for _, a in ipairs(args) do cmd[#cmd + 1] = a end
    local res = eval.evaluate({
      id = opts.id, ood = ood, shift = shift, calib = opts.calib,
      score = opts.score, bootstrap = opts.bootstrap, seed = opts.seed or 0,
      command = table.concat(cmd, " "),
    })
    -- all outputs or none: when one cannot be written, those already written are removed
    local written = {}
    local ok, e = pcall(function()
      eval.write(res, opts.out)
      written[#written + 1] = opts.out
      local topts = { fpr = opts.fpr }
      local texts = { { opts.json, function() return eval.json(res) end },
                      { opts.md, function() return report.markdown({ res }, topts) end },
                      { opts.csv, function() return report.csv({ res }, topts) end } }
      for _, t in ipairs(texts) do
        if t[1] then
          report.write_text(t[1], t[2]())
          written[#written + 1] = t[1]
        end
      end
    end)
    if not ok then
      for _, p in ipairs(written) do os.remove(p) end
      error(e, 0)
    end
    local m = res.metrics
    print(("%s: acc %.2f%%  ece %.2f%%  nll %.4f  brier %.4f  aurc %.2f%%"):format(res.method,
      m.acc * 100, m.ece * 100, m.nll, m.brier, m.aurc * 100))
    local function line(name, a, extra)
      print(("  ood %-12s auroc %.2f%%  fpr95 %.2f%%  fpr95-id %.2f%%  aupr-out %.2f%%%s")
        :format(name, a.auroc * 100, a.fpr95 * 100, a.fpr95_id * 100, a.aupr_out * 100,
          extra or ""))
    end
    for _, o in ipairs(res.ood) do line(o.name, o, ("  (%s, %s)"):format(o.group, res.score)) end
    if res.ood_near.auroc and res.ood_far.auroc then
      line("near avg", res.ood_near)
      line("far avg", res.ood_far)
    end
    if #res.ood > 0 then line("avg", res.ood_avg) end
    if res.ood_near.auroc and res.ood_far.auroc then line("groups mean", res.ood_groups_mean) end
    if m.misclf_auroc then
      print(("  misclassification (%s): auroc %.2f%%  aupr %.2f%%  fpr95 %.2f%%"):format(
        res.score, m.misclf_auroc * 100, m.misclf_aupr * 100, m.misclf_fpr95 * 100))
    end
    if res.calibration then
      local c = res.calibration
      for _, w in ipairs(c.warnings or {}) do io.stderr:write("hydra eval: warning: ", w, "\n") end
      print(("  temperature %.4f (val NLL %.4f -> %.4f): ece %.2f%% -> %.2f%%  nll %.4f -> %.4f")
        :format(c.temperature, c.val_nll_before, c.val_nll_after, m.ece * 100,
          c.metrics.ece * 100, m.nll, c.metrics.nll))
    end
    print("wrote " .. opts.out)
  end,
}
