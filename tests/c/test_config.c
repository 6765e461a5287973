/* test_config.c: the YAML tree parser (core/config): positions, styles, scalar typing, exact
 * messages for malformed input and the checks the core makes (duplicates, aliases, depth). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "io/config.h"
#include "tensor/rng.h"

static hy_status parse(hy_config_doc *d, const char *text) {
    return hy_config_parse(d, text, strlen(text), "x.yaml");
}

/* A failing parse must leave the doc zeroed; checks the status and the exact message. */
static void expect_error(const char *text, const char *msg) {
    hy_config_doc d;
    CHECK_FAIL(parse(&d, text), HY_ECONFIG, msg);
    CHECK(d.root.kind == HY_CONFIG_NULL && d.root.items == NULL && d.name == NULL,
          "doc not zeroed after a failed parse of %s", text);
    hy_config_free(&d);
}

static void test_positions_and_styles(void) {
    const char *text =
        "# comment\n"
        "seed: 7\n"
        "optim:\n"
        "  learning_rate: 1.0e-3\n"
        "  name: 'adamw'\n"
        "data:\n"
        "  ood: [mnist, \"glyphs\"]\n"
        "  note: |\n"
        "    two\n"
        "    lines\n"
        "empty:\n";
    hy_config_doc d;
    CHECK_OK(parse(&d, text));
    CHECK(strcmp(d.name, "x.yaml") == 0, "name %s", d.name);
    const hy_config_node *r = &d.root;
    CHECK(r->kind == HY_CONFIG_MAP && r->style == HY_CONFIG_BLOCK && r->n == 4, "root n=%zu",
          r->n);
    CHECK(r->line == 2 && r->col == 1, "root at %lld:%lld", (long long)r->line,
          (long long)r->col);
    /* keys keep file order and their own positions */
    const char *keys[] = {"seed", "optim", "data", "empty"};
    const int64_t key_lines[] = {2, 3, 6, 11};
    for (size_t i = 0; i < 4; i++) {
        CHECK(strcmp(r->items[2 * i].text, keys[i]) == 0, "key %zu is %s", i, r->items[2 * i].text);
        CHECK(r->items[2 * i].line == key_lines[i] && r->items[2 * i].col == 1,
              "key %s at %lld:%lld", keys[i], (long long)r->items[2 * i].line,
              (long long)r->items[2 * i].col);
    }
    const hy_config_node *seed = hy_config_find(r, "seed");
    CHECK(seed && seed->kind == HY_CONFIG_INT && seed->i == 7 && seed->line == 2 &&
          seed->col == 7, "seed");
    const hy_config_node *lr = hy_config_get(r, "optim.learning_rate");
    CHECK(lr && lr->kind == HY_CONFIG_FLOAT && lr->f == 1.0e-3 && lr->line == 4 && lr->col == 18,
          "learning_rate");
    CHECK(lr && strcmp(lr->text, "1.0e-3") == 0, "text kept as written");
    const hy_config_node *name = hy_config_get(r, "optim.name");
    CHECK(name && name->kind == HY_CONFIG_STR && name->style == HY_CONFIG_SINGLE_QUOTED &&
          strcmp(name->text, "adamw") == 0 && name->col == 9, "name");
    const hy_config_node *ood = hy_config_get(r, "data.ood");
    CHECK(ood && ood->kind == HY_CONFIG_SEQ && ood->style == HY_CONFIG_FLOW && ood->n == 2 &&
          ood->line == 7 && ood->col == 8, "ood");
    if (ood && ood->n == 2) {
        CHECK(ood->items[0].style == HY_CONFIG_PLAIN && ood->items[0].col == 9, "ood[1]");
        CHECK(ood->items[1].style == HY_CONFIG_DOUBLE_QUOTED && ood->items[1].col == 16 &&
              strcmp(ood->items[1].text, "glyphs") == 0, "ood[2]");
    }
    const hy_config_node *note = hy_config_get(r, "data.note");
    CHECK(note && note->style == HY_CONFIG_LITERAL && note->kind == HY_CONFIG_STR &&
          strcmp(note->text, "two\nlines\n") == 0, "literal block");
    const hy_config_node *empty = hy_config_find(r, "empty");
    CHECK(empty && empty->kind == HY_CONFIG_NULL, "empty value is null");
    CHECK(hy_config_get(r, "optim.nope") == NULL && hy_config_get(r, "seed.x") == NULL &&
          hy_config_get(r, "optim.") == NULL && hy_config_get(r, "") == NULL, "missing paths");
    hy_config_free(&d);
    hy_config_free(&d);                               /* idempotent */
    CHECK(d.name == NULL && d.root.items == NULL, "freed doc zeroed");
}

