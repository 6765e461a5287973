#!/usr/bin/python3
"""tests/ref/make_safetensors_ref.py: the safetensors dtype fixture of tests/c/test_safetensors.c,
and a check of hydra's safetensors writer against a Python reading of its files.

Run by hand (never by `make test`) with Debian's torch (no `safetensors` package exists there;
the format is written and read here with struct + json, following the reference's conventions):
    /usr/bin/python3 tests/ref/make_safetensors_ref.py    # writes tests/ref/st_dtypes.safetensors
    /usr/bin/python3 tests/ref/make_safetensors_ref.py --check-writer build/release/bin/hydra

st_dtypes.safetensors holds, for each source dtype, the input bits and torch's `.float()` of them:
  f16 [N] F16: every pattern with exponent 0 (zeros, subnormals) or 31 (infinities, quiet and
      signalling NaNs with every payload), both signs, then 512 random normal patterns
  bf16 [M] BF16: specials (+-0, +-inf, quiet/signalling NaNs, subnormals) then 4096 random bits
  f64 [K] F64: rounding ties, float32 overflow / underflow / subnormal results, NaN payloads,
      random doubles
  <name>.float F32: torch's <tensor>.float() of the row above, bit for bit
  f32 [L] F32: specials, F16/BF16 rounding ties and overflow bounds, 4096 random bit patterns,
      2048 random values of every magnitude; f32.half F16 and f32.bfloat16 BF16: torch's
      .half() and .bfloat16() of it (the narrowing of hydra's hy_st_write_as)
__metadata__ records the torch version and the seed.

--check-writer HYDRA runs `HYDRA run` on a Lua script that writes tensors with
core.safetensors_write (given in a shuffled order, with metadata), then checks that the file's bytes
equal this script's own writer's (the reference's layout: sorted by descending dtype alignment
then name, contiguous offsets, compact JSON, `__metadata__` first, header padded with spaces to
a multiple of 8), that this script's reader parses it, and that torch sees the values written.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import torch

SEED = 1234
HERE = os.path.dirname(os.path.abspath(__file__))
# The reference's Dtype enum order ("increasing alignment") and element sizes.
DTYPES = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
          "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
          "F64", "I64", "U64"]


def st_bytes(tensors, metadata=None):
    """tensors: {name: (dtype, shape, raw little-endian bytes)} -> file bytes, laid out as the
    reference's prepare() + serialize() do."""
    items = sorted(tensors.items(), key=lambda kv: (-DTYPES.index(kv[1][0]), kv[0].encode()))
    header, off, data = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = dict(sorted(metadata.items(), key=lambda kv: kv[0].encode()))
    for name, (dt, shape, raw) in items:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data.append(raw)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(data)


