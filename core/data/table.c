/* table.c: CSV / TSV / JSON Lines readers of hy_table (see table.h). The file is read whole;
 * CSV/TSV rows are split into fields in a scratch buffer (quoted CSV fields unescaped), JSONL
 * lines are parsed with jansson. */
#include "data/table.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "io/textfile.h"

/* ===== helpers ===== */

typedef struct {
    size_t cap;
} grow;

static hy_status push_rec(hy_table *t, grow *g, const char *txt, size_t tn, const char *pr,
                          size_t pn, const char *lab, size_t ln, int has_pair, int has_label,
                          int64_t line) {
    if (t->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 1024;
        int64_t *a = hy_xrealloc(t->text_off, nc * sizeof *a);
        if (!a) return HY_ENOMEM;
        t->text_off = a;
        a = hy_xrealloc(t->line, nc * sizeof *a);
        if (!a) return HY_ENOMEM;
        t->line = a;
        if (has_label) {
            a = hy_xrealloc(t->label_off, nc * sizeof *a);
            if (!a) return HY_ENOMEM;
            t->label_off = a;
        }
        if (has_pair) {
            a = hy_xrealloc(t->pair_off, nc * sizeof *a);
            if (!a) return HY_ENOMEM;
            t->pair_off = a;
        }
        g->cap = nc;
    }
    t->text_off[t->n] = (int64_t)t->text.len;
    HY_TRY(hy_buf_put(&t->text, txt, tn));
    HY_TRY(hy_buf_putc(&t->text, '\0'));
    if (has_pair) {
        t->pair_off[t->n] = (int64_t)t->pair.len;
        HY_TRY(hy_buf_put(&t->pair, pr, pn));
        HY_TRY(hy_buf_putc(&t->pair, '\0'));
    }
    if (has_label) {
        t->label_off[t->n] = (int64_t)t->label.len;
        HY_TRY(hy_buf_put(&t->label, lab, ln));
        HY_TRY(hy_buf_putc(&t->label, '\0'));
    }
    t->line[t->n] = line;
    t->n++;
    return HY_OK;
}

void hy_table_release(hy_table *t) {
    if (!t) return;
    hy_buf_release(&t->text);
    hy_buf_release(&t->label);
    hy_buf_release(&t->pair);
    hy_free(t->pair_off);
    hy_free(t->text_off);
    hy_free(t->label_off);
    hy_free(t->line);
    memset(t, 0, sizeof *t);
}

static hy_status check_utf8(const char *path, int64_t line, const char *col, const char *s,
                            size_t n) {
    if (memchr(s, '\0', n))
        return hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' holds a NUL byte", path,
                       (long long)line, col);
    size_t b = hy_utf8_bad(s, n);
    if (b < n)
        return hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' is not valid UTF-8 (byte %zu)",
                       path, (long long)line, col, b);
    return HY_OK;
}

/* ===== CSV / TSV ===== */

typedef struct {
    size_t off, len;     /* into the row scratch buffer */
} field;

typedef struct {
    field *f;
    size_t n, cap;
    hy_buf buf;          /* unescaped field bytes */
} row;

static hy_status row_add(row *r, size_t off, size_t len) {
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 16;
        field *f = hy_xrealloc(r->f, nc * sizeof *f);
        if (!f) return HY_ENOMEM;
        r->f = f;
        r->cap = nc;
    }
    r->f[r->n].off = off;
    r->f[r->n].len = len;
    r->n++;
    return HY_OK;
}

/* Splits the row starting at s[*pos] (line *line) into r; advances *pos past its end and *line
 * by the line breaks consumed. Returns 0 at end of input, 1 for a row. */
