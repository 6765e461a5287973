#!/usr/bin/python3
"""BERT's tokenizer restated in plain Python, and the fixture tests/ref/wordpiece_tiny.h5.

The reference is a re-statement (not a copy) of HF transformers' BertTokenizer as
PreTrainedTokenizer.tokenize drives it (src/transformers/tokenization_utils.py and
models/bert/tokenization_bert.py; no `transformers` package exists in Debian):
  tokenize(text):
    * with do_lower_case, every character outside the special tokens is lowered on its own
      (the re.sub(r"(specials)|(.+?)", ...) of tokenize(): one character per match);
    * the text is cut at the special tokens (added-tokens trie, case-sensitive), which are kept
      whole; every other piece goes through BasicTokenizer (never_split = the specials) and
      WordpieceTokenizer;
  BasicTokenizer: _clean_text, _tokenize_chinese_chars, whitespace split, per token lower()
      and/or _run_strip_accents (NFD, drop Mn), _run_split_on_punc, whitespace split;
  WordpieceTokenizer: > 100 characters -> [UNK]; greedy longest match first with "##"; no
      match at some position -> the whole word is [UNK];
  encode(a, b, max_len): truncation=True, max_length=max_len: single: first max_len-2 pieces;
      pair: "longest_first", one piece at a time from the longer (from b on a tie); then
      [CLS] a [SEP] (b [SEP]), token types 0/1, padding with [PAD].

The fixture (written by `/usr/bin/python3 tests/ref/wordpiece_ref.py`, Debian python3; needs only h5py and numpy):
  /vocab                 string [V] a vocab built by build_vocab() from real sentences
  /cases/text            uint8 bytes of every input, /cases/offsets int64 [N+1]
  /cases/options         int8 [N,4]: do_lower_case, strip_accents (-1 None, 0, 1),
                         tokenize_chinese_chars, max_len (0: tokenize only, ids w/o specials)
  /cases/ids             int16, /cases/ids_offsets int64 [N+1] the expected ids (encode:
                         up to the padding); /cases/error int8 [N] 1 = invalid UTF-8
  /cases/kind            int8 [N]: 0 real sentence, 1 hand-made string
  /pairs/a, /pairs/a_offsets, /pairs/b, /pairs/b_offsets, /pairs/max_len int32 [P],
  /pairs/ids int16 [P, max], /pairs/types int8 [P, max], /pairs/len int32 [P]
Every code point of the inputs must have the same general category in this Python's
unicodedata as in Debian's UnicodeData.txt (hydra's tables); the script stops otherwise.
"""
import collections
import gzip
import os
import re
import sys
import unicodedata

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return any(a <= cp <= b for a, b in CJK)


class Bert:
    def __init__(self, vocab, do_lower_case=True, strip_accents=None,
                 tokenize_chinese_chars=True, max_chars=100):
        self.vocab = vocab            # token -> id (the last line wins, as a dict does)
        self.lower = do_lower_case
        self.strip = strip_accents
        self.chinese = tokenize_chinese_chars
        self.max_chars = max_chars

    # --- BasicTokenizer ---
    def clean(self, text):
        out = []
        for ch in text:
            if ord(ch) == 0 or ord(ch) == 0xFFFD or is_control(ch):
                continue
            out.append(" " if is_whitespace(ch) else ch)
        return "".join(out)

    def space_cjk(self, text):
        return "".join(" %s " % ch if is_cjk(ord(ch)) else ch for ch in text)

    @staticmethod
    def strip_accents_of(tok):
        return "".join(c for c in unicodedata.normalize("NFD", tok)
                       if unicodedata.category(c) != "Mn")

    @staticmethod
    def split_punc(tok):
        words, new = [], True
        for ch in tok:
            if is_punctuation(ch):
                words.append(ch)
                new = True
            else:
                if new:
                    words.append("")
                new = False
                words[-1] += ch
        return words

    def basic(self, text):
        text = self.clean(text)
        if self.chinese:
            text = self.space_cjk(text)
        out = []
        for tok in text.split():
            if tok in SPECIALS:       # never_split: kept as it is
                out.append(tok)
                continue
            if self.lower:
                tok = tok.lower()
                if self.strip is not False:
                    tok = self.strip_accents_of(tok)
            elif self.strip:
                tok = self.strip_accents_of(tok)
            out.extend(self.split_punc(tok))
        return " ".join(out).split()

    # --- WordpieceTokenizer ---
    def wordpiece(self, word):
        if len(word) > self.max_chars:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end, cur = len(word), None
            while start < end:
                sub = word[start:end]
                if start > 0:
                    sub = "##" + sub
                if sub in self.vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return ["[UNK]"]
            pieces.append(cur)
            start = end
        return pieces

    # --- PreTrainedTokenizer.tokenize ---
    def tokenize(self, text):
        pat = "(" + "|".join(re.escape(s) for s in SPECIALS) + ")"
        if self.lower:
            text = re.sub(pat + "|(.+?)", lambda m: m.group(1) or m.group(2).lower(), text)
        toks = []
        for i, piece in enumerate(re.split(pat, text)):
            if i % 2 == 1:
                toks.append(piece)
            elif piece:
                for w in self.basic(piece):
                    toks.extend(self.wordpiece(w))
        return toks

    def ids(self, toks):
        unk = self.vocab["[UNK]"]
        return [self.vocab.get(t, unk) for t in toks]

    def encode(self, a, b=None, max_len=None):
        ia = self.ids(self.tokenize(a))
        ib = self.ids(self.tokenize(b)) if b is not None else None
        if b is None:
            ia = ia[:max_len - 2]
            ids = [self.vocab["[CLS]"]] + ia + [self.vocab["[SEP]"]]
            types = [0] * len(ids)
        else:
            while len(ia) + len(ib) > max_len - 3:
                if len(ia) > len(ib):
                    ia = ia[:-1]
                else:
                    ib = ib[:-1]
            cls, sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
            ids = [cls] + ia + [sep] + ib + [sep]
            types = [0] * (len(ia) + 2) + [1] * (len(ib) + 1)
        return ids, types


