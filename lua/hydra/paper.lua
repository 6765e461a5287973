-- lua/hydra/paper.lua: the generated tables of paper_repro.md (`hydra repro --write / --check`).
--
--   paper.TABLES, paper.table(name)    the table specs: name, experiment, kind ("metrics" or
--                                      "verdicts"), columns, rows, verdict / comparisons; script
--                                      = true: the experiment script writes the summary itself;
--                                      script_name: the script that runs the experiment's sweep
--                                      when it is not experiments/<experiment>.lua; a row's
--                                      filter may name a score (its "{score}" in column keys);
--                                      row_title: the first column's title (default "Method")
--   paper.summarize(experiment, runs, dir [, opts])  writes the experiment's result summary:
--                                      dir/values.csv (the per-seed metrics of every row) and
--                                      dir/bootstrap.csv (the paired bootstrap of every
--                                      comparison); runs = hydra.report_sweep.collect's list
--   paper.values_text(experiment, runs) -> the text values.csv would get (no bootstrap)
--   paper.values_csv(experiment, rows, keys) / paper.bootstrap_csv(experiment, comps, res)
--                                      the two files' texts (an experiment script that computes
--                                      its own rows, experiments/b2_circuit_knockout.lua)
--   paper.read_summary(dir) -> summary (nil, missing file when absent)
--   paper.render(spec, summary, where) -> the lines of one generated block
--   paper.blocks(text, path) -> the marked blocks of a document
--   paper.write(doc, sumdir) -> names generated, names waiting (a block without its summary
--                                      gets paper.placeholder's line; raises naming the missing
--                                      summary of a block that holds a generated table)
--   paper.check(doc, sumdir) -> problems (one-line texts; empty when up to date), names waiting
--   paper.placeholder(t, where) -> the line of a block waiting for its summary
--
-- A block is the lines between `<!-- hydra:table NAME -->` and `<!-- /hydra:table -->`; the rest
-- of the document is never touched. Summaries live in <sumdir>/<experiment>/ (results/paper/ in
-- the repository: results/README.md, "Paper summaries"). Verdicts: hydra.verdict.
local err = require("hydra.err")
local fs = require("hydra.fs")
local report = require("hydra.report")
local verdict = require("hydra.verdict")
local core = require("hydra.core")
local yaml = require("hydra.yaml")

local M = {}

M.FORMAT = "hydra-paper-summary-1"

-- ===== the specs =====

local function pct(key, title) return { key = key, title = title, scale = 100, fmt = "%.2f" } end
local function raw3(key, title) return { key = key, title = title, scale = 1, fmt = "%.3f" } end

