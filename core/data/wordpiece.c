/* wordpiece.c: BERT's BasicTokenizer + WordPiece (see wordpiece.h for the exact steps).
 * Text is decoded to code points once; words are code-point arrays; vocab lookups re-encode a
 * piece to UTF-8 in a scratch buffer. */
#include "data/wordpiece.h"

#include <stdio.h>
#include <string.h>

#include "data/unitab.h"
#include "io/hash.h"
#include "io/textfile.h"

static const char *const SPECIALS[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* ===== UTF-8 ===== */

static size_t utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ===== vocabulary ===== */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    return h;
}

int32_t hy_wordpiece_lookup(const hy_wordpiece *wp, const char *s, size_t len) {
    if (!wp->nslots) return -1;
    size_t mask = wp->nslots - 1;
    for (size_t h = (size_t)fnv1a(s, len) & mask;; h = (h + 1) & mask) {
        int32_t id = wp->slots[h];
        if (id < 0) return -1;
        const char *t = wp->bytes.data + wp->off[id];
        if (strlen(t) == len && memcmp(t, s, len) == 0) return id;
    }
}

const char *hy_wordpiece_token(const hy_wordpiece *wp, size_t id) {
    return id < wp->n ? wp->bytes.data + wp->off[id] : NULL;
}

void hy_wordpiece_release(hy_wordpiece *wp) {
    if (!wp) return;
    hy_buf_release(&wp->bytes);
    hy_free(wp->off);
    hy_free(wp->slots);
    memset(wp, 0, sizeof *wp);
}

/* Indexes the n tokens already in wp->bytes / wp->off; a repeated token maps to its last id. */
static hy_status index_tokens(hy_wordpiece *wp, const char *what) {
    size_t ns = 16;
    while (ns < 2 * wp->n) ns <<= 1;
    wp->slots = hy_xmalloc(ns * sizeof *wp->slots);
    if (!wp->slots) return HY_ENOMEM;
    memset(wp->slots, 0xFF, ns * sizeof *wp->slots);
    wp->nslots = ns;
    for (size_t i = 0; i < wp->n; i++) {
        const char *t = wp->bytes.data + wp->off[i];
        size_t len = strlen(t);
        for (size_t h = (size_t)fnv1a(t, len) & (ns - 1);; h = (h + 1) & (ns - 1)) {
            int32_t id = wp->slots[h];
            if (id < 0 || strcmp(wp->bytes.data + wp->off[id], t) == 0) {
                wp->slots[h] = (int32_t)i;
                break;
            }
        }
    }
    int32_t *sp[5] = {&wp->pad_id, &wp->unk_id, &wp->cls_id, &wp->sep_id, &wp->mask_id};
    for (size_t k = 0; k < 5; k++)
        *sp[k] = hy_wordpiece_lookup(wp, SPECIALS[k], strlen(SPECIALS[k]));
    if (wp->unk_id < 0)
        return hy_fail(HY_EINVAL, "wordpiece: %s has no [UNK] token (%zu tokens)", what, wp->n);
    wp->do_lower_case = 1;
    wp->strip_accents = -1;
    wp->tokenize_chinese_chars = 1;
    wp->max_chars = 100;
    return HY_OK;
}

static hy_status add_token(hy_wordpiece *wp, size_t *cap, const char *s, size_t len) {
    if (wp->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        int64_t *o = hy_xrealloc(wp->off, nc * sizeof *o);
        if (!o) return HY_ENOMEM;
        wp->off = o;
        *cap = nc;
    }
    wp->off[wp->n] = (int64_t)wp->bytes.len;
    HY_TRY(hy_buf_put(&wp->bytes, s, len));
    HY_TRY(hy_buf_putc(&wp->bytes, '\0'));
    wp->n++;
    return HY_OK;
}

hy_status hy_wordpiece_from_tokens(hy_wordpiece *wp, const char *const *tok, size_t n,
                                   const char *what) {
    memset(wp, 0, sizeof *wp);
    size_t cap = 0;
    hy_status st = HY_OK;
    if (n == 0) st = hy_fail(HY_EINVAL, "wordpiece: %s is empty", what);
    for (size_t i = 0; i < n && st == HY_OK; i++) {
        size_t len = strlen(tok[i]);
        if (hy_utf8_bad(tok[i], len) != len)
            st = hy_fail(HY_EINVAL, "wordpiece: %s token %zu is not valid UTF-8", what, i);
        else if (strpbrk(tok[i], "\n\r"))
            st = hy_fail(HY_EINVAL, "wordpiece: %s token %zu holds a line break", what, i);
        else
            st = add_token(wp, &cap, tok[i], len);
    }
    if (st == HY_OK) st = index_tokens(wp, what);
    if (st != HY_OK) hy_wordpiece_release(wp);
    return st;
}

