/* table.h: labelled text records from user files for `hydra data import text`: CSV (RFC 4180),
 * TSV and JSON Lines, one record per row, two columns picked by name.
 * Entry points: hy_table_read, hy_table_release.
 *   .csv   RFC 4180: a header row names the columns; fields separated by ","; a field that
 *          starts with '"' is quoted: it ends at the next lone '"' and may hold ",", line
 *          breaks and '""' (one '"'); CRLF or LF row ends; every row has the header's field
 *          count. A '"' inside an unquoted field, text after a closing quote, or a file ending
 *          inside quotes is an error.
 *   .tsv   IANA text/tab-separated-values: a header row, fields separated by TAB, no quoting
 *          (a '"' is an ordinary character), LF or CRLF row ends.
 *   .jsonl one JSON object per non-blank line (jansson; a syntax error names the line and the
 *          column jansson reports, the end of the offending token); the text column must be a
 *          string, the label a string or an integer.
 * Blank rows are skipped in every format. Every field read must be valid UTF-8. Errors are
 * one line naming the file, line (1-based; of the row's start for CSV) and column:
 *   "table: 'x.csv':7: row has 3 fields, the header has 2"
 *   "table: 'x.jsonl':4: column 'label' is a float (expected an integer or a string)"
 *   "table: 'x.tsv':9: column 'sentence' is not valid UTF-8 (byte 12)" */
#ifndef HY_TABLE_H
#define HY_TABLE_H

#include "tensor/base.h"

typedef struct hy_table {
    size_t n;             /* records */
    hy_buf text;          /* the text fields, each NUL-terminated */
    int64_t *text_off;    /* [n] start of record i's text in text.data */
    hy_buf pair;          /* the second texts (sentence pairs), each NUL-terminated */
    int64_t *pair_off;    /* [n] (NULL when no pair column was asked for) */
    hy_buf label;         /* the label fields as written (JSON integers in decimal) */
    int64_t *label_off;   /* [n] (NULL when no label column was asked for) */
    int64_t *line;        /* [n] the 1-based line each record starts on */
} hy_table;

/* Reads path (format from its extension: .csv, .tsv, .jsonl; else an error) into t,
 * overwritten: the text column `text_col`, when pair_col != NULL the second text of a sentence
 * pair, and when label_col != NULL the label column.
 * A missing column is an error naming the file and listing the header's columns (CSV/TSV) or
 * the line (JSONL). t is zeroed on failure. */
hy_status hy_table_read(const char *path, const char *text_col, const char *pair_col,
                        const char *label_col, hy_table *t);
void hy_table_release(hy_table *t);

#endif