static hy_status next_row(const char *path, const char *s, size_t n, size_t *pos, int64_t *line,
                          int csv, row *r, int *got) {
    r->n = 0;
    r->buf.len = 0;
    *got = 0;
    size_t i = *pos;
    if (i >= n) return HY_OK;
    *got = 1;
    char sep = csv ? ',' : '\t';
    int64_t start_line = *line;
    for (;;) {
        size_t off = r->buf.len;
        if (csv && i < n && s[i] == '"') {
            i++;
            for (;;) {
                if (i >= n)
                    return hy_fail(HY_EINVAL, "table: '%s':%lld: the file ends inside a quoted "
                                   "field (opened on this line)", path, (long long)start_line);
                if (s[i] == '"') {
                    if (i + 1 < n && s[i + 1] == '"') { HY_TRY(hy_buf_putc(&r->buf, '"')); i += 2; continue; }
                    i++;
                    break;
                }
                if (s[i] == '\n') (*line)++;
                HY_TRY(hy_buf_putc(&r->buf, s[i]));
                i++;
            }
            if (i < n && s[i] != sep && s[i] != '\n' && !(s[i] == '\r' && i + 1 < n && s[i + 1] == '\n'))
                return hy_fail(HY_EINVAL, "table: '%s':%lld: field %zu: text after the closing "
                               "quote (a '\"' inside a quoted field is written '\"\"')", path,
                               (long long)*line, r->n + 1);
        } else {
            size_t j = i;
            while (j < n && s[j] != sep && s[j] != '\n') {
                if (csv && s[j] == '"')
                    return hy_fail(HY_EINVAL, "table: '%s':%lld: field %zu: a '\"' inside an "
                                   "unquoted field (quote the whole field)", path,
                                   (long long)*line, r->n + 1);
                j++;
            }
            size_t e = j;
            if ((j >= n || s[j] == '\n') && e > i && s[e - 1] == '\r') e--;
            HY_TRY(hy_buf_put(&r->buf, s + i, e - i));
            i = j;
        }
        HY_TRY(row_add(r, off, r->buf.len - off));
        if (i < n && s[i] == sep) { i++; continue; }
        if (i < n && s[i] == '\r') i++;
        if (i < n && s[i] == '\n') { i++; (*line)++; }
        break;
    }
    *pos = i;
    return HY_OK;
}

static int row_blank(const row *r) { return r->n == 1 && r->f[0].len == 0; }

static hy_status read_delimited(const char *path, const char *s, size_t n, int csv,
                                const char *text_col, const char *pair_col,
                                const char *label_col, hy_table *t) {
    row r = {0};
    grow g = {0};
    size_t pos = 0;
    int64_t line = 1;
    int got = 0;
    hy_status st = HY_OK;
    /* header: the first non-blank row */
    int64_t hline = 1;
    do {
        hline = line;
        st = next_row(path, s, n, &pos, &line, csv, &r, &got);
    } while (st == HY_OK && got && row_blank(&r));
    if (st == HY_OK && !got) st = hy_fail(HY_EINVAL, "table: '%s' is empty (no header row)", path);
    size_t ncol = r.n, tcol = (size_t)-1, lcol = (size_t)-1, pcol = (size_t)-1;
    char known[512] = "";
    for (size_t k = 0; st == HY_OK && k < ncol; k++) {
        const char *name = r.buf.data + r.f[k].off;
        size_t len = r.f[k].len;
        if (strlen(text_col) == len && memcmp(name, text_col, len) == 0) tcol = k;
        if (label_col && strlen(label_col) == len && memcmp(name, label_col, len) == 0) lcol = k;
        if (pair_col && strlen(pair_col) == len && memcmp(name, pair_col, len) == 0) pcol = k;
        size_t kl = strlen(known);
        snprintf(known + kl, sizeof known - kl, "%s%.*s", k ? ", " : "", (int)len, name);
    }
    if (st == HY_OK && tcol == (size_t)-1)
        st = hy_fail(HY_EINVAL, "table: '%s':%lld: no column '%s' in the header (columns: %s)",
                     path, (long long)hline, text_col, known);
    if (st == HY_OK && label_col && lcol == (size_t)-1)
        st = hy_fail(HY_EINVAL, "table: '%s':%lld: no column '%s' in the header (columns: %s)",
                     path, (long long)hline, label_col, known);
    if (st == HY_OK && pair_col && pcol == (size_t)-1)
        st = hy_fail(HY_EINVAL, "table: '%s':%lld: no column '%s' in the header (columns: %s)",
                     path, (long long)hline, pair_col, known);
    while (st == HY_OK) {
        int64_t rline = line;
        st = next_row(path, s, n, &pos, &line, csv, &r, &got);
        if (st != HY_OK || !got) break;
        if (row_blank(&r)) continue;
        if (r.n != ncol) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: row has %zu fields, the header has %zu",
                         path, (long long)rline, r.n, ncol);
            break;
        }
        const char *tx = r.buf.data + r.f[tcol].off;
        st = check_utf8(path, rline, text_col, tx, r.f[tcol].len);
        const char *lb = label_col ? r.buf.data + r.f[lcol].off : NULL;
        size_t ll = label_col ? r.f[lcol].len : 0;
        if (st == HY_OK && label_col) st = check_utf8(path, rline, label_col, lb, ll);
        if (st == HY_OK && label_col && ll == 0)
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' is empty", path,
                         (long long)rline, label_col);
        const char *pr = pair_col ? r.buf.data + r.f[pcol].off : NULL;
        size_t pl = pair_col ? r.f[pcol].len : 0;
        if (st == HY_OK && pair_col) st = check_utf8(path, rline, pair_col, pr, pl);
        if (st == HY_OK)
            st = push_rec(t, &g, tx, r.f[tcol].len, pr, pl, lb, ll, pair_col != NULL,
                          label_col != NULL, rline);
    }
    hy_free(r.f);
    hy_buf_release(&r.buf);
    return st;
}