static void test_scalar_typing(void) {
    static const struct {
        const char *text;
        hy_config_kind kind;
        int64_t i;
        double f;
    } rows[] = {
        {"3", HY_CONFIG_INT, 3, 0},
        {"-7", HY_CONFIG_INT, -7, 0},
        {"+12", HY_CONFIG_INT, 12, 0},
        {"0x1F", HY_CONFIG_INT, 31, 0},
        {"0o17", HY_CONFIG_INT, 15, 0},
        {"9223372036854775807", HY_CONFIG_INT, INT64_MAX, 0},
        {"-9223372036854775808", HY_CONFIG_INT, INT64_MIN, 0},
        {"1e-3", HY_CONFIG_FLOAT, 0, 1e-3},
        {"1e3", HY_CONFIG_FLOAT, 0, 1000.0},
        {"-2.5", HY_CONFIG_FLOAT, 0, -2.5},
        {"3.", HY_CONFIG_FLOAT, 0, 3.0},
        {".5", HY_CONFIG_FLOAT, 0, 0.5},
        {"0.1", HY_CONFIG_FLOAT, 0, 0.1},
        {"-.inf", HY_CONFIG_FLOAT, 0, -(double)INFINITY},
        {".Inf", HY_CONFIG_FLOAT, 0, (double)INFINITY},
        {"true", HY_CONFIG_BOOL, 1, 0},
        {"FALSE", HY_CONFIG_BOOL, 0, 0},
        {"~", HY_CONFIG_NULL, 0, 0},
        {"null", HY_CONFIG_NULL, 0, 0},
        {"yes", HY_CONFIG_STR, 0, 0},             /* YAML 1.1 booleans are strings in 1.2 */
        {"1_000", HY_CONFIG_STR, 0, 0},
        {"0x", HY_CONFIG_STR, 0, 0},
        {"1e", HY_CONFIG_STR, 0, 0},
        {".", HY_CONFIG_STR, 0, 0},
        {"inf", HY_CONFIG_STR, 0, 0},
        {"fashion-mnist", HY_CONFIG_STR, 0, 0},
        {"'3'", HY_CONFIG_STR, 0, 0},
        {"\"true\"", HY_CONFIG_STR, 0, 0},
        {"!!str 3", HY_CONFIG_STR, 0, 0},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char text[64];
        snprintf(text, sizeof text, "v: %s\n", rows[r].text);
        hy_config_doc d;
        CHECK_OK(parse(&d, text));
        const hy_config_node *v = hy_config_find(&d.root, "v");
        CHECK(v && v->kind == rows[r].kind, "'%s' typed %s, want %s", rows[r].text,
              v ? hy_config_kind_name(v->kind) : "(missing)", hy_config_kind_name(rows[r].kind));
        if (v && v->kind == rows[r].kind) {
            if (v->kind == HY_CONFIG_INT || v->kind == HY_CONFIG_BOOL)
                CHECK(v->i == rows[r].i, "'%s' = %lld", rows[r].text, (long long)v->i);
            if (v->kind == HY_CONFIG_FLOAT)
                CHECK(v->f == rows[r].f, "'%s' = %.17g", rows[r].text, v->f);
        }
        hy_config_free(&d);
    }
    hy_config_doc d;
    CHECK_OK(parse(&d, "v: .nan\nk: {3: x}\n"));
    const hy_config_node *v = hy_config_find(&d.root, "v");
    CHECK(v && v->kind == HY_CONFIG_FLOAT && isnan(v->f), ".nan");
    const hy_config_node *k = hy_config_find(&d.root, "k");
    CHECK(k && k->n == 1 && k->items[0].kind == HY_CONFIG_STR, "keys stay strings");
    hy_config_free(&d);
}

