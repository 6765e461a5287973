/* wordpiece.h: BERT's tokenizer (HF transformers' BertTokenizer: PreTrainedTokenizer.tokenize,
 * BasicTokenizer, WordpieceTokenizer) over a vocab.txt, and the model inputs built from it.
 * Entry points: hy_wordpiece_load / _from_tokens / _release, hy_wordpiece_tokenize,
 * hy_wordpiece_encode.
 *
 * The reference is transformers 4.x (tokenization_bert.py and tokenization_utils.py's
 * PreTrainedTokenizer.tokenize, which lowers the text one character at a time outside the special
 * tokens before BasicTokenizer runs). What tokenize does to a UTF-8 string, in order
 * (tests/ref/wordpiece_ref.py states the same in Python; test_wordpiece checks the two agree on
 * the committed fixture):
 *  1. strict UTF-8 decoding; invalid input (bad lead/continuation byte, overlong form,
 *     surrogate, > U+10FFFF, truncated sequence) is an error naming the byte offset (Python's
 *     open(encoding="utf-8") refuses the same bytes);
 *  2. the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] occurring literally (case-sensitive)
 *     are cut out as tokens of their own (HF's added-tokens trie); the pieces between them go
 *     through 3..8;
 *  3. lower-casing (do_lower_case): every code point by its full lowercase (HF lowers the
 *     text one character at a time, so there is no final-sigma rule: "ΟΔΟΣ" -> "οδοσ");
 *  4. cleaning: code points of class DROP (unitab.h: C* except \t\n\r, U+FFFD) removed, SPACE
 *     (\t\n\r, Zs) -> " "; 5. spaces around CJK ideographs (tokenize_chinese_chars);
 *  6. split at spaces and SPLIT code points; per word, accent stripping (strip_accents, or
 *     do_lower_case unless strip_accents is 0): NFD (canonical decomposition and ordering),
 *     then Mn code points removed;
 *  7. every PUNCT code point becomes a word of its own;
 *  8. WordPiece per word: a word of more than max_chars (100) code points -> [UNK]; else
 *     greedy longest-match-first from the left, continuing pieces prefixed "##"; when some
 *     position has no match the whole word is one [UNK].
 * Unicode properties come from Unicode 15.0 (Debian unicode-data); a Python whose unicodedata
 * is older treats the code points added since as unassigned (dropped), hydra does not. */
#ifndef HY_WORDPIECE_H
#define HY_WORDPIECE_H

#include "tensor/base.h"

typedef struct hy_wordpiece {
    size_t n;               /* tokens (lines of vocab.txt); id = 0-based line number */
    hy_buf bytes;           /* the tokens, each NUL-terminated */
    int64_t *off;           /* [n] start of token i in bytes.data */
    int32_t *slots;         /* hash table of ids (-1 empty), nslots a power of two >= 2n */
    size_t nslots;
    /* special ids, looked up by string (-1 when the vocab lacks it; [UNK] is required) */
    int32_t pad_id, unk_id, cls_id, sep_id, mask_id;
    /* options (hy_wordpiece_load sets BERT's defaults: 1, -1, 1, 100) */
    int do_lower_case;
    int strip_accents;      /* -1: follow do_lower_case (HF's None), 0 never, 1 always */
    int tokenize_chinese_chars;
    size_t max_chars;       /* WordpieceTokenizer.max_input_chars_per_word */
} hy_wordpiece;

/* Reads vocab.txt (UTF-8, one token per line, "\n", "\r\n" or "\r" ends a line as in Python's
 * text mode; a last line without newline counts; a token repeated keeps its last line's id as
 * HF's dict does). Fails on an unreadable file, invalid UTF-8 ("wordpiece: 'v.txt' line 7 is
 * not valid UTF-8"), an empty file, or no [UNK] line. wp overwritten; zeroed on failure. */
hy_status hy_wordpiece_load(hy_wordpiece *wp, const char *path);
/* The same from tokens tok[0..n) (e.g. a checkpoint's /vocab); `what` names them in errors. */
hy_status hy_wordpiece_from_tokens(hy_wordpiece *wp, const char *const *tok, size_t n,
                                   const char *what);
void hy_wordpiece_release(hy_wordpiece *wp);
/* The id of token s[0..len), or -1. */
int32_t hy_wordpiece_lookup(const hy_wordpiece *wp, const char *s, size_t len);
const char *hy_wordpiece_token(const hy_wordpiece *wp, size_t id);
/* SHA-256 (lowercase hex) of the tokens each followed by "\n" in id order (= the sha256 of a
 * vocab.txt with "\n" line ends and a final newline). */
void hy_wordpiece_sha256(const hy_wordpiece *wp, char out[65]);

/* A growable int32 array (zeroed = empty). */
typedef struct hy_i32s {
    int32_t *v;
    size_t n, cap;
} hy_i32s;
void hy_i32s_release(hy_i32s *a);

/* Appends the ids of s[0..len) (steps 1..8 above; no [CLS]/[SEP]) to out. Fails only on
 * invalid UTF-8 ("wordpiece: invalid UTF-8 at byte 12 (0xff)") or out of memory; out then
 * holds what it held before. */
hy_status hy_wordpiece_tokenize(const hy_wordpiece *wp, const char *s, size_t len, hy_i32s *out);

/* The model input of text a (and, when b != NULL, the pair a, b):
 *   [CLS] A [SEP]  or  [CLS] A [SEP] B [SEP], type ids 0 for [CLS] A [SEP], 1 for B [SEP];
 * truncated as HF's encode(..., truncation=True, max_length=max_len): the pieces are cut
 * before the special tokens are added so that the whole fits max_len: a single text keeps its
 * first max_len - 2 pieces; a pair drops one piece at a time from the end of the longer of A
 * and B (of B on a tie, "longest_first") until |A| + |B| <= max_len - 3. Then padded with [PAD]
 * (type 0) to max_len. ids and types (may be NULL) are [max_len], written; *len = tokens before
 * the padding; *truncated (may be NULL) = pieces dropped. Needs [CLS], [SEP] and [PAD] in the
 * vocab and max_len >= 2 (3 for a pair). */
hy_status hy_wordpiece_encode(const hy_wordpiece *wp, const char *a, size_t alen, const char *b,
                              size_t blen, size_t max_len, int32_t *ids, int32_t *types,
                              size_t *len, size_t *truncated);

#endif
