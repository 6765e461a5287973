-- lua/hydra/methods/hydra_circ.lua: Hydra (Circ) = hydra.members members, member m keeping the
-- circuit found with objective hydra.diversity.objectives[m] (cycled) on prune.val_size rows of
-- the ID val split and of the validation OOD set data.ood_val, with the diversity switches
-- (bootstrap resamples, keep_counts, overlap_penalty), each fine-tuned from the base weights
-- (finetune.*), fused (fuse.*) and predicted in one pass. Interface: lua/hydra/methods/common.lua.
-- Its predictor's diagnose(result_file, sets) gives the run's circuit diagnostics
-- (hydra.diagnostics: circuits, overlap, disagreement and MI, member and search AUROCs);
-- diagnosed(module) gives a circuit method's module that diagnose (hydra_circ_restarts).
local common = require("hydra.methods.common")

local function diagnosed(M)
  local build = M.build
  function M.build(ctx)
    local pred = build(ctx)
    function pred.diagnose(result_file, sets)
      return require("hydra.diagnostics").circuit(ctx, pred.pruned, result_file, sets)
    end
    return pred
  end
  return M
end

local M = diagnosed(common.pruned_module("hydra_circ", "Hydra (Circ)", { method = "circuit" }))
M.diagnosed = diagnosed
return M
