/* text.c: see text.h. Sections: buffers, normalisation (attribution / news prefix, characters,
 * tags, tokeniser), corpora, readers, vocabulary, encoding. */
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "hash.h"
#include "rng.h"

const char *const hy_text_reserved[HY_TEXT_NRESERVED] = {"[PAD]", "[UNK]", "[CLS]"};
const char *const HY_TEXT_NORMALIZATION =
    "hydra-text-v1: attribution lines dropped; overstrike resolved; HTML entities decoded and "
    "tags stripped; UTF-8 (else Windows-1252) with Latin-1 letters folded to ASCII and "
    "typographic quotes/dashes to ASCII; lowercase; PTB-like split (n't 's 're 'll 've 'm 'd, "
    "`` '' quotes, punctuation separated, hyphenated words, numbers and abbreviations kept); "
    "whitespace collapsed";

/* ===== buffers ===== */

void hy_buf_release(hy_buf *b) {
    if (!b) return;
    hy_free(b->data);
    memset(b, 0, sizeof *b);
}

static hy_status buf_reserve(hy_buf *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return HY_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = hy_xrealloc(b->data, cap);
    if (!p) return hy_fail(HY_ENOMEM, "text: out of memory (%zu bytes)", cap);
    b->data = p;
    b->cap = cap;
    return HY_OK;
}

static hy_status buf_put(hy_buf *b, const char *s, size_t n) {
    HY_TRY(buf_reserve(b, n));
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return HY_OK;
}

static hy_status buf_putc(hy_buf *b, char c) { return buf_put(b, &c, 1); }

static hy_status buf_set(hy_buf *b, const char *s, size_t n) {
    b->len = 0;
    return buf_put(b, s, n);
}

/* ===== normalisation: step 1, lines ===== */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_lower(int c) { return c >= 'a' && c <= 'z'; }
static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static int is_alpha(int c) { return is_lower(c) || is_upper(c); }
static int is_alnum(int c) { return is_alpha(c) || is_digit(c); }

/* "--" or an em dash (UTF-8 E2 80 94) followed by text: the start of an attribution. */
static int attribution_start(const char *p, const char *e) {
    size_t k;
    if (e - p >= 2 && p[0] == '-' && p[1] == '-') k = 2;
    else if (e - p >= 3 && (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
             (unsigned char)p[2] == 0x94) k = 3;
    else return 0;
    p += k;
    if (p < e && *p == '-') return 0;            /* "---" rules, not attributions */
    while (p < e && is_blank(*p)) p++;
    return p < e;
}

/* Drops attribution lines (see text.h) while copying s into out. */
static hy_status drop_attributions(hy_buf *out, const char *s, size_t n) {
    const char *p = s, *e = s + n;
    int seen_text = 0, in_attr = 0;
    out->len = 0;
    HY_TRY(buf_reserve(out, n));
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        const char *q = p;
        while (q < le && is_blank(*q)) q++;
        int blank = q == le;
        int indented = q > p;
        if (in_attr && indented && !blank) { p = nl ? nl + 1 : e; continue; }
        in_attr = 0;
        if (seen_text && !blank && attribution_start(q, le)) {
            in_attr = 1;
            p = nl ? nl + 1 : e;
            continue;
        }
        HY_TRY(buf_put(out, p, (size_t)(le - p)));
        if (nl) HY_TRY(buf_putc(out, '\n'));
        if (!blank) seen_text = 1;
        p = nl ? nl + 1 : e;
    }
    return HY_OK;
}

/* A news source / dateline prefix ending at a " - " or " -- " separator within the first 80
 * bytes: at most 7 words, no sentence end, each word capitalised, all-caps, a web domain or in
 * parentheses ("LONDON (Reuters) - ", "washingtonpost.com - "). Returns bytes to skip, or 0. */
static size_t news_prefix(const char *s, size_t n) {
    size_t lim = n < 80 ? n : 80;
    for (size_t i = 1; i + 2 < lim; i++) {
        if (s[i] != ' ' || s[i + 1] != '-') continue;
        size_t j = i + 1;
        while (j < n && s[j] == '-') j++;
        if (j - (i + 1) > 2 || j >= n || s[j] != ' ') return 0;
        /* check the words of s[0..i) */
        size_t words = 0, k = 0;
        while (k < i) {
            while (k < i && s[k] == ' ') k++;
            if (k >= i) break;
            size_t w0 = k;
            while (k < i && s[k] != ' ') k++;
            const char *w = s + w0;
            size_t wl = k - w0;
            words++;
            int ok = is_upper(w[0]) || w[0] == '(' || is_digit(w[0]);
            for (size_t t = 0; t + 1 < wl && !ok; t++)
                if (w[t] == '.' && is_alpha(w[t + 1])) ok = 1;          /* usatoday.com */
            if (!ok || (wl >= 2 && w[wl - 1] == '.' && wl > 4)) return 0;
        }
        if (words == 0 || words > 7) return 0;
        while (j < n && s[j] == ' ') j++;
        return j;
    }
    return 0;
}

/* HY_TEXT_NEWS: the span of s without a leading source/dateline prefix (applied up to twice,
 * "SPACE.com - TORONTO, Canada -- ...") and a trailing "Reuter" sign-off. */
static void strip_news(const char **ps, size_t *pn) {
    const char *s = *ps;
    size_t n = *pn;
    for (int rep = 0; rep < 2; rep++) {
        for (;;) {                       /* leading blanks and (escaped) tags: <p>, &lt;p&gt; */
            while (n && (is_blank(*s) || *s == '\n' || *s == '\\' || *s == '"')) { s++; n--; }
            const char *e = NULL;
            if (n > 2 && *s == '<') e = memchr(s, '>', n < 64 ? n : 64);
            else if (n > 8 && memcmp(s, "&lt;", 4) == 0) {
                for (size_t i = 4; i + 4 <= n && i < 64 && !e; i++)
                    if (memcmp(s + i, "&gt;", 4) == 0) e = s + i + 3;
            }
            if (!e) break;
            n -= (size_t)(e + 1 - s);
            s = e + 1;
        }
        size_t k = news_prefix(s, n);
        if (!k) break;
        s += k;
        n -= k;
    }
    for (;;) {
        while (n && (is_blank(s[n - 1]) || s[n - 1] == '\n')) n--;
        if (n >= 4 && s[n - 1] == ';' && s[n - 4] == '&' && s[n - 3] == '#' && is_digit(s[n - 2])) {
            n -= 4;                      /* &#3; end-of-text marks of Reuters-21578 */
            continue;
        }
        if (n >= 6 && (memcmp(s + n - 6, "REUTER", 6) == 0 || memcmp(s + n - 6, "Reuter", 6) == 0) &&
            (n == 6 || is_blank(s[n - 7]) || s[n - 7] == '\n')) {
            n -= 6;
            continue;
        }
        break;
    }
    *ps = s;
    *pn = n;
}

/* ===== normalisation: step 2, characters ===== */

static const char *const latin1_fold[64] = {
    "a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
    "d", "n", "o", "o", "o", "o", "o", "x", "o", "u", "u", "u", "u", "y", "th", "ss",
    "a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
    "d", "n", "o", "o", "o", "o", "o", "/", "o", "u", "u", "u", "u", "y", "th", "y"};

/* Windows-1252 0x80..0x9F (0 = undefined). */
static const uint16_t cp1252[32] = {
    0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039,
    0x0152, 0, 0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178};

