-- lua/hydra/methods/taylor.lua: Taylor = the base model with the lowest-Taylor-importance heads
-- pruned (hydra.keep_heads kept per layer; scores |dL/dgate| on prune.calib_size calibration rows
-- of the train split, no resample, no overlap penalty), fine-tuned (finetune.*), run as a packed
-- one-member fused model so pruned heads cost nothing. Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

return common.pruned_module("taylor", "Taylor", { method = "taylor", single = true })