/* ===== JSON Lines ===== */

/* the string at key `col` of object o (*out, *len), or an error naming the line */
static hy_status json_text(const char *path, int64_t line, json_t *o, const char *col,
                           const char **out, size_t *len) {
    json_t *v = json_object_get(o, col);
    if (!v)
        return hy_fail(HY_EINVAL, "table: '%s':%lld: no key '%s'", path, (long long)line, col);
    if (!json_is_string(v))
        return hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' is %s (expected a string)",
                       path, (long long)line, col, hy_json_kind(v));
    *out = json_string_value(v);
    *len = json_string_length(v);
    if (memchr(*out, '\0', *len))
        return hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' holds a NUL character", path,
                       (long long)line, col);
    return HY_OK;
}

static hy_status read_jsonl(const char *path, const char *s, size_t n, const char *text_col,
                            const char *pair_col, const char *label_col, hy_table *t) {
    grow g = {0};
    hy_status st = HY_OK;
    int64_t line = 0;
    for (size_t i = 0; i < n && st == HY_OK;) {
        size_t j = i, ls = i;
        while (j < n && s[j] != '\n') j++;
        line++;
        size_t e = j;
        if (e > i && s[e - 1] == '\r') e--;
        size_t a = i;
        while (a < e && (s[a] == ' ' || s[a] == '\t')) a++;
        i = j + 1;
        if (a == e) continue;
        size_t bad = hy_utf8_bad(s + a, e - a);
        if (bad < e - a) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: not valid UTF-8 (byte %zu)", path,
                         (long long)line, bad + (a - ls));
            break;
        }
        json_error_t je;
        json_t *o = json_loadb(s + a, e - a, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!o) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld:%d: %s", path, (long long)line,
                         je.column, je.text);
            break;
        }
        if (!json_is_object(o)) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: the line is %s (expected a JSON object)",
                         path, (long long)line, hy_json_kind(o));
            json_decref(o);
            break;
        }
        json_t *lv = label_col ? json_object_get(o, label_col) : NULL;
        char num[32];
        const char *lb = NULL, *tx = NULL, *pr = NULL;
        size_t ll = 0, tl = 0, pl = 0;
        st = json_text(path, line, o, text_col, &tx, &tl);
        if (st == HY_OK && pair_col) st = json_text(path, line, o, pair_col, &pr, &pl);
        if (st != HY_OK) {
        } else if (label_col && !lv) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: no key '%s'", path, (long long)line,
                         label_col);
        } else if (label_col && json_is_integer(lv)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(lv));
            lb = num;
            ll = strlen(num);
        } else if (label_col && json_is_string(lv)) {
            lb = json_string_value(lv);
            ll = json_string_length(lv);
            if (ll == 0)
                st = hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' is empty", path,
                             (long long)line, label_col);
        } else if (label_col) {
            st = hy_fail(HY_EINVAL, "table: '%s':%lld: column '%s' is %s (expected an integer "
                         "or a string)", path, (long long)line, label_col, hy_json_kind(lv));
        }
        if (st == HY_OK)
            st = push_rec(t, &g, tx, tl, pr, pl, lb, ll, pair_col != NULL, label_col != NULL,
                          line);
        json_decref(o);
    }
    return st;
}

/* ===== entry point ===== */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

hy_status hy_table_read(const char *path, const char *text_col, const char *pair_col,
                        const char *label_col, hy_table *t) {
    memset(t, 0, sizeof *t);
    int fmt = ends_with(path, ".csv") ? 0 : ends_with(path, ".tsv") ? 1
            : ends_with(path, ".jsonl") ? 2 : -1;
    if (fmt < 0)
        return hy_fail(HY_EINVAL, "table: '%s': unknown format (expected a .csv, .tsv or .jsonl "
                       "file)", path);
    hy_buf all = {0};
    hy_status st = hy_file_read(&all, path, "table");
    const char *s = all.data ? all.data : "";
    size_t n = all.len;
    /* a UTF-8 byte-order mark is not part of the first column's name */
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) { s += 3; n -= 3; }
    if (st == HY_OK) {
        if (fmt == 2) st = read_jsonl(path, s, n, text_col, pair_col, label_col, t);
        else st = read_delimited(path, s, n, fmt == 0, text_col, pair_col, label_col, t);
    }
    if (st == HY_OK && t->n == 0) st = hy_fail(HY_EINVAL, "table: '%s' has no records", path);
    hy_buf_release(&all);
    if (st != HY_OK) hy_table_release(t);
    return st;
}