hy_status hy_wordpiece_load(hy_wordpiece *wp, const char *path) {
    memset(wp, 0, sizeof *wp);
    hy_buf all = {0};
    hy_status st = hy_file_read(&all, path, "wordpiece");
    if (st == HY_OK && all.len == 0) st = hy_fail(HY_EINVAL, "wordpiece: '%s' is empty", path);
    size_t cap = 0, line = 1;
    for (size_t i = 0; st == HY_OK && i < all.len; line++) {
        size_t j = i;
        while (j < all.len && all.data[j] != '\n' && all.data[j] != '\r') j++;
        if (hy_utf8_bad(all.data + i, j - i) != j - i)
            st = hy_fail(HY_EINVAL, "wordpiece: '%s' line %zu is not valid UTF-8", path, line);
        else
            st = add_token(wp, &cap, all.data + i, j - i);
        if (j < all.len && all.data[j] == '\r' && j + 1 < all.len && all.data[j + 1] == '\n') j++;
        i = j + 1;
    }
    hy_buf_release(&all);
    if (st == HY_OK) {
        char what[600];
        snprintf(what, sizeof what, "'%s'", path);
        st = index_tokens(wp, what);
    }
    if (st != HY_OK) hy_wordpiece_release(wp);
    return st;
}

void hy_wordpiece_sha256(const hy_wordpiece *wp, char out[65]) {
    hy_sha256 h;
    uint8_t d[32];
    hy_sha256_init(&h);
    for (size_t i = 0; i < wp->n; i++) {
        const char *t = wp->bytes.data + wp->off[i];
        hy_sha256_update(&h, t, strlen(t));
        hy_sha256_update(&h, "\n", 1);
    }
    hy_sha256_final(&h, d);
    hy_hash_hex(d, 32, out);
}

/* ===== tokenizer ===== */

void hy_i32s_release(hy_i32s *a) {
    if (!a) return;
    hy_free(a->v);
    memset(a, 0, sizeof *a);
}

static hy_status i32s_push(hy_i32s *a, int32_t x) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 64;
        int32_t *v = hy_xrealloc(a->v, nc * sizeof *v);
        if (!v) return HY_ENOMEM;
        a->v = v;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return HY_OK;
}

/* Scratch of one tokenize call: code-point arrays and a byte buffer for lookups. */
typedef struct {
    uint32_t *w;      /* the current word (after lowering / accent stripping) */
    size_t wn, wcap;
    uint32_t *t;      /* NFD scratch */
    size_t tcap;
    char *b;          /* UTF-8 of a candidate piece */
    size_t bcap;
} scratch;

static hy_status grow_u32(uint32_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return HY_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    uint32_t *q = hy_xrealloc(*p, nc * sizeof *q);
    if (!q) return HY_ENOMEM;
    *p = q;
    *cap = nc;
    return HY_OK;
}

/* WordPiece of word cps[0..n) (no PUNCT or space inside), ids appended to out. */
static hy_status wordpiece_word(const hy_wordpiece *wp, scratch *sc, const uint32_t *cps,
                                size_t n, hy_i32s *out) {
    if (n == 0) return HY_OK;
    if (n > wp->max_chars) return i32s_push(out, wp->unk_id);
    /* sc->b = 2 spare bytes, then the word's UTF-8; boff[k] = offset of cps[k] after them.
     * A continuing piece "##" cps[start..end) is written over the 2 bytes before cps[start]
     * (earlier pieces are done with by then). */
    size_t need = 4 * n + 2;
    if (need > sc->bcap) {
        char *b = hy_xrealloc(sc->b, need);
        if (!b) return HY_ENOMEM;
        sc->b = b;
        sc->bcap = need;
    }
    HY_TRY(grow_u32(&sc->t, &sc->tcap, n + 1));
    uint32_t *boff = sc->t;
    size_t blen = 0;
    for (size_t k = 0; k < n; k++) {
        boff[k] = (uint32_t)blen;
        blen += utf8_put(sc->b + 2 + blen, cps[k]);
    }
    boff[n] = (uint32_t)blen;
    size_t mark = out->n;
    for (size_t start = 0; start < n;) {
        size_t pre = start > 0 ? 2 : 0;
        char *piece = sc->b + 2 + boff[start] - pre;
        if (pre) { piece[0] = '#'; piece[1] = '#'; }
        int32_t id = -1;
        size_t end = n;
        for (; end > start; end--) {
            id = hy_wordpiece_lookup(wp, piece, pre + boff[end] - boff[start]);
            if (id >= 0) break;
        }
        if (id < 0) {   /* no piece matches here: the whole word is [UNK] */
            out->n = mark;
            return i32s_push(out, wp->unk_id);
        }
        HY_TRY(i32s_push(out, id));
        start = end;
    }
    return HY_OK;
}

