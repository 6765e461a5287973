#!/usr/bin/python3
"""Reference outputs of PIL / torchvision image preprocessing for core/data/imgprep.c.

Inputs: small crops (odd sizes) of photos shipped in Debian's opencv-doc package
(examples/data: fruits.jpg, baboon.jpg, messi5.jpg, butterfly.jpg, left01.jpg (grey),
opencv-logo.png (RGBA), chicky_512.png (RGBA)), written to tests/ref/images/ as RGB, grey,
RGBA, grey+alpha, palette (with transparency), 2-bit grey and 16-bit grey PNGs and as RGB and
grey JPEGs (quality 90). Expected outputs, in tests/ref/image_ref.h5: /files string [F] (names in tests/ref/images/);
per group G, /G/data uint8 (every output, HWC, concatenated; gzip) and /G/index int64 [K, *]
whose rows start with (offset into data, h, w, file index):
  decode    np.array(Image.open(f).convert("RGB"))
  resize    .resize((w, h), filter); row + (filter: 0 bilinear, 1 bicubic)
  pipeline  timm: Resize(floor(S / crop_pct), interp) + CenterCrop(S) (torchvision);
            hf: Resize((S, S), interp); row + (hf, bicubic, round(1000 crop_pct))
Run by hand (needs Debian python3-pil, python3-torchvision, python3-h5py):
  /usr/bin/python3 tests/ref/make_image_ref.py [opencv-doc examples/data dir]
"""
import math
import os
import sys

import h5py
import numpy as np
from PIL import Image
import torchvision
from torchvision import transforms

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    HERE, "..", "..", "datasets", "raw", "debian", "opencv-doc", "usr", "share", "doc",
    "opencv-doc", "examples", "data")
OUT_DIR = os.path.join(HERE, "images")
FILTERS = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}
TV = {"bicubic": transforms.InterpolationMode.BICUBIC,
      "bilinear": transforms.InterpolationMode.BILINEAR}


def crop(name, box):
    return Image.open(os.path.join(SRC, name)).crop(box)


def make_inputs():
    os.makedirs(OUT_DIR, exist_ok=True)
    files = {}

    def save(fname, im, **kw):
        path = os.path.join(OUT_DIR, fname)
        im.save(path, **kw)
        files[fname] = path

    save("fruits_rgb_97x61.png", crop("fruits.jpg", (200, 150, 297, 211)).convert("RGB"))
    save("baboon_rgb_45x77.jpg", crop("baboon.jpg", (100, 60, 145, 137)).convert("RGB"),
         quality=90)
    save("messi_rgb_131x53.jpg", crop("messi5.jpg", (300, 200, 431, 253)).convert("RGB"),
         quality=90)
    save("left_grey_63x49.jpg", crop("left01.jpg", (250, 200, 313, 249)), quality=90)
    save("left_grey_37x41.png", crop("left01.jpg", (100, 100, 137, 141)))
    save("logo_rgba_51x59.png", crop("opencv-logo.png", (150, 350, 201, 409)))
    save("chicky_la_33x29.png", crop("chicky_512.png", (200, 200, 233, 229)).convert("LA"))
    pal = crop("butterfly.jpg", (150, 100, 189, 131)).convert("RGB").quantize(32)
    save("butterfly_pal_39x31.png", pal, transparency=3)
    g = crop("left01.jpg", (300, 300, 323, 317))
    save("left_grey2_23x17.png", g.point(lambda v: v // 64 * 85).convert("L"), bits=2)
    g16 = Image.fromarray((np.asarray(g, np.uint16) * 3).astype(np.uint16))   # mode I;16
    save("left_grey16_23x17.png", g16)
    return files


def main():
    files = make_inputs()
    names = sorted(files)
    out = os.path.join(HERE, "image_ref.h5")
    rgb = {n: Image.open(files[n]).convert("RGB") for n in names}
    groups = {"decode": ([], []), "resize": ([], []), "pipeline": ([], [])}

    def add(group, arr, row):
        data, index = groups[group]
        off = sum(a.size for a in data)
        data.append(np.ascontiguousarray(arr, np.uint8).ravel())
        index.append([off, arr.shape[0], arr.shape[1]] + row)

    for i, n in enumerate(names):
        add("decode", np.asarray(rgb[n]), [i])
    for i, n in enumerate(names):
        w, h = rgb[n].size
        for fi, filt in enumerate(("bilinear", "bicubic")):
            for (nw, nh) in [(max(1, w // 3), max(1, h // 2 + 1)), (w // 2 + 9, max(1, h // 3))]:
                add("resize", np.asarray(rgb[n].resize((nw, nh), FILTERS[filt])), [i, fi])
    configs = [("timm", "bicubic", 32, 0.9), ("timm", "bicubic", 24, 0.875),
               ("timm", "bilinear", 20, 1.0), ("hf", "bilinear", 32, 0.0),
               ("hf", "bicubic", 28, 0.0)]
    cases = [(i, c) for i in range(len(names)) for c in configs]
    # one 224 x 224 timm pipeline (the ViT input size)
    cases.append((names.index("messi_rgb_131x53.jpg"), ("timm", "bicubic", 224, 0.9)))
    for i, (mode, interp, size, crop_pct) in cases:
        if mode == "timm":
            t = transforms.Compose([transforms.Resize(math.floor(size / crop_pct),
                                                      interpolation=TV[interp]),
                                    transforms.CenterCrop(size)])
        else:
            t = transforms.Resize((size, size), interpolation=TV[interp])
        add("pipeline", np.asarray(t(rgb[names[i]])),
            [i, int(mode == "hf"), int(interp == "bicubic"), int(round(crop_pct * 1000))])
    with h5py.File(out, "w") as f:
        f.attrs["pil"] = Image.__version__
        f.attrs["torchvision"] = torchvision.__version__
        f.attrs["script"] = "tests/ref/make_image_ref.py"
        f.create_dataset("files", data=np.array([n.encode() for n in names],
                                                dtype=h5py.string_dtype("utf-8")))
        for g, (data, index) in groups.items():
            f.create_dataset(g + "/data", data=np.concatenate(data), compression="gzip",
                             compression_opts=9)
            f.create_dataset(g + "/index", data=np.array(index, np.int64))
    total = os.path.getsize(out) + sum(os.path.getsize(p) for p in files.values())
    print("%s + %d images: %d bytes (%d decode, %d resize, %d pipeline cases)"
          % (out, len(files), total, len(groups["decode"][1]), len(groups["resize"][1]),
             len(groups["pipeline"][1])))


if __name__ == "__main__":
    main()
