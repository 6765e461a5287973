#!/usr/bin/python3
"""tests/ref/bench_torch.py: the PyTorch side of `make bench` (experiments/bench.lua).

Run by experiments/bench.lua once per round, only when Debian's python3-torch is installed
(never by `make test`):
    OMP_WAIT_POLICY=passive /usr/bin/python3 tests/ref/bench_torch.py SPEC.json
SPEC.json is written by bench.lua: the thread count, hydra's model sections (vit-fm and
text-sst with its resolved vocab_size), hydra's parameter counts, the optimiser settings, the
batch sizes and step counts, and for the text model the exact SST-2 token lengths hydra runs
(training batches of 128 from the train split; the dev split in file order for inference and
batch-1 latency). Prints one JSON object (flat keys "vit.<figure>", "text.<figure>") on stdout.

The models are DESIGN.md §2 as tests/ref/make_ref.py writes them (the fixtures hydra is checked
against), here as float32 nn.Modules: pre-LN encoder, LayerNorm eps 1e-6 (HY_XFMR_LN_EPS),
exact-erf GELU, x = [cls; embed] + pos_embed[:, :T], qkv Linear + per-head softmax(q k^T /
sqrt(HS)) v + proj, logits = head(LN_f(x[:, 0])); vit: Conv2d patch embedding (patch 7, 16
patches + CLS); text: token embedding, key-padding mask (keys at positions >= length masked,
CLS never), each batch padded to its longest sequence (as hydra's loader cuts it). No dropout
(vit-fm and text-sst have model.dropout 0). The parameter counts must equal hydra's (checked:
exit 1 otherwise).

Figures, each measured after a warm-up: training samples/s (forward, cross-entropy, backward,
clip_grad_norm_ to grad_clip, AdamW with weight decay on the weight matrices only, as hydra),
inference samples/s (eval mode, inference_mode, logits + softmax, batches of infer_batch) and
batch-1 latency in ms (mean over latency_n single-sample calls). Inputs are built before the
clock starts (hydra's figures include its loader's batch assembly: this favours PyTorch).
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
    def __init__(self, D, NH, DM):
        super().__init__()
        self.NH, self.HS = NH, D // NH
        self.norm1 = nn.LayerNorm(D, eps=LN_EPS)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.norm2 = nn.LayerNorm(D, eps=LN_EPS)
        self.fc1 = nn.Linear(D, DM)
        self.fc2 = nn.Linear(DM, D)

    def forward(self, x, keymask):
        B, T, D = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, T, 3, self.NH, self.HS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        s = (q @ k.transpose(-2, -1)) * (self.HS ** -0.5)
        if keymask is not None:
            s = s.masked_fill(keymask[:, None, None, :], float("-inf"))
        y = (s.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        D = c["d_model"]
        self.kind = c["kind"]
        if self.kind == "vit":
            T = 1 + (c["image_size"] // c["patch"]) ** 2
            self.patch_embed = nn.Conv2d(c["channels"], D, c["patch"], stride=c["patch"])
        else:
            T = 1 + c["max_len"]
            self.tok_embed = nn.Embedding(c["vocab_size"], D)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, D))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, T, D))
        self.blocks = nn.ModuleList(Block(D, c["n_heads"], c["d_mlp"]) for _ in range(c["depth"]))
        self.norm = nn.LayerNorm(D, eps=LN_EPS)
        self.head = nn.Linear(D, c["n_classes"])

    def forward(self, inp, keymask=None):
        if self.kind == "vit":
            e = self.patch_embed(inp).flatten(2).transpose(1, 2)
        else:
            e = self.tok_embed(inp)
        B, N, _ = e.shape
        x = torch.cat([self.cls_token.expand(B, -1, -1), e], dim=1) + self.pos_embed[:, :N + 1]
        for blk in self.blocks:
            x = blk(x, keymask)
        return self.head(self.norm(x[:, 0]))


def optimizer(model, o):
    """AdamW; decay on weight matrices / kernels only (hydra: no decay on norms, biases,
    cls_token, pos_embed, tok_embed)"""
    decay, nodecay = [], []
    for name, p in model.named_parameters():
        embed = name in ("cls_token", "pos_embed") or name.startswith("tok_embed")
        (decay if p.ndim >= 2 and not embed else nodecay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": nodecay, "weight_decay": 0.0}],
                             lr=o["learning_rate"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])


def text_batch(lengths, vocab, gen):
    """ids [B, max(lengths)] random words in [3, vocab) with PAD (0) after each length, and the
    key-padding mask [B, 1 + max] (True = masked; the CLS slot never is)"""
    L = max(lengths)
    lens = torch.tensor(lengths, dtype=torch.int64)
    ids = torch.randint(3, vocab, (len(lengths), L), generator=gen)
    pad = torch.arange(L)[None, :] >= lens[:, None]
    ids[pad] = 0
    mask = torch.cat([torch.zeros(len(lengths), 1, dtype=torch.bool), pad], dim=1)
    return ids, mask


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
    model.eval()
    with torch.inference_mode():
        for x, m in batches:
            model(x, m).softmax(dim=-1)
        n = sum(int(b[0].shape[0]) for b in batches)
        t0 = time.perf_counter()
        for x, m in batches:
            model(x, m).softmax(dim=-1)
        return n / (time.perf_counter() - t0)


def latency_ms(model, samples, warmup=20):
    """mean ms of one batch-1 call (logits + softmax) over samples [(input, mask)]"""
    model.eval()
    with torch.inference_mode():
        for i in range(warmup):
            x, m = samples[i % len(samples)]
            model(x, m).softmax(dim=-1)
        t0 = time.perf_counter()
        for x, m in samples:
            model(x, m).softmax(dim=-1)
        return (time.perf_counter() - t0) / len(samples) * 1e3


def params_count(model):
    return sum(p.numel() for p in model.parameters())


def check_params(name, model, want):
    got = params_count(model)
    if got != want:
        sys.exit("bench_torch: %s has %d parameters, hydra's has %d (the architectures differ)"
                 % (name, got, want))
    return got


def bench_vit(s, gen, out):
    c = s["model"]
    model = Encoder(c)
    out["vit.params"] = check_params("vit", model, s["params"])
    opt = optimizer(model, s["optim"])
    hw, ch, K = c["image_size"], c["channels"], c["n_classes"]
    B, steps = s["train_batch"], s["train_steps"]
    train = [(torch.randn(B, ch, hw, hw, generator=gen), None,
              torch.randint(0, K, (B,), generator=gen)) for _ in range(steps)]
    out["vit.train_samples_per_s"] = train_rate(model, opt, train, s["warmup_steps"],
                                                s["optim"]["grad_clip"])
    n, Bi = s["infer_n"], s["infer_batch"]
    images = torch.randn(n, ch, hw, hw, generator=gen)
    out["vit.infer_samples_per_s"] = infer_rate(
        model, [(images[i:i + Bi], None) for i in range(0, n, Bi)])
    out["vit.latency_ms"] = latency_ms(
        model, [(images[i:i + 1], None) for i in range(s["latency_n"])])


def bench_text(s, gen, out):
    c = s["model"]
    model = Encoder(c)
    out["text.params"] = check_params("text", model, s["params"])
    opt = optimizer(model, s["optim"])
    V, K = c["vocab_size"], c["n_classes"]
    train = []
    for lens in s["train_batches"]:
        ids, mask = text_batch(lens, V, gen)
        train.append((ids, mask, torch.randint(0, K, (len(lens),), generator=gen)))
    out["text.train_samples_per_s"] = train_rate(model, opt, train, s["warmup_steps"],
                                                 s["optim"]["grad_clip"])
    lens, Bi = s["infer_lengths"], s["infer_batch"]
    out["text.infer_samples_per_s"] = infer_rate(
        model, [text_batch(lens[i:i + Bi], V, gen) for i in range(0, len(lens), Bi)])
    out["text.latency_ms"] = latency_ms(
        model, [text_batch([n], V, gen) for n in s["latency_lengths"]])


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
    if "vit" in spec:
        bench_vit(spec["vit"], gen, out)
    if "text" in spec:
        bench_text(spec["text"], gen, out)
    for k, v in out.items():
        if isinstance(v, float) and not math.isfinite(v):
            sys.exit("bench_torch: %s is not finite" % k)
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
