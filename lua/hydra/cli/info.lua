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
datasets with at most N elements (--limit, default 20). Strings are UTF-8. For a checkpoint made
by `hydra import`, the source file, its sha256 and the name map used follow, one rule a line.]],
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
    if f:exists("/import") and f:exists("/import/name_map") then
      -- an imported model (hydra import): its provenance and the name map used, one rule a line
      local a = f:attrs("/import")
      print(("imported: %s from '%s' (sha256 %s)%s"):format(tostring(a.format),
        tostring(a.source), tostring(a.sha256),
        a.config and (", config '" .. a.config .. "'") or ""))
      local rows = f:read_strings("/import/name_map")
      print(("name map (%d tensors; source -> hydra, transform, source dtype):"):format(#rows))
      for _, r in ipairs(rows) do
        local src, dst, tr, dt = r:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$")
        print(("  %s -> %s (%s, %s)"):format(src or r, dst or "?", tr or "?", dt or "?"))
      end
      local ign = f:exists("/import/ignored") and f:read_strings("/import/ignored") or {}
      if #ign > 0 then print("ignored: " .. table.concat(ign, ", ")) end
    end
    return 0
  end,
}
