-- hydra train CONFIG.yaml [key=value ...] --out CKPT.h5 [--seed S] [--quiet]: trains one model
-- on a prepared dataset and writes the best checkpoint atomically.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra train CONFIG.yaml [key=value ...] --out CKPT.h5 [--seed S] [--quiet]"

-- the short commit hash recorded in the checkpoint's /meta (hydra.run.git_hash, 12 digits)
local function git_hash()
  local h = require("hydra.run").git_hash()
  return h == "unknown" and h or h:sub(1, 12)
end

return {
  summary = "train a model on a prepared dataset",
  usage = USAGE,
  help = [[Trains the model of CONFIG.yaml (after key=value overrides) on the `train` split of
the prepared dataset data.dir/data.id.h5 (the first data.train_subset samples; 0 = all), with
AdamW, warmup + cosine schedule, clipping and the augmentation switches of the `train` and
`optim` sections. After every epoch it evaluates on the `val` split (first data.test_subset
samples) and keeps the weights chosen by train.select_best (default: lowest validation NLL).
The seed (--seed, else the config's) is printed and recorded with the config hash, data hash
and git hash in the checkpoint's /meta. Progress goes to stderr (a bar on a terminal, plain
lines otherwise; --quiet: none); one line per epoch goes to stdout. A non-finite loss stops
training with an error naming the step; nothing is written then.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "train", usage = USAGE,
      options = { out = "string", seed = "natural", quiet = "flag" },
      positional = { min = 1, max = 1, names = { "CONFIG.yaml" } },
      overrides = true, required = { "out" },
    })
    local core = require("hydra.core")
    local config = require("hydra.config")
    local model = require("hydra.model")
    local cfg = config.load(opts.positional[1], opts.override_list)
    if opts.seed then cfg.seed = opts.seed end
    local data_file = model.data_path(cfg, cfg.data.id)
    -- before training: an output that would destroy an input or cannot be written fails now
    require("hydra.output").check({ { opts.out, "--out" } },
      { { opts.positional[1], "CONFIG.yaml" }, { data_file, "data file" } }, "hydra train")
    err.wrap(nil, core.threads_init, cfg.threads)
    print(("seed %d  threads %d  data %s  model %s"):format(cfg.seed, core.threads(), data_file,
      cfg.model.kind))
    io.stdout:flush()
    local m = err.wrap("hydra train", model.new, cfg)
    print(("parameters %d"):format(m:params_count()))
    local t0 = core.now()
    local hist = err.wrap("hydra train", m.train, m, data_file, cfg, {
      progress = not opts.quiet,
      log = function(line) print(line); io.stdout:flush() end,
    })
    local meta = {
      seed = cfg.seed, config_hash = config.hash(cfg), config_yaml = config.to_yaml(cfg),
      data_id = cfg.data.id, data_hash = err.wrap("hydra train", core.file_sha256, data_file),
      git_hash = git_hash(), best_epoch = hist.best_epoch, epochs = cfg.train.epochs,
      train_seconds = core.now() - t0,
    }
    if hist.best_val_nll then meta.val_nll, meta.val_acc = hist.best_val_nll, hist.best_val_acc end
    err.wrap("hydra train", m.save, m, opts.out, meta)
    local curves = require("hydra.curves")   -- the learning curve beside the checkpoint
    err.wrap("hydra train", curves.write, curves.beside(opts.out), hist.curve)
    print(("best epoch %d%s -> %s"):format(hist.best_epoch, hist.best_val_nll and
      ("  val nll %.4f  val acc %.2f%%"):format(hist.best_val_nll, 100 * hist.best_val_acc) or "",
      opts.out))
  end,
}
