/* corpus.c: see corpus.h. Sections: corpora (records, take, split, filter), readers (TSV,
 * lines, fortune records, ARFF; gzip through zlib). */
#include "data/corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tensor/rng.h"

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
    HY_TRY(hy_buf_put(&c->raw, raw, rn));
    HY_TRY(hy_buf_put(&c->norm, norm, nn));
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
    hy_buf out;
    hy_text_scratch t;
} norm_scratch;

static void scratch_release(norm_scratch *s) {
    hy_buf_release(&s->out);
    hy_text_scratch_release(&s->t);
}

static hy_status corpus_add_s(hy_corpus *c, norm_scratch *sc, const char *s, size_t len,
                              int16_t label, unsigned flags) {
    size_t nt = 0;
    HY_TRY(hy_text_normalize_into(&sc->out, &sc->t, s, len, flags, &nt));
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
    if (!idx || !pick || !rest_i || !held_i) {
        st = hy_fail(HY_ENOMEM, "text: out of memory");
        goto done;
    }
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
        if (hy_buf_reserve(b, 65536) != HY_OK) { gzclose(g); return HY_ENOMEM; }
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
        if (!hy_text_blank(s[i])) return 0;
    return 1;
}

static void trim(const char **s, size_t *n) {
    while (*n && hy_text_blank(**s)) { (*s)++; (*n)--; }
    while (*n && hy_text_blank((*s)[*n - 1])) (*n)--;
}

/* Shows at most 40 bytes of s in messages. */
#define SHOWN(n) ((int)((n) > 40 ? 40 : (n)))

/* What every reader holds: the whole file, its line iterator, the normaliser's scratch and c's
 * record count at entry (restored when the read fails). */
typedef struct reader {
    hy_corpus *c;
    hy_buf file;
    norm_scratch sc;
    size_t n0;
    line_iter it;
} reader;

static hy_status reader_open(reader *r, hy_corpus *c, const char *path) {
    memset(r, 0, sizeof *r);
    r->c = c;
    r->n0 = c->n;
    hy_status st = read_all(&r->file, path);
    r->it = (line_iter){r->file.data, r->file.len, 0, 0};
    return st;
}

/* Ends a read with status st (returned): on failure c loses the records this read added. */
static hy_status reader_close(reader *r, hy_status st) {
    if (st != HY_OK) corpus_truncate(r->c, r->n0);
    scratch_release(&r->sc);
    hy_buf_release(&r->file);
    return st;
}

hy_status hy_text_read_tsv(hy_corpus *c, const char *path, const hy_tsv_spec *spec,
                           unsigned flags) {
    HY_ASSERT(spec->ncols >= 1 && spec->text_col >= 0 && spec->text_col < spec->ncols &&
              spec->label_col < spec->ncols);
    reader r;
    hy_status st = reader_open(&r, c, path);
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&r.it, &line, &len)) {
        if (spec->header && r.it.lineno == 1) continue;
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
                         path, r.it.lineno, spec->ncols, nf);
            break;
        }
        int16_t label = -1;
        if (spec->label_col >= 0) {
            const char *ls = f[spec->label_col];
            size_t ll = fl[spec->label_col];
            trim(&ls, &ll);
            long v = 0;
            size_t i = 0;
            for (; i < ll && hy_text_digit(ls[i]) && v <= 32767; i++) v = v * 10 + (ls[i] - '0');
            if (ll == 0 || i != ll || v > 32767) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected an integer label in [0, 32767] "
                             "in field %d, got '%.*s'", path, r.it.lineno, spec->label_col + 1,
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
                         path, r.it.lineno, spec->text_col + 1);
            break;
        }
        st = corpus_add_s(c, &r.sc, ts, tl, label, flags);
    }
    return reader_close(&r, st);
}