def load_vocab_lines(lines):
    return {t: i for i, t in enumerate(lines)}


# ===== the fixture =====

DATA = os.environ.get("HYDRA_DATA_DIR", "/work/shared/data")


def raw_lines(path, col=None, skip_header=False, limit=None, stride=1):
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rb") as f:
        lines = f.read().split(b"\n")
    if skip_header:
        lines = lines[1:]
    for k, line in enumerate(lines):
        if k % stride or not line.strip():
            continue
        if col is not None:
            line = line.split(b"\t")[col]
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        if limit and len(out) >= limit:
            break
    return out


def real_sentences():
    s = []
    s += raw_lines(DATA + "/sst2/dev.tsv", col=1, skip_header=True, limit=250, stride=3)
    s += raw_lines(DATA + "/uci-sentences/yelp_labelled.txt", col=0, limit=150, stride=5)
    s += raw_lines(DATA + "/uci-sentences/amazon_cells_labelled.txt", col=0, limit=150, stride=5)
    s += raw_lines(DATA + "/uci-sentences/imdb_labelled.txt", col=0, limit=100, stride=7)
    s += raw_lines(DATA + "/agnews/test.tsv", col=0, limit=200, stride=37)
    s += raw_lines(DATA + "/trec/TREC.test.all", limit=100, stride=5)
    s += raw_lines(DATA + "/multi30k/test_2016_flickr.en.gz", limit=100, stride=9)
    return s


def vocab_corpus():
    """Sentences the vocab is built from (disjoint sampling from real_sentences())."""
    s = []
    s += raw_lines(DATA + "/sst2/train.tsv", col=1, skip_header=True, limit=6000, stride=11)
    s += raw_lines(DATA + "/agnews/test.tsv", col=0, limit=1500, stride=5)
    s += raw_lines(DATA + "/uci-sentences/yelp_labelled.txt", col=0)
    s += raw_lines(DATA + "/trec/TREC.train.all", limit=1500, stride=3)
    return s


def build_vocab(corpus, extra_chars):
    """Deterministic: specials at non-default positions, 1,800 words, every character seen >= 3
    times (plus extra_chars) alone and as ##c, and 800 frequent word suffixes / prefixes."""
    basic = Bert({}, do_lower_case=True)
    words = collections.Counter()
    for line in corpus:
        for w in basic.basic(line):
            words[w] += 1
    chars = collections.Counter()
    for w, c in words.items():
        for ch in w:
            chars[ch] += c
    top = [w for w, _ in sorted(words.items(), key=lambda x: (-x[1], x[0]))][:1800]
    topset = set(top)
    subs = collections.Counter()
    for w, c in words.items():
        if w in topset or len(w) < 5:
            continue
        for k in (2, 3, 4):
            subs["##" + w[-k:]] += c
            subs[w[:k]] += c
    sub = [s for s, _ in sorted(subs.items(), key=lambda x: (-x[1], x[0]))][:800]
    ch = sorted(set(c for c, n in chars.items() if n >= 3) | set(extra_chars))
    out = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen = set(out)
    for t in top + sub + ch + ["##" + c for c in ch]:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


