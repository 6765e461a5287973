#!/usr/bin/python3
"""tests/ref/make_ref.py: PyTorch reference fixtures for hydra's transformer (tests/c/test_ref.c).

Run by hand (never by `make test`) with Debian's torch and h5py:
    apt-get install -y python3-torch python3-h5py
    /usr/bin/python3 tests/ref/make_ref.py            # writes tests/ref/{vit_tiny,text_tiny}.h5

The model is DESIGN.md §2 written functionally in torch: pre-LN encoder, timm parameter names
and [out,in] shapes, LayerNorm eps 1e-6, exact-erf GELU, x = [cls; embed] + pos_embed, per-head
gates multiplying each head's output before the output projection, key-padding mask for text.
Parameters are deterministic (torch.Generator seeded with SEED) and rounded to multiples of 2^-12
so that they are exact in float32 and compress well. Everything is computed in float64 from the
float32-rounded parameters and inputs; results are stored as float32 (computed in float64).

Layout of each file:
  /config            attrs: the hydra /config attributes (kind, image_size, ..., n_classes)
  /param/<timm name> float32 parameters          /in/head_gates [L,NH] float32
  /in/images [B,C,H,W] float32 (vit) | /in/ids [B,len] int32 + /in/lengths [B] int32 (text)
  /in/labels [B] int32
  /out/logits [B,K]  /out/loss [1] (mean cross-entropy, no label smoothing)
  /grad/<timm name>  dloss/dparam (float32 rounded to 14 mantissa bits, rel. error <= 3e-5)               /grad/head_gates [L,NH] dloss/dgate
  /adamw/losses [5]  loss before each of 5 torch.optim.AdamW steps on the same batch, with
                     attrs lr, beta1, beta2, eps, weight_decay (no decay on norms, biases,
                     cls_token, pos_embed, tok_embed)
  root attrs: format=1, torch_version, seed, script_sha256, atol (logits), rtol (gradients),
              dtype_compute="float64", dtype_stored="float32"
"""
import hashlib
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
HERE = os.path.dirname(os.path.abspath(__file__))
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
LN_EPS = 1e-6


