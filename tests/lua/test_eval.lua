-- tests/lua/test_eval.lua: hydra eval / plot / report on small prediction files written here.
-- The 4-sample ID case is the one of tests/c/test_metrics.c (values worked out there):
--   rows [.75 .125 .125] y0 | [.25 .25 .5] y1 | [.5 .5 0] y1 | [0 0 1] y2
--   Acc 1/2, ECE 0.3125, aECE 0.3125, MCE 0.5, AURC 5/24, Brier 0.3671875,
--   NLL (log 4/3 + log 4 + log 2) / 4; MSP scores -.75 -.5 -.5 -1.
local check = require("check")
local core = require("hydra.core")
local hydra = require("hydra")

local T = {}

local ID_PROBS = { { 0.75, 0.125, 0.125 }, { 0.25, 0.25, 0.5 }, { 0.5, 0.5, 0 }, { 0, 0, 1 } }
local ID_LABELS = { 0, 1, 1, 2 }
-- OOD MSP scores -.5 and -.375
local OOD_PROBS = { { 0.5, 0.25, 0.25 }, { 0.375, 0.375, 0.25 } }

-- Writes a prediction file: spec = { probs=, labels=, member_probs=, logits=, member_logits=,
-- attrs = {k = v} } (nested Lua tables).
local function write_preds(path, spec)
  local f <close> = hydra.h5.create(path)
  f:write("/probs", core.from_table("float32", spec.probs))
  local labels = spec.labels
  if not labels then
    labels = {}
    for i = 1, #spec.probs do labels[i] = -1 end
  end
  f:write("/labels", core.from_table("int32", labels))
  for _, k in ipairs({ "member_probs", "logits", "member_logits" }) do
    if spec[k] then f:write("/" .. k, core.from_table("float32", spec[k])) end
  end
  for k, v in pairs(spec.attrs or {}) do f:set_attr("/", k, v) end
  f:commit()
  return path
end

local function fixture(d)
  local id = write_preds(d .. "/id.h5", { probs = ID_PROBS, labels = ID_LABELS,
    attrs = { method = "single", dataset = "toy" } })
  local ood = write_preds(d .. "/ood.h5", { probs = OOD_PROBS })
  return id, ood
end

local function run_ok(cmdline)
  local code, out, err = check.hydra(cmdline)
  if code ~= 0 then error(("hydra %s: exit %s\n%s%s"):format(cmdline, code, out, err), 2) end
  return out
end

-- hydra CMD must exit with `code` and print exactly "hydra: <msg>\n" on stderr
local function run_fails(cmdline, code, msg)
  local got, _, err = check.hydra(cmdline)
  check.eq(got, code, "exit status of hydra " .. cmdline)
  check.eq(err, "hydra: " .. msg .. "\n", "stderr of hydra " .. cmdline)
end

