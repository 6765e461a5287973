-- lua/hydra/verdict.lua: the one rule that turns a comparison of two methods into "holds",
-- "within noise" or "fails" (results/README.md, "Verdicts"; paper_repro.md applies it).
--
--   verdict.paired_t(a, b)            -> { n, mean, sd, se, t, df, p, lo, hi } of d = a - b
--                                        over seeds (a[i], b[i] = the two methods on seed i)
--   verdict.samples(f, group)         -> the per-sample arrays of one method's result (an open
--                                        hydra.h5 file, group "/methods/<name>")
--   verdict.metric(s, key [, ix])     -> the metric `key` of samples s (on a resample ix = { id =
--                                        rows, w_id = multiplicities, ood = { [set] = rows },
--                                        w_ood = { [set] = multiplicities } }: AUROC, FPR95,
--                                        FPR95-ID and the ID means from the multiplicities in
--                                        one pass over a merged order sorted once, the rest by
--                                        core.metrics_* on the gathered rows)
--   verdict.bootstrap(pairs, key [, opts]) -> { diff, lo, hi, B, seed } of the mean over seeds of
--                                        metric(a) - metric(b), resampling the test samples
--   verdict.bootstrap_many(rows, comps [, opts]) -> the same for several comparisons on the
--                                        same resamples (and the resampled values it used)
--   verdict.aggregate(comps, common, value, B, seed) -> bootstrap_many's results from stored
--                                        resampled values
--   verdict.rule(t, boot, better)     -> "holds" | "within noise" | "fails", reason
--   verdict.text(t, boot, better, scale) -> the cell text: difference, p, CI and the verdict
--   verdict.pair(va, vb)              -> a, b, seeds: two { [seed] = value } maps on the seeds
--                                        both have, in seed order (the lists paired_t takes)
--   verdict.open_samples(by_seed, files) -> { [seed] = samples } of { [seed] = { run, res } }
--                                        (files: path -> open hydra.h5 file, the caller closes)
--   verdict.compare(runs, a, b, key, better [, opts]) -> the rule on an experiment's runs: A
--                                        and B are hydra.report.value filters, paired by seed
--
-- The rule, for a claim "A is better than B on metric m" (better = "higher" or "lower"):
-- with d_i = m(A, seed i) - m(B, seed i) over n independent seeds,
--   seed test       two-sided paired t-test on the d_i (df = n - 1): p < ALPHA;
--   sample test     paired bootstrap over the test samples: B resamples of the test set (rows
--                   drawn with replacement; the ID set and each OOD set separately), the same rows
--                   for both methods and for every seed; the statistic is the mean over seeds of
--                   the difference; its 100 (1 - ALPHA) % percentile interval excludes 0;
--   holds           both tests reject 0 and the mean difference is in the claim's direction;
--   fails           both reject 0 and the difference is against the claim;
--   within noise    anything else (either test keeps 0, the two disagree, or n < 2).
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

M.ALPHA = 0.05
M.B = 1000         -- bootstrap resamples
M.SEED = 0         -- bootstrap seed

-- ===== Student's t distribution =====

-- log Γ(x), x > 0 (Lanczos, g = 7, 9 terms; relative error below 1e-14)
local LANCZOS = { 0.99999999999980993, 676.5203681218851, -1259.1392167224028,
                  771.32342877765313, -176.61502916214059, 12.507343278686905,
                  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7 }
local function lgamma(x)
  if x < 0.5 then return math.log(math.pi / math.abs(math.sin(math.pi * x))) - lgamma(1 - x) end
  x = x - 1
  local a, t = LANCZOS[1], x + 7.5
  for i = 2, 9 do a = a + LANCZOS[i] / (x + i - 1) end
  return 0.5 * math.log(2 * math.pi) + (x + 0.5) * math.log(t) - t + math.log(a)
end
M.lgamma = lgamma

