/* vocab.h: the vocabulary of a text set and the encoding of a corpus into token ids.
 * Ids: PAD 0, UNK 1, CLS 2, MASK 3 (the reserved words; the model, xfmr.h, reads PAD and CLS;
 * masked-language-model pretraining, mlm.h, writes MASK), then words by descending training
 * count (ties bytewise ascending). hy_text_encode -> ids int32
 * [N,L], lengths int32 [N]. */
#ifndef HY_VOCAB_H
#define HY_VOCAB_H

#include "tensor/base.h"
#include "tensor/tensor.h"

typedef struct hy_corpus hy_corpus;   /* corpus.h */

#define HY_TOK_PAD 0
#define HY_TOK_UNK 1
#define HY_TOK_CLS 2
#define HY_TOK_MASK 3
#define HY_TOK_NRESERVED 4
/* The reserved words at ids 0..3: "[PAD]", "[UNK]", "[CLS]", "[MASK]" (never produced by the
 * tokeniser, which lowercases and splits brackets off). Words start at id HY_TOK_NRESERVED. */
extern const char *const hy_tok_reserved[HY_TOK_NRESERVED];

/* Words (owned, one block), their ids = positions, and a hash index. */
typedef struct hy_vocab {
    size_t n;
    hy_buf bytes;          /* the words, each NUL-terminated */
    int64_t *off;          /* [n] start of word i in bytes.data */
    int64_t *counts;       /* [n] training counts (0 for reserved / loaded vocabularies) */
    int32_t *slots;        /* hash table of ids, -1 empty */
    size_t nslots;         /* power of two >= 2n */
} hy_vocab;

/* Builds the vocabulary of c's normalised text: the 4 reserved words, then every word seen
 * >= min_count times (min_count >= 1) by descending count, ties bytewise ascending, cut at
 * max_size words in all (0: no cap; else >= 5). v overwritten. */
hy_status hy_vocab_build(hy_vocab *v, const hy_corpus *c, int64_t min_count, int64_t max_size);
/* A vocabulary from a word list (e.g. read back from /vocab). Checks the reserved words at ids
 * 0..3, that no word is empty or holds a blank, and that no word repeats. */
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
