#!/usr/bin/python3
"""Generates core/data/unitab.c, the Unicode tables of the BERT BasicTokenizer (wordpiece.c),
from Debian's unicode-data files (/usr/share/unicode: UnicodeData.txt, SpecialCasing.txt).

Tables (all sorted, looked up by binary search):
  class runs   [start, class] for every code point 0..0x10FFFF (a run lasts until the next
               start), the class being the first that applies of
               DROP  category C* (Cc Cf Cs Co Cn: unassigned code points included) except
                     \\t \\n \\r, and U+FFFD                (BasicTokenizer._clean_text)
               SPACE \\t \\n \\r, and category Zs             (_is_whitespace -> " ")
               SPLIT other code points Python's str.split() splits on (bidi class WS, B, S)
               PUNCT ASCII 33-47, 58-64, 91-96, 123-126, category P*   (_is_punctuation)
               CJK   the CJK blocks of _is_chinese_char
               MN    category Mn (dropped by _run_strip_accents)
               OTHER the rest
  lower runs   [first, last, stride, delta]: cp in first..last, (cp-first) % stride == 0 maps
               to cp + delta (UnicodeData field 13, simple lowercase)
  lower multi  the unconditional multi-code-point lowercase mappings of SpecialCasing.txt
  nfd          full canonical decomposition of every code point that has one (recursively
               expanded; Hangul syllables are decomposed algorithmically in C)
  ccc runs     [first, last, ccc] for canonical combining class != 0 (canonical ordering)

Run:  /usr/bin/python3 tools/gen_unitab.py > core/data/unitab.c
"""
import hashlib
import sys

UCD = "/usr/share/unicode/"
MAXCP = 0x110000

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
CLASSES = ["OTHER", "DROP", "SPACE", "SPLIT", "PUNCT", "CJK", "MN"]


def read_unicodedata():
    gc = ["Cn"] * MAXCP
    bidi = [""] * MAXCP
    ccc = [0] * MAXCP
    decomp = {}
    lower = {}
    first = None
    with open(UCD + "UnicodeData.txt", encoding="ascii") as f:
        for line in f:
            p = line.rstrip("\n").split(";")
            cp = int(p[0], 16)
            name = p[1]
            if name.endswith(", First>"):
                first = cp
                continue
            lo = first if name.endswith(", Last>") else cp
            first = None
            for c in range(lo, cp + 1):
                gc[c] = p[2]
                bidi[c] = p[4]
                ccc[c] = int(p[3])
            if p[5] and not p[5].startswith("<"):
                decomp[cp] = [int(x, 16) for x in p[5].split()]
            if p[13]:
                lower[cp] = int(p[13], 16)
    return gc, bidi, ccc, decomp, lower


