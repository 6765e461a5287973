#!/usr/bin/python3
"""tests/ref/make_mlm_ref.py: PyTorch reference fixture for hydra's masked-language-model head
and loss (core/nn/mlm.h; checked by tests/c/test_mlm.c).

Run by hand (never by `make test`) with Debian's torch and h5py:
    /usr/bin/python3 tests/ref/make_mlm_ref.py        # writes tests/ref/mlm_tiny.h5

The encoder is make_ref.py's (DESIGN.md §2, functional torch, float64); the head is BERT's
prediction head on the pre-LN encoder's last residual stream x_L at the predicted positions t
(row 1 + t, CLS excluded):
    a = LN_f(x_L[t]) (norm.weight/.bias)     u = LN_m(GELU(a Wd^T + bd))
    z = u E^T + b   (decoder tied to tok_embed.weight E)     loss = mean CE(z, target)
Inputs are the already-masked ids ([MASK] = 3), targets -1 where nothing is predicted.

Layout:
  /config            the hydra /config attributes
  /param/<name>      float32: the encoder's timm names and mlm.transform.dense.weight [D,D],
                     mlm.transform.dense.bias [D], mlm.transform.norm.weight [D],
                     mlm.transform.norm.bias [D], mlm.bias [V]
  /in/ids [B,len] int32, /in/lengths [B] int32, /in/targets [B,len] int32
  /out/logits [N,V]  the predicted positions' logits, row-major order of (b, t)
  /out/loss [1]      float64
  /grad/<name>       dloss/dparam (float32 rounded to 14 mantissa bits); no head.* (untouched)
  root attrs: format=1, torch_version, seed, script_sha256, atol (logits), rtol (gradients)
"""
import hashlib
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ref import LN_EPS, make_params, q8, trunc_mantissa  # noqa: E402

SEED = 4321
HERE = os.path.dirname(os.path.abspath(__file__))
MASK = 3


def encode(P, c, ids, lengths):
    """x_L [B, T, D] of the text encoder (make_ref.forward without the classifier)"""
    D, NH = c["d_model"], c["n_heads"]
    HS = D // NH
    e = F.embedding(ids.long(), P["tok_embed.weight"])
    Lb = ids.shape[1]
    pos = torch.arange(Lb)[None, :]
    keymask = torch.cat([torch.zeros(e.shape[0], 1, dtype=torch.bool),
                         pos >= lengths[:, None].long()], dim=1)
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
        s = s.masked_fill(keymask[:, None, None, :], float("-inf"))
        y = (s.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + F.linear(y, P[b + "attn.proj.weight"], P[b + "attn.proj.bias"])
        h = F.layer_norm(x, (D,), P[b + "norm2.weight"], P[b + "norm2.bias"], LN_EPS)
        h = F.gelu(F.linear(h, P[b + "mlp.fc1.weight"], P[b + "mlp.fc1.bias"]))
        x = x + F.linear(h, P[b + "mlp.fc2.weight"], P[b + "mlp.fc2.bias"])
    return x


def mlm(P, c, x, targets):
    D = c["d_model"]
    sel = targets >= 0
    rows = x[:, 1:][sel]                                   # (N, D) in (b, t) order
    a = F.layer_norm(rows, (D,), P["norm.weight"], P["norm.bias"], LN_EPS)
    g = F.gelu(F.linear(a, P["mlm.transform.dense.weight"], P["mlm.transform.dense.bias"]))
    u = F.layer_norm(g, (D,), P["mlm.transform.norm.weight"], P["mlm.transform.norm.bias"],
                     LN_EPS)
    z = F.linear(u, P["tok_embed.weight"], P["mlm.bias"])
    return z, F.cross_entropy(z, targets[sel].long())


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    c = dict(kind="text", image_size=0, channels=0, patch=0, vocab_size=40, max_len=12,
             d_model=32, n_heads=4, depth=2, d_mlp=64, n_classes=2)
    D, V = c["d_model"], c["vocab_size"]
    P = make_params(c, gen)
    extra = {"mlm.transform.dense.weight": torch.randn(D, D, generator=gen) / D ** 0.5,
             "mlm.transform.dense.bias": 0.05 * torch.randn(D, generator=gen),
             "mlm.transform.norm.weight": 1.0 + 0.1 * torch.randn(D, generator=gen),
             "mlm.transform.norm.bias": 0.05 * torch.randn(D, generator=gen),
             "mlm.bias": 0.05 * torch.randn(V, generator=gen)}
    for k, v in extra.items():
        P[k] = q8(v).requires_grad_(True)
    B, Lb = 4, 10
    lengths = torch.tensor([10, 7, 3, 1], dtype=torch.int32)
    raw = torch.randint(4, V, (B, Lb), generator=gen, dtype=torch.int64).to(torch.int32)
    valid = torch.arange(Lb)[None, :] < lengths[:, None]
    raw[~valid] = 0
    chosen = (torch.rand(B, Lb, generator=gen) < 0.5) & valid
    chosen[3, 0] = True                                    # every row predicts something
    targets = torch.where(chosen, raw, torch.full_like(raw, -1))
    ids = raw.clone()
    r = torch.rand(B, Lb, generator=gen)
    ids[chosen & (r < 0.8)] = MASK
    rnd = chosen & (r >= 0.8) & (r < 0.9)
    ids[rnd] = torch.randint(4, V, (int(rnd.sum()),), generator=gen, dtype=torch.int64).to(
        torch.int32)
    x = encode(P, c, ids, lengths)
    z, loss = mlm(P, c, x, targets)
    loss.backward()

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    def comp(a):   # compress only datasets big enough to gain from it
        return dict(compression="gzip", compression_opts=9, shuffle=True) if a.size > 2048 else {}
    path = os.path.join(HERE, "mlm_tiny.h5")
    with h5py.File(path + ".tmp", "w") as f:
        f.attrs["format"] = 1
        f.attrs["torch_version"] = str(torch.__version__)
        f.attrs["seed"] = SEED
        f.attrs["script_sha256"] = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
        f.attrs["atol"] = 1e-4
        f.attrs["rtol"] = 1e-3
        g = f.create_group("config")
        for k, v in c.items():
            g.attrs[k] = v
        for k, v in P.items():
            f.create_dataset("param/" + k, data=f32(v), **comp(f32(v)))
            if not k.startswith("head."):
                gr = trunc_mantissa(f32(v.grad))
                f.create_dataset("grad/" + k, data=gr, **comp(gr))
        f.create_dataset("in/ids", data=ids.numpy().astype(np.int32))
        f.create_dataset("in/lengths", data=lengths.numpy().astype(np.int32))
        f.create_dataset("in/targets", data=targets.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(z), **comp(f32(z)))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float64))
    os.replace(path + ".tmp", path)
    print("%s: %d predicted positions, loss %.6f, %d bytes" % (path, z.shape[0], loss.item(),
          os.path.getsize(path)))


if __name__ == "__main__":
    sys.exit(main())