hy_status hy_text_read_lines(hy_corpus *c, const char *path, int label_prefix, unsigned flags) {
    reader r;
    hy_status st = reader_open(&r, c, path);
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&r.it, &line, &len)) {
        if (all_blank(line, len)) continue;
        const char *s = line;
        size_t n = len;
        trim(&s, &n);
        if (label_prefix) {
            size_t i = 0;
            while (i < n && !hy_text_blank(s[i])) i++;
            const char *t = s + i;
            size_t tn = n - i;
            trim(&t, &tn);
            if (tn == 0) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected a label, a blank and the text, "
                             "got '%.*s'", path, r.it.lineno, SHOWN(n), s);
                break;
            }
            s = t;
            n = tn;
        }
        st = corpus_add_s(c, &r.sc, s, n, -1, flags);
    }
    return reader_close(&r, st);
}

hy_status hy_text_read_wordnet(hy_corpus *c, const char *path, unsigned flags) {
    reader r;
    hy_status st = reader_open(&r, c, path);
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&r.it, &line, &len)) {
        if (all_blank(line, len) || (len >= 2 && line[0] == ' ' && line[1] == ' ')) continue;
        size_t i = 0;
        while (i + 1 < len && !(line[i] == '|' && line[i + 1] == ' ')) i++;
        if (i + 1 >= len) {
            st = hy_fail(HY_EINVAL, "text: %s:%zu: expected a WordNet synset line with a gloss "
                         "after '| ', got '%.*s'", path, r.it.lineno, SHOWN(len), line);
            break;
        }
        const char *g = line + i + 2, *end = line + len;
        while (st == HY_OK && g < end) {
            const char *e = g;
            while (e + 1 < end && !(e[0] == ';' && e[1] == ' ')) e++;
            if (e + 1 >= end) e = end;
            const char *s = g;
            size_t n = (size_t)(e - g);
            trim(&s, &n);
            if (n >= 2 && s[0] == '"' && s[n - 1] == '"') { s++; n -= 2; }
            if (n > 0 && !all_blank(s, n)) st = corpus_add_s(c, &r.sc, s, n, -1, flags);
            g = e < end ? e + 2 : end;
        }
    }
    return reader_close(&r, st);
}

hy_status hy_text_read_records(hy_corpus *c, const char *path, unsigned flags) {
    hy_buf rec = {0};
    reader r;
    hy_status st = reader_open(&r, c, path);
    const char *line;
    size_t len;
    int more = st == HY_OK;
    while (more) {
        more = next_line(&r.it, &line, &len);
        if (more && !(len == 1 && line[0] == '%')) {
            if (rec.len) st = hy_buf_putc(&rec, '\n');
            if (st == HY_OK) st = hy_buf_put(&rec, line, len);
            if (st != HY_OK) break;
            continue;
        }
        /* end of a record: drop trailing blank lines, skip empty records */
        while (rec.len && (rec.data[rec.len - 1] == '\n' || hy_text_blank(rec.data[rec.len - 1])))
            rec.len--;
        size_t s0 = 0;
        while (s0 < rec.len && (rec.data[s0] == '\n')) s0++;
        if (rec.len > s0 && !all_blank(rec.data + s0, rec.len - s0))
            st = corpus_add_s(c, &r.sc, rec.data + s0, rec.len - s0, -1, flags);
        if (st != HY_OK) break;
        rec.len = 0;
    }
    hy_buf_release(&rec);
    return reader_close(&r, st);
}

/* ARFF: one value starting at *p (after blanks); a quoted string is unescaped into val.
 * Returns 0 on success with *p after the value and its trailing blanks. */
static hy_status arff_value(const char *path, size_t lineno, const char **pp, const char *e,
                            hy_buf *val, int *missing) {
    const char *p = *pp;
    val->len = 0;
    *missing = 0;
    while (p < e && hy_text_blank(*p)) p++;
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
                HY_TRY(hy_buf_putc(val, o));
                p += 2;
                continue;
            }
            HY_TRY(hy_buf_putc(val, *p));
            p++;
        }
    } else {
        const char *s = p;
        while (p < e && *p != ',') p++;
        const char *t = s;
        size_t tn = (size_t)(p - s);
        trim(&t, &tn);
        if (tn == 1 && t[0] == '?') *missing = 1;
        HY_TRY(hy_buf_put(val, t, tn));
    }
    while (p < e && hy_text_blank(*p)) p++;
    *pp = p;
    if (val->data == NULL) HY_TRY(hy_buf_reserve(val, 0));
    return HY_OK;
}

