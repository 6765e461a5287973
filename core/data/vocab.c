/* vocab.c: see vocab.h. Sections: vocabulary (build, from words, lookup, digest), encoding. */
#include "data/vocab.h"

#include "data/corpus.h"

#include <stdlib.h>
#include <string.h>

#include "io/hash.h"
#include "tensor/rng.h"

const char *const hy_tok_reserved[HY_TOK_NRESERVED] = {"[PAD]", "[UNK]", "[CLS]",
                                                        "[MASK]"};

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
        hy_status st = hy_buf_put(&v->bytes, w[i], wl[i]);
        if (st == HY_OK) st = hy_buf_putc(&v->bytes, '\0');
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
    if (max_size != 0 && max_size < HY_TOK_NRESERVED + 1)
        return hy_fail(HY_EINVAL, "text: vocabulary max_size must be 0 (no cap) or >= %d, got %lld",
                       HY_TOK_NRESERVED + 1, (long long)max_size);
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
    size_t total = m + HY_TOK_NRESERVED;
    if (max_size && total > (size_t)max_size) total = (size_t)max_size;
    w = hy_xmalloc(total * sizeof *w);
    wl = hy_xmalloc(total * sizeof *wl);
    cnt = hy_xcalloc(total, sizeof *cnt);
    if (!w || !wl || !cnt) { st = hy_fail(HY_ENOMEM, "text: out of memory"); goto done; }
    for (size_t i = 0; i < HY_TOK_NRESERVED; i++) {
        w[i] = hy_tok_reserved[i];
        wl[i] = strlen(w[i]);
    }
    for (size_t i = HY_TOK_NRESERVED; i < total; i++) {
        w[i] = list[i - HY_TOK_NRESERVED].w;
        wl[i] = list[i - HY_TOK_NRESERVED].len;
        cnt[i] = list[i - HY_TOK_NRESERVED].count;
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
    if (n < HY_TOK_NRESERVED)
        return hy_fail(HY_EINVAL, "text: vocabulary has %zu words (expected at least %d)", n,
                       HY_TOK_NRESERVED);
    for (size_t i = 0; i < HY_TOK_NRESERVED; i++)
        if (strcmp(words[i], hy_tok_reserved[i]) != 0)
            return hy_fail(HY_EINVAL, "text: vocabulary word %zu is '%s' (expected '%s')", i,
                           words[i], hy_tok_reserved[i]);
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
    if (v->n < HY_TOK_NRESERVED)
        return hy_fail(HY_EINVAL, "text: vocabulary has %zu words (expected at least %d)", v->n,
                       HY_TOK_NRESERVED);
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
            row[k++] = id < 0 ? HY_TOK_UNK : id;
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