-- continued fraction of the incomplete beta function (modified Lentz)
local function betacf(a, b, x)
  local tiny = 1e-300
  local qab, qap, qam = a + b, a + 1, a - 1
  local c, d = 1, 1 - qab * x / qap
  if math.abs(d) < tiny then d = tiny end
  d = 1 / d
  local h = d
  for m = 1, 1000 do
    local m2 = 2 * m
    local aa = m * (b - m) * x / ((qam + m2) * (a + m2))
    d = 1 + aa * d; if math.abs(d) < tiny then d = tiny end
    c = 1 + aa / c; if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    h = h * d * c
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
    d = 1 + aa * d; if math.abs(d) < tiny then d = tiny end
    c = 1 + aa / c; if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    local del = d * c
    h = h * del
    if math.abs(del - 1) < 1e-15 then break end
  end
  return h
end

-- the regularized incomplete beta function I_x(a, b)
local function ibeta(x, a, b)
  if x <= 0 then return 0 end
  if x >= 1 then return 1 end
  local front = math.exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * math.log(x)
    + b * math.log(1 - x))
  if x < (a + 1) / (a + b + 2) then return front * betacf(a, b, x) / a end
  return 1 - front * betacf(b, a, 1 - x) / b
end
M.ibeta = ibeta

-- P(|T| >= |t|) for T ~ t(df): the two-sided p-value
function M.t_two_sided(t, df)
  if t ~= t then return 1 end
  if t == math.huge or t == -math.huge then return 0 end
  return ibeta(df / (df + t * t), df / 2, 0.5)
end

-- the q-quantile of t(df), 0.5 <= q < 1 (bisection on the two-sided p-value)
function M.t_quantile(q, df)
  local want = 2 * (1 - q)
  local lo, hi = 0, 1
  while M.t_two_sided(hi, df) > want do hi = hi * 2 end
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if M.t_two_sided(mid, df) > want then lo = mid else hi = mid end
  end
  return (lo + hi) / 2
end