HARD = [
    # accents, case, normalisation
    "Café naïve Ångström résumé Zürich façade crème brûlée ÉCOLE",
    "Tiếng Việt có dấu: Người Việt Nam", "e\u0301\u0323 a\u0323\u0301 o\u0308\u0304",
    "ΟΔΟΣ ΣΟΦΙΑ σοφία Ἀθῆναι", "İstanbul ıi İI", "Straße STRASSE \u1e9e", "ǄǅǆǇ Ǳǲ",
    "ﬁne ﬂow ﬀ", "ＡＢＣ！？ｘｙｚ", "Ⅻ ⅻ Ⓐⓑ", "x² + y³ = z½", "Ωmega Kelvin \u212a \u2126",
    "Ñandú pingüino Ñ", "Æsir Œuvre Øre Þórr ðe ł Ł", "ÀÁÂÃÄÅ àáâãäå ÇçÈÉÊË",
    # scripts with marks
    "हिन्दी भाषा", "العَرَبِيَّة", "עִבְרִית", "ภาษาไทย", "한국어 텍스트 한글", "ᄒ ᅡ ᆫ",
    "日本語のテキスト カタカナ ひらがな", "中文字符串测试", "𠀀𠀁 𪜀 豈更", "ㄅㄆㄇ", "丽 丸",
    "中文mixed英文text", "Русский текст ЁЖИК ёжик", "Ελληνικά", "Հայերեն", "ქართული",
    # ASCII punctuation that is not P*
    "a$b^c|d~e", "`quoted` +plus+ <angle> =eq=", "$100 ^caret |pipe| ~tilde~",
    "1+1=2 <=> x^y", "hello!!!world???", "...---...", "e-mail e.g. U.S.A. it's can't",
    "@user #hashtag &amp; 50%", "path/to/file.txt C:\\dir\\x", "{json: [1, 2]}",
    # Unicode punctuation and symbols
    "«guillemets» „Anführung“ “curly” ‘single’", "em—dash en–dash … ellipsis",
    "‰ ‱ ¿Qué? ¡Hola! 、。「」『』", "‹a› •bullet· ※ ‖ §1 ¶2 † ‡",
    "€100 £50 ¥20 © ® ™ ° ± × ÷", "→ ← ★ ☆ ♥ ✓ ∑ ∞ √", "😀 emoji 🎉 party 👍🏽",
    "price: ₹500 ₩1000 ₿", "quote: \u2018x\u2019 \u201cy\u201d", "\u2e2e reversed?",
    # whitespace and control characters
    "tab\there\nnewline\r\ncr", "nul\x00char", "ctl\x01\x02\x03x", "del\x7fx",
    "nel\x85x", "zw\u200bsp", "zw\u200dj", "bom\ufeffx", "rep\ufffdx", "soft\u00adhyphen",
    "line\u2028sep", "para\u2029sep", "fs\x1cgs\x1drs\x1eus\x1fx", "vt\x0bff\x0cx",
    "nb\u00a0sp", "ideo\u3000space", "thin\u2009space", "pua\ue000x", "unassigned\U000e0080x",
    "   leading and trailing   ", "", " ", "\t\n\r", "\x00\x00",
    # long words, unmatchable tails, specials
    "a" * 100, "a" * 101, "b" * 99 + "é", "é" * 101, "x" * 250,
    "hello\u0fff", "the\u2603", "goodqqqqzzzz", "zzzz", "qxqxqxq", "the☃snow",
    "[CLS] hello [SEP]", "foo[SEP]bar", "[cls] [Cls]", "[MASK]ed [MASK]", "[UN\x00K]",
    "[PAD][PAD]", "[SEP", "[[CLS]]", "[UNK]", "x[MASK]y[UNK]z", "[ CLS ]",
    "##ing ##", "#hash ##tag", "un##do",
]


def hard_strings():
    out = list(HARD)
    # real words combined with the awkward characters above
    for w in ["movie", "the", "good", "bad", "film", "acting"]:
        for c in ["é", "$", "|", "~", "^", "—", "…", "中", "\u0301", "\x01", "\u00a0", "!"]:
            out.append(w + c + w.upper())
            out.append(c + w + " " + w + c)
    return out


def check_categories(strings):
    cats = {}
    with open("/usr/share/unicode/UnicodeData.txt", encoding="ascii") as f:
        first = None
        for line in f:
            p = line.split(";")
            cp = int(p[0], 16)
            if p[1].endswith(", First>"):
                first = cp
                continue
            for c in range(first if p[1].endswith(", Last>") else cp, cp + 1):
                cats[c] = p[2]
            first = None
    for s in strings:
        for ch in s:
            a, b = unicodedata.category(ch), cats.get(ord(ch), "Cn")
            if a != b:
                sys.exit("U+%04X: Python %s says %s, UnicodeData.txt %s: leave it out"
                         % (ord(ch), unicodedata.unidata_version, a, b))