/* Removes the last character of b (a whole UTF-8 sequence): the overstrike backspace. */
static void buf_pop_char(hy_buf *b) {
    while (b->len > 0) {
        unsigned char c = (unsigned char)b->data[--b->len];
        if ((c & 0xC0) != 0x80) break;
    }
    if (b->data) b->data[b->len] = '\0';
}

static hy_status emit_utf8(hy_buf *b, uint32_t cp) {
    char u[4];
    size_t k;
    if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    return buf_put(b, u, k);
}

/* Appends code point cp after folding (see text.h step 4). */
static hy_status emit_cp(hy_buf *b, uint32_t cp) {
    if (cp < 0x80) {
        char c = (char)cp;
        if (cp < 0x20 || cp == 0x7F || c == '\\') c = ' ';
        else if (is_upper(c)) c = (char)(c - 'A' + 'a');
        return buf_putc(b, c);
    }
    if (cp < 0xA0) {
        uint16_t m = cp1252[cp - 0x80];
        return m ? emit_cp(b, m) : buf_putc(b, ' ');
    }
    if (cp >= 0xC0 && cp <= 0xFF) {
        const char *f = latin1_fold[cp - 0xC0];
        return buf_put(b, f, strlen(f));
    }
    switch (cp) {
    case 0xA0: case 0x2002: case 0x2003: case 0x2009: case 0x200A: case 0x202F: case 0x3000:
        return buf_putc(b, ' ');
    case 0xAD: case 0x200B: case 0x200C: case 0x200D: case 0xFEFF: return HY_OK;
    case 0xAB: case 0xBB: case 0x201C: case 0x201D: case 0x201E: case 0x201F: case 0x2033:
        return buf_putc(b, '"');
    case 0xB4: case 0x2018: case 0x2019: case 0x201A: case 0x201B: case 0x2032:
        return buf_putc(b, '\'');
    case 0x2010: case 0x2011: case 0x2012: case 0x2013: case 0x2212: return buf_putc(b, '-');
    case 0x2014: case 0x2015: return buf_put(b, " -- ", 4);
    case 0x2026: return buf_put(b, "...", 3);
    case 0x0152: case 0x0153: return buf_put(b, "oe", 2);
    case 0x0160: case 0x0161: return buf_putc(b, 's');
    case 0x017D: case 0x017E: return buf_putc(b, 'z');
    case 0x0178: return buf_putc(b, 'y');
    default: return emit_utf8(b, cp);
    }
}

/* Decodes one valid UTF-8 sequence at s[0..n); returns its length (0 when invalid). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; v = c & 0x1Fu; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; v = c & 0x0Fu; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; v = c & 0x07u; min = 0x10000; }
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return k;
}

static const struct { const char *name; uint32_t cp; } entities[] = {
    {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}, {"nbsp", 0xA0},
    {"mdash", 0x2014}, {"ndash", 0x2013}, {"hellip", 0x2026}, {"lsquo", 0x2018},
    {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D}, {"laquo", 0xAB}, {"raquo", 0xBB},
    {"copy", 0xA9}, {"reg", 0xAE}, {"eacute", 0xE9}, {"egrave", 0xE8}, {"aacute", 0xE1},
    {"agrave", 0xE0}, {"ouml", 0xF6}, {"uuml", 0xFC}, {"auml", 0xE4}, {"ccedil", 0xE7},
    {"ntilde", 0xF1}, {"iacute", 0xED}, {"oacute", 0xF3}, {"uacute", 0xFA}, {"szlig", 0xDF}};

/* A numeric reference "#N;" or "#xH;" at s (after the '&' if any); returns its length. */
static size_t numeric_ref(const char *s, size_t n, uint32_t *cp) {
    if (n < 3 || s[0] != '#') return 0;
    size_t i = 1;
    int hex = 0;
    if (s[1] == 'x' || s[1] == 'X') { hex = 1; i = 2; }
    uint32_t v = 0;
    size_t d0 = i;
    for (; i < n && i - d0 < 7; i++) {
        int c = s[i], dv;
        if (is_digit(c)) dv = c - '0';
        else if (hex && c >= 'a' && c <= 'f') dv = c - 'a' + 10;
        else if (hex && c >= 'A' && c <= 'F') dv = c - 'A' + 10;
        else break;
        v = v * (hex ? 16u : 10u) + (uint32_t)dv;
    }
    if (i == d0 || i >= n || s[i] != ';' || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return i + 1;
}

/* An entity starting at s[0] == '&'; returns its length (0 when none). */
static size_t entity(const char *s, size_t n, uint32_t *cp) {
    size_t k = numeric_ref(s + 1, n - 1, cp);
    if (k) return k + 1;
    for (size_t e = 0; e < sizeof entities / sizeof entities[0]; e++) {
        size_t l = strlen(entities[e].name);
        if (n >= l + 2 && s[l + 1] == ';' && memcmp(s + 1, entities[e].name, l) == 0) {
            *cp = entities[e].cp;
            return l + 2;
        }
    }
    return 0;
}

/* Step 2 (characters) then step 3 (tags): s -> out. */
static hy_status clean_chars(hy_buf *out, hy_buf *tmp, const char *s, size_t n) {
    tmp->len = 0;
    HY_TRY(buf_reserve(tmp, n));
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t k;
        int prev_word = i > 0 && is_alnum(s[i - 1]);
        if (c == '&' && (k = entity(s + i, n - i, &cp)) != 0) {
            HY_TRY(emit_cp(tmp, cp));
            i += k;
        } else if (c == '#' && (k = numeric_ref(s + i, n - i, &cp)) != 0 && k >= 4 &&
                   s[i + 1] != 'x' && s[i + 1] != 'X') {
            HY_TRY(emit_cp(tmp, cp));            /* "#39;": an entity that lost its '&' */
            i += k;
        } else if (c == 'q' && !prev_word && n - i >= 5 && memcmp(s + i, "quot;", 5) == 0) {
            HY_TRY(buf_putc(tmp, '"'));
            i += 5;
        } else if (c == 8) {
            buf_pop_char(tmp);                   /* overstrike: x BS y keeps y */
            i++;
        } else if (c < 0x80) {
            HY_TRY(emit_cp(tmp, c));
            i++;
        } else if ((k = utf8_decode((const unsigned char *)s + i, n - i, &cp)) != 0) {
            HY_TRY(emit_cp(tmp, cp));
            i += k;
        } else {
            HY_TRY(emit_cp(tmp, c));             /* not UTF-8: read as Windows-1252 */
            i++;
        }
    }
    /* step 3: tags -> blank */
    out->len = 0;
    HY_TRY(buf_reserve(out, tmp->len));
    const char *t = tmp->data ? tmp->data : "";
    size_t m = tmp->len;
    for (size_t i = 0; i < m; i++) {
        if (t[i] == '<' && i + 1 < m && (is_lower(t[i + 1]) || t[i + 1] == '/' || t[i + 1] == '!')) {
            size_t j = i + 1;
            while (j < m && j - i < 512 && t[j] != '>' && t[j] != '<') j++;
            if (j < m && t[j] == '>') {
                HY_TRY(buf_putc(out, ' '));
                i = j;
                continue;
            }
        }
        HY_TRY(buf_putc(out, t[i]));
    }
    return HY_OK;
}

/* ===== normalisation: step 5, tokens ===== */

static int is_wc(int c) { return is_alnum(c) || c >= 0x80; }

static const char *const abbrevs[] = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "inc", "co", "ltd", "corp", "prof",
    "gen", "sen", "rep", "gov", "mt", "ft", "jan", "feb", "aug", "sept", "oct", "nov", "dec"};

