-- experiments/table_image_remedy.lua: Hydra (Circ, restarts), a remedy for the seeds on which
-- Hydra (Circ) collapses, as a separate row beside the Single, Deep Ensembles and Hydra (Circ)
-- of table_image (the same settings and base models: configs/experiments/
-- table_image_remedy.yaml), 5 seeds on the paper profile. The remedy: the circuit search runs
-- from 5 restarts on half of the validation rows (ID val and ood-val-image) and keeps the
-- restart whose un-fine-tuned members give the best MSP AUROC on the other half, rows no
-- search saw (lua/hydra/prune.lua, "Restarts"). The paper's recipe row stays hydra_circ.
local hydra = require("hydra")

return hydra.experiment.main_table("table_image_remedy", hydra.experiment.script_options(...))
