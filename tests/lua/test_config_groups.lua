-- tests/lua/test_config_groups.lua: FB Hydra-style configs in hydra.config: config groups
-- (model=vit-fm), defaults lists with _self_, +key / ~key, and ${...} interpolation (absolute,
-- relative, oc.env with a default, string interpolation, type preservation, escapes) with the
-- error of every failing case.
local check = require("check")
local config = require("hydra.config")

local T = {}
local home = rawget(_G, "HYDRA_HOME") or "."
local quick = home .. "/configs/experiments/quick.yaml"

local function put(dir, name, text)
  local path = dir .. "/" .. name
  check.write_file(path, text)
  return path
end

-- ===== groups =====

function T.group_choice_selects_the_file()
  local tiny = config.load(quick)
  local cfg = config.load(quick, { "model=vit-fm" })
  local ref = config.load(home .. "/configs/models/vit-fm.yaml")
  check.eq(cfg.model.d_model, ref.model.d_model, "d_model of vit-fm")
  check.eq(cfg.model.depth, ref.model.depth, "depth of vit-fm")
  check.ok(cfg.model.depth ~= tiny.model.depth, "vit-fm differs from quick's vit-fm-tiny")
  check.eq(cfg.data.train_subset, tiny.data.train_subset, "the profile's subsets stay")
  -- later overrides still apply on top of the group
  check.eq(config.load(quick, { "model=vit-fm", "model.depth=2" }).model.depth, 2, "depth=2")
end

function T.group_data_and_both()
  local cfg = config.load(quick, { "model=vit-fm", "data=fashion-mnist" })
  check.eq(cfg.data.id, "fashion-mnist", "data.id")
  check.same(cfg.data.ood.near, { "mnist", "opencv-digits" }, "near sets of the group file")
  check.eq(cfg.data.train_subset, 5000, "quick's train_subset stays")
end

function T.unknown_group_option_lists_the_available()
  check.raises("command line: model=vit-fn: no config 'vit-fn' in group model (configs/models/: "
    .. "text-sst, vit-fm, vit-fm-tiny); did you mean 'vit-fm'?", function()
      return config.load(quick, { "model=vit-fn" })
    end)
end

function T.group_file_sets_only_its_section()
  check.raises_has("a config of group data sets only 'data', not model, optim, train", function()
    return config.load(quick, { "data=tiny" })
  end)
end

function T.defaults_list_and_self()
  local d = check.tmpdir()
  -- _self_ last (the default): the file's own keys win over the group's
  local a = put(d, "a.yaml", "defaults: [{model: vit-fm}]\nmodel: {depth: 2}\n")
  check.eq(config.load(a).model.depth, 2, "_self_ last by default")
  check.eq(config.load(a).model.d_model, 128, "the group's d_model")
  -- _self_ first: the group wins
  local b = put(d, "b.yaml", "defaults: [_self_, {model: vit-fm}]\nmodel: {depth: 2}\n")
  check.eq(config.load(b).model.depth, 6, "_self_ first: vit-fm's depth")
  -- a command-line choice replaces the defaults entry (and _self_ still applies after it)
  local c = config.load(a, { "model=vit-fm-tiny" })
  check.eq(c.model.d_model, 64, "vit-fm-tiny replaced vit-fm")
  check.eq(c.model.depth, 2, "the file's own depth after the replaced entry")
  -- a file path entry, relative to the file
  put(d, "inc.yaml", "train: {epochs: 7}\n")
  local e = put(d, "e.yaml", "defaults: [inc.yaml, _self_]\n")
  check.eq(config.load(e).train.epochs, 7, "a path entry")
  local bad = put(d, "bad.yaml", "defaults: [{optim: adamw}]\n")
  check.raises(bad .. ":1:12: defaults[1]: expected {group: name} with a group of data, model, "
    .. "got {optim: adamw}", function() return config.load(bad) end)
  local twice = put(d, "twice.yaml", "defaults: [_self_, _self_]\n")
  check.raises(twice .. ":1:20: defaults[2]: _self_ is listed twice",
    function() return config.load(twice) end)
  local nosuch = put(d, "nosuch.yaml", "defaults:\n  - {model: nope}\n")
  check.raises(nosuch .. ":2:5: no config 'nope' in group model (configs/models/: text-sst, "
    .. "vit-fm, vit-fm-tiny)", function()
    return config.load(nosuch)
  end)
end

