/* config.c: see config.h. libyaml's event parser feeds an explicit stack of open collections
 * (no recursion while parsing); libyaml marks are 0-based and become 1-based here, once. */
#define _POSIX_C_SOURCE 200809L
#include "io/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#define TAG_STR "tag:yaml.org,2002:str"
#define TAG_SEQ "tag:yaml.org,2002:seq"
#define TAG_MAP "tag:yaml.org,2002:map"

const char *hy_config_kind_name(hy_config_kind kind) {
    switch (kind) {
    case HY_CONFIG_NULL: return "null";
    case HY_CONFIG_BOOL: return "boolean";
    case HY_CONFIG_INT: return "integer";
    case HY_CONFIG_FLOAT: return "float";
    case HY_CONFIG_STR: return "string";
    case HY_CONFIG_SEQ: return "list";
    case HY_CONFIG_MAP: return "map";
    }
    return "?";
}

/* ===== freeing ===== */

static void node_free(hy_config_node *n) {
    if (n->kind == HY_CONFIG_SEQ || n->kind == HY_CONFIG_MAP) {
        size_t cnt = n->kind == HY_CONFIG_MAP ? 2 * n->n : n->n;
        for (size_t i = 0; i < cnt; i++) node_free(&n->items[i]);
        hy_free(n->items);
    } else {
        hy_free(n->text);
    }
    memset(n, 0, sizeof *n);
}

void hy_config_free(hy_config_doc *doc) {
    if (doc == NULL) return;
    node_free(&doc->root);
    hy_free(doc->name);
    memset(doc, 0, sizeof *doc);
}

/* ===== scalar typing (YAML 1.2 core schema) ===== */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int all_in(const char *s, const char *set) {
    if (*s == '\0') return 0;
    for (; *s; s++)
        if (!strchr(set, *s)) return 0;
    return 1;
}

static int is_one_of(const char *s, const char *const *words) {
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return 1;
    return 0;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float_text(const char *s) {
    if (*s == '-' || *s == '+') s++;
    size_t int_digits = 0, frac_digits = 0;
    while (is_digit(*s)) { s++; int_digits++; }
    if (*s == '.') {
        s++;
        while (is_digit(*s)) { s++; frac_digits++; }
        if (int_digits == 0 && frac_digits == 0) return 0;
    } else if (int_digits == 0) {
        return 0;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+') s++;
        if (!is_digit(*s)) return 0;
        while (is_digit(*s)) s++;
    }
    return *s == '\0';
}

/* Sets n->kind (and n->i / n->f) from the text of a plain, untagged scalar. */
static hy_status type_plain(hy_config_node *n, const char *name) {
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const infs[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
    static const char *const ninfs[] = {"-.inf", "-.Inf", "-.INF", NULL};
    static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
    const char *s = n->text;
    n->kind = HY_CONFIG_STR;
    if (strlen(s) != n->len) return HY_OK;              /* holds a NUL byte: a string */
    if (is_one_of(s, nulls)) { n->kind = HY_CONFIG_NULL; return HY_OK; }
    if (is_one_of(s, trues)) { n->kind = HY_CONFIG_BOOL; n->i = 1; return HY_OK; }
    if (is_one_of(s, falses)) { n->kind = HY_CONFIG_BOOL; n->i = 0; return HY_OK; }
    if (is_one_of(s, infs)) { n->kind = HY_CONFIG_FLOAT; n->f = (double)INFINITY; return HY_OK; }
    if (is_one_of(s, ninfs)) { n->kind = HY_CONFIG_FLOAT; n->f = -(double)INFINITY; return HY_OK; }
    if (is_one_of(s, nans)) { n->kind = HY_CONFIG_FLOAT; n->f = (double)NAN; return HY_OK; }

    const char *digits = NULL;
    int base = 10;
    const char *body = (*s == '-' || *s == '+') ? s + 1 : s;
    if (s[0] == '0' && s[1] == 'o' && all_in(s + 2, "01234567")) { digits = s + 2; base = 8; }
    else if (s[0] == '0' && s[1] == 'x' && all_in(s + 2, "0123456789abcdefABCDEF")) {
        digits = s + 2;
        base = 16;
    } else if (all_in(body, "0123456789")) { digits = s; }
    if (digits) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(digits, &end, base);
        if (errno == ERANGE || end == digits || *end != '\0')
            return hy_fail(HY_ECONFIG, "%s:%lld:%lld: integer out of range (got %s; the limit "
                           "is 9223372036854775807 in magnitude)", name, (long long)n->line,
                           (long long)n->col, s);
        n->kind = HY_CONFIG_INT;
        n->i = (int64_t)v;
        return HY_OK;
    }
    if (is_float_text(s)) {
        char *end = NULL;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || *end != '\0')
            return hy_fail(HY_ECONFIG, "%s:%lld:%lld: cannot read float '%s'", name,
                           (long long)n->line, (long long)n->col, s);
        if (errno == ERANGE && isinf(v))
            return hy_fail(HY_ECONFIG, "%s:%lld:%lld: float out of range (got %s; write .inf "
                           "for infinity)", name, (long long)n->line, (long long)n->col, s);
        n->kind = HY_CONFIG_FLOAT;
        n->f = v;
    }
    return HY_OK;
}

