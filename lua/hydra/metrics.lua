-- lua/hydra/metrics.lua: metrics over hydra.Tensors (wraps core/metrics through hydra.core).
--   metrics.per_sample(set)            per-sample arrays of one prediction set (see below)
--   metrics.classification(ps [, bins]) -> {acc, nll, brier, ece, aece, mce, aurc}
--   metrics.ood(s_id, s_ood)            -> {auroc, aupr_out, aupr_in, fpr95}
--   metrics.reliability / risk_coverage / histogram / range / jaccard / bootstrap_*
-- A "set" is { probs = float32 [N,C], labels = int32 [N] or nil, member_probs = [M,N,C] or nil,
-- logits = [N,C] or nil, member_logits = [M,N,C] or nil }. Conventions: DESIGN §4 and
-- results/README.md (p̄ = mean of member softmaxes, OOD positive, higher score = more OOD).
local core = require("hydra.core")

local M = {}

M.BINS = 15
M.EPS = 1e-12        -- NLL clamp when no logits are available: -log(max(p̄_y, EPS))
M.SUM_TOL = 1e-4     -- |sum_c p_c - 1| allowed in prediction files
M.SCORES = { "msp", "entropy", "mi", "energy", "disagreement" }
M.ID_METRICS = { "acc", "nll", "brier", "ece", "aece", "mce", "aurc" }
M.OOD_METRICS = { "auroc", "fpr95", "aupr_out", "aupr_in" }

M.CONVENTIONS = table.concat({
  "p̄ = mean of member softmaxes (never averaged logits); ŷ = argmax p̄ (lowest class on ties);",
  "conf = max p̄; sums in double.",
  "Acc = mean[ŷ = y]. NLL = -mean log p̄_y: log-mean-exp over members of log-softmax when",
  "logits are stored (/member_logits, or /logits of a single model), else -log max(p̄_y, 1e-12).",
  "Brier = mean of sum_c (p̄_c - [y = c])^2 (summed over classes).",
  "ECE: 15 equal-width bins [b/15, (b+1)/15) on conf, conf = 1.0 in the last bin,",
  "sum_b (n_b/N) |acc_b - conf_b|; MCE = max over non-empty bins; aECE: 15 equal-mass bins",
  "(conf ascending, ties by index; the first N mod 15 bins hold one more sample).",
  "AURC: conf descending (ties by index), mean over k = 1..N of the error rate of the top k.",
  "OOD is the positive class; scores are higher = more OOD: MSP -max p̄, entropy H(p̄),",
  "MI H(p̄) - mean_m H(p_m) (0 for M = 1), energy -logsumexp(mean member logits),",
  "disagreement = fraction of member pairs whose argmaxes differ.",
  "AUROC: Mann-Whitney, ties counted half. AUPR-Out/AUPR-In: step-wise average precision",
  "(one threshold per distinct score) with OOD (resp. ID, negated score) positive.",
  "FPR95: fraction of ID with s >= t, t = the ceil(0.95 n_ood)-th largest OOD score.",
  "OOD avg = unweighted mean over OOD sets. Bootstrap CIs: percentile 2.5/97.5 of B seeded",
  "resamples (ID and OOD resampled separately).",
}, " ")

function M.check_probs(p, tol) core.metrics_check_probs(p, tol or M.SUM_TOL) end
function M.check_labels(y, C) core.metrics_check_labels(y, C) end
function M.check_finite(t, what) core.metrics_check_finite(t, what) end

-- conf float64 [N], pred int32 [N]
function M.predict(p) return core.metrics_predict(p) end
function M.correct(pred, labels) return core.metrics_correct(pred, labels) end
function M.brier(p, labels) return core.metrics_brier(p, labels) end
function M.nll_probs(p, labels) return core.metrics_nll_probs(p, labels) end
function M.nll_logits(z, labels) return core.metrics_nll_logits(z, labels) end

-- One OOD score (float64 [N]) from the tensor it needs (see the header of l_metrics.c).
function M.score(name, t) return core.metrics_score(name, t) end

-- Per-sample arrays of a set: { conf, pred, correct?, nll?, brier?, scores = {name = t},
-- unavailable = {name = reason}, nll_source, energy_source, members }.
-- correct/nll/brier only when the set has labels (an ID or shift set); labels must then be valid.
function M.per_sample(set)
  local ps = { scores = {}, unavailable = {} }
  ps.conf, ps.pred = core.metrics_predict(set.probs)
  ps.members = set.member_probs and set.member_probs:size(1) or 1
  if set.labels then
    ps.correct = core.metrics_correct(ps.pred, set.labels)
    ps.brier = core.metrics_brier(set.probs, set.labels)
    if set.member_logits then
      ps.nll = core.metrics_nll_logits(set.member_logits, set.labels)
      ps.nll_source = "member_logits"
    elseif set.logits and not set.member_probs then
      ps.nll = core.metrics_nll_logits(set.logits, set.labels)
      ps.nll_source = "logits"
    else
      ps.nll = core.metrics_nll_probs(set.probs, set.labels)
      ps.nll_source = "probs"
    end
  end
  ps.scores.msp = core.metrics_score("msp", set.probs)
  ps.scores.entropy = core.metrics_score("entropy", set.probs)
  local members = set.member_probs or set.probs
  ps.scores.mi = core.metrics_score("mi", members)
  ps.scores.disagreement = core.metrics_score("disagreement", members)
  if set.member_logits then
    ps.scores.energy = core.metrics_score("energy", set.member_logits)
    ps.energy_source = "member_logits"
  elseif set.logits then
    ps.scores.energy = core.metrics_score("energy", set.logits)
    ps.energy_source = "logits"
  else
    ps.unavailable.energy = "no /logits or /member_logits"
  end
  return ps
end

function M.classification(ps, bins)
  return core.metrics_id(ps.conf, ps.correct, ps.nll, ps.brier, bins or M.BINS)
end

function M.ood(s_id, s_ood) return core.metrics_ood(s_id, s_ood) end

-- count int64 [bins], acc float64 [bins], conf float64 [bins]
function M.reliability(conf, correct, bins)
  return core.metrics_reliability(conf, correct, bins or M.BINS)
end

function M.risk_coverage(conf, correct, npoints)
  return core.metrics_risk_coverage(conf, correct, npoints)
end

function M.histogram(x, lo, hi, bins) return core.metrics_histogram(x, lo, hi, bins) end
function M.range(x) return core.metrics_range(x) end
function M.mean(x) return core.metrics_mean(x) end
-- J float64 [M,M], mean over pairs
function M.jaccard(gates) return core.metrics_jaccard(gates) end

function M.bootstrap_classification(ps, B, seed, bins)
  return core.metrics_bootstrap_id(ps.conf, ps.correct, ps.nll, ps.brier, B, seed, bins or M.BINS)
end

function M.bootstrap_ood(s_id, s_ood, B, seed)
  return core.metrics_bootstrap_ood(s_id, s_ood, B, seed)
end

return M
