-- experiments/hydraize.lua: Hydra-ize your own model (README "Hydra-ize your own model"), the
-- script form of `hydra hydraize`:
--   hydra run experiments/hydraize.lua model.from=SRC data.id=NAME data.sources='{NAME: DIR}' ...
-- Methods. The base model is the timm / Hugging Face model model.from, imported as it is
-- (stage import; import.* settle what its files leave open) and, with train.epochs > 0,
-- fine-tuned on data.id. Data sets that are not prepared (data.sources: ImageFolder trees,
-- CIFAR binary folders, CSV/TSV/JSONL text) are imported with that model's preprocessing
-- (stage data). From the one base model: Single (the model itself), MC Dropout (the model with
-- dropout mc_dropout.rate switched on, mc_dropout.samples passes), Deep Ensembles (model.from
-- and the checkpoints of deep_ensemble.from, when methods lists it) and Hydra: head importance
-- (Taylor |dL/dg| on calibration rows, or circuits with data.ood_val), hydra.members members
-- keeping hydra.keep_heads heads per layer, each fine-tuned finetune.epochs, fused into one
-- model. Evaluation: accuracy, NLL, ECE, Brier, near/far-OOD AUROC/FPR95 (DESIGN §4) of every
-- method and of every Hydra member (result.md). Every step is a cached stage; the run folder
-- (results/hydraize/<run-id>/) also gets the stage products and their safetensors exports
-- (export.*, lua/hydra/products.lua). configs/experiments/hydraize.yaml holds the settings.
local hydra = require("hydra")

local opts = hydra.experiment.script_options(...)
local cfg = hydra.config.load(hydra.home .. "/configs/experiments/hydraize.yaml", opts.overrides)
local s = hydra.run.execute(cfg, { overrides = opts.overrides, override_list = opts.overrides })
print(("run %s%s: %s"):format(s.id, s.skipped and " (complete already)" or "", s.dir))
print("table: " .. s.dir .. "/result.md")
return 0
