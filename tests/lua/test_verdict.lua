-- tests/lua/test_verdict.lua: the verdict rule (lua/hydra/verdict.lua): Student's t against
-- closed forms, the paired t-test and the paired bootstrap on constructed inputs whose verdict
-- is known, and the rule's three outcomes.
local check = require("check")
local core = require("hydra.core")
local verdict = require("hydra.verdict")
local eq, ok, near, raises = check.eq, check.ok, check.near, check.raises

local T = {}

function T.t_distribution_matches_closed_forms()
  -- df = 1 (Cauchy): p = 1 - (2/pi) atan|t|; df = 2: p = 1 - |t| / sqrt(t^2 + 2)
  for _, t in ipairs({ 0.05, 0.5, 1, 2, 4.3, 12.7, 100 }) do
    near(verdict.t_two_sided(t, 1), 1 - 2 / math.pi * math.atan(t), 1e-12, "df 1 at " .. t)
    near(verdict.t_two_sided(t, 2), 1 - t / math.sqrt(t * t + 2), 1e-12, "df 2 at " .. t)
  end
  near(verdict.t_quantile(0.975, 1), math.tan(0.475 * math.pi), 1e-9, "t(0.975; 1)")
  near(verdict.t_quantile(0.975, 2), math.sqrt(1.805 / 0.0975), 1e-9, "t(0.975; 2)")
  near(verdict.t_quantile(0.975, 30), 2.0422724563012, 1e-9, "t(0.975; 30) (tables: 2.0423)")
  eq(verdict.t_two_sided(0, 4), 1.0, "t = 0")
  near(verdict.lgamma(5), math.log(24), 1e-13, "lgamma(5)")
end

function T.paired_t_on_known_differences()
  local r = verdict.paired_t({ 1, 2, 3 }, { 0, 0, 0 })
  eq(r.n, 3, "n")
  eq(r.mean, 2.0, "mean")
  near(r.sd, 1, 1e-15, "sd")
  near(r.t, 2 * math.sqrt(3), 1e-12, "t")
  near(r.p, 1 - r.t / math.sqrt(r.t ^ 2 + 2), 1e-12, "p (df 2)")
  near(r.lo, 2 - math.sqrt(1.805 / 0.0975) / math.sqrt(3), 1e-9, "CI low")
  -- pairing matters: the same values shifted per seed give identical differences
  local p = verdict.paired_t({ 10.5, 20.5, 30.5 }, { 10, 20, 30 })
  eq(p.p, 0, "constant non-zero differences: p 0")
  eq(verdict.paired_t({ 1, 2 }, { 1, 2 }).p, 1, "identical: p 1")
  eq(verdict.paired_t({ 1 }, { 0 }).p, nil, "one seed: no test")
  raises("verdict.paired_t: 2 values against 1 (one per seed on each side)",
    function() return verdict.paired_t({ 1, 2 }, { 1 }) end)
end

