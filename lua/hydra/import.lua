-- lua/hydra/import.lua: pretrained transformers from safetensors files into hydra checkpoints
-- (DESIGN §9; the `hydra import` command, lua/hydra/cli/import.lua).
--
--   local imp = require("hydra.import")
--   local r = imp.run({ file = "model.safetensors", format = "timm-vit", config = "config.json",
--                       arch = "vit_small_patch16_224", heads = 6, classes = 10, strict = true,
--                       out = "base.h5", seed = 0, log = print })
--     -> { cfg = model section, mapped = n, ignored = {names}, fresh_head = bool }
--
-- The checkpoint is an ordinary one (DESIGN §2) plus
--   /import      attrs format, source (the path given), sha256 (of the safetensors file), origin
--                (the sha256 of the first file in an import/export chain: the file's
--                __metadata__ "hydra.source" when it has one, else its own sha256), config and
--                config_sha256 (when a config.json was read), arch, strict (0/1), fresh_head
--                (0/1), mapped, ignored (counts)
--   /import/name_map  strings "source<TAB>hydra name<TAB>transform<TAB>dtype", one per tensor
--                read (transform: copy | q | k | v (rows of the fused attn.qkv) | reshape |
--                slice:A:B (rows A..B-1: BERT positions cut to --max-len) | expand (a sliced
--                member's kept heads, zeros elsewhere))
--   /import/ignored   strings: source tensors not used (--no-strict, or always-ignorable ones)
--   /preprocess  images: attrs mode (timm|hf), interpolation (bicubic|bilinear), size, crop_pct,
--                mean [C], std [C] (only when known for the model's C channels: timm and HF
--                give 3); text: tokenizer ("wordpiece"), do_lower_case (0/1),
--                max_len, and the dataset /preprocess/vocab (strings, id = index)
--   /meta        import_format, import_sha256 besides hydra_version
--
-- What is read from where: every size from the tensor shapes (d_model, depth, d_mlp, classes,
-- patch, image size, vocabulary, positions); the head count, LayerNorm epsilon and activation,
-- which shapes cannot tell, from --heads, --arch (M.timm_archs), the config.json or the file's
-- own hydra.* __metadata__ (a hydra export) -- two sources that disagree are an error naming
-- both, none is an error naming the options that settle it. Every failure is a one-line
-- err.fail naming the file and the tensor or key; nothing is written then.
local core = require("hydra.core")
local err = require("hydra.err")

local M = {}

M.formats = { "timm-vit", "hf-vit", "hf-bert" }

-- ===== name maps: one row per rule { source name, hydra name [, transform] } =====
-- "{l}" stands for the block index (0-based on both sides). Transforms: nil copies a tensor of
-- the hydra shape; "q" / "k" / "v" are rows [0,D) / [D,2D) / [2D,3D) of the fused attn.qkv
-- (HF keeps query, key and value apart); "pos" is a position table ([P,D] or [1,P,D]) whose
-- first T rows become hydra's [1,T,D] pos_embed.
M.maps = {
  ["timm-vit"] = {
    { "cls_token", "cls_token" },
    { "pos_embed", "pos_embed" },
    { "patch_embed.proj.weight", "patch_embed.proj.weight" },
    { "patch_embed.proj.bias", "patch_embed.proj.bias" },
    { "blocks.{l}.norm1.weight", "blocks.{l}.norm1.weight" },
    { "blocks.{l}.norm1.bias", "blocks.{l}.norm1.bias" },
    { "blocks.{l}.attn.qkv.weight", "blocks.{l}.attn.qkv.weight" },
    { "blocks.{l}.attn.qkv.bias", "blocks.{l}.attn.qkv.bias" },
    { "blocks.{l}.attn.proj.weight", "blocks.{l}.attn.proj.weight" },
    { "blocks.{l}.attn.proj.bias", "blocks.{l}.attn.proj.bias" },
    { "blocks.{l}.norm2.weight", "blocks.{l}.norm2.weight" },
    { "blocks.{l}.norm2.bias", "blocks.{l}.norm2.bias" },
    { "blocks.{l}.mlp.fc1.weight", "blocks.{l}.mlp.fc1.weight" },
    { "blocks.{l}.mlp.fc1.bias", "blocks.{l}.mlp.fc1.bias" },
    { "blocks.{l}.mlp.fc2.weight", "blocks.{l}.mlp.fc2.weight" },
    { "blocks.{l}.mlp.fc2.bias", "blocks.{l}.mlp.fc2.bias" },
    { "norm.weight", "norm.weight" },
    { "norm.bias", "norm.bias" },
    { "head.weight", "head.weight" },
    { "head.bias", "head.bias" },
  },
  -- transformers/models/vit/convert_vit_timm_to_pytorch.py, read backwards
  ["hf-vit"] = {
    { "vit.embeddings.cls_token", "cls_token" },
    { "vit.embeddings.position_embeddings", "pos_embed" },
    { "vit.embeddings.patch_embeddings.projection.weight", "patch_embed.proj.weight" },
    { "vit.embeddings.patch_embeddings.projection.bias", "patch_embed.proj.bias" },
    { "vit.encoder.layer.{l}.layernorm_before.weight", "blocks.{l}.norm1.weight" },
    { "vit.encoder.layer.{l}.layernorm_before.bias", "blocks.{l}.norm1.bias" },
    { "vit.encoder.layer.{l}.attention.attention.query.weight", "blocks.{l}.attn.qkv.weight", "q" },
    { "vit.encoder.layer.{l}.attention.attention.key.weight", "blocks.{l}.attn.qkv.weight", "k" },
    { "vit.encoder.layer.{l}.attention.attention.value.weight", "blocks.{l}.attn.qkv.weight", "v" },
    { "vit.encoder.layer.{l}.attention.attention.query.bias", "blocks.{l}.attn.qkv.bias", "q" },
    { "vit.encoder.layer.{l}.attention.attention.key.bias", "blocks.{l}.attn.qkv.bias", "k" },
    { "vit.encoder.layer.{l}.attention.attention.value.bias", "blocks.{l}.attn.qkv.bias", "v" },
    { "vit.encoder.layer.{l}.attention.output.dense.weight", "blocks.{l}.attn.proj.weight" },
    { "vit.encoder.layer.{l}.attention.output.dense.bias", "blocks.{l}.attn.proj.bias" },
    { "vit.encoder.layer.{l}.layernorm_after.weight", "blocks.{l}.norm2.weight" },
    { "vit.encoder.layer.{l}.layernorm_after.bias", "blocks.{l}.norm2.bias" },
    { "vit.encoder.layer.{l}.intermediate.dense.weight", "blocks.{l}.mlp.fc1.weight" },
    { "vit.encoder.layer.{l}.intermediate.dense.bias", "blocks.{l}.mlp.fc1.bias" },
    { "vit.encoder.layer.{l}.output.dense.weight", "blocks.{l}.mlp.fc2.weight" },
    { "vit.encoder.layer.{l}.output.dense.bias", "blocks.{l}.mlp.fc2.bias" },
    { "vit.layernorm.weight", "norm.weight" },
    { "vit.layernorm.bias", "norm.bias" },
    { "classifier.weight", "head.weight" },
    { "classifier.bias", "head.bias" },
  },
  -- transformers/models/bert/modeling_bert.py (BertForSequenceClassification); post-LN: norm1
  -- is the LayerNorm after attention, norm2 the one after the MLP, no final norm. Rows marked
  -- opt apply when the model has the tensor (token types, pooler).
  ["hf-bert"] = {
    { "bert.embeddings.word_embeddings.weight", "tok_embed.weight" },
    { "bert.embeddings.position_embeddings.weight", "pos_embed", "pos" },
    { "bert.embeddings.token_type_embeddings.weight", "type_embed.weight", opt = true },
    { "bert.embeddings.LayerNorm.weight", "embed_norm.weight" },
    { "bert.embeddings.LayerNorm.bias", "embed_norm.bias" },
    { "bert.encoder.layer.{l}.attention.self.query.weight", "blocks.{l}.attn.qkv.weight", "q" },
    { "bert.encoder.layer.{l}.attention.self.key.weight", "blocks.{l}.attn.qkv.weight", "k" },
    { "bert.encoder.layer.{l}.attention.self.value.weight", "blocks.{l}.attn.qkv.weight", "v" },
    { "bert.encoder.layer.{l}.attention.self.query.bias", "blocks.{l}.attn.qkv.bias", "q" },
    { "bert.encoder.layer.{l}.attention.self.key.bias", "blocks.{l}.attn.qkv.bias", "k" },
    { "bert.encoder.layer.{l}.attention.self.value.bias", "blocks.{l}.attn.qkv.bias", "v" },
    { "bert.encoder.layer.{l}.attention.output.dense.weight", "blocks.{l}.attn.proj.weight" },
    { "bert.encoder.layer.{l}.attention.output.dense.bias", "blocks.{l}.attn.proj.bias" },
    { "bert.encoder.layer.{l}.attention.output.LayerNorm.weight", "blocks.{l}.norm1.weight" },
    { "bert.encoder.layer.{l}.attention.output.LayerNorm.bias", "blocks.{l}.norm1.bias" },
    { "bert.encoder.layer.{l}.intermediate.dense.weight", "blocks.{l}.mlp.fc1.weight" },
    { "bert.encoder.layer.{l}.intermediate.dense.bias", "blocks.{l}.mlp.fc1.bias" },
    { "bert.encoder.layer.{l}.output.dense.weight", "blocks.{l}.mlp.fc2.weight" },
    { "bert.encoder.layer.{l}.output.dense.bias", "blocks.{l}.mlp.fc2.bias" },
    { "bert.encoder.layer.{l}.output.LayerNorm.weight", "blocks.{l}.norm2.weight" },
    { "bert.encoder.layer.{l}.output.LayerNorm.bias", "blocks.{l}.norm2.bias" },
    { "bert.pooler.dense.weight", "pooler.weight", opt = true },
    { "bert.pooler.dense.bias", "pooler.bias", opt = true },
    { "classifier.weight", "head.weight" },
    { "classifier.bias", "head.bias" },
  },
}

-- Other spellings a source name may have (old TF-converted BERT files): { pattern, replacement }
-- tried in order when the canonical name is absent; export writes the canonical one.
M.aliases = {
  ["hf-bert"] = { { "%.LayerNorm%.weight$", ".LayerNorm.gamma" },
                  { "%.LayerNorm%.bias$", ".LayerNorm.beta" } },
}

-- Source tensors that are never part of the model and are skipped (listed as ignored) even
-- under --strict: { pattern, why }.
M.ignorable = {
  ["timm-vit"] = {},
  ["hf-vit"] = { { "^vit%.pooler%.", "ViTModel's pooler (ViTForImageClassification has none)" } },
  ["hf-bert"] = { { "%.position_ids$", "a buffer of position indices" } },
}

-- Structure hydra does not implement: refused by feature name, never dropped. { pattern, feature }
M.unsupported = {
  { "%.ls[12]%.gamma$", "LayerScale" },
  { "%.layer_scale", "LayerScale" },
  { "^reg_token$", "register tokens" },
  { "^dist_token$", "a distillation token (DeiT)" },
  { "^head_dist%.", "a distillation head (DeiT)" },
  { "^norm_pre%.", "a pre-norm (norm_pre)" },
  { "%.q_norm%.", "q/k-norm" },
  { "%.k_norm%.", "q/k-norm" },
  { "^fc_norm%.", "fc_norm (average pooling)" },
  { "^pre_logits%.", "a pre-logits layer (representation_size)" },
  { "relative_position", "relative positions" },
  { "rel_pos", "relative positions" },
  { "^attn_pool%.", "attention pooling" },
}

-- timm architectures by name: sizes (checked against the shapes), heads, LayerNorm epsilon and
-- the pretrained_cfg preprocessing of the default tag (timm/models/vision_transformer.py,
-- deit.py; mean/std "inception" = 0.5, "imagenet" = IMAGENET_DEFAULT_MEAN/STD).
local INCEPTION = { mean = { 0.5, 0.5, 0.5 }, std = { 0.5, 0.5, 0.5 } }
local IMAGENET = { mean = { 0.485, 0.456, 0.406 }, std = { 0.229, 0.224, 0.225 } }
local function arch(d, depth, heads, patch, img, crop, norm)
  return { d_model = d, depth = depth, heads = heads, patch = patch, image_size = img,
           crop_pct = crop, mean = norm.mean, std = norm.std, interpolation = "bicubic",
           ln_eps = 1e-6 }
end
M.timm_archs = {
  vit_tiny_patch16_224 = arch(192, 12, 3, 16, 224, 0.9, INCEPTION),
  vit_tiny_patch16_384 = arch(192, 12, 3, 16, 384, 1.0, INCEPTION),
  vit_small_patch16_224 = arch(384, 12, 6, 16, 224, 0.9, INCEPTION),
  vit_small_patch16_384 = arch(384, 12, 6, 16, 384, 1.0, INCEPTION),
  vit_small_patch32_224 = arch(384, 12, 6, 32, 224, 0.9, INCEPTION),
  vit_base_patch16_224 = arch(768, 12, 12, 16, 224, 0.9, INCEPTION),
  vit_base_patch16_384 = arch(768, 12, 12, 16, 384, 1.0, INCEPTION),
  vit_base_patch32_224 = arch(768, 12, 12, 32, 224, 0.9, INCEPTION),
  vit_large_patch16_224 = arch(1024, 24, 16, 16, 224, 0.9, INCEPTION),
  deit_tiny_patch16_224 = arch(192, 12, 3, 16, 224, 0.875, IMAGENET),
  deit_small_patch16_224 = arch(384, 12, 6, 16, 224, 0.875, IMAGENET),
  deit_base_patch16_224 = arch(768, 12, 12, 16, 224, 0.875, IMAGENET),
}
-- timm's ViT _cfg defaults (any ViT without a known arch or pretrained_cfg)
M.timm_default_preprocess = { crop_pct = 0.9, interpolation = "bicubic",
                              mean = INCEPTION.mean, std = INCEPTION.std }

-- HF hidden_act -> hydra act
local HF_ACT = { gelu = "gelu", gelu_new = "gelu_tanh", gelu_pytorch_tanh = "gelu_tanh" }
-- PIL resample codes of HF image processors
local PIL_RESAMPLE = { [2] = "bilinear", [3] = "bicubic" }

-- ===== helpers =====

local function shape_str(s)
  local t = {}
  for i, v in ipairs(s) do t[i] = tostring(v) end
  return "[" .. table.concat(t, ",") .. "]"
end
M.shape_str = shape_str

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function read_text(path, who)
  local f, e = io.open(path, "rb")
  if not f then err.fail("%s: cannot read '%s': %s", who, path, e) end
  local s = f:read("a")
  f:close()
  return s
end

local function read_json(path, who)
  local ok, v = pcall(core.json_decode, read_text(path, who), path)
  if not ok then err.fail("%s: %s", who, (tostring(v):gsub("^json: ", ""))) end
  if type(v) ~= "table" then err.fail("%s: '%s' is not a JSON object", who, path) end
  return v
end
M.read_json = read_json

-- The value of a JSON number / string key, or nil (null, absent); a wrong type fails.
local function jnum(obj, key, path, who)
  local v = obj[key]
  if v == nil or v == core.json_null then return nil end
  if type(v) ~= "number" then
    err.fail("%s: '%s': %s must be a number (got %s)", who, path, key, type(v))
  end
  return v
end

local function jstr(obj, key, path, who)
  local v = obj[key]
  if v == nil or v == core.json_null then return nil end
  if type(v) ~= "string" then
    err.fail("%s: '%s': %s must be a string (got %s)", who, path, key, type(v))
  end
  return v
end

-- The tensors of an open safetensors file: name -> { dtype, shape }.
local function tensor_infos(st)
  local infos = {}
  for _, n in ipairs(st:names()) do infos[n] = st:info(n) end
  return infos
end

-- One fact from several sources: sources = { { value, "where" }, ... } (nil values skipped).
-- Two that disagree fail naming both; none returns nil.
local function settle(who, what, sources)
  local got, from
  for _, s in ipairs(sources) do
    if s[1] ~= nil then
      if got == nil then
        got, from = s[1], s[2]
      elseif s[1] ~= got then
        err.fail("%s: %s is %s by %s but %s by %s", who, what, tostring(got), from,
          tostring(s[1]), s[2])
      end
    end
  end
  return got, from
end

-- Expands the rules of a map over L blocks: list of { src, dst, transform }.
local function expand(map, L)
  local rows = {}
  for _, r in ipairs(map) do
    if r[1]:find("{l}", 1, true) then
      for l = 0, L - 1 do
        rows[#rows + 1] = { (r[1]:gsub("{l}", tostring(l))), (r[2]:gsub("{l}", tostring(l))), r[3],
                            opt = r.opt }
      end
    else
      rows[#rows + 1] = { r[1], r[2], r[3], opt = r.opt }
    end
  end
  return rows
end
M.expand = expand

-- Blocks in the file: the count of consecutive indices from 0 of `prefix`{l}. names; a gap
-- fails naming the first missing block.
local function count_blocks(who, file, infos, prefix)
  local seen, top = {}, -1
  local pat = "^" .. prefix:gsub("%.", "%%.") .. "(%d+)%."
  for n in pairs(infos) do
    local l = n:match(pat)
    if l then
      l = tonumber(l)
      seen[l] = true
      if l > top then top = l end
    end
  end
  for l = 0, top do
    if not seen[l] then
      err.fail("%s: '%s' has tensors of %s%d but none of %s%d", who, file, prefix, top, prefix, l)
    end
  end
  return top + 1
end

local function need(who, file, infos, name, what)
  local i = infos[name]
  if not i then err.fail("%s: '%s' has no tensor '%s' (%s)", who, file, name, what) end
  return i.shape
end

-- ===== the architecture from shapes and configs =====

-- The image preprocessing of a timm model: pretrained_cfg of a timm config.json, else the
-- arch's, else timm's ViT defaults.
local function timm_preprocess(a, pcfg, size)
  local src = pcfg or a or M.timm_default_preprocess
  local p = { mode = "timm", size = size, crop_pct = src.crop_pct or 0.9,
              interpolation = src.interpolation or "bicubic",
              mean = src.mean or INCEPTION.mean, std = src.std or INCEPTION.std }
  return p
end

-- Reads the sizes of a ViT (timm or HF names) from the shapes; returns the model section (without
-- heads) and the names of the tensors the sizes came from.
local function vit_sizes(who, file, infos, fmt)
  local n = fmt == "timm-vit" and {
    cls = "cls_token", pos = "pos_embed", pw = "patch_embed.proj.weight", prefix = "blocks.",
    fc1 = "blocks.0.mlp.fc1.weight", head = "head.weight" } or {
    cls = "vit.embeddings.cls_token", pos = "vit.embeddings.position_embeddings",
    pw = "vit.embeddings.patch_embeddings.projection.weight", prefix = "vit.encoder.layer.",
    fc1 = "vit.encoder.layer.0.intermediate.dense.weight", head = "classifier.weight" }
  local pw = need(who, file, infos, n.pw, "the patch embedding: [D, C, p, p]")
  if #pw ~= 4 or pw[3] ~= pw[4] then
    err.fail("%s: '%s': '%s' has shape %s, expected [D, C, p, p] (square patches)", who, file,
      n.pw, shape_str(pw))
  end
  local D, C, p = pw[1], pw[2], pw[3]
  local pos = need(who, file, infos, n.pos, ("the position table: [1, 1+patches, %d]"):format(D))
  if #pos ~= 3 or pos[1] ~= 1 or pos[3] ~= D then
    err.fail("%s: '%s': '%s' has shape %s, expected [1, T, %d]", who, file, n.pos,
      shape_str(pos), D)
  end
  local np = pos[2] - 1
  local grid = math.tointeger(math.floor(math.sqrt(np) + 0.5))
  if np < 1 or grid * grid ~= np then
    err.fail("%s: '%s': '%s' has %d rows: not 1 (class token) + a square number of patches "
      .. "(position tables without a class row are not supported)", who, file, n.pos, pos[2])
  end
  if infos[n.cls] == nil then
    err.fail("%s: '%s' has no tensor '%s' (expected shape [1,1,%d]; models without a class "
      .. "token are not supported)", who, file, n.cls, D)
  end
  local L = count_blocks(who, file, infos, n.prefix)
  if L == 0 then err.fail("%s: '%s' has no tensor named %s0.*", who, file, n.prefix) end
  local fc1 = need(who, file, infos, n.fc1, ("the first MLP layer: [d_mlp, %d]"):format(D))
  local head = infos[n.head] and infos[n.head].shape
  return {
    kind = "vit", image_size = grid * p, channels = C, patch = p, d_model = D, depth = L,
    d_mlp = fc1[1], n_classes = head and head[1] or nil, dropout = 0.0,
  }
end

-- Reads the sizes of an HF BERT from the shapes (positions cut to max_len when given).
local function bert_sizes(who, file, infos, max_len)
  local we = need(who, file, infos, "bert.embeddings.word_embeddings.weight",
    "the token embedding: [V, D]")
  local V, D = we[1], we[2]
  local pname = "bert.embeddings.position_embeddings.weight"
  local pe = need(who, file, infos, pname, ("the position table: [P, %d]"):format(D))
  if #pe ~= 2 or pe[2] ~= D then
    err.fail("%s: '%s': '%s' has shape %s, expected [P, %d]", who, file, pname, shape_str(pe), D)
  end
  local P = pe[1]
  if max_len and max_len > P then
    err.fail("%s: --max-len %d exceeds the %d positions of '%s'", who, max_len, P, file)
  end
  local T = max_len or P
  if T > core.attn_max_t then
    err.fail("%s: '%s': '%s' has %d positions, more than hydra's attention takes (%d tokens): "
      .. "give --max-len N with N <= %d", who, file, pname, P, core.attn_max_t, core.attn_max_t)
  end
  local te = infos["bert.embeddings.token_type_embeddings.weight"]
  local L = count_blocks(who, file, infos, "bert.encoder.layer.")
  if L == 0 then err.fail("%s: '%s' has no tensor named bert.encoder.layer.0.*", who, file) end
  local fc1 = need(who, file, infos, "bert.encoder.layer.0.intermediate.dense.weight",
    ("the first MLP layer: [d_mlp, %d]"):format(D))
  local head = infos["classifier.weight"] and infos["classifier.weight"].shape
  return {
    kind = "text", vocab_size = V, max_len = T, d_model = D, depth = L, d_mlp = fc1[1],
    n_classes = head and head[1] or nil, dropout = 0.0, norm = "post", text_embed = "bert",
    type_vocab = te and te.shape[1] or 0,
    pooler = infos["bert.pooler.dense.weight"] and "tanh" or "none",
  }, P
end

-- The text preprocessing of a BERT: the vocabulary (one token a line, id = line number, as HF's
-- load_vocab reads it), do_lower_case from tokenizer_config.json (BertTokenizer's default true),
-- max_len the positions kept (at most the tokenizer's model_max_length).
function M.bert_preprocess(who, vocab_path, tok_path, V, T)
  if not vocab_path then
    err.fail("%s: hf-bert needs the vocabulary: give --vocab vocab.txt (or a folder holding it)",
      who)
  end
  local text = read_text(vocab_path, who)
  local vocab = {}
  for line in text:gmatch("([^\n]*)\n") do vocab[#vocab + 1] = line end
  local tail = text:match("([^\n]+)$")
  if tail then vocab[#vocab + 1] = tail end
  if #vocab ~= V then
    err.fail("%s: '%s' has %d tokens, but the model's word embeddings have %d rows", who,
      vocab_path, #vocab, V)
  end
  local seen = {}
  for _, w in ipairs(vocab) do seen[w] = true end
  for _, w in ipairs({ "[PAD]", "[UNK]", "[CLS]", "[SEP]" }) do
    if not seen[w] then err.fail("%s: '%s' has no token %s", who, vocab_path, w) end
  end
  local p = { tokenizer = "wordpiece", do_lower_case = true, max_len = T, vocab = vocab }
  if tok_path then
    local j = read_json(tok_path, who)
    if j.do_lower_case ~= nil then
      if type(j.do_lower_case) ~= "boolean" then
        err.fail("%s: '%s': do_lower_case must be true or false", who, tok_path)
      end
      p.do_lower_case = j.do_lower_case
    end
    local mm = jnum(j, "model_max_length", tok_path, who)
    if mm and mm < T then p.max_len = math.tointeger(mm) end
  end
  return p
end

-- The hydra.* __metadata__ of a file hydra exported (nil values when absent).
local function hydra_meta(meta)
  local r = {}
  local hd = tonumber(meta["hydra.head_dim"] or "")
  r.head_dim = hd and math.tointeger(hd)
  r.ln_eps = tonumber(meta["hydra.ln_eps"] or "")
  r.act = meta["hydra.act"]
  if meta["hydra.heads"] then
    local ok, v = pcall(core.json_decode, meta["hydra.heads"])
    r.heads = ok and v or nil
  end
  r.sliced = meta["hydra.sliced"] == "1"
  r.source = meta["hydra.source"]
  return r
end

-- ===== the import =====

local function fmt_list(t, n)
  local out = {}
  for i = 1, math.min(#t, n or 8) do out[i] = t[i] end
  local s = table.concat(out, ", ")
  if #t > (n or 8) then s = s .. (", ... (%d in all)"):format(#t) end
  return s
end

-- What an HF config.json (cj, read from cj_path) says of the head count, the LayerNorm epsilon
-- and the activation, appended to the lists of sources settle() weighs (hf-vit and hf-bert).
local function hf_config_sources(who, cj, cj_path, heads_sources, eps_sources, act_sources)
  heads_sources[#heads_sources + 1] = { jnum(cj, "num_attention_heads", cj_path, who),
    ("'%s' num_attention_heads"):format(cj_path) }
  eps_sources[#eps_sources + 1] = { jnum(cj, "layer_norm_eps", cj_path, who),
    ("'%s' layer_norm_eps"):format(cj_path) }
  local act = jstr(cj, "hidden_act", cj_path, who)
  if act and not HF_ACT[act] then
    err.fail("%s: '%s': hidden_act '%s' is not supported (gelu, gelu_new, "
      .. "gelu_pytorch_tanh)", who, cj_path, act)
  end
  act_sources[#act_sources + 1] = { act and HF_ACT[act], ("'%s' hidden_act"):format(cj_path) }
end

-- opts: file, format, config, preprocessor, arch, heads, classes, strict, out, seed, max_len,
-- vocab, log (function(line)). Returns a summary (see the header).
function M.run(opts)
  local who = "hydra import"
  local log = opts.log or function() end
  local fmt = opts.format
  if not M.maps[fmt] then
    err.usage("%s: --format must be one of %s (got '%s')", who, table.concat(M.formats, ", "),
      tostring(fmt))
  end
  local file = opts.file
  if core.stat(file) ~= "file" then err.fail("%s: '%s': no such file", who, file) end
  local st <close> = setmetatable({ h = M.open_source(who, file) },
    { __close = function(s) s.h:close() end })
  local infos = tensor_infos(st.h)
  local meta = st.h:metadata() or {}
  local hm = hydra_meta(meta)

  -- 1. structure hydra does not have: by feature name
  local names = {}
  for n in pairs(infos) do names[#names + 1] = n end
  table.sort(names)
  for _, n in ipairs(names) do
    for _, u in ipairs(M.unsupported) do
      if n:find(u[1]) then
        err.fail("%s: '%s': unsupported feature %s (%s)", who, file, u[2], n)
      end
    end
  end

  -- 2. configs
  local cj, cj_path = nil, opts.config
  if cj_path then cj = read_json(cj_path, who) end
  local a
  if opts.arch then
    if fmt ~= "timm-vit" then err.usage("%s: --arch names a timm model (--format timm-vit)", who) end
    a = M.timm_archs[opts.arch]
    if not a then
      local known = {}
      for k in pairs(M.timm_archs) do known[#known + 1] = k end
      table.sort(known)
      err.usage("%s: unknown --arch '%s' (known: %s; otherwise give --heads)", who, opts.arch,
        table.concat(known, ", "))
    end
  end
  local cfg, pre
  local eps_sources, act_sources, heads_sources = {}, {}, {}
  heads_sources[1] = { opts.heads, "--heads" }
  if fmt == "timm-vit" or fmt == "hf-vit" then
    cfg = vit_sizes(who, file, infos, fmt)
    if fmt == "timm-vit" then
      local pcfg
      if cj then
        local arch_name = jstr(cj, "architecture", cj_path, who)
        local ca = arch_name and M.timm_archs[arch_name]
        if ca and not a then a = ca end
        local ma = type(cj.model_args) == "table" and cj.model_args or {}
        heads_sources[#heads_sources + 1] = { jnum(ma, "num_heads", cj_path, who),
          ("'%s' model_args.num_heads"):format(cj_path) }
        if ca then
          heads_sources[#heads_sources + 1] = { ca.heads, ("'%s' architecture %s"):format(cj_path,
            arch_name) }
        end
        if type(cj.pretrained_cfg) == "table" then pcfg = cj.pretrained_cfg end
        if jstr(cj, "global_pool", cj_path, who) and cj.global_pool ~= "token" then
          err.fail("%s: '%s': global_pool '%s' is not supported (class-token pooling only)", who,
            cj_path, cj.global_pool)
        end
      end
      if a then
        heads_sources[#heads_sources + 1] = { a.heads, "--arch " .. (opts.arch or "") }
        for _, k in ipairs({ "d_model", "depth", "patch", "image_size" }) do
          if a[k] ~= cfg[k] then
            err.fail("%s: '%s' has %s %d, but %s has %d", who, file, k, cfg[k],
              opts.arch and ("--arch " .. opts.arch) or cj_path, a[k])
          end
        end
      end
      eps_sources[#eps_sources + 1] = { 1e-6, "timm's LayerNorm default" }
      act_sources[#act_sources + 1] = { "gelu", "timm's ViT default" }
      pre = timm_preprocess(a, pcfg, cfg.image_size)
    else
      if cj then
        hf_config_sources(who, cj, cj_path, heads_sources, eps_sources, act_sources)
        for key, field in pairs({ hidden_size = "d_model", num_hidden_layers = "depth",
                                  intermediate_size = "d_mlp", patch_size = "patch",
                                  image_size = "image_size", num_channels = "channels" }) do
          local v = jnum(cj, key, cj_path, who)
          if v and v ~= cfg[field] then
            err.fail("%s: '%s' has %s %d (from the tensor shapes), but '%s' says %s %s", who,
              file, field, cfg[field], cj_path, key, tostring(v))
          end
        end
        if cj.qkv_bias == false then
          err.fail("%s: '%s': qkv_bias false is not supported (hydra's attention has biases)",
            who, cj_path)
        end
      end
      pre = M.hf_image_preprocess(who, opts.preprocessor, cfg.image_size)
    end
  else   -- hf-bert
    local P
    cfg, P = bert_sizes(who, file, infos, opts.max_len)
    if opts.max_len then log(("positions: the first %d of %d"):format(cfg.max_len, P)) end
    if cj then
      local mt = jstr(cj, "model_type", cj_path, who)
      if mt and mt ~= "bert" then
        err.fail("%s: '%s': model_type '%s' is not supported (bert)", who, cj_path, mt)
      end
      local pet = jstr(cj, "position_embedding_type", cj_path, who)
      if pet and pet ~= "absolute" then
        err.fail("%s: '%s': unsupported feature relative positions (position_embedding_type %s)",
          who, cj_path, pet)
      end
      hf_config_sources(who, cj, cj_path, heads_sources, eps_sources, act_sources)
      local checks = { hidden_size = cfg.d_model, num_hidden_layers = cfg.depth,
                       intermediate_size = cfg.d_mlp, vocab_size = cfg.vocab_size,
                       max_position_embeddings = P, type_vocab_size = cfg.type_vocab }
      for key, have in pairs(checks) do
        local v = jnum(cj, key, cj_path, who)
        if v and v ~= have then
          err.fail("%s: '%s' has %s %d (from the tensor shapes), but '%s' says %s", who, file,
            key, have, cj_path, tostring(v))
        end
      end
    end
    pre = M.bert_preprocess(who, opts.vocab, opts.tokenizer_config, cfg.vocab_size, cfg.max_len)
  end
  heads_sources[#heads_sources + 1] = { hm.head_dim and cfg.d_model // hm.head_dim,
    ("'%s' __metadata__ hydra.head_dim"):format(file) }
  eps_sources[#eps_sources + 1] = { hm.ln_eps, ("'%s' __metadata__ hydra.ln_eps"):format(file) }
  act_sources[#act_sources + 1] = { hm.act, ("'%s' __metadata__ hydra.act"):format(file) }
  if fmt ~= "timm-vit" then
    -- HF defaults (ViTConfig / BertConfig) when nothing else says
    eps_sources[#eps_sources + 1] = { 1e-12, "the transformers default" }
    act_sources[#act_sources + 1] = { "gelu", "the transformers default" }
  end

  -- a source of a hydra export takes precedence over library defaults: drop defaults when a
  -- stated value exists
  local function first_stated(list)
    local stated = {}
    for _, s in ipairs(list) do
      if s[1] ~= nil and not s[2]:find("default") then stated[#stated + 1] = s end
    end
    if #stated > 0 then return stated end
    return list
  end
  local H = settle(who, "the head count", heads_sources)
  if H == nil then
    err.fail("%s: the head count of '%s' cannot be read from its tensor shapes: give --heads H%s",
      who, file, fmt == "timm-vit" and ", --arch NAME or --config config.json" or
      " or --config config.json")
  end
  if math.type(H) ~= "integer" or H < 1 or cfg.d_model % H ~= 0 then
    err.fail("%s: %s heads do not divide d_model %d", who, tostring(H), cfg.d_model)
  end
  cfg.n_heads = H
  local eps = settle(who, "the LayerNorm epsilon", first_stated(eps_sources))
  local act = settle(who, "the activation", first_stated(act_sources))
  cfg.ln_eps = eps
  cfg.act = act

  -- 3. classes: the file's head, or a fresh one of --classes K
  local fresh_head = false
  if opts.classes and opts.classes ~= cfg.n_classes then
    fresh_head = true
    log(("classifier: a fresh head of %d classes (seed %d) replaces the file's (%s)"):format(
      opts.classes, opts.seed or 0, cfg.n_classes and (cfg.n_classes .. " classes") or "none"))
    cfg.n_classes = opts.classes
  end
  if not cfg.n_classes then
    err.fail("%s: '%s' has no classifier head: give --classes K for a fresh one", who, file)
  end

  -- 4. the model and the tensors
  local ok, m = pcall(core.model_new, cfg)
  if not ok then err.fail("%s: '%s': %s", who, file, tostring(m)) end
  m:init(math.tointeger(opts.seed or 0))
  local D = cfg.d_model
  local rows = expand(M.maps[fmt], cfg.depth)
  local pshape = m:param_shapes()
  -- tensors are userdata whose data Lua's collector does not count: collect after every
  -- 32 MiB read so that peak memory stays near the model's size plus one tensor
  local since_gc = 0
  local function read_done(t)
    since_gc = since_gc + t:numel() * 4
    if since_gc > 32 * 1024 * 1024 then
      collectgarbage()
      since_gc = 0
    end
  end
  local used, missing, bad = {}, {}, {}
  local parts = {}      -- hydra name -> { q = t, k = t, v = t }
  local name_map, dtypes = {}, {}
  local head_names = { ["head.weight"] = true, ["head.bias"] = true }
  local expand_heads = hm.sliced and hm.heads   -- a sliced hydra export: kept heads per layer
  local function expected(r)
    local s = pshape[r[2]]
    if r[3] == "q" or r[3] == "k" or r[3] == "v" then
      local e = {}
      for i, v in ipairs(s) do e[i] = v end
      e[1] = e[1] // 3
      return e
    end
    return s
  end
  for _, r in ipairs(rows) do
    local src, dst, tr = r[1], r[2], r[3]
    if fresh_head and head_names[dst] then
      if infos[src] then used[src] = true end
      goto continue
    end
    if not pshape[dst] then
      if r.opt then goto continue end
      err.fail("%s: name map row '%s' -> '%s': no such hydra tensor", who, src, dst)
    end
    local want = expected(r)
    local info = infos[src]
    if not info then   -- another spelling (old TF-converted files)
      for _, a in ipairs(M.aliases[fmt] or {}) do
        local alt = src:gsub(a[1], a[2])
        if alt ~= src and infos[alt] then
          src, info = alt, infos[alt]
          break
        end
      end
    end
    if not info then
      missing[#missing + 1] = ("'%s' (expected shape %s)"):format(src, shape_str(want))
      goto continue
    end
    used[src] = true
    local t = nil
    if tr == "pos" then
      local ps = info.shape
      if #ps ~= 2 or ps[2] ~= cfg.d_model or ps[1] < cfg.max_len then
        bad[#bad + 1] = ("'%s' has shape %s, expected [>=%d,%d]"):format(src, shape_str(ps),
          cfg.max_len, cfg.d_model)
        goto continue
      end
      t = err.wrap(who, st.h.read, st.h, src)
      if ps[1] > cfg.max_len then
        t = core.tensor_select(t, 1, { { 0, cfg.max_len } })
        tr = ("pos:0:%d"):format(cfg.max_len)
      end
      t = core.tensor_reshape(t, want)
    elseif expand_heads and (dst:match("attn%.qkv%.") or dst:match("attn%.proj%.weight$")) then
      t = M.expand_sliced(who, file, st.h, src, info, dst, want, cfg, expand_heads, tr)
    elseif not same_shape(info.shape, want) then
      bad[#bad + 1] = ("'%s' has shape %s, expected %s"):format(src, shape_str(info.shape),
        shape_str(want))
      goto continue
    else
      t = err.wrap(who, st.h.read, st.h, src)
    end
    read_done(t)
    name_map[#name_map + 1] = table.concat({ src, dst, tr or "copy", info.dtype }, "\t")
    dtypes[#dtypes + 1] = src .. "\t" .. info.dtype
    if tr == "q" or tr == "k" or tr == "v" then
      parts[dst] = parts[dst] or {}
      parts[dst][tr] = t
      local p = parts[dst]
      if p.q and p.k and p.v then
        local cat = core.tensor_cat({ p.q, p.k, p.v })
        err.wrap(who, m.set_param, m, dst, cat, file, src)
        parts[dst] = nil
      end
    else
      err.wrap(who, m.set_param, m, dst, t, file, src)
    end
    ::continue::
  end
  if #bad > 0 then err.fail("%s: '%s': %s", who, file, fmt_list(bad, 4)) end
  if #missing > 0 then
    err.fail("%s: '%s' has no tensor %s", who, file, fmt_list(missing, 4))
  end
  local extra, ignored = {}, {}
  for _, n in ipairs(names) do
    if not used[n] then
      local why
      for _, ig in ipairs(M.ignorable[fmt] or {}) do
        if n:find(ig[1]) then why = ig[2] end
      end
      if why or not opts.strict then ignored[#ignored + 1] = n
      else extra[#extra + 1] = n end
    end
  end
  if #extra > 0 then
    err.fail("%s: '%s' has %d tensor%s the %s name map does not use: %s (--no-strict ignores "
      .. "them)", who, file, #extra, #extra == 1 and "" or "s", fmt, fmt_list(extra, 6))
  end
  if #ignored > 0 then log(("ignored %d tensor%s: %s"):format(#ignored, #ignored == 1 and "" or "s",
    fmt_list(ignored, 12))) end

  -- gates of a hydra member export: the kept heads it records
  if hm.heads then
    local g = M.gates_from_heads(who, file, hm.heads, cfg.depth, H)
    m:set_gates(core.from_table("float32", g))
  end

  -- 5. write
  local sha = st.h.sha256 or core.file_sha256(file)
  local imp = {
    format = fmt, source = file, sha256 = sha, origin = hm.source or sha,
    arch = opts.arch or (cj and cj.architecture) or "", strict = opts.strict and 1 or 0,
    fresh_head = fresh_head and 1 or 0, mapped = #name_map, ignored = #ignored,
  }
  if cj_path then
    imp.config = cj_path
    imp.config_sha256 = core.file_sha256(cj_path)
  end
  local f = err.wrap(who, core.h5_create, opts.out)
  local wok, werr = pcall(function()
    m:write(f, { import_format = fmt, import_sha256 = sha, seed = math.tointeger(opts.seed or 0) })
    for k, v in pairs(imp) do f:set_attr("/import", k, v) end
    f:write_strings("/import/name_map", name_map)
    f:write_strings("/import/dtypes", dtypes)
    f:write_strings("/import/ignored", ignored)
    M.write_preprocess(f, pre, cfg.channels)
    f:commit()
  end)
  if not wok then
    f:close()
    err.fail("%s: cannot write '%s': %s", who, opts.out, err.message(werr))
  end
  log(("%s %s: %d tensors mapped, d_model %d, %d heads, depth %d, d_mlp %d, %d classes, "
    .. "LayerNorm eps %g, %s -> %s"):format(fmt, file, #name_map, cfg.d_model, H, cfg.depth,
    cfg.d_mlp, cfg.n_classes, eps, act, opts.out))
  return { cfg = cfg, mapped = #name_map, ignored = ignored, fresh_head = fresh_head,
           preprocess = pre }
end

-- The tensors of `file`: one safetensors file, or the index of a sharded checkpoint
-- (model.safetensors.index.json: lua/hydra/shards.lua), as a handle with names, info, read,
-- metadata and close (a sharded one also has sha256, its provenance).
function M.open_source(who, file)
  if file:match("%.index%.json$") then return require("hydra.shards").open(who, file) end
  return err.wrap(who, core.safetensors_open, file)
end

-- Gates [L,H] from kept heads per layer (JSON of a hydra export: 0-based head indices).
function M.gates_from_heads(who, file, heads, L, H)
  if type(heads) ~= "table" or #heads ~= L then
    err.fail("%s: '%s': __metadata__ hydra.heads must list the kept heads of each of %d layers",
      who, file, L)
  end
  local g = {}
  for l = 1, L do
    g[l] = {}
    for h = 1, H do g[l][h] = 0.0 end
    for _, h in ipairs(heads[l]) do
      if math.type(h) ~= "integer" or h < 0 or h >= H then
        err.fail("%s: '%s': __metadata__ hydra.heads: layer %d lists head %s (expected 0..%d)",
          who, file, l - 1, tostring(h), H - 1)
      end
      g[l][h + 1] = 1.0
    end
  end
  return g
end

-- A sliced member's attention tensor (kept heads only) expanded to hydra's full shape `want`
-- with zeros in the pruned heads' rows (q/k/v) or columns (proj): those heads are gated off.
function M.expand_sliced(who, file, st, src, info, dst, want, cfg, heads, tr)
  local l = math.tointeger(tonumber(dst:match("^blocks%.(%d+)%.")))
  local kept = heads[l + 1] or {}
  local hd = cfg.d_model // cfg.n_heads
  local k = #kept
  table.sort(kept)
  local proj = dst:match("attn%.proj%.weight$")
  local t = err.wrap(who, st.read, st, src)
  local s = info.shape
  -- timm: q|k|v in one tensor; HF: one of them; proj: the heads' columns once
  local thirds = (tr == nil and not proj) and 3 or 1
  local ok_shape
  if proj then ok_shape = #s == 2 and s[1] == cfg.d_model and s[2] == k * hd
  else ok_shape = s[1] == thirds * k * hd and (#s == 1 or s[2] == cfg.d_model) end
  if not ok_shape then
    err.fail("%s: '%s': sliced tensor '%s' has shape %s, expected %d kept heads of size %d", who,
      file, src, shape_str(s), k, hd)
  end
  -- place the kept heads' slices at their heads' positions, zeros elsewhere
  local ranges = {}
  for third = 0, thirds - 1 do
    for _, h in ipairs(kept) do
      local r0 = third * cfg.d_model + h * hd
      ranges[#ranges + 1] = { r0, r0 + hd }
    end
  end
  if proj then return core.tensor_scatter(t, 2, ranges, cfg.d_model) end
  return core.tensor_scatter(t, 1, ranges, thirds * cfg.d_model)
end

-- The image preprocessing of an HF model: preprocessor_config.json when given, else
-- ViTImageProcessor's defaults (resize to the model's size, bilinear, mean = std = 0.5).
function M.hf_image_preprocess(who, path, size)
  local p = { mode = "hf", size = size, crop_pct = 1.0, interpolation = "bilinear",
              mean = { 0.5, 0.5, 0.5 }, std = { 0.5, 0.5, 0.5 } }
  if not path then return p end
  local j = read_json(path, who)
  local r = jnum(j, "resample", path, who)
  if r then
    p.interpolation = PIL_RESAMPLE[r]
    if not p.interpolation then
      err.fail("%s: '%s': resample %s is not supported (2 bilinear, 3 bicubic)", who, path,
        tostring(r))
    end
  end
  if type(j.size) == "table" then
    local h, w = jnum(j.size, "height", path, who), jnum(j.size, "width", path, who)
    local se = jnum(j.size, "shortest_edge", path, who)
    if se then h, w = se, se end
    if h ~= w or h ~= size then
      err.fail("%s: '%s': size %sx%s, but the model takes %dx%d images", who, path, tostring(h),
        tostring(w), size, size)
    end
  elseif type(j.size) == "number" and j.size ~= size then
    err.fail("%s: '%s': size %s, but the model takes %dx%d images", who, path, tostring(j.size),
      size, size)
  end
  for _, k in ipairs({ "image_mean", "image_std" }) do
    local v = j[k]
    if v ~= nil then
      if type(v) ~= "table" or #v ~= 3 then
        err.fail("%s: '%s': %s must be a list of 3 numbers", who, path, k)
      end
      for i = 1, 3 do
        if type(v[i]) ~= "number" then err.fail("%s: '%s': %s must be numbers", who, path, k) end
      end
      p[k == "image_mean" and "mean" or "std"] = { v[1], v[2], v[3] }
    end
  end
  if j.do_normalize == false then p.mean, p.std = { 0, 0, 0 }, { 1, 1, 1 } end
  return p
end

-- Writes /preprocess (see the header). Images: mean and std are written when they have one
-- value per input channel (timm and HF give 3; a model of other channels has none known).
function M.write_preprocess(f, p, channels)
  if p.tokenizer then
    f:set_attr("/preprocess", "tokenizer", p.tokenizer)
    f:set_attr("/preprocess", "do_lower_case", p.do_lower_case and 1 or 0)
    f:set_attr("/preprocess", "max_len", p.max_len)
    f:write_strings("/preprocess/vocab", p.vocab)
    return
  end
  f:set_attr("/preprocess", "mode", p.mode)
  f:set_attr("/preprocess", "interpolation", p.interpolation)
  f:set_attr("/preprocess", "size", p.size)
  f:set_attr("/preprocess", "crop_pct", p.crop_pct + 0.0)
  if #p.mean ~= channels or #p.std ~= channels then return end
  local mean, std = {}, {}
  for i = 1, channels do mean[i] = p.mean[i] + 0.0; std[i] = p.std[i] + 0.0 end
  f:set_attr("/preprocess", "mean", mean)
  f:set_attr("/preprocess", "std", std)
end

return M
