/* text.h: the text side of hydra's datasets, all per-record work in C; includes the three
 * modules (one concept each):
 *   textnorm.h  hy_text_normalize: one string -> space-separated tokens (the steps are there)
 *   corpus.h    hy_corpus: raw records + their normalised form + int16 labels; readers for TSV,
 *               lines, %-separated records and ARFF (gzip read transparently through zlib);
 *               take / split / filter
 *   vocab.h     hy_vocab: PAD 0, UNK 1, CLS 2, then words by descending count (ties bytewise
 *               ascending); hy_text_encode -> ids int32 [N,L], lengths int32 [N]
 * The growable byte buffer they share, hy_buf, is in base.h. */
#ifndef HY_TEXT_H
#define HY_TEXT_H

#include "data/corpus.h"
#include "data/textnorm.h"
#include "data/vocab.h"

#endif
