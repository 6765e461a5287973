/* corpus.h: text corpora (raw records + their normalised form + int16 labels) and the readers
 * that fill them: TSV, lines, fortune(6) %-separated records and ARFF, gzip read transparently
 * through zlib; take / split / filter. Every record is normalised on entry (textnorm.h). */
#ifndef HY_CORPUS_H
#define HY_CORPUS_H

#include "data/textnorm.h"

/* ===== corpora ===== */

/* N records. raw: the text as read (after the reader's unescaping, e.g. ARFF '\n'), kept for
 * inspection; norm: its normalisation; labels: int16, -1 when the set has none (OOD).
 * Zero it before first use; release with hy_corpus_release. Offsets arrays have n + 1 entries
 * once the corpus holds a record (NULL before). */
typedef struct hy_corpus {
    size_t n, cap;
    hy_buf raw, norm;
    int64_t *raw_off, *norm_off;   /* [n+1] */
    int32_t *ntok;                 /* [n] tokens in norm */
    int16_t *labels;               /* [n] */
} hy_corpus;

/* Appends one record: raw text s[0..len), normalised with flags, label. */
hy_status hy_corpus_add(hy_corpus *c, const char *s, size_t len, int16_t label, unsigned flags);
void hy_corpus_release(hy_corpus *c);
/* Record i's raw / normalised text (not NUL-terminated; *len receives the length). */
const char *hy_corpus_raw(const hy_corpus *c, size_t i, size_t *len);
const char *hy_corpus_norm(const hy_corpus *c, size_t i, size_t *len);
/* Appends all of src's records (raw, normalised text and labels as they are) to dst. */
hy_status hy_corpus_append(hy_corpus *dst, const hy_corpus *src);
/* dst (overwritten; released first) = src's records idx[0..k) in that order (repeats allowed).
 * Fails on an index out of range ("text: take index 7 out of range [0, 5)"). */
hy_status hy_corpus_take(hy_corpus *dst, const hy_corpus *src, const int64_t *idx, size_t k);
/* Seeded hold-out: `held` gets nheld records chosen uniformly without replacement (stratified
 * by label when stratify != 0: each label gets round(nheld * n_label / n) by largest remainder),
 * `rest` the others; both keep src's order. Fails when nheld > n. dst corpora are overwritten. */
hy_status hy_corpus_split(hy_corpus *rest, hy_corpus *held, const hy_corpus *src, size_t nheld,
                          uint64_t seed, int stratify);
/* dst = src's records whose normalisation has >= 1 token, whose normalised text has not occurred
 * earlier in src (when dedup != 0) and does not occur in `exclude` (when exclude != NULL);
 * original order. *dropped (may be NULL) receives how many were left out. */
hy_status hy_corpus_filter(hy_corpus *dst, const hy_corpus *src, int dedup,
                           const hy_corpus *exclude, size_t *dropped);

/* ===== readers =====
 * Each appends the records of one file to c and fails with "text: <path>:<line>: <what>
 * (expected ... got ...)" on malformed input, or "text: cannot read '<path>': <reason>"; on
 * failure c is left as it was before the call. Files may be gzip-compressed. Line ends: \n or
 * \r\n. `flags` is passed to the normaliser. */

/* Tab-separated values. Every non-blank line must have exactly ncols fields; the record text is
 * field text_col (0-based), its label field label_col (an integer in [0, 32767]) or -1 for
 * none (label -1). header != 0 skips the first line. Blank lines are skipped. */
typedef struct hy_tsv_spec {
    int ncols, text_col, label_col, header;
} hy_tsv_spec;
hy_status hy_text_read_tsv(hy_corpus *c, const char *path, const hy_tsv_spec *spec,
                           unsigned flags);
/* One record per non-blank line. label_prefix != 0: each line starts with a label field
 * ("DESC:manner How ..." or "5 How ...") that is removed up to the first blank; a line with
 * nothing after its label is an error. Labels are -1. */
hy_status hy_text_read_lines(hy_corpus *c, const char *path, int label_prefix, unsigned flags);
/* WordNet data files (data.noun, data.verb, ...): every synset line (lines of the licence
 * header start with two blanks and are skipped) carries its gloss after "| "; the gloss is
 * split at "; " into its definition and example sentences, each a record with enclosing double
 * quotes removed. A synset line without "| " is an error naming the line. Labels -1. */
hy_status hy_text_read_wordnet(hy_corpus *c, const char *path, unsigned flags);
/* fortune(6) files: records separated by lines holding only "%"; blank records skipped;
 * each record's text is its lines joined with '\n' (without the final one). Labels -1. */
hy_status hy_text_read_records(hy_corpus *c, const char *path, unsigned flags);
/* ARFF (Weka): @relation, @attribute NAME TYPE, @data, '%' comments; data rows are
 * comma-separated values, each a bare token, '?', or a string quoted with ' or " in which
 * \\ \' \" \n \t \r escape; sparse rows ({...}) are rejected. The record text is the string
 * attribute named attr (the first string attribute when attr is NULL). Labels -1. */
hy_status hy_text_read_arff(hy_corpus *c, const char *path, const char *attr, unsigned flags);

#endif