/* ===== building the tree from events ===== */

typedef struct frame {
    hy_config_node *node;   /* an open SEQ or MAP */
    size_t count;           /* item nodes appended (MAP: keys and values) */
    size_t cap;
    size_t *keys;           /* MAP: hash set of its keys (open addressing, linear probing):
                               slot = item index + 1, 0 = empty; NULL until the first key */
    size_t nslots;          /* a power of two, at least twice the number of keys */
} frame;

typedef struct builder {
    const char *name;
    hy_config_doc *doc;
    frame stack[HY_CONFIG_MAXDEPTH];
    int depth;
    int have_root;
} builder;

static hy_status fail_at(const builder *b, const yaml_mark_t *m, const char *fmt, ...)
    HY_PRINTF(3, 4);
static hy_status fail_at(const builder *b, const yaml_mark_t *m, const char *fmt, ...) {
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hy_fail(HY_ECONFIG, "%s:%zu:%zu: %s", b->name, m->line + 1, m->column + 1, what);
}

/* Dotted path of the collection at stack level `level` (levels below it lead to it):
 * "train.augment", "data.ood[2]"; "" for the root. */
static void path_of(const builder *b, int level, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (int d = 0; d < level && k < cap; d++) {
        const frame *f = &b->stack[d];
        int w;
        if (f->node->kind == HY_CONFIG_MAP) {
            const hy_config_node *key = &f->node->items[f->count - 2];
            w = snprintf(out + k, cap - k, "%s%s", k ? "." : "", key->text);
        } else {
            w = snprintf(out + k, cap - k, "[%zu]", f->count);
        }
        if (w < 0) break;
        k += (size_t)w;
    }
    if (k >= cap) out[cap - 1] = '\0';
}

/* Appends a zeroed node to the innermost open collection (or makes it the root). */
static hy_status append(builder *b, const yaml_mark_t *m, hy_config_node **out) {
    if (b->depth == 0) {
        HY_ASSERT(!b->have_root);
        b->have_root = 1;
        *out = &b->doc->root;
    } else {
        frame *f = &b->stack[b->depth - 1];
        if (f->count == f->cap) {
            size_t cap = f->cap ? 2 * f->cap : 8;
            hy_config_node *items = hy_xrealloc(f->node->items, cap * sizeof *items);
            if (!items) return HY_ENOMEM;
            f->node->items = items;
            f->cap = cap;
        }
        *out = &f->node->items[f->count];
        memset(*out, 0, sizeof **out);
        f->count++;
        if (f->node->kind == HY_CONFIG_SEQ) f->node->n = f->count;
        else f->node->n = f->count / 2;     /* a key waiting for its value is not counted */
    }
    (*out)->line = (int64_t)m->line + 1;
    (*out)->col = (int64_t)m->column + 1;
    return HY_OK;
}

/* In a mapping, the next node is a key when an even number of nodes has been appended. */
static int next_is_key(const builder *b) {
    if (b->depth == 0) return 0;
    const frame *f = &b->stack[b->depth - 1];
    return f->node->kind == HY_CONFIG_MAP && f->count % 2 == 0;
}

/* FNV-1a over the key's bytes (keys may hold NUL bytes). */
static uint64_t key_hash(const hy_config_node *k) {
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < k->len; i++) {
        h ^= (unsigned char)k->text[i];
        h *= 1099511628211u;
    }
    return h;
}

/* Puts item index ki (a key) into f's set; returns the index of an equal key already there, or
 * SIZE_MAX once inserted. The set doubles when half full. */
