-- hydra eval: prediction files -> metrics (RESULT.h5, optional JSON / Markdown / CSV table).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra eval --id PREDS.h5 [--ood NAME=PREDS.h5 ...] [--shift NAME=PREDS.h5 ...] "
  .. "[--score msp|entropy|mi|energy|disagreement] [--bootstrap B] [--seed S] --out RESULT.h5 "
  .. "[--json METRICS.json] [--md TABLE.md] [--csv TABLE.csv]"

-- the same bound as the config key eval.bootstrap (lua/hydra/config_schema.lua)
local MAX_BOOTSTRAP = require("hydra.config_schema")["eval.bootstrap"].le

local function pairs_of(list, opt)
  local out = {}
  for _, v in ipairs(list or {}) do
    local name, path = v:match("^([^=]+)=(.+)$")
    if not name then err.usage("hydra eval: --%s expects NAME=PREDS.h5, got '%s'", opt, v) end
    out[#out + 1] = { name = name, path = path }
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
--score picks the score used for the headline OOD numbers (default msp = -max p̄).
--bootstrap B adds percentile 95 % intervals from B seeded resamples (--seed, default 0).
Every formula is in results/README.md. Bad inputs (class-count mismatch, NaN, rows not summing to
1 within 1e-4, labels out of range) are errors naming the file and the first bad row.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "eval",
      usage = USAGE,
      options = { id = "string", ood = "list", shift = "list", score = "string",
                  out = "string", json = "string", md = "string", csv = "string",
                  bootstrap = "integer", seed = "natural" },
      required = { "id", "out" },
    })
    if opts.bootstrap and opts.bootstrap < 2 then
      err.usage("hydra eval: --bootstrap needs at least 2 resamples, got %d", opts.bootstrap)
    end
    if opts.bootstrap and opts.bootstrap > MAX_BOOTSTRAP then
      err.usage("hydra eval: --bootstrap must be at most %d (got %d)", MAX_BOOTSTRAP,
        opts.bootstrap)
    end
    local ood, shift = pairs_of(opts.ood, "ood"), pairs_of(opts.shift, "shift")
    local ins = { { opts.id, "--id" } }
    for _, o in ipairs(ood) do ins[#ins + 1] = { o.path, "--ood " .. o.name } end
    for _, o in ipairs(shift) do ins[#ins + 1] = { o.path, "--shift " .. o.name } end
    require("hydra.output").check({ { opts.out, "--out" }, { opts.json, "--json" },
      { opts.md, "--md" }, { opts.csv, "--csv" } }, ins, "hydra eval")
    local eval = require("hydra.eval")
    local report = require("hydra.report")
    local cmd = { "hydra", "eval" }
    for _, a in ipairs(args) do cmd[#cmd + 1] = a end
    local res = eval.evaluate({
      id = opts.id, ood = ood, shift = shift,
      score = opts.score, bootstrap = opts.bootstrap, seed = opts.seed or 0,
      command = table.concat(cmd, " "),
    })
    -- all outputs or none: when one cannot be written, those already written are removed
    local written = {}
    local ok, e = pcall(function()
      eval.write(res, opts.out)
      written[#written + 1] = opts.out
      local texts = { { opts.json, function() return eval.json(res) end },
                      { opts.md, function() return report.markdown({ res }) end },
                      { opts.csv, function() return report.csv({ res }) end } }
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
    for _, o in ipairs(res.ood) do
      print(("  ood %-12s auroc %.2f%%  fpr95 %.2f%%  aupr-out %.2f%%  (%s)"):format(o.name,
        o.auroc * 100, o.fpr95 * 100, o.aupr_out * 100, res.score))
    end
    if #res.ood > 0 then
      local a = res.ood_avg
      print(("  ood %-12s auroc %.2f%%  fpr95 %.2f%%  aupr-out %.2f%%"):format("avg",
        a.auroc * 100, a.fpr95 * 100, a.aupr_out * 100))
    end
    print("wrote " .. opts.out)
  end,
}