/* Accent stripping of sc->w in place: NFD (decomposition + canonical ordering), drop Mn. */
static hy_status strip_accents(scratch *sc) {
    HY_TRY(grow_u32(&sc->t, &sc->tcap, sc->wn * HY_UC_NFD_MAX + 1));
    size_t m = 0;
    for (size_t i = 0; i < sc->wn; i++) m += hy_uc_nfd(sc->w[i], sc->t + m);
    /* canonical ordering: a stable insertion sort of every run of non-starters by ccc */
    for (size_t i = 1; i < m; i++) {
        int c = hy_uc_ccc(sc->t[i]);
        if (c == 0) continue;
        uint32_t x = sc->t[i];
        size_t j = i;
        while (j > 0 && hy_uc_ccc(sc->t[j - 1]) > c) { sc->t[j] = sc->t[j - 1]; j--; }
        sc->t[j] = x;
    }
    HY_TRY(grow_u32(&sc->w, &sc->wcap, m + 1));
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (hy_uc_class_of(sc->t[i]) != HY_UC_MN) sc->w[k++] = sc->t[i];
    sc->wn = k;
    return HY_OK;
}

/* One whitespace-separated word cps[0..n) of the cleaned text: lower / strip accents, split
 * off punctuation, WordPiece each part. */
static hy_status basic_word(const hy_wordpiece *wp, scratch *sc, const uint32_t *cps, size_t n,
                            hy_i32s *out) {
    /* a cleaned word spelling a special token (e.g. "[UN\x01K]") is in BasicTokenizer's
     * never_split: neither lowered nor split, WordPiece'd as it is. With do_lower_case the
     * text was lowered before (step 3), so no word can spell one (they hold capitals). */
    for (size_t k = 0; !wp->do_lower_case && k < 5; k++) {
        size_t sl = strlen(SPECIALS[k]), j = 0;
        if (sl != n) continue;
        while (j < n && cps[j] == (unsigned char)SPECIALS[k][j]) j++;
        if (j == n) {
            HY_TRY(grow_u32(&sc->w, &sc->wcap, n + 1));
            memcpy(sc->w, cps, n * sizeof *cps);
            return wordpiece_word(wp, sc, sc->w, n, out);
        }
    }
    HY_TRY(grow_u32(&sc->w, &sc->wcap, 3 * n + 1));
    sc->wn = 0;
    for (size_t i = 0; i < n; i++) {
        if (wp->do_lower_case) sc->wn += hy_uc_lower(cps[i], sc->w + sc->wn);
        else sc->w[sc->wn++] = cps[i];
    }
    if (wp->do_lower_case ? wp->strip_accents != 0 : wp->strip_accents == 1)
        HY_TRY(strip_accents(sc));
    /* punctuation split; sc->w is not touched by wordpiece_word */
    size_t start = 0;
    for (size_t i = 0; i < sc->wn; i++) {
        hy_uc_class c = hy_uc_class_of(sc->w[i]);
        /* lowering or NFD could in principle yield a space-like code point: split there too */
        if (c == HY_UC_PUNCT || c == HY_UC_SPACE || c == HY_UC_SPLIT) {
            HY_TRY(wordpiece_word(wp, sc, sc->w + start, i - start, out));
            if (c == HY_UC_PUNCT) HY_TRY(wordpiece_word(wp, sc, sc->w + i, 1, out));
            start = i + 1;
        }
    }
    return wordpiece_word(wp, sc, sc->w + start, sc->wn - start, out);
}

/* Steps 4..8 of wordpiece.h on the code points cps[0..n) of a text without special tokens. */
static hy_status basic_text(const hy_wordpiece *wp, scratch *sc, const uint32_t *cps, size_t n,
                            hy_i32s *out) {
    uint32_t *word = NULL;   /* the current word: the kept, non-space code points so far */
    size_t wn = 0, wcap = 0;
    hy_status st = HY_OK;
    for (size_t i = 0; i <= n && st == HY_OK; i++) {
        hy_uc_class c = i < n ? hy_uc_class_of(cps[i]) : HY_UC_SPACE;
        if (c == HY_UC_DROP) continue;
        int cjk = c == HY_UC_CJK && wp->tokenize_chinese_chars;
        if (c == HY_UC_SPACE || c == HY_UC_SPLIT || cjk) {
            if (wn) st = basic_word(wp, sc, word, wn, out);
            wn = 0;
            if (cjk && st == HY_OK) st = basic_word(wp, sc, cps + i, 1, out);
            continue;
        }
        if ((st = grow_u32(&word, &wcap, wn + 1)) != HY_OK) break;
        word[wn++] = cps[i];
    }
    hy_free(word);
    return st;
}

