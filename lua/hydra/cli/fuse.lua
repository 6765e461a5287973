-- hydra fuse MEMBER.h5... --out FUSED.h5 [--mlp average|member] [--ln ...] [--embed ...]
--   [--head ...]: the fused Hydra model of pruned members.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra fuse MEMBER.h5... --out FUSED.h5 [--mlp average|member] "
  .. "[--ln average|member] [--embed average|member] [--head average|member] [--allow-mixed]"

return {
  summary = "fuse pruned members into one Hydra model",
  usage = USAGE,
  help = [[Packs the members (checkpoints with binary /head_gates, all of one config) into one
fused model (DESIGN §3.5): each member keeps its residual stream and its kept heads' Q/K/V/O
slices; --mlp average (default) merges fc1/fc2 into their mean, applied to every stream as one
GEMM; --ln, --embed, --head (default member) average the LayerNorms (norm1, norm2, final norm),
the embeddings (cls, pos, patch/token, a BERT's token types and embedding LayerNorm; the first
layer's input is then computed once) and the classifier head (with a BERT's pooler). The
members' encoder options (post-LN blocks, gelu_tanh, the tanh pooler, BERT's embedding) are the
fused model's. Defaults come from the fuse section of configs/defaults.yaml. FUSED.h5 holds
/config, /fuse (mlp, ln, embed, head, members), /members/{m}/... (m 0-based),
/members/{m}/head_gates, /shared/... and /meta (data_mean, data_std, members). `hydra predict`
accepts it and writes /member_probs. Members of different prunings are refused unless
--allow-mixed: the same member twice (identical files, or one gates row twice), members of
different gates files, of different base checkpoints, or with gates pruned from another
checkpoint (the /meta that `hydra finetune` records: gates_sha256, member,
base_checkpoint_sha256, gates_checkpoint_sha256).]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "fuse", usage = USAGE,
      options = { out = "string", mlp = "string", ln = "string", embed = "string",
                  head = "string", ["allow-mixed"] = "flag" },
      positional = { min = 1, max = 64, names = { "MEMBER.h5" } },
      required = { "out" },
    })
    local ins = {}
    for i, p in ipairs(opts.positional) do ins[i] = { p, ("MEMBER.h5 #%d"):format(i) } end
    require("hydra.output").check({ { opts.out, "--out" } }, ins, "hydra fuse")
    local config = require("hydra.config")
    local model = require("hydra.model")
    local fuse = require("hydra.fuse")
    local d = config.defaults().fuse
    local modes = {}
    for _, k in ipairs({ "mlp", "ln", "embed", "head" }) do
      local v = opts[k] or d[k]
      if v ~= "average" and v ~= "member" then
        err.usage("hydra fuse: --%s must be average or member (got '%s')", k, v)
      end
      modes[k] = v
    end
    local members = {}
    for i, p in ipairs(opts.positional) do
      members[i] = err.wrap("hydra fuse", model.load, p)
    end
    if not opts["allow-mixed"] then
      local why = fuse.mixed_members(members, opts.positional)
      if why then err.fail("hydra fuse: %s; pass --allow-mixed to fuse them anyway", why) end
    end
    local f = err.wrap("hydra fuse", fuse.build, members, modes)
    local paths = table.concat(opts.positional, ",")
    err.wrap("hydra fuse", f.save, f, opts.out, { members = paths })
    local info = f:info()
    print(("%d members (mlp %s, ln %s, embed %s, head %s): %d parameters, %.1f MFLOPs per sample "
      .. "at the full length T = %d -> %s"):format(info.members, info.mlp, info.ln, info.embed,
      info.head, info.params, info.flops / 1e6, info.seq_len, opts.out))
  end,
}
