-- tests/lua/test_bench.lua: core.bench_kernels (lua/bind/l_bench.c), the per-kernel breakdown of
-- `make bench`: which kernels a training step / inference forward is made of, how often a step
-- calls each, the GEMM FLOPs of each row from the model's shapes, and the argument errors.
-- Timings themselves are only checked to be finite and consistent (ms = ms_call x calls).
local check = require("check")
local core = require("hydra.core")
local eq, ok, raises = check.eq, check.ok, check.raises

local T = {}

-- tiny ViT: 8x8 images, patch 4 -> 4 patches + CLS = 5 tokens
local function vit_cfg()
  return { kind = "vit", image_size = 8, channels = 1, patch = 4, d_model = 16, n_heads = 2,
    depth = 2, d_mlp = 32, n_classes = 3 }
end

local TRAIN_VIT = {
  "embed: patch extract", "gemm patch_embed fwd", "embed: assemble fwd", "layernorm fwd",
  "gemm qkv fwd", "attention fwd", "gemm proj fwd", "gemm fc1 fwd", "gelu fwd", "gemm fc2 fwd",
  "gemm head fwd", "softmax-CE fwd", "softmax-CE bwd", "zero_grad", "gemm head bwd dX",
  "gemm head bwd dW+db", "gemm fc2 bwd dX", "gemm fc2 bwd dW+db", "gelu bwd", "gemm fc1 bwd dX",
  "gemm fc1 bwd dW+db", "layernorm bwd", "gemm proj bwd dX", "gemm proj bwd dW+db",
  "attention bwd", "gemm qkv bwd dX", "gemm qkv bwd dW+db", "embed: assemble bwd",
  "gemm patch_embed bwd dW+db", "grad norm + clip", "adamw step",
}

local function by_name(rows)
  local t = {}
  for _, r in ipairs(rows) do
    ok(t[r.name] == nil, "duplicate row " .. r.name)
    t[r.name] = r
  end
  return t
end

local function names(rows)
  local t = {}
  for i, r in ipairs(rows) do t[i] = r.name end
  return t
end

local function sane(rows)
  for _, r in ipairs(rows) do
    ok(r.ms >= 0 and r.ms < math.huge, r.name .. ": ms " .. tostring(r.ms))
    ok(r.calls >= 1, r.name .. ": calls")
    check.near(r.ms_call * r.calls, r.ms, 1e-9 * (1 + r.ms), r.name .. ": ms = ms_call x calls")
    ok(type(r.group) == "string", r.name .. ": group")
    if r.group == "gemm" then ok(r.flops > 0, r.name .. ": gemm flops")
    else eq(r.flops, 0, r.name .. ": flops of a non-GEMM row") end
  end
end

function T.train_rows_follow_the_step()
  local B, L, D, DM, K, Tk, F = 3, 2, 16, 32, 3, 5, 16
  local rows = core.bench_kernels(vit_cfg(), B, 3)
  check.same(names(rows), TRAIN_VIT, "rows")
  sane(rows)
  local r = by_name(rows)
  local N = B * Tk
  eq(r["layernorm fwd"].calls, 2 * L + 1, "layernorm fwd calls (2 per block + final)")
  eq(r["layernorm bwd"].calls, 2 * L + 1, "layernorm bwd calls")
  for _, k in ipairs({ "gemm qkv fwd", "attention fwd", "attention bwd", "gelu bwd",
                       "gemm fc1 bwd dX", "gemm qkv bwd dW+db" }) do
    eq(r[k].calls, L, k .. " calls")
  end
  eq(r["adamw step"].calls, 1, "adamw calls")
  -- GEMM flops from the shapes: 2 * rows * in * out per call, times the calls
  eq(r["gemm qkv fwd"].flops, 2.0 * N * D * 3 * D * L, "qkv fwd flops")
  eq(r["gemm qkv bwd dX"].flops, 2.0 * N * D * 3 * D * L, "qkv dX flops")
  eq(r["gemm proj bwd dW+db"].flops, 2.0 * N * D * D * L, "proj dW flops")
  eq(r["gemm fc1 fwd"].flops, 2.0 * N * D * DM * L, "fc1 fwd flops")
  eq(r["gemm fc2 bwd dX"].flops, 2.0 * N * DM * D * L, "fc2 dX flops")
  eq(r["gemm head fwd"].flops, 2.0 * B * D * K, "head fwd flops")
  eq(r["gemm patch_embed fwd"].flops, 2.0 * B * (Tk - 1) * F * D, "patch embed flops")