static int is_abbrev(const char *w, size_t n) {
    if (memchr(w, '.', n)) return 1;                   /* u.s -> u.s. */
    for (size_t i = 0; i < sizeof abbrevs / sizeof abbrevs[0]; i++)
        if (strlen(abbrevs[i]) == n && memcmp(abbrevs[i], w, n) == 0) return 1;
    return 0;
}

/* Length of a clitic's letters after an apostrophe at s[0] when they are s|re|ll|ve|m|d and
 * end the word; 0 otherwise. */
static size_t clitic_after(const char *s, const char *e) {
    const char *r = s + 1;
    while (r < e && is_lower(*r)) r++;
    if (r < e && is_wc(*r)) return 0;
    size_t l = (size_t)(r - s - 1);
    const char *w = s + 1;
    if ((l == 1 && (w[0] == 's' || w[0] == 'm' || w[0] == 'd')) ||
        (l == 2 && (memcmp(w, "re", 2) == 0 || memcmp(w, "ll", 2) == 0 || memcmp(w, "ve", 2) == 0)))
        return l;
    return 0;
}

typedef struct tok_state {
    hy_buf *out;
    size_t ntok;
    int opening;      /* the next quote opens (start of a chunk or after an opening bracket) */
    int dq_open;      /* a free-standing '"' opened and has not been closed */
} tok_state;

static hy_status emit_tok(tok_state *st, const char *w, size_t n) {
    if (n == 0) return HY_OK;
    if (st->out->len) HY_TRY(buf_putc(st->out, ' '));
    HY_TRY(buf_put(st->out, w, n));
    st->ntok++;
    st->opening = (n == 1 && (w[0] == '(' || w[0] == '[' || w[0] == '{' || w[0] == '`')) ||
                  (n == 2 && w[0] == '`');
    return HY_OK;
}

static hy_status tokenize_chunk(tok_state *st, const char *a, const char *b) {
    static const struct { const char *esc; const char *br; } brackets[] = {
        {"-lrb-", "("}, {"-rrb-", ")"}, {"-lsb-", "["}, {"-rsb-", "]"}, {"-lcb-", "{"},
        {"-rcb-", "}"}};
    const char *p = a;
    st->opening = 1;
    while (p < b) {
        unsigned char c = (unsigned char)*p;
        if (c == '-' && b - p >= 5) {
            int hit = 0;
            for (size_t i = 0; i < 6 && !hit; i++)
                if (memcmp(p, brackets[i].esc, 5) == 0) {
                    HY_TRY(emit_tok(st, brackets[i].br, 1));
                    p += 5;
                    hit = 1;
                }
            if (hit) continue;
        }
        if (is_wc(c)) {
            const char *q = p, *cl = NULL;
            size_t cll = 0;
            while (q < b) {
                if (is_wc((unsigned char)*q)) { q++; continue; }
                if ((*q == '-' || *q == '.') && q + 1 < b && is_wc((unsigned char)q[1])) { q++; continue; }
                if ((*q == ',' || *q == ':') && is_digit(q[-1]) && q + 1 < b && is_digit(q[1])) {
                    q++;
                    continue;
                }
                if (*q == '\'') {
                    size_t l;
                    if (q[-1] == 'n' && b - q >= 2 && q[1] == 't' && (q + 2 == b || !is_wc((unsigned char)q[2]))) {
                        cl = q - 1;                      /* do|n't */
                        cll = 3;
                        q = q - 1;
                        break;
                    }
                    if ((l = clitic_after(q, b)) != 0) { cl = q; cll = l + 1; break; }
                    if (q + 1 < b && is_wc((unsigned char)q[1])) { q++; continue; }   /* o'clock */
                }
                break;
            }
            size_t wl = (size_t)(q - p);
            if (!cl && q < b && *q == '.' && (q + 1 == b || q[1] != '.') && wl && is_abbrev(p, wl)) {
                q++;
                wl++;
            }
            HY_TRY(emit_tok(st, p, wl));
            p = q;
            if (cl) {
                HY_TRY(emit_tok(st, cl, cll));
                p = cl + cll;
            }
            continue;
        }
        if (c == '\'') {
            size_t l = clitic_after(p, b);
            if (l) {                               /* "you 've", "you'd've" */
                HY_TRY(emit_tok(st, p, l + 1));
                p += l + 1;
                continue;
            }
            const char *q = p;
            while (q < b && *q == '\'') q++;
            int open = st->opening && q < b && is_wc((unsigned char)*q);
            if (q - p >= 2) HY_TRY(emit_tok(st, open ? "``" : "''", 2));
            else HY_TRY(emit_tok(st, open ? "`" : "'", 1));
            p = q;
            continue;
        }
        if (c == '"') {
            int open;
            if (b - a == 1) { open = !st->dq_open; st->dq_open = open; }
            else if (p == a || st->opening) { open = 1; st->dq_open = 1; }
            else { open = 0; st->dq_open = 0; }
            HY_TRY(emit_tok(st, open ? "``" : "''", 2));
            p++;
            continue;
        }
        if (c == '`' || c == '.' || c == '!' || c == '?' || c == '-' || c == '*' || c == '=' ||
            c == '_' || c == '~') {
            const char *q = p;
            while (q < b && *q == (char)c) q++;
            if (c == '`' && q - p > 2) q = p + 2;
            HY_TRY(emit_tok(st, p, (size_t)(q - p)));
            p = q;
            continue;
        }
        HY_TRY(emit_tok(st, p, 1));
        p++;
    }
    return HY_OK;
}

/* HY_TEXT_NEWS: removes the source tags "( reuters )", "( ap )", "( afp )", "( cp )" left
 * inside a record (a headline followed by its dateline) from the normalised text. */
static void drop_source_tags(hy_buf *out, size_t *ntok) {
    static const char *const tags[] = {"( reuters ) ", "( ap ) ", "( afp ) ", "( cp ) "};
    char *d = out->data;
    size_t r = 0, w = 0, n = out->len;
    while (r < n) {
        int hit = 0;
        if (r == 0 || d[r - 1] == ' ')
            for (size_t t = 0; t < 4 && !hit; t++) {
                size_t l = strlen(tags[t]);
                if (r + l - 1 <= n && memcmp(d + r, tags[t], r + l <= n ? l : l - 1) == 0 &&
                    (r + l <= n || r + l - 1 == n)) {
                    r += l;
                    *ntok -= 3;
                    hit = 1;
                }
            }
        if (!hit) d[w++] = d[r++];
    }
    while (w && d[w - 1] == ' ') w--;
    out->len = w;
    d[w] = '\0';
}

static hy_status normalize_into(hy_buf *out, hy_buf *t1, hy_buf *t2, hy_buf *t3, const char *s,
                                size_t n, unsigned flags, size_t *ntok) {
    if (flags & HY_TEXT_NEWS) strip_news(&s, &n);
    HY_TRY(drop_attributions(t1, s, n));
    HY_TRY(clean_chars(t3, t2, t1->data ? t1->data : "", t1->len));
    out->len = 0;
    HY_TRY(buf_reserve(out, t3->len + 16));
    out->data[0] = '\0';
    tok_state st = {out, 0, 1, 0};
    const char *p = t3->data ? t3->data : "", *e = p + t3->len;
    while (p < e) {
        while (p < e && (*p == ' ' || *p == '\n')) p++;
        const char *q = p;
        while (q < e && *q != ' ' && *q != '\n') q++;
        if (q > p) HY_TRY(tokenize_chunk(&st, p, q));
        p = q;
    }
    if ((flags & HY_TEXT_NEWS) && out->len) drop_source_tags(out, &st.ntok);
    if (ntok) *ntok = st.ntok;
    return HY_OK;
}

