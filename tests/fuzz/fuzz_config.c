/* fuzz_config.c: the YAML config parser (core/io/config.c). Parses the input, walks the whole
 * tree checking its invariants (scalar text NUL-terminated at len, maps with distinct keys
 * are not re-checked here: the parser guarantees it), runs the lookups and typed getters on
 * fixed paths and on every top-level key, and frees twice (hy_config_free is idempotent). */
#include "fuzz_common.h"   /* first: it defines _GNU_SOURCE (memfd_create) */

#include <string.h>

#include "io/config.h"

static size_t walk(const hy_config_node *n, int depth) {
    if (depth > HY_CONFIG_MAXDEPTH + 1) abort();
    if (n->line < 1 || n->col < 1) abort();
    size_t count = 1;
    if (n->kind == HY_CONFIG_SEQ || n->kind == HY_CONFIG_MAP) {
        size_t cnt = n->kind == HY_CONFIG_MAP ? 2 * n->n : n->n;
        if (cnt && !n->items) abort();
        for (size_t i = 0; i < cnt; i++) {
            if (n->kind == HY_CONFIG_MAP && i % 2 == 0 && n->items[i].kind != HY_CONFIG_STR)
                abort();
            count += walk(&n->items[i], depth + 1);
        }
    } else if (n->kind != HY_CONFIG_NULL || n->text) {
        if (!n->text || n->text[n->len] != '\0') abort();
    }
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hy_config_doc doc;
    hy_status st = hy_config_parse(&doc, (const char *)data, size, "fuzz.yaml");
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (doc.name || doc.root.items) abort();      /* a failed parse leaves doc zeroed */
        return 0;
    }
    (void)walk(&doc.root, 0);
    static const char *const paths[] = {"", ".", "x..y", "seed", "model.d_model", "train",
                                        "train.epochs", "data.ood", "a.b.c.d.e", "include"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        int64_t iv;
        double fv;
        int bv;
        const char *sv;
        (void)hy_config_get(&doc.root, paths[i]);
        fuzz_check_message(hy_config_get_int(&doc, paths[i], &iv));
        fuzz_check_message(hy_config_get_float(&doc, paths[i], &fv));
        fuzz_check_message(hy_config_get_bool(&doc, paths[i], &bv));
        fuzz_check_message(hy_config_get_str(&doc, paths[i], &sv));
    }
    if (doc.root.kind == HY_CONFIG_MAP)
        for (size_t i = 0; i < doc.root.n; i++) {
            const hy_config_node *k = &doc.root.items[2 * i];
            if (hy_config_find(&doc.root, k->text) == NULL && strlen(k->text) == k->len) abort();
        }
    hy_config_free(&doc);
    hy_config_free(&doc);
    return 0;
}
