-- tests/lua/test_model.lua: hydra.model (new/load/train/evaluate/predict/save, gates), the
-- hydra.Model binding (errors, close), and the `hydra model init`, `hydra train` and
-- `hydra predict` commands on the synthetic tiny dataset.
local check = require("check")
local hydra = require("hydra")
local core = require("hydra.core")
local model = hydra.model
local config = hydra.config
local h5 = hydra.h5
local eq, ok, raises, raises_has = check.eq, check.ok, check.raises, check.raises_has

local T = {}

local dir_cache
local function tiny_dir()
  if not dir_cache then
    dir_cache = check.tmpdir()
    model.write_synthetic(dir_cache .. "/tiny.h5", { train = 384, val = 96, test = 64, seed = 1 })
  end
  return dir_cache
end

local function tiny_cfg(extra)
  local ov = { ["data.dir"] = tiny_dir() }
  for k, v in pairs(extra or {}) do ov[k] = v end
  return config.load("configs/data/tiny.yaml", ov)
end

local function same_bytes(a, b)
  if a:numel() ~= b:numel() then return false end
  local x, y = a:flat(), b:flat()
  for i = 1, #x do
    if x[i] ~= y[i] and not (x[i] ~= x[i] and y[i] ~= y[i]) then return false end
  end
  return true
end

function T.new_config_and_gates()
  local m = model.new(tiny_cfg())
  local c = m:config()
  eq(c.kind, "vit", "kind")
  eq(c.d_model, 64, "d_model")
  eq(c.depth, 4, "depth")
  ok(m:params_count() > 150000 and m:params_count() < 300000, "params " .. m:params_count())
  local g = m:gates()
  eq(g:size(1), 4, "gate rows")
  eq(g:size(2), 8, "gate cols")
  m:set_gate(2, 3, 0)
  eq(m:gates():get(2, 3), 0.0, "set_gate is 1-based")
  eq(m:gates():get(1, 1), 1.0, "others kept")
  raises("bad argument #1 to 'set_gate' (index 5 out of range [1, 4])",
    function() return m.ud:set_gate(5, 1, 0) end)
  m:set_gates({ { 1, 1, 1, 1, 1, 1, 1, 1 }, { 0, 0, 0, 0, 1, 1, 1, 1 },
                { 1, 1, 1, 1, 1, 1, 1, 1 }, { 1, 1, 1, 1, 1, 1, 1, 1 } })
  eq(m:gates():get(2, 1), 0.0, "set_gates")
  raises("model: gates must be float32 [4,8] (got float32 [2,2])",
    function() return m:set_gates({ { 1, 1 }, { 1, 1 } }) end)
  m:close()
  m:close()
  raises("model: attempt to use a closed model", function() return m:params_count() end)
end

function T.init_is_seeded()
  local a = model.new(tiny_cfg(), 3)
  local b = model.new(tiny_cfg(), 3)
  local c = model.new(tiny_cfg(), 4)
  ok(same_bytes(a:get_params(), b:get_params()), "same seed, same init")
  ok(not same_bytes(a:get_params(), c:get_params()), "seeds differ")
end