static int keyword(const char *s, size_t n, const char *kw) {
    size_t k = strlen(kw);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (hy_text_upper(c)) c = (char)(c - 'A' + 'a');
        if (c != kw[i]) return 0;
    }
    return n == k || hy_text_blank(s[k]);
}

hy_status hy_text_read_arff(hy_corpus *c, const char *path, const char *attr, unsigned flags) {
    hy_buf val = {0}, names = {0};
    int nattr = 0, target = -1, in_data = 0;
    reader r;
    hy_status st = reader_open(&r, c, path);
    const char *line;
    size_t len;
    while (st == HY_OK && next_line(&r.it, &line, &len)) {
        const char *s = line;
        size_t n = len;
        trim(&s, &n);
        if (n == 0 || s[0] == '%') continue;
        if (!in_data) {
            if (keyword(s, n, "@relation")) continue;
            if (keyword(s, n, "@data")) { in_data = 1; continue; }
            if (!keyword(s, n, "@attribute")) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected @relation, @attribute or @data, "
                             "got '%.*s'", path, r.it.lineno, SHOWN(n), s);
                break;
            }
            const char *p = s + 10, *e = s + n;
            while (p < e && hy_text_blank(*p)) p++;
            if (p < e && (*p == '\'' || *p == '"')) {       /* a quoted name */
                int missing;
                if ((st = arff_value(path, r.it.lineno, &p, e, &val, &missing)) != HY_OK) break;
            } else {                                          /* a bare name ends at a blank */
                const char *q0 = p;
                while (p < e && !hy_text_blank(*p)) p++;
                if ((st = hy_buf_set(&val, q0, (size_t)(p - q0))) != HY_OK) break;
            }
            while (p < e && hy_text_blank(*p)) p++;
            if (val.len == 0 || p >= e) {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected @attribute NAME TYPE, got '%.*s'",
                             path, r.it.lineno, SHOWN(n), s);
                break;
            }
            int is_string = keyword(p, (size_t)(e - p), "string");
            if (names.len) st = hy_buf_put(&names, ", ", 2);
            if (st == HY_OK) st = hy_buf_put(&names, val.data, val.len);
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
                         "%d comma-separated values)", path, r.it.lineno, nattr);
            break;
        }
        const char *p = s, *e = s + n;
        int k = 0, skip = 0;
        hy_buf text = {0};
        for (;;) {
            int missing;
            if ((st = arff_value(path, r.it.lineno, &p, e, &val, &missing)) != HY_OK) break;
            if (k == target) {
                if (missing) skip = 1;
                else if ((st = hy_buf_set(&text, val.data, val.len)) != HY_OK) break;
            }
            k++;
            if (p >= e) break;
            if (*p != ',') {
                st = hy_fail(HY_EINVAL, "text: %s:%zu: expected ',' after value %d at column %zu, "
                             "got '%c'", path, r.it.lineno, k, (size_t)(p - line) + 1, *p);
                break;
            }
            p++;
        }
        if (st == HY_OK && k != nattr)
            st = hy_fail(HY_EINVAL, "text: %s:%zu: expected %d values, got %d", path, r.it.lineno,
                         nattr, k);
        if (st == HY_OK && !skip) st = corpus_add_s(c, &r.sc, text.data ? text.data : "", text.len,
                                                    -1, flags);
        hy_buf_release(&text);
    }
    if (st == HY_OK && !in_data)
        st = hy_fail(HY_EINVAL, "text: %s: no @data section (expected an ARFF file)", path);
    else if (st == HY_OK && target < 0)
        st = hy_fail(HY_EINVAL, "text: %s: no string attribute%s%s%s (attributes: %s)", path,
                     attr ? " '" : "", attr ? attr : "", attr ? "'" : "",
                     names.len ? names.data : "none");
    hy_buf_release(&val);
    hy_buf_release(&names);
    return reader_close(&r, st);
}
