-- lua/hydra/methods/hydra_taylor.lua: Hydra (Taylor) = hydra.members members whose heads are
-- chosen by Taylor importance with the diversity switches (hydra.diversity: per-member bootstrap
-- resamples of the calibration rows, keep_counts, overlap_penalty), each fine-tuned from the base
-- weights (finetune.*), fused (fuse.*) and predicted in one pass (p̄ = mean of the members'
-- softmaxes). Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

return common.pruned_module("hydra_taylor", "Hydra (Taylor)", { method = "taylor" })
