-- experiments/table_training_free.lua: the paper's zero-shot CLIP table (Hydra (Circ) built from
-- one pretrained CLIP with no training at all beats ViLU, a trained uncertainty head: AUROC
-- 76.82 vs 75.38, FPR95 68.05 vs 71.59, AUPR 47.85 vs 43.81) on both of our backbones.
--
-- Methods. Backbones: the image Single (the profile's ViT trained from scratch on Fashion-MNIST,
-- the same stage as table_image's) and the text Single (the profile's text encoder pretrained
-- with masked-language modelling and fine-tuned on SST-2 from it: table_text's Single, the same
-- pretrain and base stages, profiles quick_text / paper_text). Training-free rows,
-- all from the trained Single with no gradient step after it: the Single with the MSP, max-logit
-- and energy scores; Taylor and CircAvg (one pruned model) and Hydra (Taylor) and Hydra (Circ)
-- (3 members of 4 of 8 heads per layer, fused) with finetune.epochs 0: the members are the
-- Single with heads gated off, every non-attention weight shared, the merged MLP exactly the
-- Single's (tests/lua/test_training_free.lua checks it bitwise). Trained rows, on the frozen
-- Single's features z (the CLS row after the final LayerNorm), trained on the ID validation
-- split only (vilu.split; never a test split): a ViLU-style error predictor (input z, the
-- classifier row of the predicted class w_ŷ, our analog of ViLU's text embedding of the
-- predicted class, and z ∘ w_ŷ; a 2-hidden-layer MLP; class-balanced weighted BCE on
-- "misclassified") and a ConfidNet-style confidence head (input z; MSE to the true-class
-- probability); their score is the head's output (core/hydra/vilu.h).
-- Metrics: failure prediction on the ID test set (correct vs misclassified, "error" positive:
-- AUROC, FPR95 = fraction of correct samples flagged when 95 % of the errors are caught, AUPR
-- = average precision of the errors: ViLU's task), OOD detection (near / far / all sets: AUROC,
-- FPR95 = fraction of ID flagged at 95 % OOD recall, AUPR-Out), Acc and ECE (15 bins). One seed
-- on the quick profile, 3 on the paper profile (mean ± std).
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)

-- rows: method, score, label (the rows of the generated tables too: hydra.paper)
local ROWS = require("hydra.paper").TRAINING_FREE_ROWS
local TRAINED = { vilu = true, confidnet = true }