-- ===== +key / ~key =====

function T.add_and_remove_optional_keys()
  check.eq(config.load(quick, { "+train.init=/x.h5" }).train.init, "/x.h5", "+ sets")
  check.eq(config.load(quick, { "+train.init=/x.h5", "~train.init" }).train.init, nil, "~ removes")
  check.raises("command line: +train.epochs=3: train.epochs always has a value (default 20) "
    .. "(only a key whose default is null may be added; set it with train.epochs=VALUE)",
    function() return config.load(quick, { "+train.epochs=3" }) end)
  check.raises_has("command line: ~train: train is a section", function()
    return config.load(quick, { "~train" })
  end)
end

-- ===== interpolation =====

function T.interpolation_values()
  local d = check.tmpdir()
  local f = put(d, "i.yaml", table.concat({
    "experiment: run_${seed}_x",
    "train:",
    "  epochs: ${prune.calib_size}",          -- absolute, type kept (integer)
    "  batch_size: ${.eval_batch_size}",      -- relative: same section
    "  eval_batch_size: 48",
    "prune:",
    "  calib_size: ${..seed}",                -- relative: one level up
    "data:",
    "  ood: ${data.shift}",                   -- a list, whole
    "  shift: [a, b]",
    "results_dir: /r/\\${seed}",              -- escaped: literal
  }, "\n") .. "\n")
  local cfg = config.load(f, { "seed=4" })
  check.eq(cfg.experiment, "run_4_x", "string interpolation")
  check.eq(cfg.train.epochs, 4, "chain epochs -> calib_size -> seed")
  check.eq(math.type(cfg.train.epochs), "integer", "an integer stays one")
  check.eq(cfg.train.batch_size, 48, "relative sibling")
  check.same(cfg.data.ood, { "a", "b" }, "a list reference")
  check.eq(cfg.results_dir, "/r/${seed}", "\\${ is a literal")
  -- resolved after every override: the override of seed is seen
  check.eq(config.load(f, { "seed=9" }).prune.calib_size, 9, "after overrides")
  -- raw: as written
  check.eq(config.resolve(f, { "seed=4" }, { raw = true }).experiment, "run_${seed}_x", "raw")
end

function T.interpolation_env()
  local cfg = config.load(quick, { "train.epochs=${oc.env:HYDRA_TEST_UNSET_VAR_X,7}" })
  check.eq(cfg.train.epochs, 7, "default of an unset variable, typed by the key")
  local home_var = os.getenv("HOME")
  if home_var then
    check.eq(config.load(quick, { "results_dir=${oc.env:HOME}/r" }).results_dir, home_var .. "/r",
      "a set variable")
  end
  check.raises("command line: train.epochs=${oc.env:HYDRA_TEST_UNSET_VAR_X}: train.epochs: "
    .. "environment variable HYDRA_TEST_UNSET_VAR_X is not set (give a default: "
    .. "${oc.env:HYDRA_TEST_UNSET_VAR_X,default})", function()
      return config.load(quick, { "train.epochs=${oc.env:HYDRA_TEST_UNSET_VAR_X}" })
    end)
end

function T.interpolation_errors()
  local d = check.tmpdir()
  local f = put(d, "m.yaml", "train:\n  epochs: ${nope.key}\n")
  check.raises(f .. ":2:11: ${nope.key}: no such key (chain: train.epochs -> nope.key)",
    function() return config.load(f) end)
  check.raises_has("interpolation cycle: train.batch_size -> train.epochs -> train.batch_size",
    function()
      return config.load(quick, { "train.epochs=${train.batch_size}",
                                  "train.batch_size=${train.epochs}" })
    end)
  check.raises("command line: train.epochs=x${seed}: expected integer, got string 'x0'",
    function() return config.load(quick, { "train.epochs=x${seed}" }) end)
  check.raises_has("nested ${ is not supported", function()
    return config.load(quick, { "results_dir=${a${b}}" })
  end)
  check.raises_has("unterminated ${", function()
    return config.load(quick, { "results_dir=${seed" })
  end)
  check.raises_has("${train} is a map: only a whole value", function()
    return config.load(quick, { "results_dir=x${train}" })
  end)
  local up = put(d, "up.yaml", "train:\n  epochs: ${...x}\n")
  check.raises(up .. ":2:11: '${...x}': '${...x}' goes above the top of the config",
    function() return config.load(up) end)
end

return T
