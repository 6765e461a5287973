#!/usr/bin/python3
"""tests/ref/bench_torch.py: the PyTorch side of `make bench` (experiments/bench.lua).

Run by experiments/bench.lua (and bench_real.lua) once per round, only when Debian's
python3-torch is installed (never by `make test`):
    OMP_WAIT_POLICY=passive /usr/bin/python3 tests/ref/bench_torch.py SPEC.json
SPEC.json is written by bench.lua: the thread count, the seed and `models`, name -> section:
hydra's model section (vit-fm, text-sst with its resolved vocab_size, ViT-S/16, BERT-base),
hydra's parameter count, the optimiser settings, the batch sizes and step counts, for text
models the exact token lengths hydra runs (SST-2: training batches of 128 from the train split,
the dev split in file order for inference and batch-1 latency), and optionally `figures` (a
subset of train, infer, latency), `paths` (eager, fast, jit; default eager) and
`latency_warmup`. Prints one JSON object on stdout: flat keys "<name>.<figure>" (eager),
"<name>.<path>.<figure>" and "<name>.<path>.check_rel_err" for the other paths, and
"peak_rss_mb" (the process's VmHWM).

The models are DESIGN.md §2 as tests/ref/make_ref.py writes them (the fixtures hydra is checked
against), here as float32 nn.Modules: pre-LN encoder, LayerNorm eps 1e-6 (HY_XFMR_LN_EPS),
exact-erf GELU, x = [cls; embed] + pos_embed[:, :T], qkv Linear + per-head softmax(q k^T /
sqrt(HS)) v + proj, logits = head(LN_f(x[:, 0])); vit: Conv2d patch embedding (patch p, CLS
first); text: token embedding, key-padding mask (keys at positions >= length masked, CLS
never), each batch padded to its longest sequence (as hydra's loader cuts it). The options of
xfmr.h that BERT-base uses: norm post, text_embed bert (ids hold [CLS]: embed_norm(tok + pos +
type_embed[0]), no cls_token, no mask when nothing is padded), pooler tanh, ln_eps. No dropout
(the bench's models have model.dropout 0). The parameter counts must equal hydra's (checked:
exit 1 otherwise).

Figures, each measured after a warm-up: training samples/s (eager: forward, cross-entropy,
backward, clip_grad_norm_ to grad_clip, AdamW with weight decay on the weight matrices only, as
hydra), inference samples/s (eval mode, inference_mode, logits + softmax, batches of
infer_batch) and batch-1 latency in ms (mean over latency_n single-sample calls), the last two
for each path: eager, fast (FastEncoder: nn.TransformerEncoderLayer's fused fast path, checked
to run in every layer) and jit (torch.jit.trace + freeze + optimize_for_inference), each first
checked equal to eager on the logits (CHECK_TOL). Inputs are built before the clock starts
(hydra's figures include its loader's batch assembly: this favours PyTorch).
"""
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch starts its OpenMP pool

import torch                                           # noqa: E402
import torch.nn as nn                                  # noqa: E402
import torch.nn.functional as F                        # noqa: E402

LN_EPS = 1e-6   # core/nn/xfmr.h HY_XFMR_LN_EPS


