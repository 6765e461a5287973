#!/usr/bin/python3
"""tests/ref/ens_torch.py: PyTorch reference fixtures for hydra's ensemble models (core/hydra/ens.h),
checked by tests/c/test_ens.c.

Run by hand (never by `make test`) with Debian's torch and h5py:
    /usr/bin/python3 tests/ref/ens_torch.py     # writes tests/ref/{be_tiny,lora_tiny}.h5

The backbone is make_ref.py's model (DESIGN.md §2, imported from it); the members' rows are
stacked member-major along the batch ((m b) order: row m*B + b is member m's copy of sample b),
every member starting from the shared embedding:
  batch_ensemble: every linear (qkv, proj, fc1, fc2, head) is y = ((x o s_m) W^T) o r_m + b + b_m
  lora_ensemble:  y = x W^T + b + (alpha / rank) (x A_m^T) B_m^T on each targeted part (q, k, v
                  rows of qkv, proj, fc1, fc2); member heads head.members.weight [M,K,D] and
                  .bias [M,K]; the backbone is frozen (no gradient is stored for it: hydra's must
                  be exactly 0)
Loss: the mean over members of each member's mean cross-entropy on the same labels.
Parameters are random (not the init: lora_b must be non-zero to test every gradient) and rounded
to multiples of 2^-8; everything is computed in float64.

Layout: as make_ref.py's files (/config, /param, /in, /out/logits [M*B,K], /out/loss, /grad for
the trained tensors only), plus /ensemble with the checkpoint's attributes (method, members,
rank, alpha, targets) and root attrs format=1, torch_version, seed, script_sha256, atol, rtol.
"""
import hashlib
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_ref  # noqa: E402  (the backbone's parameter specs and rounding)

SEED = 4321
LN_EPS = make_ref.LN_EPS
M = 3
SITES = [("attn.qkv", "qkv"), ("attn.proj", "proj"), ("mlp.fc1", "fc1"), ("mlp.fc2", "fc2")]


def site_dims(c, site):
    D, DM = c["d_model"], c["d_mlp"]
    return {"qkv": (D, 3 * D), "proj": (D, D), "fc1": (D, DM), "fc2": (DM, D)}[site]


def lora_parts(site, targets, D, out):
    """(part name, column offset, width) of the targeted parts of a site"""
    if site == "qkv":
        return [("attn." + p, i * D, D) for i, p in enumerate("qkv") if p in targets]
    on = {"proj": "o" in targets, "fc1": "mlp" in targets, "fc2": "mlp" in targets}[site]
    name = {"proj": "attn.proj", "fc1": "mlp.fc1", "fc2": "mlp.fc2"}[site]
    return [(name, 0, out)] if on else []


def ens_specs(c, e):
    """(name, shape, init kind) of the members' tensors in hydra's table order (ens.h)"""
    D, K, L = c["d_model"], c["n_classes"], c["depth"]
    s = []
    for l in range(L):
        for full, site in SITES:
            din, dout = site_dims(c, site)
            pre = "blocks.%d.%s" % (l, full)
            if e["method"] == "batch_ensemble":
                s += [(pre + ".be_s", (M, din), "scale"), (pre + ".be_r", (M, dout), "scale"),
                      (pre + ".be_bias", (M, dout), "bias")]
            else:
                for part, _, width in lora_parts(site, e["targets"], D, dout):
                    pp = "blocks.%d.%s" % (l, part)
                    s += [(pp + ".lora_a", (M, e["rank"], din), "lora_a"),
                          (pp + ".lora_b", (M, width, e["rank"]), "lora_b")]
    if e["method"] == "batch_ensemble":
        s += [("head.be_s", (M, D), "scale"), ("head.be_r", (M, K), "scale"),
              ("head.be_bias", (M, K), "bias")]
    else:
        s += [("head.members.weight", (M, K, D), "head"), ("head.members.bias", (M, K), "bias")]
    return s


def make_ens_params(c, e, gen):
    P = {}
    for name, shape, kind in ens_specs(c, e):
        n = torch.randn(shape, generator=gen, dtype=torch.float64)
        if kind == "scale":
            v = 1.0 + 0.3 * n
        elif kind == "bias":
            v = 0.05 * n
        elif kind == "lora_a":
            v = n / math.sqrt(shape[2])
        elif kind == "lora_b":
            v = 0.5 * n / math.sqrt(shape[2])
        else:
            v = n / math.sqrt(shape[2])
        P[name] = make_ref.q8(v).requires_grad_(True)
    return P


def member_linear(P, E, c, e, l, full, site, x, res=None):
    """x [M*B, ..., in] -> [M*B, ..., out] for block l's site"""
    W, b = P["blocks.%d.%s.weight" % (l, full)], P["blocks.%d.%s.bias" % (l, full)]
    return apply_linear(E, e, "blocks.%d.%s" % (l, full), W, b, x, site, c)


