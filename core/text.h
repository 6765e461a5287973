/* text.h: the text side of hydra's datasets, all per-record work in C.
 *   normalise + tokenise  hy_text_normalize (one string -> space-separated tokens)
 *   corpora               hy_corpus: raw records + their normalised form + int16 labels;
 *                         readers for TSV, lines, %-separated records and ARFF (gzip read
 *                         transparently through zlib); take / split / filter
 *   vocabulary            hy_vocab: PAD 0, UNK 1, CLS 2, then words by descending count (ties
 *                         bytewise ascending); hy_text_encode -> ids int32 [N,L], lengths int32 [N]
 * Normalisation (identical for every set; HY_TEXT_NORMALIZATION describes it in one line):
 *  1. attribution lines dropped: a line that is not the first non-blank line of its record and
 *     starts (after blanks) with "--" followed by text, plus the indented lines right after it
 *     (fortune(6)'s "\t\t-- Author" and wrapped attributions);
 *  2. overstrike (x BS y) keeps y; other control characters, tabs, newlines and '\' are blanks;
 *  3. HTML entities decoded (&amp; &lt; &gt; &quot; &apos; &nbsp; &#N; &#xH; a few named
 *     typographic ones; numeric 128-159 read as Windows-1252), also the bare "#N;" and "quot;"
 *     left when a scraper dropped the '&' (AG News); then HTML tags (<br />, <b>, <a href=..>,
 *     '<' + letter, '/' or '!' up to the next '>') replaced by a blank;
 *  4. UTF-8 decoded (a byte that is not valid UTF-8 is read as Windows-1252); Latin-1 letters
 *     folded to ASCII (é -> e, ß -> ss, æ -> ae), typographic quotes / dashes / ellipsis to
 *     ASCII, other non-ASCII characters passed through unchanged as word characters; ASCII
 *     lowercased;
 *  5. PTB-like split: clitics n't 's 're 'll 've 'm 'd become their own tokens ("can't" ->
 *     "ca n't"); '"' becomes `` (opening) or '' (closing) and an opening ' becomes ` as in SST-2;
 *     punctuation is separated, a run of one repeated mark ("...", "--", "!!") is one token;
 *     hyphenated words, numbers ("1,000", "3.5", "10:30"), dotted words ("u.s.", "www.a.com")
 *     and a few abbreviations ("mr.", "dr.", "inc.") stay whole; -lrb- -rrb- -lsb- -rsb- -lcb-
 *     -rcb- become the brackets they stand for;
 *  6. whitespace collapsed: tokens joined by one space, none leading or trailing.
 * Option HY_TEXT_NEWS (news sets only: agnews, reuters) first removes a leading source or dateline
 * prefix ("LONDON (Reuters) - ", "AP - ", "SPACE.com - TORONTO, Canada -- ") and a trailing
 * "Reuter"/"REUTER" sign-off, so OOD cannot be told apart by those marks. */
#ifndef HY_TEXT_H
#define HY_TEXT_H

#include "tensor.h"

#define HY_TEXT_PAD 0
#define HY_TEXT_UNK 1
#define HY_TEXT_CLS 2
#define HY_TEXT_NRESERVED 3
/* The reserved words at ids 0..2: "[PAD]", "[UNK]", "[CLS]" (never produced by the tokeniser,
 * which lowercases and splits brackets off). */
extern const char *const hy_text_reserved[HY_TEXT_NRESERVED];
/* A one-line description of the normalisation, stored in every prepared file's /meta. */
extern const char *const HY_TEXT_NORMALIZATION;
#define HY_TEXT_NORM_VERSION 1

enum { HY_TEXT_NEWS = 1u };

/* A growable NUL-terminated byte buffer (zeroed = empty). */
typedef struct hy_buf {
    char *data;
    size_t len, cap;
} hy_buf;
void hy_buf_release(hy_buf *b);

/* Normalises s[0..n) (any bytes) into out (overwritten, NUL-terminated): tokens joined by one
 * space. *ntok (may be NULL) receives the token count. flags: 0 or HY_TEXT_NEWS.
 * Fails only on out-of-memory. */
hy_status hy_text_normalize(hy_buf *out, const char *s, size_t n, unsigned flags, size_t *ntok);

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
/* fortune(6) files: records separated by lines holding only "%"; blank records skipped;
 * each record's text is its lines joined with '\n' (without the final one). Labels -1. */
hy_status hy_text_read_records(hy_corpus *c, const char *path, unsigned flags);
/* ARFF (Weka): @relation, @attribute NAME TYPE, @data, '%' comments; data rows are
 * comma-separated values, each a bare token, '?', or a string quoted with ' or " in which
 * \\ \' \" \n \t \r escape; sparse rows ({...}) are rejected. The record text is the string
 * attribute named attr (the first string attribute when attr is NULL). Labels -1. */
hy_status hy_text_read_arff(hy_corpus *c, const char *path, const char *attr, unsigned flags);

/* ===== vocabulary ===== */

/* Words (owned, one block), their ids = positions, and a hash index. */
typedef struct hy_vocab {
    size_t n;
    hy_buf bytes;          /* the words, each NUL-terminated */
    int64_t *off;          /* [n] start of word i in bytes.data */
    int64_t *counts;       /* [n] training counts (0 for reserved / loaded vocabularies) */
    int32_t *slots;        /* hash table of ids, -1 empty */
    size_t nslots;         /* power of two >= 2n */
} hy_vocab;

/* Builds the vocabulary of c's normalised text: the 3 reserved words, then every word seen
 * >= min_count times (min_count >= 1) by descending count, ties bytewise ascending, cut at
 * max_size words in all (0: no cap; else >= 4). v overwritten. */
hy_status hy_vocab_build(hy_vocab *v, const hy_corpus *c, int64_t min_count, int64_t max_size);
/* A vocabulary from a word list (e.g. read back from /vocab). Checks the reserved words at ids
 * 0..2, that no word is empty or holds a blank, and that no word repeats. */
hy_status hy_vocab_from_words(hy_vocab *v, const char *const *words, size_t n);
void hy_vocab_release(hy_vocab *v);
const char *hy_vocab_word(const hy_vocab *v, size_t id);
/* The id of word w[0..len), or -1. */
int32_t hy_vocab_lookup(const hy_vocab *v, const char *w, size_t len);
/* SHA-256 (lowercase hex, 65 chars) of the words, each followed by '\n', in id order. */
void hy_vocab_sha256(const hy_vocab *v, char out[65]);

/* Totals of one encoding: tokens kept, of which UNK, and records longer than max_len. */
typedef struct hy_text_stats {
    int64_t tokens, unk, truncated;
} hy_text_stats;

/* Encodes c's normalised records: ids (overwritten, owned) int32 [N, max_len], word ids with
 * unknown words -> UNK, truncated at max_len tokens, padded with PAD (0) after lengths[i];
 * lengths (overwritten, owned) int32 [N] = min(tokens, max_len). CLS is not stored (the model
 * prepends its own). stats (may be NULL) receives the totals. Fails when max_len < 1. */
hy_status hy_text_encode(hy_tensor *ids, hy_tensor *lengths, const hy_vocab *v,
                         const hy_corpus *c, int64_t max_len, hy_text_stats *stats);

#endif