hy_status hy_text_normalize(hy_buf *out, const char *s, size_t n, unsigned flags, size_t *ntok) {
    hy_buf t1 = {0}, t2 = {0}, t3 = {0};
    hy_status st = normalize_into(out, &t1, &t2, &t3, s, n, flags, ntok);
    hy_buf_release(&t1);
    hy_buf_release(&t2);
    hy_buf_release(&t3);
    return st;
}

/* ===== corpora ===== */

void hy_corpus_release(hy_corpus *c) {
    if (!c) return;
    hy_buf_release(&c->raw);
    hy_buf_release(&c->norm);
    hy_free(c->raw_off);
    hy_free(c->norm_off);
    hy_free(c->ntok);
    hy_free(c->labels);
    memset(c, 0, sizeof *c);
}

static hy_status corpus_grow(hy_corpus *c, size_t need) {
    if (need <= c->cap && c->raw_off) return HY_OK;
    size_t cap = c->cap ? c->cap : 64;
    while (cap < need) cap *= 2;
    int64_t *ro = hy_xrealloc(c->raw_off, (cap + 1) * sizeof *ro);
    if (!ro) return hy_fail(HY_ENOMEM, "text: out of memory (%zu records)", cap);
    c->raw_off = ro;
    int64_t *no = hy_xrealloc(c->norm_off, (cap + 1) * sizeof *no);
    if (!no) return hy_fail(HY_ENOMEM, "text: out of memory (%zu records)", cap);
    c->norm_off = no;
    int32_t *nt = hy_xrealloc(c->ntok, cap * sizeof *nt);
    if (!nt) return hy_fail(HY_ENOMEM, "text: out of memory (%zu records)", cap);
    c->ntok = nt;
    int16_t *lb = hy_xrealloc(c->labels, cap * sizeof *lb);
    if (!lb) return hy_fail(HY_ENOMEM, "text: out of memory (%zu records)", cap);
    c->labels = lb;
    if (c->cap == 0) { c->raw_off[0] = 0; c->norm_off[0] = 0; }
    c->cap = cap;
    return HY_OK;
}

/* Appends a record whose normalisation is already known. */
static hy_status corpus_push(hy_corpus *c, const char *raw, size_t rn, const char *norm,
                             size_t nn, int32_t ntok, int16_t label) {
    HY_TRY(corpus_grow(c, c->n + 1));
    HY_TRY(buf_put(&c->raw, raw, rn));
    HY_TRY(buf_put(&c->norm, norm, nn));
    c->ntok[c->n] = ntok;
    c->labels[c->n] = label;
    c->n++;
    c->raw_off[c->n] = (int64_t)c->raw.len;
    c->norm_off[c->n] = (int64_t)c->norm.len;
    return HY_OK;
}

/* Drops records n0.. (restores c after a failed read). */
static void corpus_truncate(hy_corpus *c, size_t n0) {
    if (n0 >= c->n) return;
    c->n = n0;
    c->raw.len = (size_t)c->raw_off[n0];
    c->norm.len = (size_t)c->norm_off[n0];
    if (c->raw.data) c->raw.data[c->raw.len] = '\0';
    if (c->norm.data) c->norm.data[c->norm.len] = '\0';
}

typedef struct norm_scratch {
    hy_buf out, t1, t2, t3;
} norm_scratch;

static void scratch_release(norm_scratch *s) {
    hy_buf_release(&s->out);
    hy_buf_release(&s->t1);
    hy_buf_release(&s->t2);
    hy_buf_release(&s->t3);
}

static hy_status corpus_add_s(hy_corpus *c, norm_scratch *sc, const char *s, size_t len,
                              int16_t label, unsigned flags) {
    size_t nt = 0;
    HY_TRY(normalize_into(&sc->out, &sc->t1, &sc->t2, &sc->t3, s, len, flags, &nt));
    if (nt > INT32_MAX) return hy_fail(HY_EINVAL, "text: record with %zu tokens", nt);
    return corpus_push(c, s, len, sc->out.data, sc->out.len, (int32_t)nt, label);
}

hy_status hy_corpus_add(hy_corpus *c, const char *s, size_t len, int16_t label, unsigned flags) {
    norm_scratch sc = {0};
    hy_status st = corpus_add_s(c, &sc, s, len, label, flags);
    scratch_release(&sc);
    return st;
}

const char *hy_corpus_raw(const hy_corpus *c, size_t i, size_t *len) {
    HY_ASSERT(i < c->n);
    *len = (size_t)(c->raw_off[i + 1] - c->raw_off[i]);
    return c->raw.data + c->raw_off[i];
}

const char *hy_corpus_norm(const hy_corpus *c, size_t i, size_t *len) {
    HY_ASSERT(i < c->n);
    *len = (size_t)(c->norm_off[i + 1] - c->norm_off[i]);
    return c->norm.data + c->norm_off[i];
}

static hy_status push_from(hy_corpus *dst, const hy_corpus *src, size_t i) {
    size_t rl, nl;
    const char *r = hy_corpus_raw(src, i, &rl);
    const char *m = hy_corpus_norm(src, i, &nl);
    return corpus_push(dst, r, rl, m, nl, src->ntok[i], src->labels[i]);
}

hy_status hy_corpus_append(hy_corpus *dst, const hy_corpus *src) {
    HY_ASSERT(dst != src);
    size_t n0 = dst->n;
    for (size_t i = 0; i < src->n; i++) {
        hy_status st = push_from(dst, src, i);
        if (st != HY_OK) { corpus_truncate(dst, n0); return st; }
    }
    return HY_OK;
}