function T.train_save_load_predict()
  local dir = tiny_dir()
  local cfg = tiny_cfg()
  local m = model.new(cfg)
  local lines = {}
  local hist = m:train(dir .. "/tiny.h5", cfg, { progress = false,
    log = function(l) lines[#lines + 1] = l end })
  eq(#hist.epochs, 2, "epochs")
  eq(#lines, 2, "one log line per epoch")
  ok(hist.best_val_acc > 0.8, "val acc " .. hist.best_val_acc)
  local best = hist.epochs[hist.best_epoch]
  for _, e in ipairs(hist.epochs) do ok(e.val_nll >= best.val_nll, "best = lowest val nll") end
  -- same batch size as training's validation pass: GEMM rounding depends on the row count
  local r = m:evaluate(dir .. "/tiny.h5", "val", { batch_size = cfg.train.eval_batch_size })
  check.near(r.nll, hist.best_val_nll, 1e-9, "kept weights are the best epoch's")
  local path = dir .. "/m.h5"
  m:save(path, { seed = 5, note = "x" })
  local g <close> = h5.open(path)
  eq(g:attr("/meta", "seed"), 5, "meta seed")
  eq(g:attr("/meta", "note"), "x", "meta note")
  check.near(g:attr("/meta", "data_mean"), 0.3, 1e-12, "normalisation recorded")
  local m2 = model.load(path)
  ok(same_bytes(m:get_params(), m2:get_params()), "round trip")
  local p = m2:predict(dir .. "/tiny.h5", "test", { batch_size = 256 })
  eq(p.logits:size(1), 64, "N")
  eq(p.probs:size(2), 10, "C")
  eq(p.labels:dtype(), "int32", "labels dtype")
  local q = m2:predict(dir .. "/tiny.h5", "test", { subset = 10, batch_size = 3 })
  eq(q.probs:size(1), 10, "subset")
  for j = 1, 10 do check.near(q.probs:get(3, j), p.probs:get(3, j), 1e-6, "batching") end
  raises_has("predict: mc_samples needs a model with dropout",
    function() return m2:predict(dir .. "/tiny.h5", "test", { batch_size = 8, mc_samples = 2 }) end)
  raises_has("predict: opts.batch_size must be an integer (train.eval_batch_size; got nil)",
    function() return m2:predict(dir .. "/tiny.h5", "test") end)
end

function T.mc_dropout_predict()
  local dir = tiny_dir()
  local cfg = tiny_cfg({ ["model.dropout"] = "0.2", ["train.epochs"] = "1" })
  local m = model.new(cfg)
  m:train(dir .. "/tiny.h5", cfg, { progress = false })
  local p = m:predict(dir .. "/tiny.h5", "test", { batch_size = 256, mc_samples = 3, seed = 1 })
  eq(p.member_probs:size(1), 3, "K")
  eq(p.member_probs:size(2), 64, "N")
  ok(not same_bytes(p.member_probs:row(1), p.member_probs:row(2)), "passes differ")
  local mean = (p.member_probs:get(1, 5, 2) + p.member_probs:get(2, 5, 2)
    + p.member_probs:get(3, 5, 2)) / 3
  check.near(p.probs:get(5, 2), mean, 1e-6, "probs = mean of passes")
  local again = m:predict(dir .. "/tiny.h5", "test", { batch_size = 256, mc_samples = 3, seed = 1 })
  ok(same_bytes(p.member_probs, again.member_probs), "MC masks seeded")
  local det = m:predict(dir .. "/tiny.h5", "test", { batch_size = 256 })
  local det2 = m:predict(dir .. "/tiny.h5", "test", { batch_size = 256 })
  ok(same_bytes(det.probs, det2.probs), "dropout off again after MC")
end

function T.training_is_deterministic()
  local dir = tiny_dir()
  local cfg = tiny_cfg({ ["train.epochs"] = "1", ["train.augment.random_crop"] = "true",
                         ["train.augment.hflip"] = "true", ["model.dropout"] = "0.1" })
  local a = model.new(cfg)
  a:train(dir .. "/tiny.h5", cfg, { progress = false })
  local b = model.new(cfg)
  b:train(dir .. "/tiny.h5", cfg, { progress = false })
  ok(same_bytes(a:get_params(), b:get_params()), "same seed + threads: bitwise identical")
end

-- train(..., { work = path }): a run stopped after epoch 1 (stop_after: a kill between epochs)
-- and resumed from its work file ends bitwise as the uninterrupted run, with the same history
-- and kept epoch; a plain model with dropout and augmentation (the dropout stream and the
-- optimiser state carry over), and a BatchEnsemble; the work file is gone at the end and one of
-- another training is refused
function T.train_resumes_bitwise()
  local dir = tiny_dir()
  local cfg = tiny_cfg({ ["train.epochs"] = "3", ["train.augment.random_crop"] = "true",
                         ["train.augment.hflip"] = "true", ["model.dropout"] = "0.1",
                         ["data.train_subset"] = "128" })
  local work = check.tmpdir() .. "/w.work.h5"
  local function run(make)
    local a = make()
    local ha = a:train(dir .. "/tiny.h5", cfg, { progress = false })
    local b = make()
    local lines = {}
    local opts = { progress = false, work = work, work_tag = "k1", stop_after = 1,
                   log = function(l) lines[#lines + 1] = l end }
    eq(b:train(dir .. "/tiny.h5", cfg, opts), nil, "stopped after one epoch")
    eq(core.stat(work), "file", "work file written")
    local c = make()
    opts.stop_after = nil
    local hc = c:train(dir .. "/tiny.h5", cfg, opts)
    ok(lines[#lines - 2]:match("^resuming after epoch 1 of 3 from "), lines[#lines - 2])
    ok(same_bytes(a:get_params(), c:get_params()), "resumed = uninterrupted, bitwise")
    eq(hc.best_epoch, ha.best_epoch, "kept epoch")
    for e = 1, 3 do
      eq(hc.epochs[e].val_nll, ha.epochs[e].val_nll, "epoch " .. e .. " val nll")
      eq(hc.epochs[e].train_loss, ha.epochs[e].train_loss, "epoch " .. e .. " train loss")
    end
    eq(core.stat(work), nil, "work file removed at the end")
  end
  run(function() return model.new(cfg) end)
  run(function() return model.new_ensemble(cfg, "batch_ensemble") end)
  -- a work file of another training is refused, naming it
  local b = model.new(cfg)
  b:train(dir .. "/tiny.h5", cfg, { progress = false, work = work, work_tag = "k1",
                                    stop_after = 1 })
  check.raises_has("is the work file of another training", function()
    return model.new(cfg):train(dir .. "/tiny.h5", cfg,
      { progress = false, work = work, work_tag = "k2" })
  end)
  os.remove(work)
end

function T.non_finite_loss_stops()
  local dir = tiny_dir()
  local cfg = tiny_cfg({ ["optim.learning_rate"] = "1e30", ["train.grad_clip"] = "0" })
  local m = model.new(cfg)
  raises_has("train: non-finite", function()
    return m:train(dir .. "/tiny.h5", cfg, { progress = false })
  end)
end

function T.progress_plain_lines()
  local progress = hydra.progress
  local out = {}
  local stream = { write = function(_, ...) for _, s in ipairs({ ... }) do out[#out + 1] = s end end,
                   flush = function() end }
  local bar = progress.new({ epochs = 3, tty = false, stream = stream })
  for s = 1, 100 do
    bar:update({ epoch = 2, epoch_step = s, epoch_steps = 100, loss = 0.5, acc = 0.75,
                 samples_per_s = 1000, seconds = s * 0.1 })
  end
  bar:finish({ epoch = 2, epoch_step = 100, epoch_steps = 100, loss = 0.5, acc = 0.75,
               samples_per_s = 1000, seconds = 10 }, "val nll 0.4")
  local text = table.concat(out)
  local _, nlines = text:gsub("\n", "")
  eq(nlines, 10, "9 lines at 10%..90% + the final one")
  ok(text:find("epoch 2/3  step 10/100  loss 0.5000  acc 75.00%  1000 samples/s  ETA 00:09",
    1, true), text)
  ok(not text:find("\r", 1, true), "no carriage returns off a terminal")
  ok(text:find("val nll 0.4\n", 1, true), "final line")
end

function T.cli_init_train_predict()
  local dir = tiny_dir()
  local _
  local code, out, err = check.hydra(("model init configs/data/tiny.yaml --seed 7 --out %s/i.h5")
    :format(dir))
  eq(code, 0, "model init: " .. err)
  ok(out:find("seed 7", 1, true), out)
  local m = model.load(dir .. "/i.h5")
  local fresh = model.new(tiny_cfg(), 7)
  ok(same_bytes(m:get_params(), fresh:get_params()), "init checkpoint = model.new(cfg, 7)")
  eq(m.meta.seed, 7, "seed in /meta")
  code, out, err = check.hydra(("train configs/data/tiny.yaml data.dir=%s train.epochs=1 "
    .. "--out %s/t.h5"):format(dir, dir))
  eq(code, 0, "train: " .. err)
  ok(out:find("seed 0", 1, true), "seed printed: " .. out)
  ok(err:find("epoch 1/1", 1, true), "progress on stderr: " .. err)
  local t = model.load(dir .. "/t.h5")
  ok(t.meta.config_hash and #t.meta.data_hash == 64 and t.meta.git_hash, "meta hashes")
  ok(t.meta.val_acc > 0.5, "val acc " .. tostring(t.meta.val_acc))
  code, out, err = check.hydra(("predict %s/t.h5 --data %s/tiny.h5 --split test --out %s/p.h5")
    :format(dir, dir, dir))
  eq(code, 0, "predict: " .. err)
  local g <close> = h5.open(dir .. "/p.h5")
  eq(g:read("/probs"):size(1), 64, "/probs")
  eq(g:read("/labels"):dtype(), "int32", "/labels int32")
  eq(g:read("/logits"):dtype(), "float32", "/logits float32")
  eq(g:attr("/", "precision"), "fp32", "precision attribute, default fp32")
  -- --precision bf16: the linears in BF16 where the CPU has it (else fp32, said on stderr)
  code, _, err = check.hydra(("predict %s/t.h5 --data %s/tiny.h5 --split test --out %s/pb.h5 "
    .. "--precision bf16"):format(dir, dir, dir))
  eq(code, 0, "predict bf16: " .. err)
  local gb <close> = h5.open(dir .. "/pb.h5")
  local used, l32, l16 = gb:attr("/", "precision"), g:read("/logits"), gb:read("/logits")
  local worst, big = 0, 1
  for i, x in ipairs(l32:flat()) do
    worst = math.max(worst, math.abs(l16:flat()[i] - x))
    big = math.max(big, math.abs(x))
  end
  if core.bf16_available() then
    eq(used, "bf16", "precision attribute bf16")
    ok(worst > 0 and worst <= 0.05 * big, "bf16 logits within the BF16 error: " .. worst)
  else
    eq(used, "fp32", "no AVX-512 BF16: fp32 ran")
    ok(err:find("precision bf16 is not available here", 1, true), err)
    eq(worst, 0, "no AVX-512 BF16: fp32's logits")
  end
  code, _, err = check.hydra(("predict %s/t.h5 --data %s/tiny.h5 --split test --out %s/px.h5 "
    .. "--precision fp16"):format(dir, dir, dir))
  eq(code, 2, "bad --precision")
  ok(err:find("--precision must be fp32 or bf16 (got 'fp16')", 1, true), err)
  ok(not core.stat(dir .. "/px.h5"), "nothing written")
  code, _, err = check.hydra(("predict %s/t.h5 --data %s/nope.h5 --split test --out %s/q.h5")
    :format(dir, dir, dir))
  eq(code, 1, "missing data")
  ok(err:find("nope.h5", 1, true) and not err:find("traceback", 1, true), err)
  code, _, err = check.hydra("train configs/data/tiny.yaml")
  eq(code, 2, "usage error")
  ok(err:find("--out is required", 1, true), err)
  code, _, err = check.hydra(("train configs/data/tiny.yaml data.dir=%s optim.learning_rate=1e30 "
    .. "train.grad_clip=0 --quiet --out %s/bad.h5"):format(dir, dir))
  eq(code, 1, "non-finite loss exit status")
  ok(err:find("non-finite", 1, true) and err:find("at step", 1, true), err)
  ok(not core.stat(dir .. "/bad.h5"), "nothing written")
end

-- m:flops(T): forward FLOPs per sample at sequence length T (what `make bench` counts for the
-- text model's padded batches); the full T gives m:config().flops
function T.flops_at_sequence_length()
  local m = core.model_new({ kind = "text", vocab_size = 50, max_len = 12, d_model = 32,
    n_heads = 4, depth = 2, d_mlp = 64, n_classes = 3, dropout = 0 })
  local D, DM, L, K = 32, 64, 2, 3
  local function want(t)
    return L * (2 * t * D * 3 * D + 4 * t * t * D + 2 * t * D * D + 4 * t * D * DM) + 2 * D * K
  end
  eq(m:flops(5), want(5), "T = 5")
  eq(m:flops(13), m:config().flops, "the full T is config().flops")
  eq(m:flops(13), want(13), "T = 13")
  raises("bad argument #1 to 'flops' (sequence length out of range)",
    function() return m:flops(14) end)
  raises("bad argument #1 to 'flops' (sequence length out of range)",
    function() return m:flops(0) end)
end

-- the model's optional encoder fields (xfmr.h): absent = the schema's default, a YAML override
-- reaches the model, and the schema's bounds hold
function T.model_optional_fields()
  local config = require("hydra.config")
  local mc = { kind = "text", vocab_size = 50, max_len = 12, d_model = 32, n_heads = 4,
    depth = 1, d_mlp = 64, n_classes = 3, dropout = 0 }
  eq(core.model_new(mc):config().ln_eps, 1e-6, "absent ln_eps")
  local cfg = config.load(nil, { "model.ln_eps=1e-12" })
  eq(cfg.model.ln_eps, 1e-12, "YAML ln_eps")
  mc.ln_eps = cfg.model.ln_eps
  eq(core.model_new(mc):config().ln_eps, 1e-12, "ln_eps reaches the model")
  local fields = {}
  for _, f in ipairs(core.model_config_fields()) do fields[f.name] = f end
  eq(fields.ln_eps.type, "float", "ln_eps type")
  eq(fields.ln_eps.default, 1e-6, "ln_eps default")
  local okl, e = pcall(config.load, nil, { "model.ln_eps=0" })
  ok(not okl and tostring(e):find("ln_eps", 1, true), tostring(e))
  -- the ENUM and COUNT fields: defaults, words, a BERT-like model from YAML keys
  local c0 = core.model_new(mc):config()
  eq(c0.norm .. c0.act .. c0.pooler .. c0.text_embed .. c0.type_vocab, "pregelunonehydra0",
    "defaults")
  eq(table.concat(fields.norm.words, "|"), "pre|post", "norm words")
  eq(fields.type_vocab.type, "count", "type_vocab type")
  cfg = config.load(nil, { "model.norm=post", "model.pooler=tanh", "model.text_embed=bert",
    "model.type_vocab=2", "model.act=gelu_tanh" })
  for _, k in ipairs({ "norm", "pooler", "text_embed", "type_vocab", "act" }) do
    mc[k] = cfg.model[k]
  end
  local c1 = core.model_new(mc):config()
  eq(c1.norm .. c1.act .. c1.pooler .. c1.text_embed .. c1.type_vocab, "postgelu_tanhtanhbert2",
    "YAML options reach the model")
  eq(c1.seq_len, 12, "text_embed bert: the position table is max_len long, [CLS] included")
  local path = check.tmpdir() .. "/bert.h5"
  local mb = core.model_new(mc)
  mb:init(1)
  mb:save(path, {})
  local c2 = core.model_load(path):config()
  eq(c2.norm .. c2.act .. c2.pooler .. c2.text_embed .. c2.type_vocab, "postgelu_tanhtanhbert2",
    "the options survive a checkpoint")
  mc.norm = "mid"
  raises("model.norm must be one of pre|post (got 'mid')", function() return core.model_new(mc) end)
  okl, e = pcall(config.load, nil, { "model.norm=mid" })
  ok(not okl and tostring(e):find("norm", 1, true), tostring(e))
end

-- core.blas_info(): the OpenBLAS build and the kernels it picked here (recorded by `make bench`)
function T.blas_info_names_openblas()
  local b = core.blas_info()
  ok(type(b.corename) == "string" and #b.corename > 0, "corename " .. tostring(b.corename))
  ok(b.config:match("^OpenBLAS %d"), "config " .. tostring(b.config))
end

return T
