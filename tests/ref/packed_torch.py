#!/usr/bin/python3
"""tests/ref/packed_torch.py: a PyTorch Packed-Ensembles ViT (tests/c/test_packed.c).

Run by hand (never by `make test`) with Debian's torch and h5py:
    /usr/bin/python3 tests/ref/packed_torch.py        # writes tests/ref/packed_tiny.h5

The model is written as ONE packed network, the way torch-uncertainty builds it (PackedLinear =
a 1x1 convolution with groups = M; the first layer dense with its output split by member;
PackedLayerNorm = GroupNorm over M groups; attention with the M groups' heads side by side; the
last layer grouped with M * K outputs rearranged "b (m k) -> (m b) k"; loss = mean cross-entropy
over the M * B rows with the labels repeated M times), gamma = 1. The packed tensors are
assembled (torch.cat) from M members' tensors with hydra's timm names, so the gradients land on
the members' tensors. hydra computes the same network as M plain narrow models (the fused model
with every fuse.* = member for the logits; each member's own backward, times 1/M, for the
gradients): the fixture checks that equivalence.

Layout (a fused-model file, core/README.md, plus the reference outputs):
  /config, /fuse (mlp, ln, embed, head = "member", members = M, format = 1),
  /members/{m}/head_gates [L,NH] (ones), /members/{m}/<timm name>   (the members' tensors)
  /in/images [B,C,H,W] float32   /in/labels [B] int32
  /out/logits [M*B,K] (member-major: row m*B + b)   /out/loss [1] (packed loss)
  /grad/members/{m}/<timm name>  d(packed loss)/d(member tensor) (float32, 14 mantissa bits)
  root attrs: format=1, torch_version, seed, script_sha256, atol (logits), rtol (gradients)
"""
import hashlib
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_ref  # noqa: E402  (param_specs, make_params, q12, trunc_mantissa, LN_EPS)

SEED = 4321
M = 3


def packed_forward(P, c, images):
    """P: list of M dicts of member tensors; returns logits [M*B, K] ("(m b) k")."""
    D, NH, K, L = c["d_model"], c["n_heads"], c["n_classes"], c["depth"]
    HS = D // NH
    eps = make_ref.LN_EPS

    def cat(name, dim=0):
        return torch.cat([P[m][name] for m in range(M)], dim=dim)

    def packed_ln(x, w, b):                       # GroupNorm over the M groups of features
        shp = x.shape
        y = F.group_norm(x.reshape(-1, shp[-1], 1), M, cat(w), cat(b), eps)
        return y.reshape(shp)

    def packed_linear(x, w, b):                   # block-diagonal: 1x1 conv, groups = M
        shp = x.shape
        y = F.conv1d(x.reshape(-1, shp[-1], 1), cat(w).unsqueeze(-1), cat(b), groups=M)
        return y.reshape(*shp[:-1], -1)

    p = c["patch"]
    # first layer: dense (every member sees the whole input), output split by member
    e = F.conv2d(images, cat("patch_embed.proj.weight"), cat("patch_embed.proj.bias"), stride=p)
    e = e.flatten(2).transpose(1, 2)              # B, NP, M*D
    B, N, _ = e.shape
    T = N + 1
    x = torch.cat([cat("cls_token", 2).expand(B, -1, -1), e], dim=1) + cat("pos_embed", 2)
    for i in range(L):
        b = "blocks.%d." % i
        h = packed_ln(x, b + "norm1.weight", b + "norm1.bias")
        qkv = packed_linear(h, b + "attn.qkv.weight", b + "attn.qkv.bias")   # B,T,M*3D
        qkv = qkv.reshape(B, T, M, 3, NH, HS).permute(3, 0, 2, 4, 1, 5)      # 3,B,M,NH,T,HS
        qkv = qkv.reshape(3, B, M * NH, T, HS)                               # M*NH heads
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = ((q @ k.transpose(-2, -1)) * (HS ** -0.5)).softmax(dim=-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, M * D)
        x = x + packed_linear(y, b + "attn.proj.weight", b + "attn.proj.bias")
        h = packed_ln(x, b + "norm2.weight", b + "norm2.bias")
        h = F.gelu(packed_linear(h, b + "mlp.fc1.weight", b + "mlp.fc1.bias"))
        x = x + packed_linear(h, b + "mlp.fc2.weight", b + "mlp.fc2.bias")
    z = packed_ln(x[:, 0], "norm.weight", "norm.bias")
    out = packed_linear(z, "head.weight", "head.bias")                      # B, M*K (last)
    return out.reshape(B, M, K).transpose(0, 1).reshape(M * B, K)


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    # one member of a packed vit-fm-tiny-like model: alpha * 24 / 3 = 16 wide, 2 heads of 8
    c = dict(kind="vit", image_size=28, channels=1, patch=7, vocab_size=0, max_len=0,
             d_model=16, n_heads=2, depth=2, d_mlp=32, n_classes=5)
    B = 4
    images = make_ref.q12(torch.randn(B, 1, 28, 28, generator=gen))
    labels = torch.tensor([3, 0, 4, 3], dtype=torch.int64)
    P = [make_ref.make_params(c, gen) for _ in range(M)]
    logits = packed_forward(P, c, images)
    loss = F.cross_entropy(logits, labels.repeat(M))
    loss.backward()

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    path = os.path.join(HERE, "packed_tiny.h5")
    L, NH = c["depth"], c["n_heads"]
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
        fu = f.create_group("fuse")
        for k in ("mlp", "ln", "embed", "head"):
            fu.attrs[k] = "member"
        fu.attrs["members"] = M
        fu.attrs["format"] = 1
        for m in range(M):
            f.create_dataset("members/%d/head_gates" % m, data=np.ones((L, NH), np.float32))
            for k, v in P[m].items():
                f.create_dataset("members/%d/%s" % (m, k), data=f32(v))
                f.create_dataset("grad/members/%d/%s" % (m, k),
                                 data=make_ref.trunc_mantissa(f32(v.grad)))
        f.create_dataset("in/images", data=f32(images), compression="gzip", shuffle=True)
        f.create_dataset("in/labels", data=labels.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(logits))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float64))
    os.replace(path + ".tmp", path)
    print("%s: packed loss %.6f, %d bytes" % (path, loss.item(), os.path.getsize(path)))


if __name__ == "__main__":
    sys.exit(main())