-- Paired t-test of a[i] - b[i] (two lists of the same length, one value per seed). With n < 2
-- the test is not defined: p, t, lo, hi are nil. A zero spread gives p = 0 (all differences
-- equal and non-zero) or p = 1 (all zero).
function M.paired_t(a, b)
  if #a ~= #b then
    err.fail("verdict.paired_t: %d values against %d (one per seed on each side)", #a, #b)
  end
  local n, s = #a, 0
  local d = {}
  for i = 1, n do d[i] = a[i] - b[i]; s = s + d[i] end
  local r = { n = n, mean = n > 0 and s / n or nil }
  if n < 2 then return r end
  local q = 0
  for i = 1, n do q = q + (d[i] - r.mean) ^ 2 end
  r.df = n - 1
  r.sd = math.sqrt(q / r.df)
  r.se = r.sd / math.sqrt(n)
  local tq = M.t_quantile(1 - M.ALPHA / 2, r.df)
  r.lo, r.hi = r.mean - tq * r.se, r.mean + tq * r.se
  if r.se == 0 then
    r.t = r.mean == 0 and 0 or (r.mean > 0 and math.huge or -math.huge)
    r.p = r.mean == 0 and 1 or 0
  else
    r.t = r.mean / r.se
    r.p = M.t_two_sided(r.t, r.df)
  end
  return r
end

-- ===== per-sample data of a result =====

local ID_KEYS = { acc = true, nll = true, brier = true, ece = true, aece = true, mce = true,
                  aurc = true }
local OOD_METRICS = { "aupr_out", "aupr_in", "fpr95_id", "auroc", "fpr95" }   -- longest first
local GROUPS = { "ood_groups_mean", "ood_avg", "ood_near", "ood_far" }

-- The per-sample arrays of the result under `group` of the open hydra.h5 file f (a run's
-- result.h5: "/methods/<name>"; a `hydra eval` result: ""): id = { conf, correct, nll, brier,
-- scores = { [score] = f64 [N] } }, ood = { [set] = { scores = {...}, group } }, sets (near
-- first, as stored), score (the headline score). Arrays are read when first used.
function M.samples(f, group)
  local root = f:attrs(group == "" and "/" or group)
  local function lazy(prefix)
    return setmetatable({}, { __index = function(t, k)
      local path = prefix .. "/" .. k
      if not f:exists(path) then return nil end
      local v = f:read(path)
      rawset(t, k, v)
      return v
    end })
  end
  local s = { file = f, group = group, score = root.score or "msp", sets = {}, ood = {},
              id = lazy(group .. "/id") }
  s.id.scores = lazy(group .. "/id/scores")
  for name in tostring(root.ood_sets or ""):gmatch("[^,]+") do
    local a = f:attrs(group .. "/metrics/ood/" .. name)
    s.sets[#s.sets + 1] = name
    s.ood[name] = { group = a.group or "far", n = a.n,
                    scores = lazy(group .. "/ood/" .. name .. "/scores") }
  end
  return s
end

local function gather(t, rows)
  if rows == nil then return t end
  return core.sample_gather(t, rows)
end

local function need(v, what, s)
  if v == nil then
    err.fail("verdict: no per-sample '%s' under '%s' (the result holds no predictions)", what,
      s.group == "" and "/" or s.group)
  end
  return v
end

-- "<prefix>_<metric>[_<score>]" -> metric, score
local function split_ood(rest)
  for _, k in ipairs(OOD_METRICS) do
    if rest == k then return k, nil end
    if rest:sub(1, #k + 1) == k .. "_" then return k, rest:sub(#k + 2) end
  end
end

-- Which sample sets a metric key reads: "id" and/or the OOD sets; nil when the key has no
-- per-sample form (the +TS metrics, cost, ...).
local function parse(key)
  if ID_KEYS[key] then return { kind = "id", metric = key } end
  local mk, sc = key:match("^misclf_(%a+)_?(.*)$")
  if mk == "auroc" or mk == "aupr" or mk == "fpr95" then
    if mk == "fpr95" and sc ~= "" then return nil end
    return { kind = "misclf", metric = mk, score = sc ~= "" and sc or nil }
  end
  for _, pre in ipairs(GROUPS) do
    if key:sub(1, #pre + 1) == pre .. "_" then
      local m, s = split_ood(key:sub(#pre + 2))
      if m then return { kind = "ood", group = pre, metric = m, score = s } end
    end
  end
  local list, lm = key:match("^ood{([^}]+)}/([%w_]+)$")
  if list then   -- the mean over the named sets (hydra.report's "ood{a,b}/<metric>")
    local mm, s = split_ood(lm)
    local names = {}
    for name in list:gmatch("[^,]+") do names[#names + 1] = name end
    if mm and #names > 0 then return { kind = "ood", sets = names, metric = mm, score = s } end
    return nil
  end
  local set, m = key:match("^ood/(.+)/([%w_]+)$")
  if set then
    local mm, s = split_ood(m)
    if mm then return { kind = "ood", set = set, metric = mm, score = s } end
  end
  return nil
end

-- true when metric `key` can be recomputed from per-sample arrays (and so bootstrapped)
function M.resamplable(key) return parse(key) ~= nil end

-- The ID and OOD scores of a set merged and sorted once (ascending; per samples, set and
-- score): score, kind (0 ID, 1 OOD) and the sample's 1-based index at each position.
local function merged_order(s, name, sc)
  s.orders = s.orders or {}
  local k = name .. "\0" .. sc
  if s.orders[k] then return s.orders[k] end
  local a = s.id.scores[sc]:totable()
  local b = s.ood[name].scores[sc]:totable()
  local all = {}
  for i, v in ipairs(a) do all[#all + 1] = { v, 0, i } end
  for i, v in ipairs(b) do all[#all + 1] = { v, 1, i } end
  table.sort(all, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    if x[2] ~= y[2] then return x[2] < y[2] end
    return x[3] < y[3]
  end)
  local o = { score = {}, kind = {}, idx = {}, n0 = #a, n1 = #b, ties = false }
  for i, e in ipairs(all) do
    o.score[i], o.kind[i], o.idx[i] = e[1], e[2], e[3]
    if i > 1 and all[i - 1][1] == e[1] then o.ties = true end
  end
  s.orders[k] = o
  return o
end

-- AUROC of a resample given as multiplicities w0 (ID) and w1 (OOD) of the samples: the
-- Mann-Whitney count with ties counted half, in one walk over the merged order (no sort per
-- resample); the same number core.metrics_ood gives on the gathered rows.
local function weighted_auroc(o, w0, w1)
  local score, kind, idx = o.score, o.kind, o.idx
  local n = #score
  local U, cum0, k = 0, 0, 1
  if not o.ties then   -- every score distinct: no tie groups to collect
    for j = 1, n do
      if kind[j] == 0 then cum0 = cum0 + w0[idx[j]] else U = U + w1[idx[j]] * cum0 end
    end
    return U / (o.n0 * o.n1)
  end
  while k <= n do
    local g0, g1, v, j = 0, 0, score[k], k
    while j <= n and score[j] == v do
      if kind[j] == 0 then g0 = g0 + w0[idx[j]] else g1 = g1 + w1[idx[j]] end
      j = j + 1
    end
    U = U + g1 * (cum0 + g0 / 2)
    cum0 = cum0 + g0
    k = j
  end
  return U / (o.n0 * o.n1)
end
-- FPR95 (ID flagged at 95 % OOD recall: t = the k-th largest OOD score, k = ceil(0.95 n1), the
-- fraction of ID with s >= t) and FPR95-ID (OOD accepted at 95 % ID recall: t = the k-th
-- smallest ID score, k = ceil(0.95 n0), the fraction of OOD with s <= t) of a resample given as
-- multiplicities (results/README.md; core.metrics_ood's numbers on the gathered rows).
local function weighted_fpr95(o, w0, w1)
  local score, kind, idx = o.score, o.kind, o.idx
  local n = #score
  local k = (95 * o.n1 + 99) // 100
  local c0, c1, t = 0, 0, nil
  for j = n, 1, -1 do
    if t and score[j] < t then break end
    if kind[j] == 0 then c0 = c0 + w0[idx[j]] else c1 = c1 + w1[idx[j]] end
    if not t and c1 >= k then t = score[j] end
  end
  return c0 / o.n0
end

local function weighted_fpr95_id(o, w0, w1)
  local score, kind, idx = o.score, o.kind, o.idx
  local n = #score
  local k = (95 * o.n0 + 99) // 100
  local c0, c1, t = 0, 0, nil
  for j = 1, n do
    if t and score[j] > t then break end
    if kind[j] == 0 then c0 = c0 + w0[idx[j]] else c1 = c1 + w1[idx[j]] end
    if not t and c0 >= k then t = score[j] end
  end
  return c1 / o.n1
end

local WEIGHTED = { auroc = weighted_auroc, fpr95 = weighted_fpr95, fpr95_id = weighted_fpr95_id }
M.WEIGHTED = WEIGHTED
M.merged_order = merged_order

-- every OOD metric of one set and score on rows ix (ix.memo, when given, keeps them per
-- samples, set and score: the keys of one resample share them); AUROC and both FPR95 on a
-- resample from its multiplicities (WEIGHTED: no sort per resample)
local function ood_value(s, name, metric, score, ix)
  local sc = score or s.score
  if WEIGHTED[metric] and ix and ix.w_id then
    need(s.id.scores[sc], "id/scores/" .. sc, s)
    need(need(s.ood[name], "ood/" .. name, s).scores[sc], "ood/" .. name .. "/scores/" .. sc, s)
    return WEIGHTED[metric](merged_order(s, name, sc), ix.w_id, ix.w_ood[name])
  end
  local memo = ix and ix.memo
  local mk = memo and (tostring(s) .. "\0" .. name .. "\0" .. sc)
  local r = memo and memo[mk]
  if not r then
    local a = gather(need(s.id.scores[sc], "id/scores/" .. sc, s), ix and ix.id)
    local o = need(s.ood[name], "ood/" .. name, s)
    local b = gather(need(o.scores[sc], "ood/" .. name .. "/scores/" .. sc, s),
      ix and ix.ood[name])
    r = core.metrics_ood(a, b)
    if memo then memo[mk] = r end
  end
  return r[metric]
end

-- ID metrics that are means of a per-sample array (a resample's: weighted by multiplicity)
local MEANS = { acc = "correct", nll = "nll", brier = "brier" }

-- The value of metric `key` (a result.h5 metric name, as hydra.report.value takes: "acc",
-- "ece", "misclf_auroc", "ood_avg_auroc", "ood_near_fpr95_id_maxlogit", "ood/<set>/auroc", ...)
-- recomputed from the samples s, on rows ix (nil: every sample). Same formulas as `hydra eval`
-- (core/eval/metrics.c), so ix = nil gives the stored value.
function M.metric(s, key, ix)
  local p = parse(key)
  if not p then err.fail("verdict: metric '%s' has no per-sample form", tostring(key)) end
  if p.kind == "id" then
    local id = s.id
    local field = MEANS[p.metric]
    if field and ix and ix.w_id then   -- a per-sample mean: weighted by the multiplicities
      s.lists = s.lists or {}
      local v = s.lists[field]
      if not v then
        v = need(id[field], "id/" .. field, s):totable()
        s.lists[field] = v
      end
      local w, sum = ix.w_id, 0
      for i = 1, #v do sum = sum + w[i] * v[i] end
      return sum / #v
    end
    local r = core.metrics_id(gather(need(id.conf, "id/conf", s), ix and ix.id),
      gather(need(id.correct, "id/correct", s), ix and ix.id),
      gather(need(id.nll, "id/nll", s), ix and ix.id),
      gather(need(id.brier, "id/brier", s), ix and ix.id))
    return r[p.metric]
  elseif p.kind == "misclf" then
    local sc = p.score or s.score
    local r = core.metrics_misclf(gather(need(s.id.scores[sc], "id/scores/" .. sc, s),
      ix and ix.id), gather(need(s.id.correct, "id/correct", s), ix and ix.id))
    return r[p.metric]
  elseif p.set then
    return ood_value(s, p.set, p.metric, p.score, ix)
  elseif p.sets then
    local sum = 0
    for _, name in ipairs(p.sets) do sum = sum + ood_value(s, name, p.metric, p.score, ix) end
    return sum / #p.sets
  end
  -- a group average: unweighted mean over the group's sets (groups mean: of the two averages)
  local function avg(which)
    local sum, n = 0, 0
    for _, name in ipairs(s.sets) do
      if which == nil or s.ood[name].group == which then
        sum = sum + ood_value(s, name, p.metric, p.score, ix)
        n = n + 1
      end
    end
    return n > 0 and sum / n or nil
  end
  if p.group == "ood_avg" then return avg(nil) end
  if p.group == "ood_near" then return avg("near") end
  if p.group == "ood_far" then return avg("far") end
  local near, far = avg("near"), avg("far")
  if near and far then return (near + far) / 2 end
  return near or far
end

-- ===== paired bootstrap over the test samples =====

-- splitmix64: the bootstrap's row draws (a documented, machine-independent stream)
local function stream(seed)
  local state = seed
  return function(n)
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    return (z >> 11) % n
  end
end

-- n rows drawn with replacement: the rows (int64 tensor, 0-based) and how often each sample
-- was drawn (a Lua list, 1-based)
local function rows_of(draw, n)
  local t, w = {}, {}
  for i = 1, n do w[i] = 0 end
  for i = 1, n do
    local r = draw(n)
    t[i] = r
    w[r + 1] = w[r + 1] + 1
  end
  return core.from_table("int64", t), w
end

local function quantile(sorted, q)
  local x = q * (#sorted - 1)
  local i = math.floor(x)
  local f = x - i
  local lo = sorted[i + 1]
  if f == 0 or i + 2 > #sorted then return lo end
  return lo + f * (sorted[i + 2] - lo)
end

-- rows = { [name] = { [seed] = samples } } (verdict.samples of one method per seed), comps = {
-- { a = name, b = name, key = metric [, key_a =, key_b = the metric of each side when they
-- differ, e.g. one score against another] }... }. For each comparison: { diff = the mean over
-- the seeds both rows have of metric(a) - metric(b) on every sample, lo, hi = the percentile
-- interval (ALPHA) of that mean over B resamples, B, seed, n = those seeds }. Each resample
-- draws the ID rows and then each OOD set's rows (in the set order of the first comparison's
-- first result, then any set only other results hold) with replacement from one splitmix64
-- stream seeded with opts.seed (default M.SEED); every comparison, row and seed uses those rows
-- (a paired bootstrap), so the results must hold the same ID samples, and a set two results
-- both hold must have the same size in both. A metric is computed once per row,
-- seed and resample. Second result: those values, { { name, seed, key, reps = { [r] = value },
-- observed } } (M.aggregate turns them into the first).
function M.bootstrap_many(rows, comps, opts)
  opts = opts or {}
  local B, seed = opts.B or M.B, opts.seed or M.SEED
  if #comps == 0 then return {} end
  local function seeds_of(name)
    local r = rows[name]
    if not r then err.fail("verdict.bootstrap: no results for '%s'", tostring(name)) end
    local out = {}
    for s in pairs(r) do out[#out + 1] = s end
    table.sort(out)
    return out
  end
  local common = {}
  for i, c in ipairs(comps) do
    for _, k in ipairs({ c.key_a or c.key, c.key_b or c.key }) do
      if not parse(k) then
        err.fail("verdict.bootstrap: metric '%s' has no per-sample form", tostring(k))
      end
    end
    local inb = {}
    for _, s in ipairs(seeds_of(c.b)) do inb[s] = true end
    common[i] = {}
    for _, s in ipairs(seeds_of(c.a)) do if inb[s] then common[i][#common[i] + 1] = s end end
    if #common[i] == 0 then
      err.fail("verdict.bootstrap: '%s' and '%s' have no seed in common", c.a, c.b)
    end
  end
  local first = rows[comps[1].a][common[1][1]]
  local n_id = need(first.id.correct, "id/correct", first):numel()
  -- the OOD sets drawn: the first result's in its order, then any set another result has
  -- (a result may lack a set: ablation_condition's leave-one-out rows, compared on the sets
  -- they share through "ood{a,b}/<metric>"); a set two results hold must be the same size
  local sizes, order = {}, {}
  local function sets_of(s)
    for _, name in ipairs(s.sets) do
      local sc = need(s.ood[name], "ood/" .. name, s).scores[s.score]
      local n = need(sc, "ood/" .. name .. "/scores", s):numel()
      if not sizes[name] then
        sizes[name] = n
        order[#order + 1] = name
      elseif sizes[name] ~= n then
        err.fail("verdict.bootstrap: OOD set '%s' differs between the results (%d samples "
          .. "in one, %d in another): a paired bootstrap needs the same test samples", name,
          sizes[name], n)
      end
    end
  end
  sets_of(first)
  for _, c in ipairs(comps) do
    for _, name in ipairs({ c.a, c.b }) do
      for _, sd in ipairs(seeds_of(name)) do   -- (seed order: the sets' order is fixed)
        local s = rows[name][sd]
        if need(s.id.correct, "id/correct", s):numel() ~= n_id then
          err.fail("verdict.bootstrap: the ID test sets differ in size (%d and %d samples): a "
            .. "paired bootstrap needs the same test samples", n_id, s.id.correct:numel())
        end
        sets_of(s)
      end
    end
  end
  -- every (row, seed, key) a comparison reads, in a fixed order: its B resampled values and
  -- its value on the test set as it is
  local needed, order_v = {}, {}
  for i, c in ipairs(comps) do
    for _, side in ipairs({ { c.a, c.key_a or c.key }, { c.b, c.key_b or c.key } }) do
      for _, s in ipairs(common[i]) do
        local k = side[1] .. "\0" .. s .. "\0" .. side[2]
        if not needed[k] then
          needed[k] = { name = side[1], seed = s, key = side[2], reps = {} }
          order_v[#order_v + 1] = needed[k]
        end
      end
    end
  end
  local draw = stream(seed)
  for r = 1, B do
    local ix = { ood = {}, w_ood = {}, memo = {} }
    ix.id, ix.w_id = rows_of(draw, n_id)
    for _, name in ipairs(order) do
      ix.ood[name], ix.w_ood[name] = rows_of(draw, sizes[name])
    end
    for _, v in ipairs(order_v) do v.reps[r] = M.metric(rows[v.name][v.seed], v.key, ix) end
  end
  for _, v in ipairs(order_v) do v.observed = M.metric(rows[v.name][v.seed], v.key, nil) end
  local out = M.aggregate(comps, common, function(name, s, key, r)
    local v = needed[name .. "\0" .. s .. "\0" .. key]
    if r then return v.reps[r] end
    return v.observed
  end, B, seed)
  return out, order_v
end

-- The results of bootstrap_many from the resampled values: comps as there, common[i] = the seeds
-- of comparison i (sorted), value(name, seed, key, r) = the metric of a row on resample r (nil:
-- on the test set as it is). bootstrap_many's second result holds these values, so a bootstrap
-- over some seeds can be stored and combined with one over others (hydra.paper's seed parts):
-- the resamples draw the same rows whatever the seeds, and this is the one place that turns
-- them into a difference and its interval.
function M.aggregate(comps, common, value, B, seed)
  local function stats(r)
    local out = {}
    for i, c in ipairs(comps) do
      local sum = 0
      for _, s in ipairs(common[i]) do
        sum = sum + value(c.a, s, c.key_a or c.key, r) - value(c.b, s, c.key_b or c.key, r)
      end
      out[i] = sum / #common[i]
    end
    return out
  end
  local vals = {}
  for i = 1, #comps do vals[i] = {} end
  for r = 1, B do
    for i, v in ipairs(stats(r)) do vals[i][r] = v end
  end
  local observed = stats(nil)
  local out = {}
  for i = 1, #comps do
    table.sort(vals[i])
    out[i] = { diff = observed[i], lo = quantile(vals[i], M.ALPHA / 2),
               hi = quantile(vals[i], 1 - M.ALPHA / 2), B = B, seed = seed, n = #common[i] }
  end
  return out
end

-- prs = { { a = samples, b = samples }, ... } (one pair per seed): bootstrap_many of one
-- comparison.
function M.bootstrap(prs, key, opts)
  if #prs == 0 then err.fail("verdict.bootstrap: no results to compare") end
  local rows = { a = {}, b = {} }
  for i, pr in ipairs(prs) do rows.a[i], rows.b[i] = pr.a, pr.b end
  return M.bootstrap_many(rows, { { a = "a", b = "b", key = key } }, opts)[1]
end

-- ===== pairing by seed =====

-- va, vb = { [seed] = value }: the values of both on the seeds both have, in seed order.
function M.pair(va, vb)
  local seeds = {}
  for s in pairs(va) do if vb[s] ~= nil then seeds[#seeds + 1] = s end end
  table.sort(seeds)
  local a, b = {}, {}
  for i, s in ipairs(seeds) do a[i], b[i] = va[s], vb[s] end
  return a, b, seeds
end

-- by_seed = { [seed] = { run = a run of hydra.report_sweep.collect, res = one of its results } }:
-- the per-sample arrays of each (M.samples of the run's result.h5; files caches the open files
-- by path, the caller closes them).
function M.open_samples(by_seed, files)
  local out = {}
  for s, e in pairs(by_seed) do
    local path = e.run.dir .. "/result.h5"
    files[path] = files[path] or require("hydra.h5").open(path)
    out[s] = M.samples(files[path], e.res.group)
  end
  return out
end

-- ===== the rule =====

local function side(x, sign) return x * sign > 0 end

-- t: verdict.paired_t of a - b; boot: { lo, hi } of a - b (or nil: no sample test); better:
-- "higher" or "lower" (the claim: A better than B). Returns the verdict and its reason.
function M.rule(t, boot, better)
  if better ~= "higher" and better ~= "lower" then
    err.fail("verdict.rule: better must be 'higher' or 'lower', got '%s'", tostring(better))
  end
  local sign = better == "higher" and 1 or -1
  if not t or not t.p then return "within noise", "fewer than 2 seeds: no seed test" end
  if not boot then return "within noise", "no per-sample test" end
  local seed_beyond = t.p < M.ALPHA
  local boot_beyond = boot.lo > 0 or boot.hi < 0
  if seed_beyond and boot_beyond then
    if side(t.mean, sign) and side(boot.lo, sign) and side(boot.hi, sign) then
      return "holds", "both tests beyond noise, in the claim's direction"
    end
    if side(-t.mean, sign) and side(-boot.lo, sign) and side(-boot.hi, sign) then
      return "fails", "both tests beyond noise, against the claim"
    end
    return "within noise", "the two tests disagree in direction"
  end
  if seed_beyond then return "within noise", "only the seed test is beyond noise" end
  if boot_beyond then return "within noise", "only the sample test is beyond noise" end
  return "within noise", "neither test is beyond noise"
end

-- "p 0.074", "p < 0.001"
function M.p_text(p)
  if p < 0.001 then return "p < 0.001" end
  return ("p %.3f"):format(p)
end

-- The text of a verdict cell: "−3.98 (p 0.210; CI −4.52, −3.41): within noise", differences
-- scaled by `scale` (100: percentage points) with `fmt` (default "%.2f").
function M.text(t, boot, better, scale, fmt)
  scale, fmt = scale or 1, fmt or "%.2f"
  local function num(v) return (fmt:format(v * scale):gsub("^%-", "−")) end
  local function signed(v)
    local s = num(v)
    return v * scale >= 0 and ("+" .. s) or s
  end
  local v = M.rule(t, boot, better)
  local parts = {}
  parts[#parts + 1] = t.p and M.p_text(t.p) or ("n = %d"):format(t.n)
  if boot then parts[#parts + 1] = ("CI %s, %s"):format(signed(boot.lo), signed(boot.hi)) end
  return ("%s (%s): %s"):format(t.mean and signed(t.mean) or "–", table.concat(parts, "; "), v)
end

-- The rule on the runs of one experiment (hydra.report_sweep.collect's list: e.runs): the claim
-- "A is better than B on metric `key`" (better = "higher" or "lower"), A and B given as
-- hydra.report.value filters ({ method = "hydra_circ" [, ["config.key"] = value ] }), key a
-- metric key as report.value takes, or { a = key, b = key } when the two sides differ (one
-- score against another). The runs of A and of B are paired by seed (the seeds where both
-- have the metric); the seed test is verdict.paired_t on those pairs, the sample test the
-- paired bootstrap of their result.h5 predictions (verdict.bootstrap_many; none when the
-- metric has no per-sample form, or with opts.boot = false). opts.scale, opts.fmt: as
-- verdict.text (default 100 and "%.2f": points); opts.B, opts.seed: the bootstrap's.
-- Returns nil when no seed has both; else { verdict, reason, text = verdict.text's and the
-- reason ("+2.00 (p 0.074; CI +1.10, +2.90): within noise (only the sample test is beyond
-- noise)"), t, boot, seeds, a = mean of A, b = mean of B over those seeds }.
-- Errors: those of report.value (unknown method, config key or metric, ambiguous filter).
function M.compare(runs, a, b, key, better, opts)
  opts = opts or {}
  local report = require("hydra.report")
  local keys = type(key) == "table" and key or { a = key, b = key }
  local function by_seed(filter, k)
    local out, vals = {}, {}
    for _, m in ipairs(report.matching(runs, filter, k)) do
      local s = math.tointeger(tonumber(m.run.flat.seed or "0"))
      if out[s] then
        err.fail("verdict.compare: method=%s has two runs of seed %d (%s, %s): name the config "
          .. "key that tells them apart in the filter", filter.method, s,
          tostring(out[s].run.dir), tostring(m.run.dir))
      end
      local v = report.metric_of(m.res, k)
      if v ~= nil then out[s], vals[s] = m, v end
    end
    return out, vals
  end
  local ra, va = by_seed(a, keys.a)
  local rb, vb = by_seed(b, keys.b)
  local xa, xb, seeds = M.pair(va, vb)
  if #seeds == 0 then return nil end
  local t = M.paired_t(xa, xb)
  local boot
  if opts.boot ~= false and parse(keys.a) and parse(keys.b) then
    local pa, pb, files = {}, {}, {}
    for _, s in ipairs(seeds) do pa[s], pb[s] = ra[s], rb[s] end
    local ok, res = pcall(function()
      local rows = { a = M.open_samples(pa, files), b = M.open_samples(pb, files) }
      return M.bootstrap_many(rows, { { a = "a", b = "b", key = keys.a, key_a = keys.a,
        key_b = keys.b } }, { B = opts.B, seed = opts.seed })[1]
    end)
    for _, f in pairs(files) do f:close() end
    if not ok then error(res, 0) end
    boot = res
  end
  local v, reason = M.rule(t, boot, better)
  local ma, mb = 0, 0
  for i = 1, #seeds do ma, mb = ma + xa[i], mb + xb[i] end
  return { verdict = v, reason = reason, t = t, boot = boot, seeds = seeds,
           a = ma / #seeds, b = mb / #seeds,
           text = ("%s (%s)"):format(M.text(t, boot, better, opts.scale or 100, opts.fmt),
             reason) }
end

return M