static hy_status key_set_insert(frame *f, size_t ki, size_t *dup) {
    const hy_config_node *items = f->node->items;
    size_t nkeys = ki / 2 + 1;
    if (2 * nkeys > f->nslots) {
        size_t ns = f->nslots ? 2 * f->nslots : 16;
        size_t *slots = hy_xcalloc(ns, sizeof *slots);
        if (!slots) return HY_ENOMEM;
        for (size_t i = 0; i < f->nslots; i++) {
            if (!f->keys[i]) continue;
            size_t j = (size_t)key_hash(&items[f->keys[i] - 1]) & (ns - 1);
            while (slots[j]) j = (j + 1) & (ns - 1);
            slots[j] = f->keys[i];
        }
        hy_free(f->keys);
        f->keys = slots;
        f->nslots = ns;
    }
    const hy_config_node *key = &items[ki];
    size_t j = (size_t)key_hash(key) & (f->nslots - 1);
    for (; f->keys[j]; j = (j + 1) & (f->nslots - 1)) {
        const hy_config_node *o = &items[f->keys[j] - 1];
        if (o->len == key->len && memcmp(o->text, key->text, key->len) == 0) {
            *dup = f->keys[j] - 1;
            return HY_OK;
        }
    }
    f->keys[j] = ki + 1;
    *dup = SIZE_MAX;
    return HY_OK;
}

static void frame_release(frame *f) {
    hy_free(f->keys);
    f->keys = NULL;
    f->nslots = 0;
}

/* Called after a scalar key was appended: rejects a key equal to an earlier one (a hash set
 * per mapping, so a mapping of n keys costs O(n), not O(n^2)). */
static hy_status check_duplicate(builder *b, const yaml_mark_t *m) {
    frame *f = &b->stack[b->depth - 1];
    size_t d;
    HY_TRY(key_set_insert(f, f->count - 1, &d));
    if (d == SIZE_MAX) return HY_OK;
    const hy_config_node *key = &f->node->items[f->count - 1], *o = &f->node->items[d];
    char path[512];
    path_of(b, b->depth - 1, path, sizeof path);
    return fail_at(b, m, "duplicate key '%s'%s%s%s (first at %lld:%lld)", key->text,
                   path[0] ? " in '" : "", path, path[0] ? "'" : "", (long long)o->line,
                   (long long)o->col);
}

/* A tag as the user wrote it: "tag:yaml.org,2002:int" -> "!!int". */
static const char *short_tag(const char *tag) {
    static _Thread_local char buf[256];
    const char *prefix = "tag:yaml.org,2002:";
    size_t k = strlen(prefix);
    if (strncmp(tag, prefix, k) != 0) return tag;
    snprintf(buf, sizeof buf, "!!%s", tag + k);
    return buf;
}

static hy_status on_scalar(builder *b, const yaml_event_t *ev) {
    const yaml_mark_t *m = &ev->start_mark;
    const char *tag = (const char *)ev->data.scalar.tag;
    if (tag && strcmp(tag, TAG_STR) != 0 && strcmp(tag, "!") != 0)
        return fail_at(b, m, "unsupported tag '%s' (only !!str is allowed)", short_tag(tag));
    int key = next_is_key(b);
    hy_config_node *n;
    HY_TRY(append(b, m, &n));
    size_t len = ev->data.scalar.length;
    n->text = hy_xmalloc(len + 1);
    if (!n->text) return HY_ENOMEM;
    memcpy(n->text, ev->data.scalar.value, len);
    n->text[len] = '\0';
    n->len = len;
    switch (ev->data.scalar.style) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE: n->style = HY_CONFIG_SINGLE_QUOTED; break;
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE: n->style = HY_CONFIG_DOUBLE_QUOTED; break;
    case YAML_LITERAL_SCALAR_STYLE: n->style = HY_CONFIG_LITERAL; break;
    case YAML_FOLDED_SCALAR_STYLE: n->style = HY_CONFIG_FOLDED; break;
    default: n->style = HY_CONFIG_PLAIN; break;
    }
    n->kind = HY_CONFIG_STR;
    if (key) return check_duplicate(b, m);           /* keys stay strings, whatever they say */
    if (n->style == HY_CONFIG_PLAIN && tag == NULL) return type_plain(n, b->name);
    return HY_OK;
}

static hy_status on_start(builder *b, const yaml_event_t *ev, hy_config_kind kind) {
    const yaml_mark_t *m = &ev->start_mark;
    const char *tag = (const char *)(kind == HY_CONFIG_SEQ ? ev->data.sequence_start.tag
                                                           : ev->data.mapping_start.tag);
    if (tag && strcmp(tag, kind == HY_CONFIG_SEQ ? TAG_SEQ : TAG_MAP) != 0)
        return fail_at(b, m, "unsupported tag '%s'", short_tag(tag));
    if (next_is_key(b)) {
        char path[512];
        path_of(b, b->depth - 1, path, sizeof path);
        return fail_at(b, m, "a %s cannot be a mapping key%s%s%s (keys are plain names)",
                       hy_config_kind_name(kind), path[0] ? " in '" : "", path,
                       path[0] ? "'" : "");
    }
    if (b->depth == HY_CONFIG_MAXDEPTH)
        return fail_at(b, m, "nesting deeper than %d levels", HY_CONFIG_MAXDEPTH);
    hy_config_node *n;
    HY_TRY(append(b, m, &n));
    n->kind = kind;
    int flow = kind == HY_CONFIG_SEQ
                   ? ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                   : ev->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    n->style = flow ? HY_CONFIG_FLOW : HY_CONFIG_BLOCK;
    b->stack[b->depth++] = (frame){.node = n, .count = 0, .cap = 0, .keys = NULL, .nslots = 0};
    return HY_OK;
}