class Block(nn.Module):
    def __init__(self, D, NH, DM, eps, post):
        super().__init__()
        self.NH, self.HS, self.post = NH, D // NH, post
        self.norm1 = nn.LayerNorm(D, eps=eps)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.norm2 = nn.LayerNorm(D, eps=eps)
        self.fc1 = nn.Linear(D, DM)
        self.fc2 = nn.Linear(DM, D)

    def attn(self, x, keymask):
        B, T, D = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.NH, self.HS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        s = (q @ k.transpose(-2, -1)) * (self.HS ** -0.5)
        if keymask is not None:
            s = s.masked_fill(keymask[:, None, None, :], float("-inf"))
        y = (s.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        return self.proj(y)

    def forward(self, x, keymask):
        if self.post:   # norm post (BERT)
            x = self.norm1(x + self.attn(x, keymask))
            return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))
        x = x + self.attn(self.norm1(x), keymask)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        D = c["d_model"]
        self.kind = c["kind"]
        self.bert = c.get("text_embed", "hydra") == "bert"
        self.post = c.get("norm", "pre") == "post"
        self.eps = float(c.get("ln_eps", LN_EPS))
        if self.kind == "vit":
            T = 1 + (c["image_size"] // c["patch"]) ** 2
            self.patch_embed = nn.Conv2d(c["channels"], D, c["patch"], stride=c["patch"])
        else:
            T = c["max_len"] + (0 if self.bert else 1)
            self.tok_embed = nn.Embedding(c["vocab_size"], D)
        if self.bert:   # ids hold [CLS] already: embed_norm(tok + pos + type_embed[0])
            self.type_embed = nn.Parameter(0.02 * torch.randn(c["type_vocab"], D))
            self.embed_norm = nn.LayerNorm(D, eps=self.eps)
        else:
            self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, D))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, T, D))
        self.blocks = nn.ModuleList(Block(D, c["n_heads"], c["d_mlp"], self.eps, self.post)
                                    for _ in range(c["depth"]))
        if not self.post:
            self.norm = nn.LayerNorm(D, eps=self.eps)
        if c.get("pooler", "none") == "tanh":
            self.pooler = nn.Linear(D, D)
        self.head = nn.Linear(D, c["n_classes"])

    def embed(self, inp):
        if self.bert:
            e = self.tok_embed(inp)
            return self.embed_norm(e + self.pos_embed[:, :e.shape[1]] + self.type_embed[0])
        if self.kind == "vit":
            e = self.patch_embed(inp).flatten(2).transpose(1, 2)
        else:
            e = self.tok_embed(inp)
        B, N, _ = e.shape
        return torch.cat([self.cls_token.expand(B, -1, -1), e], dim=1) + self.pos_embed[:, :N + 1]

    def logits(self, x):
        x = x[:, 0] if self.post else self.norm(x[:, 0])
        if hasattr(self, "pooler"):
            x = torch.tanh(self.pooler(x))
        return self.head(x)

    def forward(self, inp, keymask=None):
        x = self.embed(inp)
        for blk in self.blocks:
            x = blk(x, keymask)
        return self.logits(x)


class FastEncoder(nn.Module):
    """The same model with each block an nn.TransformerEncoderLayer (batch_first, exact GELU,
    norm_first = pre-LN, no dropout) holding the block's weights: in eval mode without autograd
    its forward is PyTorch's fused fast path (torch._transformer_encoder_layer_fwd)."""

    def __init__(self, enc, c):
        super().__init__()
        self.enc = enc
        D = c["d_model"]
        self.layers = nn.ModuleList()
        for b in enc.blocks:
            lay = nn.TransformerEncoderLayer(D, c["n_heads"], c["d_mlp"], dropout=0.0,
                                             activation="gelu", layer_norm_eps=enc.eps,
                                             batch_first=True, norm_first=not enc.post)
            with torch.no_grad():
                lay.self_attn.in_proj_weight.copy_(b.qkv.weight)   # q | k | v rows, heads
                lay.self_attn.in_proj_bias.copy_(b.qkv.bias)       # consecutive: the same layout
                lay.self_attn.out_proj.weight.copy_(b.proj.weight)
                lay.self_attn.out_proj.bias.copy_(b.proj.bias)
                for dst, src in ((lay.linear1, b.fc1), (lay.linear2, b.fc2),
                                 (lay.norm1, b.norm1), (lay.norm2, b.norm2)):
                    dst.weight.copy_(src.weight)
                    dst.bias.copy_(src.bias)
            self.layers.append(lay)

    def forward(self, inp, keymask=None):
        x = self.enc.embed(inp)
        for lay in self.layers:
            x = lay(x, src_key_padding_mask=keymask)
        return self.enc.logits(x)


def optimizer(model, o):
    """AdamW; decay on weight matrices / kernels only (hydra: no decay on norms, biases,
    cls_token, pos_embed, tok_embed, type_embed)"""
    decay, nodecay = [], []
    for name, p in model.named_parameters():
        embed = name in ("cls_token", "pos_embed", "type_embed") or name.startswith("tok_embed")
        (decay if p.ndim >= 2 and not embed else nodecay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": nodecay, "weight_decay": 0.0}],
                             lr=o["learning_rate"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])