hy_status hy_wordpiece_tokenize(const hy_wordpiece *wp, const char *s, size_t len, hy_i32s *out) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t *cps = hy_xmalloc((len + 1) * sizeof *cps);
    if (!cps) return HY_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = hy_utf8_next(u, len, i, &cps[n]);
        if (!k) {
            hy_free(cps);
            return hy_fail(HY_EINVAL, "wordpiece: invalid UTF-8 at byte %zu (0x%02x)", i, u[i]);
        }
        i += k;
        n++;
    }
    scratch sc = {0};
    size_t mark = out->n;
    hy_status st = HY_OK;
    /* special tokens: literal "[PAD]" ... "[MASK]" cut out, the rest tokenized between them */
    size_t from = 0;
    for (size_t i = 0; i < n && st == HY_OK; i++) {
        if (cps[i] != '[') continue;
        for (size_t k = 0; k < 5; k++) {
            size_t sl = strlen(SPECIALS[k]);
            if (i + sl > n) continue;
            size_t j = 0;
            while (j < sl && cps[i + j] == (unsigned char)SPECIALS[k][j]) j++;
            if (j < sl) continue;
            const int32_t sid[5] = {wp->pad_id, wp->unk_id, wp->cls_id, wp->sep_id, wp->mask_id};
            st = basic_text(wp, &sc, cps + from, i - from, out);
            if (st == HY_OK) st = i32s_push(out, sid[k] >= 0 ? sid[k] : wp->unk_id);
            from = i + sl;
            i = from - 1;
            break;
        }
    }
    if (st == HY_OK) st = basic_text(wp, &sc, cps + from, n - from, out);
    if (st != HY_OK) out->n = mark;
    hy_free(sc.w);
    hy_free(sc.t);
    hy_free(sc.b);
    hy_free(cps);
    return st;
}

hy_status hy_wordpiece_encode(const hy_wordpiece *wp, const char *a, size_t alen, const char *b,
                              size_t blen, size_t max_len, int32_t *ids, int32_t *types,
                              size_t *len, size_t *truncated) {
    size_t nspec = b ? 3 : 2;
    if (wp->cls_id < 0 || wp->sep_id < 0 || wp->pad_id < 0)
        return hy_fail(HY_EINVAL, "wordpiece: the vocab lacks %s (needed to build model inputs)",
                       wp->cls_id < 0 ? "[CLS]" : wp->sep_id < 0 ? "[SEP]" : "[PAD]");
    if (max_len < nspec)
        return hy_fail(HY_EINVAL, "wordpiece: max_len %zu leaves no room for [CLS] and [SEP]",
                       max_len);
    hy_i32s ta = {0}, tb = {0};
    hy_status st = hy_wordpiece_tokenize(wp, a, alen, &ta);
    if (st == HY_OK && b) st = hy_wordpiece_tokenize(wp, b, blen, &tb);
    if (st != HY_OK) { hy_i32s_release(&ta); hy_i32s_release(&tb); return st; }
    size_t budget = max_len - nspec, na = ta.n, nb = tb.n;
    if (!b) {
        if (na > budget) na = budget;
    } else {
        while (na + nb > budget) {
            if (na > nb) na--;
            else nb--;
        }
    }
    if (truncated) *truncated = (ta.n - na) + (tb.n - nb);
    size_t k = 0;
    ids[k] = wp->cls_id;
    if (types) types[k] = 0;
    k++;
    for (size_t i = 0; i < na; i++, k++) { ids[k] = ta.v[i]; if (types) types[k] = 0; }
    ids[k] = wp->sep_id;
    if (types) types[k] = 0;
    k++;
    if (b) {
        for (size_t i = 0; i < nb; i++, k++) { ids[k] = tb.v[i]; if (types) types[k] = 1; }
        ids[k] = wp->sep_id;
        if (types) types[k] = 1;
        k++;
    }
    *len = k;
    for (; k < max_len; k++) { ids[k] = wp->pad_id; if (types) types[k] = 0; }
    hy_i32s_release(&ta);
    hy_i32s_release(&tb);
    return HY_OK;
}