def apply_linear(E, e, pre, W, b, x, site, c):
    shp = x.shape
    xm = x.reshape(M, -1, shp[-1])                                   # M, rows, in
    if e["method"] == "batch_ensemble":
        s, r, bm = E[pre + ".be_s"], E[pre + ".be_r"], E[pre + ".be_bias"]
        y = ((xm * s[:, None, :]) @ W.t()) * r[:, None, :] + b + bm[:, None, :]
        return y.reshape(*shp[:-1], W.shape[0])
    y = xm @ W.t() + b
    scale = e["alpha"] / e["rank"]
    if site is not None:
        D = c["d_model"]
        add = torch.zeros_like(y)
        for part, o0, width in lora_parts(site, e["targets"], D, W.shape[0]):
            A = E["blocks.%s.%s.lora_a" % (pre.split(".")[1], part)]
            B = E["blocks.%s.%s.lora_b" % (pre.split(".")[1], part)]
            u = xm @ A.transpose(1, 2)                               # M, rows, rank
            add[:, :, o0:o0 + width] = scale * (u @ B.transpose(1, 2))
        y = y + add
    return y.reshape(*shp[:-1], W.shape[0])


def forward(P, E, c, e, inp, gates):
    D, NH = c["d_model"], c["n_heads"]
    HS = D // NH
    p = c["patch"]
    emb = F.conv2d(inp["images"], P["patch_embed.proj.weight"], P["patch_embed.proj.bias"], stride=p)
    emb = emb.flatten(2).transpose(1, 2)
    B, N, _ = emb.shape
    T = N + 1
    x = torch.cat([P["cls_token"].expand(B, -1, -1), emb], dim=1) + P["pos_embed"][:, :T]
    x = x.repeat(M, 1, 1)                                            # (m b) T D
    R = M * B
    for i in range(c["depth"]):
        b = "blocks.%d." % i
        h = F.layer_norm(x, (D,), P[b + "norm1.weight"], P[b + "norm1.bias"], LN_EPS)
        qkv = member_linear(P, E, c, e, i, "attn.qkv", "qkv", h)
        qkv = qkv.reshape(R, T, 3, NH, HS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = ((q @ k.transpose(-2, -1)) * (HS ** -0.5)).softmax(dim=-1)
        y = (a @ v) * gates[i][None, :, None, None]
        y = y.transpose(1, 2).reshape(R, T, D)
        x = x + member_linear(P, E, c, e, i, "attn.proj", "proj", y)
        h = F.layer_norm(x, (D,), P[b + "norm2.weight"], P[b + "norm2.bias"], LN_EPS)
        h = F.gelu(member_linear(P, E, c, e, i, "mlp.fc1", "fc1", h))
        x = x + member_linear(P, E, c, e, i, "mlp.fc2", "fc2", h)
    z = F.layer_norm(x[:, 0], (D,), P["norm.weight"], P["norm.bias"], LN_EPS)   # R, D
    if e["method"] == "batch_ensemble":
        return apply_linear(E, e, "head", P["head.weight"], P["head.bias"], z, None, c)
    zm = z.reshape(M, B, D)
    out = zm @ E["head.members.weight"].transpose(1, 2) + E["head.members.bias"][:, None, :]
    return out.reshape(R, -1)


def write(path, c, e, inp, gen):
    P = make_ref.make_params(c, gen)
    E = make_ens_params(c, e, gen)
    L, NH = c["depth"], c["n_heads"]
    gates = torch.ones(L, NH, dtype=torch.float64)
    gates[0, 1] = 0.0
    labels = inp["labels"]
    logits = forward(P, E, c, e, inp, gates)
    loss = F.cross_entropy(logits, labels.long().repeat(M))
    loss.backward()
    trained = dict(E)
    if e["method"] == "batch_ensemble":
        trained.update(P)
    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    comp = lambda a: dict(compression="gzip", compression_opts=9, shuffle=True) if a.size > 2048 else {}
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
        g = f.create_group("ensemble")
        g.attrs["method"] = e["method"]
        g.attrs["members"] = M
        if e["method"] == "lora_ensemble":
            g.attrs["rank"] = e["rank"]
            g.attrs["alpha"] = float(e["alpha"])
            g.attrs["targets"] = ",".join(t for t in ["q", "k", "v", "o", "mlp"] if t in e["targets"])
        for k, v in list(P.items()) + list(E.items()):
            f.create_dataset("param/" + k, data=f32(v), **comp(f32(v)))
        for k, v in trained.items():
            gr = make_ref.trunc_mantissa(f32(v.grad))
            f.create_dataset("grad/" + k, data=gr, **comp(gr))
        f.create_dataset("in/head_gates", data=f32(gates))
        f.create_dataset("in/images", data=f32(inp["images"]), **comp(f32(inp["images"])))
        f.create_dataset("in/labels", data=labels.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(logits))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float32))
    os.replace(path + ".tmp", path)
    print("%s: loss %.6f, %d bytes" % (path, loss.item(), os.path.getsize(path)))


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    c = dict(kind="vit", image_size=28, channels=1, patch=7, vocab_size=0, max_len=0,
             d_model=32, n_heads=4, depth=2, d_mlp=64, n_classes=10)
    B = 2
    images = make_ref.q12(torch.randn(B, 1, 28, 28, generator=gen))
    labels = torch.tensor([3, 7], dtype=torch.int32)
    inp = {"images": images, "labels": labels}
    write(os.path.join(HERE, "be_tiny.h5"), c, {"method": "batch_ensemble"}, inp, gen)
    write(os.path.join(HERE, "lora_tiny.h5"), c,
          {"method": "lora_ensemble", "rank": 4, "alpha": 8.0, "targets": ["q", "v", "o", "mlp"]},
          inp, gen)


if __name__ == "__main__":
    sys.exit(main())
