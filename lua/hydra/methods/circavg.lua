-- lua/hydra/methods/circavg.lua: CircAvg = the base model pruned to its `avg` circuit (the
-- layer-conditioned greedy circuit search with the avg objective on prune.val_size rows of the ID
-- val split and of the validation OOD set data.ood_val; hydra.keep_heads circuit heads kept per
-- layer), fine-tuned (finetune.*), run as a packed one-member fused model.
-- Interface: lua/hydra/methods/common.lua.
local common = require("hydra.methods.common")

return common.pruned_module("circavg", "CircAvg",
  { method = "circuit", objective = "avg", single = true })