function T.eval_hand_computed_metrics()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  local out = run_ok(("eval --id %s --ood far=%s --out %s/r.h5 --json %s/m.json --md %s/t.md "
    .. "--csv %s/t.csv"):format(id, ood, d, d, d, d))
  check.ok(out:find("single: acc 50.00%", 1, true), "summary line: " .. out)
  local g <close> = hydra.h5.open(d .. "/r.h5")
  local m = g:attrs("/metrics")
  check.eq(m.acc, 0.5, "acc")
  check.near(m.ece, 0.3125, 1e-12, "ece")
  check.near(m.aece, 0.3125, 1e-12, "aece")
  check.near(m.mce, 0.5, 1e-12, "mce")
  check.near(m.aurc, 5 / 24, 1e-12, "aurc")
  check.near(m.brier, 0.3671875, 1e-12, "brier")
  check.near(m.nll, (math.log(4 / 3) + math.log(4) + math.log(2)) / 4, 1e-12, "nll")
  check.eq(m.members, 1, "members")
  check.eq(m.disagreement, 0.0, "disagreement at M = 1")
  -- OOD scores -.5, -.375 vs ID -.75 -.5 -.5 -1:
  -- AUROC: -.5 beats 2 and ties 2 (3), -.375 beats 4 -> 7/8
  -- FPR95: k = ceil(1.9) = 2, t = -.5, ID with s >= -.5: 2 of 4 -> 0.5
  -- AUPR-Out: t=-.375 TP1 FP0 -> 1/2; t=-.5 TP2 FP2 -> 1/2 * 2/4 -> 0.75
  local o = g:attrs("/metrics/ood/far")
  check.near(o.auroc, 7 / 8, 1e-12, "auroc")
  check.near(o.fpr95, 0.5, 1e-12, "fpr95")
  check.near(o.aupr_out, 0.75, 1e-12, "aupr_out")
  check.near(o.auroc_msp, 7 / 8, 1e-12, "auroc_msp")
  check.ok(o.auroc_mi ~= nil and o.auroc_energy == nil, "mi present, energy absent")
  check.near(m.ood_avg_auroc, 7 / 8, 1e-12, "ood avg = the only set")
  local root = g:attrs("/")
  check.eq(root.format, "hydra-result-1", "format")
  check.eq(root.method, "single", "method")
  check.eq(root.ood_sets, "far", "ood_sets")
  check.eq(root.nll_source, "probs", "nll_source")
  check.ok(root.conventions:find("OOD is the positive class", 1, true), "conventions")
  check.ok(root.command:find("--ood far=", 1, true), "command line recorded")
  check.eq(root.id_file, id, "id_file")
  check.ok(root.unavailable:find("energy", 1, true), "energy reported unavailable")
  -- per-sample arrays
  local conf = g:read("/id/conf")
  check.eq(conf:get(4), 1.0, "conf exactly 1")
  check.same(g:read("/id/correct"):totable(), { 1, 0, 0, 1 }, "/id/correct")
  check.same(g:read("/ood/far/scores/msp"):totable(), { -0.5, -0.375 }, "ood msp")
  local cnt = g:read("/id/reliability/count"):totable()
  check.eq(cnt[15], 1, "conf 1.0 in the last bin")
  check.eq(cnt[8], 2, "two samples in bin 8 (conf 0.5)")
  -- JSON, Markdown, CSV
  local json = check.read_file(d .. "/m.json")
  check.ok(json:find('"auroc": 0.875', 1, true), "json auroc: " .. json)
  check.ok(json:find('"energy": "no /logits or /member_logits in', 1, true), "json unavailable")
  local md = check.read_file(d .. "/t.md")
  check.ok(md:find("| Method | Acc ↑ | ECE ↓ | NLL ↓ | Brier ↓ | AURC ↓ | far AUROC ↑ "
    .. "| far FPR95 ↓ | far AUPR-Out ↑ | OOD avg AUROC ↑ | OOD avg FPR95 ↓ "
    .. "| OOD avg AUPR-Out ↑ |", 1, true),
    "md header: " .. md)
  check.ok(md:find("| single | 50.00 | 31.25 | 0.592 | 0.367 | 20.83 | 87.50 | 50.00 | 75.00 | "
    .. "87.50 | 50.00 | 75.00 |", 1, true), "md row: " .. md)
  check.ok(md:find("OOD is the positive class; OOD score: MSP", 1, true), "md caption")
  -- misclassification block: MSP scores of the errors (-.5, -.5) above both correct ones (-.75,
  -- -1): AUROC 1, AUPR 1, FPR95 0 (k = 2, t = -.5, no correct sample at or above it)
  check.ok(md:find("**Misclassification detection", 1, true), "misclf block")
  check.ok(md:find("| Method | Misclf AUROC ↑ | Misclf AUPR ↑ | Misclf FPR95 ↓ |", 1, true),
    "misclf header")
  check.ok(md:find("| single | 100.00 | 100.00 | 0.00 |", 1, true), "misclf row")
  check.ok(md:find("| Method | MSP AUROC ↑ | MSP FPR95 ↓ | Entropy AUROC ↑", 1, true),
    "by-score block")
  local csv = check.read_file(d .. "/t.csv")
  local head = "method,runs,Acc,ECE,NLL,Brier,AURC,far AUROC,far FPR95,far AUPR-Out,"
    .. "OOD avg AUROC,OOD avg FPR95,OOD avg AUPR-Out,MSP AUROC,MSP FPR95,"
  check.eq(csv:sub(1, #head), head, "csv head")
  check.ok(csv:find("\nsingle,1,50.00,31.25,0.592,0.367,20.83,87.50,50.00,75.00,87.50,50.00,"
    .. "75.00,87.50,50.00,", 1, true), "csv row: " .. csv)
  check.ok(csv:find("Misclf AUROC,Misclf AUPR,Misclf FPR95", 1, true), "csv misclf columns")
end

function T.eval_members_logits_and_energy()
  local d = check.tmpdir()
  -- M = 2, N = 2, C = 2: sample 1 members [1,0] and [0,1] (disagree, p̄ [.5,.5]);
  -- sample 2 both [.75,.25]. MI: log 2 and 0; disagreement 1 and 0 (mean 0.5).
  local mp = { { { 1, 0 }, { 0.75, 0.25 } }, { { 0, 1 }, { 0.75, 0.25 } } }
  local ml = { { { 2, 0 }, { 1, 0 } }, { { 0, 2 }, { 1, 0 } } }
  local id = write_preds(d .. "/id.h5", { probs = { { 0.5, 0.5 }, { 0.75, 0.25 } },
    labels = { 0, 0 }, member_probs = mp, member_logits = ml, attrs = { method = "hydra" } })
  local ood = write_preds(d .. "/ood.h5", { probs = { { 0.5, 0.5 }, { 0.75, 0.25 } },
    member_probs = mp, member_logits = ml })
  local eval = hydra.eval
  local res = eval.evaluate({ id = id, ood = { { name = "o", path = ood } }, score = "energy" })
  check.eq(res.members, 2, "members")
  check.eq(res.nll_source, "member_logits", "nll from member logits")
  check.eq(res.metrics.disagreement, 0.5, "mean disagreement")
  local mi = res.per_sample.id.scores.mi
  check.near(mi:get(1), math.log(2), 1e-12, "MI disagreeing members")
  check.near(mi:get(2), 0, 1e-12, "MI agreeing members")
  -- energy: sample 1 mean logits [1,1] -> -(1 + log 2); sample 2 [1,0] -> -log(e + 1)
  local en = res.per_sample.id.scores.energy
  check.near(en:get(1), -(1 + math.log(2)), 1e-12, "energy 1")
  check.near(en:get(2), -math.log(math.exp(1) + 1), 1e-6, "energy 2")
  -- identical ID and OOD sets: AUROC 0.5 for every score
  check.near(res.ood[1].auroc, 0.5, 1e-12, "energy auroc of identical sets")
  -- both ID samples are classified correctly: misclassification detection is undefined
  check.eq(res.unavailable.misclf, ("misclassification detection needs correct and "
    .. "misclassified samples (got 0 of 2 misclassified) in '%s'"):format(id), "misclf")
  res.unavailable.misclf = nil
  check.eq(next(res.unavailable), nil, "nothing else unavailable")
  -- max-logit = -mean_m max_c z_m: sample 1 maxima 2, 2 -> -2; sample 2 maxima 1, 1 -> -1
  check.near(res.per_sample.id.scores.maxlogit:get(1), -2, 0, "maxlogit 1")
  check.near(res.per_sample.id.scores.maxlogit:get(2), -1, 0, "maxlogit 2")
  -- NLL: log-mean-exp over members of log-softmax at y = 0:
  -- sample 1: members log-softmax [2,0] -> -log(1+e^-2), [0,2] -> -log(1+e^2);
  -- p̄_0 = (1/(1+e^-2) + 1/(1+e^2)) / 2 = 1/2 -> log 2; sample 2: both [1,0] -> log(1+e^-1)
  check.near(res.metrics.nll, (math.log(2) + math.log(1 + math.exp(-1))) / 2, 1e-12, "nll")
end

function T.eval_energy_unavailable_is_an_error_when_chosen()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  run_fails(("eval --id %s --ood far=%s --score energy --out %s/r.h5"):format(id, ood, d), 1,
    ("eval: score 'energy' is unavailable: no /logits or /member_logits in '%s'"):format(id))
  check.eq(core.stat(d .. "/r.h5"), nil, "no result written")
end

function T.eval_bad_inputs()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  local two = write_preds(d .. "/two.h5", { probs = { { 0.5, 0.5 } } })
  run_fails(("eval --id %s --ood x=%s --out %s/r.h5"):format(id, two, d), 1,
    ("eval: '%s' has 2 classes, expected 3 (as in the ID file '%s')"):format(two, id))
  local nan = write_preds(d .. "/nan.h5", { probs = { { 0.5, 0.5 }, { 0.5, 0.5 }, { 0 / 0, 1 } },
    labels = { 0, 1, 1 } })
  run_fails(("eval --id %s --out %s/r.h5"):format(nan, d), 1,
    ("eval: '%s' /probs: row 2 (0-based) has a non-finite value at class 0 (nan)"):format(nan))
  local sum = write_preds(d .. "/sum.h5", { probs = { { 0.5, 0.5 }, { 0.5, 0.4 } },
    labels = { 0, 1 } })
  run_fails(("eval --id %s --out %s/r.h5"):format(sum, d), 1,
    ("eval: '%s' /probs: row 1 (0-based) sums to 0.9 (expected 1 within 0.0001)"):format(sum))
  local lab = write_preds(d .. "/lab.h5", { probs = { { 0.5, 0.5 } }, labels = { 2 } })
  run_fails(("eval --id %s --out %s/r.h5"):format(lab, d), 1,
    ("eval: '%s' /labels: label 2 at row 0 (0-based) is out of range [0, 2)"):format(lab))
  local mem = write_preds(d .. "/mem.h5", { probs = { { 0.5, 0.5 } }, labels = { 0 },
    member_probs = { { { 0.5, 0.5 } }, { { 0.25, 0.5 } } } })
  run_fails(("eval --id %s --out %s/r.h5"):format(mem, d), 1,
    ("eval: '%s' /member_probs: member 1 row 0 (0-based) sums to 0.75 (expected 1 within "
    .. "0.0001)"):format(mem))
  run_fails(("eval --id %s/missing.h5 --out %s/r.h5"):format(d, d), 1,
    ("eval: cannot open '%s/missing.h5': no such file"):format(d))
  run_fails(("eval --id %s --ood %s --out %s/r.h5"):format(id, ood, d), 2,
    ("hydra eval: --ood expects NAME=PREDS.h5, got '%s'"):format(ood))
  run_fails(("eval --id %s --out %s/r.h5 --score nope"):format(id, d), 1,
    "eval: unknown score 'nope' (known: msp, maxlogit, entropy, mi, energy, disagreement, "
    .. "learned)")
  run_fails(("eval --id %s --ood far=%s --out %s/r.h5 --score maxlogit"):format(id, ood, d), 1,
    ("eval: score 'maxlogit' is unavailable: no /logits or /member_logits in '%s'"):format(id))
  run_fails(("eval --id %s"):format(id), 2, "hydra eval: --out is required")
  check.eq(core.stat(d .. "/r.h5"), nil, "no result written after errors")
end

function T.eval_shift_and_bootstrap_determinism()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  local sh = write_preds(d .. "/shift.h5", { probs = { { 0.5, 0.25, 0.25 }, { 0, 1, 0 } },
    labels = { 1, 1 } })
  for _, r in ipairs({ "a", "b" }) do
    run_ok(("eval --id %s --ood far=%s --shift noise=%s --bootstrap 50 --seed 3 --out %s/%s.h5")
      :format(id, ood, sh, d, r))
  end
  local ga <close> = hydra.h5.open(d .. "/a.h5")
  local gb <close> = hydra.h5.open(d .. "/b.h5")
  local ma, mb = ga:attrs("/metrics"), gb:attrs("/metrics")
  check.ok(ma.acc_lo ~= nil and ma.acc_lo <= ma.acc and ma.acc <= ma.acc_hi, "acc in its CI")
  check.same(ma, mb, "same seed, same metrics and intervals")
  local oa = ga:attrs("/metrics/ood/far")
  check.ok(oa.auroc_lo <= oa.auroc and oa.auroc <= oa.auroc_hi, "auroc in its CI")
  -- shift set: row 1 predicts class 0 (wrong), row 2 class 1 (right) -> acc 1/2
  local s = ga:attrs("/metrics/shift/noise")
  check.eq(s.acc, 0.5, "shift acc")
  check.eq(s.n, 2, "shift n")
  check.ok(ga:exists("/shift/noise/reliability/count"), "shift per-sample arrays")
end

function T.report_mean_std_over_seeds()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  local id2 = write_preds(d .. "/id2.h5", { probs = ID_PROBS, labels = { 0, 2, 1, 2 },
    attrs = { method = "single" } })
  run_ok(("eval --id %s --ood far=%s --out %s/s1.h5"):format(id, ood, d))
  run_ok(("eval --id %s --ood far=%s --out %s/s2.h5"):format(id2, ood, d))
  local report = hydra.report
  local t = report.table({ d .. "/s1.h5", d .. "/s2.h5" })
  check.eq(#t.rows, 1, "one method row")
  check.eq(t.rows[1].n, 2, "two runs")
  -- acc 50 % and 75 % -> mean 62.5, sample std sqrt(2 * 12.5^2 / 1) = 17.68
  check.near(t.rows[1].cells[1].mean, 62.5, 1e-9, "acc mean")
  check.near(t.rows[1].cells[1].std, math.sqrt(2) * 12.5, 1e-9, "acc std")
  local md = report.markdown({ d .. "/s1.h5", d .. "/s2.h5" })
  check.ok(md:find("| single (n=2) | 62.50 ± 17.68 |", 1, true), "md mean ± std: " .. md)
  check.ok(report.csv({ d .. "/s1.h5", d .. "/s2.h5" }):find("single,2,62.50,17.68,", 1, true),
    "csv std column")
  check.raises(("report: '%s' is not a hydra result file (no 'format' attribute on /)"):format(id),
    function() return report.load(id) end)
end

local function is_png(path)
  local s = check.read_file(path)
  return s ~= nil and #s > 100 and s:sub(1, 8) == "\137PNG\r\n\26\n"
end

-- Near/far groups, both FPR95 conventions, temperature scaling and their mean ± std over seeds,
-- worked out by hand. ID MSP scores -.75 -.5 -.5 -1 (the fixture). OOD sets (MSP scores):
--   a (near) -.5 -.375:  AUROC (3 + 4) / 8 = .875;   FPR95-ID: t = 4th smallest ID = -.5,
--                        OOD <= t: 1 of 2 -> .5
--   b (far)  -.5 -.5:    AUROC (3 + 3) / 8 = .75;    FPR95-ID 2/2 = 1
--   c (far)  -.75 -.375: AUROC (1.5 + 4) / 8 = .6875; FPR95-ID 1/2 = .5
-- near avg AUROC .875, far avg .71875, OOD avg 2.3125 / 3, groups mean .796875.
function T.eval_near_far_fpr95_id_and_temperature()
  local d = check.tmpdir()
  local id = fixture(d)
  local a = write_preds(d .. "/a.h5", { probs = OOD_PROBS })
  local b = write_preds(d .. "/b.h5", { probs = { { 0.5, 0.25, 0.25 }, { 0.25, 0.5, 0.25 } } })
  local c = write_preds(d .. "/c.h5",
    { probs = { { 0.75, 0.125, 0.125 }, { 0.375, 0.375, 0.25 } } })
  local eval, report = hydra.eval, hydra.report
  -- the calibration set: the ID rows three times (eval.MIN_CALIB rows at least, split val)
  local VAL_PROBS, VAL_LABELS = {}, {}
  for i = 1, 3 * #ID_PROBS do
    VAL_PROBS[i], VAL_LABELS[i] = ID_PROBS[(i - 1) % 4 + 1], ID_LABELS[(i - 1) % 4 + 1]
  end
  local val = write_preds(d .. "/val.h5", { probs = VAL_PROBS, labels = VAL_LABELS,
    attrs = { method = "single", split = "val" } })
  local res = eval.evaluate({ id = id, calib = val, ood = {
    { name = "a", path = a, group = "near" }, { name = "b", path = b },
    { name = "c", path = c, group = "far" } } })
  check.eq(res.ood[2].group, "far", "a set without a group is far")
  check.eq(res.ood_near.auroc, 0.875, "near avg")
  check.eq(res.ood_far.auroc, 0.71875, "far avg")
  check.near(res.ood_avg.auroc, 2.3125 / 3, 1e-15, "OOD avg over all sets")
  check.eq(res.ood_groups_mean.auroc, 0.796875, "groups mean")
  check.eq(res.ood[1].fpr95_id, 0.5, "fpr95_id a")
  check.eq(res.ood[2].fpr95_id, 1.0, "fpr95_id b")
  check.eq(res.ood_far.fpr95_id, 0.75, "far fpr95_id")
  check.eq(res.ood_groups_mean.fpr95_id, 0.625, "groups mean fpr95_id")
  -- temperature scaling on probabilities (no logits): log p̄ = log max(p, 1e-12)
  local a_val = core.metrics_log_probs(core.from_table("float32", VAL_PROBS))
  local T0 = core.metrics_temperature_fit(a_val, core.from_table("int32", VAL_LABELS))
  check.eq(#res.calibration.warnings, 0, "no warning: " .. table.concat(res.calibration.warnings))
  check.eq(res.calibration.temperature, T0, "the fitted temperature")
  check.eq(res.calibration.source, "probs", "log p̄ from the probabilities")
  check.ok(res.calibration.val_nll_after <= res.calibration.val_nll_before, "TS lowers val NLL")
  check.eq(res.calibration.metrics.acc, res.metrics.acc, "TS keeps the accuracy")
  -- the file carries the names of results/README.md
  eval.write(res, d .. "/r.h5")
  local f <close> = hydra.h5.open(d .. "/r.h5")
  check.eq(f:attr("/metrics", "ood_near_auroc"), 0.875, "ood_near_auroc")
  check.eq(f:attr("/metrics", "ood_far_fpr95_id"), 0.75, "ood_far_fpr95_id")
  check.eq(f:attr("/metrics", "ood_groups_mean_auroc_msp"), 0.796875, "per-score groups mean")
  check.eq(f:attr("/metrics/ood/b", "fpr95_id"), 1.0, "per-set fpr95_id")
  check.eq(f:attr("/calibration", "temperature"), T0, "temperature attribute")
  check.eq(f:attr("/", "ood_near_sets"), "a", "near sets")
  check.eq(f:attr("/", "ood_far_sets"), "b,c", "far sets")
  -- tables: near sets first, the four averages, +TS; FPR95 or FPR95-ID as asked
  local md = report.markdown({ d .. "/r.h5" })
  check.ok(md:find("| ECE ↓ | ECE +TS ↓ | NLL ↓ | NLL +TS ↓ |", 1, true), "+TS columns: " .. md)
  check.ok(md:find("| a AUROC ↑ | a FPR95 ↓ | a AUPR-Out ↑ | b AUROC ↑", 1, true), "sets")
  check.ok(md:find("| Near avg AUROC ↑ | Near avg FPR95 ↓ | Near avg AUPR-Out ↑ | Far avg AUROC ↑ "
    .. "| Far avg FPR95 ↓ | Far avg AUPR-Out ↑ | OOD avg AUROC ↑ | OOD avg FPR95 ↓ "
    .. "| OOD avg AUPR-Out ↑ | Groups mean AUROC ↑ |", 1, true), "summary columns")
  check.ok(md:find("FPR95 = fraction of ID samples flagged", 1, true), "caption names FPR95")
  check.ok(md:find("Near OOD: a; far OOD: b, c", 1, true), "caption names the groups")
  check.ok(md:find("**Post-hoc calibration", 1, true), "calibration block")
  check.ok(md:find("| Method | T | ECE ↓ | ECE +TS ↓ | aECE ↓ | aECE +TS ↓ | NLL ↓ | NLL +TS ↓ "
    .. "| Brier ↓ | Brier +TS ↓ |", 1, true), "calibration columns")
  local md_id = report.markdown({ res }, { fpr = "fpr95_id" })
  check.ok(md_id:find("| a AUROC ↑ | a FPR95-ID ↓ |", 1, true), "FPR95-ID columns")
  check.ok(md_id:find("FPR95-ID = fraction of OOD samples", 1, true), "caption names FPR95-ID")
  local row = md_id:match("\n(| single |[^\n]*)")
  check.ok(row:find("| 87.50 | 50.00 | ", 1, true), "a: AUROC 87.50, FPR95-ID 50.00: " .. row)
  -- hydra eval --near / --calib / --fpr
  run_ok(("eval --id %s --near a=%s --ood b=%s --ood c=%s --calib %s --out %s/cli.h5 --md "
    .. "%s/cli.md --fpr fpr95_id"):format(id, a, b, c, val, d, d, d))
  local cli <close> = hydra.h5.open(d .. "/cli.h5")
  check.eq(cli:attr("/metrics", "ood_groups_mean_auroc"), 0.796875, "cli groups mean")
  check.ok(check.read_file(d .. "/cli.md"):find("a FPR95-ID ↓", 1, true), "cli --fpr")
  -- two seeds of one method (the second with a and b swapped between the groups): mean ± std
  local res2 = eval.evaluate({ id = id, calib = val, ood = {
    { name = "a", path = a, group = "far" }, { name = "b", path = b, group = "near" },
    { name = "c", path = c, group = "far" } } })
  local t = report.table({ res, res2 })
  local function cell(title)
    for j, col in ipairs(t.columns) do if col.title == title then return t.rows[1].cells[j] end end
  end
  -- near avg AUROC: .875 and .75 -> 81.25 ± 8.8388 (sample std)
  check.near(cell("Near avg AUROC ↑").mean, 81.25, 1e-12, "near mean")
  check.near(cell("Near avg AUROC ↑").std, 12.5 / math.sqrt(2), 1e-12, "near std")
  check.eq(cell("ECE +TS ↓").std, 0.0, "+TS std over identical ID sets")
  local blocks = report.tables({ res, res2 })
  for _, b2 in ipairs(blocks) do
    for j, col in ipairs(b2.columns) do
      check.ok(b2.rows[1].cells[j].std ~= nil, ("%s: %s has a std"):format(b2.block, col.title))
    end
  end
  check.eq(#blocks, 4, "main, scores, misclf and calibration blocks")
end

-- reviews/reliability_2.md E7-E9: temperature scaling fitted on the scored rows is refused; a
-- flat validation NLL, a tiny calibration set and a temperature on a bound keep T = 1 or warn.
function T.temperature_scaling_guards()
  local d = check.tmpdir()
  local id = fixture(d)
  run_fails(("eval --id %s --calib %s --out %s/r.h5"):format(id, id, d), 2,
    ("hydra eval: --calib '%s' is the --id file: temperature scaling would be fitted on the rows "
      .. "it is scored on; give the validation split's predictions (hydra predict ... --split "
      .. "val)"):format(id))
  local function calib(name, probs, labels, split)
    return write_preds(d .. "/" .. name .. ".h5", { probs = probs, labels = labels,
      attrs = { split = split or "val" } })
  end
  local function rows(n, p, y)
    local ps, ys = {}, {}
    for i = 1, n do ps[i], ys[i] = p(i), y(i) end
    return ps, ys
  end
  local eval = hydra.eval
  local function fit(path)
    local c = eval.evaluate({ id = id, calib = path }).calibration
    return c.temperature, table.concat(c.warnings, "\n"), c
  end
  -- uniform probabilities: the NLL is flat in T (the bisection ends at 0.01)
  local T, w, c = fit(calib("flat", rows(12, function() return { 1 / 3, 1 / 3, 1 / 3 } end,
    function(i) return i % 3 end)))
  check.eq(T, 1.0, "flat: T kept at 1")
  check.eq(c.val_nll_after, c.val_nll_before, "flat: val NLL unchanged")
  check.ok(w:find("temperature scaling does not lower the NLL of", 1, true), w)
  -- one row
  T, w = fit(calib("one", { ID_PROBS[1] }, { 0 }))
  check.eq(T, 1.0, "one row: T kept at 1")
  check.ok(w:find("has 1 row (fewer than 10): temperature kept at 1", 1, true), w)
  -- all wrong and confident: T goes to the upper bound, with a warning
  T, w = fit(calib("wrong", rows(12, function() return { 0.98, 0.01, 0.01 } end,
    function() return 1 end)))
  check.eq(T, 100.0, "all wrong: the upper bound")
  check.ok(w:find("the fitted temperature 100 is on the bound of [0.01, 100]", 1, true), w)
  -- the test split as calibration set: fitted, with a warning
  local VP, VL = rows(12, function(i) return ID_PROBS[(i - 1) % 4 + 1] end,
    function(i) return ID_LABELS[(i - 1) % 4 + 1] end)
  T, w = fit(calib("testsplit", VP, VL, "test"))
  check.ok(T ~= 1.0, "test split: still fitted")
  check.ok(w:find("holds the 'test' split, not val", 1, true), w)
  local code, _, e = check.hydra(("eval --id %s --calib %s/testsplit.h5 --out %s/r.h5")
    :format(id, d, d))
  check.eq(code, 0, "a warning is no error: " .. e)
  check.ok(e:find("hydra eval: warning: the calibration file", 1, true), e)
end

-- ===== claims by the rule (hydra.verdict.compare, hydra.experiment.claim_line) =====

-- Runs of constructed results: for each seed, one run folder per method with a result.h5 of
-- `hydra eval` (40 ID rows, 3 classes, 4 misclassified; 40 OOD rows). "good" gives the OOD rows
-- a low MSP (0.34 .. 0.79: mostly below the ID rows' 0.70 .. 0.95), "poor" a high one
-- (0.50 .. 0.95); the noise differs per seed and method. methods = { [name] = { seeds } }.
local function claim_runs(methods)
  local d = check.tmpdir()
  local runs = {}
  local names = {}
  for name in pairs(methods) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    for _, seed in ipairs(methods[name]) do
      local x = 7 + 31 * seed + #name
      local function rnd()
        x = (x * 1103515245 + 12345) % 2147483648
        return x / 2147483648
      end
      local function row(top, c)
        local r = { (1 - top) / 2, (1 - top) / 2, (1 - top) / 2 }
        r[c + 1] = top
        return r
      end
      local idp, labels, oodp = {}, {}, {}
      for i = 1, 40 do
        idp[i] = row(0.70 + 0.25 * rnd(), i % 3)
        labels[i] = i <= 4 and (i + 1) % 3 or i % 3
        local top = name == "good" and 0.34 + 0.45 * rnd() or 0.5 + 0.45 * rnd()
        oodp[i] = row(top, i % 3)
      end
      local dir = ("%s/%s_%d"):format(d, name, seed)
      core.mkdir_p(dir)
      write_preds(dir .. "/id.h5", { probs = idp, labels = labels, attrs = { method = name } })
      write_preds(dir .. "/ood.h5", { probs = oodp })
      run_ok(("eval --id %s/id.h5 --ood far=%s/ood.h5 --out %s/result.h5"):format(dir, dir, dir))
      local res = hydra.report.load(dir .. "/result.h5")
      res.name, res.group = name, ""
      runs[#runs + 1] = { dir = dir, flat = { seed = tostring(seed) }, keys = { "seed" },
                          loaded = { results = { res } } }
    end
  end
  return runs
end

-- verdict.compare pairs the runs by seed and applies the rule: its t-test is paired_t of the
-- stored per-seed values in seed order, its interval the paired bootstrap of the same seeds'
-- predictions; a clear gain holds one way and fails the other (direction), lower-is-better
-- metrics flip it, and seeds only one side has are left out.
function T.compare_pairs_by_seed_and_applies_the_rule()
  local verdict, report = hydra.verdict, hydra.report
  local runs = claim_runs({ good = { 0, 1, 2 }, poor = { 2, 0, 1, 3 } })
  local good, poor = { method = "good" }, { method = "poor" }
  local r = verdict.compare(runs, good, poor, "ood_avg_auroc", "higher", { B = 200 })
  check.same(r.seeds, { 0, 1, 2 }, "the seeds both have (poor's seed 3 left out)")
  local va, vb, prs = {}, {}, {}
  for i, s in ipairs(r.seeds) do
    local function of(m)
      for _, run in ipairs(runs) do
        local res = run.loaded.results[1]
        if res.name == m and run.flat.seed == tostring(s) then return run, res end
      end
    end
    local ra, ea = of("good")
    local rb, eb = of("poor")
    va[i], vb[i] = report.metric_of(ea, "ood_avg_auroc"), report.metric_of(eb, "ood_avg_auroc")
    prs[i] = { a = verdict.samples(hydra.h5.open(ra.dir .. "/result.h5"), ""),
               b = verdict.samples(hydra.h5.open(rb.dir .. "/result.h5"), "") }
  end
  local t = verdict.paired_t(va, vb)
  check.eq(r.t.mean, t.mean, "mean difference of the paired seeds")
  check.eq(r.t.p, t.p, "p of the paired t-test")
  local boot = verdict.bootstrap(prs, "ood_avg_auroc", { B = 200 })
  check.eq(r.boot.lo, boot.lo, "bootstrap interval: low")
  check.eq(r.boot.hi, boot.hi, "bootstrap interval: high")
  check.ok(t.p < verdict.ALPHA and boot.lo > 0, "the constructed gain is beyond noise")
  check.eq(r.verdict, "holds", "good beats poor on OOD AUROC")
  check.eq(r.text, verdict.text(t, boot, "higher", 100) .. " (both tests beyond noise, in the "
    .. "claim's direction)", "text: difference, p, CI, verdict and its reason")
  check.eq(verdict.compare(runs, poor, good, "ood_avg_auroc", "higher", { B = 200 }).verdict,
    "fails", "the reverse claim")
  check.eq(verdict.compare(runs, good, poor, "ood_avg_auroc", "lower", { B = 200 }).verdict,
    "fails", "the same numbers against a lower-is-better claim")
  check.eq(verdict.compare(runs, good, poor, "ood_avg_fpr95", "lower", { B = 200 }).verdict,
    "holds", "FPR95: lower is better")
  local same = verdict.compare(runs, good, good, "ood_avg_auroc", "higher", { B = 50 })
  check.eq(same.verdict, "within noise", "a method against itself")
  check.eq(same.boot.lo, 0.0, "paired: a zero-width interval")
  -- a metric without a per-sample form: the seed test alone, never beyond noise
  local ts = verdict.compare(runs, good, poor, "disagreement", "lower")
  check.eq(ts.boot, nil, "no per-sample form: no bootstrap")
  check.eq(ts.reason, "no per-sample test", "and the rule says so")
  check.raises("report.value: no run has method 'deep_ensemble' (methods: good, poor)",
    function() return verdict.compare(runs, { method = "deep_ensemble" }, poor, "acc", "higher") end)
end

-- One seed: the rule has no seed test, so the clear gain is "within noise" and the line says
-- why; claim_line adds "as in the paper" only to "holds" and leaves out a claim whose method is
-- not in the runs (methods=[...] without it).
function T.claim_lines_say_what_the_rule_says()
  local exp = hydra.experiment
  local one = claim_runs({ good = { 0 }, poor = { 0 } })
  local good = { method = "good", label = "Good" }
  local poor = { method = "poor", label = "Poor" }
  local line = exp.claim_line(one, "OOD avg AUROC", good, poor, "ood_avg_auroc", "higher",
    { B = 50, paper = "86.29 vs 85.48" })
  check.ok(line:find("^OOD avg AUROC: Good %d+%.%d%d vs Poor %d+%.%d%d %(claim: Good higher; "
    .. "seed 0%): %+%d+%.%d%d %(n = 1; CI %+%d+%.%d%d, %+%d+%.%d%d%): within noise %(fewer than 2 "
    .. "seeds: no seed test%)$") ~= nil, line)
  local three = claim_runs({ good = { 0, 1, 2 }, poor = { 0, 1, 2 } })
  line = exp.claim_line(three, "OOD avg AUROC", good, poor, "ood_avg_auroc", "higher",
    { B = 100, paper = "86.29 vs 85.48" })
  check.ok(line:find("): holds (both tests beyond noise, in the claim's direction), as in the "
    .. "paper (86.29 vs 85.48)", 1, true) ~= nil, line)
  line = exp.claim_line(three, "OOD avg AUROC", poor, good, "ood_avg_auroc", "higher",
    { B = 100, paper = true })
  check.ok(line:find("): fails (both tests beyond noise, against the claim), unlike the paper",
    1, true) ~= nil, line)
  line = exp.claim_line(three, "OOD avg AUROC", good, poor, "ood_avg_auroc", "higher", { B = 100 })
  check.ok(line:find("in the claim's direction%)$") ~= nil, "not the paper's claim: " .. line)
  check.eq(exp.claim_line(three, "x", good, { method = "deep_ensemble", label = "DE" },
    "ood_avg_auroc", "higher"), nil, "a method the runs lack: no line")
end

function T.plot_commands_write_png_dat_gp()
  local d = check.tmpdir()
  local id, ood = fixture(d)
  run_ok(("eval --id %s --ood far=%s --ood near=%s --out %s/a.h5"):format(id, ood, ood, d))
  local ens = write_preds(d .. "/e.h5", { probs = ID_PROBS, labels = ID_LABELS,
    attrs = { method = "other" } })
  run_ok(("eval --id %s --ood far=%s --out %s/b.h5"):format(ens, ood, d))
  for _, kind in ipairs({ "reliability", "ood-hist", "risk-coverage" }) do
    local out = run_ok(("plot %s %s/a.h5 %s/b.h5 --out %s/%s.png"):format(kind, d, d, d, kind))
    check.ok(out:find("wrote " .. d .. "/" .. kind .. ".png", 1, true), kind .. ": " .. out)
    check.ok(is_png(d .. "/" .. kind .. ".png"), kind .. ".png is a non-empty PNG")
    check.ok(#check.read_file(d .. "/" .. kind .. ".dat") > 0, kind .. ".dat")
    check.ok(check.read_file(d .. "/" .. kind .. ".gp"):find("set output", 1, true), kind .. ".gp")
  end
  local dat = check.read_file(d .. "/reliability.dat")
  check.ok(dat:find("# single: bin_lo", 1, true) and dat:find("# other: bin_lo", 1, true),
    "both methods in the reliability data")
  run_fails(("plot frobnicate %s/a.h5 --out %s/x.png"):format(d, d), 2,
    "hydra plot: unknown plot 'frobnicate' (known: reliability, ood-hist, risk-coverage)")
  run_fails(("plot ood-hist %s/a.h5 --score energy --out %s/x.png"):format(d, d), 1,
    ("plot: '%s/a.h5' has no /id/scores/energy (score 'energy' unavailable: energy: no /logits "
    .. "or /member_logits in '%s'; maxlogit: no /logits or /member_logits in '%s')")
    :format(d, id, id))
  run_fails(("plot reliability %s --out %s/x.png"):format(id, d), 1,
    ("plot: '%s' is not a hydra result file (no 'format' attribute on /)"):format(id))
end

function T.plot_gnuplot_failure_names_the_script()
  local d = check.tmpdir()
  local plot = hydra.plot
  check.raises_has(("plot: gnuplot failed on '%s/bad.gp' (exit status 1); rerun it with: "
    .. "gnuplot %s/bad.gp"):format(d, d),
    function() return plot.run(d .. "/bad.png", "plot frobnicate(x)", "1 2\n") end)
  check.raises("plot: --out must end in .png (got 'x.svg')",
    function() return plot.run("x.svg", "", "") end)
end

return T