static void test_empty_documents(void) {
    const char *texts[] = {"", "# only a comment\n", "---\n", "~\n"};
    for (size_t i = 0; i < 4; i++) {
        hy_config_doc d;
        CHECK_OK(parse(&d, texts[i]));
        CHECK(d.root.kind == HY_CONFIG_NULL && d.root.line >= 1 && d.root.col == 1,
              "text %zu: root kind %s", i, hy_config_kind_name(d.root.kind));
        hy_config_free(&d);
    }
}

static void test_malformed_messages(void) {
    expect_error("a: [1, 2\nb: 3\n",
                 "x.yaml:2:2: did not find expected ',' or ']' (while parsing a flow sequence)");
    expect_error("a: 1\n b: 2\n", "x.yaml:2:3: mapping values are not allowed in this context");
    expect_error("a:\n\t- 1\n",
                 "x.yaml:2:1: found character that cannot start any token "
                 "(while scanning for the next token)");
    expect_error("a: \"open\n",
                 "x.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar)");
    expect_error("a: [1, 2]]\n",
                 "x.yaml:1:10: did not find expected key (while parsing a block mapping)");
    expect_error("a: \xff\n", "x.yaml:1:4: invalid leading UTF-8 octet (byte #xFF)");
}

static void test_structure_errors(void) {
    expect_error("optim:\n  learning_rate: 1\n  learning_rate: 2\n",
                 "x.yaml:3:3: duplicate key 'learning_rate' in 'optim' (first at 2:3)");
    expect_error("seed: 1\nseed: 2\n", "x.yaml:2:1: duplicate key 'seed' (first at 1:1)");
    expect_error("a: {b: {c: 1, c: 2}}\n",
                 "x.yaml:1:15: duplicate key 'c' in 'a.b' (first at 1:9)");
    expect_error("l:\n  - a: 1\n  - a: 1\n    a: 2\n",
                 "x.yaml:4:5: duplicate key 'a' in 'l[2]' (first at 3:5)");
    expect_error("base: &b 1\nother: *b\n",
                 "x.yaml:2:8: aliases are not supported in configs (*b)");
    expect_error("a: 1\n---\nb: 2\n",
                 "x.yaml:2:1: a second document starts here (a config is one YAML document)");
    expect_error("? [1]\n: 2\n",
                 "x.yaml:1:3: a list cannot be a mapping key (keys are plain names)");
    expect_error("a: !!int 3\n", "x.yaml:1:4: unsupported tag '!!int' (only !!str is allowed)");
    expect_error("a: 99999999999999999999\n",
                 "x.yaml:1:4: integer out of range (got 99999999999999999999; the limit is "
                 "9223372036854775807 in magnitude)");
    expect_error("a: 1e999\n",
                 "x.yaml:1:4: float out of range (got 1e999; write .inf for infinity)");

    /* depth: 64 nested flow lists are fine, 65 are not */
    char deep[200];
    for (int depth = 64; depth <= 65; depth++) {
        size_t k = 0;
        for (int i = 0; i < depth; i++) deep[k++] = '[';
        for (int i = 0; i < depth; i++) deep[k++] = ']';
        deep[k] = '\0';
        hy_config_doc d;
        if (depth == 64) CHECK_OK(parse(&d, deep));
        else CHECK_FAIL(parse(&d, deep), HY_ECONFIG, "x.yaml:1:65: nesting deeper than 64 levels");
        hy_config_free(&d);
    }
}

