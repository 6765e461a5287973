-- lua/hydra/methods/deep_ensemble_scratch.lua: "Deep Ensembles (scratch)" = deep_ensemble.members
-- base models trained from their seeds alone (seeds M*seed .. M*seed+M-1, as deep_ensemble), ignoring train.init:
-- with a pretrained encoder (train.init) the plain Deep Ensembles row is M fine-tunings of that
-- one encoder (the authors' protocol), and this row is the independently initialised ensemble
-- beside it. Without train.init the two rows are the same models. Interface:
-- lua/hydra/methods/common.lua.
return require("hydra.methods.deep_ensemble").method("deep_ensemble_scratch",
  "Deep Ensembles (scratch)", true)
