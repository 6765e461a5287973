-- hydra prune CKPT.h5 --method taylor|circuit [--objective acc|ood|avg] [--data FILE.h5]
--   [--ood FILE.h5] --members M --keep K --out GATES.h5 [key=value ...]: Hydra member gates.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra prune CKPT.h5 --method taylor|circuit [--objective acc|ood|avg] "
  .. "[--data FILE.h5] [--ood FILE.h5] [--members M] [--keep K] [--seed S] [--quiet] --out GATES.h5 "
  .. "[key=value ...]"

return {
  summary = "score attention heads and write the gates of the Hydra members",
  usage = USAGE,
  help = [[Scores every attention head of CKPT.h5 and selects M member gate matrices.
taylor: mean |dL/dgate| over prune.calib_size rows of the ID train split (batches of
prune.batch_size), L2-normalised per layer when prune.normalize. circuit: HeadMap's
layer-conditioned greedy search on the first prune.val_size rows of the ID val split and of the
validation OOD set (data.ood_val, its val split; test sets are refused) with objective acc (ID NLL),
ood (MSP AUROC) or avg (mean of both after per-layer min-max normalisation); without --objective the
members cycle through hydra.diversity.objectives. Diversity: hydra.diversity.bootstrap, keep_counts,
overlap_penalty. The configuration is the checkpoint's (its /meta config_yaml), then key=value
overrides; --data / --ood replace the prepared files. Writes GATES.h5: /gates [M,L,H] (1 kept, 0
pruned), /scores [M,L,H], /overlap [M,M] (Jaccard of the kept head sets) and attributes method,
objectives, keep, seed, checkpoint, checkpoint_sha256.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "prune", usage = USAGE,
      options = { method = "string", objective = "string", data = "string", ood = "string",
                  members = "integer", keep = "integer", seed = "natural", out = "string",
                  quiet = "flag" },
      positional = { min = 1, max = 1, names = { "CKPT.h5" } },
      overrides = true, required = { "out" },
    })
    local core = require("hydra.core")
    local finetune = require("hydra.finetune")
    local hydra_prune = require("hydra.prune")
    local model = require("hydra.model")
    local ckpt = opts.positional[1]
    require("hydra.output").check({ { opts.out, "--out" } },
      { { ckpt, "CKPT.h5" }, { opts.data, "--data" }, { opts.ood, "--ood" } }, "hydra prune")
    local m = err.wrap("hydra prune", model.load, ckpt)
    local ov = opts.override_list or {}
    local cfg = err.wrap("hydra prune", finetune.config_of, m, ov)
    if opts.method then cfg.prune.method = opts.method end
    if opts.members then cfg.hydra.members = opts.members end
    if opts.keep then cfg.hydra.keep_heads = opts.keep end
    if opts.seed then cfg.seed = opts.seed end
    local method = cfg.prune.method
    if method ~= "taylor" and method ~= "circuit" then
      err.usage("hydra prune: --method must be taylor or circuit (got '%s')", method)
    end
    local obj = opts.objective
    if obj and obj ~= "acc" and obj ~= "ood" and obj ~= "avg" then
      err.usage("hydra prune: --objective must be acc, ood or avg (got '%s')", obj)
    end
    if cfg.hydra.members < 1 then
      err.usage("hydra prune: --members must be >= 1 (got %d)", cfg.hydra.members)
    end
    err.wrap(nil, core.threads_init, cfg.threads)
    print(("seed %d  method %s  members %d"):format(cfg.seed, method, cfg.hydra.members))
    local t0 = core.now()
    local res = err.wrap("hydra prune", hydra_prune.members, m, cfg, {
      method = method, objective = obj, data = opts.data, ood_path = opts.ood,
      progress = method == "circuit" and not opts.quiet
        and require("hydra.progress").counter("circuit search") or nil,
    })
    err.wrap("hydra prune", hydra_prune.write_gates, opts.out, res, {
      checkpoint = ckpt, checkpoint_sha256 = core.file_sha256(ckpt),
      normalize = cfg.prune.normalize and 1 or 0, overlap_penalty =
        cfg.hydra.diversity.overlap_penalty, bootstrap = cfg.hydra.diversity.bootstrap and 1 or 0,
    })
    local n = res.overlap:size(1)
    local sum, pairs_ = 0, 0
    for a = 1, n do for b = a + 1, n do sum = sum + res.overlap:get(a, b); pairs_ = pairs_ + 1 end end
    print(("%d members, mean pairwise head overlap (Jaccard) %s, %.1f s -> %s"):format(n,
      pairs_ > 0 and ("%.3f"):format(sum / pairs_) or "-", core.now() - t0, opts.out))
  end,
}