/* libyaml's own error: "name:line:col: problem (context)". Reader errors (bad encoding) carry a
 * byte offset instead of a mark; the position is computed from the text. */
static hy_status parser_error(const builder *b, const yaml_parser_t *p, const char *text,
                              size_t len) {
    if (p->error == YAML_MEMORY_ERROR)
        return hy_fail(HY_ENOMEM, "config: out of memory while parsing '%s'", b->name);
    size_t line = p->problem_mark.line + 1, col = p->problem_mark.column + 1;
    if (p->error == YAML_READER_ERROR) {
        line = 1;
        col = 1;
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (text[i] == '\n') { line++; col = 1; }
            else col++;
        }
        if (p->problem_value != -1)
            return hy_fail(HY_ECONFIG, "%s:%zu:%zu: %s (byte #x%02X)", b->name, line, col,
                           p->problem ? p->problem : "cannot read input",
                           (unsigned)p->problem_value);
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->context)
        return hy_fail(HY_ECONFIG, "%s:%zu:%zu: %s (%s)", b->name, line, col, problem,
                       p->context);
    return hy_fail(HY_ECONFIG, "%s:%zu:%zu: %s", b->name, line, col, problem);
}

/* After a failure mid-tree: a mapping key without its value is not counted in node->n, so it
 * is freed here before the tree itself. */
static void free_dangling_keys(builder *b) {
    for (int d = 0; d < b->depth; d++) {
        frame *f = &b->stack[d];
        if (f->node->kind == HY_CONFIG_MAP && f->count % 2 == 1) {
            hy_free(f->node->items[f->count - 1].text);
            f->node->items[f->count - 1].text = NULL;
        }
    }
}