function T.rule_needs_both_tests()
  local beyond = { n = 3, mean = 0.05, p = 0.01 }
  local noisy = { n = 3, mean = 0.05, p = 0.2 }
  local against = { n = 3, mean = -0.05, p = 0.01 }
  eq(verdict.rule(beyond, { lo = 0.01, hi = 0.09 }, "higher"), "holds", "both, right way")
  eq(verdict.rule(beyond, { lo = 0.01, hi = 0.09 }, "lower"), "fails", "both, wrong way")
  eq(verdict.rule(against, { lo = -0.09, hi = -0.01 }, "higher"), "fails", "both against")
  eq(verdict.rule(against, { lo = -0.09, hi = -0.01 }, "lower"), "holds", "lower is better")
  eq(verdict.rule(beyond, { lo = -0.01, hi = 0.09 }, "higher"), "within noise", "CI keeps 0")
  eq(select(2, verdict.rule(beyond, { lo = -0.01, hi = 0.09 }, "higher")),
    "only the seed test is beyond noise", "CI keeps 0: reason")
  eq(select(2, verdict.rule(noisy, { lo = 0.01, hi = 0.09 }, "higher")),
    "only the sample test is beyond noise", "p >= alpha: reason")
  eq(select(2, verdict.rule(noisy, { lo = -0.01, hi = 0.09 }, "higher")),
    "neither test is beyond noise", "neither: reason")
  eq(verdict.rule(noisy, { lo = 0.01, hi = 0.09 }, "higher"), "within noise", "p >= alpha")
  eq(verdict.rule(beyond, { lo = -0.09, hi = -0.01 }, "higher"), "within noise", "disagree")
  eq(verdict.rule({ n = 1, mean = 0.3 }, { lo = 0.2, hi = 0.4 }, "higher"), "within noise",
    "one seed")
  eq(verdict.rule(beyond, nil, "higher"), "within noise", "no sample test")
  eq(verdict.rule({ n = 3, mean = 0.05, p = verdict.ALPHA }, { lo = 0.01, hi = 0.09 }, "higher"),
    "within noise", "p = alpha is not beyond")
  raises("verdict.rule: better must be 'higher' or 'lower', got 'up'",
    function() return verdict.rule(beyond, nil, "up") end)
  eq(verdict.text({ n = 3, mean = -0.0398, p = 0.2104 }, { lo = -0.0452, hi = -0.0341 }, "higher",
    100), "−3.98 (p 0.210; CI −4.52, −3.41): within noise", "cell text")
end

-- ===== the paired bootstrap on constructed samples =====

local function f64(t) return core.from_table("float64", t) end

-- A constructed result: ID test of n rows (first `wrong` rows misclassified), one near and one
-- far OOD set; OOD scores = id score + shift (shift > 0 separates the sets).
local function samples(n, shift, noise_seed, wrong)
  local conf, ok_, nll, brier, sid = {}, {}, {}, {}, {}
  local x = noise_seed
  local function rnd()
    x = (x * 1103515245 + 12345) % 2147483648
    return x / 2147483648
  end
  for i = 1, n do
    conf[i] = 0.5 + 0.5 * rnd()
    ok_[i] = i > wrong and 1 or 0
    nll[i] = -math.log(conf[i])
    brier[i] = (1 - conf[i]) ^ 2
    sid[i] = -conf[i]
  end
  local near, far = {}, {}
  for i = 1, n do near[i] = -0.5 - 0.5 * rnd() + shift; far[i] = -0.5 - 0.5 * rnd() + 2 * shift end
  return {
    group = "/constructed", score = "msp", sets = { "n1", "f1" },
    id = { conf = f64(conf), correct = core.from_table("uint8", ok_), nll = f64(nll),
           brier = f64(brier), scores = { msp = f64(sid) } },
    ood = { n1 = { group = "near", scores = { msp = f64(near) } },
            f1 = { group = "far", scores = { msp = f64(far) } } },
  }
end

function T.metric_recomputes_the_stored_formulas()
  local s = samples(60, 0.2, 7, 10)
  local id = core.metrics_id(s.id.conf, s.id.correct, s.id.nll, s.id.brier)
  eq(verdict.metric(s, "acc"), id.acc, "acc")
  eq(verdict.metric(s, "ece"), id.ece, "ece")
  local a = core.metrics_ood(s.id.scores.msp, s.ood.n1.scores.msp)
  local b = core.metrics_ood(s.id.scores.msp, s.ood.f1.scores.msp)
  eq(verdict.metric(s, "ood_near_auroc"), a.auroc, "near = the near set")
  eq(verdict.metric(s, "ood_avg_fpr95_id"), (a.fpr95_id + b.fpr95_id) / 2, "avg fpr95_id")
  eq(verdict.metric(s, "ood/f1/auroc_msp"), b.auroc, "one set, named score")
  eq(verdict.metric(s, "misclf_auroc"),
    core.metrics_misclf(s.id.scores.msp, s.id.correct).auroc, "misclf")
  ok(not verdict.resamplable("calibration/ece"), "+TS metrics have no per-sample form")
  raises("verdict: no per-sample 'id/scores/maxlogit' under '/constructed' (the result holds no "
    .. "predictions)", function() return verdict.metric(s, "ood_avg_auroc_maxlogit") end)
end

