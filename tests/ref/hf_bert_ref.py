#!/usr/bin/python3
"""tests/ref/hf_bert_ref.py: fixtures of hydra's encoder options against Hugging Face's models,
written by hand in torch (the transformers package is not in Debian) with HF's module structure
and exact parameter names (docs: huggingface/transformers models/bert/modeling_bert.py,
models/vit/modeling_vit.py), computed in float64 (tests/c/test_ref.c reads them).

Run by hand (never by `make test`) with Debian's python3-torch and python3-h5py:
    /usr/bin/python3 tests/ref/hf_bert_ref.py   # writes tests/ref/{hf_bert_tiny,hf_vit_tiny}.h5

hf_bert_tiny.h5: BertForSequenceClassification (post-LN; embeddings LayerNorm(word + token_type
  + position); tanh pooler on [CLS]; classifier), V 50, D 32, H 4, L 2, I 64, type_vocab 2,
  max_position_embeddings 16, K 3, layer_norm_eps 1e-12, hidden_act "gelu" (exact), a padded batch
  of 4 rows of length 12 holding [CLS] ... [SEP] (two of them sentence pairs: token types 0 | 1),
  attention_mask 0/1 -> the extended additive mask (dtype min) as HF builds it.
hf_vit_tiny.h5: ViTForImageClassification (pre-LN: layernorm_before / layernorm_after, final
  vit.layernorm, classifier on the CLS row), 3x8x8 images, patch 4, D 32, H 4, L 2, I 64, K 3,
  layer_norm_eps 1e-12, hidden_act "gelu_pytorch_tanh" (the tanh GELU).
Both take HF's head_mask [L, H] (multiplying the attention probabilities of each head: hydra's
head gates), with one head pruned (0) and one at 0.5; dL/dhead_mask is hydra's dL/dgate.

The weights are stored under hydra's names (the map below: q, k, v concatenated into
attn.qkv), so the file has the layout of tests/ref/make_ref.py's fixtures (format 1): /config
(hydra's /config attributes, with norm, act, pooler, text_embed, type_vocab, ln_eps),
/param/<hydra name>, /in/{ids, lengths, type_ids | images}, /in/labels, /in/head_gates,
/out/logits, /out/loss, /grad/<hydra name>, /grad/head_gates, /adamw/losses (5 steps of
torch.optim.AdamW on the HF module, no decay on LayerNorms, biases and embeddings).
Parameters are deterministic (torch.Generator seeded with SEED) and rounded to multiples of
2^-8, inputs to 2^-12, so that they are exact in float32.
"""
import hashlib
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 4321
HERE = os.path.dirname(os.path.abspath(__file__))
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
ACT = {"gelu": lambda x: F.gelu(x), "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


# ===== BertForSequenceClassification =====

class BertEmbeddings(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"], padding_idx=0)
        s.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        s.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
        s.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        s.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(s, input_ids, token_type_ids):
        T = input_ids.shape[1]
        position_ids = torch.arange(T)[None, :]
        e = s.word_embeddings(input_ids) + s.token_type_embeddings(token_type_ids)
        e = e + s.position_embeddings(position_ids)
        return s.dropout(s.LayerNorm(e))


class BertSelfAttention(nn.Module):
    def __init__(s, c):
        super().__init__()
        D = c["hidden_size"]
        s.H, s.hd = c["num_attention_heads"], D // c["num_attention_heads"]
        s.query, s.key, s.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        s.dropout = nn.Dropout(c["attention_probs_dropout_prob"])

    def forward(s, h, ext_mask, head_mask):
        B, T, D = h.shape
        split = lambda t: t.view(B, T, s.H, s.hd).permute(0, 2, 1, 3)
        q, k, v = split(s.query(h)), split(s.key(h)), split(s.value(h))
        scores = q @ k.transpose(-1, -2) / math.sqrt(s.hd) + ext_mask
        probs = s.dropout(scores.softmax(dim=-1)) * head_mask[None, :, None, None]
        return (probs @ v).permute(0, 2, 1, 3).reshape(B, T, D)


class BertSelfOutput(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        s.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        s.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(s, h, inp):
        return s.LayerNorm(s.dropout(s.dense(h)) + inp)


class BertAttention(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.self = BertSelfAttention(c)
        s.output = BertSelfOutput(c)

    def forward(s, h, ext_mask, head_mask):
        return s.output(s.self(h, ext_mask, head_mask), h)


class BertIntermediate(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])
        s.act = ACT[c["hidden_act"]]

    def forward(s, h):
        return s.act(s.dense(h))


class BertOutput(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        s.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        s.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(s, h, inp):
        return s.LayerNorm(s.dropout(s.dense(h)) + inp)


class BertLayer(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.attention = BertAttention(c)
        s.intermediate = BertIntermediate(c)
        s.output = BertOutput(c)

    def forward(s, h, ext_mask, head_mask):
        a = s.attention(h, ext_mask, head_mask)
        return s.output(s.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.layer = nn.ModuleList([BertLayer(c) for _ in range(c["num_hidden_layers"])])

    def forward(s, h, ext_mask, head_mask):
        for i, layer in enumerate(s.layer):
            h = layer(h, ext_mask, head_mask[i])
        return h


class BertPooler(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(s, h):
        return torch.tanh(s.dense(h[:, 0]))


class BertModel(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.embeddings = BertEmbeddings(c)
        s.encoder = BertEncoder(c)
        s.pooler = BertPooler(c)

    def forward(s, input_ids, attention_mask, token_type_ids, head_mask):
        # get_extended_attention_mask: (1 - mask) * dtype min, broadcast over heads and queries
        ext = (1.0 - attention_mask[:, None, None, :].to(torch.float64)) * torch.finfo(
            torch.float64).min
        h = s.encoder(s.embeddings(input_ids, token_type_ids), ext, head_mask)
        return s.pooler(h)


class BertForSequenceClassification(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.bert = BertModel(c)
        s.dropout = nn.Dropout(c["hidden_dropout_prob"])
        s.classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(s, inp, head_mask):
        pooled = s.bert(inp["ids"].long(), inp["attention_mask"], inp["type_ids"].long(),
                        head_mask)
        return s.classifier(s.dropout(pooled))


def bert_to_hydra(sd, c):
    """hydra name -> tensor, from the HF state_dict (the importer's map)"""
    P = {"pos_embed": sd["bert.embeddings.position_embeddings.weight"][None],
         "tok_embed.weight": sd["bert.embeddings.word_embeddings.weight"],
         "type_embed.weight": sd["bert.embeddings.token_type_embeddings.weight"],
         "embed_norm.weight": sd["bert.embeddings.LayerNorm.weight"],
         "embed_norm.bias": sd["bert.embeddings.LayerNorm.bias"]}
    for i in range(c["num_hidden_layers"]):
        h, b = "bert.encoder.layer.%d." % i, "blocks.%d." % i
        for w in ("weight", "bias"):
            P[b + "attn.qkv." + w] = torch.cat(
                [sd[h + "attention.self.%s.%s" % (n, w)] for n in ("query", "key", "value")])
            P[b + "norm1." + w] = sd[h + "attention.output.LayerNorm." + w]
            P[b + "attn.proj." + w] = sd[h + "attention.output.dense." + w]
            P[b + "mlp.fc1." + w] = sd[h + "intermediate.dense." + w]
            P[b + "mlp.fc2." + w] = sd[h + "output.dense." + w]
            P[b + "norm2." + w] = sd[h + "output.LayerNorm." + w]
    for w in ("weight", "bias"):
        P["pooler." + w] = sd["bert.pooler.dense." + w]
        P["head." + w] = sd["classifier." + w]
    return P


# ===== ViTForImageClassification =====

class ViTEmbeddings(nn.Module):
    def __init__(s, c):
        super().__init__()
        D, p = c["hidden_size"], c["patch_size"]
        n = (c["image_size"] // p) ** 2
        s.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        s.position_embeddings = nn.Parameter(torch.zeros(1, 1 + n, D))
        s.patch_embeddings = nn.Module()
        s.patch_embeddings.projection = nn.Conv2d(c["num_channels"], D, p, stride=p)

    def forward(s, x):
        e = s.patch_embeddings.projection(x).flatten(2).transpose(1, 2)
        e = torch.cat([s.cls_token.expand(e.shape[0], -1, -1), e], dim=1)
        return e + s.position_embeddings


class ViTSelfAttention(BertSelfAttention):
    pass


class ViTAttention(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.attention = ViTSelfAttention(c)
        s.output = nn.Module()
        s.output.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(s, h, head_mask):
        return s.output.dense(s.attention(h, 0.0, head_mask))


class ViTLayer(nn.Module):
    def __init__(s, c):
        super().__init__()
        D, eps = c["hidden_size"], c["layer_norm_eps"]
        s.attention = ViTAttention(c)
        s.intermediate = BertIntermediate(c)
        s.output = nn.Module()
        s.output.dense = nn.Linear(c["intermediate_size"], D)
        s.layernorm_before = nn.LayerNorm(D, eps=eps)
        s.layernorm_after = nn.LayerNorm(D, eps=eps)

    def forward(s, h, head_mask):
        h = s.attention(s.layernorm_before(h), head_mask) + h
        return s.output.dense(s.intermediate(s.layernorm_after(h))) + h


class ViTModel(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.embeddings = ViTEmbeddings(c)
        s.encoder = nn.Module()
        s.encoder.layer = nn.ModuleList([ViTLayer(c) for _ in range(c["num_hidden_layers"])])
        s.layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(s, x, head_mask):
        h = s.embeddings(x)
        for i, layer in enumerate(s.encoder.layer):
            h = layer(h, head_mask[i])
        return s.layernorm(h)


class ViTForImageClassification(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.vit = ViTModel(c)
        s.classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(s, inp, head_mask):
        return s.classifier(s.vit(inp["images"], head_mask)[:, 0])


def vit_to_hydra(sd, c):
    P = {"cls_token": sd["vit.embeddings.cls_token"],
         "pos_embed": sd["vit.embeddings.position_embeddings"],
         "patch_embed.proj.weight": sd["vit.embeddings.patch_embeddings.projection.weight"],
         "patch_embed.proj.bias": sd["vit.embeddings.patch_embeddings.projection.bias"]}
    for i in range(c["num_hidden_layers"]):
        h, b = "vit.encoder.layer.%d." % i, "blocks.%d." % i
        for w in ("weight", "bias"):
            P[b + "norm1." + w] = sd[h + "layernorm_before." + w]
            P[b + "attn.qkv." + w] = torch.cat(
                [sd[h + "attention.attention.%s.%s" % (n, w)] for n in ("query", "key", "value")])
            P[b + "attn.proj." + w] = sd[h + "attention.output.dense." + w]
            P[b + "norm2." + w] = sd[h + "layernorm_after." + w]
            P[b + "mlp.fc1." + w] = sd[h + "intermediate.dense." + w]
            P[b + "mlp.fc2." + w] = sd[h + "output.dense." + w]
    for w in ("weight", "bias"):
        P["norm." + w] = sd["vit.layernorm." + w]
        P["head." + w] = sd["classifier." + w]
    return P


# ===== the fixture =====

def q12(t):
    """round to multiples of 2^-12 (exact in float32; inputs)"""
    return torch.round(t * 4096.0) / 4096.0


def q8(t):
    """round to multiples of 2^-8 (exact in float32; parameters)"""
    return torch.round(t * 256.0) / 256.0


def trunc_mantissa(a, keep=14):
    """float32 array rounded to `keep` mantissa bits (relative error <= 3e-5 for 14): the low
    bits are zero, so shuffle+gzip stores gradients in about half the space"""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    drop = 23 - keep
    u = ((u + (1 << (drop - 1))) >> drop) << drop
    return u.astype(np.uint32).view(np.float32)


def init_params(model, gen):
    """deterministic, generic values: LayerNorm weights near 1, biases and embeddings small"""
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "LayerNorm" in name or "layernorm" in name:
                v = 1.0 + 0.1 * n if name.endswith("weight") else 0.05 * n
            elif name.endswith("bias"):
                v = 0.05 * n
            elif "embeddings" in name or "cls_token" in name:
                v = 0.3 * n
            else:
                v = n / math.sqrt(int(np.prod(p.shape[1:])))
            p.copy_(q8(v))


def decays(name, p):
    """hydra's decay flags (xfmr.c): linear and patch weights decay; LayerNorms, biases,
    embeddings (word, position, token type, cls token) do not"""
    return p.dim() >= 2 and ("embeddings" not in name or "patch_embeddings" in name)


def write(path, model, to_hydra, hcfg, inp, labels, gates, gen):
    init_params(model, gen)
    model.eval()   # dropout off
    head_mask = gates.clone().requires_grad_(True)
    logits = model(inp, head_mask)
    loss = F.cross_entropy(logits, labels.long())
    loss.backward()
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gd = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    P, G = to_hydra(sd), to_hydra(gd)
    dgates = head_mask.grad.detach()
    # 5 AdamW steps on the HF module (head_mask fixed)
    named = list(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in named if decays(n, p)], "weight_decay": ADAMW["weight_decay"]},
         {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}],
        lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses = []
    for _ in range(5):
        opt.zero_grad()
        l2 = F.cross_entropy(model(inp, gates), labels.long())
        losses.append(l2.item())
        l2.backward()
        opt.step()

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    def comp(a):
        return dict(compression="gzip", compression_opts=9, shuffle=True) if a.size > 2048 else {}
    with h5py.File(path + ".tmp", "w", libver="latest") as f:   # compact object headers
        f.attrs["format"] = 1
        f.attrs["torch_version"] = str(torch.__version__)
        f.attrs["seed"] = SEED
        f.attrs["script_sha256"] = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
        f.attrs["atol"] = 1e-5
        f.attrs["rtol"] = 1e-3
        f.attrs["dtype_compute"] = "float64"
        f.attrs["dtype_stored"] = "float32"
        g = f.create_group("config")
        for k, v in hcfg.items():
            g.attrs[k] = v
        for k, v in P.items():
            f.create_dataset("param/" + k, data=f32(v), **comp(f32(v)))
        for k, v in G.items():
            f.create_dataset("grad/" + k, data=trunc_mantissa(f32(v)), **comp(f32(v)))
        f.create_dataset("grad/head_gates", data=f32(dgates))
        f.create_dataset("in/head_gates", data=f32(gates))
        for k, v in inp.items():
            if k == "attention_mask":
                continue   # hydra takes lengths
            if v.dtype == torch.float64:
                f.create_dataset("in/" + k, data=f32(v), **comp(f32(v)))
            else:
                f.create_dataset("in/" + k, data=v.numpy().astype(np.int32))
        f.create_dataset("in/labels", data=labels.numpy().astype(np.int32))
        f.create_dataset("out/logits", data=f32(logits))
        f.create_dataset("out/loss", data=np.array([loss.item()], dtype=np.float64))
        a = f.create_dataset("adamw/losses", data=np.array(losses, dtype=np.float32))
        a.attrs["lr"] = ADAMW["lr"]
        a.attrs["beta1"], a.attrs["beta2"] = ADAMW["betas"]
        a.attrs["eps"] = ADAMW["eps"]
        a.attrs["weight_decay"] = ADAMW["weight_decay"]
    os.replace(path + ".tmp", path)
    print("%s: loss %.6f, adamw losses %s, %d bytes" % (path, loss.item(),
          " ".join("%.5f" % v for v in losses), os.path.getsize(path)))


def gates_of(L, H):
    g = torch.ones(L, H, dtype=torch.float64)
    g[0, 1] = 0.0     # a pruned head
    g[L - 1, 2] = 0.5
    return g


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)

    bc = dict(vocab_size=50, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
              intermediate_size=64, type_vocab_size=2, max_position_embeddings=16, num_labels=3,
              layer_norm_eps=1e-12, hidden_act="gelu", hidden_dropout_prob=0.1,
              attention_probs_dropout_prob=0.1)
    hb = dict(kind="text", image_size=0, channels=0, patch=0, vocab_size=50, max_len=16,
              d_model=32, n_heads=4, depth=2, d_mlp=64, n_classes=3, ln_eps=1e-12, norm="post",
              act="gelu", pooler="tanh", text_embed="bert", type_vocab=2)
    B, T = 4, 12
    lengths = torch.tensor([12, 9, 5, 2], dtype=torch.int32)
    ids = torch.randint(4, 50, (B, T), generator=gen, dtype=torch.int64)
    pos = torch.arange(T)[None, :]
    ids[:, 0] = 2                                              # [CLS]
    ids[pos == (lengths[:, None].long() - 1)] = 3              # [SEP]
    ids[pos >= lengths[:, None].long()] = 0                    # [PAD]
    type_ids = torch.zeros(B, T, dtype=torch.int64)
    type_ids[0, 7:12] = 1                                      # sentence pairs: rows 1, 2
    type_ids[1, 5:9] = 1
    mask = (pos < lengths[:, None].long()).to(torch.int64)
    inp = {"ids": ids.to(torch.int32), "lengths": lengths, "type_ids": type_ids.to(torch.int32),
           "attention_mask": mask}
    labels = torch.tensor([2, 0, 1, 1], dtype=torch.int32)
    write(os.path.join(HERE, "hf_bert_tiny.h5"), BertForSequenceClassification(bc),
          lambda sd: bert_to_hydra(sd, bc), hb, inp, labels, gates_of(2, 4), gen)

    vc = dict(image_size=8, patch_size=4, num_channels=3, hidden_size=32, num_attention_heads=4,
              num_hidden_layers=2, intermediate_size=64, num_labels=3, layer_norm_eps=1e-12,
              hidden_act="gelu_pytorch_tanh", attention_probs_dropout_prob=0.0)
    hv = dict(kind="vit", image_size=8, channels=3, patch=4, vocab_size=0, max_len=0,
              d_model=32, n_heads=4, depth=2, d_mlp=64, n_classes=3, ln_eps=1e-12, norm="pre",
              act="gelu_tanh", pooler="none", text_embed="hydra", type_vocab=0)
    images = q12(torch.randn(3, 3, 8, 8, generator=gen))
    labels = torch.tensor([1, 2, 0], dtype=torch.int32)
    write(os.path.join(HERE, "hf_vit_tiny.h5"), ViTForImageClassification(vc),
          lambda sd: vit_to_hydra(sd, vc), hv, {"images": images}, labels, gates_of(2, 4), gen)


if __name__ == "__main__":
    sys.exit(main())