end

function T.infer_rows_are_the_forward()
  local rows = core.bench_kernels(vit_cfg(), 4, 1, "infer")
  check.same(names(rows), {
    "embed: patch extract", "gemm patch_embed fwd", "embed: assemble fwd", "layernorm fwd",
    "gemm qkv fwd", "attention fwd", "gemm proj fwd", "gemm fc1 fwd", "gelu fwd", "gemm fc2 fwd",
    "gemm head fwd", "softmax (predict)" }, "rows")
  sane(rows)
end

function T.text_model_with_dropout()
  local cfg = { kind = "text", vocab_size = 50, max_len = 6, d_model = 16, n_heads = 4,
    depth = 3, d_mlp = 24, n_classes = 2, attn_dropout = 0.1, mlp_dropout = 0.2 }
  local rows = core.bench_kernels(cfg, 2, 2)
  sane(rows)
  local r = by_name(rows)
  ok(r["embed: token fwd"] and r["embed: token bwd"], "token embedding rows")
  ok(not r["embed: patch extract"] and not r["gemm patch_embed fwd"], "no patch rows")
  -- dropout sites: attention output (L), MLP hidden (L) and MLP output (L)
  eq(r["dropout mask"].calls, 9, "mask calls")
  eq(r["dropout fwd"].calls, 9, "dropout fwd calls")
  eq(r["dropout bwd"].calls, 6, "dropout bwd calls (attention and MLP output sites)")
  eq(r["gemm qkv fwd"].flops, 2.0 * 2 * 7 * 16 * 48 * 3, "qkv flops at T = 1 + max_len")
  -- inference: dropout off
  local inf = by_name(core.bench_kernels(cfg, 2, 1, "infer"))
  ok(not inf["dropout mask"] and not inf["dropout fwd"], "no dropout at inference")
end

function T.accepts_a_model()
  local m = core.model_new(vit_cfg())
  local rows = core.bench_kernels(m, 2, 1, "infer")
  eq(#rows, 12, "rows from the model's config")
  m:close()
  raises("model: attempt to use a closed model", function() core.bench_kernels(m, 2, 1) end)
end

function T.argument_errors()
  raises("bad argument #2 to 'bench_kernels' (batch size must be in [1, 65536])",
    function() core.bench_kernels(vit_cfg(), 0, 1) end)
  raises("bad argument #3 to 'bench_kernels' (reps must be in [1, 1000])",
    function() core.bench_kernels(vit_cfg(), 2, 0) end)
  raises("bad argument #4 to 'bench_kernels' (invalid option 'fit')",
    function() core.bench_kernels(vit_cfg(), 2, 1, "fit") end)
  raises("bad argument #1 to 'bench_kernels' (hydra.Model or model config table expected, "
    .. "got number)", function() core.bench_kernels(3, 2, 1) end)
  local c = vit_cfg()
  c.kind = "rnn"
  raises("model: kind must be 'vit' or 'text' (got 'rnn')",
    function() core.bench_kernels(c, 2, 1) end)
  c = vit_cfg()
  c.d_model = nil
  raises("model: d_model must be a non-negative integer (got nil)",
    function() core.bench_kernels(c, 2, 1) end)
  c = vit_cfg()
  c.d_model = 15
  raises("xfmr: d_model must be divisible by n_heads (d_model 15, n_heads 2)",
    function() core.bench_kernels(c, 2, 1) end)
end

return T
