-- hydra config [FILE.yaml] [key=value ...]: prints the resolved config as YAML.
local argparse = require("hydra.argparse")
local config = require("hydra.config")

local USAGE = "hydra config [FILE.yaml] [key.path=value ...] [--resolve | --check | --hash]"

return {
  summary = "resolve a config (defaults < FILE < key=value) and print it as YAML",
  usage = USAGE,
  help = [[Reads configs/defaults.yaml, then FILE.yaml (and the files it includes), then the
key.path=value overrides, checks every key, type and range, and prints the resolved config as
YAML in the defaults' key order (the text of a run's config.resolved.yaml, less its header
comment). Without FILE it
prints the defaults with the overrides applied.
  --resolve print the values of ${...} interpolations (without it they print as written;
            --check, --hash and every run resolve them)
  --check   only validate; print "FILE: ok"
  --hash    print the config hash (hydra.config.hash) instead of the YAML
Exit status: 0 valid, 1 invalid config (the message names file:line:col), 2 usage error.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "config",
      usage = USAGE,
      options = { check = "flag", hash = "flag", resolve = "flag" },
      positional = { min = 0, max = 1, names = { "FILE.yaml" } },
      overrides = true,
    })
    if opts.check and opts.hash then
      require("hydra.err").usage("hydra config: --check and --hash cannot be combined (usage: %s)",
        USAGE)
    end
    local path = opts.positional[1]
    local cfg = config.load(path, opts.override_list)   -- resolved: errors in ${} show here
    if opts.check then
      print((path or "configs/defaults.yaml") .. ": ok")
    elseif opts.hash then
      print(config.hash(cfg))
    else
      if not opts.resolve then cfg = config.resolve(path, opts.override_list, { raw = true }) end
      io.write(config.to_yaml(cfg))
    end
    return 0
  end,
}