function T.bootstrap_is_paired_and_deterministic()
  local a = samples(80, 0.3, 11, 12)
  -- the same samples on both sides: every resample's difference is exactly 0 (an unpaired
  -- resampling would spread it)
  local same = verdict.bootstrap({ { a = a, b = a }, { a = a, b = a } }, "ood_avg_auroc",
    { B = 50 })
  eq(same.diff, 0.0, "diff")
  eq(same.lo, 0.0, "lo")
  eq(same.hi, 0.0, "hi")
  local b = samples(80, 0.0, 11, 12)
  local r1 = verdict.bootstrap({ { a = a, b = b } }, "ood_avg_auroc", { B = 60, seed = 3 })
  local r2 = verdict.bootstrap({ { a = a, b = b } }, "ood_avg_auroc", { B = 60, seed = 3 })
  eq(r1.lo, r2.lo, "same seed, same interval")
  eq(r1.diff, verdict.metric(a, "ood_avg_auroc") - verdict.metric(b, "ood_avg_auroc"),
    "observed difference")
  ok(r1.lo > 0 and r1.lo <= r1.diff and r1.diff <= r1.hi, "separated sets: CI above 0")
  local r3 = verdict.bootstrap({ { a = a, b = b } }, "ood_avg_auroc", { B = 60, seed = 4 })
  ok(r3.lo ~= r1.lo, "another seed, other resamples")
  local short = samples(70, 0.3, 11, 12)
  raises("verdict.bootstrap: the ID test sets differ in size (80 and 70 samples): a paired "
    .. "bootstrap needs the same test samples",
    function() return verdict.bootstrap({ { a = a, b = short } }, "acc", { B = 5 }) end)
end

