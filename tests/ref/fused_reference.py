#!/usr/bin/python3
"""tests/ref/fused_reference.py: a fused Hydra model exported by `hydra export FUSED.h5 --format
safetensors --out fused.safetensors` rebuilt in plain torch (nothing but torch and the standard
library), reproducing hydra's per-member probabilities.

    from fused_reference import load_members
    members = load_members("fused.safetensors", "fused.name_map.json")   # M torch modules
    probs = [m(images).softmax(-1) for m in members]                     # images [B,C,H,W]
    probs = [m(ids, lengths, type_ids).softmax(-1) for m in members]     # a fused BERT

How the files describe the model (lua/hydra/export.lua M.fused):
  fused.safetensors  "members.{m}.<timm name>" per member m (attention packed to its kept heads:
                     blocks.{l}.attn.qkv.weight [3 k hd, D] = rows q | k | v of the kept heads,
                     attn.proj.weight [D, k hd]), "members.{m}.head_gates" [L, H], and
                     "shared.<timm name>" for what the fusion averaged (the merged MLP by
                     default); __metadata__ hydra.config (JSON: d_model, n_heads, depth, patch,
                     image_size, channels, ln_eps, ...), hydra.heads (JSON: member -> layer ->
                     kept heads), hydra.fuse, hydra.head_dim
  name_map.json      {"fused name": {"member": m, "source": "<timm name>", "rows"|"cols":
                     [[a, b], ...]} or {"members": [...], "source": ..., "reduce": "mean"}}: where
                     each tensor sits in the members' full-size timm tensors
Member m is the timm ViT (pre-LN, exact GELU, class token) whose every tensor is
members.{m}.<name> when present, else shared.<name>, with k_{m,l} heads in layer l: the fused
forward of hydra computes exactly these M models side by side (DESIGN §3.5).
A fused text model (hydra.names hf-bert) is written under Hugging Face BERT names:
members.{m}.bert.encoder.layer.{l}.attention.self.{query,key,value}.{weight [k hd, D], bias}
(the kept heads' rows), attention.output.dense.weight [D, k hd], bert.embeddings.* (the
position table [T, D]: its first T rows), bert.pooler.dense.*, classifier.*; member m is then
BertForSequenceClassification's computation (post-LN, LayerNorm eps hydra.config ln_eps, GELU
exact or tanh by hydra.config act, the tanh pooler when present, key padding from lengths).

As a check (needs h5py):
    /usr/bin/python3 tests/ref/fused_reference.py fused.safetensors fused.name_map.json \\
        --check HYDRA.h5        # HYDRA.h5: /images [B,C,H,W] float32 (or /ids, /lengths,
                                # /type_ids int32 of a text model), /member_probs [M,B,K]
exits non-zero unless every probability is within 1e-5 of hydra's.
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + e])
        dt = DT[info["dtype"]]
        if dt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.zeros(0)
        else:
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.zeros(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).double()
    return out, meta


class Member(nn.Module):
    """one member: a timm-layout ViT with kept[l] heads of size hd in layer l"""

    def __init__(self, c, kept, hd):
        super().__init__()
        self.c, self.kept, self.hd = c, kept, hd
        self.p = {}

    def forward(self, img):
        P, c, hd = self.p, self.c, self.hd
        D, eps = c["d_model"], c.get("ln_eps", 1e-6)
        x = F.conv2d(img, P["patch_embed.proj.weight"], P["patch_embed.proj.bias"], stride=c["patch"])
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([P["cls_token"].expand(x.shape[0], -1, -1), x], dim=1) + P["pos_embed"]
        B, T, _ = x.shape
        for l, k in enumerate(self.kept):
            b = "blocks.%d." % l
            h = F.layer_norm(x, (D,), P[b + "norm1.weight"], P[b + "norm1.bias"], eps)
            qkv = F.linear(h, P[b + "attn.qkv.weight"], P[b + "attn.qkv.bias"])
            qkv = qkv.reshape(B, T, 3, k, hd).permute(2, 0, 3, 1, 4)
            a = ((qkv[0] @ qkv[1].transpose(-2, -1)) * hd ** -0.5).softmax(dim=-1)
            y = (a @ qkv[2]).transpose(1, 2).reshape(B, T, k * hd)
            x = x + F.linear(y, P[b + "attn.proj.weight"], P[b + "attn.proj.bias"])
            h = F.layer_norm(x, (D,), P[b + "norm2.weight"], P[b + "norm2.bias"], eps)
            h = F.gelu(F.linear(h, P[b + "mlp.fc1.weight"], P[b + "mlp.fc1.bias"]))
            x = x + F.linear(h, P[b + "mlp.fc2.weight"], P[b + "mlp.fc2.bias"])
        z = F.layer_norm(x[:, 0], (D,), P["norm.weight"], P["norm.bias"], eps)
        return F.linear(z, P["head.weight"], P["head.bias"])


class BertMember(nn.Module):
    """one member: HF BertForSequenceClassification with kept[l] heads of size hd in layer l"""

    def __init__(self, c, kept, hd):
        super().__init__()
        self.c, self.kept, self.hd = c, kept, hd
        self.p = {}

    def forward(self, ids, lengths, type_ids):
        P, c, hd = self.p, self.c, self.hd
        D, eps = c["d_model"], c.get("ln_eps", 1e-6)
        act = c.get("act", "gelu")
        e = "bert.embeddings."
        B, T = ids.shape
        x = P[e + "word_embeddings.weight"][ids]
        if e + "token_type_embeddings.weight" in P:
            x = x + P[e + "token_type_embeddings.weight"][type_ids]
        x = x + P[e + "position_embeddings.weight"][:T]
        x = F.layer_norm(x, (D,), P[e + "LayerNorm.weight"], P[e + "LayerNorm.bias"], eps)
        pad = torch.arange(T)[None, :] >= lengths[:, None]           # [B, T] masked keys
        bias = torch.zeros(B, 1, 1, T, dtype=x.dtype).masked_fill(pad[:, None, None, :], -math.inf)
        for l, k in enumerate(self.kept):
            b = "bert.encoder.layer.%d." % l
            s = b + "attention.self."
            q, kk, v = (F.linear(x, P[s + n + ".weight"], P[s + n + ".bias"])
                        .reshape(B, T, k, hd).transpose(1, 2) for n in ("query", "key", "value"))
            a = ((q @ kk.transpose(-2, -1)) * hd ** -0.5 + bias).softmax(dim=-1)
            y = (a @ v).transpose(1, 2).reshape(B, T, k * hd)
            o = b + "attention.output."
            x = F.layer_norm(x + F.linear(y, P[o + "dense.weight"], P[o + "dense.bias"]), (D,),
                             P[o + "LayerNorm.weight"], P[o + "LayerNorm.bias"], eps)
            h = F.linear(x, P[b + "intermediate.dense.weight"], P[b + "intermediate.dense.bias"])
            h = F.gelu(h, approximate="tanh") if act == "gelu_tanh" else F.gelu(h)
            o = b + "output."
            x = F.layer_norm(x + F.linear(h, P[o + "dense.weight"], P[o + "dense.bias"]), (D,),
                             P[o + "LayerNorm.weight"], P[o + "LayerNorm.bias"], eps)
        z = x[:, 0]
        if "bert.pooler.dense.weight" in P:
            z = torch.tanh(F.linear(z, P["bert.pooler.dense.weight"], P["bert.pooler.dense.bias"]))
        return F.linear(z, P["classifier.weight"], P["classifier.bias"])


def load_members(st_path, map_path):
    tensors, meta = read_safetensors(st_path)
    name_map = json.load(open(map_path))
    if meta.get("hydra.kind") != "fused":
        raise SystemExit("%s is not a fused Hydra export (hydra.kind %r)" % (st_path, meta.get("hydra.kind")))
    c = json.loads(meta["hydra.config"])
    names = meta.get("hydra.names", "timm-vit")
    if names == "hf-bert":
        cls = BertMember
    elif names == "timm-vit" and c.get("act", "gelu") == "gelu" and c.get("norm", "pre") == "pre":
        cls = Member
    else:
        raise SystemExit("rebuilt here: pre-LN exact-GELU timm ViTs and hf-bert text models "
                         "(got %s, %s)" % (names, c))
    heads = json.loads(meta["hydra.heads"])
    hd = int(meta["hydra.head_dim"])
    members = [cls(c, [len(h) for h in hm], hd) for hm in heads]
    for name, t in tensors.items():
        row = name_map[name]
        if row.get("kind") == "gates":
            continue
        for m in ([row["member"]] if "member" in row else row["members"]):
            members[m].p[row["source"]] = t
    return members


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    members = load_members(argv[1], argv[2])
    if len(argv) >= 5 and argv[3] == "--check":
        import h5py
        with h5py.File(argv[4], "r") as f:
            want = torch.from_numpy(f["member_probs"][()]).double()
            if "ids" in f:
                inputs = [torch.from_numpy(f[k][()]).long() for k in ("ids", "lengths", "type_ids")]
                what = "sentences"
            else:
                inputs = [torch.from_numpy(f["images"][()]).double()]
                what = "images"
        with torch.no_grad():
            got = torch.stack([m(*inputs).softmax(-1) for m in members])
        d = (got - want).abs().max().item()
        print("%d members, %d %s: max |p_torch - p_hydra| = %.3g" % (len(members), inputs[0].shape[0],
                                                                    what, d))
        if not d <= 1e-5:
            raise SystemExit("per-member probabilities differ by more than 1e-5")


if __name__ == "__main__":
    main(sys.argv)