M.COLUMNS = {
  id = { pct("acc", "Acc ↑"), pct("ece", "ECE ↓"), pct("calibration/ece", "ECE +TS ↓"),
         raw3("nll", "NLL ↓"), raw3("calibration/nll", "NLL +TS ↓"),
         pct("misclf_auroc_msp", "Misclf AUROC (MSP) ↑"),
         pct("misclf_auroc_maxlogit", "Misclf AUROC (max-logit) ↑") },
}
M.SCORE_TITLES = { msp = "MSP", maxlogit = "max-logit" }
for _, sc in ipairs({ "msp", "maxlogit" }) do
  local cols = {}
  for _, g in ipairs({ { "avg", "OOD avg" }, { "near", "Near" }, { "far", "Far" } }) do
    cols[#cols + 1] = pct(("ood_%s_auroc_%s"):format(g[1], sc), g[2] .. " AUROC ↑")
    cols[#cols + 1] = pct(("ood_%s_fpr95_%s"):format(g[1], sc), g[2] .. " FPR95 ↓")
    cols[#cols + 1] = pct(("ood_%s_fpr95_id_%s"):format(g[1], sc), g[2] .. " FPR95-ID ↓")
  end
  M.COLUMNS["ood_" .. sc] = cols
end

M.COLUMNS.b2 = { pct("acc", "Acc ↑"), pct("ood_avg_auroc_msp", "OOD avg AUROC ↑"),
                 pct("ood_near_auroc_msp", "Near AUROC ↑"),
                 pct("ood_far_auroc_msp", "Far AUROC ↑"),
                 pct("ood_avg_fpr95_msp", "OOD avg FPR95 ↓") }

M.COLUMNS.acc_ood = M.COLUMNS.b2

-- the training-free tables: "{score}" = each row's score (a row filter's `score`)
M.COLUMNS.training_free_fail = { pct("acc", "Acc ↑"), pct("ece", "ECE ↓"),
  pct("misclf_auroc_{score}", "Fail AUROC ↑"), pct("misclf_fpr95_{score}", "Fail FPR95 ↓"),
  pct("misclf_aupr_{score}", "Fail AUPR ↑") }
M.COLUMNS.training_free_ood = { pct("ood_near_auroc_{score}", "OOD near AUROC ↑"),
  pct("ood_far_auroc_{score}", "OOD far AUROC ↑"), pct("ood_avg_auroc_{score}", "OOD all AUROC ↑"),
  pct("ood_avg_fpr95_{score}", "OOD all FPR95 ↓"),
  pct("ood_avg_aupr_out_{score}", "OOD all AUPR-Out ↑") }

-- Fashion-MNIST-C (the shift set of table_image): accuracy and ECE at each severity, every
-- corruption of that severity pooled (the run's shift sets fashion-mnist-c-s1 .. -s5)
M.COLUMNS.shift_fmnistc = {}
for _, k in ipairs({ { "acc", "Acc ↑" }, { "ece", "ECE ↓" } }) do
  for sev = 1, 5 do
    table.insert(M.COLUMNS.shift_fmnistc, pct(("shift/fashion-mnist-c-s%d/%s"):format(sev, k[1]),
      ("s%d %s"):format(sev, k[2])))
  end
end

-- Proposition 1 (experiments/prop1.lua writes the summary: hydra.prop1.summary_rows)
M.COLUMNS.prop1_points = { raw3("dgap", "ΔL(θ+δθ) − ΔL(θ)"),
  pct("ece_gap_change", "ECE-gap change, highest severity"), pct("clean_acc", "Acc (clean rows)"),
  pct("c2", "C2 holds (% of severities)"), pct("c3", "C3 holds (% of severities)"),
  pct("conclusion", "Conclusion holds (% of severities)") }
M.COLUMNS.prop1_statements = { pct("share", "Holds in (% of pruned points × severities)") }

local CAPTIONS = {
  prop1_points = "Each pruned point (criterion, fine-tuning, heads kept per layer; δθ ≠ 0); "
    .. "ΔL = L_Dn − L_Dt (mean cross-entropy), its change averaged over the Fashion-MNIST-C "
    .. "severities; ECE-gap change = (ECE_n − ECE_t) at θ + δθ minus at θ, at the highest "
    .. "severity, in points; Acc of the pruned model on the clean rows; C2, C3 and the "
    .. "conclusion: share of the severities where they hold (per seed, then mean ± std); no "
    .. "verdict column: gradients and curvatures along δθ have no per-sample form for the "
    .. "sample test of results/README.md",
  prop1_statements = "Share of the (pruned point, severity) pairs of a seed where the statement "
    .. "holds (C1: of the pruned points), mean ± std over seeds; a share, not a verdict: the "
    .. "points of one seed share their base model",
  acc_ood = "Acc on the ID test set; OOD positive, score MSP, OOD avg = unweighted mean over "
    .. "every OOD set, Near / Far = over the near / far group, FPR95 = ID flagged at 95 %% OOD "
    .. "recall",
  b2 = "The base model with no gradient step, heads knocked out (gate 0) in every layer; Acc on "
    .. "the ID test set; OOD positive, score MSP, OOD avg = unweighted mean over every OOD set, "
    .. "Near / Far = over the near / far group, FPR95 = ID flagged at 95 %% OOD recall",
  training_free_fail = "Each row's score in its label (the learned heads: their output); Acc "
    .. "and ECE (15 bins) on the ID test set; Fail = failure prediction on the ID test set "
    .. "(misclassified positive): AUROC, FPR95 = correct samples flagged when 95 %% of the errors "
    .. "are caught, AUPR = average precision of the errors",
  training_free_ood = "Each row's score in its label (the learned heads: their output); OOD "
    .. "positive; near / far = mean over the near / far group, all = over every OOD set; FPR95 "
    .. "= ID flagged at 95 %% OOD recall; AUPR-Out = average precision of the OOD samples",
  shift_fmnistc = "Fashion-MNIST-C: s1 .. s5 = severity 1 .. 5, the 11 corruptions of that "
    .. "severity pooled; Acc and ECE (15 equal-width bins) without temperature scaling; no "
    .. "verdict column: the bootstrap of results/README.md resamples ID and OOD test samples, "
    .. "not shift samples",
  id = "Acc, ECE (15 equal-width bins) and NLL on the ID test set, +TS after temperature "
    .. "scaling fitted on the ID validation split; Misclf AUROC = misclassification detection "
    .. "(misclassified positive) with the MSP and max-logit scores",
  ood = "OOD positive, score %s; OOD avg = unweighted mean over every OOD set, Near / Far = "
    .. "over the near / far group; FPR95 = ID flagged at 95 %% OOD recall (ours and the "
    .. "authors'), FPR95-ID = OOD accepted at 95 %% ID recall",
}

-- metric titles for verdict texts (the column titles without their arrows)
local function key_title(key)
  for _, cols in pairs(M.COLUMNS) do
    for _, c in ipairs(cols) do
      if c.key == key then
        local sc = key:match("_(maxlogit)$") or key:match("_(msp)$")
        local t = c.title:gsub(" ↑$", ""):gsub(" ↓$", "")
        if sc and not t:find("(", 1, true) then t = t .. " (" .. M.SCORE_TITLES[sc] .. ")" end
        return t, c
      end
    end
  end
  return key, { key = key, scale = 1, fmt = "%.4f" }
end
M.key_title = key_title

-- A row's id: its method and the config values that select its runs ("hydra_circ[hydra.members=3]")
local function row_id(method, filter)
  if not filter or next(filter) == nil then return method end
  local parts = {}
  for _, k in ipairs(yaml.sorted_keys(filter)) do parts[#parts + 1] = k .. "=" .. filter[k] end
  return method .. "[" .. table.concat(parts, ",") .. "]"
end
M.row_id = row_id

M.TABLES = {}
local by_name = {}
local function add(t)
  t.kind = t.kind or "metrics"
  M.TABLES[#M.TABLES + 1] = t
  by_name[t.name] = t
end

for _, e in ipairs({ "table_image", "table_text", "table_mnist" }) do
  add({ name = e .. ".id", experiment = e, columns = "id",
        verdict = { ref = "deep_ensemble", key = "acc", better = "higher" } })
  for _, sc in ipairs({ "msp", "maxlogit" }) do
    add({ name = e .. ".ood_" .. sc, experiment = e, columns = "ood_" .. sc,
          verdict = { ref = "deep_ensemble", key = "ood_avg_auroc_" .. sc, better = "higher" } })
  end
end

add({ name = "table_image.shift", experiment = "table_image", columns = "shift_fmnistc" })

-- the paper's claims on the main tables, one comparison each (claim: A better than B on key,
-- better = the direction the claim says)
local function claims(comps)
  local out = {}
  for i, c in ipairs(comps) do out[i] = { a = c[1], b = c[2], key = c[3], better = c[4] } end
  return out
end
for _, e in ipairs({ "table_image", "table_text", "table_mnist" }) do
  add({ name = e .. ".verdicts", experiment = e, kind = "verdicts", comparisons = claims({
    -- the headline: Hydra (Circ) >= Deep Ensembles on OOD detection, by group and by score
    { "hydra_circ", "deep_ensemble", "ood_avg_auroc_msp", "higher" },
    { "hydra_circ", "deep_ensemble", "ood_near_auroc_msp", "higher" },
    { "hydra_circ", "deep_ensemble", "ood_far_auroc_msp", "higher" },
    { "hydra_circ", "deep_ensemble", "ood_avg_fpr95_msp", "lower" },
    { "hydra_circ", "deep_ensemble", "ood_avg_auroc_maxlogit", "higher" },
    -- accuracy: Hydra (Circ) against the Single it is pruned from and against Deep Ensembles
    { "hydra_circ", "single", "acc", "higher" },
    { "hydra_circ", "deep_ensemble", "acc", "higher" },
    -- Hydra improves on the model it is pruned from; ensembling pruned members beats one
    { "hydra_circ", "single", "ood_avg_auroc_msp", "higher" },
    { "hydra_circ", "circavg", "ood_avg_auroc_msp", "higher" },
    { "hydra_taylor", "taylor", "ood_avg_auroc_msp", "higher" },
    -- pruning harms calibration (ECE up), Hydra repairs it (ECE down against the pruned model)
    { "taylor", "single", "ece", "higher" },
    { "circavg", "single", "ece", "higher" },
    { "hydra_circ", "circavg", "ece", "lower" },
    -- MC Dropout between the Single and Deep Ensembles
    { "mc_dropout", "single", "ood_avg_auroc_msp", "higher" },
    { "mc_dropout", "deep_ensemble", "ood_avg_auroc_msp", "lower" },
  }) })
end

-- the remedy row (table_image_remedy, 5 seeds): Hydra (Circ, restarts) against the recipe's
-- Hydra (Circ) and against Deep Ensembles
add({ name = "table_image_remedy.ood_msp", experiment = "table_image_remedy", columns = "ood_msp",
      verdict = { ref = "hydra_circ", key = "ood_avg_auroc_msp", better = "higher" } })
add({ name = "table_image_remedy.verdicts", experiment = "table_image_remedy", kind = "verdicts",
      comparisons = claims({
        { "hydra_circ_restarts", "hydra_circ", "ood_avg_auroc_msp", "higher" },
        { "hydra_circ_restarts", "hydra_circ", "ood_near_auroc_msp", "higher" },
        { "hydra_circ_restarts", "hydra_circ", "ood_far_auroc_msp", "higher" },
        { "hydra_circ_restarts", "hydra_circ", "acc", "higher" },
        { "hydra_circ_restarts", "deep_ensemble", "ood_avg_auroc_msp", "higher" },
        { "hydra_circ", "deep_ensemble", "ood_avg_auroc_msp", "higher" },
      }) })

local PRUNING_ROWS = { { method = "taylor" }, { method = "circavg" }, { method = "hydra_taylor" },
                       { method = "hydra_circ" }, { method = "deep_ensemble" } }
add({ name = "ablation_pruning.id", experiment = "ablation_pruning", columns = "id",
      rows = PRUNING_ROWS })
add({ name = "ablation_pruning.ood_msp", experiment = "ablation_pruning", columns = "ood_msp",
      rows = PRUNING_ROWS })
do
  local comps = {}
  for _, c in ipairs({ { "circavg", "taylor" }, { "hydra_taylor", "taylor" },
                       { "hydra_circ", "circavg" }, { "hydra_circ", "hydra_taylor" },
                       { "hydra_circ", "deep_ensemble" } }) do
    comps[#comps + 1] = { a = c[1], b = c[2], key = "ood_avg_auroc_msp", better = "higher" }
  end
  comps[#comps + 1] = { a = "hydra_circ", b = "deep_ensemble", key = "acc", better = "higher" }
  add({ name = "ablation_pruning.verdicts", experiment = "ablation_pruning", kind = "verdicts",
        comparisons = comps })
end

do
  local rows = {}
  for _, m in ipairs({ { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } }) do
    for k = 1, 6 do
      rows[#rows + 1] = { method = m[1], filter = { ["hydra.members"] = tostring(k) },
                          label = ("%s, M = %d"):format(m[2], k),
                          vs = k > 1 and (m[1] .. "[hydra.members=" .. (k - 1) .. "]") or nil }
    end
  end
  add({ name = "ablation_members.ood_msp", experiment = "ablation_members",
        columns = "ood_msp", rows = rows,
        verdict = { key = "ood_avg_auroc_msp", better = "higher", what = "the row with M - 1" } })
  -- the paper's claim, more members help: the largest ensemble against one pruned member
  local comps = {}
  for _, m in ipairs({ "hydra_taylor", "hydra_circ" }) do
    comps[#comps + 1] = { a = m .. "[hydra.members=6]", b = m .. "[hydra.members=1]",
                          key = "ood_avg_auroc_msp", better = "higher" }
  end
  add({ name = "ablation_members.verdicts", experiment = "ablation_members", kind = "verdicts",
        comparisons = comps })
end

do
  local rows = {}
  for _, m in ipairs({ { "hydra_taylor", "Hydra (Taylor)" }, { "hydra_circ", "Hydra (Circ)" } }) do
    rows[#rows + 1] = { method = m[1], filter = { ["fuse.mlp"] = "average" },
                        label = m[2] .. ", merged MLP (fuse.mlp=average)" }
    rows[#rows + 1] = { method = m[1], filter = { ["fuse.mlp"] = "member" },
                        label = m[2] .. ", per-member MLP (fuse.mlp=member)",
                        vs = m[1] .. "[fuse.mlp=average]" }
  end
  add({ name = "ablation_mlp_merge.ood_msp", experiment = "ablation_mlp_merge",
        columns = "ood_msp", rows = rows,
        verdict = { key = "ood_avg_auroc_msp", better = "higher",
                    what = "the same method with the merged MLP" } })
end

do
  local comps = {}
  for _, b in ipairs({ "random", "low_importance", "none" }) do
    comps[#comps + 1] = { a = "circuit", b = b, key = "ood_avg_auroc_msp", better = "lower" }
  end
  local rows = {}
  for _, r in ipairs({ "none", "circuit", "low_importance", "random" }) do
    rows[#rows + 1] = { method = r }
  end
  -- summaries written by experiments/b2_circuit_knockout.lua itself (no run folders)
  add({ name = "b2_circuit_knockout.knockout", experiment = "b2_circuit_knockout",
        columns = "b2", rows = rows, script = true })
  add({ name = "b2_circuit_knockout.verdicts", experiment = "b2_circuit_knockout",
        kind = "verdicts", comparisons = comps, script = true })
end

do
  local rows = {}
  for k = 8, 1, -1 do
    local f = { ["hydra.keep_heads"] = tostring(k) }
    local kept = ("%d head%s kept"):format(k, k == 1 and "" or "s")
    rows[#rows + 1] = { method = "taylor", filter = f, label = "Taylor, " .. kept }
    rows[#rows + 1] = { method = "circavg", filter = f, vs = "taylor[hydra.keep_heads=" .. k .. "]",
                        label = "CircAvg, " .. kept }
  end
  add({ name = "ablation_heads.acc_ood", experiment = "ablation_heads", columns = "acc_ood",
        rows = rows, verdict = { key = "ood_avg_auroc_msp", better = "higher",
                                 what = "Taylor at the same number of heads" } })
end

do
  local function f(bootstrap, objectives, penalty)
    return { ["hydra.diversity.bootstrap"] = bootstrap, ["hydra.diversity.objectives"] = objectives,
             ["hydra.diversity.overlap_penalty"] = penalty }
  end
  local none = f("false", "[avg]", "0.0")
  local ref = row_id("hydra_circ", none)
  local rows = { { method = "hydra_circ", filter = none, label = "none" } }
  for _, r in ipairs({ { "bootstrap", f("true", "[avg]", "0.0") },
                       { "objectives", f("false", "[acc, ood, avg]", "0.0") },
                       { "overlap", f("false", "[avg]", "0.5") },
                       { "all", f("true", "[acc, ood, avg]", "0.5") } }) do
    rows[#rows + 1] = { method = "hydra_circ", filter = r[2], label = r[1], vs = ref }
  end
  add({ name = "ablation_diversity.acc_ood", experiment = "ablation_diversity",
        columns = "acc_ood", rows = rows,
        verdict = { key = "ood_avg_auroc_msp", better = "higher",
                    what = "no source of diversity (none)" } })
end

-- the training-free tables (experiments/table_training_free.lua: the image and the text
-- backbone), every row against the trained ViLU-style head; the paper's claim is the row
-- "Hydra (Circ), no fine-tuning (MSP)"
-- the rows of experiments/table_training_free.lua's tables: method, score, label
M.TRAINING_FREE_ROWS = {
  { "single", "msp", "Single (MSP)" },
  { "single", "maxlogit", "Single (max-logit)" },
  { "single", "energy", "Single (energy)" },
  { "taylor", "msp", "Taylor, no fine-tuning (MSP)" },
  { "circavg", "msp", "CircAvg, no fine-tuning (MSP)" },
  { "hydra_taylor", "msp", "Hydra (Taylor), no fine-tuning (MSP)" },
  { "hydra_circ", "msp", "Hydra (Circ), no fine-tuning (MSP)" },
  { "hydra_circ", "energy", "Hydra (Circ), no fine-tuning (energy)" },
  { "vilu", "learned", "ViLU-style head, trained (its output)" },
  { "confidnet", "learned", "ConfidNet-style head, trained (its output)" },
}
do
  local rows = {}
  for _, r in ipairs(M.TRAINING_FREE_ROWS) do
    rows[#rows + 1] = { method = r[1], filter = { score = r[2] }, label = r[3],
                        vs = r[1] ~= "vilu" and "vilu[score=learned]" or nil }
  end
  -- script_name: the experiment script that runs both sweeps (named by a missing summary)
  for _, e in ipairs({ "table_training_free", "table_training_free_text" }) do
    add({ name = e .. ".failure", experiment = e, columns = "training_free_fail", rows = rows,
          script_name = "table_training_free",
          verdict = { key = "misclf_auroc_{score}", better = "higher",
                      what = "the ViLU-style head" } })
    add({ name = e .. ".ood", experiment = e, columns = "training_free_ood", rows = rows,
          script_name = "table_training_free",
          verdict = { key = "ood_avg_auroc_{score}", better = "higher",
                      what = "the ViLU-style head" } })
  end
end

-- ablation_condition: Hydra (Circ) against Deep Ensembles at each point of its sweep (the
-- filters name the key each point changes; the reference has the paper_condition profile's
-- values of all of them)
do
  local ref = { ["model.n_heads"] = "8", ["model.d_model"] = "64", ["train.epochs"] = "3",
                ["train.augment.random_crop"] = "false", ["data.ood_val"] = "ood-val-image",
                ["hydra.members"] = "3" }
  local points = { { ref, "reference" },
                   { { ["model.n_heads"] = "16" }, "16 heads per layer (8 kept)" },
                   { { ["model.d_model"] = "128" }, "width 128" },
                   { { ["train.epochs"] = "12" }, "12 base epochs" },
                   { { ["train.augment.random_crop"] = "true" }, "augmentation" } }
  for _, x in ipairs({ "mnist", "opencv-digits", "notmnist", "glyphs" }) do
    points[#points + 1] = { { ["data.ood_val"] = "ood-val-" .. x },
                            ("search on ood-val-%s, %s not tested"):format(x, x) }
  end
  for _, m in ipairs({ 1, 2, 4, 5, 6 }) do
    points[#points + 1] = { { ["hydra.members"] = tostring(m) }, ("M = %d"):format(m) }
  end
  local rows = {}
  for _, p in ipairs(points) do
    rows[#rows + 1] = { method = "deep_ensemble", filter = p[1],
                        label = "Deep Ensembles, " .. p[2] }
    rows[#rows + 1] = { method = "hydra_circ", filter = p[1], label = "Hydra (Circ), " .. p[2],
                        vs = row_id("deep_ensemble", p[1]) }
  end
  add({ name = "ablation_condition.acc_ood", experiment = "ablation_condition",
        columns = "acc_ood", rows = rows,
        verdict = { key = "ood_avg_auroc_msp", better = "higher",
                    what = "Deep Ensembles at the same setting" } })
end

-- prop1: summaries written by experiments/prop1.lua itself (no run folders)
do
  local points = {}
  for _, m in ipairs({ "taylor", "circuit" }) do
    for _, ft in ipairs({ 0, 1 }) do
      for _, k in ipairs({ 8, 6, 4, 2, 1 }) do
        if ft > 0 or k < 8 then   -- 8 heads without fine-tuning: theta itself, dtheta = 0
          local f = { ["finetune.epochs"] = tostring(ft), ["hydra.keep_heads"] = tostring(k) }
          points[#points + 1] = { method = m, filter = f }
        end
      end
    end
  end
  add({ name = "prop1.points", experiment = "prop1", columns = "prop1_points", rows = points,
        script = true, row_title = "Pruned point" })
  local statements = {}
  for _, id in ipairs({ "c1", "c2", "c3", "conclusion", "second_order", "ece_gap",
                        "nll_gap" }) do
    statements[#statements + 1] = { method = id }
  end
  add({ name = "prop1.statements", experiment = "prop1", columns = "prop1_statements",
        rows = statements, script = true, row_title = "Statement" })
end

function M.table(name) return by_name[name] end

local function tables_of(experiment)
  local out = {}
  for _, t in ipairs(M.TABLES) do if t.experiment == experiment then out[#out + 1] = t end end
  return out
end
M.tables_of = tables_of

function M.experiments()
  local out, seen = {}, {}
  for _, t in ipairs(M.TABLES) do
    if not seen[t.experiment] then seen[t.experiment] = true; out[#out + 1] = t.experiment end
  end
  return out
end

-- ===== rows =====


-- A row's filter may hold `score` (not a config key): the OOD / failure score of its metrics,
-- put in place of "{score}" in the column keys (the training-free tables: one run, several
-- scores of one method).
local function matches(run, filter)
  for k, v in pairs(filter or {}) do
    if k ~= "score" and run.flat[k] ~= v then return false end
  end
  return true
end

-- the metric key of `key` (a column key, "{score}" for the row's score) for a row
local function key_for(key, row)
  local sc = row.filter and row.filter.score
  return sc and (key:gsub("{score}", sc)) or key
end

-- The rows of the experiment's tables, resolved against its runs: { id, method, filter, label,
-- by_seed = { [seed] = { run, res } } }, in table order (a table without rows: every method of
-- the runs, in their order).
local function resolve_rows(experiment, runs)
  local out, seen = {}, {}
  -- optional: a row only a comparison names (a run without that method leaves it out)
  local function add_row(method, filter, optional, label)
    local id = row_id(method, filter)
    if seen[id] then return end
    local row = { id = id, method = method, filter = filter, by_seed = {} }
    for _, r in ipairs(runs) do
      if matches(r, filter) then
        for _, res in ipairs(r.loaded.results or {}) do
          if res.name == method then
            local seed = math.tointeger(tonumber(r.flat.seed))
            if row.by_seed[seed] then
              err.fail("paper: row '%s' of %s matches two runs of seed %d (%s, %s): name the "
                .. "config key that tells them apart in the row's filter", id, experiment, seed,
                row.by_seed[seed].run.dir, r.dir)
            end
            row.by_seed[seed] = { run = r, res = res }
            row.label = row.label or res.method
          end
        end
      end
    end
    if not row.label and optional then return end
    if not row.label then
      err.fail("paper: no run of %s has method '%s'%s", experiment, method,
        filter and next(filter) and (" with " .. id:match("%[(.*)%]$")) or "")
    end
    if label then
      row.label = label
    elseif filter and next(filter) then
      row.label = row.label .. " (" .. id:match("%[(.*)%]$"):gsub(",", ", ") .. ")"
    end
    seen[id] = true
    out[#out + 1] = row
  end
  for _, t in ipairs(tables_of(experiment)) do
    if t.rows then
      for _, r in ipairs(t.rows) do add_row(r.method, r.filter, false, r.label) end
    elseif t.kind == "metrics" then
      for _, r in ipairs(runs) do
        for _, name in ipairs(r.loaded.methods or {}) do add_row(name, nil) end
      end
    end
    for _, c in ipairs(t.comparisons or {}) do add_row(c.a, nil, true); add_row(c.b, nil, true) end
  end
  return out
end

-- the comparisons of a table: { a = row id, b = row id, key, better }
local function comparisons(t, row_ids)
  if t.kind == "verdicts" then return t.comparisons end
  local out = {}
  if not t.verdict then return out end
  for _, id in ipairs(row_ids) do
    local ref = t.verdict.ref
    if t.rows then
      for _, r in ipairs(t.rows) do
        if row_id(r.method, r.filter) == id then ref = r.vs or ref end
      end
    end
    if ref and ref ~= id then
      out[#out + 1] = { a = id, b = ref, key = t.verdict.key, better = t.verdict.better }
    end
  end
  return out
end

local function table_row_ids(t, summary_rows)
  if t.kind == "verdicts" then return {} end
  local ids = {}
  if t.rows then
    for i, r in ipairs(t.rows) do ids[i] = row_id(r.method, r.filter) end
  else
    for _, r in ipairs(summary_rows) do
      if not r.id:find("[", 1, true) then ids[#ids + 1] = r.id end
    end
  end
  return ids
end

-- ===== summaries =====

local csv_field = report.csv_field

local function num(v) return ("%.17g"):format(v) end

-- Every key a table of the experiment shows or compares.
local function keys_of(experiment)
  local keys, seen = {}, {}
  local function add_key(k) if not seen[k] then seen[k] = true; keys[#keys + 1] = k end end
  for _, t in ipairs(tables_of(experiment)) do
    for _, c in ipairs(M.COLUMNS[t.columns] or {}) do add_key(c.key) end
    if t.verdict then add_key(t.verdict.key) end
    for _, c in ipairs(t.comparisons or {}) do add_key(c.key) end
  end
  return keys
end

local function header(experiment, what)
  return ("# %s %s: %s (hydra repro --write; results/README.md, \"Paper summaries\")\n")
    :format(M.FORMAT, experiment, what)
end

-- The text of values.csv: rows = { { id, label, values = { [seed] = { [key] = value } } } } in
-- row order, keys in column order (missing values are left out).
function M.values_csv(experiment, rows, keys)
  local lines = { header(experiment, "the per-seed metrics of every row"),
                  "row,label,seed,key,value\n" }
  for _, row in ipairs(rows) do
    local seeds = {}
    for s in pairs(row.values) do seeds[#seeds + 1] = s end
    table.sort(seeds)
    for _, s in ipairs(seeds) do
      for _, k in ipairs(keys) do
        local v = row.values[s][k]
        if type(v) == "number" then
          lines[#lines + 1] = table.concat({ csv_field(row.id), csv_field(row.label), tostring(s),
            k, num(v) }, ",") .. "\n"
        end
      end
    end
  end
  return table.concat(lines)
end

-- The text of bootstrap.csv: comps = { { a, b, key } }, res = verdict.bootstrap_many's results.
function M.bootstrap_csv(experiment, comps, res)
  local lines = { header(experiment, "paired bootstrap over the test samples of every comparison"),
                  "a,b,key,resamples,boot_seed,seeds,diff,lo,hi\n" }
  for i, c in ipairs(comps) do
    local r = res[i]
    lines[#lines + 1] = table.concat({ csv_field(c.a), csv_field(c.b), c.key, tostring(r.B),
      tostring(r.seed), tostring(r.n), num(r.diff), num(r.lo), num(r.hi) }, ",") .. "\n"
  end
  return table.concat(lines)
end

function M.values_text(experiment, runs)
  local rows = resolve_rows(experiment, runs)
  local keys = keys_of(experiment)
  for _, row in ipairs(rows) do
    row.values = {}
    for s, e in pairs(row.by_seed) do
      row.values[s] = {}
      for _, k in ipairs(keys) do row.values[s][k] = report.metric_of(e.res, key_for(k, row)) end
    end
  end
  return M.values_csv(experiment, rows, keys), rows
end

-- The comparisons comps grouped by the OOD sets of their first row (samples[row][seed].sets, in
-- order), groups in order of first appearance: { { comps = {...}, at = { index in comps } } }.
function M.set_groups(comps, samples)
  local groups, by = {}, {}
  for i, c in ipairs(comps) do
    local _, smp = next(samples[c.a])
    local sig = table.concat(smp.sets or {}, "\0")
    local g = by[sig]
    if not g then g = { comps = {}, at = {} }; by[sig] = g; groups[#groups + 1] = g end
    g.comps[#g.comps + 1] = c
    g.at[#g.at + 1] = i
  end
  return groups
end

-- The rows and comparisons of an experiment's runs: values.csv's text, rows, comps (each
-- { a, b, key, key_a, key_b }: the comparisons a table makes whose metrics have a per-sample
-- form), rows by id.
local function prepare(experiment, runs)
  local vtext, rows = M.values_text(experiment, runs)
  local by_id = {}
  for _, r in ipairs(rows) do by_id[r.id] = r end
  local comps, seen = {}, {}
  for _, t in ipairs(tables_of(experiment)) do
    for _, c in ipairs(comparisons(t, table_row_ids(t, rows))) do
      local k = c.a .. "\0" .. c.b .. "\0" .. c.key
      local ka = by_id[c.a] and key_for(c.key, by_id[c.a])
      local kb = by_id[c.b] and key_for(c.key, by_id[c.b])
      if not seen[k] and ka and kb and verdict.resamplable(ka) and verdict.resamplable(kb) then
        seen[k] = true
        comps[#comps + 1] = { a = c.a, b = c.b, key = c.key, key_a = ka, key_b = kb }
      end
    end
  end
  return vtext, rows, comps, by_id
end

-- The paired bootstrap of comps on the runs' per-sample arrays: results in the order of comps,
-- and the groups ({ comps, at, values = bootstrap_many's resampled values }).
local function bootstrap_runs(comps, by_id, opts)
  -- the per-sample arrays of every compared row (files stay open until the bootstrap is done)
  local files, samples = {}, {}
  for _, c in ipairs(comps) do
    for _, id in ipairs({ c.a, c.b }) do
      samples[id] = samples[id] or verdict.open_samples(by_id[id].by_seed, files)
    end
  end
  -- one paired bootstrap per group of comparisons over the same OOD sets (ablation_condition's
  -- leave-one-out rows leave a set out), so that every comparison draws the rows a bootstrap of
  -- it alone draws and its interval is the one the experiment script prints for it
  -- (verdict.compare); results put back in the order of comps
  local res, groups = {}, nil
  local ok, e = pcall(function()
    groups = M.set_groups(comps, samples)
    for _, g in ipairs(groups) do
      local r
      r, g.values = verdict.bootstrap_many(samples, g.comps, { B = opts.B, seed = opts.seed })
      for j, i in ipairs(g.at) do res[i] = r[j] end
    end
  end)
  for _, f in pairs(files) do f:close() end
  if not ok then error(e, 0) end
  return res, groups
end

-- the lines of a CSV text that are neither comments nor its header
local function data_lines(text, header_prefix)
  local out = {}
  for line in (text or ""):gmatch("[^\n]+") do
    if not line:find("^#") and line:sub(1, #header_prefix) ~= header_prefix then
      out[#out + 1] = line
    end
  end
  return out
end

-- Writes dir/values.csv and dir/bootstrap.csv of `experiment` from its runs (opts.B, opts.seed:
-- the bootstrap's resamples and seed); returns up_to_date = true, writing nothing and running
-- no bootstrap, when both already hold what these runs give.
function M.summarize(experiment, runs, dir, opts)
  opts = opts or {}
  local vtext, rows, comps, by_id = prepare(experiment, runs)
  -- up to date: values.csv as these runs give it, and bootstrap.csv over the same comparisons
  -- at the same resamples and seed (a rerun of --write over unchanged runs: no bootstrap again)
  local bpath = dir .. "/bootstrap.csv"
  if fs.read_file(dir .. "/values.csv") == vtext and core.stat(bpath) == "file" then
    local B, seed = opts.B or verdict.B, opts.seed or verdict.SEED
    local want = {}
    for i, c in ipairs(comps) do
      want[i] = table.concat({ csv_field(c.a), csv_field(c.b), c.key, tostring(B),
        tostring(seed) }, ",") .. ","
    end
    local got = data_lines(fs.read_file(bpath), "a,b,key,")
    local same = #got == #want
    for i = 1, #want do same = same and got[i]:sub(1, #want[i]) == want[i] end
    if same then
      return { values = dir .. "/values.csv", bootstrap = bpath, rows = #rows,
               comparisons = #comps, up_to_date = true }
    end
  end
  local res = bootstrap_runs(comps, by_id, opts)
  require("hydra.output").mkdir_p(dir, "paper")
  report.write_text(dir .. "/values.csv", vtext)
  report.write_text(dir .. "/bootstrap.csv", M.bootstrap_csv(experiment, comps, res))
  return { values = dir .. "/values.csv", bootstrap = bpath, rows = #rows,
           comparisons = #comps }
end

-- one CSV line (RFC 4180 quoting, as report.csv_field writes) -> fields
local function csv_split(line, path, n)
  local out, i = {}, 1
  while i <= #line + 1 do
    if line:sub(i, i) == '"' then
      local j, buf = i + 1, {}
      while true do
        local q = line:find('"', j, true)
        if not q then err.fail("paper: %s:%d: unterminated quoted field", path, n) end
        buf[#buf + 1] = line:sub(j, q - 1)
        if line:sub(q + 1, q + 1) == '"' then buf[#buf + 1] = '"'; j = q + 2
        else i = q + 1; break end
      end
      out[#out + 1] = table.concat(buf)
      if i <= #line and line:sub(i, i) ~= "," then
        err.fail("paper: %s:%d: expected ',' after a quoted field", path, n)
      end
      i = i + 1
    else
      local c = line:find(",", i, true) or (#line + 1)
      out[#out + 1] = line:sub(i, c - 1)
      i = c + 1
    end
  end
  return out
end

-- ===== seed parts =====
-- A summary built one seed at a time (results/README.md, "Seed parts"): the runs of one seed
-- give dir/values.csv (that seed's lines) and dir/replicates.h5, the bootstrap's resampled
-- value of every (row, metric) a comparison reads, at each of the B resamples, and on the test
-- set as it is. The resamples draw the same rows whatever the seeds (the draws depend only on
-- the test sets' sizes), so merging the parts of every seed gives, bit for bit, the summary
-- of all the runs at once (verdict.aggregate does the arithmetic in both).
M.PART_FORMAT = "hydra-paper-part-1"

local function comp_text(c, g)
  return table.concat({ c.a, c.b, c.key, c.key_a or c.key, c.key_b or c.key, tostring(g) }, "\t")
end

-- Writes the part of the runs of one seed into dir (values.csv, replicates.h5); returns
-- { seed, rows, comparisons, up_to_date = true when both files already hold what these runs give
-- at opts.B / opts.seed }.
function M.summarize_part(experiment, runs, dir, opts)
  opts = opts or {}
  local B, bseed = opts.B or verdict.B, opts.seed or verdict.SEED
  local seed
  for _, r in ipairs(runs) do
    local s = math.tointeger(tonumber(r.flat.seed))
    if seed and s ~= seed then
      err.fail("paper: a seed part of %s takes the runs of one seed, got seeds %d and %s",
        experiment, seed, tostring(s))
    end
    seed = s
  end
  if not seed then err.fail("paper: a seed part of %s needs at least one run", experiment) end
  local vtext, rows, comps, by_id = prepare(experiment, runs)
  local h5 = require("hydra.h5")
  local rpath = dir .. "/replicates.h5"
  -- up to date: the same values, and a replicates file of this seed, resamples, bootstrap seed
  -- and comparisons (their group index is the bootstrap's, not compared); a file that does not
  -- read is written again
  local function up_to_date()
    local f <close> = h5.open(rpath)
    local a = f:attrs("/")
    if a.format ~= M.PART_FORMAT or a.experiment ~= experiment or a.seed ~= seed
        or a.resamples ~= B or a.boot_seed ~= bseed then
      return false
    end
    local got = f:read_strings("/comparisons")
    if #got ~= #comps then return false end
    for i, c in ipairs(comps) do
      local want = comp_text(c, "")
      if got[i]:sub(1, #want) ~= want then return false end
    end
    return true
  end
  if fs.read_file(dir .. "/values.csv") == vtext and h5.exists(rpath) then
    local ok, same = pcall(up_to_date)
    if ok and same then
      return { seed = seed, rows = #rows, comparisons = #comps, up_to_date = true }
    end
  end
  local _, groups = bootstrap_runs(comps, by_id, { B = B, seed = bseed })
  require("hydra.output").mkdir_p(dir, "paper")
  local f <close> = h5.create(rpath)
  local ctext = {}
  for gi, g in ipairs(groups) do
    for j, i in ipairs(g.at) do ctext[i] = comp_text(g.comps[j], gi) end
    local names, flat, obs = {}, {}, {}
    for vi, v in ipairs(g.values) do
      names[vi] = v.name .. "\t" .. v.key
      for r = 1, B do flat[#flat + 1] = v.reps[r] end
      obs[vi] = v.observed
    end
    local gp = ("/groups/%d"):format(gi)
    f:write_strings(gp .. "/values", names)
    f:write(gp .. "/resampled", core.from_table("float64", flat, { #names, B }))
    f:write(gp .. "/observed", core.from_table("float64", obs, { #names }))
  end
  f:write_strings("/comparisons", ctext)
  f:set_attr("/", "format", M.PART_FORMAT)
  f:set_attr("/", "experiment", experiment)
  f:set_attr("/", "seed", seed)
  f:set_attr("/", "resamples", B)
  f:set_attr("/", "boot_seed", bseed)
  f:set_attr("/", "groups", #groups)
  f:commit()
  report.write_text(dir .. "/values.csv", vtext)
  return { seed = seed, rows = #rows, comparisons = #comps }
end

-- The seed parts in an experiment's summary folder edir: { [seed] = dir }, and the seeds
-- sorted (folders named seed-<s>).
function M.seed_parts(edir)
  local out, seeds = {}, {}
  if core.stat(edir) ~= "dir" then return out, seeds end
  for _, name in ipairs(core.listdir(edir)) do
    local s = math.tointeger(tonumber(name:match("^seed%-(%d+)$") or ""))
    if s and core.stat(edir .. "/" .. name) == "dir" then
      out[s] = edir .. "/" .. name
      seeds[#seeds + 1] = s
    end
  end
  table.sort(seeds)
  return out, seeds
end

-- one part: { seed, B, boot_seed, comps = { lines }, groups = { [g] = { [name \t key] =
-- { reps, observed } } }, values = { data lines of values.csv } }
local function read_part(experiment, dir)
  local h5 = require("hydra.h5")
  local rpath, vpath = dir .. "/replicates.h5", dir .. "/values.csv"
  local vtext = fs.read_file(vpath)
  if not vtext then err.fail("paper: seed part %s: cannot read '%s'", dir, vpath) end
  local f <close> = err.wrap("paper", h5.open, rpath)
  local a = f:attrs("/")
  if a.format ~= M.PART_FORMAT then
    err.fail("paper: %s: expected the attribute format = '%s', got '%s'", rpath, M.PART_FORMAT,
      tostring(a.format))
  end
  if a.experiment ~= experiment then
    err.fail("paper: %s: a part of experiment '%s', expected '%s'", rpath, tostring(a.experiment),
      experiment)
  end
  for _, k in ipairs({ "seed", "resamples", "boot_seed", "groups" }) do
    local v = a[k]
    if type(v) ~= "number" or math.tointeger(v) == nil or v < 0 then
      err.fail("paper: %s: expected an integer attribute %s >= 0, got %s", rpath, k, tostring(v))
    end
  end
  local function read(fn, name, dtype)
    return err.wrap("paper: " .. rpath, fn, f, name, dtype)
  end
  local p = { seed = math.tointeger(a.seed), B = math.tointeger(a.resamples),
              boot_seed = math.tointeger(a.boot_seed), dir = dir,
              comps = read(f.read_strings, "/comparisons"), groups = {},
              values = data_lines(vtext, "row,label,seed,key,value") }
  for gi = 1, math.tointeger(a.groups) do
    local gp = ("/groups/%d"):format(gi)
    local names = read(f.read_strings, gp .. "/values")
    local reps = read(f.read, gp .. "/resampled", "float64")
    local obs = read(f.read, gp .. "/observed", "float64"):totable()
    local shape = reps:shape()
    if #shape ~= 2 or shape[1] ~= #names or shape[2] ~= p.B or #obs ~= #names then
      err.fail("paper: %s: group %d: expected %d x %d resampled and %d observed values", rpath, gi,
        #names, p.B, #names)
    end
    reps = reps:totable()
    local g = {}
    for vi, name in ipairs(names) do g[name] = { reps = reps[vi], observed = obs[vi] } end
    p.groups[gi] = g
  end
  return p
end

-- Merges the seed parts in part_dirs into dir/values.csv and dir/bootstrap.csv: the files
-- M.summarize writes from all their runs at once. Raises when the parts disagree (resamples,
-- bootstrap seed, comparisons) or two hold the same seed. Returns { seeds, rows, comparisons }.
function M.merge_parts(experiment, part_dirs, dir)
  local parts = {}
  for _, d in ipairs(part_dirs) do parts[#parts + 1] = read_part(experiment, d) end
  if #parts == 0 then err.fail("paper: no seed part of %s to merge", experiment) end
  table.sort(parts, function(x, y) return x.seed < y.seed end)
  local p1 = parts[1]
  for i = 2, #parts do
    local p = parts[i]
    if p.seed == parts[i - 1].seed then
      err.fail("paper: seed parts %s and %s both hold seed %d", parts[i - 1].dir, p.dir, p.seed)
    end
    if p.B ~= p1.B or p.boot_seed ~= p1.boot_seed then
      err.fail("paper: seed part %s was resampled %d times with seed %d, %s %d times with seed "
        .. "%d: write the parts with the same --resamples", p.dir, p.B, p.boot_seed, p1.dir, p1.B,
        p1.boot_seed)
    end
    if table.concat(p.comps, "\n") ~= table.concat(p1.comps, "\n") then
      err.fail("paper: seed parts %s and %s make different comparisons (runs of another "
        .. "version of the experiment?): rerun the older seed", p1.dir, p.dir)
    end
  end
  -- values.csv: row by row (in the first part's order, rows only later parts have after
  -- them), each row's lines seed by seed, as M.values_csv orders them
  local order, lines_of = {}, {}
  for _, p in ipairs(parts) do
    for _, line in ipairs(p.values) do
      local id = csv_split(line, p.dir .. "/values.csv", 0)[1]
      if not lines_of[id] then lines_of[id] = {}; order[#order + 1] = id end
      lines_of[id][#lines_of[id] + 1] = line
    end
  end
  local vlines = { header(experiment, "the per-seed metrics of every row"),
                   "row,label,seed,key,value\n" }
  for _, id in ipairs(order) do
    for _, line in ipairs(lines_of[id]) do vlines[#vlines + 1] = line .. "\n" end
  end
  -- bootstrap.csv: every group's comparisons aggregated over the seeds' stored resamples
  local comps, gcomps, seeds = {}, {}, {}
  for _, p in ipairs(parts) do seeds[#seeds + 1] = p.seed end
  for i, text in ipairs(p1.comps) do
    local f = {}
    for x in (text .. "\t"):gmatch("([^\t]*)\t") do f[#f + 1] = x end
    local g = math.tointeger(tonumber(f[6]))
    if #f ~= 6 or not g or not p1.groups[g] then
      err.fail("paper: %s/replicates.h5: comparison %d ('%s') is not 'a b key key_a key_b group'",
        p1.dir, i, text)
    end
    comps[i] = { a = f[1], b = f[2], key = f[3], key_a = f[4], key_b = f[5] }
    gcomps[g] = gcomps[g] or { comps = {}, at = {} }
    table.insert(gcomps[g].comps, comps[i])
    table.insert(gcomps[g].at, i)
  end
  local by_seed = {}
  for _, p in ipairs(parts) do by_seed[p.seed] = p end
  local res = {}
  for g, gc in pairs(gcomps) do
    local common = {}
    for j = 1, #gc.comps do common[j] = seeds end
    local r = verdict.aggregate(gc.comps, common, function(name, s, key, rr)
      local v = by_seed[s].groups[g][name .. "\t" .. key]
      if not v then
        err.fail("paper: seed part %s: no resampled values of row '%s', metric '%s'",
          by_seed[s].dir, name, key)
      end
      if rr then return v.reps[rr] end
      return v.observed
    end, p1.B, p1.boot_seed)
    for j, i in ipairs(gc.at) do res[i] = r[j] end
  end
  require("hydra.output").mkdir_p(dir, "paper")
  report.write_text(dir .. "/values.csv", table.concat(vlines))
  report.write_text(dir .. "/bootstrap.csv", M.bootstrap_csv(experiment, comps, res))
  return { seeds = seeds, rows = #order, comparisons = #comps }
end

local function read_csv(path, want_header)
  local text = fs.read_file(path)
  if not text then return nil end
  local rows, n, saw = {}, 0, false
  for line in text:gmatch("([^\n]*)\n?") do
    n = n + 1
    if line ~= "" and line:sub(1, 1) ~= "#" then
      if not saw then
        if line ~= want_header then
          err.fail("paper: %s:%d: expected the header '%s'", path, n, want_header)
        end
        saw = true
      else
        rows[#rows + 1] = { fields = csv_split(line, path, n), line = n }
      end
    end
  end
  if not saw then err.fail("paper: %s: no header line ('%s')", path, want_header) end
  return rows
end

local function number(s, path, line, what)
  local v = tonumber(s)
  if not v then err.fail("paper: %s:%d: %s '%s' is not a number", path, line, what, s) end
  return v
end

-- The summary in dir: { rows = { {id, label} } (file order), values[id][key][seed], seeds
-- (sorted), boot[a \0 b \0 key] = { diff, lo, hi, B, seed, n }, dir }; nil, path when a file is
-- missing.
function M.read_summary(dir)
  local vpath, bpath = dir .. "/values.csv", dir .. "/bootstrap.csv"
  local vrows = read_csv(vpath, "row,label,seed,key,value")
  if not vrows then return nil, vpath end
  local brows = read_csv(bpath, "a,b,key,resamples,boot_seed,seeds,diff,lo,hi")
  if not brows then return nil, bpath end
  local s = { rows = {}, values = {}, seeds = {}, boot = {}, dir = dir }
  local seen_seed = {}
  for _, r in ipairs(vrows) do
    local f = r.fields
    if #f ~= 5 then err.fail("paper: %s:%d: expected 5 fields, got %d", vpath, r.line, #f) end
    local seed = math.tointeger(number(f[3], vpath, r.line, "seed"))
    if not s.values[f[1]] then
      s.values[f[1]] = {}
      s.rows[#s.rows + 1] = { id = f[1], label = f[2] }
    end
    local kv = s.values[f[1]]
    kv[f[4]] = kv[f[4]] or {}
    kv[f[4]][seed] = number(f[5], vpath, r.line, "value")
    if not seen_seed[seed] then seen_seed[seed] = true; s.seeds[#s.seeds + 1] = seed end
  end
  table.sort(s.seeds)
  for _, r in ipairs(brows) do
    local f = r.fields
    if #f ~= 9 then err.fail("paper: %s:%d: expected 9 fields, got %d", bpath, r.line, #f) end
    s.boot[f[1] .. "\0" .. f[2] .. "\0" .. f[3]] = {
      B = number(f[4], bpath, r.line, "resamples"), seed = number(f[5], bpath, r.line, "boot_seed"),
      n = number(f[6], bpath, r.line, "seeds"), diff = number(f[7], bpath, r.line, "diff"),
      lo = number(f[8], bpath, r.line, "lo"), hi = number(f[9], bpath, r.line, "hi") }
  end
  return s
end

-- ===== rendering =====

local function label_of(summary, id)
  for _, r in ipairs(summary.rows) do if r.id == id then return r.label end end
  return id
end

local function seed_list(summary, ids, keys)
  local set = {}
  for _, id in ipairs(ids) do
    for _, k in ipairs(keys) do
      for s in pairs((summary.values[id] or {})[k] or {}) do set[s] = true end
    end
  end
  local out = {}
  for s in pairs(set) do out[#out + 1] = s end
  table.sort(out)
  return out
end

local function cell(summary, id, col, n_all)
  local by_seed = (summary.values[id] or {})[col.key] or {}
  local vals, seeds = {}, {}
  for s in pairs(by_seed) do seeds[#seeds + 1] = s end
  table.sort(seeds)
  for i, s in ipairs(seeds) do vals[i] = by_seed[s] * col.scale end
  local mean, std = report.mean_std(vals)
  if mean == nil then return "–" end
  local text = col.fmt:format(mean)
  if std then text = text .. " ± " .. col.fmt:format(std) end
  if #vals ~= n_all then text = text .. (" (n=%d)"):format(#vals) end
  return (text:gsub("^%-", "−"):gsub(" %-", " −"))
end

-- the paired per-seed values of a comparison and its stored bootstrap
local function compared(summary, c)
  local a, b, seeds = verdict.pair((summary.values[c.a] or {})[c.key] or {},
    (summary.values[c.b] or {})[c.key] or {})
  local t = verdict.paired_t(a, b)
  local boot = summary.boot[c.a .. "\0" .. c.b .. "\0" .. c.key]
  return t, boot, seeds
end

local function seeds_text(seeds)
  local s = {}
  for i, v in ipairs(seeds) do s[i] = tostring(v) end
  return #s == 0 and "none" or table.concat(s, ", ")
end

local function md_row(cells) return "| " .. table.concat(cells, " | ") .. " |" end

local RULE = "by the rule of results/README.md (\"Verdicts\": a paired t-test over seeds and a "
  .. "paired bootstrap over the test samples, both at 5 %%)"

-- The lines of the generated block of table spec t from a summary; where = the summary's
-- folder as the caption names it.
function M.render(t, summary, where)
  local lines = {}
  local boot_b
  for _, b in pairs(summary.boot) do boot_b = b.B end
  if t.kind == "verdicts" then
    local keys = {}
    for _, c in ipairs(t.comparisons) do keys[#keys + 1] = c.key end
    local ids = {}
    for _, c in ipairs(t.comparisons) do ids[#ids + 1] = c.a; ids[#ids + 1] = c.b end
    lines[#lines + 1] = ("*Generated by `hydra repro --write` from `%s` (`hydra repro --check` "
      .. "compares). Seeds %s. Each verdict " .. RULE .. "; difference = A − B, mean over "
      .. "seeds, in points; t-test: t, degrees of freedom and p; bootstrap: 95 %% percentile "
      .. "interval of the mean difference%s.*"):format(where, seeds_text(seed_list(summary, ids,
      keys)), boot_b and (", %d resamples"):format(boot_b) or "")
    lines[#lines + 1] = ""
    lines[#lines + 1] = md_row({ "A", "B", "Metric", "Claim", "A (mean ± std)",
      "B (mean ± std)", "Difference", "Seed test", "Sample test (CI)", "Verdict" })
    lines[#lines + 1] = "|---|---|---|---|---:|---:|---:|---|---|---|"
    for _, c in ipairs(t.comparisons) do
      -- a comparison of a row the runs do not have is left out
      if not (summary.values[c.a] and summary.values[c.b]) then goto next end
      local title, col = key_title(c.key)
      local tt, boot, seeds = compared(summary, c)
      local function f(v) return (col.fmt:format(v * col.scale):gsub("^%-", "−")) end
      local function signed(v) return (v >= 0 and "+" or "") .. f(v) end
      local st = tt.p and ("t(%d) = %s, %s"):format(tt.df,
        (("%.2f"):format(tt.t):gsub("^%-", "−")), verdict.p_text(tt.p))
        or ("n = %d: none"):format(#seeds)
      local bt = boot and ("%s, %s"):format(signed(boot.lo), signed(boot.hi)) or "none"
      lines[#lines + 1] = md_row({ report.md_escape(label_of(summary, c.a)),
        report.md_escape(label_of(summary, c.b)), title,
        c.better == "higher" and "A > B" or "A < B", cell(summary, c.a, col, #seeds),
        cell(summary, c.b, col, #seeds),
        tt.mean and signed(tt.mean) or "–", st, bt, (verdict.rule(tt, boot, c.better)) })
      ::next::
    end
    return lines
  end
  local cols = M.COLUMNS[t.columns]
  if not cols then
    err.fail("paper: table %s: unknown columns '%s'", t.name, tostring(t.columns))
  end
  local ids = table_row_ids(t, summary.rows)
  local keys = {}
  for i, c in ipairs(cols) do keys[i] = c.key end
  local seeds = seed_list(summary, ids, keys)
  local cap = CAPTIONS[t.columns] and CAPTIONS[t.columns]:format()
    or CAPTIONS.ood:format(M.SCORE_TITLES[t.columns:match("^ood_(.*)$")])
  local vtext = ""
  if t.verdict then
    local title = key_title(t.verdict.key)
    local against = t.verdict.what or (t.verdict.ref and label_of(summary, t.verdict.ref))
    vtext = (" Verdict: the row against %s on %s, " .. RULE .. "; difference in points, "
      .. "p = paired t-test over seeds, CI = 95 %% paired bootstrap interval over the test "
      .. "samples%s."):format(against, title, boot_b and (" (%d resamples)"):format(boot_b) or "")
  end
  lines[#lines + 1] = ("*Generated by `hydra repro --write` from `%s` (`hydra repro --check` "
    .. "compares). Seeds %s; mean ± std over seeds (sample std; (n=k): a cell with fewer "
    .. "seeds); percent, NLL raw. %s.%s*"):format(where, seeds_text(seeds), cap, vtext)
  lines[#lines + 1] = ""
  local head, rule = { t.row_title or "Method" }, { "---" }
  for i, c in ipairs(cols) do head[i + 1] = c.title; rule[i + 1] = "---:" end
  if t.verdict then head[#head + 1] = "Verdict"; rule[#rule + 1] = "---" end
  lines[#lines + 1] = md_row(head)
  lines[#lines + 1] = "|" .. table.concat(rule, "|") .. "|"
  local comps = {}
  for _, c in ipairs(comparisons(t, ids)) do comps[c.a] = c end
  for _, id in ipairs(ids) do
    local cells = { report.md_escape(label_of(summary, id)) }
    for _, c in ipairs(cols) do cells[#cells + 1] = cell(summary, id, c, #seeds) end
    if t.verdict then
      local c = comps[id]
      if c then
        local tt, boot = compared(summary, c)
        local _, col = key_title(c.key)
        local txt = verdict.text(tt, boot, c.better, col.scale, col.fmt)
        if t.verdict.what then txt = report.md_escape(label_of(summary, c.b)) .. ": " .. txt end
        cells[#cells + 1] = txt
      else
        cells[#cells + 1] = "reference"
      end
    end
    lines[#lines + 1] = md_row(cells)
  end
  return lines
end

-- ===== documents =====

local OPEN = "^<!%-%- hydra:table ([%w_%.%-]+) %-%->$"
local CLOSE = "^<!%-%- /hydra:table %-%->$"

-- The lines of text and its blocks: { name, open = line, close = line, body = { lines } }.
function M.blocks(text, path)
  local lines = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    lines[#lines + 1] = line
  end
  local blocks, cur = {}, nil
  for i, line in ipairs(lines) do
    local name = line:match(OPEN)
    if name then
      if cur then err.fail("paper: %s:%d: a table marker inside table '%s' (opened at line %d)",
        path, i, cur.name, cur.open) end
      if not by_name[name] then
        local names = {}
        for _, t in ipairs(M.TABLES) do names[#names + 1] = t.name end
        err.fail("paper: %s:%d: unknown table '%s' (tables: %s)", path, i, name,
          table.concat(names, ", "))
      end
      cur = { name = name, open = i, body = {} }
    elseif line:match(CLOSE) then
      if not cur then err.fail("paper: %s:%d: '<!-- /hydra:table -->' without an opening marker",
        path, i) end
      cur.close = i
      blocks[#blocks + 1] = cur
      cur = nil
    elseif cur then
      cur.body[#cur.body + 1] = line
    end
  end
  if cur then err.fail("paper: %s:%d: table '%s' is not closed ('<!-- /hydra:table -->')", path,
    cur.open, cur.name) end
  return blocks, lines
end

-- the summaries of the blocks' experiments: summaries[experiment], missing = { paths }
local function summaries_for(blocks, sumdir)
  local out, missing, seen = {}, {}, {}
  for _, b in ipairs(blocks) do
    local e = by_name[b.name].experiment
    if not seen[e] then
      seen[e] = true
      local s, path = M.read_summary(sumdir .. "/" .. e)
      if s then out[e] = s else
        missing[#missing + 1] = { path = path, table = b.name,
                                  exp = by_name[b.name].script_name or e }
      end
    end
  end
  return out, missing
end

local function missing_text(m)
  return ("missing result summary %s (table %s): run `hydra repro %s --profile paper`, then "
    .. "`hydra repro --write`"):format(m.path, m.table, m.exp)
end

-- The one line a block holds while its summary does not exist (where = the summary's folder).
function M.placeholder(t, where)
  return ("*Not generated yet: `make repro` (or `hydra repro %s --profile paper` then `hydra "
    .. "repro --write`) writes this table from `%s`.*"):format(t.script_name or t.experiment, where)
end

-- whether a block's body is empty or the placeholder (a table waiting for its summary)
local function waiting(b, where)
  local t = by_name[b.name]
  local body = {}
  for _, l in ipairs(b.body) do if l ~= "" then body[#body + 1] = l end end
  return #body == 0 or (#body == 1 and body[1] == M.placeholder(t, where))
end

-- the summary folder of table t as captions and placeholders name it
local function where_of(t, sumdir) return sumdir .. "/" .. t.experiment .. "/" end

-- Rewrites every marked block of the document at `doc` from the summaries in sumdir. A block
-- whose summary is missing gets the placeholder line (M.placeholder) when it is empty or holds
-- it already; when it holds anything else (a generated table) nothing is written and the error
-- names each such summary. Returns the names of the tables generated and of those waiting.
function M.write(doc, sumdir)
  local text = fs.read_file(doc)
  if not text then err.fail("paper: cannot read '%s'", doc) end
  local blocks, lines = M.blocks(text, doc)
  local sums, missing = summaries_for(blocks, sumdir)
  local lost = {}
  for _, b in ipairs(blocks) do
    local t = by_name[b.name]
    if not sums[t.experiment] and not waiting(b, where_of(t, sumdir)) then
      for _, m in ipairs(missing) do
        if by_name[m.table].experiment == t.experiment then
          lost[#lost + 1] = missing_text({ path = m.path, table = b.name, exp = m.exp })
        end
      end
    end
  end
  if #lost > 0 then
    err.fail("paper: %s unchanged: %s", doc, table.concat(lost, "; "))
  end
  local out, names, waits, bi = {}, {}, {}, 1
  local i = 1
  while i <= #lines do
    local b = blocks[bi]
    if b and i == b.open then
      out[#out + 1] = lines[i]
      local t = by_name[b.name]
      if sums[t.experiment] then
        for _, l in ipairs(M.render(t, sums[t.experiment], where_of(t, sumdir))) do
          out[#out + 1] = l
        end
        names[#names + 1] = b.name
      else
        out[#out + 1] = M.placeholder(t, where_of(t, sumdir))
        waits[#waits + 1] = b.name
      end
      out[#out + 1] = lines[b.close]
      i = b.close + 1
      bi = bi + 1
    else
      out[#out + 1] = lines[i]
      i = i + 1
    end
  end
  local new = table.concat(out, "\n") .. "\n"
  if new ~= text then report.write_text(doc, new) end
  return names, waits
end

-- the cells of a Markdown table line ('\|' stays inside a cell)
local function cells_of(line)
  local body = line:match("^|(.*)|%s*$")
  if not body then return nil end
  local out, cur, i = {}, {}, 1
  while i <= #body do
    local ch = body:sub(i, i)
    if ch == "\\" and i < #body then cur[#cur + 1] = body:sub(i, i + 1); i = i + 2
    elseif ch == "|" then
      out[#out + 1] = table.concat(cur):match("^%s*(.-)%s*$")
      cur = {}
      i = i + 1
    else cur[#cur + 1] = ch; i = i + 1 end
  end
  out[#out + 1] = table.concat(cur):match("^%s*(.-)%s*$")
  return out
end

-- caption (the non-table lines) and table rows of a block's lines
local function parse_block(body)
  local caption, rows = {}, {}
  for _, l in ipairs(body) do
    local c = l:match("^|") and cells_of(l)
    if c then
      if not (c[1] or ""):match("^%-%-%-") then rows[#rows + 1] = c end
    elseif l ~= "" then
      caption[#caption + 1] = l
    end
  end
  return table.concat(caption, "\n"), rows
end

-- Compares every marked block of `doc` with what the summaries in sumdir give; returns the
-- problems, one line each (stale cells by table, row and column; a generated table whose
-- summary is missing), and the names of the tables waiting for their summary (the block holds
-- the placeholder line and the summary does not exist: not a problem).
function M.check(doc, sumdir)
  local text = fs.read_file(doc)
  if not text then err.fail("paper: cannot read '%s'", doc) end
  local blocks = M.blocks(text, doc)
  local sums, missing = summaries_for(blocks, sumdir)
  local problems, waits = {}, {}
  local function say(fmt, ...) problems[#problems + 1] = fmt:format(...) end
  if #blocks == 0 then say("%s: no marked table ('<!-- hydra:table NAME -->')", doc) end
  local miss_of = {}
  for _, m in ipairs(missing) do miss_of[by_name[m.table].experiment] = m end
  local named = {}
  for _, b in ipairs(blocks) do
    local t = by_name[b.name]
    local m = miss_of[t.experiment]
    if m then
      local body = {}
      for _, l in ipairs(b.body) do if l ~= "" then body[#body + 1] = l end end
      if #body == 1 and body[1] == M.placeholder(t, where_of(t, sumdir)) then
        waits[#waits + 1] = b.name
      elseif not named[t.experiment] then
        named[t.experiment] = true
        say("%s", missing_text({ path = m.path, table = b.name, exp = m.exp }))
      end
    end
  end
  for _, b in ipairs(blocks) do
    local t = by_name[b.name]
    local s = sums[t.experiment]
    if s then
      local where = where_of(t, sumdir)
      local want = M.render(t, s, where)
      local wcap, wrows = parse_block(want)
      local gcap, grows = parse_block(b.body)
      local src = where .. "values.csv"
      if gcap ~= wcap then
        say("%s:%d: table %s, caption: committed '%s', computed '%s'", doc, b.open + 1, b.name,
          gcap, wcap)
      end
      local head = wrows[1] or {}
      local ghead = grows[1] or {}
      if table.concat(ghead, "|") ~= table.concat(head, "|") then
        say("%s:%d: table %s, header: committed '%s', computed '%s'", doc, b.open, b.name,
          table.concat(ghead, " | "), table.concat(head, " | "))
      else
        -- a row is named by its method (a comparison: by A, B and the metric)
        local nkey = t.kind == "verdicts" and 3 or 1
        local function name(r) return table.concat(r, " / ", 1, math.min(nkey, #r)) end
        local committed = {}
        for i = 2, #grows do committed[name(grows[i])] = grows[i] end
        local seen = {}
        for i = 2, #wrows do
          local w = wrows[i]
          local g = committed[name(w)]
          seen[name(w)] = true
          if not g then
            say("%s: table %s, row '%s': missing (computed from %s)", doc, b.name, name(w), src)
          else
            for j = nkey + 1, #head do
              if g[j] ~= w[j] then
                say("%s: table %s, row '%s', column '%s': committed '%s', computed '%s' (%s)",
                  doc, b.name, name(w), head[j], tostring(g[j]), w[j], src)
              end
            end
          end
        end
        for i = 2, #grows do
          if not seen[name(grows[i])] then
            say("%s: table %s, row '%s': not in the results (%s)", doc, b.name, name(grows[i]),
              src)
          end
        end
      end
    end
  end
  return problems, waits
end

return M