def st_read(buf):
    """Parses a file's bytes as the reference reader does.
    Returns (metadata, {name: (dt, shape, raw)})."""
    (n,) = struct.unpack("<Q", buf[:8])
    assert n <= 100_000_000 and 8 + n <= len(buf)
    hdr = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = hdr.pop("__metadata__", None)
    ents = sorted(hdr.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    start, out = 0, {}
    for name, info in ents:
        b, e = info["data_offsets"]
        assert b == start and e >= b, name
        nel = 1
        for d in info["shape"]:
            nel *= d
        bits = {"F16": 16, "BF16": 16, "F32": 32, "F64": 64, "I64": 64, "I32": 32}[info["dtype"]]
        assert e - b == nel * bits // 8, name
        out[name] = (info["dtype"], info["shape"], buf[8 + n + b:8 + n + e])
        start = e
    assert 8 + n + start == len(buf)
    return meta, out


def raw16(bits):
    return struct.pack("<%dH" % len(bits), *bits)


def float_of(raw, dtype):
    """torch's .float() of raw little-endian bytes of dtype -> raw F32 bytes."""
    if dtype in ("F16", "BF16"):
        bits = struct.unpack("<%dH" % (len(raw) // 2), raw)
        ints = [x - 65536 if x >= 32768 else x for x in bits]
        t = torch.tensor(ints, dtype=torch.int16).view(
            torch.float16 if dtype == "F16" else torch.bfloat16)
    else:
        ints = list(struct.unpack("<%dq" % (len(raw) // 8), raw))
        t = torch.tensor(ints, dtype=torch.int64).view(torch.float64)
    f = t.float().view(torch.int32).tolist()
    return struct.pack("<%di" % len(f), *f)


def make_fixture():
    rng = random.Random(SEED)
    f16 = [s | e << 10 | m for s in (0, 0x8000) for e in (0, 31) for m in range(1024)]
    while len(f16) < 4096 + 512:
        b = rng.getrandbits(16)
        if 0 < (b >> 10) & 31 < 31:
            f16.append(b)
    bf16 = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FBF, 0x7FFF,
            0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F]
    bf16 += [rng.getrandbits(16) for _ in range(4096)]

    def dbits(x):
        return struct.unpack("<q", struct.pack("<d", x))[0]

    f64 = [dbits(x) for x in (0.0, -0.0, float("inf"), float("-inf"), 1.0, -1.5,
                              1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 1 + 2.0 ** -24 + 2.0 ** -60,
                              3.4028235677973366e38, 3.4028235677973366e38 * (1 + 2.0 ** -25),
                              1e39, -1e39, 1e-38, 1.401298464324817e-45, 7e-46, 7.1e-46, 1e-46,
                              2.0 ** -149 * 1.5, 2.0 ** -149 * 2.5, 5e-324, -5e-324, 0.1, 1 / 3)]
    f64 += [struct.unpack("<q", struct.pack("<Q", 0x7FF8000000000000 | 0x123456789))[0],
            struct.unpack("<q", struct.pack("<Q", 0xFFF0000000000001))[0],
            struct.unpack("<q", struct.pack("<Q", 0x7FF0000020000000))[0]]
    for _ in range(1000):
        f64.append(dbits(rng.uniform(-1, 1) * 2.0 ** rng.randint(-160, 140)))
    for _ in range(1000):   # any bits at all
        f64.append(struct.unpack("<q", struct.pack("<Q", rng.getrandbits(64)))[0])
    raw64 = struct.pack("<%dq" % len(f64), *f64)

    def fbits(x):
        return struct.unpack("<I", struct.pack("<f", x))[0]

    f32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
           0xFF812345, 0x7FFFFFFF, 0x7F7FFFFF, 0x00000001, 0x807FFFFF]
    f32 += [fbits(x) for x in (65504.0, 65519.99, 65520.0, 65536.0, -1e10, 2.0 ** -14,
                               2.0 ** -14 * (1 - 2.0 ** -11), 2.0 ** -24, 2.0 ** -25,
                               2.0 ** -25 * (1 + 2.0 ** -23), 3 * 2.0 ** -26, 2.0 ** -26,
                               1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
                               1 + 2.0 ** -8 + 2.0 ** -20, 3.3895314e38, 3.3961776e38)]
    f32 += [rng.getrandbits(32) for _ in range(4096)]
    for _ in range(2048):
        f32.append(fbits(rng.uniform(-1, 1) * 2.0 ** rng.randint(-30, 18)))
    raw32 = struct.pack("<%dI" % len(f32), *f32)
    t32 = torch.tensor([b - 2 ** 32 if b >= 2 ** 31 else b for b in f32],
                       dtype=torch.int64).to(torch.int32).view(torch.float32)
    half = [x & 0xFFFF for x in t32.half().view(torch.int16).tolist()]
    bf = [x & 0xFFFF for x in t32.bfloat16().view(torch.int16).tolist()]
    tensors = {
        "f16": ("F16", [len(f16)], raw16(f16)),
        "bf16": ("BF16", [len(bf16)], raw16(bf16)),
        "f64": ("F64", [len(f64)], raw64),
    }
    for name in list(tensors):
        dt, shape, raw = tensors[name]
        tensors[name + ".float"] = ("F32", shape, float_of(raw, dt))
    tensors["f32"] = ("F32", [len(f32)], raw32)
    tensors["f32.half"] = ("F16", [len(f32)], raw16(half))
    tensors["f32.bfloat16"] = ("BF16", [len(f32)], raw16(bf))
    meta = {"generator": "tests/ref/make_safetensors_ref.py", "torch_version": torch.__version__,
            "seed": str(SEED)}
    buf = st_bytes(tensors, meta)
    assert st_read(buf)[1].keys() == tensors.keys()
    path = os.path.join(HERE, "st_dtypes.safetensors")
    with open(path, "wb") as f:
        f.write(buf)
    print("wrote %s (%d bytes)" % (path, len(buf)))


WRITER_LUA = r"""
local core = require("hydra.core")
local path = arg[1]
local function t(shape, f)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  if n == 0 then return core.tensor("float32", table.unpack(shape)) end
  local flat = {}
  for i = 1, n do flat[i] = f(i) end
  return core.from_table("float32", flat, shape)
end
core.safetensors_write(path, {
  {name = "zeta", tensor = t({2, 3}, function(i) return i * 0.25 - 1 end)},
  {name = "blocks.0.attn.qkv.weight", tensor = t({4, 2}, function(i) return 1 / i end)},
  {name = "Zed", tensor = t({3}, function(i) return -i * 1e30 end)},
  {name = "empty", tensor = t({2, 0}, function() return 0 end)},
  {name = "caf\u{e9} \"q\"\t\1", tensor = t({1}, function() return 1e-40 end)},
  {name = "a", tensor = t({5}, function(i) return i == 3 and 0/0 or (i == 4 and -1/0 or -0.0) end)},
}, {format = "pt", ["hydra.kind"] = "member", ["a\nb"] = "v\u{2028}"})
local flat = {}
for i = 1, 4096 do flat[i] = math.sin(i * 0.37) * 2.0 ^ (i % 40 - 25) end
flat[1], flat[2], flat[3] = 65520, 1 + 2 ^ -8, -(2 ^ -25)
local x = core.from_table("float32", flat, {4096})
core.safetensors_write(arg[2], {{name = "x", tensor = x}, {name = "y", tensor = x}}, nil, "F16")
core.safetensors_write(arg[3], {{name = "x", tensor = x}}, {k = "v"}, "BF16")
core.safetensors_write(arg[4], {{name = "x", tensor = x}})
"""


def check_writer(hydra):
    with tempfile.TemporaryDirectory() as d:
        lua, out = os.path.join(d, "w.lua"), os.path.join(d, "w.safetensors")
        with open(lua, "w") as f:
            f.write(WRITER_LUA)
        narrow = [os.path.join(d, n) for n in ("h.safetensors", "b.safetensors", "f.safetensors")]
        subprocess.run([hydra, "run", lua, out] + narrow, check=True)
        buf = open(out, "rb").read()
        hbuf, bbuf, fbuf = (open(n, "rb").read() for n in narrow)
    # F16 / BF16 output: torch's .half() / .bfloat16() of the float32 values, same layout
    x = torch.frombuffer(bytearray(st_read(fbuf)[1]["x"][2]), dtype=torch.float32)
    for b, dt, meta_, conv in ((hbuf, "F16", None, x.half()), (bbuf, "BF16", {"k": "v"},
                                                                x.bfloat16())):
        m, got = st_read(b)
        assert m == meta_ and st_bytes(got, m) == b, dt
        want = conv.view(torch.int16).numpy().tobytes()
        for name, (gdt, shape, raw) in got.items():
            assert gdt == dt and shape == [4096] and raw == want, (dt, name)
    meta, ts = st_read(buf)
    again = st_bytes(ts, meta)
    assert again == buf, "hydra's bytes differ from the reference layout:\n%r\n%r" % (
        buf[:400], again[:400])
    assert meta == {"format": "pt", "hydra.kind": "member", "a\nb": "v\u2028"}, meta
    want = {"zeta": [i * 0.25 - 1 for i in range(1, 7)],
            "blocks.0.attn.qkv.weight": [1 / i for i in range(1, 9)],
            "Zed": [-i * 1e30 for i in range(1, 4)], "empty": [],
            "caf\u00e9 \"q\"\t\x01": [1e-40]}
    for name, vals in want.items():
        dt, shape, raw = ts[name]
        got = torch.frombuffer(bytearray(raw), dtype=torch.float32) if raw else torch.zeros(0)
        exp = torch.tensor(vals, dtype=torch.float32)
        assert dt == "F32" and torch.equal(got.view(torch.int32), exp.view(torch.int32)), name
    a = torch.frombuffer(bytearray(ts["a"][2]), dtype=torch.float32)
    assert a[2].isnan() and a[3].item() == float("-inf") and str(a[0].item()) == "-0.0"
    print("writer check passed: %d tensors, %d bytes, byte-identical to the reference layout; "
          "F16 and BF16 output bit-equal to torch's .half() and .bfloat16()" % (len(ts), len(buf)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check-writer":
        check_writer(sys.argv[2])
    elif len(sys.argv) == 1:
        make_fixture()
    else:
        sys.exit("usage: make_safetensors_ref.py [--check-writer HYDRA]")
