/* textnorm.h: the text normaliser, one string -> space-separated tokens (identical for every
 * text set; HY_TEXT_NORMALIZATION describes it in one line, stored in every prepared file).
 * Steps:
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
#ifndef HY_TEXTNORM_H
#define HY_TEXTNORM_H

#include "tensor/base.h"

/* A one-line description of the normalisation, stored in every prepared file's /meta. */
extern const char *const HY_TEXT_NORMALIZATION;
#define HY_TEXT_NORM_VERSION 1

enum { HY_TEXT_NEWS = 1u };

/* Normalises s[0..n) (any bytes) into out (overwritten, NUL-terminated): tokens joined by one
 * space. *ntok (may be NULL) receives the token count. flags: 0 or HY_TEXT_NEWS.
 * Fails only on out-of-memory. */
hy_status hy_text_normalize(hy_buf *out, const char *s, size_t n, unsigned flags, size_t *ntok);
/* The same with the normaliser's scratch buffers kept in sc between calls (zeroed = empty;
 * release with hy_text_scratch_release), for callers that normalise many records. */
typedef struct hy_text_scratch {
    hy_buf t1, t2, t3;
} hy_text_scratch;
hy_status hy_text_normalize_into(hy_buf *out, hy_text_scratch *sc, const char *s, size_t n,
                                 unsigned flags, size_t *ntok);
void hy_text_scratch_release(hy_text_scratch *sc);

/* ASCII character classes of the normaliser (the corpus readers use the same). */
static inline int hy_text_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
static inline int hy_text_digit(int c) { return c >= '0' && c <= '9'; }
static inline int hy_text_lower(int c) { return c >= 'a' && c <= 'z'; }
static inline int hy_text_upper(int c) { return c >= 'A' && c <= 'Z'; }
static inline int hy_text_alpha(int c) { return hy_text_lower(c) || hy_text_upper(c); }
static inline int hy_text_alnum(int c) { return hy_text_alpha(c) || hy_text_digit(c); }

#endif
