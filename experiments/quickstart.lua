-- experiments/quickstart.lua: the README's first job and `make demo` (`hydra repro quickstart`).
--
-- Methods. In-distribution data is Fashion-MNIST (Debian's dataset-fashion-mnist). OOD test
-- sets are rendered letter glyphs A-J and OpenCV's handwritten digits, both from Debian
-- packages, plus MNIST and notMNIST when HYDRA_DATA_DIR has them; the circuit search uses its
-- own validation OOD set (ood-val-image, never a test set). The backbone is the reference ViT
-- (vit-fm, 1.2 M parameters) trained from scratch for a few epochs on a subset of the training
-- images (the sizes are the profile's: configs/experiments/quick.yaml by default).
-- From that one base model we build
--   * Single: the base model itself;
--   * Deep Ensembles: 3 independently trained models (base seeds 3s, 3s+1, 3s+2; seed 0's first
--     is Single's);
--   * Hydra (Taylor): 3 members, each keeping the 4 of 8 heads per layer with the largest
--     Taylor importance |dL/dg| on its own bootstrap resample of calibration rows of the
--     training split;
--   * Hydra (Circ): 3 members, each keeping a layer-wise greedy circuit found with its own
--     objective (ID NLL, MSP AUROC against the validation OOD set, their average) on
--     prune.val_size rows of the validation splits;
-- both Hydra models fine-tune each member (finetune.epochs) and fuse them into one model
-- (grouped attention GEMMs, one merged MLP) that gives every member in one forward pass. Every
-- method is scored with the same metrics (DESIGN §4): p̄ = mean of member softmaxes, OOD score
-- -max p̄, OOD = positive class.
--
-- Output: results/quickstart/<run-id>/ with table.md / table.csv, plots/reliability.png,
-- plots/ood-hist.png, plots/risk-coverage.png, result.h5 and log.txt. Stages (base models,
-- gates, members, fused models, predictions) are cached in .cache/stages, so a second run is
-- immediate.
local hydra = require("hydra")
local core = hydra.core

local opts = hydra.experiment.script_options(...)
local t0 = core.now()

-- 1. The config: the profile's sizes, then this experiment's settings, then key=value overrides.
--    MNIST and notMNIST join the OOD test sets when their raw files are in HYDRA_DATA_DIR.
local cfg = hydra.experiment.config("quickstart", opts)
local where = { prepared_dir = cfg.data.dir }
local user_ood = false
for _, o in ipairs(opts.overrides or {}) do
  if o:match("^data%.ood=") then user_ood = true end
end
local function ood_names(c)
  local t = {}
  for i, o in ipairs(hydra.eval.ood_groups(c.data.ood)) do t[i] = o.name end
  return t
end
if not user_ood then
  -- MNIST joins the near group (hand-written), notMNIST the far one (fonts): datasets/SOURCES.md
  local groups, added = { near = {}, far = {} }, false
  for _, pair in ipairs({ { "mnist", "near" }, { "notmnist", "far" } }) do
    local st = hydra.data.status(pair[1], where)
    if st.available or st.prepared then table.insert(groups[pair[2]], pair[1]); added = true end
  end
  if added then
    for _, o in ipairs(hydra.eval.ood_groups(cfg.data.ood)) do
      table.insert(groups[o.group], o.name)
    end
    local o = { table.unpack(opts.overrides or {}) }
    o[#o + 1] = ("data.ood={near: [%s], far: [%s]}"):format(table.concat(groups.near, ", "),
      table.concat(groups.far, ", "))
    opts.overrides = o
    cfg = hydra.experiment.config("quickstart", opts)
  end
end

-- 2. Data: prepare what is missing (each set once; later runs find them prepared).
local need = { cfg.data.id, cfg.data.ood_val }
for _, name in ipairs(ood_names(cfg)) do need[#need + 1] = name end
for _, name in ipairs(cfg.data.shift) do need[#need + 1] = name end
for _, name in ipairs(need) do
  if not hydra.data.status(name, where).prepared then
    print(("preparing %s ..."):format(name))
    hydra.data.prepare(name, where)
  end
end

print(("quickstart: profile %s, vit d=%d depth=%d heads=%d, %d epoch(s) on %s training images, "
  .. "seed %d; OOD sets %s"):format(cfg.profile, cfg.model.d_model, cfg.model.depth,
  cfg.model.n_heads, cfg.train.epochs,
  cfg.data.train_subset > 0 and tostring(cfg.data.train_subset) or "all", cfg.seed,
  table.concat(ood_names(cfg), ", ")))

-- 3. One run: every method of the config, evaluated on the ID test split and every OOD set.
local s = hydra.run.execute(cfg, { progress = opts.progress ~= false })
if s.skipped then
  print(("(run %s was already complete; delete %s to recompute)"):format(s.id, s.dir))
end

-- 4. The table (the headline columns and the cost; table.md has every OOD set) and where
--    everything is.
local run = hydra.run.load(s.dir)
print("")
print(("==== quickstart results (run %s, %.0f s) ===="):format(s.id, core.now() - t0))
print("| Method | Acc ↑ | ECE ↓ | NLL ↓ | OOD avg AUROC ↑ | OOD avg FPR95 ↓ | members | params "
  .. "| MFLOPs/image | ms / batch of " .. cfg.train.eval_batch_size .. " |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
local function pct(v) return v and ("%.2f"):format(100 * v) or "–" end
local best, best_auroc = nil, -1
for _, r in ipairs(run.results) do
  local m, o, c = r.metrics, r.ood_avg, r.cost
  print(("| %s | %s | %s | %.3f | %s | %s | %d | %.2f M | %.0f | %.0f |"):format(r.method,
    pct(m.acc), pct(m.ece), m.nll, pct(o.auroc), pct(o.fpr95), c.members or 1,
    (c.params or 0) / 1e6, (c.flops or 0) / 1e6, c.infer_ms_per_batch or 0))
  if o.auroc and o.auroc > best_auroc then best, best_auroc = r.method, o.auroc end
end
print(("(ID: %s test, %d images; OOD avg over %s; MSP score)"):format(cfg.data.id,
  run.results[1].metrics.n or cfg.data.test_subset, table.concat(ood_names(cfg), ", ")))
if best then print(("best OOD-avg AUROC: %s (%.2f %%)"):format(best, best_auroc * 100)) end
print("")
print(("everything is in %s/"):format(s.dir))
local files = {
  { "table.md", "the full table, every OOD set (table.csv: the same as CSV)" },
  { "plots/reliability.png", "reliability diagram (calibration), methods overlaid" },
  { "plots/ood-hist.png", "OOD score histograms, ID test vs the OOD sets" },
  { "plots/risk-coverage.png", "selective prediction (risk vs coverage)" },
  { "result.h5", "per-sample arrays, metrics, cost, config, provenance (`hydra info`)" },
  { "log.txt", "the full log of the run" },
}
files[#files + 1] = { hydra.stages.default_dir(), "cached stages (models, gates, members, "
  .. "predictions): a rerun is immediate", path = true }
local width = 0
for _, f in ipairs(files) do
  f.path = f.path and f[1] or (s.dir .. "/" .. f[1])
  width = math.max(width, #f.path)
end
for _, f in ipairs(files) do
  if core.stat(f.path) then print("  " .. hydra.strings.pad(f.path, width) .. "  " .. f[2]) end
end
return 0
