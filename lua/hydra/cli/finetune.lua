-- hydra finetune CKPT.h5 --gates GATES.h5 --member m --out MEMBER.h5 [--data FILE.h5]
--   [key=value ...]: one pruned Hydra member, fine-tuned from the base weights with its gates fixed.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra finetune CKPT.h5 --gates GATES.h5 --member m --out MEMBER.h5 "
  .. "[--data FILE.h5] [--allow-mixed] [--quiet] [key=value ...]"

return {
  summary = "fine-tune one pruned member (gates fixed) from the base checkpoint",
  usage = USAGE,
  help = [[Loads the base CKPT.h5, fixes the head gates of member m (1-based) of GATES.h5 and
trains for finetune.epochs epochs at peak learning rate finetune.learning_rate (the other train.*
and optim.* settings from the checkpoint's config and key=value overrides) on the ID train split.
Pruned heads get no gradient and their weights are restored from the base afterwards, so they are
bit-identical to the base's (decoupled weight decay would otherwise shrink them). finetune.epochs:
0 writes the gated base checkpoint without training (the training-free setting). MEMBER.h5 is a
normal checkpoint with /head_gates set and /meta member, gates_file, gates_sha256,
gates_checkpoint_sha256 (the checkpoint the gates were pruned from), base_checkpoint,
base_checkpoint_sha256, finetune_epochs, finetune_learning_rate: `hydra fuse` checks them. Gates
pruned from another checkpoint (their checkpoint_sha256 is not CKPT.h5's) are refused unless
--allow-mixed is given. (The library function: hydra.finetune.member.)]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "finetune", usage = USAGE,
      options = { gates = "string", member = "integer", out = "string", data = "string",
                  quiet = "flag", ["allow-mixed"] = "flag" },
      positional = { min = 1, max = 1, names = { "CKPT.h5" } },
      overrides = true, required = { "gates", "member", "out" },
    })
    local core = require("hydra.core")
    local model = require("hydra.model")
    local finetune = require("hydra.finetune")
    local prune = require("hydra.prune")
    local ckpt = opts.positional[1]
    require("hydra.output").check({ { opts.out, "--out" } },
      { { ckpt, "CKPT.h5" }, { opts.gates, "--gates" }, { opts.data, "--data" } },
      "hydra finetune")
    local m = err.wrap("hydra finetune", model.load, ckpt)
    local cfg = err.wrap("hydra finetune", finetune.config_of, m, opts.override_list or {})
    local c = m:config()
    local g = err.wrap("hydra finetune", prune.read_gates, opts.gates, c.depth, c.n_heads)
    local n = g.gates:size(1)
    if opts.member < 1 or opts.member > n then
      err.usage("hydra finetune: --member must be in [1, %d] (the members of '%s'; got %d)", n,
        opts.gates, opts.member)
    end
    -- the gates must have been pruned from this checkpoint (their checkpoint_sha256)
    local base_sha, gates_sha = core.file_sha256(ckpt), core.file_sha256(opts.gates)
    local from = g.attrs.checkpoint_sha256
    if type(from) == "string" and from ~= base_sha and not opts["allow-mixed"] then
      err.fail("hydra finetune: the gates '%s' were pruned from another checkpoint (their "
        .. "checkpoint_sha256 %s, '%s' has %s); pass --allow-mixed to apply them anyway",
        opts.gates, from:sub(1, 16), ckpt, base_sha:sub(1, 16))
    end
    err.wrap(nil, core.threads_init, cfg.threads)
    print(("seed %d  member %d of %d  finetune epochs %d"):format(cfg.seed, opts.member, n,
      cfg.finetune.epochs))
    local _, meta, hist = err.wrap("hydra finetune", finetune.member, m, g.gates, opts.member,
      cfg, { data = opts.data, progress = not opts.quiet,
             log = function(line) print(line); io.stdout:flush() end })
    meta.gates_file, meta.base_checkpoint = opts.gates, ckpt
    meta.gates_sha256, meta.base_checkpoint_sha256 = gates_sha, base_sha
    if type(from) == "string" then meta.gates_checkpoint_sha256 = from end
    err.wrap("hydra finetune", m.save, m, opts.out, meta)
    if hist then   -- the learning curve beside the checkpoint (none for finetune.epochs 0)
      local curves = require("hydra.curves")
      err.wrap("hydra finetune", curves.write, curves.beside(opts.out), hist.curve)
    end
    print(("member %d -> %s"):format(opts.member, opts.out))
  end,
}