hy_status hy_corpus_take(hy_corpus *dst, const hy_corpus *src, const int64_t *idx, size_t k) {
    HY_ASSERT(dst != src);
    hy_corpus_release(dst);
    for (size_t j = 0; j < k; j++)
        if (idx[j] < 0 || (size_t)idx[j] >= src->n)
            return hy_fail(HY_EINVAL, "text: take index %lld out of range [0, %zu)",
                           (long long)idx[j], src->n);
    for (size_t j = 0; j < k; j++) {
        hy_status st = push_from(dst, src, (size_t)idx[j]);
        if (st != HY_OK) { hy_corpus_release(dst); return st; }
    }
    return HY_OK;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

hy_status hy_corpus_split(hy_corpus *rest, hy_corpus *held, const hy_corpus *src, size_t nheld,
                          uint64_t seed, int stratify) {
    HY_ASSERT(rest != held && rest != src && held != src);
    hy_corpus_release(rest);
    hy_corpus_release(held);
    if (nheld > src->n)
        return hy_fail(HY_EINVAL, "text: cannot hold out %zu of %zu records", nheld, src->n);
    size_t n = src->n;
    hy_status st = HY_OK;
    int64_t *idx = hy_xmalloc((n + 1) * sizeof *idx);
    uint8_t *pick = hy_xcalloc(n + 1, 1);
    int64_t *rest_i = hy_xmalloc((n + 1) * sizeof *rest_i);
    int64_t *held_i = hy_xmalloc((nheld + 1) * sizeof *held_i);
    if (!idx || !pick || !rest_i || !held_i) { st = hy_fail(HY_ENOMEM, "text: out of memory"); goto done; }
    hy_rng r;
    hy_rng_seed(&r, seed);
    if (!stratify) {
        for (size_t i = 0; i < n; i++) idx[i] = (int64_t)i;
        hy_rng_shuffle(&r, idx, n);
        for (size_t i = 0; i < nheld; i++) pick[idx[i]] = 1;
    } else {
        /* per label (ascending): quota by largest remainder, then a seeded draw */
        enum { NL = 32769 };
        size_t *cnt = hy_xcalloc(NL, sizeof *cnt), *quota = hy_xcalloc(NL, sizeof *quota);
        double *frac = hy_xcalloc(NL, sizeof *frac);
        if (!cnt || !quota || !frac) {
            hy_free(cnt); hy_free(quota); hy_free(frac);
            st = hy_fail(HY_ENOMEM, "text: out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) cnt[src->labels[i] + 1]++;
        size_t given = 0;
        for (size_t l = 0; l < NL; l++) {
            if (!cnt[l]) continue;
            double exact = (double)nheld * (double)cnt[l] / (double)n;
            quota[l] = (size_t)exact;
            frac[l] = exact - (double)quota[l];
            given += quota[l];
        }
        while (given < nheld) {               /* largest remainder, ties: smaller label */
            size_t best = NL;
            for (size_t l = 0; l < NL; l++)
                if (cnt[l] > quota[l] && (best == NL || frac[l] > frac[best])) best = l;
            HY_ASSERT(best < NL);
            quota[best]++;
            frac[best] = -1.0;
            given++;
        }
        for (size_t l = 0; l < NL; l++) {
            if (!quota[l]) continue;
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if ((size_t)(src->labels[i] + 1) == l) idx[m++] = (int64_t)i;
            hy_rng_shuffle(&r, idx, m);
            for (size_t i = 0; i < quota[l]; i++) pick[idx[i]] = 1;
        }
        hy_free(cnt);
        hy_free(quota);
        hy_free(frac);
    }
    size_t nr = 0, nh = 0;
    for (size_t i = 0; i < n; i++) {
        if (pick[i]) held_i[nh++] = (int64_t)i;
        else rest_i[nr++] = (int64_t)i;
    }
    HY_ASSERT(nh == nheld);
    qsort(held_i, nh, sizeof *held_i, cmp_i64);
    st = hy_corpus_take(rest, src, rest_i, nr);
    if (st == HY_OK) st = hy_corpus_take(held, src, held_i, nh);
    if (st != HY_OK) { hy_corpus_release(rest); hy_corpus_release(held); }
done:
    hy_free(idx);
    hy_free(pick);
    hy_free(rest_i);
    hy_free(held_i);
    return st;
}

/* A set of byte strings (open addressing over (pointer, length) pairs; borrows the bytes). */
typedef struct strset {
    const char **p;
    size_t *len;
    size_t nslots, n;
} strset;

static void strset_release(strset *s) {
    hy_free(s->p);
    hy_free(s->len);
    memset(s, 0, sizeof *s);
}

static hy_status strset_init(strset *s, size_t expect) {
    memset(s, 0, sizeof *s);
    size_t ns = 16;
    while (ns < 2 * expect + 2) ns *= 2;
    s->p = hy_xcalloc(ns, sizeof *s->p);
    s->len = hy_xcalloc(ns, sizeof *s->len);
    if (!s->p || !s->len) { strset_release(s); return hy_fail(HY_ENOMEM, "text: out of memory"); }
    s->nslots = ns;
    return HY_OK;
}

/* Inserts w; returns 1 when it was new, 0 when already present. Capacity fixed by init. */
static int strset_add(strset *s, const char *w, size_t n, int insert) {
    size_t h = (size_t)hy_hash64(w, n, 0) & (s->nslots - 1);
    while (s->p[h]) {
        if (s->len[h] == n && memcmp(s->p[h], w, n) == 0) return 0;
        h = (h + 1) & (s->nslots - 1);
    }
    if (insert) {
        HY_ASSERT(s->n + 1 < s->nslots);
        s->p[h] = w;
        s->len[h] = n;
        s->n++;
    }
    return 1;
}

hy_status hy_corpus_filter(hy_corpus *dst, const hy_corpus *src, int dedup,
                           const hy_corpus *exclude, size_t *dropped) {
    HY_ASSERT(dst != src && dst != exclude);
    hy_corpus_release(dst);
    strset seen = {0}, ex = {0};
    int64_t *keep = NULL;
    size_t nk = 0;
    hy_status st = strset_init(&seen, src->n);
    if (st == HY_OK) st = strset_init(&ex, exclude ? exclude->n : 0);
    if (st == HY_OK && !(keep = hy_xmalloc((src->n + 1) * sizeof *keep)))
        st = hy_fail(HY_ENOMEM, "text: out of memory");
    if (st != HY_OK) goto done;
    for (size_t i = 0; exclude && i < exclude->n; i++) {
        size_t l;
        const char *w = hy_corpus_norm(exclude, i, &l);
        strset_add(&ex, w, l, 1);
    }
    for (size_t i = 0; i < src->n; i++) {
        size_t l;
        const char *w = hy_corpus_norm(src, i, &l);
        if (src->ntok[i] == 0) continue;
        if (exclude && !strset_add(&ex, w, l, 0)) continue;
        if (dedup && !strset_add(&seen, w, l, 1)) continue;
        keep[nk++] = (int64_t)i;
    }
    st = hy_corpus_take(dst, src, keep, nk);
    if (st == HY_OK && dropped) *dropped = src->n - nk;
done:
    strset_release(&seen);
    strset_release(&ex);
    hy_free(keep);
    return st;
}

/* ===== readers ===== */

/* Reads a whole (possibly gzip-compressed) file into b. */
static hy_status read_all(hy_buf *b, const char *path) {
    b->len = 0;
    errno = 0;
    gzFile g = gzopen(path, "rb");
    if (!g) {
        return hy_fail(HY_EIO, "text: cannot read '%s': %s", path,
                       errno ? strerror(errno) : "cannot open");
    }
    for (;;) {
        if (buf_reserve(b, 65536) != HY_OK) { gzclose(g); return HY_ENOMEM; }
        int k = gzread(g, b->data + b->len, 65536);
        if (k < 0) {
            int err;
            const char *m = gzerror(g, &err);
            hy_status st = hy_fail(HY_EIO, "text: cannot read '%s': %s", path,
                                   err == Z_ERRNO ? strerror(errno) : m);
            gzclose(g);
            return st;
        }
        if (k == 0) break;
        b->len += (size_t)k;
    }
    int err;
    const char *m = gzerror(g, &err);
    if (err != Z_OK && err != Z_STREAM_END) {
        hy_status st = hy_fail(HY_EIO, "text: cannot read '%s': %s (truncated or corrupt gzip)",
                               path, m);
        gzclose(g);
        return st;
    }
    gzclose(g);
    b->data[b->len] = '\0';
    return HY_OK;
}

typedef struct line_iter {
    const char *s;
    size_t n, pos, lineno;
} line_iter;

/* The next line (without \n or \r\n); 0 at the end. */
static int next_line(line_iter *it, const char **line, size_t *len) {
    if (it->pos >= it->n) return 0;
    const char *p = it->s + it->pos;
    const char *nl = memchr(p, '\n', it->n - it->pos);
    size_t l = nl ? (size_t)(nl - p) : it->n - it->pos;
    it->pos += l + (nl ? 1 : 0);
    if (l && p[l - 1] == '\r') l--;
    it->lineno++;
    *line = p;
    *len = l;
    return 1;
}

static int all_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_blank(s[i])) return 0;
    return 1;
}

static void trim(const char **s, size_t *n) {
    while (*n && is_blank(**s)) { (*s)++; (*n)--; }
    while (*n && is_blank((*s)[*n - 1])) (*n)--;
}

/* Shows at most 40 bytes of s in messages. */
#define SHOWN(n) ((int)((n) > 40 ? 40 : (n)))

hy_status hy_text_read_tsv(hy_corpus *c, const char *path, const hy_tsv_spec *spec,
                           unsigned flags) {
    HY_ASSERT(spec->ncols >= 1 && spec->text_col >= 0 && spec->text_col < spec->ncols &&
              spec->label_col < spec->ncols);
    hy_buf file = {0};
    norm_scratch sc = {0};
    size_t n0 = c->n;
    hy_status st = read_all(&file, path);
    line_iter it = {file.data, file.len, 0, 0};
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&it, &line, &len)) {
        if (spec->header && it.lineno == 1) continue;
        if (all_blank(line, len)) continue;
        const char *f[64];
        size_t fl[64];
        int nf = 0;
        const char *p = line, *e = line + len;
        for (;;) {
            const char *t = memchr(p, '\t', (size_t)(e - p));
            if (nf < 64) { f[nf] = p; fl[nf] = (size_t)((t ? t : e) - p); }
            nf++;
            if (!t) break;
            p = t + 1;
        }
        if (nf != spec->ncols) {
            st = hy_fail(HY_EINVAL, "text: %s:%zu: expected %d tab-separated fields, got %d",
                         path, it.lineno, spec->ncols, nf);
            break;
        }
        int16_t label = -1;
        if (spec->label_col >= 0) {
            const char *ls = f[spec->label_col];
            size_t ll = fl[spec->label_col];
            trim(&ls, &ll);
            long v = 0;
            size_t i = 0;
            for (; i < ll && is_digit(ls[i]) && v <= 32767; i++) v = v * 10 + (ls[i] - '0');
            if (ll == 0 || i != ll || v > 32767) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected an integer label in [0, 32767] "
                             "in field %d, got '%.*s'", path, it.lineno, spec->label_col + 1,
                             SHOWN(ll), ls);
                break;
            }
            label = (int16_t)v;
        }
        const char *ts = f[spec->text_col];
        size_t tl = fl[spec->text_col];
        trim(&ts, &tl);
        if (tl == 0) {
            st = hy_fail(HY_EINVAL, "text: %s:%zu: expected text in field %d, got an empty field",
                         path, it.lineno, spec->text_col + 1);
            break;
        }
        st = corpus_add_s(c, &sc, ts, tl, label, flags);
    }
    if (st != HY_OK) corpus_truncate(c, n0);
    scratch_release(&sc);
    hy_buf_release(&file);
    return st;
}

