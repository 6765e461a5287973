-- tests/lua/test_config.lua: hydra.config (YAML configs): exact error messages, includes,
-- overrides, YAML round trips, hashes, and the `hydra config` command.
local check = require("check")
local config = require("hydra.config")
local core = require("hydra.core")

local T = {}
local home = rawget(_G, "HYDRA_HOME") or "."
local hydra_exe = os.getenv("HYDRA")

-- Writes text to dir/name and returns the path.
local function put(dir, name, text)
  local path = dir .. "/" .. name
  check.write_file(path, text)
  return path
end

local function load_text(text, overrides)
  local d = check.tmpdir()
  return config.load(put(d, "x.yaml", text), overrides), d .. "/x.yaml"
end

local function load_fails(text, want_fmt)
  local d = check.tmpdir()
  local path = put(d, "x.yaml", text)
  check.raises(want_fmt:format(path), function() return config.load(path) end)
end

-- ===== the binding =====

function T.yaml_parse_values_and_positions()
  local v, p = core.yaml_parse("a: 1\nb:\n  c: [x, 'y', 2.5]\n  d: ~\n", "t.yaml")
  check.eq(v.a, 1, "a")
  check.eq(math.type(v.a), "integer", "a is an integer")
  check.eq(v.b.c[3], 2.5, "c[3]")
  check.eq(v.b.d, core.yaml_null, "null sentinel")
  check.same(p.order, { "a", "b" }, "order")
  check.eq(p.sub.b.key_line, 2, "b key line")
  check.eq(p.sub.b.sub.c.line, 3, "c line")
  check.eq(p.sub.b.sub.c.col, 6, "c col")
  check.eq(p.sub.b.sub.c.style, "flow", "c style")
  check.eq(p.sub.b.sub.c.sub[2].style, "single", "quoted style")
  check.eq(p.sub.b.sub.c.sub[2].col, 10, "c[2] col")
  check.eq(p.sub.b.sub.d.kind, "null", "d kind")
  check.raises("t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence)",
    function() return core.yaml_parse("a: [1, 2\n", "t.yaml") end)
  check.eq(core.hash64("abc"), core.hash64("abc"), "hash64 deterministic")
  check.ok(core.hash64("abc") ~= core.hash64("abd"), "hash64 differs")
  check.ok(core.hash64("abc"):match("^%x+$") and #core.hash64("abc") == 16, "hash64 format")
end

-- ===== exact error messages =====

function T.malformed_yaml()
  load_fails("model:\n  kind: vit\n  ood: [mnist, glyphs\nseed: 1\n",
    "%s:4:5: did not find expected ',' or ']' (while parsing a flow sequence)")
  load_fails("train:\n  epochs: 3\n batch_size: 4\n",
    "%s:3:2: did not find expected key (while parsing a block mapping)")
  load_fails("seed: \"abc\n",
    "%s:2:1: found unexpected end of stream (while scanning a quoted scalar)")
end

function T.unknown_key_with_suggestion()
  load_fails("optim:\n  lerning_rate: 0.1\n",
    "%s:2:3: unknown key 'lerning_rate' in 'optim' (did you mean 'learning_rate'?)")
  load_fails("sed: 1\n", "%s:1:1: unknown key 'sed' (did you mean 'seed'?)")
  load_fails("train:\n  augment:\n    hflp: true\n",
    "%s:3:5: unknown key 'hflp' in 'train.augment' (did you mean 'hflip'?)")
  load_fails("optim:\n  momentum: 0.9\n",
    "%s:2:3: unknown key 'momentum' in 'optim' (known: name, learning_rate, beta1, beta2, eps, "
    .. "weight_decay, schedule, min_lr)")
  load_fails("ece_bins: 10\n", "%s:1:1: unknown key 'ece_bins' (did you mean 'eval.ece_bins'?)")
  -- four sections have a learning_rate: too many to suggest, the top-level keys are listed
  load_fails("learning_rate: 0.1\n", "%s:1:1: unknown key 'learning_rate' (known: seed, "
    .. "threads, precision, profile, experiment, results_dir, model, import, data, train, pretrain, "
    .. "optim, prune, hydra, finetune, fuse, methods, deep_ensemble, hydra_circ_restarts, "
    .. "mc_dropout, vilu, packed_ensemble, mimo, batch_ensemble, lora_ensemble, eval, export, "
    .. "prop1, sweep)")
  load_fails("train:\n  include: x.yaml\n",
    "%s:2:3: unknown key 'include' in 'train' (known: epochs, batch_size, eval_batch_size, "
    .. "warmup_epochs, grad_clip, label_smoothing, augment, select_best, init)")
end

function T.wrong_type()
  load_fails("train:\n  epochs: ten\n", "%s:2:11: train.epochs: expected integer, got string 'ten'")
  load_fails("train:\n  epochs: 2.5\n", "%s:2:11: train.epochs: expected integer, got float 2.5")
  load_fails("train:\n  epochs: '3'\n", "%s:2:11: train.epochs: expected integer, got string '3'")
  load_fails("prune:\n  normalize: yes\n",
    "%s:2:14: prune.normalize: expected boolean, got string 'yes'")
  load_fails("optim:\n  learning_rate: fast\n",
    "%s:2:18: optim.learning_rate: expected number, got string 'fast'")
  load_fails("data:\n  ood: mnist\n",
    "%s:2:8: data.ood: expected list of strings or map, got string 'mnist'")
  load_fails("data:\n  ood: [mnist, 3]\n", "%s:2:16: data.ood[2]: expected string, got integer 3")
  load_fails("train: 3\n", "%s:1:8: train: expected map, got integer 3")
  load_fails("train:\n  epochs: ~\n", "%s:2:11: train.epochs: expected integer, got null")
  load_fails("hydra:\n  keep_heads: [4, four]\n",
    "%s:2:19: hydra.keep_heads[2]: expected integer, got string 'four'")
  load_fails("hydra:\n  keep_heads: 2.0\n",
    "%s:2:15: hydra.keep_heads: expected integer or list of integers, got float 2.0")
  load_fails("eval:\n  bootstrap_seed: abc\n",
    "%s:2:19: eval.bootstrap_seed: expected integer or null, got string 'abc'")
  load_fails("- seed\n", "%s:1:1: expected a map of settings at the top level, got list")
  load_fails("seed: 1\nseed: 2\n", "%s:2:1: duplicate key 'seed' (first at 1:1)")
  load_fails("fuse:\n  mlp: average\n  ln: member\n  mlp: member\n",
    "%s:4:3: duplicate key 'mlp' in 'fuse' (first at 2:3)")
end

function T.out_of_range_and_enums()
  load_fails("optim:\n  learning_rate: -0.1\n",
    "%s:2:18: optim.learning_rate must be > 0 (got -0.1)")
  load_fails("model:\n  dropout: 1.0\n", "%s:2:12: model.dropout must be >= 0 and < 1 (got 1.0)")
  load_fails("model:\n  dropout: .nan\n", "%s:2:12: model.dropout must be a finite number (got .nan)")
  -- every float knob must be finite (a bound like > 0 alone lets .inf through)
  load_fails("optim:\n  learning_rate: .inf\n",
    "%s:2:18: optim.learning_rate must be a finite number (got .inf)")
  load_fails("optim:\n  weight_decay: -.inf\n",
    "%s:2:17: optim.weight_decay must be a finite number (got -.inf)")
  load_fails("train:\n  grad_clip: .Inf\n", "%s:2:14: train.grad_clip must be a finite number (got .inf)")
  check.raises("command line: finetune.learning_rate=.inf must be a finite number (got .inf)",
    function() return config.load(nil, { "finetune.learning_rate=.inf" }) end)
  load_fails("hydra:\n  members: 0\n", "%s:2:12: hydra.members must be >= 1 and <= 64 (got 0)")
  load_fails("hydra:\n  keep_heads: [2, 0, 2]\n",
    "%s:2:19: hydra.keep_heads[2] must be >= 1 (got 0)")
  load_fails("fuse:\n  mlp: averge\n",
    "%s:2:8: fuse.mlp must be one of average, member (got 'averge'; did you mean 'average'?)")
  load_fails("fuse:\n  mlp: mean\n", "%s:2:8: fuse.mlp must be one of average, member (got 'mean')")
  load_fails("prune:\n  objectives: [acc, odd]\n",
    "%s:2:21: prune.objectives[2] must be one of acc, ood, avg (got 'odd'; did you mean 'ood'?)")
end

-- ===== values =====

function T.types_and_conversions()
  local cfg = load_text("optim:\n  learning_rate: 1\n  eps: 1e-6\ntrain:\n  grad_clip: 0\n"
    .. "hydra:\n  keep_heads: [4, 3, 2, 1, 2, 3]\nexperiment: 'yes'\neval:\n  bootstrap_seed: 9\n")
  check.eq(math.type(cfg.optim.learning_rate), "float", "integer given to a float key")
  check.eq(cfg.optim.learning_rate, 1.0, "learning_rate")
  check.eq(cfg.optim.eps, 1e-6, "1e-6 is a float")
  check.eq(math.type(cfg.train.grad_clip), "float", "grad_clip")
  check.same(cfg.hydra.keep_heads, { 4, 3, 2, 1, 2, 3 }, "keep_heads list")
  check.eq(cfg.experiment, "yes", "quoted string")
  check.eq(cfg.eval.bootstrap_seed, 9, "optional set")
  check.eq(cfg.train.epochs, config.defaults().train.epochs, "untouched keys keep defaults")
  local d = config.defaults()
  check.eq(d.eval.bootstrap_seed, nil, "null default is nil")
  check.eq(d.optim.learning_rate, 1e-3, "defaults learning_rate")
  check.same(d.data.ood, { near = { "mnist", "opencv-digits" }, far = { "notmnist", "glyphs" } },
    "defaults ood")
  -- an empty section or an empty file changes nothing
  check.same(load_text("train:\n"), d, "empty section")
  check.same(load_text(""), d, "empty file")
  check.same(config.load(nil), d, "no file")
  -- null resets an optional key set by an include
  local dir = check.tmpdir()
  put(dir, "base.yaml", "eval:\n  bootstrap_seed: 4\n")
  local cfg2 = config.load(put(dir, "top.yaml", "include: base.yaml\neval:\n  bootstrap_seed: ~\n"))
  check.eq(cfg2.eval.bootstrap_seed, nil, "null overrides an included value")
end

function T.include_and_override_order()
  local d = check.tmpdir()
  os.execute("mkdir -p '" .. d .. "/sub'")
  put(d, "base.yaml", "train:\n  epochs: 5\n  batch_size: 32\noptim:\n  learning_rate: 0.01\n"
    .. "data:\n  ood: [mnist, glyphs, notmnist]\n")
  put(d, "other.yaml", "train:\n  epochs: 7\ndata:\n  ood: [glyphs]\n")
  put(d, "sub/mid.yaml", "include: ../base.yaml\nseed: 11\n")
  local top = put(d, "top.yaml", "include: [sub/mid.yaml, other.yaml]\n"
    .. "optim:\n  beta1: 0.8\ntrain:\n  batch_size: 64\nseed: 12\n")
  local cfg = config.load(top)
  check.eq(cfg.train.epochs, 7, "a later include overrides an earlier one")
  check.eq(cfg.train.batch_size, 64, "the file overrides its includes")
  check.eq(cfg.seed, 12, "the file overrides a nested include")
  check.eq(cfg.optim.learning_rate, 0.01, "deep merge keeps included siblings")
  check.eq(cfg.optim.beta1, 0.8, "deep merge adds the file's keys")
  check.eq(cfg.optim.beta2, 0.999, "defaults under everything")
  check.same(cfg.data.ood, { "glyphs" }, "lists are replaced, not merged")
  check.eq(cfg.include, nil, "include is not a setting")
  -- the command line overrides the file
  cfg = config.load(top, { "train.epochs=9", "train.epochs=10", "optim.learning_rate=0.5" })
  check.eq(cfg.train.epochs, 10, "overrides apply in order")
  check.eq(cfg.optim.learning_rate, 0.5, "override beats the file's include")
  check.eq(cfg.optim.beta1, 0.8, "siblings untouched")
  -- errors name the included file
  put(d, "bad.yaml", "train:\n  epochs: x\n")
  local inc = put(d, "inc_bad.yaml", "include: bad.yaml\n")
  check.raises(d .. "/bad.yaml:2:11: train.epochs: expected integer, got string 'x'",
    function() return config.load(inc) end)
  local missing = put(d, "inc_missing.yaml", "seed: 1\ninclude: [other.yaml, nope.yaml]\n")
  check.raises(("%s:2:23: cannot include 'nope.yaml' (%s/nope.yaml: No such file or directory)")
    :format(missing, d), function() return config.load(missing) end)
  local badinc = put(d, "inc_type.yaml", "include: 3\n")
  check.raises(badinc .. ":1:10: include: expected string or list of strings, got integer 3",
    function() return config.load(badinc) end)
end

-- A file included again is merged once, where it comes last: the result is what merging every
-- copy in order gives (the last layer setting a key wins), for repeats, diamonds and trees.
function T.repeated_includes_merge_like_every_copy()
  local d = check.tmpdir()
  put(d, "a.yaml", "seed: 1\ntrain: {epochs: 5}\n")
  put(d, "b.yaml", "seed: 2\ntrain: {batch_size: 8}\n")
  local c = config.load(put(d, "aba.yaml", "include: [a.yaml, b.yaml, a.yaml]\n"))
  check.eq(c.seed, 1, "a after b wins")
  check.eq(c.train.batch_size, 8, "b's other key kept")
  c = config.load(put(d, "ab.yaml", "include: [a.yaml, a.yaml, b.yaml]\n"))
  check.eq(c.seed, 2, "b after both copies of a wins")
  -- a diamond whose shared leaf sets what one side also sets: the leaf comes after that side
  put(d, "leaf.yaml", "seed: 3\n")
  put(d, "l.yaml", "seed: 4\ninclude: leaf.yaml\n")
  put(d, "r.yaml", "include: leaf.yaml\n")
  check.eq(config.load(put(d, "lr.yaml", "include: [l.yaml, r.yaml]\n")).seed, 3, "l, leaf")
  put(d, "r2.yaml", "include: leaf.yaml\nseed: 5\n")
  check.eq(config.load(put(d, "lr2.yaml", "include: [r2.yaml, l.yaml]\n")).seed, 4, "leaf, l")
  -- a binary tree 8 levels deep (510 include references, 9 files) gives its leaf
  for i = 0, 7 do
    put(d, ("t%d.yaml"):format(i), ("include: [t%d.yaml, t%d.yaml]\n"):format(i + 1, i + 1))
  end
  put(d, "t8.yaml", "seed: 9\n")
  check.eq(config.load(d .. "/t0.yaml").seed, 9, "tree")
end

-- Include bombs (reviews/reliability_2.md H-c1..H-c3) end at a limit with file:line:col.
function T.include_depth_and_count_limits()
  local d = check.tmpdir()
  for i = 0, config.MAX_INCLUDE_DEPTH + 5 do
    put(d, ("c%d.yaml"):format(i), ("include: c%d.yaml\n"):format(i + 1))
  end
  put(d, ("c%d.yaml"):format(config.MAX_INCLUDE_DEPTH + 6), "seed: 1\n")
  local n = config.MAX_INCLUDE_DEPTH
  check.raises(("%s/c%d.yaml:1:10: includes nested deeper than %d levels (%s/c0.yaml -> ... -> "
    .. "%s/c%d.yaml)"):format(d, n - 1, n, d, d, n),
    function() return config.load(d .. "/c0.yaml") end)
  check.eq(config.load(d .. "/c7.yaml").seed, 1, "a chain of 64 files (63 include levels)")
  for i = 0, 29 do
    put(d, ("t%d.yaml"):format(i), ("include: [t%d.yaml, t%d.yaml]\n"):format(i + 1, i + 1))
  end
  put(d, "t30.yaml", "seed: 9\n")
  local t0 = core.now()
  check.raises_has(("more than %d includes in all (repeats counted)"):format(config.MAX_INCLUDES),
    function() return config.load(d .. "/t0.yaml") end)
  put(d, "leaf.yaml", "seed: 3\n")
  local names = {}
  for i = 1, config.MAX_INCLUDES + 1 do names[i] = "leaf.yaml" end
  local many = put(d, "many.yaml", "include: [" .. table.concat(names, ", ") .. "]\n")
  check.raises(("%s:1:%d: more than %d includes in all (repeats counted): too many, or a file "
    .. "included again and again"):format(many, 11 + 11 * config.MAX_INCLUDES, config.MAX_INCLUDES),
    function() return config.load(many) end)
  names[#names] = nil
  check.eq(config.load(put(d, "ok.yaml", "include: [" .. table.concat(names, ", ") .. "]\n")).seed,
    3, "the limit itself")
  -- without the limits these inputs take minutes to hours (2^30 layers); the sanitizer build
  -- (core.debug) runs the same work several times slower
  local bound = core.debug and 60 or 10
  check.ok(core.now() - t0 < bound, ("limits reached in seconds (%.1f s, bound %d s)"):format(
    core.now() - t0, bound))
end

function T.include_cycle()
  local d = check.tmpdir()
  local a = put(d, "a.yaml", "include: b.yaml\nseed: 1\n")
  put(d, "b.yaml", "seed: 2\ninclude: [c.yaml]\n")
  put(d, "c.yaml", "include: ./a.yaml\n")
  check.raises(("%s/c.yaml:1:10: include cycle: %s/a.yaml -> %s/b.yaml -> %s/c.yaml -> %s/a.yaml")
    :format(d, d, d, d, d), function() return config.load(a) end)
  local s = put(d, "self.yaml", "include: self.yaml\n")
  check.raises(("%s:1:10: include cycle: %s -> %s"):format(s, s, s),
    function() return config.load(s) end)
  -- a diamond (two paths to one file) is not a cycle
  put(d, "leaf.yaml", "seed: 3\n")
  put(d, "l.yaml", "include: leaf.yaml\n")
  put(d, "r.yaml", "include: leaf.yaml\n")
  check.eq(config.load(put(d, "top.yaml", "include: [l.yaml, r.yaml]\n")).seed, 3, "diamond")
end

function T.cli_overrides()
  local cfg = config.load(nil, { ["train.epochs"] = "3", ["optim.learning_rate"] = "2e-4",
    ["data.ood"] = "[mnist,glyphs]", ["experiment"] = "123", ["prune.normalize"] = "false",
    ["train.grad_clip"] = "2", ["eval.bootstrap_seed"] = "5", ["results_dir"] = "true",
    ["train.augment"] = "{hflip: true}", ["data.id"] = "'quoted'" })
  check.eq(cfg.train.epochs, 3, "integer")
  check.eq(math.type(cfg.train.epochs), "integer", "integer type")
  check.eq(cfg.optim.learning_rate, 2e-4, "float")
  check.same(cfg.data.ood, { "mnist", "glyphs" }, "list")
  check.eq(cfg.experiment, "123", "a string key takes the text")
  check.eq(cfg.results_dir, "true", "a string key takes the text (boolean-looking)")
  check.eq(cfg.data.id, "quoted", "quotes are YAML quotes")
  check.eq(cfg.prune.normalize, false, "boolean")
  check.eq(math.type(cfg.train.grad_clip), "float", "integer text to a float key")
  check.eq(cfg.eval.bootstrap_seed, 5, "optional integer")
  check.eq(cfg.train.augment.hflip, true, "section override")
  check.eq(cfg.train.augment.crop_padding, 2, "section override merges")
  local reset = config.load(nil, { "eval.bootstrap_seed=5", "eval.bootstrap_seed=~" })
  check.eq(reset.eval.bootstrap_seed, nil, "null resets an optional key")
  check.same(config.load(nil, { { key = "hydra.keep_heads", value = "[1,2,3,4,5,6]" } })
    .hydra.keep_heads, { 1, 2, 3, 4, 5, 6 }, "{key=, value=} form")
  check.eq(config.load(nil, { ["hydra.members"] = 5 }).hydra.members, 5, "Lua values pass as is")

  local function fails(want, ov) check.raises(want, function() return config.load(nil, ov) end) end
  fails("command line: train.epochs=ten: expected integer, got string 'ten'",
    { "train.epochs=ten" })
  fails("command line: optim.lerning_rate=0.1: unknown key 'lerning_rate' in 'optim' "
    .. "(did you mean 'learning_rate'?)", { "optim.lerning_rate=0.1" })
  fails("command line: epochs=3: unknown key 'epochs' (known: seed, threads, precision, profile, "
    .. "experiment, results_dir, model, import, data, train, pretrain, "
    .. "optim, prune, hydra, finetune, fuse, methods, deep_ensemble, hydra_circ_restarts, "
    .. "mc_dropout, vilu, packed_ensemble, mimo, batch_ensemble, lora_ensemble, eval, export, "
    .. "prop1, sweep)",
    { "epochs=3" })
  fails("command line: optim.learning_rate=-0.1 must be > 0 (got -0.1)",
    { "optim.learning_rate=-0.1" })
  fails("command line: data.ood=[mnist,3]: data.ood[2]: expected string, got integer 3",
    { "data.ood=[mnist,3]" })
  fails("command line: data.ood=mnist: expected list of strings or map, got string 'mnist'",
    { "data.ood=mnist" })
  fails("command line: data.ood=[mnist: did not find expected ',' or ']' "
    .. "(while parsing a flow sequence)", { "data.ood=[mnist" })
  fails("command line: optim.learning_rate.x=1: 'optim.learning_rate' is a setting, not a section",
    { "optim.learning_rate.x=1" })
  fails("command line: train..epochs=1: bad key path 'train..epochs'", { "train..epochs=1" })
  fails("command line: train.augment={hflip: 3}: train.augment.hflip: expected boolean, "
    .. "got integer 3", { "train.augment={hflip: 3}" })
  fails("command line: fuse.mlp=avg must be one of average, member (got 'avg')", { "fuse.mlp=avg" })
  fails("command line: 'seed': expected key.path=value", { "seed" })
end

function T.resolve_tables()
  local cfg = config.resolve({ train = { epochs = 2 }, seed = 4 }, { "seed=5" })
  check.eq(cfg.train.epochs, 2, "table value")
  check.eq(cfg.seed, 5, "override over the table")
  check.same(config.resolve(cfg), cfg, "resolving a resolved config changes nothing")
  check.raises("config table: train.epochs: expected integer, got string 'x'",
    function() return config.resolve({ train = { epochs = "x" } }) end)
  check.raises("config table: unknown key 'epoch' in 'train' (did you mean 'epochs'?)",
    function() return config.resolve({ train = { epoch = 1 } }) end)
end

-- ===== YAML output, round trips, hashes =====

local function round_trip(cfg, what)
  local text = config.to_yaml(cfg)
  local d = check.tmpdir()
  check.same(config.load(put(d, "rt.yaml", text)), cfg, what .. " (load)")
  local v = core.yaml_parse(text, "rt.yaml")
  local function strip(x)
    if x == core.yaml_null then return nil end
    if type(x) ~= "table" then return x end
    local t = {}
    for k, y in pairs(x) do t[k] = strip(y) end
    return t
  end
  check.same(strip(v), cfg, what .. " (parse)")
  check.eq(config.to_yaml(config.load(put(d, "rt2.yaml", text))), text, what .. " (text stable)")
end

function T.to_yaml_round_trip_defaults_and_models()
  round_trip(config.defaults(), "defaults")
  local n = 0
  for _, f in ipairs(core.listdir(home .. "/configs/models")) do
    if f:match("%.yaml$") then
      local cfg = config.load(home .. "/configs/models/" .. f)
      round_trip(cfg, f)
      n = n + 1
    end
  end
  check.ok(n >= 3, "model configs found: " .. n)
  local tiny = config.load(home .. "/configs/models/vit-fm-tiny.yaml")
  check.eq(tiny.model.d_model, 64, "vit-fm-tiny d_model")
  check.eq(tiny.model.depth, 4, "vit-fm-tiny depth")
  check.eq(config.load(home .. "/configs/models/text-sst.yaml").model.kind, "text", "text-sst")
end

function T.to_yaml_round_trip_awkward_values()
  local cfg = config.defaults()
  cfg.experiment = "a-b.c_1"
  -- (a control character is refused: yaml.string's escapes are tested in test_safety.lua)
  cfg.results_dir = "with \"quotes\", \\ and ;$(x) `y` <script>"
  cfg.data.id = "123"
  cfg.data.dir = "true"
  cfg.data.ood_val = ""
  cfg.data.ood = { "null", "~", "1e3", "x y", "-dash", ".5", "a: b, [c] # d" }
  cfg.data.shift = {}
  cfg.optim.learning_rate = 0.1 + 0.2
  cfg.optim.eps = 1e-300
  cfg.optim.weight_decay = 1 / 3
  cfg.optim.min_lr = 1e22
  cfg.model.dropout = 0.5
  cfg.hydra.keep_heads = { 8, 4, 2 }
  cfg.hydra.diversity.keep_counts = { 3, 4 }
  cfg.eval.bootstrap_seed = 77
  cfg.seed = math.maxinteger
  round_trip(cfg, "awkward values")
  local text = config.to_yaml(cfg)
  check.ok(text:find("learning_rate: 0.30000000000000004\n", 1, true), "shortest float repr")
  check.ok(text:find("min_lr: 1e+22\n", 1, true), "float with exponent")
  check.ok(text:find('id: "123"\n', 1, true), "number-like string quoted")
  check.ok(text:find("keep_heads: [8, 4, 2]\n", 1, true), "flow list")
end

function T.to_yaml_key_order()
  local text = config.to_yaml(config.defaults())
  local pos, last = {}, 0
  for _, k in ipairs({ "seed:", "threads:", "model:", "data:", "train:", "optim:", "prune:",
                       "hydra:", "fuse:", "eval:", "sweep:" }) do
    pos[k] = text:find("\n" .. k, 1, true) or (text:sub(1, #k) == k and 0)
    check.ok(pos[k] and pos[k] >= last, "top-level key order at " .. k)
    last = pos[k]
  end
  check.ok(text:find("  bootstrap_seed: ~\n", 1, true), "optional null written as ~")
end

-- Keys added after run-ids were published (id_neutral) leave the hash, hence every run-id,
-- unchanged while they hold their default, and change it otherwise; to_yaml still writes them.
function T.id_neutral_keys()
  local a = config.load(nil, { "seed=3" })
  check.ok(config.to_yaml(a):find("\n  circuit_batch_size: 64\n", 1, true), "written")
  check.ok(config.to_yaml(a):find("\n  warmup_epochs: ~\n", 1, true), "null written")
  check.eq(config.hash(config.load(nil, { "seed=3", "prune.circuit_batch_size=64" })),
    config.hash(a), "explicit default")
  check.ok(config.hash(config.load(nil, { "seed=3", "prune.circuit_batch_size=32" }))
    ~= config.hash(a), "changed value")
  check.ok(config.hash(config.load(nil, { "seed=3", "finetune.warmup_epochs=0.5" }))
    ~= config.hash(a), "null default set")
  check.ok(config.hash(config.load(nil, { "seed=3", "mimo.members=2" }))
    ~= config.hash(a), "a section of id_neutral keys counts once one is changed")
  check.ok(config.hash(config.load(nil, { "seed=3", "prop1.rows=500" })) ~= config.hash(a),
    "a changed key of a section of id_neutral keys only")
  check.eq(config.hash(config.load(nil, { "seed=3", "prop1.hvp_step=0.001" })), config.hash(a),
    "that section at its defaults")
  local pc = config.identity(a.prune, "prune")
  check.eq(pc.circuit_batch_size, nil, "identity drops the default")
  check.eq(pc.batch_size, a.prune.batch_size, "identity keeps the others")
  check.eq(a.prune.circuit_batch_size, 64, "identity copies")
  check.eq(config.identity(config.load(nil, { "prune.circuit_batch_size=8" }).prune,
    "prune").circuit_batch_size, 8, "identity keeps a changed value")
end

function T.hash_stability()
  local a = config.load(nil, { "seed=3", "optim.learning_rate=0.01" })
  local b = config.load(nil, { "optim.learning_rate=0.01", "seed=3" })
  check.eq(config.hash(a), config.hash(b), "same config, same hash")
  -- the canonical YAML without the id_neutral keys at their default (config_schema.lua)
  local text = config.to_yaml(a):gsub("\n  circuit_batch_size: 64\n", "\n")
    :gsub("\n  warmup_epochs: ~\n", "\n"):gsub("\n  init: ~\n", "\n")
    :gsub("\n  ln_eps: 1e%-06\n", "\n")   -- the model's encoder options (xfmr.h)
    :gsub("\n  norm: pre\n", "\n"):gsub("\n  act: gelu\n", "\n"):gsub("\n  pooler: none\n", "\n")
    :gsub("\n  text_embed: hydra\n", "\n"):gsub("\n  type_vocab: 0\n", "\n")
    :gsub("\nvilu:\n.-\n\n", "\n")   -- a section of id_neutral keys, all at their default
    :gsub("\npacked_ensemble:\n.-\n\n", "\n"):gsub("\nmimo:\n.-\n\n", "\n")
    :gsub("\nprop1:\n.-\n\n", "\n")   -- the same for prop1
    :gsub("\nbatch_ensemble:\n.-\n\n", "\n"):gsub("\nlora_ensemble:\n.-\n\n", "\n")
    :gsub("\nhydra_circ_restarts:\n.-\n\n", "\n")
    :gsub("\npretrain:\n.-\n\n", "\n")   -- every pretrain.* key is id_neutral
    -- models and data from outside (hydra.sources): model.from, deep_ensemble.from, data.*
    :gsub("\n  from: ~\n", "\n"):gsub("\n  sources: ~\n", "\n")
    :gsub("\n  text_column: text\n", "\n"):gsub("\n  label_column: label\n", "\n")
    :gsub("\nimport:\n.-\n\n", "\n"):gsub("\nexport:\n.-\n\n", "\n")
    :gsub("\nprecision: fp32\n", "\n")   -- the arithmetic of predictions (tensor/gemm_bf16.h)
  check.eq(config.hash(a), core.hash64(text), "hash of the canonical YAML")
  -- insertion order of a table does not matter
  local c = {}
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  table.sort(keys, function(x, y) return x > y end)
  for _, k in ipairs(keys) do c[k] = a[k] end
  check.eq(config.hash(c), config.hash(a), "insertion order")
  -- an integer written for a float key hashes like the float
  check.eq(config.hash(config.load(nil, { "optim.learning_rate=1" })),
    config.hash(config.load(nil, { "optim.learning_rate=1.0" })), "1 and 1.0")
  check.ok(config.hash(config.load(nil, { "seed=4" })) ~= config.hash(a), "a change changes it")
  -- stable across processes
  if hydra_exe then
    local code, out = check.hydra("config --hash seed=3 optim.learning_rate=0.01")
    check.eq(code, 0, "hydra config --hash status")
    check.eq(out, config.hash(a) .. "\n", "same hash in another process")
  end
end

-- ===== paths =====

function T.get_set_need()
  local cfg = config.defaults()
  check.eq(config.get(cfg, "train.augment.crop_padding"), 2, "get")
  check.eq(config.get(cfg, "train.nope.x"), nil, "get missing")
  check.eq(config.get(cfg, "seed.x"), nil, "get through a scalar")
  config.set_path(cfg, "train.augment.hflip", true)
  check.eq(cfg.train.augment.hflip, true, "set_path")
  config.set_path(cfg, "new.deep.key", 1)
  check.eq(cfg.new.deep.key, 1, "set_path creates tables")
  check.raises("config.set_path: 'seed' is a number, not a table",
    function() return config.set_path(cfg, "seed.x", 1) end)
  check.eq(config.need(cfg.optim, "optim", { learning_rate = "number", name = "string" }),
    cfg.optim, "need passes")
  check.raises("optim.beta1: expected string, got number",
    function() return config.need(cfg.optim, "optim", { beta1 = "string" }) end)
  check.raises("optim.momentum: expected number, got nothing",
    function() return config.need(cfg.optim, "optim", { momentum = "number" }) end)
  check.raises("train.epochs: expected integer, got number",
    function() return config.need({ epochs = 1.5 }, "train", { epochs = "integer" }) end)
end

function T.write_is_atomic_and_reloads()
  local d = check.tmpdir()
  local cfg = config.load(nil, { "seed=8" })
  local path = d .. "/config.resolved.yaml"
  config.write(cfg, path)
  check.same(config.load(path), cfg, "written config reloads")
  local text = check.read_file(path)
  check.ok(text:find("# resolved config (hydra " .. core.version .. "), hash "
    .. config.hash(cfg), 1, true), "header: " .. text:sub(1, 80))
  check.same(core.listdir(d), { "config.resolved.yaml" }, "no temporary file left")
end

-- ===== defaults and schema consistency =====

function T.defaults_and_schema_checks()
  local d = check.tmpdir()
  local function fails(want, text, schema)
    local path = put(d, "defaults.yaml", text)
    check.raises(want:format(path), function() return config.check_defaults(path, schema) end)
  end
  fails("%s:2:6: a.b: a null default needs a type in lua/hydra/config_schema.lua",
    "a:\n  b: ~\n", {})
  fails("%s:1:4: a: an empty list default needs a type in lua/hydra/config_schema.lua",
    "a: []\n", {})
  fails("config_schema: 'a.c' is not a key of %s", "a:\n  b: 1\n", { ["a.c"] = { ge = 0 } })
  fails("config_schema: 'a' is a section of %s, not a key", "a:\n  b: 1\n", { a = { ge = 0 } })
  fails("%s:2:6: a.b must be >= 2 (got 1)", "a:\n  b: 1\n", { ["a.b"] = { ge = 2 } })
  fails("config_schema: a.b: unknown type 'int' (types: integer, number, string, boolean, map, "
    .. "list<T>)", "a:\n  b: 1\n", { ["a.b"] = { type = "int" } })
  fails("config_schema: 'a.b': unknown field 'min' (fields: type, enum, gt, ge, lt, le, name, id_neutral)",
    "a:\n  b: 1\n", { ["a.b"] = { min = 0 } })
  fails("%s:1:4: a: elements of a list default must share one scalar type (add a type in "
    .. "config_schema.lua)", "a: [1, x]\n", {})
  config.check_defaults(put(d, "ok.yaml", "a:\n  b: ~\n  c: [1, 2.5]\n"),
    { ["a.b"] = { type = "string" } })
  -- the real defaults satisfy the real schema
  config.check_defaults(home .. "/configs/defaults.yaml", require("hydra.config_schema"))
end

function T.free_form_maps_and_other_defaults()
  local d = check.tmpdir()
  local defaults = put(d, "defaults.yaml",
    "extra: {x: 1}\nopts:\n  level: 2\n  tags: ~\n  ratio: 0.5\n")
  local ok, e = pcall(function()
    config.use_defaults(defaults, { extra = { type = "map" },
      ["opts.tags"] = { type = "list<string>" }, ["opts.ratio"] = { gt = 0, le = 1 } })
    check.same(config.defaults(), { extra = { x = 1 }, opts = { level = 2, ratio = 0.5 } },
      "defaults")
    local cfg = config.load(put(d, "c.yaml", "extra: {y: [1, 2], z: {w: 3}}\nopts:\n  tags: [a]\n"))
    check.same(cfg.extra, { y = { 1, 2 }, z = { w = 3 } }, "a free-form map is replaced whole")
    check.same(cfg.opts.tags, { "a" }, "optional list set")
    round_trip(cfg, "free-form map")
    local empty = config.load(nil, { "extra={}" })
    check.ok(config.to_yaml(empty):find("\nextra: {}\n", 1, true) or
             config.to_yaml(empty):find("^extra: {}\n"), "empty map written {}")
    round_trip(empty, "empty free-form map")
    check.raises("command line: extra=[1]: expected map, got list",
      function() return config.load(nil, { "extra=[1]" }) end)
    check.raises("command line: opts.ratio=2 must be > 0 and <= 1 (got 2)",
      function() return config.load(nil, { "opts.ratio=2" }) end)
    check.raises("command line: opts.tags=x: expected list of strings or null, got string 'x'",
      function() return config.load(nil, { "opts.tags=x" }) end)
  end)
  config.use_defaults()
  if not ok then error(e, 0) end
  check.eq(config.defaults().model.kind, "vit", "back to the real defaults")
end

-- ===== the command =====

function T.hydra_config_command()
  if not hydra_exe then return end
  local d = check.tmpdir()
  local good = put(d, "good.yaml", "include: " .. home .. "/configs/models/vit-fm-tiny.yaml\n"
    .. "train:\n  epochs: 2\n")
  local _
  local code, out, errt = check.hydra(("config %s seed=5"):format(good))
  check.eq(code, 0, "status ok: " .. errt)
  check.eq(out, config.to_yaml(config.load(good, { "seed=5" })), "prints the resolved YAML")
  code, out = check.hydra(("config --check %s"):format(good))
  check.eq(code, 0, "--check status")
  check.eq(out, good .. ": ok\n", "--check output")
  local bad = put(d, "bad.yaml", "optim:\n  lerning_rate: 0.1\n")
  code, out, errt = check.hydra(("config %s"):format(bad))
  check.eq(code, 1, "bad config status")
  check.eq(out, "", "nothing printed for a bad config")
  check.eq(errt, ("hydra: %s:2:3: unknown key 'lerning_rate' in 'optim' (did you mean "
    .. "'learning_rate'?)\n"):format(bad), "bad config message")
  code, _, errt = check.hydra("config train.epochs=ten")
  check.eq(code, 1, "bad override status")
  check.eq(errt, "hydra: command line: train.epochs=ten: expected integer, got string 'ten'\n",
    "bad override message")
  code, _, errt = check.hydra(("config %s/missing.yaml"):format(d))
  check.eq(code, 1, "missing file status")
  check.eq(errt, ("hydra: config: cannot read '%s/missing.yaml' (No such file or directory)\n")
    :format(d), "missing file message")
  code = check.hydra("config --bogus")
  check.eq(code, 2, "unknown option")
  code = check.hydra(("config %s %s"):format(good, bad))
  check.eq(code, 2, "two files")
  code = check.hydra("config --check --hash")
  check.eq(code, 2, "--check with --hash")
end

return T
