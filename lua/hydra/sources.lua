-- lua/hydra/sources.lua: models and data sets from outside, inside a run (DESIGN §9; the
-- pipeline of `hydra hydraize`). Three config keys bring them in:
--   model.from          a timm / Hugging Face folder or .safetensors file: stage "import" (`hydra
--                       import`, settings import.*) gives the base model of every method; with
--                       train.epochs > 0 stage "base" fine-tunes it on data.id first, and a base
--                       with dropout (MC Dropout) is stage "base" too (the imported weights with
--                       model.dropout's rate switched on, or fine-tuned with it)
--   data.sources        {NAME: SOURCE}: data sets that are not prepared, imported with the
--                       preprocessing of model.from's import (stage "data", `hydra data import`)
--   deep_ensemble.from  the sources of Deep Ensembles' members 2..M
--
--   sources.resolve_model(src, icfg) -> { file, format, config, preprocessor, vocab,
--                                         tokenizer_config }   (src: folder or file; icfg: import.*)
--   sources.import(ctx, src)  -> path, key        the stage "import" of src (ctx: a method's ctx)
--   sources.base_model(ctx, src, seed, dropout) -> path, key
--   sources.ensemble(cfg)     -> { src... } the Deep Ensembles members' sources (model.from first)
--   sources.prepare(cfg, cache, log, opts) imports every data.sources entry the run uses and
--                       checks every data set the run reads against the model (kind, channels,
--                       image size, normalisation, vocabulary, classes); opts.ood_val: data.ood_val
--                       is read too. run.execute calls it before it reads a data set.
--   sources.data_path(cfg, name) -> the imported file of data.sources[name] (after prepare)
-- Stage keys hold content hashes (sha256 of the files), never paths: moving a folder keeps the
-- cache. Every bad input is a one-line error naming the key, the file and what was expected.
local core = require("hydra.core")
local err = require("hydra.err")
local h5 = require("hydra.h5")
local stages = require("hydra.stages")

local M = {}

local function is_dir(p) return core.stat(p) == "dir" end
local function is_file(p) return core.stat(p) == "file" end

local function sha(path)
  return stages.data_hash(path)   -- memoised sha256 (or a prepared file's recipe hash)
end

-- ===== the model =====

-- What `hydra import` reads for src: a folder's model.safetensors, config.json,
-- preprocessor_config.json, vocab.txt and tokenizer_config.json, the format from import.format
-- or config.json (timm: "architecture"; HF: model_type vit | bert).
function M.resolve_model(src, icfg, key)
  key = key or "model.from"
  if type(src) ~= "string" or src == "" then
    err.fail("%s is not set: the model to Hydra-ize, a timm / Hugging Face folder or a "
      .. ".safetensors file (hydra hydraize SRC, or %s=SRC)", key, key)
  end
  local r = { format = icfg.format }
  if is_dir(src) then
    r.file = src .. "/model.safetensors"
    if not is_file(r.file) and is_file(src .. "/model.safetensors.index.json") then
      -- a sharded checkpoint: `hydra import` reads the index and its shards (hydra.shards);
      -- the stage key holds every .safetensors file of the folder
      r.file = src .. "/model.safetensors.index.json"
      r.shards = {}
      for _, n in ipairs(core.listdir(src)) do
        if n:match("%.safetensors$") and is_file(src .. "/" .. n) then
          r.shards[#r.shards + 1] = src .. "/" .. n
        end
      end
      table.sort(r.shards)
    end
    if not is_file(r.file) then
      err.fail("%s '%s': the folder has no model.safetensors (nor model.safetensors.index.json)",
        key, src)
    end
    for field, name in pairs({ config = "config.json", preprocessor = "preprocessor_config.json",
                               vocab = "vocab.txt", tokenizer_config = "tokenizer_config.json" }) do
      if is_file(src .. "/" .. name) then r[field] = src .. "/" .. name end
    end
    if not r.format and r.config then
      local j = require("hydra.import").read_json(r.config, key)
      if type(j.architecture) == "string" then
        r.format = "timm-vit"
      elseif j.model_type == "vit" or j.model_type == "bert" then
        r.format = "hf-" .. j.model_type
      else
        err.fail("%s '%s': cannot tell the format: it has neither \"architecture\" (timm) nor "
          .. "model_type vit or bert (Hugging Face); set import.format (--format)", key, r.config)
      end
    end
  elseif is_file(src) then
    r.file = src
  else
    err.fail("%s '%s': no such file or folder", key, src)
  end
  if not r.format then
    err.fail("%s '%s' is a bare .safetensors file: set import.format (--format timm-vit|hf-vit|"
      .. "hf-bert), and import.heads or import.arch", key, src)
  end
  return r
end

-- The stage "import" of src: `hydra import` with the settings import.* (a fresh head, when
-- import.classes differs from the file's, is seeded by cfg.seed).
function M.import(ctx, src, key)
  local cfg = ctx.cfg
  local ic = cfg.import or {}
  local r = M.resolve_model(src, ic, key)
  local files = {}
  for _, k in ipairs({ "file", "config", "preprocessor", "vocab", "tokenizer_config" }) do
    if r[k] then files[k] = sha(r[k]) end
  end
  if r.shards then
    files.shards = {}
    for i, p in ipairs(r.shards) do files.shards[i] = sha(p) end
  end
  local inputs = { files = files, format = r.format, arch = ic.arch, heads = ic.heads,
                   classes = ic.classes, max_len = ic.max_len, strict = ic.strict ~= false,
                   seed = ic.classes and cfg.seed or nil }
  return ctx.cache:get("import", inputs, function(tmp)
    require("hydra.import").run({
      file = r.file, format = r.format, config = r.config, preprocessor = r.preprocessor,
      vocab = r.vocab, tokenizer_config = r.tokenizer_config, arch = ic.arch, heads = ic.heads,
      classes = ic.classes, max_len = ic.max_len, seed = cfg.seed, strict = ic.strict ~= false,
      out = tmp, log = function(line) ctx.log("  import: %s", line) end,
    })
  end)
end

-- A fresh classifier (import.classes other than the file's) is refused without fine-tuning.
local function check_head(cfg, ipath, src)
  if cfg.train.epochs > 0 then return end
  local f <close> = h5.open(ipath)
  if f:exists("/import") and f:attrs("/import").fresh_head == 1 then
    err.fail("import.classes %d replaces the classifier of '%s' by a fresh one: fine-tune it "
      .. "with train.epochs > 0 (--base-epochs E)", cfg.import.classes, src)
  end
end

-- The base model of src for seed and dropout (see the header); path, key.
function M.base_model(ctx, src, seed, dropout, key)
  local cfg = ctx.cfg
  local model = require("hydra.model")
  local ipath, ikey = M.import(ctx, src, key)
  if cfg.train.epochs == 0 then
    check_head(cfg, ipath, src)
    if dropout == 0 then return ipath, ikey end
    return ctx.cache:get("base", { from = ikey, dropout = dropout }, function(tmp, k)
      ctx.log("the imported model with dropout %g ...", dropout)
      model.from_checkpoint(ipath, dropout):save(tmp, { stage = "base", stage_key = k,
                                                        import_stage = ikey })
    end)
  end
  local idf = model.data_path(cfg, cfg.data.id)
  local inputs = { from = ikey, dropout = dropout, train = cfg.train, optim = cfg.optim,
                   seed = seed,
                   data = { id = cfg.data.id, hash = sha(idf), train_subset = cfg.data.train_subset,
                            val_subset = cfg.data.test_subset } }
  return ctx.cache:get("base", inputs, function(tmp, k)
    local c = require("hydra.methods.common").with_seed(cfg, seed, dropout)
    ctx.log("fine-tuning the imported model (seed %d, dropout %g, %d epochs) ...", seed, dropout,
      c.train.epochs)
    local m = model.from_checkpoint(ipath, dropout)
    local hist = m:train(idf, c, {
      progress = ctx.progress, log = function(line) ctx.log("  %s", line) end,
      work = ctx.cache:path("base", k, ".work.h5"), work_tag = k,
      curves = ctx.cache:path("base", k, ".curves.csv"),
    })
    m:save(tmp, { seed = seed, stage = "base", stage_key = k, import_stage = ikey,
                  data_hash = inputs.data.hash, best_epoch = hist.best_epoch or 0 })
  end)
end

-- The sources of the Deep Ensembles members: model.from, then deep_ensemble.from.
function M.ensemble(cfg)
  local list = { cfg.model.from }
  for _, s in ipairs(cfg.deep_ensemble.from or {}) do list[#list + 1] = s end
  if #list > 1 and cfg.deep_ensemble.members ~= #list then
    err.fail("deep_ensemble.members is %d, but model.from and deep_ensemble.from name %d "
      .. "source(s) (one member each)", cfg.deep_ensemble.members, #list)
  end
  return list
end

-- ===== data sets =====

local resolved = {}   -- identity of (model import, name, source) -> imported file

local function source_text(v)
  return require("hydra.yaml").flow(v)
end

local function resolved_key(cfg, name)
  return ("%s\0%s\0%s"):format(tostring(cfg.model.from), name, source_text(cfg.data.sources[name]))
end

function M.data_path(cfg, name)
  local p = resolved[resolved_key(cfg, name)]
  if not p then
    err.fail("data.sources.%s: not imported yet (a run imports its data sources first: hydra exp "
      .. "or hydra hydraize)", name)
  end
  return p
end

local TEXT_EXT = { csv = true, tsv = true, jsonl = true }

-- sha256 of every file under dir (relative names and contents), sorted; memoised per folder
-- for the process (a run reads its sources twice: before and inside the run folder's lock)
local tree_memo = {}
local function tree_hash(dir)
  if tree_memo[dir] then return tree_memo[dir] end
  local lines, stack = {}, { "" }
  while #stack > 0 do
    local rel = table.remove(stack)
    local here = rel == "" and dir or (dir .. "/" .. rel)
    for _, n in ipairs(err.wrap(nil, core.listdir, here)) do
      local r = rel == "" and n or (rel .. "/" .. n)
      local p = dir .. "/" .. r
      if is_dir(p) then stack[#stack + 1] = r
      elseif is_file(p) then lines[#lines + 1] = r .. "  " .. core.hash_file(p, "sha256") end
    end
  end
  table.sort(lines)
  tree_memo[dir] = core.hash_string(table.concat(lines, "\n"), "sha256")
  return tree_memo[dir]
end

-- What a data source is: { kind = "prepared" | "images" | "cifar10" | "cifar100" | "text",
-- path (prepared, images, cifar), splits = { {name, file}... } (text) }
local function classify(name, src, role)
  local key = "data.sources." .. name
  local function one(path)
    if type(path) ~= "string" or path == "" then
      err.fail("%s: expected a path (a folder, a .h5, .csv, .tsv or .jsonl file), got %s", key,
        require("hydra.yaml").flow(path))
    end
    return path
  end
  if type(src) == "table" then
    local splits = {}
    for _, s in ipairs({ "train", "val", "test" }) do
      if src[s] ~= nil then splits[#splits + 1] = { s, one(src[s]) } end
    end
    for k in pairs(src) do
      if k ~= "train" and k ~= "val" and k ~= "test" then
        err.fail("%s: unknown split '%s' (text splits: train, val, test)", key, tostring(k))
      end
    end
    for _, s in ipairs(splits) do
      local ext = s[2]:match("%.(%w+)$")
      if not (ext and TEXT_EXT[ext:lower()]) then
        err.fail("%s.%s '%s': splits by file are text files (.csv, .tsv, .jsonl)", key, s[1], s[2])
      end
      if not is_file(s[2]) then err.fail("%s.%s '%s': no such file", key, s[1], s[2]) end
    end
    return { kind = "text", splits = splits }
  end
  local path = one(src)
  if is_dir(path) then
    local function has(f) return is_file(path .. "/" .. f) end
    if has("data_batch_1.bin") or is_dir(path .. "/cifar-10-batches-bin") then
      return { kind = "cifar10", path = path }
    elseif has("train.bin") or is_dir(path .. "/cifar-100-binary") then
      return { kind = "cifar100", path = path }
    end
    return { kind = "images", path = path }
  end
  if not is_file(path) then err.fail("%s '%s': no such file or folder", key, path) end
  local ext = (path:match("%.(%w+)$") or ""):lower()
  if ext == "h5" then return { kind = "prepared", path = path } end
  if TEXT_EXT[ext] then
    local split = role == "id" and "train" or role == "ood_val" and "val" or "test"
    return { kind = "text", splits = { { split, path } } }
  end
  err.fail("%s '%s': expected an ImageFolder or CIFAR folder, a prepared .h5 file or a .csv, "
    .. ".tsv or .jsonl text file", key, path)
end

-- The stage "data": source c of data set `name` imported with the preprocessing of the imported
-- checkpoint ipath (its /preprocess, and its vocabulary for text).
local function import_data(cache, cfg, name, c, role, ipath, log)
  local f <close> = h5.open(ipath)
  local pre = f:exists("/preprocess") and f:attrs("/preprocess") or {}
  if f:exists("/preprocess/vocab") then
    pre.vocab_sha256 = core.hash_string(table.concat(f:read_strings("/preprocess/vocab"), "\n"),
      "sha256")
  end
  f:close()
  local inputs = { kind = c.kind, preprocess = pre, role = role }
  if c.kind == "text" then
    inputs.files = {}
    for i, s in ipairs(c.splits) do inputs.files[i] = { s[1], sha(s[2]) } end
    inputs.text_column = cfg.data.text_column
    inputs.label_column = role == "id" and cfg.data.label_column or nil
  else
    inputs.tree = tree_hash(c.path)
  end
  local di = require("hydra.cli.data_import")
  local say = function(line) log("  data %s: %s", name, line) end
  return cache:get("data", inputs, function(tmp)
    local o = { out = tmp, from = ipath, name = name, log = say }
    if c.kind == "text" then
      o.positional = { "text" }
      o.split = {}
      for _, s in ipairs(c.splits) do o.split[#o.split + 1] = s[1] .. "=" .. s[2] end
      o["text-column"], o["label-column"] = inputs.text_column, inputs.label_column
      di.text(o)
    else
      o.positional = { c.kind, c.path }
      if c.kind == "images" then di.images(o) else di.cifar(o, c.kind) end
    end
  end)
end

local function near(a, b)
  return type(a) == "number" and type(b) == "number" and math.abs(a - b) <= 1e-6
end

local function as3(v)
  if type(v) == "number" then return { v, v, v } end
  return v
end

-- Checks data set `name` (file path) against the model (mc = its config, pre = /preprocess).
local function check_data(name, path, role, mc, pre, src, shown)
  local what = ("data '%s' ('%s')"):format(name, shown or path)
  local f <close> = err.wrap(nil, h5.open, path)
  if role == "id" then
    for _, s in ipairs({ "train", "val", "test" }) do
      if not f:exists("/" .. s) then
        err.fail("%s has no '%s' split: the ID set needs train, val and test (an ImageFolder "
          .. "tree DIR/train, DIR/val, DIR/test; text files --data, --val, --test)", what, s)
      end
    end
  elseif role == "ood_val" and not f:exists("/val") then
    err.fail("%s has no 'val' split: the circuit search reads the OOD validation set's val "
      .. "split (an ImageFolder tree DIR/val/<class>/, or a text file)", what)
  end
  local sample
  for _, e in ipairs(f:list("/")) do
    if e.kind == "group" and e.name ~= "meta" and e.name ~= "preprocess" then
      if f:exists("/" .. e.name .. "/images") or f:exists("/" .. e.name .. "/ids") then
        sample = sample or e.name
      end
    end
  end
  if role == "id" then sample = "train" end
  if not sample then return end   -- the loader's own error names what is missing
  local meta = f:exists("/meta") and f:attrs("/meta") or {}
  local text = f:exists("/" .. sample .. "/ids")
  if text ~= (mc.kind == "text") then
    err.fail("%s is %s set, the model '%s' %s model", what, text and "a text" or "an image", src,
      mc.kind == "text" and "a text" or "an image")
  end
  if not text then
    local s = f:stat("/" .. sample .. "/images").shape
    local C, H, W = s[2], s[3], s[4]
    if #s == 3 then C, H, W = 1, s[2], s[3] end
    if C ~= mc.channels or H ~= mc.image_size or W ~= mc.image_size then
      err.fail("%s has %dx%dx%d images (channels x height x width), the model '%s' takes "
        .. "%dx%dx%d", what, C, H, W, src, mc.channels, mc.image_size, mc.image_size)
    end
    local pm, ps, dm, ds = as3(pre.mean), as3(pre.std), as3(meta.mean), as3(meta.std)
    if pm and ps then
      local same = type(dm) == "table" and type(ds) == "table" and #dm == #pm and #ds == #ps
      for c = 1, same and #pm or 0 do same = same and near(pm[c], dm[c]) and near(ps[c], ds[c]) end
      if not same then
        err.fail("%s was not prepared with the model's normalisation (its /meta mean, std differ "
          .. "from '%s' /preprocess): give its source folder instead, or `hydra data import "
          .. "--from` the imported checkpoint", what, src)
      end
    end
  else
    local V = f:exists("/vocab") and #f:read_strings("/vocab") or nil
    if V and V ~= mc.vocab_size then
      err.fail("%s has a vocabulary of %d tokens, the model '%s' %d", what, V, src, mc.vocab_size)
    end
  end
  if role == "id" then
    local K = math.tointeger(meta.n_classes)
    if K and K > 0 and K ~= mc.n_classes then
      err.fail("%s has %d classes, the model '%s' %d (import.classes=%d, --classes %d, gives it "
        .. "a fresh classifier, fine-tuned with train.epochs > 0, --base-epochs E)", what, K, src,
        mc.n_classes, K, K)
    end
  end
end

-- The names of the data sets a run reads, with their role ("id" | "ood" | "shift" | "ood_val").
local function used_sets(cfg, opts)
  local out = { { cfg.data.id, "id" } }
  for _, o in ipairs(require("hydra.eval").ood_groups(cfg.data.ood)) do out[#out + 1] = { o.name, "ood" } end
  for _, n in ipairs(cfg.data.shift or {}) do out[#out + 1] = { n, "shift" } end
  if opts.ood_val and cfg.data.ood_val then out[#out + 1] = { cfg.data.ood_val, "ood_val" } end
  return out
end

function M.prepare(cfg, cache, log, opts)
  opts = opts or {}
  local from, srcs = cfg.model.from, cfg.data.sources
  if from == nil then
    if srcs ~= nil then
      err.fail("data.sources needs model.from: data sets are imported with the preprocessing of "
        .. "the model they are for")
    end
    return
  end
  if type(cfg.data.id) ~= "string" or cfg.data.id == "" then
    err.fail("data.id is not set: the ID data set (hydra hydraize --data, or data.id=NAME with "
      .. "data.sources)")
  end
  if opts.ood_val and (cfg.data.ood_val == nil or cfg.data.ood_val == "") then
    err.fail("data.ood_val is not set: the circuit search (prune.method circuit) needs an OOD "
      .. "validation set, disjoint from the OOD test sets (--ood-val SET)")
  end
  local ctx = { cfg = cfg, cache = cache, log = log }
  local ipath = M.import(ctx, from)
  check_head(cfg, ipath, from)
  local m = require("hydra.model").load(ipath)
  local mc = m:config()
  m:close()
  local f <close> = h5.open(ipath)
  local pre = f:exists("/preprocess") and f:attrs("/preprocess") or {}
  f:close()
  for _, u in ipairs(used_sets(cfg, opts)) do
    local name, role = u[1], u[2]
    local path, shown
    if srcs and srcs[name] ~= nil then
      local c = classify(name, srcs[name], role)
      if c.kind ~= "prepared" and (c.kind == "text") ~= (mc.kind == "text") then
        err.fail("data '%s' ('%s') is %s set, the model '%s' %s model", name,
          source_text(srcs[name]), c.kind == "text" and "a text" or "an image", from,
          mc.kind == "text" and "a text" or "an image")
      end
      if c.kind == "prepared" then path = c.path
      else
        path = import_data(cache, cfg, name, c, role, ipath, log)
        shown = source_text(srcs[name]) .. "', imported as '" .. path
      end
      resolved[resolved_key(cfg, name)] = path
    else
      path = require("hydra.model").data_path(cfg, name)
      if not is_file(path) then
        err.fail("data '%s' is neither prepared ('%s' not found) nor in data.sources (a folder or "
          .. "file to import: --data, --ood NAME=SET, or data.sources.%s)", name, path, name)
      end
    end
    check_data(name, path, role, mc, pre, from, shown)
  end
end

return M
