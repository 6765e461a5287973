#!/usr/bin/python3
"""tests/ref/make_import_ref.py: fixtures for `hydra import` / `hydra export` (tests/e2e/import_export.sh,
tests/lua/test_import.lua), and the torch-side checks of exported files.

Run by hand (never by `make test`) with Debian's torch and h5py (no timm, transformers or
safetensors package exists in Debian: the models and the safetensors reader/writer are written
here by hand, with the exact timm / Hugging Face state_dict key names):

    /usr/bin/python3 tests/ref/make_import_ref.py            # writes tests/ref/import/*
    /usr/bin/python3 tests/ref/make_import_ref.py check DIR  # torch checks of hydra's exports
    /usr/bin/python3 tests/ref/make_import_ref.py big PATH   # a ViT-S/16-224-shaped random
                                                             # timm file (not committed)
    /usr/bin/python3 tests/ref/make_import_ref.py big-timm DIR  # the same as a timm folder
                                                                # (config.json: hydraize takes it)
    /usr/bin/python3 tests/ref/make_import_ref.py big-bert DIR  # a BERT-base-shaped HF folder
    /usr/bin/python3 tests/ref/make_import_ref.py shards     # hf_bert_sharded/ from hf_bert/

Models (weights random, fixed seed; every reference computed in float64 from the stored
weights):
  timm ViT   img 32, patch 8, D 32, H 4 (head dim 8), L 2, MLP 64, K 10, pre-LN, LayerNorm eps
             1e-6, exact-erf GELU, class token -- keys of timm's VisionTransformer state_dict
             (cls_token, pos_embed, patch_embed.proj.*, blocks.{l}.{norm1, attn.qkv, attn.proj,
             norm2, mlp.fc1, mlp.fc2}.*, norm.*, head.*), stored as F32, F16 and BF16 files (the
             F16/BF16 references use the widened weights, as `tensor.float()` gives them)
  HF BERT    BertForSequenceClassification (tests/ref/hf_bert_ref.py's module): vocab 60 (the
             hf_bert/vocab.txt written here), D 32, H 4, L 2, I 64, 2 token types, 40 positions,
             3 labels, post-LN, eps 1e-12, tanh pooler, plus the int64 position_ids buffer older
             files keep; a padded batch of 4 rows with token types (two sentence pairs)
  HF ViT     the same sizes with ViTForImageClassification's keys (vit.embeddings.*,
             vit.encoder.layer.{l}.attention.attention.{query,key,value}.*, ...), split q/k/v,
             layer_norm_eps 1e-12, with config.json and preprocessor_config.json
  HF BERT, sharded  hf_bert_sharded/: the same tensors as hf_bert/model.safetensors in two shards
             (model-0000{1,2}-of-00002.safetensors: the embeddings and layer 0, then layer 1,
             the pooler and the classifier) with transformers' model.safetensors.index.json
             ({"metadata": {"total_size": bytes}, "weight_map": {name: shard}}), and the same
             config.json, tokenizer_config.json and vocab.txt
D is 32 rather than 64 and the MLP 2D rather than 4D so that all fixtures stay under 500 KiB
(safetensors files are raw float32); the importer takes every size from the tensor shapes.

tests/ref/import/ref.h5:
  /images [B,3,32,32] float32 (the inputs of both ViTs)
  /timm_vit/logits_{F32,F16,BF16} [B,K] float64     /hf_vit/logits [B,K] float64
  /hf_bert/ids, /hf_bert/type_ids [4,12] int32, /hf_bert/lengths [4] int32, /hf_bert/logits [4,3]
  root attrs: seed, torch_version, script_sha256, atol, rtol

`check DIR` reads DIR/manifest.json, written by tests/e2e/import_export.sh with
HYDRA_TORCH_DIR=DIR: a list of {"file": exported .safetensors, "format": "timm-vit"|"hf-vit"|"hf-bert",
"logits": the h5 holding hydra's logits as /logits and the inputs as /images or /ids, /lengths,
/type_ids}. Each file is
loaded with load_state_dict(strict=True) into the stock-shaped module (per-layer head counts
from __metadata__ "hydra.heads" for a sliced member) and its float64 logits must match hydra's
within atol 1e-4 + rtol 1e-5. DIR/fused_{member,average}.safetensors (two timm ViT members) and
DIR/fused_bert_{member,average}.safetensors (two members of the HF BERT, under HF names) (+
.name_map.json, and hydra's per-member probabilities in fused_*_probs.h5) are rebuilt by
tests/ref/fused_reference.py, within 1e-5.
"""
import hashlib
import json
import math
import os
import struct
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 4321
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "import")
ATOL, RTOL = 1e-4, 1e-5