def special_lower():
    out = {}
    with open(UCD + "SpecialCasing.txt", encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            p = [x.strip() for x in line.split(";")]
            # p: code; lower; title; upper; [condition list;]  -- conditional entries skipped
            if len(p) > 4 and p[4]:
                continue
            lw = [int(x, 16) for x in p[1].split()]
            if len(lw) > 1:
                out[int(p[0], 16)] = lw
    return out


def classify(gc, bidi):
    cls = [0] * MAXCP
    cjk = bytearray(MAXCP)
    for a, b in CJK:
        for c in range(a, b + 1):
            cjk[c] = 1
    for c in range(MAXCP):
        g = gc[c]
        if c in (9, 10, 13) or g == "Zs":
            k = "SPACE"
        elif g.startswith("C") or c == 0xFFFD:
            k = "DROP"
        elif bidi[c] in ("WS", "B", "S"):
            k = "SPLIT"
        elif (33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126
              or g.startswith("P")):
            k = "PUNCT"
        elif cjk[c]:
            k = "CJK"
        elif g == "Mn":
            k = "MN"
        else:
            k = "OTHER"
        cls[c] = CLASSES.index(k)
    return cls


def runs(values):
    out = []
    prev = None
    for c, v in enumerate(values):
        if v != prev:
            out.append((c, v))
            prev = v
    return out


def lower_runs(lower):
    items = sorted((cp, lw - cp) for cp, lw in lower.items() if lw != cp)
    out = []
    i = 0
    while i < len(items):
        cp, d = items[i]
        best = (cp, cp, 1, d, 1)
        for stride in (1, 2):
            j = i
            while (j + 1 < len(items) and items[j + 1][0] == items[j][0] + stride
                   and items[j + 1][1] == d):
                j += 1
            if j - i + 1 > best[4]:
                best = (cp, items[j][0], stride, d, j - i + 1)
        out.append(best[:4])
        i += best[4]
    return out


def full_decomp(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for x in decomp[cp]:
        out.extend(full_decomp(x, decomp))
    return out


def ccc_runs(ccc):
    out = []
    c = 0
    while c < MAXCP:
        if ccc[c] == 0:
            c += 1
            continue
        a = c
        while c + 1 < MAXCP and ccc[c + 1] == ccc[a]:
            c += 1
        out.append((a, c, ccc[a]))
        c += 1
    return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def emit_list(w, items, per_line):
    for i in range(0, len(items), per_line):
        w("    " + " ".join(items[i:i + per_line]) + "\n")


def main():
    gc, bidi, ccc, decomp, lower = read_unicodedata()
    cls = classify(gc, bidi)
    cruns = runs(cls)
    lruns = lower_runs(lower)
    multi = special_lower()
    nfd = {cp: full_decomp(cp, decomp) for cp in sorted(decomp)}
    kruns = ccc_runs(ccc)
    pool = []
    index = []
    for cp, seq in nfd.items():
        index.append((cp, len(pool), len(seq)))
        pool.extend(seq)
    maxlen = max(len(s) for s in nfd.values())
    w = sys.stdout.write
    w("/* unitab.c: Unicode tables of the BERT BasicTokenizer (see unitab.h). GENERATED by\n"
      " * tools/gen_unitab.py from Debian unicode-data; do not edit. Inputs (sha256):\n")
    for name in ("UnicodeData.txt", "SpecialCasing.txt"):
        w(" *   %s %s\n" % (name, sha256(UCD + name)))
    w(" */\n#include \"data/unitab.h\"\n\n")
    w("#if HY_UC_NFD_MAX != %d\n#error HY_UC_NFD_MAX of unitab.h does not match the table\n"
      "#endif\n\n" % maxlen)
    w("const size_t hy_uc_nclass_runs = %d;\n" % len(cruns))
    w("const uint32_t hy_uc_class_start[%d] = {\n" % len(cruns))
    emit_list(w, ["0x%X," % c for c, _ in cruns], 10)
    w("};\nconst uint8_t hy_uc_class_value[%d] = {\n" % len(cruns))
    emit_list(w, ["%d," % v for _, v in cruns], 24)
    w("};\n\n")
    w("const size_t hy_uc_nlower_runs = %d;\n" % len(lruns))
    w("const hy_uc_lower_run hy_uc_lower_runs[%d] = {\n" % len(lruns))
    emit_list(w, ["{0x%X, 0x%X, %d, %d}," % r for r in lruns], 4)
    w("};\n\n")
    w("const size_t hy_uc_nlower_multi = %d;\n" % len(multi))
    w("const hy_uc_lower_multi hy_uc_lower_multis[%d] = {\n" % max(1, len(multi)))
    for cp in sorted(multi):
        seq = multi[cp] + [0] * (3 - len(multi[cp]))
        w("    {0x%X, %d, {0x%X, 0x%X, 0x%X}},\n" % (cp, len(multi[cp]), *seq))
    w("};\n\n")
    w("const size_t hy_uc_nnfd = %d;\n" % len(index))
    w("const uint32_t hy_uc_nfd_cp[%d] = {\n" % len(index))
    emit_list(w, ["0x%X," % cp for cp, _, _ in index], 10)
    w("};\n/* offset into hy_uc_nfd_pool << 3 | length */\n")
    w("const uint16_t hy_uc_nfd_at[%d] = {\n" % len(index))
    assert len(pool) < 8192
    emit_list(w, ["%d," % (off << 3 | n) for _, off, n in index], 14)
    w("};\nconst uint32_t hy_uc_nfd_pool[%d] = {\n" % len(pool))
    emit_list(w, ["0x%X," % c for c in pool], 10)
    w("};\n\n")
    w("const size_t hy_uc_nccc_runs = %d;\n" % len(kruns))
    w("const hy_uc_ccc_run hy_uc_ccc_runs[%d] = {\n" % len(kruns))
    emit_list(w, ["{0x%X, 0x%X, %d}," % r for r in kruns], 4)
    w("};\n")


if __name__ == "__main__":
    main()
