/* textnorm.c: see textnorm.h. Sections: lines (attributions, news prefix), characters
 * (overstrike, entities, tags, UTF-8 / Windows-1252, folding), tokens (PTB-like split). */
#include "data/textnorm.h"

#include <string.h>

const char *const HY_TEXT_NORMALIZATION =
    "hydra-text-v1: attribution lines dropped; overstrike resolved; HTML entities decoded and "
    "tags stripped; UTF-8 (else Windows-1252) with Latin-1 letters folded to ASCII and "
    "typographic quotes/dashes to ASCII; lowercase; PTB-like split (n't 's 're 'll 've 'm 'd, "
    "`` '' quotes, punctuation separated, hyphenated words, numbers and abbreviations kept); "
    "whitespace collapsed";

/* ===== normalisation: step 1, lines ===== */


/* "--" or an em dash (UTF-8 E2 80 94) followed by text: the start of an attribution. */
static int attribution_start(const char *p, const char *e) {
    size_t k;
    if (e - p >= 2 && p[0] == '-' && p[1] == '-') k = 2;
    else if (e - p >= 3 && (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
             (unsigned char)p[2] == 0x94) k = 3;
    else return 0;
    p += k;
    if (p < e && *p == '-') return 0;            /* "---" rules, not attributions */
    while (p < e && hy_text_blank(*p)) p++;
    return p < e;
}

/* Drops attribution lines (see text.h) while copying s into out. */
static hy_status drop_attributions(hy_buf *out, const char *s, size_t n) {
    const char *p = s, *e = s + n;
    int seen_text = 0, in_attr = 0;
    out->len = 0;
    HY_TRY(hy_buf_reserve(out, n));
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        const char *q = p;
        while (q < le && hy_text_blank(*q)) q++;
        int blank = q == le;
        int indented = q > p;
        if (in_attr && indented && !blank) { p = nl ? nl + 1 : e; continue; }
        in_attr = 0;
        if (seen_text && !blank && attribution_start(q, le)) {
            in_attr = 1;
            p = nl ? nl + 1 : e;
            continue;
        }
        HY_TRY(hy_buf_put(out, p, (size_t)(le - p)));
        if (nl) HY_TRY(hy_buf_putc(out, '\n'));
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
            int ok = hy_text_upper(w[0]) || w[0] == '(' || hy_text_digit(w[0]);
            for (size_t t = 0; t + 1 < wl && !ok; t++)
                if (w[t] == '.' && hy_text_alpha(w[t + 1])) ok = 1;          /* usatoday.com */
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
            while (n && (hy_text_blank(*s) || *s == '\n' || *s == '\\' || *s == '"')) { s++; n--; }
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
        while (n && (hy_text_blank(s[n - 1]) || s[n - 1] == '\n')) n--;
        if (n >= 4 && s[n - 1] == ';' && s[n - 4] == '&' && s[n - 3] == '#' &&
            hy_text_digit(s[n - 2])) {
            n -= 4;                      /* &#3; end-of-text marks of Reuters-21578 */
            continue;
        }
        if (n >= 6 && (memcmp(s + n - 6, "REUTER", 6) == 0 || memcmp(s + n - 6, "Reuter", 6) == 0) &&
            (n == 6 || hy_text_blank(s[n - 7]) || s[n - 7] == '\n')) {
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
    return hy_buf_put(b, u, k);
}

/* Appends code point cp after folding (see text.h step 4). */
static hy_status emit_cp(hy_buf *b, uint32_t cp) {
    if (cp < 0x80) {
        char c = (char)cp;
        if (cp < 0x20 || cp == 0x7F || c == '\\') c = ' ';
        else if (hy_text_upper(c)) c = (char)(c - 'A' + 'a');
        return hy_buf_putc(b, c);
    }
    if (cp < 0xA0) {
        uint16_t m = cp1252[cp - 0x80];
        return m ? emit_cp(b, m) : hy_buf_putc(b, ' ');
    }
    if (cp >= 0xC0 && cp <= 0xFF) {
        const char *f = latin1_fold[cp - 0xC0];
        return hy_buf_put(b, f, strlen(f));
    }
    switch (cp) {
    case 0xA0: case 0x2002: case 0x2003: case 0x2009: case 0x200A: case 0x202F: case 0x3000:
        return hy_buf_putc(b, ' ');
    case 0xAD: case 0x200B: case 0x200C: case 0x200D: case 0xFEFF: return HY_OK;
    case 0xAB: case 0xBB: case 0x201C: case 0x201D: case 0x201E: case 0x201F: case 0x2033:
        return hy_buf_putc(b, '"');
    case 0xB4: case 0x2018: case 0x2019: case 0x201A: case 0x201B: case 0x2032:
        return hy_buf_putc(b, '\'');
    case 0x2010: case 0x2011: case 0x2012: case 0x2013: case 0x2212: return hy_buf_putc(b, '-');
    case 0x2014: case 0x2015: return hy_buf_put(b, " -- ", 4);
    case 0x2026: return hy_buf_put(b, "...", 3);
    case 0x0152: case 0x0153: return hy_buf_put(b, "oe", 2);
    case 0x0160: case 0x0161: return hy_buf_putc(b, 's');
    case 0x017D: case 0x017E: return hy_buf_putc(b, 'z');
    case 0x0178: return hy_buf_putc(b, 'y');
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
        if (hy_text_digit(c)) dv = c - '0';
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
    HY_TRY(hy_buf_reserve(tmp, n));
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t k;
        int prev_word = i > 0 && hy_text_alnum(s[i - 1]);
        if (c == '&' && (k = entity(s + i, n - i, &cp)) != 0) {
            HY_TRY(emit_cp(tmp, cp));
            i += k;
        } else if (c == '#' && (k = numeric_ref(s + i, n - i, &cp)) != 0 && k >= 4 &&
                   s[i + 1] != 'x' && s[i + 1] != 'X') {
            HY_TRY(emit_cp(tmp, cp));            /* "#39;": an entity that lost its '&' */
            i += k;
        } else if (c == 'q' && !prev_word && n - i >= 5 && memcmp(s + i, "quot;", 5) == 0) {
            HY_TRY(hy_buf_putc(tmp, '"'));
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
    HY_TRY(hy_buf_reserve(out, tmp->len));
    const char *t = tmp->data ? tmp->data : "";
    size_t m = tmp->len;
    for (size_t i = 0; i < m; i++) {
        if (t[i] == '<' && i + 1 < m &&
            (hy_text_lower(t[i + 1]) || t[i + 1] == '/' || t[i + 1] == '!')) {
            size_t j = i + 1;
            while (j < m && j - i < 512 && t[j] != '>' && t[j] != '<') j++;
            if (j < m && t[j] == '>') {
                HY_TRY(hy_buf_putc(out, ' '));
                i = j;
                continue;
            }
        }
        HY_TRY(hy_buf_putc(out, t[i]));
    }
    return HY_OK;
}

/* ===== normalisation: step 5, tokens ===== */

static int is_wc(int c) { return hy_text_alnum(c) || c >= 0x80; }

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
    while (r < e && hy_text_lower(*r)) r++;
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
    if (st->out->len) HY_TRY(hy_buf_putc(st->out, ' '));
    HY_TRY(hy_buf_put(st->out, w, n));
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
                if ((*q == ',' || *q == ':') && hy_text_digit(q[-1]) && q + 1 < b &&
                    hy_text_digit(q[1])) {
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

hy_status hy_text_normalize_into(hy_buf *out, hy_text_scratch *sc, const char *s, size_t n,
                                 unsigned flags, size_t *ntok) {
    hy_buf *t1 = &sc->t1, *t2 = &sc->t2, *t3 = &sc->t3;
    if (flags & HY_TEXT_NEWS) strip_news(&s, &n);
    HY_TRY(drop_attributions(t1, s, n));
    HY_TRY(clean_chars(t3, t2, t1->data ? t1->data : "", t1->len));
    out->len = 0;
    HY_TRY(hy_buf_reserve(out, t3->len + 16));
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

void hy_text_scratch_release(hy_text_scratch *sc) {
    hy_buf_release(&sc->t1);
    hy_buf_release(&sc->t2);
    hy_buf_release(&sc->t3);
}

hy_status hy_text_normalize(hy_buf *out, const char *s, size_t n, unsigned flags, size_t *ntok) {
    hy_text_scratch sc = {0};
    hy_status st = hy_text_normalize_into(out, &sc, s, n, flags, ntok);
    hy_text_scratch_release(&sc);
    return st;
}