-- columns: title, key (a result.h5 metric; %s = the row's score), percent
local COLS = {
  { "Acc ↑", "acc" }, { "ECE ↓", "ece" },
  { "Fail AUROC ↑", "misclf_auroc_%s" }, { "Fail FPR95 ↓", "misclf_fpr95_%s" },
  { "Fail AUPR ↑", "misclf_aupr_%s" },
  { "OOD near AUROC ↑", "ood_near_auroc_%s" }, { "OOD far AUROC ↑", "ood_far_auroc_%s" },
  { "OOD all AUROC ↑", "ood_avg_auroc_%s" }, { "OOD all FPR95 ↓", "ood_avg_fpr95_%s" },
  { "OOD all AUPR-Out ↑", "ood_avg_aupr_out_%s" },
}

local function cell(runs, row, key)
  if not hydra.experiment.has_method(runs, row[1]) then return nil end   -- left out: methods=
  local m, s = hydra.report.value(runs, { method = row[1] }, key:format(row[2]))
  return m and 100 * m, s and 100 * s
end

local function fmt(m, s)
  if not m then return "–" end
  return s and ("%.2f ± %.2f"):format(m, s) or ("%.2f"):format(m)
end

local function table_of(e, title)
  local out = { "### " .. title, "", "| Method | " }
  local head, rule = { "Method" }, { "---" }
  for _, c in ipairs(COLS) do head[#head + 1] = c[1]; rule[#rule + 1] = "---:" end
  out[3] = "| " .. table.concat(head, " | ") .. " |"
  out[4] = "|" .. table.concat(rule, "|") .. "|"
  local values = {}
  for i, row in ipairs(ROWS) do
    local cells = { row[3] }
    values[i] = {}
    for j, c in ipairs(COLS) do
      local m, s = cell(e.runs, row, c[2])
      values[i][j] = { m, s }
      cells[#cells + 1] = fmt(m, s)
    end
    out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return out, values
end

-- the verdicts of one backbone (hydra.experiment.claim_line: the rule of hydra.verdict on the
-- runs, paired by seed): Hydra (Circ) with MSP (the paper's row) vs the ViLU-style head, then
-- the best training-free row vs the best trained row (picked by their mean), on failure AUROC
-- (the paper's claim: 76.82 vs 75.38) and OOD-all AUROC
local function verdict(name, runs, values)
  local lines = {}
  local function idx(method, score)
    for i, r in ipairs(ROWS) do if r[1] == method and r[2] == score then return i end end
  end
  local function add(what, ia, ib, key, la, lb, paper)
    local line = hydra.experiment.claim_line(runs, name .. ", " .. what,
      { method = ROWS[ia][1], label = la }, { method = ROWS[ib][1], label = lb },
      { a = key:format(ROWS[ia][2]), b = key:format(ROWS[ib][2]) }, "higher", { paper = paper })
    if line then lines[#lines + 1] = line end
  end
  for _, col in ipairs({ { 3, "failure-prediction AUROC", "76.82 vs 75.38" },
                         { 8, "OOD-all AUROC" } }) do
    local j, what = col[1], col[2]
    add(what, idx("hydra_circ", "msp"), idx("vilu", "learned"), COLS[j][2], "Hydra (Circ) MSP",
      "ViLU-style head", col[3])
    local best_free, best_trained
    for i, r in ipairs(ROWS) do
      local v = values[i][j]
      if v[1] then
        if TRAINED[r[1]] then
          if not best_trained or v[1] > values[best_trained][j][1] then best_trained = i end
        elseif not best_free or v[1] > values[best_free][j][1] then
          best_free = i
        end
      end
    end
    if best_free and best_trained then
      add(what, best_free, best_trained, COLS[j][2],
        "best training-free row " .. ROWS[best_free][3],
        "best trained row " .. ROWS[best_trained][3])
    end
  end
  return lines
end

local image = hydra.experiment.run("table_training_free", opts)
if image.partial then return 0 end
-- the text Single is table_text's: fine-tuned from the one pretrained encoder (same stages)
local home = rawget(_G, "HYDRA_HOME") or "."
local tsw = hydra.sweep.load(home .. "/configs/sweeps/table_training_free_text.yaml", opts)
local pre = hydra.pretrain.encoder(tsw.points[1].cfg, hydra.stages.new({}),
  "table_training_free")
local text = hydra.experiment.run("table_training_free_text", hydra.pretrain.init_opts(opts, pre))
if text.partial then return 0 end

local seeds = #image.runs
local doc = {
  "## Training-free methods vs trained uncertainty heads (the paper's zero-shot CLIP table)",
  "",
  ("Profile %s, %d seed(s)%s. Image backbone: the profile's ViT trained from scratch on "
    .. "Fashion-MNIST (the table_image Single). Text backbone: the profile's text encoder "
    .. "pretrained with masked-language modelling and fine-tuned on SST-2 (the table_text Single: "
    .. "the same stages). Training-free rows: no "
    .. "gradient step after the Single (finetune.epochs 0; members share every non-attention "
    .. "weight). Trained rows: heads on the frozen Single's features (the CLS row after the final "
    .. "LayerNorm), trained on the ID validation split; the ViLU-style head's second input is the "
    .. "classifier row of the predicted class (our analog of ViLU's class text embedding). "
    .. "Fail = failure prediction on the ID test set, misclassified = positive (FPR95: correct "
    .. "samples flagged at 95 %% error recall; AUPR: average precision of the errors). OOD: OOD "
    .. "positive, FPR95 = ID flagged at 95 %% OOD recall, near / far / all = unweighted means of "
    .. "the sets of each group / of every set. p̄ = mean of member softmaxes; ECE with 15 "
    .. "equal-width bins; percent."):format(opts.profile or "quick", seeds,
    seeds > 1 and " (mean ± std over seeds)" or ""),
  "",
}
local verdicts = {}
for _, part in ipairs({ { image, "Image (Fashion-MNIST)" }, { text, "Text (SST-2)" } }) do
  local lines, values = table_of(part[1], part[2])
  for _, l in ipairs(lines) do doc[#doc + 1] = l end
  doc[#doc + 1] = ""
  for _, v in ipairs(verdict(part[2], part[1].runs, values)) do verdicts[#verdicts + 1] = v end
end
doc[#doc + 1] = "Verdicts (the rule of results/README.md, \"Verdicts\": a paired t-test over seeds "
  .. "and a paired bootstrap over the test samples, both at 5 %; difference in points, p of the "
  .. "t-test, CI = 95 % bootstrap interval; the best-row lines pick their two rows by the mean "
  .. "after the run, a choice the rule does not account for):"
doc[#doc + 1] = ""
for _, v in ipairs(verdicts) do doc[#doc + 1] = "- " .. v end
doc[#doc + 1] = ""
doc[#doc + 1] = ("Runs: %s (image), %s (text)."):format(image.report.markdown,
  text.report.markdown)
local md = table.concat(doc, "\n") .. "\n"
local out = image.sweep.results_dir .. "/table_training_free/report/training_free.md"
hydra.report.write_text(out, md)
print("")
io.write(md)
print("report: " .. out)
return 0