hy_status hy_text_read_lines(hy_corpus *c, const char *path, int label_prefix, unsigned flags) {
    hy_buf file = {0};
    norm_scratch sc = {0};
    size_t n0 = c->n;
    hy_status st = read_all(&file, path);
    line_iter it = {file.data, file.len, 0, 0};
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&it, &line, &len)) {
        if (all_blank(line, len)) continue;
        const char *s = line;
        size_t n = len;
        trim(&s, &n);
        if (label_prefix) {
            size_t i = 0;
            while (i < n && !is_blank(s[i])) i++;
            const char *t = s + i;
            size_t tn = n - i;
            trim(&t, &tn);
            if (tn == 0) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected a label, a blank and the text, "
                             "got '%.*s'", path, it.lineno, SHOWN(n), s);
                break;
            }
            s = t;
            n = tn;
        }
        st = corpus_add_s(c, &sc, s, n, -1, flags);
    }
    if (st != HY_OK) corpus_truncate(c, n0);
    scratch_release(&sc);
    hy_buf_release(&file);
    return st;
}

hy_status hy_text_read_records(hy_corpus *c, const char *path, unsigned flags) {
    hy_buf file = {0}, rec = {0};
    norm_scratch sc = {0};
    size_t n0 = c->n;
    hy_status st = read_all(&file, path);
    line_iter it = {file.data, file.len, 0, 0};
    const char *line;
    size_t len;
    int more = st == HY_OK;
    while (more) {
        more = next_line(&it, &line, &len);
        if (more && !(len == 1 && line[0] == '%')) {
            if (rec.len) st = buf_putc(&rec, '\n');
            if (st == HY_OK) st = buf_put(&rec, line, len);
            if (st != HY_OK) break;
            continue;
        }
        /* end of a record: drop trailing blank lines, skip empty records */
        while (rec.len && (rec.data[rec.len - 1] == '\n' || is_blank(rec.data[rec.len - 1]))) rec.len--;
        size_t s0 = 0;
        while (s0 < rec.len && (rec.data[s0] == '\n')) s0++;
        if (rec.len > s0 && !all_blank(rec.data + s0, rec.len - s0))
            st = corpus_add_s(c, &sc, rec.data + s0, rec.len - s0, -1, flags);
        if (st != HY_OK) break;
        rec.len = 0;
    }
    if (st != HY_OK) corpus_truncate(c, n0);
    scratch_release(&sc);
    hy_buf_release(&rec);
    hy_buf_release(&file);
    return st;
}

/* ARFF: one value starting at *p (after blanks); a quoted string is unescaped into val.
 * Returns 0 on success with *p after the value and its trailing blanks. */
static hy_status arff_value(const char *path, size_t lineno, const char **pp, const char *e,
                            hy_buf *val, int *missing) {
    const char *p = *pp;
    val->len = 0;
    *missing = 0;
    while (p < e && is_blank(*p)) p++;
    if (p < e && (*p == '\'' || *p == '"')) {
        char q = *p;
        const char *start = p++;
        for (;;) {
            if (p >= e)
                return hy_fail(HY_EINVAL, "text: %s:%zu: unterminated quoted string starting at "
                               "column %zu (expected a closing %c)", path, lineno,
                               (size_t)(start - *pp) + 1, q);
            if (*p == q) { p++; break; }
            if (*p == '\\' && p + 1 < e) {
                char x = p[1], o;
                switch (x) {
                case 'n': o = '\n'; break;
                case 't': o = '\t'; break;
                case 'r': o = '\r'; break;
                default: o = x; break;
                }
                HY_TRY(buf_putc(val, o));
                p += 2;
                continue;
            }
            HY_TRY(buf_putc(val, *p));
            p++;
        }
    } else {
        const char *s = p;
        while (p < e && *p != ',') p++;
        const char *t = s;
        size_t tn = (size_t)(p - s);
        trim(&t, &tn);
        if (tn == 1 && t[0] == '?') *missing = 1;
        HY_TRY(buf_put(val, t, tn));
    }
    while (p < e && is_blank(*p)) p++;
    *pp = p;
    if (val->data == NULL) HY_TRY(buf_reserve(val, 0));
    return HY_OK;
}

static int keyword(const char *s, size_t n, const char *kw) {
    size_t k = strlen(kw);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (is_upper(c)) c = (char)(c - 'A' + 'a');
        if (c != kw[i]) return 0;
    }
    return n == k || is_blank(s[k]);
}