def main():
    import h5py
    import numpy as np
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "wordpiece_tiny.h5")
    real = real_sentences()
    hard = hard_strings()
    check_categories(real + hard)
    extra = sorted(set("".join(HARD)) - set("☃\u0fffqzZQ"))
    tokens = build_vocab(vocab_corpus(), [c for c in extra if not is_control(c)
                                          and not is_whitespace(c)])
    vocab = load_vocab_lines(tokens)
    opts_all = [(1, -1, 1), (0, -1, 1), (1, 0, 1), (0, 1, 1), (1, -1, 0)]
    cases = []   # (bytes, options, kind)
    for k, s in enumerate(real):
        cases.append((s.encode(), (1, -1, 1, 0 if k % 4 else 32), 0))
        if k % 5 == 0:
            cases.append((s.encode(), (0, -1, 1, 0), 0))
    for k, s in enumerate(hard):
        for j, o in enumerate(opts_all if k < len(HARD) else opts_all[:1]):
            cases.append((s.encode(), o + (0 if (k + j) % 3 else 16,), 1))
    # invalid UTF-8: refused (hydra's choice; Python's strict decoder refuses the same bytes)
    for b in [b"bad \xff byte", b"trunc \xe2\x82", b"overlong \xc0\xaf", b"surrogate \xed\xa0\x80",
              b"big \xf4\x90\x80\x80", b"lone \x80 cont", b"ok then \xe2"]:
        try:
            b.decode("utf-8")
            sys.exit("expected invalid UTF-8: %r" % b)
        except UnicodeDecodeError:
            pass
        cases.append((b, (1, -1, 1, 0), 1))
    text, offs, opts, ids, ioffs, err, kind = b"", [0], [], [], [0], [], []
    for b, o, kd in cases:
        text += b
        offs.append(len(text))
        opts.append(o)
        kind.append(kd)
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            err.append(1)
            ioffs.append(len(ids))
            continue
        err.append(0)
        t = Bert(vocab, do_lower_case=bool(o[0]),
                 strip_accents=None if o[1] < 0 else bool(o[1]), tokenize_chinese_chars=bool(o[2]))
        r = t.encode(s, max_len=o[3])[0] if o[3] else t.ids(t.tokenize(s))
        ids.extend(r)
        ioffs.append(len(ids))
    assert max(ids) < 32768
    pairs = [(real[i], real[i + 1], m) for i, m in zip(range(0, 120, 2), [8, 12, 16, 24, 64] * 12)]
    pairs += [(hard[i], hard[-1 - i], 10) for i in range(0, 40, 4)]
    pairs += [(real[i], real[i], 9 + i % 4) for i in range(200, 210)]   # ties: b loses first
    pmax = max(p[2] for p in pairs)
    pa, pao, pb, pbo, pml = b"", [0], b"", [0], []
    pids = np.zeros((len(pairs), pmax), np.int16)
    ptyp = np.zeros((len(pairs), pmax), np.int8)
    plen = []
    t = Bert(vocab)
    for k, (a, b, m) in enumerate(pairs):
        pa += a.encode()
        pao.append(len(pa))
        pb += b.encode()
        pbo.append(len(pb))
        pml.append(m)
        i, ty = t.encode(a, b, m)
        pids[k, :len(i)] = i
        ptyp[k, :len(ty)] = ty
        plen.append(len(i))
    def put(grp, name, arr):
        grp.create_dataset(name, data=arr, compression="gzip", compression_opts=9)

    with h5py.File(out, "w") as f:
        f.create_dataset("vocab", data=np.array([x.encode() for x in tokens],
                                                dtype=h5py.string_dtype("utf-8")))
        g = f.create_group("cases")
        put(g, "text", np.frombuffer(text, np.uint8))
        put(g, "offsets", np.array(offs, np.int64))
        put(g, "options", np.array(opts, np.int8))
        put(g, "ids", np.array(ids, np.int16))
        put(g, "ids_offsets", np.array(ioffs, np.int64))
        put(g, "error", np.array(err, np.int8))
        put(g, "kind", np.array(kind, np.int8))
        p = f.create_group("pairs")
        put(p, "a", np.frombuffer(pa, np.uint8))
        put(p, "a_offsets", np.array(pao, np.int64))
        put(p, "b", np.frombuffer(pb, np.uint8))
        put(p, "b_offsets", np.array(pbo, np.int64))
        put(p, "max_len", np.array(pml, np.int32))
        put(p, "ids", pids)
        put(p, "types", ptyp)
        put(p, "len", np.array(plen, np.int32))
        f.attrs["python_unicodedata"] = unicodedata.unidata_version
        f.attrs["script"] = "tests/ref/wordpiece_ref.py"
    nunk = sum(1 for x in ids if x == vocab["[UNK]"])
    print("%s: vocab %d, %d cases (%d real, %d hand-made), %d pairs, %d ids (%d [UNK]), %d bytes"
          % (out, len(tokens), len(cases), kind.count(0), kind.count(1), len(pairs), len(ids),
             nunk, os.path.getsize(out)))


if __name__ == "__main__":
    main()
