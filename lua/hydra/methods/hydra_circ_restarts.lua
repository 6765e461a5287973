-- lua/hydra/methods/hydra_circ_restarts.lua: Hydra (Circ, restarts) = Hydra (Circ) whose circuit
-- search runs from hydra_circ_restarts.restarts restarts on the search rows of the validation
-- sets and keeps the restart best on the rows held out of every search
-- (hydra_circ_restarts.holdout; lua/hydra/prune.lua, "Restarts"): a remedy the paper's
-- description of the search allows for a search that overfits its validation data. Everything
-- else (members, fine-tuning, fusion, the circuit diagnostics) as hydra_circ, which stays the
-- paper's recipe. Interface: lua/hydra/methods/common.lua.
return require("hydra.methods.hydra_circ").diagnosed(require("hydra.methods.common")
  .pruned_module("hydra_circ_restarts", "Hydra (Circ, restarts)",
    { method = "circuit", restarts = true }))
