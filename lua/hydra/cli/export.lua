-- hydra export CKPT.h5 --format safetensors [--names timm|hf] [--slice] --out FILE.safetensors:
-- a hydra model or pruned member as safetensors (lua/hydra/export.lua).
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra export CKPT.h5 --format safetensors [--names timm|hf] [--slice] "
  .. "[--dtype f32|f16|bf16] --out FILE.safetensors"

return {
  summary = "export a model or a pruned member as safetensors (timm / Hugging Face names)",
  usage = USAGE,
  help = [[Writes the checkpoint's tensors under timm names (ViTs: the layout hydra uses) or Hugging
Face names (--names hf: ViTForImageClassification, or BertForSequenceClassification for a text
model; q/k/v split out of attn.qkv); the default is the names the model was imported from
(timm for a ViT trained in hydra). The writer follows the safetensors reference: tensors sorted
by dtype alignment then name, contiguous offsets, header padded to 8 bytes; the same checkpoint
gives the same bytes. --dtype f16|bf16 stores the tensors rounded to nearest even (default f32).

A pruned member (/head_gates not all 1) is written dense-masked by default: original shapes, each
head's columns of the output projection multiplied by its gate (a pruned head's are zero), so
unmodified timm / transformers code reproduces hydra's gated logits. --slice removes the pruned
heads instead (q/k/v rows and projection columns; a layer may keep 0 heads) and records the
per-layer head counts in __metadata__ hydra.head_counts. __metadata__ also holds hydra.heads (the
kept heads per layer), hydra.head_dim, hydra.ln_eps, hydra.act and hydra.source (the origin's
sha256), so `hydra import` of the file needs no --heads and restores the member exactly.

A fused Hydra model (from `hydra fuse`) is written as "members.{m}.<name>" (each member's
tensors, attention packed to its kept heads) and "shared.<name>" (what the fusion averaged),
plus FILE.name_map.json, where each tensor sits in the members' full-size tensors. A fused ViT
uses hydra's timm names; a fused BERT-family model Hugging Face names (query / key / value of
the kept heads apart). tests/ref/fused_reference.py rebuilds the members in PyTorch from the two
files.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "export", usage = USAGE,
      options = { format = "string", names = "string", slice = "flag", out = "string",
                  dtype = "string" },
      positional = { min = 1, max = 1, names = { "CKPT.h5" } },
      required = { "format", "out" },
    })
    if opts.format ~= "safetensors" then
      err.usage("hydra export: --format must be safetensors (got '%s')", opts.format)
    end
    if opts.names and opts.names ~= "timm" and opts.names ~= "hf" then
      err.usage("hydra export: --names must be timm or hf (got '%s')", opts.names)
    end
    require("hydra.output").check({ { opts.out, "--out" } },
      { { opts.positional[1], "CKPT.h5" } }, "hydra export")
    require("hydra.export").run({ ckpt = opts.positional[1], names = opts.names,
                                  slice = opts.slice, out = opts.out, dtype = opts.dtype,
                                  log = print })
  end,
}
