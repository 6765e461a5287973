#!/bin/sh
# tests/e2e/bench_torch.sh: the PyTorch side of `make bench` (tests/ref/bench_torch.py) on a
# small spec written by hydra: a small vit, a small text model (key-padding mask, ragged
# lengths) and a small BERT-like one (norm post, text_embed bert, pooler tanh), hydra's own
# parameter counts, every inference path (eager, the TransformerEncoderLayer fast path, frozen
# TorchScript: each checked equal to eager by the script). Checks that the script accepts them
# (its models have exactly hydra's parameter count), prints every figure as a positive number
# (and its peak RSS), and refuses a
# spec whose count differs (exit 1, message naming both counts). Skips (77) when
# /usr/bin/python3 cannot import torch (Debian's python3-torch): never a requirement.
set -eu
HYDRA=${HYDRA:-./hydra}
PY=${HYDRA_BENCH_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "python3-torch not installed ($PY cannot import torch)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydra-e2e-bench-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/spec.lua" <<'LUA'
local core = require("hydra.core")
local json = require("hydra.eval").json_value
local out, extra = arg[1], tonumber(arg[2])
local vit = { kind = "vit", image_size = 28, channels = 1, patch = 7, d_model = 32, n_heads = 4,
  depth = 2, d_mlp = 64, n_classes = 10, dropout = 0 }
local text = { kind = "text", vocab_size = 50, max_len = 12, d_model = 32, n_heads = 4,
  depth = 2, d_mlp = 64, n_classes = 3, dropout = 0 }
local optim = { learning_rate = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
  weight_decay = 0.05, grad_clip = 1.0 }
local bert = { kind = "text", vocab_size = 60, max_len = 10, d_model = 32, n_heads = 4,
  depth = 2, d_mlp = 64, n_classes = 2, dropout = 0, norm = "post", pooler = "tanh",
  text_embed = "bert", type_vocab = 2, ln_eps = 1e-12 }
local paths = { "eager", "fast", "jit" }
local spec = { threads = 1, seed = 1, models = {
  vit = { model = vit, params = core.model_new(vit):config().params + extra, optim = optim,
    train_batch = 8, train_steps = 2, warmup_steps = 1, infer_batch = 16, infer_n = 40,
    latency_n = 3, paths = paths },
  text = { model = text, params = core.model_new(text):config().params, optim = optim,
    warmup_steps = 1, train_batches = { { 3, 12, 1, 7 }, { 5, 5, 2 } }, infer_batch = 4,
    infer_lengths = { 1, 2, 3, 4, 5, 12 }, latency_lengths = { 4, 12 }, paths = paths },
  bert = { model = bert, params = core.model_new(bert):config().params, optim = optim,
    warmup_steps = 1, train_batches = { { 10, 10 } }, infer_batch = 3,
    infer_lengths = { 10, 10, 10, 10 }, latency_lengths = { 10, 10 }, latency_warmup = 1,
    paths = paths } } }
local f = assert(io.open(out, "w"))
f:write(json(spec, 0), "\n")
f:close()
LUA
"$HYDRA" run "$tmp/spec.lua" "$tmp/spec.json" 0
OMP_WAIT_POLICY=passive "$PY" tests/ref/bench_torch.py "$tmp/spec.json" >"$tmp/out.json"
cat >"$tmp/check.lua" <<'LUA'
local s = assert(io.open(arg[1])):read("a")
local keys = { "peak_rss_mb" }
for _, m in ipairs({ "vit", "text", "bert" }) do
  keys[#keys + 1] = m .. ".train_samples_per_s"
  for _, p in ipairs({ "", ".fast", ".jit" }) do
    keys[#keys + 1] = m .. p .. ".infer_samples_per_s"
    keys[#keys + 1] = m .. p .. ".latency_ms"
  end
end
for _, k in ipairs(keys) do
  local v = tonumber(s:match('"' .. k:gsub("%.", "%%.") .. '":%s*([-%d.eE+]+)'))
  if not v or v <= 0 then error(k .. " missing or not positive in: " .. s, 0) end
end
LUA
"$HYDRA" run "$tmp/check.lua" "$tmp/out.json"
"$HYDRA" run "$tmp/spec.lua" "$tmp/bad.json" 1
if "$PY" tests/ref/bench_torch.py "$tmp/bad.json" >"$tmp/bad.out" 2>"$tmp/bad.err"; then
    echo "bench_torch.py accepted a parameter count that differs from its model's"
    exit 1
fi
grep -q "bench_torch: vit has [0-9]* parameters, hydra's has [0-9]*" "$tmp/bad.err" || {
    echo "unexpected message:"; cat "$tmp/bad.err"; exit 1; }
