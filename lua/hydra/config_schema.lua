-- lua/hydra/config_schema.lua: what configs/defaults.yaml cannot say about a key, keyed by its
-- dotted path. Every path must be a key of defaults.yaml (checked when defaults load), and every
-- default must satisfy its entry. Fields (all optional):
--   type   overrides the type read off the default; needed when the default is null (optional
--          key) or an empty list. Words: integer, number (integers and floats), string,
--          boolean, map (free-form: any keys), list<T>; alternatives joined by "|",
--          e.g. "integer|list<integer>".
--   enum   allowed strings (for a list: allowed elements)
--   gt, ge, lt, le   numeric bounds (> >= < <=); for a list they apply to every element
--   id_neutral  true for a key added after run-ids were published: while it holds its (scalar or
--          null) default it is left out of the resolved YAML, so of config hashes, run-ids and
--          (through config.identity) stage keys, which therefore stay valid
--   name   true: the string becomes a folder name, so it must match [A-Za-z0-9_.-]+ and not
--          be '.' or '..' (no '/', no control characters, not empty)
-- Every number (float) of every key must be finite: .inf and .nan are refused everywhere.
-- A key whose default is null is optional: null is accepted besides `type`.
return {
  ["seed"] = { ge = 0 },
  ["threads"] = { ge = 0, le = 1024 },       -- HY_MAX_THREADS (core/tensor/base.h)
  ["precision"] = { enum = { "fp32", "bf16" }, id_neutral = true },
  ["profile"] = { enum = { "quick", "paper" } },
  ["experiment"] = { name = true },

  ["model.kind"] = { enum = { "vit", "text" } },
  ["model.image_size"] = { ge = 1 },
  ["model.channels"] = { ge = 1 },
  ["model.patch"] = { ge = 1 },
  ["model.vocab_size"] = { ge = 0 },
  ["model.max_len"] = { ge = 2 },
  ["model.d_model"] = { ge = 1 },
  ["model.n_heads"] = { ge = 1 },
  ["model.depth"] = { ge = 1 },
  ["model.d_mlp"] = { ge = 1 },
  ["model.n_classes"] = { ge = 2 },
  ["model.dropout"] = { ge = 0, lt = 1 },
  -- the encoder options of imported models (core/nn/xfmr.h) arrived after run-ids were
  -- published: id_neutral
  ["model.ln_eps"] = { type = "number", gt = 0, lt = 1, id_neutral = true },
  ["model.norm"] = { enum = { "pre", "post" }, id_neutral = true },
  ["model.act"] = { enum = { "gelu", "gelu_tanh" }, id_neutral = true },
  ["model.pooler"] = { enum = { "none", "tanh" }, id_neutral = true },
  ["model.text_embed"] = { enum = { "hydra", "bert" }, id_neutral = true },
  ["model.type_vocab"] = { ge = 0, id_neutral = true },
  -- models and data from outside (lua/hydra/sources.lua) arrived after run-ids were published
  ["model.from"] = { type = "string", id_neutral = true },
  ["import.format"] = { type = "string", enum = { "timm-vit", "hf-vit", "hf-bert" }, id_neutral = true },
  ["import.arch"] = { type = "string", id_neutral = true },
  ["import.heads"] = { type = "integer", ge = 1, id_neutral = true },
  ["import.classes"] = { type = "integer", ge = 2, id_neutral = true },
  ["import.max_len"] = { type = "integer", ge = 2, id_neutral = true },
  ["import.strict"] = { id_neutral = true },
  ["data.sources"] = { type = "map", id_neutral = true },
  ["data.text_column"] = { id_neutral = true },
  ["data.label_column"] = { id_neutral = true },
  ["deep_ensemble.from"] = { type = "list<string>", id_neutral = true },
  ["export.stages"] = { id_neutral = true },
  ["export.format"] = { enum = { "none", "safetensors" }, id_neutral = true },

  ["data.ood"] = { type = "list<string>|map" },   -- a list (= far) or {near: [...], far: [...]}
  ["data.train_subset"] = { ge = 0 },
  ["data.test_subset"] = { ge = 0 },
  ["data.shift_subset"] = { ge = 0 },

  ["train.epochs"] = { ge = 0 },
  ["train.batch_size"] = { ge = 1, le = 1048576 },        -- 2^20: sizes stay far from overflow
  ["train.eval_batch_size"] = { ge = 1, le = 1048576 },
  ["train.warmup_epochs"] = { type = "integer|number", ge = 0 },   -- an integer stays one (stage keys)
  ["train.grad_clip"] = { ge = 0 },
  ["train.label_smoothing"] = { ge = 0, lt = 1 },
  ["train.augment.crop_padding"] = { ge = 0 },
  ["train.select_best"] = { enum = { "val_nll", "val_acc", "last" } },
  ["train.init"] = { type = "string", id_neutral = true },

  -- pretrain.* arrived after run-ids were published: id_neutral (a pretrained encoder enters a
  -- run through train.init, whose file hash is part of the base-model stage key)
  ["pretrain.corpus"] = { name = true, id_neutral = true },
  ["pretrain.epochs"] = { ge = 1, id_neutral = true },
  ["pretrain.batch_size"] = { ge = 1, le = 1048576, id_neutral = true },
  ["pretrain.learning_rate"] = { gt = 0, id_neutral = true },
  ["pretrain.warmup_epochs"] = { ge = 0, id_neutral = true },
  ["pretrain.min_lr"] = { ge = 0, id_neutral = true },
  ["pretrain.grad_clip"] = { ge = 0, id_neutral = true },
  ["pretrain.mask_rate"] = { gt = 0, le = 1, id_neutral = true },
  ["pretrain.mask_token"] = { ge = 0, le = 1, id_neutral = true },
  ["pretrain.random_token"] = { ge = 0, le = 1, id_neutral = true },
  ["pretrain.train_subset"] = { ge = 0, id_neutral = true },
  ["pretrain.val_subset"] = { ge = 0, id_neutral = true },

  ["optim.name"] = { enum = { "adamw" } },
  ["optim.learning_rate"] = { gt = 0 },
  ["optim.beta1"] = { ge = 0, lt = 1 },
  ["optim.beta2"] = { ge = 0, lt = 1 },
  ["optim.eps"] = { gt = 0 },
  ["optim.weight_decay"] = { ge = 0 },
  ["optim.schedule"] = { enum = { "cosine", "constant" } },
  ["optim.min_lr"] = { ge = 0 },

  ["prune.method"] = { enum = { "taylor", "circuit" } },
  ["prune.calib_size"] = { ge = 1 },
  ["prune.val_size"] = { ge = 0 },
  ["prune.batch_size"] = { ge = 1 },
  ["prune.circuit_batch_size"] = { ge = 1, id_neutral = true },
  ["prune.objective"] = { enum = { "acc", "ood", "avg" } },
  ["prune.objectives"] = { enum = { "acc", "ood", "avg" } },

  ["hydra.members"] = { ge = 1, le = 64 },   -- the fused bound (core/hydra/fused.c)
  ["hydra.keep_heads"] = { type = "integer|list<integer>", ge = 1 },
  ["hydra.diversity.objectives"] = { enum = { "acc", "ood", "avg" } },
  ["hydra.diversity.keep_counts"] = { type = "list<integer>", ge = 1 },
  ["hydra.diversity.overlap_penalty"] = { ge = 0, le = 1 },

  ["prop1.rows"] = { ge = 0, id_neutral = true },
  ["prop1.hvp_step"] = { gt = 0, lt = 1, id_neutral = true },

  ["finetune.epochs"] = { ge = 0 },
  ["finetune.learning_rate"] = { gt = 0 },
  ["finetune.warmup_epochs"] = { type = "number", ge = 0, id_neutral = true },
  ["finetune.train_subset"] = { ge = 0 },

  ["fuse.mlp"] = { enum = { "average", "member" } },
  ["fuse.ln"] = { enum = { "average", "member" } },
  ["fuse.embed"] = { enum = { "average", "member" } },
  ["fuse.head"] = { enum = { "average", "member" } },

  ["deep_ensemble.members"] = { ge = 1 },
  ["hydra_circ_restarts.restarts"] = { ge = 1, le = 1000, id_neutral = true },
  ["hydra_circ_restarts.holdout"] = { gt = 0, lt = 1, id_neutral = true },
  ["mc_dropout.samples"] = { ge = 1 },
  ["mc_dropout.rate"] = { ge = 0, lt = 1 },
  ["packed_ensemble.members"] = { ge = 1, le = 64, id_neutral = true },   -- the fused bound
  -- alpha: the packed model is alpha times as wide as the base (the authors use 2 to 4)
  ["packed_ensemble.alpha"] = { gt = 0, le = 16, id_neutral = true },
  ["mimo.members"] = { ge = 1, le = 64, id_neutral = true },
  ["mimo.input_repetition"] = { ge = 0, le = 1, id_neutral = true },
  ["mimo.batch_repetition"] = { ge = 1, le = 64, id_neutral = true },

  ["vilu.input"] = { enum = { "vilu", "features" }, id_neutral = true },
  ["vilu.loss"] = { enum = { "bce", "tcp" }, id_neutral = true },
  ["vilu.split"] = { enum = { "val", "train" }, id_neutral = true },
  ["vilu.rows"] = { ge = 0, id_neutral = true },
  ["vilu.hidden"] = { ge = 1, le = 65536, id_neutral = true },
  ["vilu.epochs"] = { ge = 1, id_neutral = true },
  ["vilu.batch_size"] = { ge = 1, le = 1048576, id_neutral = true },
  ["vilu.learning_rate"] = { gt = 0, id_neutral = true },
  ["vilu.weight_decay"] = { ge = 0, id_neutral = true },
  ["batch_ensemble.members"] = { ge = 1, le = 64, id_neutral = true },
  ["lora_ensemble.members"] = { ge = 1, le = 64, id_neutral = true },
  ["lora_ensemble.rank"] = { ge = 1, id_neutral = true },
  ["lora_ensemble.alpha"] = { gt = 0, id_neutral = true },
  ["lora_ensemble.targets"] = { id_neutral = true },   -- words checked by core.ens_model_new

  ["eval.score"] = { enum = { "msp", "maxlogit", "entropy", "mi", "energy", "disagreement",
                              "learned" } },
  ["eval.calibrate"] = { enum = { "none", "temperature" } },
  ["eval.ece_bins"] = { ge = 1 },
  ["eval.bootstrap"] = { ge = 0, le = 100000 },
  ["eval.bootstrap_seed"] = { type = "integer", ge = 0 },

  ["sweep.jobs"] = { ge = 1 },
}