static void test_load_and_getters(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/c.yaml", check_tmpdir());
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL, "cannot write %s", path);
    if (!fp) return;
    fputs("train:\n  epochs: ten\n  batch_size: 128\n  clip: 1\n  on: true\n  name: x\n", fp);
    fclose(fp);
    hy_config_doc d;
    CHECK_OK(hy_config_load(&d, path));
    int64_t i = 0;
    double f = 0;
    int b = 0;
    const char *s = NULL;
    CHECK_OK(hy_config_get_int(&d, "train.batch_size", &i));
    CHECK(i == 128, "batch_size %lld", (long long)i);
    CHECK_OK(hy_config_get_float(&d, "train.clip", &f));
    CHECK(f == 1.0, "an integer read as float: %g", f);
    CHECK_OK(hy_config_get_bool(&d, "train.on", &b));
    CHECK(b == 1, "bool");
    CHECK_OK(hy_config_get_str(&d, "train.name", &s));
    CHECK(s && strcmp(s, "x") == 0, "str");
    char want[700];
    snprintf(want, sizeof want, "%s:2:11: train.epochs: expected integer, got string 'ten'", path);
    CHECK_FAIL(hy_config_get_int(&d, "train.epochs", &i), HY_ECONFIG, want);
    snprintf(want, sizeof want, "%s:3:15: train.batch_size: expected boolean, got integer 128",
             path);
    CHECK_FAIL(hy_config_get_bool(&d, "train.batch_size", &b), HY_ECONFIG, want);
    snprintf(want, sizeof want, "%s: missing key 'train.lr'", path);
    CHECK_FAIL(hy_config_get_float(&d, "train.lr", &f), HY_ECONFIG, want);
    hy_config_free(&d);

    snprintf(path, sizeof path, "%s/none.yaml", check_tmpdir());
    snprintf(want, sizeof want, "config: cannot read '%s' (No such file or directory)", path);
    CHECK_FAIL(hy_config_load(&d, path), HY_EIO, want);
    snprintf(want, sizeof want, "config: cannot read '%s' (Is a directory)", check_tmpdir());
    CHECK_FAIL(hy_config_load(&d, check_tmpdir()), HY_EIO, want);
}

/* Long inputs grow the item arrays many times; all items must survive the reallocations. */
static void test_large_map(void) {
    enum { N = 1000 };
    static char text[N * 16];
    size_t k = 0;
    for (int i = 0; i < N; i++) k += (size_t)snprintf(text + k, sizeof text - k, "k%d: %d\n", i, i);
    hy_config_doc d;
    CHECK_OK(hy_config_parse(&d, text, k, "big.yaml"));
    CHECK(d.root.n == N, "n=%zu", d.root.n);
    int bad = 0;
    for (size_t i = 0; i < d.root.n; i++)
        if (d.root.items[2 * i + 1].i != (int64_t)i || d.root.items[2 * i].line != (int64_t)i + 1)
            bad++;
    CHECK(bad == 0, "%d items wrong", bad);
    hy_config_free(&d);
}

/* CPU seconds to parse the first n lines of text (n keys of one mapping). */
static double parse_cpu(const char *text, size_t len, size_t n) {
    hy_config_doc d;
    clock_t t0 = clock();
    CHECK_OK(hy_config_parse(&d, text, len, "big.yaml"));
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(d.root.n == n, "n=%zu, expected %zu", d.root.n, n);
    hy_config_free(&d);
    return cpu;
}

/* The duplicate-key check is linear (a pairwise scan would take about 50 s for 200,000
 * keys). Checked as a ratio taken in one run, not an absolute time (machines and load differ):
 * 4x the keys must cost well under 16x (quadratic) the CPU time; linear is ~4x. A duplicate at
 * the very end, one in a nested mapping, and keys differing only after a NUL byte are still
 * told apart. */
