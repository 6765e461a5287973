#!/usr/bin/python3
"""tests/ref/mimo_torch.py: a PyTorch MIMO ViT (tests/c/test_mimo.c).

Run by hand (never by `make test`) with Debian's torch and h5py:
    /usr/bin/python3 tests/ref/mimo_torch.py          # writes tests/ref/mimo_tiny.h5

MIMO (Havasi et al., ICLR 2021) as hydra builds it (core/hydra/mimo.h): the M slots' images are the
model's M input channels (one patch projection over all of them), the head has M * K outputs,
member m = columns [m K, (m+1) K); training loss = sum over m of the mean cross-entropy of head m
on slot m's labels; at test time every slot gets the same image. The transformer itself is
tests/ref/make_ref.py's forward (DESIGN §2, every gate 1).

Layout:
  /config            the hydra /config attributes (channels = M, n_classes = M * K)
  /param/<timm name> float32 parameters
  /in/images [B,M,H,W] float32 (slot m = channel m)   /in/labels [M,B] int32 (slot-major)
  /out/logits [B,M*K]   /out/loss [1] float64 (sum over slots of the mean CE)
  /grad/<timm name>  dloss/dparam (float32, 14 mantissa bits)
  /test/pixels [N,H,W] uint8, attrs mean, std (normalisation (p/255 - mean)/std)
  /test/member_probs [M,N,K]  softmax of head m with the normalised image in every slot
  /test/probs [N,K]           their mean
  root attrs: format=1, members=M, torch_version, seed, script_sha256, atol, rtol
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
import make_ref  # noqa: E402

SEED = 2468
M = 3


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    K = 4
    c = dict(kind="vit", image_size=28, channels=M, patch=7, vocab_size=0, max_len=0,
             d_model=16, n_heads=2, depth=2, d_mlp=32, n_classes=M * K)
    B = 5
    images = make_ref.q12(torch.randn(B, M, 28, 28, generator=gen))
    labels = torch.randint(0, K, (M, B), generator=gen, dtype=torch.int64)
    P = make_ref.make_params(c, gen)
    gates = torch.ones(c["depth"], c["n_heads"])
    logits = make_ref.forward(P, c, {"images": images}, gates)            # B, M*K
    loss = sum(F.cross_entropy(logits[:, m * K:(m + 1) * K], labels[m]) for m in range(M))
    loss.backward()

    # test time: the same normalised image in every slot
    N, mean, std = 6, 0.3, 0.35
    pixels = torch.randint(0, 256, (N, 28, 28), generator=gen, dtype=torch.int64)
    x = ((pixels.double() / 255.0 - mean) / std).float().double()        # as the loader: float32
    with torch.no_grad():
        z = make_ref.forward(P, c, {"images": x[:, None].expand(N, M, 28, 28)}, gates)
        mp = torch.stack([z[:, m * K:(m + 1) * K].softmax(-1) for m in range(M)])

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    path = os.path.join(HERE, "mimo_tiny.h5")
    with h5py.File(path + ".tmp", "w") as f:
        f.attrs["format"] = 1
        f.attrs["members"] = M
        f.attrs["torch_version"] = str(torch.__version__)
        f.attrs["seed"] = SEED
        f.attrs["script_sha256"] = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
        f.attrs["atol"] = 1e-4
        f.attrs["rtol"] = 1e-3
        g = f.create_group("config")
        for k, v in c.items():
            g.attrs[k] = v
        for k, v in P.items():
            f.create_dataset("param/" + k, data=f32(v))
            f.create_dataset("grad/" + k, data=make_ref.trunc_mantissa(f32(v.grad)))
        f.create_dataset("in/images", data=f32(images), compression="gzip", shuffle=True)
        f.create_dataset("in/labels", data=labels.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(logits))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float64))
        t = f.create_dataset("test/pixels", data=pixels.numpy().astype(np.uint8))
        t.attrs["mean"], t.attrs["std"] = mean, std
        f.create_dataset("test/member_probs", data=f32(mp))
        f.create_dataset("test/probs", data=f32(mp.mean(0)))
    os.replace(path + ".tmp", path)
    print("%s: loss %.6f, %d bytes" % (path, loss.item(), os.path.getsize(path)))


if __name__ == "__main__":
    sys.exit(main())
