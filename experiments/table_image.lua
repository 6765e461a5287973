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

return hydra.experiment.main_table("table_image", hydra.experiment.script_options(...))