def param_specs(c):
    """(name, shape, kind) in hydra's table order; kind picks the init and the decay flag."""
    D, DM, K, L = c["d_model"], c["d_mlp"], c["n_classes"], c["depth"]
    if c["kind"] == "vit":
        T = 1 + (c["image_size"] // c["patch"]) ** 2
    else:
        T = 1 + c["max_len"]
    s = [("cls_token", (1, 1, D), "embed"), ("pos_embed", (1, T, D), "embed")]
    if c["kind"] == "vit":
        p = c["patch"]
        s += [("patch_embed.proj.weight", (D, c["channels"], p, p), "weight"),
              ("patch_embed.proj.bias", (D,), "bias")]
    else:
        s += [("tok_embed.weight", (c["vocab_size"], D), "embed")]
    for i in range(L):
        b = "blocks.%d." % i
        s += [(b + "norm1.weight", (D,), "norm"), (b + "norm1.bias", (D,), "bias"),
              (b + "attn.qkv.weight", (3 * D, D), "weight"), (b + "attn.qkv.bias", (3 * D,), "bias"),
              (b + "attn.proj.weight", (D, D), "weight"), (b + "attn.proj.bias", (D,), "bias"),
              (b + "norm2.weight", (D,), "norm"), (b + "norm2.bias", (D,), "bias"),
              (b + "mlp.fc1.weight", (DM, D), "weight"), (b + "mlp.fc1.bias", (DM,), "bias"),
              (b + "mlp.fc2.weight", (D, DM), "weight"), (b + "mlp.fc2.bias", (D,), "bias")]
    s += [("norm.weight", (D,), "norm"), ("norm.bias", (D,), "bias"),
          ("head.weight", (K, D), "weight"), ("head.bias", (K,), "bias")]
    return s


def q12(t):
    """round to multiples of 2^-12 (exact in float32; inputs)"""
    return torch.round(t * 4096.0) / 4096.0


def q8(t):
    """round to multiples of 2^-8 (exact in float32, and small once compressed; parameters)"""
    return torch.round(t * 256.0) / 256.0


def trunc_mantissa(a, keep=14):
    """float32 array rounded to `keep` mantissa bits (relative error <= 2^-(keep+1) ~ 3e-5 for
    14): the low bits are zero, so shuffle+gzip stores gradients in about half the space"""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    drop = 23 - keep
    u = ((u + (1 << (drop - 1))) >> drop) << drop
    return u.astype(np.uint32).view(np.float32)


def make_params(c, gen):
    P = {}
    for name, shape, kind in param_specs(c):
        n = torch.randn(shape, generator=gen, dtype=torch.float64)
        if kind == "weight":
            fan_in = int(np.prod(shape[1:]))
            v = n / math.sqrt(fan_in)
        elif kind == "norm":
            v = 1.0 + 0.1 * n
        elif kind == "bias":
            v = 0.05 * n
        else:
            v = 0.3 * n
        P[name] = q8(v).requires_grad_(True)
    return P


def forward(P, c, inp, gates):
    D, NH = c["d_model"], c["n_heads"]
    HS = D // NH
    if c["kind"] == "vit":
        p = c["patch"]
        e = F.conv2d(inp["images"], P["patch_embed.proj.weight"], P["patch_embed.proj.bias"], stride=p)
        e = e.flatten(2).transpose(1, 2)                      # B, NP, D
        keymask = None
    else:
        e = F.embedding(inp["ids"].long(), P["tok_embed.weight"])
        Lb = inp["ids"].shape[1]
        pos = torch.arange(Lb)[None, :]
        keymask = torch.cat([torch.zeros(e.shape[0], 1, dtype=torch.bool),
                             pos >= inp["lengths"][:, None].long()], dim=1)   # True = masked
    B, N, _ = e.shape
    T = N + 1
    x = torch.cat([P["cls_token"].expand(B, -1, -1), e], dim=1) + P["pos_embed"][:, :T]
    for i in range(c["depth"]):
        b = "blocks.%d." % i
        h = F.layer_norm(x, (D,), P[b + "norm1.weight"], P[b + "norm1.bias"], LN_EPS)
        qkv = F.linear(h, P[b + "attn.qkv.weight"], P[b + "attn.qkv.bias"])
        qkv = qkv.reshape(B, T, 3, NH, HS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = (q @ k.transpose(-2, -1)) * (HS ** -0.5)
        if keymask is not None:
            s = s.masked_fill(keymask[:, None, None, :], float("-inf"))
        a = s.softmax(dim=-1)
        y = (a @ v) * gates[i][None, :, None, None]
        y = y.transpose(1, 2).reshape(B, T, D)
        x = x + F.linear(y, P[b + "attn.proj.weight"], P[b + "attn.proj.bias"])
        h = F.layer_norm(x, (D,), P[b + "norm2.weight"], P[b + "norm2.bias"], LN_EPS)
        h = F.gelu(F.linear(h, P[b + "mlp.fc1.weight"], P[b + "mlp.fc1.bias"]))
        x = x + F.linear(h, P[b + "mlp.fc2.weight"], P[b + "mlp.fc2.bias"])
    z = F.layer_norm(x[:, 0], (D,), P["norm.weight"], P["norm.bias"], LN_EPS)
    return F.linear(z, P["head.weight"], P["head.bias"])


def write(path, c, inp, gen):
    torch.manual_seed(SEED)
    P = make_params(c, gen)
    L, NH = c["depth"], c["n_heads"]
    gates = torch.ones(L, NH, dtype=torch.float64)
    gates[0, 1] = 0.0             # a pruned head
    gates[L - 1, 0] = 0.5
    gates.requires_grad_(True)
    labels = inp["labels"]
    logits = forward(P, c, inp, gates)
    loss = F.cross_entropy(logits, labels.long())
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in P.items()}
    dgates = gates.grad.detach().clone()

    # 5 AdamW steps on the same batch (gates fixed), no decay on norms/biases/embeddings
    P2 = {k: v.detach().clone().requires_grad_(True) for k, v in P.items()}
    kinds = {n: kd for n, _, kd in param_specs(c)}
    decay = [P2[n] for n in P2 if kinds[n] == "weight"]
    nodecay = [P2[n] for n in P2 if kinds[n] != "weight"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    g2 = gates.detach()
    losses = []
    for _ in range(5):
        opt.zero_grad()
        l2 = F.cross_entropy(forward(P2, c, inp, g2), labels.long())
        losses.append(l2.item())
        l2.backward()
        opt.step()

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    def comp(a):   # compress only datasets big enough to gain from it
        return dict(compression="gzip", compression_opts=9, shuffle=True) if a.size > 2048 else {}
    with h5py.File(path + ".tmp", "w") as f:
        f.attrs["format"] = 1
        f.attrs["torch_version"] = str(torch.__version__)
        f.attrs["seed"] = SEED
        f.attrs["script_sha256"] = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
        f.attrs["atol"] = 1e-4
        f.attrs["rtol"] = 1e-3
        f.attrs["dtype_compute"] = "float64"
        f.attrs["dtype_stored"] = "float32"
        g = f.create_group("config")
        for k, v in c.items():
            g.attrs[k] = v
        for k, v in P.items():
            f.create_dataset("param/" + k, data=f32(v), **comp(f32(v)))
        for k, v in grads.items():
            f.create_dataset("grad/" + k, data=trunc_mantissa(f32(v)), **comp(f32(v)))
        f.create_dataset("grad/head_gates", data=f32(dgates))
        f.create_dataset("in/head_gates", data=f32(gates))
        for k, v in inp.items():
            if v.dtype == torch.float64:
                f.create_dataset("in/" + k, data=f32(v), **comp(f32(v)))
            else:
                f.create_dataset("in/" + k, data=v.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(logits))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float32))
        a = f.create_dataset("adamw/losses", data=np.array(losses, dtype=np.float32))
        a.attrs["lr"] = ADAMW["lr"]
        a.attrs["beta1"], a.attrs["beta2"] = ADAMW["betas"]
        a.attrs["eps"] = ADAMW["eps"]
        a.attrs["weight_decay"] = ADAMW["weight_decay"]
    os.replace(path + ".tmp", path)
    print("%s: loss %.6f, adamw losses %s, %d bytes" % (path, loss.item(),
          " ".join("%.5f" % v for v in losses), os.path.getsize(path)))


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    vit = dict(kind="vit", image_size=28, channels=1, patch=7, vocab_size=0, max_len=0,
               d_model=64, n_heads=8, depth=4, d_mlp=256, n_classes=10)
    B = 4
    images = q12(torch.randn(B, 1, 28, 28, generator=gen))
    labels = torch.tensor([3, 0, 9, 3], dtype=torch.int32)
    write(os.path.join(HERE, "vit_tiny.h5"), vit, {"images": images, "labels": labels}, gen)

    text = dict(kind="text", image_size=0, channels=0, patch=0, vocab_size=50, max_len=12,
                d_model=32, n_heads=4, depth=2, d_mlp=64, n_classes=3)
    lengths = torch.tensor([10, 7, 3, 1], dtype=torch.int32)
    ids = torch.randint(3, 50, (B, 10), generator=gen, dtype=torch.int64).to(torch.int32)
    ids[torch.arange(10)[None, :] >= lengths[:, None]] = 0          # PAD
    labels = torch.tensor([2, 0, 1, 1], dtype=torch.int32)
    write(os.path.join(HERE, "text_tiny.h5"), text,
          {"ids": ids, "lengths": lengths, "labels": labels}, gen)


if __name__ == "__main__":
    sys.exit(main())