hy_status hy_config_parse(hy_config_doc *doc, const char *text, size_t len, const char *name) {
    HY_ASSERT(doc != NULL && (text != NULL || len == 0) && name != NULL);
    memset(doc, 0, sizeof *doc);
    doc->name = hy_xstrdup(name);
    if (!doc->name) return HY_ENOMEM;
    builder b = {.name = doc->name, .doc = doc};
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        hy_config_free(doc);
        return hy_fail(HY_ENOMEM, "config: cannot create a YAML parser");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    hy_status st = HY_OK;
    int documents = 0, done = 0;
    while (!done && st == HY_OK) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = parser_error(&b, &parser, text, len);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                st = fail_at(&b, &ev.start_mark,
                             "a second document starts here (a config is one YAML document)");
            break;
        case YAML_ALIAS_EVENT:
            st = fail_at(&b, &ev.start_mark, "aliases are not supported in configs (*%s)",
                         (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT: st = on_scalar(&b, &ev); break;
        case YAML_SEQUENCE_START_EVENT: st = on_start(&b, &ev, HY_CONFIG_SEQ); break;
        case YAML_MAPPING_START_EVENT: st = on_start(&b, &ev, HY_CONFIG_MAP); break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: frame_release(&b.stack[--b.depth]); break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (st != HY_OK) {
        if (st == HY_ENOMEM && strstr(hy_errmsg(), "out of memory") == NULL)
            hy_fail(HY_ENOMEM, "config: out of memory while parsing '%s'", name);
        free_dangling_keys(&b);
        for (int d = 0; d < b.depth; d++) frame_release(&b.stack[d]);
        hy_config_free(doc);
        return st;
    }
    if (!b.have_root) {                                  /* empty file: a null document */
        doc->root.kind = HY_CONFIG_NULL;
        doc->root.line = 1;
        doc->root.col = 1;
    }
    return HY_OK;
}

hy_status hy_config_load(hy_config_doc *doc, const char *path) {
    HY_ASSERT(doc != NULL && path != NULL);
    memset(doc, 0, sizeof *doc);
    FILE *fp = fopen(path, "rb");
    if (!fp) return hy_fail(HY_EIO, "config: cannot read '%s' (%s)", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = hy_xmalloc(cap);
    hy_status st = HY_OK;
    if (!buf) { st = hy_fail_prefix(HY_ENOMEM, "config: cannot read '%s'", path); goto done; }
    /* Read at most HY_CONFIG_MAXBYTES + 1 bytes: /dev/zero or a pipe never ends. */
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2 > HY_CONFIG_MAXBYTES + 1 ? HY_CONFIG_MAXBYTES + 1 : cap * 2;
            if (ncap == cap) break;
            char *nb = hy_xrealloc(buf, ncap);
            if (!nb) { st = hy_fail_prefix(HY_ENOMEM, "config: cannot read '%s'", path); goto done; }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    if (ferror(fp)) {
        st = hy_fail(HY_EIO, "config: cannot read '%s' (%s)", path, strerror(errno));
        goto done;
    }
    if (len > HY_CONFIG_MAXBYTES) {
        st = hy_fail(HY_ECONFIG, "config: '%s' is larger than %d MiB, the limit for a config "
                     "file", path, (int)(HY_CONFIG_MAXBYTES >> 20));
        goto done;
    }
    st = hy_config_parse(doc, buf, len, path);
done:
    hy_free(buf);
    fclose(fp);
    return st;
}

/* ===== lookups ===== */

const hy_config_node *hy_config_find(const hy_config_node *map, const char *key) {
    if (map == NULL || map->kind != HY_CONFIG_MAP) return NULL;
    size_t klen = strlen(key);
    for (size_t i = 0; i < map->n; i++) {
        const hy_config_node *k = &map->items[2 * i];
        if (k->len == klen && memcmp(k->text, key, klen) == 0) return &map->items[2 * i + 1];
    }
    return NULL;
}

const hy_config_node *hy_config_get(const hy_config_node *root, const char *path) {
    char part[256];
    const hy_config_node *n = root;
    const char *s = path;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t k = dot ? (size_t)(dot - s) : strlen(s);
        if (k == 0 || k >= sizeof part) return NULL;
        memcpy(part, s, k);
        part[k] = '\0';
        n = hy_config_find(n, part);
        if (!n || !dot) return n;
        s = dot + 1;
    }
}

/* "string 'ten'", "float 2.5", "null", "list", ... for wrong-type messages. */
static void describe(const hy_config_node *n, char *out, size_t cap) {
    switch (n->kind) {
    case HY_CONFIG_NULL: snprintf(out, cap, "null"); break;
    case HY_CONFIG_SEQ: snprintf(out, cap, "list"); break;
    case HY_CONFIG_MAP: snprintf(out, cap, "map"); break;
    case HY_CONFIG_STR: snprintf(out, cap, "string '%s'", n->text); break;
    default: snprintf(out, cap, "%s %s", hy_config_kind_name(n->kind), n->text); break;
    }
}

static hy_status get_leaf(const hy_config_doc *doc, const char *path, hy_config_kind want,
                          const char *want_name, const hy_config_node **out) {
    const hy_config_node *n = hy_config_get(&doc->root, path);
    if (!n) return hy_fail(HY_ECONFIG, "%s: missing key '%s'", doc->name, path);
    if (n->kind != want && !(want == HY_CONFIG_FLOAT && n->kind == HY_CONFIG_INT)) {
        char got[320];
        describe(n, got, sizeof got);
        return hy_fail(HY_ECONFIG, "%s:%lld:%lld: %s: expected %s, got %s", doc->name,
                       (long long)n->line, (long long)n->col, path, want_name, got);
    }
    *out = n;
    return HY_OK;
}

hy_status hy_config_get_int(const hy_config_doc *doc, const char *path, int64_t *out) {
    const hy_config_node *n;
    HY_TRY(get_leaf(doc, path, HY_CONFIG_INT, "integer", &n));
    *out = n->i;
    return HY_OK;
}

hy_status hy_config_get_float(const hy_config_doc *doc, const char *path, double *out) {
    const hy_config_node *n;
    HY_TRY(get_leaf(doc, path, HY_CONFIG_FLOAT, "number", &n));
    *out = n->kind == HY_CONFIG_INT ? (double)n->i : n->f;
    return HY_OK;
}

hy_status hy_config_get_bool(const hy_config_doc *doc, const char *path, int *out) {
    const hy_config_node *n;
    HY_TRY(get_leaf(doc, path, HY_CONFIG_BOOL, "boolean", &n));
    *out = (int)n->i;
    return HY_OK;
}

hy_status hy_config_get_str(const hy_config_doc *doc, const char *path, const char **out) {
    const hy_config_node *n;
    HY_TRY(get_leaf(doc, path, HY_CONFIG_STR, "string", &n));
    *out = n->text;
    return HY_OK;
}