hy_status hy_text_read_arff(hy_corpus *c, const char *path, const char *attr, unsigned flags) {
    hy_buf file = {0}, val = {0}, names = {0};
    norm_scratch sc = {0};
    size_t n0 = c->n;
    int nattr = 0, target = -1, in_data = 0;
    hy_status st = read_all(&file, path);
    line_iter it = {file.data, file.len, 0, 0};
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&it, &line, &len)) {
        const char *s = line;
        size_t n = len;
        trim(&s, &n);
        if (n == 0 || s[0] == '%') continue;
        if (!in_data) {
            if (keyword(s, n, "@relation")) continue;
            if (keyword(s, n, "@data")) { in_data = 1; continue; }
            if (!keyword(s, n, "@attribute")) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected @relation, @attribute or @data, "
                             "got '%.*s'", path, it.lineno, SHOWN(n), s);
                break;
            }
            const char *p = s + 10, *e = s + n;
            while (p < e && is_blank(*p)) p++;
            if (p < e && (*p == '\'' || *p == '"')) {       /* a quoted name */
                int missing;
                if ((st = arff_value(path, it.lineno, &p, e, &val, &missing)) != HY_OK) break;
            } else {                                          /* a bare name ends at a blank */
                const char *q0 = p;
                while (p < e && !is_blank(*p)) p++;
                if ((st = buf_set(&val, q0, (size_t)(p - q0))) != HY_OK) break;
            }
            while (p < e && is_blank(*p)) p++;
            if (val.len == 0 || p >= e) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected @attribute NAME TYPE, got '%.*s'",
                             path, it.lineno, SHOWN(n), s);
                break;
            }
            int is_string = keyword(p, (size_t)(e - p), "string");
            if (names.len) st = buf_put(&names, ", ", 2);
            if (st == HY_OK) st = buf_put(&names, val.data, val.len);
            if (st != HY_OK) break;
            if (target < 0 && is_string && (!attr || (strlen(attr) == val.len &&
                                                      memcmp(attr, val.data, val.len) == 0)))
                target = nattr;
            nattr++;
            continue;
        }
        if (target < 0) {
            st = hy_fail(HY_EINVAL, "text: %s: no string attribute%s%s%s (attributes: %s)", path,
                         attr ? " '" : "", attr ? attr : "", attr ? "'" : "",
                         names.len ? names.data : "none");
            break;
        }
        if (s[0] == '{') {
            st = hy_fail(HY_EINVAL, "text: %s:%zu: sparse ARFF rows are not supported (expected "
                         "%d comma-separated values)", path, it.lineno, nattr);
            break;
        }
        const char *p = s, *e = s + n;
        int k = 0, skip = 0;
        hy_buf text = {0};
        for (;;) {
            int missing;
            if ((st = arff_value(path, it.lineno, &p, e, &val, &missing)) != HY_OK) break;
            if (k == target) {
                if (missing) skip = 1;
                else if ((st = buf_set(&text, val.data, val.len)) != HY_OK) break;
            }
            k++;
            if (p >= e) break;
            if (*p != ',') {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected ',' after value %d at column %zu, "
                             "got '%c'", path, it.lineno, k, (size_t)(p - line) + 1, *p);
                break;
            }
            p++;
        }
        if (st == HY_OK && k != nattr)
            st = hy_fail(HY_EINVAL, "text: %s:%zu: expected %d values, got %d", path, it.lineno,
                         nattr, k);
        if (st == HY_OK && !skip) st = corpus_add_s(c, &sc, text.data ? text.data : "", text.len,
                                                    -1, flags);
        hy_buf_release(&text);
    }
    if (st == HY_OK && !in_data)
        st = hy_fail(HY_EINVAL, "text: %s: no @data section (expected an ARFF file)", path);
    else if (st == HY_OK && target < 0)
        st = hy_fail(HY_EINVAL, "text: %s: no string attribute%s%s%s (attributes: %s)", path,
                     attr ? " '" : "", attr ? attr : "", attr ? "'" : "",
                     names.len ? names.data : "none");
    if (st != HY_OK) corpus_truncate(c, n0);
    scratch_release(&sc);
    hy_buf_release(&file);
    hy_buf_release(&val);
    hy_buf_release(&names);
    return st;
}

/* ===== vocabulary ===== */

void hy_vocab_release(hy_vocab *v) {
    if (!v) return;
    hy_buf_release(&v->bytes);
    hy_free(v->off);
    hy_free(v->counts);
    hy_free(v->slots);
    memset(v, 0, sizeof *v);
}

const char *hy_vocab_word(const hy_vocab *v, size_t id) {
    HY_ASSERT(id < v->n);
    return v->bytes.data + v->off[id];
}

static size_t word_len(const hy_vocab *v, size_t id) {
    size_t end = id + 1 < v->n ? (size_t)v->off[id + 1] : v->bytes.len;
    return end - (size_t)v->off[id] - 1;
}

int32_t hy_vocab_lookup(const hy_vocab *v, const char *w, size_t len) {
    if (!v->nslots) return -1;
    size_t h = (size_t)hy_hash64(w, len, 0) & (v->nslots - 1);
    while (v->slots[h] >= 0) {
        size_t id = (size_t)v->slots[h];
        if (word_len(v, id) == len && memcmp(v->bytes.data + v->off[id], w, len) == 0)
            return (int32_t)id;
        h = (h + 1) & (v->nslots - 1);
    }
    return -1;
}

/* Builds words/off/slots from n words (borrowed pointers + lengths); counts may be NULL. */
static hy_status vocab_fill(hy_vocab *v, const char *const *w, const size_t *wl,
                            const int64_t *counts, size_t n) {
    memset(v, 0, sizeof *v);
    size_t ns = 16;
    while (ns < 2 * n + 2) ns *= 2;
    v->off = hy_xmalloc((n + 1) * sizeof *v->off);
    v->counts = hy_xcalloc(n + 1, sizeof *v->counts);
    v->slots = hy_xmalloc(ns * sizeof *v->slots);
    if (!v->off || !v->counts || !v->slots) {
        hy_vocab_release(v);
        return hy_fail(HY_ENOMEM, "text: out of memory (vocabulary of %zu words)", n);
    }
    v->nslots = ns;
    for (size_t i = 0; i < ns; i++) v->slots[i] = -1;
    for (size_t i = 0; i < n; i++) {
        v->off[i] = (int64_t)v->bytes.len;
        hy_status st = buf_put(&v->bytes, w[i], wl[i]);
        if (st == HY_OK) st = buf_putc(&v->bytes, '\0');
        if (st != HY_OK) { hy_vocab_release(v); return st; }
        if (counts) v->counts[i] = counts[i];
    }
    v->n = n;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)hy_hash64(w[i], wl[i], 0) & (ns - 1);
        while (v->slots[h] >= 0) h = (h + 1) & (ns - 1);
        v->slots[h] = (int32_t)i;
    }
    return HY_OK;
}

typedef struct wcount {
    const char *w;
    size_t len;
    int64_t count;
} wcount;

static int cmp_wcount(const void *a, const void *b) {
    const wcount *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    size_t m = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->w, y->w, m);
    if (r) return r;
    return (x->len > y->len) - (x->len < y->len);
}