def text_batch(lengths, vocab, gen, cls):
    """ids [B, max(lengths)] random words in [3, vocab) with PAD (0) after each length, and the
    key-padding mask (True = masked): [B, 1 + max] with the CLS slot the model prepends (never
    masked) when cls, else [B, max]; None when no position is masked and not cls (BERT at full
    length: no mask, as hydra's kernels skip an all-false one)"""
    L = max(lengths)
    lens = torch.tensor(lengths, dtype=torch.int64)
    ids = torch.randint(3, vocab, (len(lengths), L), generator=gen)
    pad = torch.arange(L)[None, :] >= lens[:, None]
    ids[pad] = 0
    if not cls:
        return ids, (pad if bool(pad.any()) else None)
    return ids, torch.cat([torch.zeros(len(lengths), 1, dtype=torch.bool), pad], dim=1)


def call(model, x, m):
    """model(x, m); a traced model takes the arguments it was traced with (no mask: x alone)"""
    return model(x) if m is None else model(x, m)


def train_rate(model, opt, batches, warmup, clip):
    """samples/s of the optimisation steps over batches [(input, mask, labels)], after warmup
    steps on the first batches"""
    model.train()
    params = [p for p in model.parameters()]

    def step(x, m, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x, m), y)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()

    for i in range(warmup):
        step(*batches[i % len(batches)])
    n = sum(int(b[2].shape[0]) for b in batches)
    t0 = time.perf_counter()
    for b in batches:
        step(*b)
    return n / (time.perf_counter() - t0)


def infer_rate(model, batches):
    """samples/s of logits + softmax over batches [(input, mask)] (one warm-up pass first)"""
    with torch.inference_mode():
        for x, m in batches:
            call(model, x, m).softmax(dim=-1)
        n = sum(int(b[0].shape[0]) for b in batches)
        t0 = time.perf_counter()
        for x, m in batches:
            call(model, x, m).softmax(dim=-1)
        return n / (time.perf_counter() - t0)


def latency_ms(model, samples, warmup):
    """mean ms of one batch-1 call (logits + softmax) over samples [(input, mask)]"""
    with torch.inference_mode():
        for i in range(warmup):
            x, m = samples[i % len(samples)]
            call(model, x, m).softmax(dim=-1)
        t0 = time.perf_counter()
        for x, m in samples:
            call(model, x, m).softmax(dim=-1)
        return (time.perf_counter() - t0) / len(samples) * 1e3


def params_count(model):
    return sum(p.numel() for p in model.parameters())


def check_params(name, model, want):
    got = params_count(model)
    if got != want:
        sys.exit("bench_torch: %s has %d parameters, hydra's has %d (the architectures differ)"
                 % (name, got, want))
    return got


# the inference paths: eager (the nn.Module above), fast (FastEncoder: the
# TransformerEncoderLayer fast path), jit (torch.jit.trace, freeze, optimize_for_inference)
PATHS = ("eager", "fast", "jit")
CHECK_TOL = 1e-5   # max |path - eager| <= CHECK_TOL * max(1, max |eager|) on the logits


def inference_model(name, path, model, c, checks, out):
    """the model of path (model in eval mode), its logits checked against eager's on checks
    [(input, mask, eager's logits)]; the fast path is also checked to be taken in every layer
    (frozen TorchScript is traced on the first check input: the others, of other batch sizes
    and lengths, check that the trace does not depend on its shapes)"""
    if path == "eager":
        return model
    fast_calls = [0]
    if path == "fast":
        imodel = FastEncoder(model, c).eval()
        orig = torch._transformer_encoder_layer_fwd

        def counting(*a, **k):
            fast_calls[0] += 1
            return orig(*a, **k)
        torch._transformer_encoder_layer_fwd = counting
    else:
        x, m, _ = checks[0]
        with torch.no_grad():
            traced = torch.jit.trace(model, (x,) if m is None else (x, m), check_trace=False)
        imodel = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    err = 0.0
    try:
        with torch.inference_mode():
            for x, m, a in checks:
                b = call(imodel, x, m)
                e = float((a - b).abs().max()) / max(1.0, float(a.abs().max()))
                err = max(err, e)
    finally:
        if path == "fast":
            torch._transformer_encoder_layer_fwd = orig
    if path == "fast" and fast_calls[0] != len(checks) * c["depth"]:
        sys.exit("bench_torch: %s: the TransformerEncoderLayer fast path ran %d of %d layers"
                 % (name, fast_calls[0], len(checks) * c["depth"]))
    if not err <= CHECK_TOL:
        sys.exit("bench_torch: %s: the %s path's logits differ from eager's by %.3g (relative; "
                 "more than %g)" % (name, path, err, CHECK_TOL))
    out["%s.%s.check_rel_err" % (name, path)] = err
    return imodel