static void test_many_keys(void) {
    enum { N = 200000 };
    size_t cap = (size_t)N * 24 + 64, k = 0, k4 = 0;
    char *text = malloc(cap);
    CHECK(text != NULL, "malloc");
    if (!text) return;
    for (int i = 0; i < N; i++) {
        k += (size_t)snprintf(text + k, cap - k, "key%d: %d\n", i, i);
        if (i == N / 4 - 1) k4 = k;
    }
    double best_small = 1e30, best_big = 1e30;
    for (int r = 0; r < 5; r++) {   /* interleaved rounds, minimum of each (3 were seen to
                                     * leave a 9.9x under the load of make test) */
        double a = parse_cpu(text, k4, N / 4), b = parse_cpu(text, k, N);
        if (a < best_small) best_small = a;
        if (b < best_big) best_big = b;
    }
    double ratio = best_big / (best_small > 1e-3 ? best_small : 1e-3);
    CHECK(ratio < 9.0, "4x the keys took %.1fx the CPU time (%.3f s vs %.3f s; quadratic?)",
          ratio, best_big, best_small);
    hy_config_doc d;
    size_t k2 = k + (size_t)snprintf(text + k, cap - k, "key123456: 0\n");
    char want[128];
    snprintf(want, sizeof want, "big.yaml:%d:1: duplicate key 'key123456' (first at 123457:1)",
             N + 1);
    CHECK_FAIL(hy_config_parse(&d, text, k2, "big.yaml"), HY_ECONFIG, want);
    free(text);
    expect_error("a:\n  b: 1\n  c: 2\n  b: 3\n",
                 "x.yaml:4:3: duplicate key 'b' in 'a' (first at 2:3)");
    static const char nul[] = "\"a\\0x\": 1\n\"a\\0y\": 2\n";
    CHECK_OK(hy_config_parse(&d, nul, sizeof nul - 1, "x.yaml"));
    CHECK(d.root.n == 2, "keys differing after a NUL byte are distinct (n=%zu)", d.root.n);
    hy_config_free(&d);
}

/* Config files are read up to HY_CONFIG_MAXBYTES: /dev/zero is refused, naming the file. */
static void test_size_limit(void) {
    hy_config_doc d;
    CHECK_FAIL(hy_config_load(&d, "/dev/zero"), HY_ECONFIG,
               "config: '/dev/zero' is larger than 64 MiB, the limit for a config file");
}

/* Seeded mutations (byte flips, inserted YAML punctuation, truncation) of a valid config: every
 * parse must succeed or fail with HY_ECONFIG and a "x.yaml:L:C: " message; ASan/UBSan watch the
 * rest. */
static void test_mutations(void) {
    static const char base[] =
        "seed: 1\nmodel:\n  kind: vit\n  dims: [64, 8, {a: 1, b: [2, 3]}]\n"
        "data:\n  ood: [mnist, \"glyphs\", 'x']\n  note: |\n    text\n"
        "hydra:\n  keep_heads: 4\n  diversity: {bootstrap: true, objectives: [acc]}\n";
    static const char punct[] = "[]{},:-?#&*!|>'\"%@` \t\n~.";
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    char buf[sizeof base + 16];
    int bad = 0, ok = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = sizeof base - 1;
        memcpy(buf, base, n);
        int edits = 1 + (int)hy_rng_below(&r, 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)hy_rng_below(&r, n);
            uint64_t op = hy_rng_below(&r, 3);
            if (op == 0) buf[at] = punct[hy_rng_below(&r, sizeof punct - 1)];
            else if (op == 1) buf[at] = (char)hy_rng_below(&r, 256);
            else n = at;
        }
        hy_config_doc d;
        hy_status st = hy_config_parse(&d, buf, n, "x.yaml");
        if (st == HY_OK) ok++;
        else if (st != HY_ECONFIG || strncmp(hy_errmsg(), "x.yaml:", 7) != 0) {
            if (bad++ < 3) fprintf(stderr, "mutation %d: status %d, message %s\n", it, st,
                                   hy_errmsg());
        }
        hy_config_free(&d);
    }
    CHECK(bad == 0, "%d mutations failed badly", bad);
    CHECK(ok > 0 && ok < 3000, "%d of 3000 mutations parsed (want some, not all)", ok);
}

int main(void) {
    RUN(test_positions_and_styles);
    RUN(test_scalar_typing);
    RUN(test_empty_documents);
    RUN(test_malformed_messages);
    RUN(test_structure_errors);
    RUN(test_load_and_getters);
    RUN(test_large_map);
    RUN(test_many_keys);
    RUN(test_size_limit);
    RUN(test_mutations);
    return check_exit("test_config");
}
