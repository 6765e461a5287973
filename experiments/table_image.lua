-- experiments/table_image.lua: the paper's main table (ImageNet-1K / CIFAR-100 ViT) on our
-- image benchmark.
--
-- Methods. ID: Fashion-MNIST (55,000 train, 5,000 held out for validation/calibration, 10,000
-- test). OOD test sets: MNIST, notMNIST (both from HYDRA_DATA_DIR on the paper profile), glyphs
-- A-J and OpenCV digits (Debian); "OOD avg" is their unweighted mean. Shift: Fashion-MNIST-C,
-- 11 corruptions, one column per severity (all corruptions of that severity pooled). Backbone:
-- vit-fm (1.2 M parameters) trained from scratch (paper profile: 5 epochs). Methods (DESIGN
-- §3): Single, Deep Ensembles (3 models), MC Dropout (10 samples, rate 0.1), Taylor and CircAvg
-- (one pruned model), Hydra (Taylor) and Hydra (Circ) (3 members of 4 of 8 heads per layer,
-- fine-tuned 1 epoch, fused). One seed by default; --seeds K gives mean ± std over K seeds.
-- Metrics: Acc, ECE (15 bins), NLL, Brier, AURC, per-OOD-set AUROC / FPR95 / AUPR-Out with the
-- MSP score, and the cost of each method (parameters, FLOPs, measured ms per batch).
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
local e = hydra.experiment.run("table_image", opts)
if e.partial then return 0 end  -- a shard: the report comes when every point is done

print("")
io.write(assert(io.open(e.report.markdown, "rb")):read("a"))
print("")

-- The paper's claim: Hydra (Circ) matches or beats Deep Ensembles on OOD detection at about
-- the cost of a single model.
local function get(method, key) return hydra.report.value(e.runs, { method = method }, key) end
local hc, hc_sd = get("hydra_circ", "ood_avg_auroc")
local de, de_sd = get("deep_ensemble", "ood_avg_auroc")
if hc and de then
  -- in AUROC points; a single-seed gap under one point is within noise (hydra.report.difference)
  local pt = function(v) return v and 100 * v end
  local diff, noise = hydra.report.difference(pt(hc), pt(de), pt(hc_sd), pt(de_sd))
  print(("OOD avg AUROC: Hydra (Circ) %.2f vs Deep Ensembles %.2f: %s (%s)"):format(100 * hc,
    100 * de, diff, noise and "no ranking can be read from this"
    or hc >= de and "Hydra (Circ) is at least as good, as in the paper"
    or "Deep Ensembles are better here, unlike the paper"))
end
local hacc, dacc = get("hydra_circ", "acc"), get("deep_ensemble", "acc")
if hacc and dacc then
  print(("accuracy: Hydra (Circ) %.2f vs Deep Ensembles %.2f"):format(100 * hacc, 100 * dacc))
end
print("report: " .. e.report.markdown)
return 0