hy_status hy_vocab_build(hy_vocab *v, const hy_corpus *c, int64_t min_count, int64_t max_size) {
    memset(v, 0, sizeof *v);
    if (min_count < 1)
        return hy_fail(HY_EINVAL, "text: vocabulary min_count must be >= 1, got %lld",
                       (long long)min_count);
    if (max_size != 0 && max_size < HY_TEXT_NRESERVED + 1)
        return hy_fail(HY_EINVAL, "text: vocabulary max_size must be 0 (no cap) or >= %d, got %lld",
                       HY_TEXT_NRESERVED + 1, (long long)max_size);
    size_t cap = 1024, n = 0;
    wcount *tab = hy_xcalloc(cap, sizeof *tab);
    wcount *list = NULL;
    const char **w = NULL;
    size_t *wl = NULL;
    int64_t *cnt = NULL;
    hy_status st = HY_OK;
    if (!tab) return hy_fail(HY_ENOMEM, "text: out of memory");
    const char *p = c->norm.data ? c->norm.data : "";
    for (size_t r = 0; r < c->n; r++) {
        const char *s = p + c->norm_off[r], *e = p + c->norm_off[r + 1];
        while (s < e) {
            const char *q = memchr(s, ' ', (size_t)(e - s));
            if (!q) q = e;
            size_t l = (size_t)(q - s);
            if (2 * (n + 1) > cap) {               /* grow and rehash */
                size_t nc = cap * 2;
                wcount *nt = hy_xcalloc(nc, sizeof *nt);
                if (!nt) { st = hy_fail(HY_ENOMEM, "text: out of memory"); goto done; }
                for (size_t i = 0; i < cap; i++) {
                    if (!tab[i].w) continue;
                    size_t h = (size_t)hy_hash64(tab[i].w, tab[i].len, 0) & (nc - 1);
                    while (nt[h].w) h = (h + 1) & (nc - 1);
                    nt[h] = tab[i];
                }
                hy_free(tab);
                tab = nt;
                cap = nc;
            }
            size_t h = (size_t)hy_hash64(s, l, 0) & (cap - 1);
            while (tab[h].w && !(tab[h].len == l && memcmp(tab[h].w, s, l) == 0))
                h = (h + 1) & (cap - 1);
            if (!tab[h].w) { tab[h].w = s; tab[h].len = l; n++; }
            tab[h].count++;
            s = q + 1;
        }
    }
    list = hy_xmalloc((n + 1) * sizeof *list);
    if (!list) { st = hy_fail(HY_ENOMEM, "text: out of memory"); goto done; }
    size_t m = 0;
    for (size_t i = 0; i < cap; i++)
        if (tab[i].w && tab[i].count >= min_count) list[m++] = tab[i];
    qsort(list, m, sizeof *list, cmp_wcount);
    size_t total = m + HY_TEXT_NRESERVED;
    if (max_size && total > (size_t)max_size) total = (size_t)max_size;
    w = hy_xmalloc(total * sizeof *w);
    wl = hy_xmalloc(total * sizeof *wl);
    cnt = hy_xcalloc(total, sizeof *cnt);
    if (!w || !wl || !cnt) { st = hy_fail(HY_ENOMEM, "text: out of memory"); goto done; }
    for (size_t i = 0; i < HY_TEXT_NRESERVED; i++) {
        w[i] = hy_text_reserved[i];
        wl[i] = strlen(w[i]);
    }
    for (size_t i = HY_TEXT_NRESERVED; i < total; i++) {
        w[i] = list[i - HY_TEXT_NRESERVED].w;
        wl[i] = list[i - HY_TEXT_NRESERVED].len;
        cnt[i] = list[i - HY_TEXT_NRESERVED].count;
    }
    st = vocab_fill(v, w, wl, cnt, total);
done:
    hy_free(tab);
    hy_free(list);
    hy_free(w);
    hy_free(wl);
    hy_free(cnt);
    return st;
}

hy_status hy_vocab_from_words(hy_vocab *v, const char *const *words, size_t n) {
    memset(v, 0, sizeof *v);
    if (n < HY_TEXT_NRESERVED)
        return hy_fail(HY_EINVAL, "text: vocabulary has %zu words (expected at least %d)", n,
                       HY_TEXT_NRESERVED);
    for (size_t i = 0; i < HY_TEXT_NRESERVED; i++)
        if (strcmp(words[i], hy_text_reserved[i]) != 0)
            return hy_fail(HY_EINVAL, "text: vocabulary word %zu is '%s' (expected '%s')", i,
                           words[i], hy_text_reserved[i]);
    size_t *wl = hy_xmalloc((n + 1) * sizeof *wl);
    if (!wl) return hy_fail(HY_ENOMEM, "text: out of memory");
    hy_status st = HY_OK;
    for (size_t i = 0; i < n && st == HY_OK; i++) {
        wl[i] = strlen(words[i]);
        if (wl[i] == 0 || strpbrk(words[i], " \t\n\r"))
            st = hy_fail(HY_EINVAL, "text: vocabulary word %zu '%s' is empty or holds a blank", i,
                         words[i]);
    }
    if (st == HY_OK) st = vocab_fill(v, words, wl, NULL, n);
    for (size_t i = 0; st == HY_OK && i < n; i++) {
        int32_t id = hy_vocab_lookup(v, words[i], wl[i]);
        if (id != (int32_t)i) {
            st = hy_fail(HY_EINVAL, "text: vocabulary word '%s' repeats (ids %d and %zu)",
                         words[i], id, i);
            hy_vocab_release(v);
        }
    }
    hy_free(wl);
    return st;
}

void hy_vocab_sha256(const hy_vocab *v, char out[65]) {
    hy_sha256 h;
    uint8_t d[32];
    hy_sha256_init(&h);
    for (size_t i = 0; i < v->n; i++) {
        hy_sha256_update(&h, v->bytes.data + v->off[i], word_len(v, i));
        hy_sha256_update(&h, "\n", 1);
    }
    hy_sha256_final(&h, d);
    hy_hash_hex(d, 32, out);
}

/* ===== encoding ===== */

hy_status hy_text_encode(hy_tensor *ids, hy_tensor *lengths, const hy_vocab *v,
                         const hy_corpus *c, int64_t max_len, hy_text_stats *stats) {
    hy_text_stats tot = {0, 0, 0};
    memset(ids, 0, sizeof *ids);
    memset(lengths, 0, sizeof *lengths);
    if (max_len < 1) return hy_fail(HY_EINVAL, "text: max_len must be >= 1, got %lld",
                                    (long long)max_len);
    if (v->n < HY_TEXT_NRESERVED)
        return hy_fail(HY_EINVAL, "text: vocabulary has %zu words (expected at least %d)", v->n,
                       HY_TEXT_NRESERVED);
    int64_t shape[2] = {(int64_t)c->n, max_len};
    HY_TRY(hy_tensor_alloc(ids, HY_I32, 2, shape));
    hy_status st = hy_tensor_alloc(lengths, HY_I32, 1, shape);
    if (st != HY_OK) { hy_tensor_release(ids); return st; }
    int32_t *out = ids->data, *len = lengths->data;
    for (size_t r = 0; r < c->n; r++) {
        size_t nl;
        const char *s = hy_corpus_norm(c, r, &nl), *e = s + nl;
        int32_t *row = out + r * (size_t)max_len;
        int64_t k = 0;
        while (s < e && k < max_len) {
            const char *q = memchr(s, ' ', (size_t)(e - s));
            if (!q) q = e;
            int32_t id = hy_vocab_lookup(v, s, (size_t)(q - s));
            row[k++] = id < 0 ? HY_TEXT_UNK : id;
            tot.unk += id < 0;
            s = q + 1;
        }
        len[r] = (int32_t)k;               /* the rest of the row stays PAD (0) */
        tot.tokens += k;
        tot.truncated += c->ntok[r] > max_len;
    }
    if (stats) *stats = tot;
    return HY_OK;
}
