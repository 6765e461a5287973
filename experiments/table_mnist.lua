-- experiments/table_mnist.lua: the main table on the second image benchmark, beside
-- table_image's Fashion-MNIST (the paper reports two image settings, ImageNet-1K and
-- CIFAR-100; its margin over Deep Ensembles was largest on CIFAR-100).
--
-- Methods: those of experiments/table_image.lua, with its settings (configs/experiments/
-- table_mnist.yaml includes table_image.yaml). ID: MNIST digits (mnist-id: the 10,000-image
-- MNIST test file split, seeded and per digit, into train 7,000 / val 1,000 / test 2,000).
-- OOD test sets: near = notMNIST and glyphs A-J (letter images), far = the Fashion-MNIST test
-- split (datasets/SOURCES.md: why these groups); the circuit search's OOD validation set is
-- ood-val-mnist-id (noise, flipped and inverted mnist-id train images). No shift set. Backbone:
-- the profile's ViT trained from scratch. One seed on the quick profile, 3 on the paper profile
-- (configs/sweeps/table_mnist.yaml). Needs HYDRA_DATA_DIR (MNIST, notMNIST):
--   hydra data prepare mnist-id notmnist glyphs fashion-mnist-ood ood-val-mnist-id
local hydra = require("hydra")

return hydra.experiment.main_table("table_mnist", hydra.experiment.script_options(...))
