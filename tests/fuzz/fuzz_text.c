/* fuzz_text.c: the text readers (core/data/corpus.c: TSV, lines, %-records, ARFF) and the normaliser
 * they call. The first 4 bytes choose the reader and its parameters, the rest is the file.
 * A successful read must give consistent offsets; a failure must leave the corpus as it was
 * (one record added before the call must survive). */
#include "fuzz_common.h"   /* first: it defines _GNU_SOURCE (memfd_create) */

#include <string.h>

#include "data/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint8_t sel = data[0], a = data[1], b = data[2], fl = data[3];
    const char *path = fuzz_file(data + 4, size - 4);
    unsigned flags = (fl & 1) ? HY_TEXT_NEWS : 0;
    hy_corpus c;
    memset(&c, 0, sizeof c);
    if (hy_corpus_add(&c, "seed record", 11, 3, flags) != HY_OK) abort();
    hy_status st;
    switch (sel % 4) {
    case 0: {
        hy_tsv_spec spec;
        spec.ncols = 1 + a % 4;
        spec.text_col = b % spec.ncols;
        spec.label_col = (int)((a >> 2) % (unsigned)(spec.ncols + 1)) - 1;
        if (spec.label_col == spec.text_col) spec.label_col = -1;
        spec.header = (b >> 4) & 1;
        st = hy_text_read_tsv(&c, path, &spec, flags);
        break;
    }
    case 1: st = hy_text_read_lines(&c, path, a & 1, flags); break;
    case 2: st = hy_text_read_records(&c, path, flags); break;
    default: st = hy_text_read_arff(&c, path, (a & 1) ? "text" : NULL, flags); break;
    }
    fuzz_check_message(st);
    if (st != HY_OK && c.n != 1) abort();
    for (size_t i = 0; i < c.n; i++) {
        size_t rl, nl;
        const char *r = hy_corpus_raw(&c, i, &rl);
        const char *s = hy_corpus_norm(&c, i, &nl);
        if ((rl && !r) || (nl && !s)) abort();
        if (c.raw_off[i] > c.raw_off[i + 1] || c.norm_off[i] > c.norm_off[i + 1]) abort();
        if (c.labels[i] < -1) abort();
    }
    size_t r0;
    const char *first = hy_corpus_raw(&c, 0, &r0);
    if (r0 != 11 || memcmp(first, "seed record", 11) != 0 || c.labels[0] != 3) abort();
    hy_corpus_release(&c);
    return 0;
}