VIT = dict(img=32, patch=8, D=32, H=4, L=2, M=64, K=10, B=4)

# ===== safetensors (https://github.com/huggingface/safetensors README "Format") =====

ST_DTYPE = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
            "F64": (torch.float64, 8), "I64": (torch.int64, 8)}


def st_write(path, tensors, dtype="F32", metadata=None, dtypes=None):
    """tensors: {name: tensor}; stored as `dtype` (dtypes: {name: dtype} for others).
    Reference writer order: descending dtype alignment, then name; header padded with spaces to
    a multiple of 8."""
    dtypes = dtypes or {}
    dt_of = lambda n: dtypes.get(n, dtype)
    header, blobs, off = {}, [], 0
    for name in sorted(tensors, key=lambda n: (-ST_DTYPE[dt_of(n)][1], n)):
        tdt, _ = ST_DTYPE[dt_of(name)]
        t = tensors[name].detach().to(tdt).contiguous()
        if tdt == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": dt_of(name), "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def st_read(path):
    """-> ({name: float64 tensor (widened like tensor.float())}, metadata)"""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        tdt, _ = ST_DTYPE[info["dtype"]]
        raw = bytearray(data[base + b:base + e])
        if tdt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=tdt) if raw else torch.zeros(0, dtype=tdt)
        t = t.reshape(info["shape"])
        out[name] = t if tdt == torch.int64 else t.float().double()
    return out, meta


# ===== timm VisionTransformer (timm/models/vision_transformer.py), heads per layer =====

class TimmAttention(nn.Module):
    def __init__(self, D, heads, hd):
        super().__init__()
        self.heads, self.hd = heads, hd
        self.qkv = nn.Linear(D, 3 * heads * hd)
        self.proj = nn.Linear(heads * hd, D)

    def forward(self, x):
        B, T, _ = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = ((q @ k.transpose(-2, -1)) * self.hd ** -0.5).softmax(dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, T, self.heads * self.hd))


class TimmMlp(nn.Module):
    def __init__(self, D, M):
        super().__init__()
        self.fc1 = nn.Linear(D, M)
        self.fc2 = nn.Linear(M, D)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, D, heads, hd, M, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(D, eps=eps)
        self.attn = TimmAttention(D, heads, hd)
        self.norm2 = nn.LayerNorm(D, eps=eps)
        self.mlp = TimmMlp(D, M)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TimmPatchEmbed(nn.Module):
    def __init__(self, D, p):
        super().__init__()
        self.proj = nn.Conv2d(3, D, p, stride=p)


