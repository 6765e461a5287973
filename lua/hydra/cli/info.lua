-- hydra info FILE.h5 [--data] [--limit N]: what is inside an HDF5 file (checkpoint, prepared
-- dataset, prediction or result file).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra info FILE.h5 [--data] [--limit N]"

return {
  summary = "show the groups, datasets and attributes of an HDF5 file",
  usage = USAGE,
  help = [[Prints every group (path ending in /) and dataset (dtype and shape) of FILE.h5, sorted by
name, depth first, with each object's attributes on the lines below it as `@key = value`
(strings quoted and cut after 80 bytes, arrays after 8 values). --data also prints the values of
datasets with at most N elements (--limit, default 20). Strings are UTF-8.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "info",
      usage = USAGE,
      options = { data = "flag", limit = "integer" },
      positional = { min = 1, max = 1, names = { "FILE.h5" } },
    })
    if opts.limit and opts.limit < 0 then
      err.usage("hydra info: --limit must be >= 0, got %d", opts.limit)
    end
    local h5 = require("hydra.h5")
    local f <close> = err.wrap(nil, h5.open, opts.positional[1])
    local text = err.wrap(nil, h5.tree, f, { data = opts.data, limit = opts.limit })
    io.write(text)
    return 0
  end,
}
