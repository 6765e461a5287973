-- hydra model init CONFIG.yaml [key=value ...] --out CKPT.h5 [--seed S]: a freshly initialised
-- model saved as a checkpoint (DESIGN §2 schema).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra model init CONFIG.yaml [key=value ...] --out CKPT.h5 [--seed S]"

return {
  summary = "create a freshly initialised model checkpoint",
  usage = USAGE,
  help = [[init: builds the model of CONFIG.yaml's `model` section (after key=value overrides),
initialises it from --seed (default: the config's seed) with the timm-style init (truncated
normal 0.02 for weights and embeddings, zero biases, unit LayerNorm weights) and writes it to
--out atomically. /meta records the seed and the config hash.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "model", usage = USAGE,
      options = { out = "string", seed = "natural" },
      positional = { min = 2, max = 2, names = { "init", "CONFIG.yaml" } },
      overrides = true, required = { "out" },
    })
    local sub, path = opts.positional[1], opts.positional[2]
    if sub ~= "init" then
      err.usage("hydra model: unknown subcommand '%s' (usage: %s)", sub, USAGE)
    end
    local config = require("hydra.config")
    local model = require("hydra.model")
    require("hydra.output").check({ { opts.out, "--out" } }, { { path, "CONFIG.yaml" } },
      "hydra model init")
    local cfg = config.load(path, opts.override_list)
    local seed = opts.seed or cfg.seed
    cfg.seed = seed
    local m = err.wrap("hydra model init", model.new, cfg, seed)
    err.wrap("hydra model init", m.save, m, opts.out, {
      seed = seed, config_hash = config.hash(cfg), config_yaml = config.to_yaml(cfg),
    })
    print(("model %s: %d parameters, seed %d -> %s"):format(cfg.model.kind, m:params_count(),
      seed, opts.out))
  end,
}
