-- hydra predict CKPT.h5 --data FILE.h5 --split NAME --out PREDS.h5 [--mc-samples K]:
-- logits / probabilities of a checkpoint on one split of a prepared dataset.
local argparse = require("hydra.argparse")
local err = require("hydra.err")

local USAGE = "hydra predict CKPT.h5 --data FILE.h5 --split NAME --out PREDS.h5 "
  .. "[--mc-samples K] [--batch-size B] [--subset N] [--seed S] [--precision fp32|bf16]"

return {
  summary = "predict a split of a prepared dataset with a checkpoint",
  usage = USAGE,
  help = [[Writes PREDS.h5 with /logits [N,C] float32, /probs [N,C] float32 (softmax) and
/labels [N] int32 (-1 for OOD sets), plus root attributes checkpoint, data, split, mc_samples,
precision.
Images are scaled to [0,1] and normalised with the training data's mean/std recorded in the
checkpoint (else the data file's /meta mean/std). With --mc-samples K (MC Dropout) dropout
stays on for K passes (masks seeded by --seed): /probs is the mean of the passes'
softmaxes, /logits the mean logits, and /member_probs [K,N,C] holds every pass. --subset N
predicts the first N samples only; --batch-size sets the batch (default train.eval_batch_size of
configs/defaults.yaml; --seed defaults to its seed). A fused Hydra
model (hydra fuse) gives /probs = mean of the member softmaxes, /logits = mean member logits and
/member_probs [M,N,C]. --precision bf16 (default: precision of configs/defaults.yaml, fp32)
runs the linears with bfloat16 weights and inputs and float32 sums (AVX-512 BF16; a CPU without
it, or an ensemble checkpoint, keeps fp32 and says so); the attribute precision records the
one used.]],
  run = function(args)
    local opts = argparse.parse(args, {
      command = "predict", usage = USAGE,
      options = { data = "string", split = "string", out = "string",
                  ["mc-samples"] = "integer", ["batch-size"] = "integer", subset = "integer",
                  seed = "natural", precision = "string" },
      positional = { min = 1, max = 1, names = { "CKPT.h5" } },
      required = { "data", "split", "out" },
    })
    local K = opts["mc-samples"] or 0
    if K < 0 then err.usage("hydra predict: --mc-samples must be >= 1 (got %d)", K) end
    local defaults = require("hydra.config").defaults()
    local B = opts["batch-size"] or defaults.train.eval_batch_size
    if B < 1 or B > 1048576 then
      err.usage("hydra predict: --batch-size must be in [1, 1048576] (got %d)", B)
    end
    local seed = opts.seed or defaults.seed
    local precision = opts.precision or defaults.precision
    if precision ~= "fp32" and precision ~= "bf16" then
      err.usage("hydra predict: --precision must be fp32 or bf16 (got '%s')", precision)
    end
    -- the precision in force on the loaded model; a note when bf16 was asked and is not run
    local function use_precision(m)
      local used = m:set_precision(precision)
      if used ~= precision then
        io.stderr:write(("hydra predict: precision %s is not available here (%s); running %s\n")
          :format(precision, m.ensemble and m:ensemble() and "an ensemble checkpoint"
            or "no AVX-512 BF16", used))
      end
    end
    local core = require("hydra.core")
    local model = require("hydra.model")
    local h5 = require("hydra.h5")
    local ckpt = opts.positional[1]
    require("hydra.output").check({ { opts.out, "--out" } },
      { { ckpt, "CKPT.h5" }, { opts.data, "--data" } }, "hydra predict")
    err.wrap(nil, core.threads_init, 0)
    local p
    if err.wrap("hydra predict", require("hydra.fuse").is_fused, ckpt) then
      -- a fused Hydra model (hydra fuse): probs = mean of member softmaxes, + /member_probs
      if K > 0 then err.usage("hydra predict: --mc-samples does not apply to a fused model") end
      local fm = err.wrap("hydra predict", require("hydra.fuse").load, ckpt)
      err.wrap("hydra predict", use_precision, fm)
      p = err.wrap("hydra predict", fm.predict, fm, opts.data, opts.split, {
        batch_size = B, subset = opts.subset or 0 })
      p.logits = require("hydra.core").mean_first(p.member_logits)
    else
    local m = err.wrap("hydra predict", model.load, ckpt)
    err.wrap("hydra predict", use_precision, m)
    p = err.wrap("hydra predict", m.predict, m, opts.data, opts.split, {
      batch_size = B, subset = opts.subset or 0, mc_samples = K, seed = seed,
    })
    end
    err.wrap("hydra predict", function()
      local f <close> = h5.create(opts.out)
      f:write("/logits", p.logits)
      f:write("/probs", p.probs)
      f:write("/labels", p.labels)
      if p.member_probs then f:write("/member_probs", p.member_probs) end
      f:set_attr("/", "checkpoint", ckpt)
      f:set_attr("/", "data", opts.data)
      f:set_attr("/", "split", opts.split)
      f:set_attr("/", "mc_samples", K)
      f:set_attr("/", "precision", p.precision)
      f:commit()
    end)
    print(("%d samples of %s:%s -> %s"):format(p.labels:size(1), opts.data, opts.split, opts.out))
  end,
}
