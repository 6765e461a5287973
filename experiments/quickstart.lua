-- experiments/quickstart.lua: the README's first job and `make demo` (`hydra repro quickstart`).
--
-- Methods. In-distribution data is Fashion-MNIST (Debian's dataset-fashion-mnist); OOD test
-- sets are rendered letter glyphs A-J and OpenCV's handwritten digits, both from Debian
-- packages; covariate shift is Fashion-MNIST-C (corruptions generated in C, averaged per
-- severity). On the quick profile (configs/experiments/quick.yaml) the backbone is the tiny
-- ViT (vit-fm-tiny, 0.2 M parameters) trained from scratch for a few epochs on a subset of the
-- training images (the profile file gives the sizes; the paper profile uses vit-fm).
-- From that one base model we build
--   * Single: the base model itself;
--   * Deep Ensembles: 3 independently trained models (seeds s, s+1, s+2);
--   * Hydra (Taylor): 3 members, each keeping the 4 of 8 heads per layer with the largest
--     Taylor importance |dL/dg| on its own bootstrap resample of the calibration split;
--   * Hydra (Circ): 3 members, each keeping a layer-wise greedy circuit found with its own
--     objective (ID NLL, MSP AUROC against validation OOD data, their average);
-- both Hydra models fine-tune each member for 1 epoch and fuse them into one model (grouped
-- attention GEMMs, one merged MLP). Every method is scored with the same metrics (DESIGN §4):
-- p̄ = mean of member softmaxes, OOD score -max p̄, OOD = positive class.
--
-- Output: results/quickstart/<run-id>/ with table.md / table.csv, plots/reliability.png,
-- plots/ood-hist.png, plots/risk-coverage.png, result.h5 and log.txt. Stages (base models,
-- members, predictions) are cached in .cache/stages, so a second run is immediate.
local hydra = require("hydra")
local core = require("hydra.core")

local opts = hydra.sweep.script_options(...)
local t0 = core.now()

-- 1. Data: prepare what is missing (each set once; later runs find them prepared).
for _, name in ipairs({ "fashion-mnist", "glyphs", "opencv-digits", "ood-val-image",
                        "fashion-mnist-c" }) do
  local st = hydra.data.status(name)
  if not st.prepared then
    print(("preparing %s ..."):format(name))
    hydra.data.prepare(name)
  end
end

-- 2. The config: the experiment's methods, then the profile's sizes, then key=value overrides.
local cfg = hydra.sweep.experiment_config("quickstart", opts)
print(("quickstart: profile %s, model d=%d depth=%d heads=%d, %d epochs, %s training images, "
  .. "seed %d"):format(cfg.profile, cfg.model.d_model, cfg.model.depth, cfg.model.n_heads,
  cfg.train.epochs, cfg.data.train_subset > 0 and tostring(cfg.data.train_subset) or "all",
  cfg.seed))

-- 3. One run: every method of the config, evaluated on ID, OOD and shift sets.
local s = hydra.run.execute(cfg, { progress = opts.progress ~= false })
if s.skipped then
  print(("(run %s was already complete; delete %s to recompute)"):format(s.id, s.dir))
  io.write(assert(io.open(s.dir .. "/table.md", "rb")):read("a"))
end

-- 4. Where everything is.
local run = hydra.run.load(s.dir)
local best, best_auroc = nil, -1
for _, r in ipairs(run.results) do
  if r.ood_avg.auroc and r.ood_avg.auroc > best_auroc then best, best_auroc = r.method, r.ood_avg.auroc end
end
print("")
print(("best OOD-avg AUROC: %s (%.2f %%)"):format(best or "-", best_auroc * 100))
print(("everything is in %s/ (%.0f s):"):format(s.dir, core.now() - t0))
print("  table.md, table.csv          the table above")
print("  plots/reliability.png        reliability diagram (calibration)")
print("  plots/ood-hist.png           OOD score histograms, ID vs each OOD set")
print("  plots/risk-coverage.png      selective prediction")
print("  result.h5, methods/*.h5      per-sample arrays and metrics (`hydra info FILE`)")
print("  log.txt                      the full log")
return 0