-- "ood{a,b}/<metric>": the mean over named sets, recomputed and bootstrapped where the two
-- sides hold different sets (a leave-one-out result against the reference on the sets they
-- share): the shared set is drawn once for both, a set only one side holds is drawn too, and
-- a set both hold at different sizes is refused
function T.set_means_compare_results_with_different_sets()
  local ref = samples(60, 0.3, 5, 8)
  local loo = samples(60, 0.1, 9, 8)
  loo.sets, loo.ood = { "f1" }, { f1 = loo.ood.f1 }   -- left its near set out
  local b = core.metrics_ood(ref.id.scores.msp, ref.ood.f1.scores.msp)
  eq(verdict.metric(ref, "ood{f1}/auroc"), b.auroc, "one named set")
  local a = core.metrics_ood(ref.id.scores.msp, ref.ood.n1.scores.msp)
  eq(verdict.metric(ref, "ood{n1,f1}/auroc_msp"), (a.auroc + b.auroc) / 2, "two named sets")
  ok(verdict.resamplable("ood{n1,f1}/fpr95"), "resamplable")
  -- the same key on a stored result (hydra.report.metric_of, the seed test's values)
  local res = { metrics = {},
                ood = { { name = "n1", auroc = 0.625 }, { name = "f1", auroc = 0.875 } } }
  eq(require("hydra.report").metric_of(res, "ood{n1,f1}/auroc"), 0.75, "stored mean")
  eq(require("hydra.report").metric_of(res, "ood{n1,x}/auroc"), nil, "a set it lacks: nil")
  local rows = { loo = { [0] = loo }, ref = { [0] = ref } }
  local r = verdict.bootstrap_many(rows, { { a = "loo", b = "ref", key = "ood_avg_auroc",
    key_a = "ood_avg_auroc", key_b = "ood{f1}/auroc" } }, { B = 40, seed = 2 })[1]
  eq(r.diff, verdict.metric(loo, "ood_avg_auroc") - verdict.metric(ref, "ood{f1}/auroc"),
    "observed: the leave-one-out average against the reference on the same set")
  ok(r.lo <= r.diff and r.diff <= r.hi, "interval around it")
  -- the reference first: its near set is drawn first, as when every result holds it
  local r2 = verdict.bootstrap_many({ ref = { [0] = ref }, loo = { [0] = loo } },
    { { a = "ref", b = "loo", key = "ood_avg_auroc", key_a = "ood{f1}/auroc",
        key_b = "ood_avg_auroc" } }, { B = 40, seed = 2 })[1]
  eq(r2.diff, -r.diff, "the same comparison the other way")
  local odd = samples(60, 0.1, 9, 8)
  odd.ood.f1 = { group = "far", scores = { msp = f64({ 1, 2, 3 }) } }
  raises("verdict.bootstrap: OOD set 'f1' differs between the results (60 samples in one, 3 in "
    .. "another): a paired bootstrap needs the same test samples", function()
      return verdict.bootstrap_many({ ref = { [0] = ref }, odd = { [0] = odd } },
        { { a = "ref", b = "odd", key = "ood_avg_auroc" } }, { B = 5 })
    end)
end

-- A resample's metrics from the multiplicities of its rows (verdict.WEIGHTED, the ID means)
-- are the core's metrics on the gathered rows, ties included.
function T.resample_metrics_match_the_gathered_rows()
  local s = samples(90, 0.1, 13, 20)
  -- ties: round every score to a 0.05 grid
  local function rounded(t)
    local v = t:totable()
    for i, x in ipairs(v) do v[i] = math.floor(x * 20 + 0.5) / 20 end
    return f64(v)
  end
  s.id.scores.msp = rounded(s.id.scores.msp)
  for _, n in ipairs(s.sets) do s.ood[n].scores.msp = rounded(s.ood[n].scores.msp) end
  local x = 5
  local function rows(n)
    local t, w = {}, {}
    for i = 1, n do w[i] = 0 end
    for i = 1, n do
      x = (x * 1103515245 + 12345) % 2147483648
      t[i] = x % n
      w[t[i] + 1] = w[t[i] + 1] + 1
    end
    return core.from_table("int64", t), w
  end
  for _ = 1, 5 do
    local ix = { ood = {}, w_ood = {} }
    ix.id, ix.w_id = rows(90)
    for _, n in ipairs(s.sets) do ix.ood[n], ix.w_ood[n] = rows(90) end
    local gid = core.sample_gather(s.id.scores.msp, ix.id)
    for _, n in ipairs(s.sets) do
      local want = core.metrics_ood(gid, core.sample_gather(s.ood[n].scores.msp, ix.ood[n]))
      for _, k in ipairs({ "auroc", "fpr95", "fpr95_id" }) do
        eq(verdict.metric(s, "ood/" .. n .. "/" .. k, ix), want[k], n .. " " .. k)
      end
    end
    local want = core.metrics_id(core.sample_gather(s.id.conf, ix.id),
      core.sample_gather(s.id.correct, ix.id), core.sample_gather(s.id.nll, ix.id),
      core.sample_gather(s.id.brier, ix.id))
    for _, k in ipairs({ "acc", "nll", "brier", "ece" }) do
      near(verdict.metric(s, k, ix), want[k], 1e-12, k)
    end
  end
end

-- Three seeds of constructed results whose verdict is known.
function T.verdicts_of_constructed_comparisons()
  local function run(shift_a, shift_b, key, better)
    local prs, va, vb = {}, {}, {}
    for s = 1, 3 do
      local a, b = samples(100, shift_a, 100 + s, 15), samples(100, shift_b, 200 + s, 15)
      prs[s] = { a = a, b = b }
      va[s], vb[s] = verdict.metric(a, key), verdict.metric(b, key)
    end
    local t = verdict.paired_t(va, vb)
    local boot = verdict.bootstrap(prs, key, { B = 200 })
    near(boot.diff, t.mean, 1e-12, "bootstrap point = mean of the seed differences")
    return (verdict.rule(t, boot, better))
  end
  eq(run(0.4, 0.0, "ood_avg_auroc", "higher"), "holds", "A separates OOD, B does not")
  eq(run(0.0, 0.4, "ood_avg_auroc", "higher"), "fails", "the reverse")
  eq(run(0.0, 0.4, "ood_avg_fpr95", "lower"), "fails", "FPR95: lower is better")
  eq(run(0.4, 0.0, "ood_avg_fpr95", "lower"), "holds", "FPR95 of the separating method")
  eq(run(0.0, 0.0, "ood_avg_auroc", "higher"), "within noise", "no difference")
end

return T
