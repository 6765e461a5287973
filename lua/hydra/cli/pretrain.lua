-- hydra pretrain CONFIG.yaml [key=value ...] --out PRE.h5 [--seed S] [--quiet]: masked-language
-- modelling of the text encoder on an unlabelled corpus (hydra.pretrain); resumable per epoch.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra pretrain CONFIG.yaml [key=value ...] --out PRE.h5 [--seed S] [--quiet]"

return {
  summary = "pretrain the text encoder with masked-language modelling",
  usage = USAGE,
  help = [[Pretrains the text encoder of CONFIG.yaml (model.*, after key=value overrides) with
BERT's masked-language modelling on the `train` split of the prepared corpus
data.dir/<pretrain.corpus>.h5 (default pretrain-text: SST-2's training sentences without labels
plus Debian-packaged English text, sharing no sentence with any test set; datasets/SOURCES.md):
15 % of the tokens are chosen (pretrain.mask_rate), 80 % of them replaced by [MASK]
(pretrain.mask_token), 10 % by a random word (pretrain.random_token), the rest kept; the MLM
head (dense + GELU + LayerNorm after the encoder's final norm, decoder tied to the token
embedding) predicts the original words. AdamW (pretrain.learning_rate, optim.beta1/beta2/eps/
weight_decay), warm-up + optim.schedule, clipping at pretrain.grad_clip. After each epoch: the
MLM loss and accuracy on the corpus's held-out `val` split (pretrain.val_subset sentences), and
the whole state written to PRE.h5.partial; running the same command again resumes after the
last finished epoch (a kill loses at most one epoch). PRE.h5 is a model checkpoint plus the MLM
head (/mlm/params); fine-tune from it with train.init=PRE.h5. Progress (a bar with ETA) goes to
stderr (--quiet: none), one line per epoch to stdout.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "pretrain", usage = USAGE,
      options = { out = "string", seed = "natural", quiet = "flag" },
      positional = { min = 1, max = 1, names = { "CONFIG.yaml" } },
      overrides = true, required = { "out" },
    })
    local core = require("hydra.core")
    local config = require("hydra.config")
    local pretrain = require("hydra.pretrain")
    local cfg = config.load(opts.positional[1], opts.override_list)
    if opts.seed then cfg.seed = opts.seed end
    local corpus = pretrain.corpus_path(cfg)
    require("hydra.output").check({ { opts.out, "--out" }, { opts.out .. ".partial", "--out" } },
      { { opts.positional[1], "CONFIG.yaml" }, { corpus, "corpus" } }, "hydra pretrain")
    err.wrap(nil, core.threads_init, cfg.threads)
    print(("seed %d  threads %d  corpus %s  model %s d_model %d depth %d"):format(cfg.seed,
      core.threads(), corpus, cfg.model.kind, cfg.model.d_model, cfg.model.depth))
    io.stdout:flush()
    local hist = err.wrap("hydra pretrain", pretrain.run, cfg, opts.out, {
      progress = not opts.quiet,
      log = function(line) print(line); io.stdout:flush() end,
    })
    local curves = require("hydra.curves")   -- the learning curve beside the checkpoint
    if hist.curve then err.wrap("hydra pretrain", curves.write, curves.beside(opts.out), hist.curve) end
    print(("pretrained %d parameters on %d sentences (%d held out) in %.1f s: held-out MLM "
      .. "loss %.4f, accuracy %.2f%% -> %s"):format(hist.params, hist.corpus.train,
      hist.corpus.val, hist.seconds, hist.val_loss or 0, 100 * (hist.val_acc or 0), opts.out))
  end,
}