def model_inputs(c, s, gen, figures):
    """(train batches [(input, mask, labels)], inference batches [(input, mask)], latency samples
    [(input, mask)]) of section s: random images, or random words at the spec's exact lengths;
    only those the figures need (the others empty)"""
    K = c["n_classes"]
    train, infer, lat = [], [], []
    want_i = "infer" in figures or "latency" in figures   # the checks read both
    if c["kind"] == "vit":
        hw, ch = c["image_size"], c["channels"]
        if "train" in figures:
            B = s["train_batch"]
            train = [(torch.randn(B, ch, hw, hw, generator=gen), None,
                      torch.randint(0, K, (B,), generator=gen)) for _ in range(s["train_steps"])]
        if want_i:
            n, Bi = s["infer_n"], s["infer_batch"]
            images = torch.randn(n, ch, hw, hw, generator=gen)
            infer = [(images[i:i + Bi], None) for i in range(0, n, Bi)]
            lat = [(images[i % n:i % n + 1], None) for i in range(s["latency_n"])]
        return train, infer, lat
    V, cls = c["vocab_size"], c.get("text_embed", "hydra") != "bert"
    if "train" in figures:
        for lens in s["train_batches"]:
            ids, mask = text_batch(lens, V, gen, cls)
            train.append((ids, mask, torch.randint(0, K, (len(lens),), generator=gen)))
    if want_i:
        lens, Bi = s["infer_lengths"], s["infer_batch"]
        infer = [text_batch(lens[i:i + Bi], V, gen, cls) for i in range(0, len(lens), Bi)]
        lat = [text_batch([n], V, gen, cls) for n in s["latency_lengths"]]
    return train, infer, lat


def bench_model(name, s, gen, out):
    """the figures of one model section: training (eager), then inference samples/s and batch-1
    latency for each of its paths"""
    c = s["model"]
    model = Encoder(c)
    out[name + ".params"] = check_params(name, model, s["params"])
    figures = s.get("figures", ["train", "infer", "latency"])
    train, infer, lat = model_inputs(c, s, gen, figures)
    if "train" in figures:
        opt = optimizer(model, s["optim"])
        out[name + ".train_samples_per_s"] = train_rate(model, opt, train, s["warmup_steps"],
                                                        s["optim"]["grad_clip"])
        del opt
    if "infer" not in figures and "latency" not in figures:
        return
    model.eval()
    # the check inputs: the first two samples of the first and last inference batch (their
    # lengths), the first and last latency sample, with eager's logits
    checks = []
    for x, m in (infer[0], infer[-1]):
        checks.append((x[:2], None if m is None else m[:2]))
    checks += [lat[0], lat[-1]]
    with torch.inference_mode():
        checks = [(x, m, model(x, m)) for x, m in checks]
    for path in s.get("paths", ["eager"]):
        if path not in PATHS:
            sys.exit("bench_torch: %s: unknown path '%s' (expected one of %s)"
                     % (name, path, ", ".join(PATHS)))
        imodel = inference_model(name, path, model, c, checks, out)
        key = name if path == "eager" else name + "." + path
        if "infer" in figures:
            out[key + ".infer_samples_per_s"] = infer_rate(imodel, infer)
        if "latency" in figures:
            out[key + ".latency_ms"] = latency_ms(imodel, lat, s.get("latency_warmup", 20))


def peak_rss_mb():
    """the process's peak resident set (VmHWM of /proc/self/status), MiB"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: bench_torch.py SPEC.json")
    with open(argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec["threads"]))
    torch.manual_seed(int(spec.get("seed", 1)))
    gen = torch.Generator().manual_seed(int(spec.get("seed", 1)))
    out = {"torch_version": str(torch.__version__), "threads": torch.get_num_threads(),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    for name in sorted(spec["models"]):
        bench_model(name, spec["models"][name], gen, out)
    out["peak_rss_mb"] = peak_rss_mb()
    for k, v in out.items():
        if isinstance(v, float) and not math.isfinite(v):
            sys.exit("bench_torch: %s is not finite" % k)
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
