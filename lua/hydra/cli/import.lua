-- hydra import FILE.safetensors|DIR --format timm-vit|hf-vit|hf-bert [...] --out CKPT.h5: a
-- pretrained transformer as a hydra checkpoint (lua/hydra/import.lua).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra import FILE.safetensors|DIR --format timm-vit|hf-vit|hf-bert "
  .. "[--config config.json] [--preprocessor preprocessor_config.json] [--arch NAME] "
  .. "[--heads H] [--vocab vocab.txt] [--tokenizer-config tokenizer_config.json] [--classes K] "
  .. "[--max-len N] [--seed S] [--strict|--no-strict] --out CKPT.h5"

return {
  summary = "import a timm / Hugging Face safetensors model as a hydra checkpoint",
  usage = USAGE,
  help = [[Reads the weights of FILE.safetensors (F32, F16 and BF16 widened exactly) through the
name map of --format (timm-vit: timm's VisionTransformer names, 1:1; hf-vit:
ViTForImageClassification, q/k/v concatenated into attn.qkv; hf-bert:
BertForSequenceClassification) and writes CKPT.h5, an ordinary checkpoint that predict, prune,
finetune, fuse and exp accept. DIR stands for DIR/model.safetensors with DIR's config.json,
preprocessor_config.json, vocab.txt and tokenizer_config.json when present (options override).
A sharded checkpoint (DIR/model.safetensors.index.json, whose weight_map names the shard file
of every tensor, and the shards) is read shard by shard and imported as one file; the index
must name exactly the tensors the shards hold (a tensor missing from its shard, in another
shard or in two, a shard file of DIR not listed, a shard path leaving DIR: errors naming the
file and tensor). FILE may also be such an index file.

Sizes come from the tensor shapes. What shapes cannot tell comes from --heads, --arch (a timm
name such as vit_small_patch16_224: heads and preprocessing), --config (an HF config.json:
num_attention_heads, layer_norm_eps, hidden_act; a timm config.json: model_args,
pretrained_cfg) or the file's own hydra.* metadata (a hydra export); sources that disagree, or
none, are errors naming the option that settles it. --strict (default) refuses tensors the name
map does not use, --no-strict lists them as ignored; structure hydra does not implement
(LayerScale, register tokens, norm_pre, q/k-norm, fc_norm, relative positions) is refused by
name. --classes K other than the file's replaces the classifier by a fresh one (seeded by
--seed, default 0). --max-len N keeps the first N positions of a BERT position table (hydra's
attention takes at most 256 tokens besides [CLS]).

CKPT.h5 also holds /import (format, source file and its sha256, the name map used, source dtypes,
ignored tensors) and /preprocess (images: mode, interpolation, size, crop_pct, mean, std; text:
tokenizer, do_lower_case, max_len, vocab); `hydra info CKPT.h5` shows them.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "import", usage = USAGE,
      options = { format = "string", config = "string", preprocessor = "string", arch = "string",
                  heads = "integer", vocab = "string", ["tokenizer-config"] = "string",
                  classes = "integer", ["max-len"] = "integer", seed = "natural",
                  strict = "flag", ["no-strict"] = "flag", out = "string" },
      positional = { min = 1, max = 1, names = { "FILE.safetensors" } },
      required = { "format", "out" },
    })
    if opts.strict and opts["no-strict"] then
      err.usage("hydra import: give --strict or --no-strict, not both")
    end
    for _, k in ipairs({ "heads", "classes", "max-len" }) do
      if opts[k] and opts[k] < 1 then err.usage("hydra import: --%s must be >= 1", k) end
    end
    local core = require("hydra.core")
    local src = opts.positional[1]
    local file = src
    local found = {}
    if core.stat(src) == "dir" then
      file = src .. "/model.safetensors"
      if core.stat(file) ~= "file" then   -- a sharded checkpoint (lua/hydra/shards.lua)
        file = src .. "/" .. require("hydra.shards").INDEX
        found[#found + 1] = require("hydra.shards").INDEX
      end
      if core.stat(file) ~= "file" then
        err.fail("hydra import: folder '%s' has no model.safetensors (nor %s)", src,
          require("hydra.shards").INDEX)
      end
      for key, name in pairs({ config = "config.json", preprocessor = "preprocessor_config.json",
                               vocab = "vocab.txt", ["tokenizer-config"] = "tokenizer_config.json" }) do
        if not opts[key] and core.stat(src .. "/" .. name) == "file" then
          opts[key] = src .. "/" .. name
          found[#found + 1] = name
        end
      end
      table.sort(found)
    end
    local ins = { { file, "FILE.safetensors" } }
    for _, k in ipairs({ "config", "preprocessor", "vocab", "tokenizer-config" }) do
      if opts[k] then
        if core.stat(opts[k]) ~= "file" then
          err.fail("hydra import: --%s '%s': no such file", k, opts[k])
        end
        ins[#ins + 1] = { opts[k], "--" .. k }
      end
    end
    require("hydra.output").check({ { opts.out, "--out" } }, ins, "hydra import")
    if #found > 0 then print(("%s: using %s"):format(src, table.concat(found, ", "))) end
    require("hydra.import").run({
      file = file, format = opts.format, config = opts.config, preprocessor = opts.preprocessor,
      arch = opts.arch, heads = opts.heads, vocab = opts.vocab,
      tokenizer_config = opts["tokenizer-config"], classes = opts.classes,
      max_len = opts["max-len"], seed = opts.seed or 0, strict = not opts["no-strict"],
      out = opts.out, log = print,
    })
  end,
}
