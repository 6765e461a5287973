-- hydra hydraize SRC --data TRAIN ... --out DIR [key=value ...]: Hydra-ize a timm / Hugging Face
-- model in one command. A thin layer: the options become overrides of
-- configs/experiments/hydraize.yaml (printed, and kept in DIR/overrides.yaml), run by hydra.run
-- into DIR; `hydra exp configs/experiments/hydraize.yaml <the same overrides>` is the same run.
local argparse = require("hydra.argparse")
local core = require("hydra.core")
local err = require("hydra.err")
local yaml = require("hydra.yaml")

local USAGE = "hydra hydraize SRC --data TRAIN [--val VAL] [--test TEST] --members M [--keep K] "
  .. "[--ood NAME=SET ...] [--near NAME=SET ...] [--ood-val SET] [--classes K] "
  .. "[--method taylor|circuit] [--epochs E] [--base-epochs E] [--deep-ensemble SRC2,SRC3,...] "
  .. "[--export safetensors|none] [--format F] [--heads H] [--arch NAME] --out DIR "
  .. "[--force] [--cache DIR] [--quiet] [--no-progress] [key=value ...]"

local HELP = [[SRC: a timm folder (config.json with "architecture", model.safetensors), a Hugging
Face folder (config.json with model_type vit or bert, model.safetensors, preprocessor_config.json
or vocab.txt + tokenizer_config.json), or a bare .safetensors file with --format and --heads (or
--arch). It runs, every step a cached stage (.cache/stages, or --cache DIR; a rerun reuses them):
import -> fine-tune the base (--base-epochs E, default none) -> head importance (--method taylor,
or circuit with --ood-val) -> gates of M members keeping K heads per layer -> members fine-tuned
--epochs E (default 1) -> fused -> predictions of the ID test split and every OOD set ->
evaluation of the fused Hydra model, its members and the baselines: the imported Single, MC
Dropout on it, and Deep Ensembles of SRC and --deep-ensemble SRC2,SRC3 (other checkpoints of the
same architecture) -> export.

Data (TRAIN, VAL, TEST, SET): a prepared hydra set name, a prepared .h5 file, an ImageFolder tree
DIR/<split>/<class>/*.png|jpg (the ID tree needs train, val and test splits), a CIFAR-10/100
binary folder (OOD sets), or a .csv/.tsv/.jsonl text file (columns text and label; --data,
--val and --test give the ID splits, an OOD file is read without labels). Sets that are not
prepared are imported with SRC's preprocessing (a cached stage). The data must agree with the
model (kind, channels, image size, vocabulary, classes): --classes K gives SRC a fresh classifier
of K classes, which needs --base-epochs. --near and --ood name the near- and far-OOD groups.

DIR gets: base.h5 (the imported or fine-tuned base), gates.h5, member_<m>.h5, fused.h5,
preds/<method>/<set>.h5, result.h5 and table.md (accuracy, NLL, ECE, Brier, near/far OOD
AUROC/FPR95 of every method; table.csv), plots/, log.txt, config.resolved.yaml, overrides.yaml and
export/ (base, member_<m> and fused .safetensors, fused.name_map.json; --export none skips it).
A complete DIR is not recomputed (--force recomputes it, reusing the cached stages); a DIR
holding another run is refused. key=value overrides apply last (configs/defaults.yaml).]]

-- A data set name from a path: its last component without extension, as [A-Za-z0-9_.-].
local function name_of(path)
  local base = path:gsub("/+$", ""):match("([^/]+)$") or path
  base = base:gsub("%.[%w]+$", ""):gsub("[^%w_.%-]", "_")
  return base ~= "" and base or "data"
end

-- A data argument: a prepared name (no such path, but data.dir/NAME.h5 exists) or a source.
local function data_arg(v, data_dir)
  if not core.stat(v) and not v:find("/", 1, true)
     and core.stat(data_dir .. "/" .. v .. ".h5") == "file" then
    return v, nil
  end
  return name_of(v), v
end

local function run(args)
  local o = argparse.parse(args, {
    command = "hydraize", usage = USAGE,
    options = { data = "string", val = "string", test = "string", members = "integer",
                keep = "integer", ood = "list", near = "list", ["ood-val"] = "string",
                classes = "integer", method = "string", epochs = "natural",
                ["base-epochs"] = "natural", ["deep-ensemble"] = "string", export = "string",
                format = "string", heads = "integer", arch = "string", out = "string",
                force = "flag", cache = "string", quiet = "flag", ["no-progress"] = "flag" },
    positional = { min = 1, max = 1, names = { "SRC" } },
    required = { "data", "members", "out" },
    overrides = true,
  })
  local ov = {}
  local function set(k, v) ov[#ov + 1] = k .. "=" .. v end
  local src = o.positional[1]
  set("model.from", yaml.string(src))
  if o.format then set("import.format", o.format) end
  if o.heads then set("import.heads", tostring(o.heads)) end
  if o.arch then set("import.arch", yaml.string(o.arch)) end
  if o.classes then set("import.classes", tostring(o.classes)) end
  -- data: names and sources
  local data_dir = require("hydra.config").load(nil, o.override_list).data.dir
  local sources, names = {}, {}
  local function source(name, v, flag)
    if names[name] then
      err.usage("hydraize: data set name '%s' is used twice (%s and %s); name them NAME=SET",
        name, names[name], flag)
    end
    names[name] = flag
    if v ~= nil then sources[name] = v end
  end
  local id, idsrc = data_arg(o.data, data_dir)
  if o.val or o.test then
    local ext = (o.data:match("%.(%w+)$") or ""):lower()
    if not (ext == "csv" or ext == "tsv" or ext == "jsonl") then
      err.usage("hydraize: --val and --test take text files, with --data a text file (an "
        .. "ImageFolder tree brings its own DIR/val and DIR/test)")
    end
    idsrc = { train = o.data, val = o.val, test = o.test }
  end
  source(id, idsrc, "--data")
  set("data.id", yaml.string(id))
  local groups = { near = {}, far = {} }
  for _, g in ipairs({ { "near", o.near }, { "far", o.ood } }) do
    for _, spec in ipairs(g[2] or {}) do
      local name, v = spec:match("^([%w_.%-]+)=(.+)$")
      if not name then
        err.usage("hydraize: --%s expects NAME=SET (got '%s')", g[1] == "near" and "near" or
          "ood", spec)
      end
      local pname, psrc = data_arg(v, data_dir)
      if psrc == nil and pname ~= name then psrc = data_dir .. "/" .. v .. ".h5" end
      source(name, psrc, "--" .. (g[1] == "near" and "near" or "ood") .. " " .. spec)
      table.insert(groups[g[1]], name)
    end
  end
  set("data.ood", yaml.flow(groups))
  if o["ood-val"] then
    local name, v = data_arg(o["ood-val"], data_dir)
    source(name, v, "--ood-val")
    set("data.ood_val", yaml.string(name))
  end
  if next(sources) then set("data.sources", yaml.flow(sources)) end
  -- the pipeline
  set("hydra.members", tostring(o.members))
  if o.keep then set("hydra.keep_heads", tostring(o.keep)) end
  if o.epochs then set("finetune.epochs", tostring(o.epochs)) end
  if o["base-epochs"] then set("train.epochs", tostring(o["base-epochs"])) end
  local method = o.method or "taylor"
  if method ~= "taylor" and method ~= "circuit" then
    err.usage("hydraize: --method must be taylor or circuit (got '%s')", method)
  end
  local methods = { "single", "mc_dropout" }
  if o["deep-ensemble"] then
    local list = require("hydra.fs").split_list(o["deep-ensemble"])
    if #list == 0 then err.usage("hydraize: --deep-ensemble expects SRC2,SRC3,...") end
    set("deep_ensemble.from", yaml.flow(list))
    set("deep_ensemble.members", tostring(#list + 1))
    methods[#methods + 1] = "deep_ensemble"
  end
  methods[#methods + 1] = method == "taylor" and "hydra_taylor" or "hydra_circ"
  set("methods", yaml.flow(methods))
  if o.export then
    if o.export ~= "safetensors" and o.export ~= "none" then
      err.usage("hydraize: --export must be safetensors or none (got '%s')", o.export)
    end
    set("export.format", o.export)
  end
  for _, kv in ipairs(o.override_list or {}) do
    ov[#ov + 1] = type(kv) == "table" and (kv.key .. "=" .. tostring(kv.value)) or kv
  end
  -- the config: hydraize.yaml < these overrides
  local home = rawget(_G, "HYDRA_HOME") or "."
  local config = require("hydra.config")
  local cfg = config.load(home .. "/configs/experiments/hydraize.yaml", ov)
  local runm = require("hydra.run")
  local id = runm.id(cfg)
  local dir = o.out:gsub("/+$", "")
  if dir == "" then dir = o.out end
  -- DIR: new, empty, this run's folder (resumed or complete), never another run's
  if core.stat(dir) == "file" then err.fail("hydraize: --out '%s' is a file", dir) end
  if core.stat(dir) == "dir" and #core.listdir(dir) > 0 then
    local prev = require("hydra.fs").read_file(dir .. "/config.resolved.yaml")
    if not prev then
      err.fail("hydraize: --out '%s' exists and is not a run folder (choose a new or empty "
        .. "folder)", dir)
    end
    local ptbl = core.yaml_parse(prev, dir .. "/config.resolved.yaml")
    local pcfg = config.resolve(ptbl)
    local pid = runm.id(pcfg)
    if pid ~= id then
      err.fail("hydraize: --out '%s' holds run %s, not this run %s (choose another folder, or "
        .. "delete it)", dir, pid, id)
    end
  end
  local quiet = o.quiet
  if not quiet then
    local words = { "hydra exp", home .. "/configs/experiments/hydraize.yaml" }
    for _, kv in ipairs(ov) do   -- shell words: the line can be pasted
      words[#words + 1] = kv:match("^[%w_.%-/=+,:]+$") and kv or require("hydra.fs").shell_quote(kv)
    end
    print(table.concat(words, " "))
  end
  local ropts = { dir = dir, force = o.force, cache_dir = o.cache, quiet = quiet,
                  overrides = ov, override_list = ov, command = "hydra hydraize " ..
                  table.concat(args, " ") }
  if o["no-progress"] then ropts.progress = false end
  local s = runm.execute(cfg, ropts)
  if s.skipped then
    print(("run %s is complete: %s (nothing to do; --force recomputes it)"):format(s.id, s.result))
  elseif not quiet then
    print(("run %s: %d stages reused, %d built"):format(s.id, s.stages.hits, s.stages.built))
    print("results:  " .. s.dir)
    print("table:    " .. s.table_md)
  end
end

return { summary = "Hydra-ize a timm / Hugging Face model: import, prune, fuse, evaluate, export",
         usage = USAGE, help = HELP, run = run }