class TimmViT(nn.Module):
    def __init__(self, c, heads=None, eps=1e-6):
        super().__init__()
        D, hd = c["D"], c["D"] // c["H"]
        heads = heads or [c["H"]] * c["L"]
        T = 1 + (c["img"] // c["patch"]) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, T, D))
        self.patch_embed = TimmPatchEmbed(D, c["patch"])
        self.blocks = nn.ModuleList([TimmBlock(D, h, hd, c["M"], eps) for h in heads])
        self.norm = nn.LayerNorm(D, eps=eps)
        self.head = nn.Linear(D, c["K"])

    def forward(self, img):
        x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


# ===== HF ViTForImageClassification (transformers/models/vit/modeling_vit.py) =====

class Dense(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.dense = nn.Linear(i, o)


class HFSelfAttention(nn.Module):
    def __init__(self, D, heads, hd):
        super().__init__()
        self.heads, self.hd = heads, hd
        self.query = nn.Linear(D, heads * hd)
        self.key = nn.Linear(D, heads * hd)
        self.value = nn.Linear(D, heads * hd)

    def forward(self, x):
        B, T, _ = x.shape
        sp = lambda t: t.reshape(B, T, self.heads, self.hd).transpose(1, 2)
        q, k, v = sp(self.query(x)), sp(self.key(x)), sp(self.value(x))
        a = ((q @ k.transpose(-2, -1)) / math.sqrt(self.hd)).softmax(dim=-1)
        return (a @ v).transpose(1, 2).reshape(B, T, self.heads * self.hd)


class HFViTAttention(nn.Module):
    def __init__(self, D, heads, hd):
        super().__init__()
        self.attention = HFSelfAttention(D, heads, hd)
        self.output = Dense(heads * hd, D)


class HFViTLayer(nn.Module):
    def __init__(self, D, heads, hd, M, eps):
        super().__init__()
        self.attention = HFViTAttention(D, heads, hd)
        self.intermediate = Dense(D, M)
        self.output = Dense(M, D)
        self.layernorm_before = nn.LayerNorm(D, eps=eps)
        self.layernorm_after = nn.LayerNorm(D, eps=eps)

    def forward(self, x):
        x = x + self.attention.output.dense(self.attention.attention(self.layernorm_before(x)))
        h = F.gelu(self.intermediate.dense(self.layernorm_after(x)))
        return x + self.output.dense(h)


class HFPatchEmbeddings(nn.Module):
    def __init__(self, D, p):
        super().__init__()
        self.projection = nn.Conv2d(3, D, p, stride=p)


class HFViTEmbeddings(nn.Module):
    def __init__(self, D, p, T):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.position_embeddings = nn.Parameter(torch.zeros(1, T, D))
        self.patch_embeddings = HFPatchEmbeddings(D, p)


class HFEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)


class HFViTModel(nn.Module):
    def __init__(self, c, heads, eps):
        super().__init__()
        D, hd = c["D"], c["D"] // c["H"]
        T = 1 + (c["img"] // c["patch"]) ** 2
        self.embeddings = HFViTEmbeddings(D, c["patch"], T)
        self.encoder = HFEncoder([HFViTLayer(D, h, hd, c["M"], eps) for h in heads])
        self.layernorm = nn.LayerNorm(D, eps=eps)


class HFViTForImageClassification(nn.Module):
    def __init__(self, c, heads=None, eps=1e-12):
        super().__init__()
        heads = heads or [c["H"]] * c["L"]
        self.vit = HFViTModel(c, heads, eps)
        self.classifier = nn.Linear(c["D"], c["K"])

    def forward(self, img):
        e = self.vit.embeddings
        x = e.patch_embeddings.projection(img).flatten(2).transpose(1, 2)
        x = torch.cat([e.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + e.position_embeddings
        for layer in self.vit.encoder.layer:
            x = layer(x)
        return self.classifier(self.vit.layernorm(x)[:, 0])


# ===== HF BertForSequenceClassification: tests/ref/hf_bert_ref.py's hand-written module =====

sys.path.insert(0, HERE)
import hf_bert_ref  # noqa: E402  (HF module structure and exact parameter names)

BERT_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
              ["the", "a", "movie", "film", "was", "is", "not", "very", "good", "bad", "great",
               "boring", "fun", "plot", "acting", "i", "it", "and", "but", "of", "to", "this",
               "that", "story", ",", ".", "!", "?", "un", "##believ", "##able", "##s", "##ly",
               "##ing", "##ed", "love", "hate", "best", "worst", "ever", "seen", "really",
               "quite", "so", "too", "long", "short", "funny", "sad", "slow", "dull", "bright",
               "dark", "music", "score"])
BERT = dict(vocab_size=len(BERT_VOCAB), hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
            intermediate_size=64, type_vocab_size=2, max_position_embeddings=40, num_labels=3,
            layer_norm_eps=1e-12, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


def bert_inputs(gen):
    """a padded batch of [CLS] ... [SEP] rows (lengths 12, 9, 5, 2), two of them sentence pairs"""
    V = BERT["vocab_size"]
    B, T = 4, 12
    lengths = torch.tensor([12, 9, 5, 2], dtype=torch.int32)
    ids = torch.randint(5, V, (B, T), generator=gen, dtype=torch.int64)
    pos = torch.arange(T)[None, :]
    ids[:, 0] = 2
    ids[pos == (lengths[:, None].long() - 1)] = 3
    ids[pos >= lengths[:, None].long()] = 0
    type_ids = torch.zeros(B, T, dtype=torch.int64)
    type_ids[0, 7:12] = 1
    type_ids[1, 5:9] = 1
    mask = (pos < lengths[:, None].long()).to(torch.int64)
    return {"ids": ids.to(torch.int32), "lengths": lengths, "type_ids": type_ids.to(torch.int32),
            "attention_mask": mask}


class SlicedBertSelfAttention(hf_bert_ref.BertSelfAttention):
    """BertSelfAttention keeping `heads` heads of size hd (a sliced member's layer; 0 allowed)"""
    def __init__(s, c, heads, hd):
        super().__init__(c)
        D = c["hidden_size"]
        s.H, s.hd = heads, hd
        s.query, s.key, s.value = (nn.Linear(D, heads * hd), nn.Linear(D, heads * hd),
                                   nn.Linear(D, heads * hd))

    def forward(s, h, ext_mask, head_mask):
        B, T, _ = h.shape
        split = lambda t: t.view(B, T, s.H, s.hd).permute(0, 2, 1, 3)
        q, k, v = split(s.query(h)), split(s.key(h)), split(s.value(h))
        probs = (q @ k.transpose(-1, -2) / math.sqrt(s.hd) + ext_mask).softmax(dim=-1)
        return (probs @ v).permute(0, 2, 1, 3).reshape(B, T, s.H * s.hd)


def bert_model(c, heads, hd):
    m = hf_bert_ref.BertForSequenceClassification(c)
    for l, layer in enumerate(m.bert.encoder.layer):
        if heads[l] != c["num_attention_heads"]:
            layer.attention.self = SlicedBertSelfAttention(c, heads[l], hd)
            layer.attention.output.dense = nn.Linear(heads[l] * hd, c["hidden_size"])
    return m


def bert_logits(model, inp):
    with torch.no_grad():
        return model.double()(inp, torch.ones(BERT["num_hidden_layers"], BERT["num_attention_heads"],
                                              dtype=torch.float64))


def bert_config_json():
    c = dict(BERT)
    n = c.pop("num_labels")
    c.update({"architectures": ["BertForSequenceClassification"], "model_type": "bert",
              "position_embedding_type": "absolute", "pad_token_id": 0,
              "id2label": {str(i): "LABEL_%d" % i for i in range(n)},
              "label2id": {"LABEL_%d" % i: i for i in range(n)}})
    return c


# ===== weights =====

def randomize(model, gen):
    """weights ~ N(0, 1/fan_in), LayerNorm weights 1 + 0.1 N, biases 0.05 N, embeddings 0.3 N;
    rounded to float32"""
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "norm" in name.lower() and name.endswith("weight"):
                v = 1.0 + 0.1 * n
            elif name.endswith("bias"):
                v = 0.05 * n
            elif p.dim() >= 2 and not any(k in name for k in ("cls_token", "pos", "embeddings.position")):
                v = n / math.sqrt(max(1, int(np.prod(p.shape[1:]))))
            else:
                v = 0.3 * n
            p.copy_(v.float().double())


def load(model, sd):
    model.load_state_dict({k: v for k, v in sd.items()}, strict=True)
    return model


def logits_of(model, images):
    with torch.no_grad():
        return model.double()(images.double())


def state_dict_f32(model):
    return {k: v.detach().float() for k, v in model.state_dict().items()}


# ===== fixtures =====

def timm_config_json(c):
    """timm hub config.json (timm/models/_hub.py save_config_for_hf) of the tiny model"""
    return {"architecture": "vit_tiny_test", "num_classes": c["K"], "num_features": c["D"],
            "global_pool": "token",
            "model_args": {"img_size": c["img"], "patch_size": c["patch"], "embed_dim": c["D"],
                           "depth": c["L"], "num_heads": c["H"], "mlp_ratio": c["M"] / c["D"]},
            "pretrained_cfg": {"input_size": [3, c["img"], c["img"]], "interpolation": "bicubic",
                               "crop_pct": 0.9, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}}


def hf_vit_config_json(c):
    return {"architectures": ["ViTForImageClassification"], "model_type": "vit",
            "hidden_size": c["D"], "num_hidden_layers": c["L"], "num_attention_heads": c["H"],
            "intermediate_size": c["M"], "hidden_act": "gelu", "layer_norm_eps": 1e-12,
            "image_size": c["img"], "patch_size": c["patch"], "num_channels": 3,
            "qkv_bias": True, "id2label": {str(i): "class_%d" % i for i in range(c["K"])},
            "label2id": {"class_%d" % i: i for i in range(c["K"])}}


def hf_vit_preprocessor_json(c):
    return {"do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "image_processor_type": "ViTImageProcessor", "resample": 2,
            "rescale_factor": 0.00392156862745098, "size": {"height": c["img"], "width": c["img"]}}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def generate():
    os.makedirs(os.path.join(OUT, "hf_vit"), exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    c = VIT
    images = (torch.round(torch.randn(c["B"], 3, c["img"], c["img"], generator=gen) * 4096) / 4096).float()

    timm = TimmViT(c).double()
    randomize(timm, gen)
    sd = state_dict_f32(timm)
    res = {}
    for dt in ("F32", "F16", "BF16"):
        path = os.path.join(OUT, "timm_vit_%s.safetensors" % dt.lower())
        st_write(path, sd, dt, {"format": "pt"})
        back, _ = st_read(path)        # the widened weights the reference runs on
        res[dt] = logits_of(load(TimmViT(c), back), images)
    write_json(os.path.join(OUT, "timm_vit_config.json"), timm_config_json(c))

    hf = HFViTForImageClassification(c).double()
    randomize(hf, gen)
    hpath = os.path.join(OUT, "hf_vit", "model.safetensors")
    st_write(hpath, state_dict_f32(hf), "F32", {"format": "pt"})
    back, _ = st_read(hpath)
    hf_logits = logits_of(load(HFViTForImageClassification(c), back), images)
    write_json(os.path.join(OUT, "hf_vit", "config.json"), hf_vit_config_json(c))
    write_json(os.path.join(OUT, "hf_vit", "preprocessor_config.json"), hf_vit_preprocessor_json(c))

    os.makedirs(os.path.join(OUT, "hf_bert"), exist_ok=True)
    bert = hf_bert_ref.BertForSequenceClassification(BERT).double()
    randomize(bert, gen)
    bsd = state_dict_f32(bert)
    P = BERT["max_position_embeddings"]
    bsd["bert.embeddings.position_ids"] = torch.arange(P)[None, :]   # the buffer older files keep
    bpath = os.path.join(OUT, "hf_bert", "model.safetensors")
    st_write(bpath, bsd, "F32", {"format": "pt"}, {"bert.embeddings.position_ids": "I64"})
    back, _ = st_read(bpath)
    back.pop("bert.embeddings.position_ids")
    binp = bert_inputs(gen)
    bert_lg = bert_logits(load(hf_bert_ref.BertForSequenceClassification(BERT), back), binp)
    write_json(os.path.join(OUT, "hf_bert", "config.json"), bert_config_json())
    write_json(os.path.join(OUT, "hf_bert", "tokenizer_config.json"),
               {"do_lower_case": True, "model_max_length": P, "tokenizer_class": "BertTokenizer"})
    with open(os.path.join(OUT, "hf_bert", "vocab.txt"), "w") as f:
        f.write("".join(w + "\n" for w in BERT_VOCAB))

    with h5py.File(os.path.join(OUT, "ref.h5.tmp"), "w") as f:
        f.attrs["seed"] = SEED
        f.attrs["torch_version"] = str(torch.__version__)
        f.attrs["script_sha256"] = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
        f.attrs["atol"] = ATOL
        f.attrs["rtol"] = RTOL
        f.create_dataset("images", data=images.numpy())
        for dt, lg in res.items():
            f.create_dataset("timm_vit/logits_" + dt, data=lg.numpy())
        f.create_dataset("hf_vit/logits", data=hf_logits.numpy())
        for k in ("ids", "lengths", "type_ids"):
            f.create_dataset("hf_bert/" + k, data=binp[k].numpy())
        f.create_dataset("hf_bert/logits", data=bert_lg.numpy())
    os.replace(os.path.join(OUT, "ref.h5.tmp"), os.path.join(OUT, "ref.h5"))
    total = 0
    for root, _, files in os.walk(OUT):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    print("wrote %s (%d bytes)" % (OUT, total))
    print("timm F32 logits[0]:", res["F32"][0, :4].tolist())
    shard_bert()


def shard_bert():
    """hf_bert/ as a sharded checkpoint in hf_bert_sharded/ (see the docstring)"""
    src, dst = os.path.join(OUT, "hf_bert"), os.path.join(OUT, "hf_bert_sharded")
    os.makedirs(dst, exist_ok=True)
    sd, meta = st_read(os.path.join(src, "model.safetensors"))
    first = lambda n: n.startswith("bert.embeddings.") or n.startswith("bert.encoder.layer.0.")
    weight_map, total = {}, 0
    for i, pick in enumerate((first, lambda n: not first(n))):
        shard = "model-%05d-of-00002.safetensors" % (i + 1)
        part = {n: t for n, t in sd.items() if pick(n)}
        st_write(os.path.join(dst, shard), part, "F32", meta,
                 {n: "I64" for n in part if n.endswith("position_ids")})
        for n, t in part.items():
            weight_map[n] = shard
            total += t.numel() * (8 if n.endswith("position_ids") else 4)
    write_json(os.path.join(dst, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    for fn in ("config.json", "tokenizer_config.json", "vocab.txt"):
        with open(os.path.join(src, fn), "rb") as f, open(os.path.join(dst, fn), "wb") as g:
            g.write(f.read())
    print("wrote", dst)


# ===== torch checks of hydra's exports =====

def infer_config(sd, fmt):
    if fmt == "hf-bert":
        V, D = sd["bert.embeddings.word_embeddings.weight"].shape
        L = 1 + max(int(k.split(".")[3]) for k in sd if k.startswith("bert.encoder.layer."))
        return dict(vocab_size=V, hidden_size=D, num_hidden_layers=L,
                    intermediate_size=sd["bert.encoder.layer.0.intermediate.dense.weight"].shape[0],
                    type_vocab_size=sd["bert.embeddings.token_type_embeddings.weight"].shape[0],
                    max_position_embeddings=sd["bert.embeddings.position_embeddings.weight"].shape[0],
                    num_labels=sd["classifier.weight"].shape[0], hidden_act="gelu",
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, D=D, L=L)
    if fmt == "timm-vit":
        D, _, p, _ = sd["patch_embed.proj.weight"].shape
        T = sd["pos_embed"].shape[1]
        L = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
        M = sd["blocks.0.mlp.fc1.weight"].shape[0]
        K = sd["head.weight"].shape[0]
    else:
        D, _, p, _ = sd["vit.embeddings.patch_embeddings.projection.weight"].shape
        T = sd["vit.embeddings.position_embeddings"].shape[1]
        L = 1 + max(int(k.split(".")[3]) for k in sd if k.startswith("vit.encoder.layer."))
        M = sd["vit.encoder.layer.0.intermediate.dense.weight"].shape[0]
        K = sd["classifier.weight"].shape[0]
    img = int(round(math.sqrt(T - 1))) * p
    return dict(img=img, patch=p, D=D, L=L, M=M, K=K)


def check(d):
    man = json.load(open(os.path.join(d, "manifest.json")))
    bad = 0
    for e in man:
        sd, meta = st_read(os.path.join(d, e["file"]))
        c = infer_config(sd, e["format"])
        hd = int(meta.get("hydra.head_dim", "0")) or None
        counts = json.loads(meta["hydra.head_counts"]) if "hydra.head_counts" in meta else None
        if hd is None:
            raise SystemExit("%s: __metadata__ has no hydra.head_dim" % e["file"])
        c["H"] = c["D"] // hd
        heads = counts or [c["H"]] * c["L"]
        eps = float(meta.get("hydra.ln_eps", "1e-6"))
        f = h5py.File(os.path.join(d, e["logits"]), "r")
        want = torch.from_numpy(f["logits"][()]).double()
        if e["format"] == "hf-bert":
            c["num_attention_heads"], c["layer_norm_eps"] = c["H"], eps
            m = bert_model(c, heads, hd)
            load(m, sd)
            ids = torch.from_numpy(f["ids"][()])
            lengths = torch.from_numpy(f["lengths"][()])
            mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None].long()).to(torch.int64)
            got = bert_logits(m, {"ids": ids, "type_ids": torch.from_numpy(f["type_ids"][()]),
                                  "attention_mask": mask})
        else:
            if e["format"] == "timm-vit":
                m = TimmViT(c, heads, eps)
            else:
                m = HFViTForImageClassification(c, heads, eps)
            load(m, sd)
            got = logits_of(m, torch.from_numpy(f["images"][()]))
        f.close()
        diff = (got - want).abs()
        ok = bool((diff <= ATOL + RTOL * want.abs()).all())
        print("%-40s %-8s heads %-14s max|diff| %.3g %s" % (e["file"], e["format"], heads,
              diff.max().item(), "ok" if ok else "FAIL"))
        bad += not ok
    import fused_reference   # tests/ref/fused_reference.py (torch only)
    for name in ("fused_member", "fused_average", "fused_bert_member", "fused_bert_average"):
        st = os.path.join(d, name + ".safetensors")
        if os.path.exists(st):
            print("%s (ln/embed/head %s):" % (name, name.split("_")[-1]), end=" ")
            fused_reference.main(["", st, os.path.join(d, name + ".name_map.json"),
                                  "--check", os.path.join(d, name + "_probs.h5")])
    if bad:
        raise SystemExit("%d export(s) do not reproduce hydra's logits" % bad)


def big(path):
    """ViT-S/16-224 shapes (D 384, 6 heads, 12 blocks, MLP 1536, 1000 classes), random F32"""
    c = dict(img=224, patch=16, D=384, H=6, L=12, M=1536, K=1000)
    m = TimmViT(c)
    gen = torch.Generator().manual_seed(1)
    randomize(m.double(), gen)
    st_write(path, state_dict_f32(m), "F32", {"format": "pt"})
    print("wrote", path, os.path.getsize(path), "bytes")


def big_timm(d):
    """the ViT-S/16-224 of big() as a timm hub folder: model.safetensors and config.json
    (architecture vit_small_patch16_224, timm's pretrained_cfg), what `hydra hydraize` takes"""
    os.makedirs(d, exist_ok=True)
    big(os.path.join(d, "model.safetensors"))
    c = dict(img=224, patch=16, D=384, H=6, L=12, M=1536, K=1000)
    cj = timm_config_json(c)
    cj["architecture"] = "vit_small_patch16_224"
    write_json(os.path.join(d, "config.json"), cj)
    print("wrote", d)


def big_bert(d):
    """BERT-base shapes (V 30522, D 768, 12 heads, 12 layers, I 3072, 512 positions, 2 labels),
    random F32, as an HF folder (model.safetensors, config.json, a vocab.txt of 30522 tokens)"""
    os.makedirs(d, exist_ok=True)
    c = dict(BERT, vocab_size=30522, hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
             intermediate_size=3072, max_position_embeddings=512, num_labels=2)
    m = hf_bert_ref.BertForSequenceClassification(c)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    st_write(os.path.join(d, "model.safetensors"), state_dict_f32(m), "F32", {"format": "pt"})
    cj = bert_config_json()
    cj.update({k: c[k] for k in ("vocab_size", "hidden_size", "num_attention_heads",
                                  "num_hidden_layers", "intermediate_size",
                                  "max_position_embeddings")})
    cj["id2label"], cj["label2id"] = {"0": "NEG", "1": "POS"}, {"NEG": 0, "POS": 1}
    write_json(os.path.join(d, "config.json"), cj)
    words = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += ["w%d" % i for i in range(c["vocab_size"] - len(words))]
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("".join(w + "\n" for w in words))
    print("wrote", d)


if __name__ == "__main__":
    torch.set_num_threads(1)
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "big":
        big(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "big-timm":
        big_timm(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "big-bert":
        big_bert(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "shards":
        shard_bert()
    elif len(sys.argv) == 1:
        generate()
    else:
        raise SystemExit(__doc__)
