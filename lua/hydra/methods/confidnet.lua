-- lua/hydra/methods/confidnet.lua: ConfidNet-style confidence head = the Single model (frozen)
-- plus a small MLP on its features z (the CLS row after the final LayerNorm) trained to regress
-- the true-class probability with MSE (Corbière et al. 2019; core/hydra/vilu.h, hydra.vilu), on the
-- ID split vilu.split with every vilu.* training setting but input and loss. Predictions are the
-- Single's; the uncertainty score (score "learned") is minus the predicted confidence.
-- Interface: lua/hydra/methods/common.lua.
return require("hydra.methods.common").head_module("confidnet", "ConfidNet-style head")
