/* test_table.c: the CSV (RFC 4180) / TSV / JSONL record reader of core/data/table.c: quoting,
 * line ends, blank rows, byte-order mark, labels, and the exact file:line error messages. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "data/table.h"

static char g_path[600];

static const char *write_tmp(const char *name, const char *s, size_t n) {
    snprintf(g_path, sizeof g_path, "%s/%s", check_tmpdir(), name);
    FILE *f = fopen(g_path, "wb");
    CHECK(f != NULL, "cannot write %s", g_path);
    if (f) {
        fwrite(s, 1, n, f);
        fclose(f);
    }
    return g_path;
}

#define W(name, lit) write_tmp(name, lit, sizeof(lit) - 1)

static const char *text_of(const hy_table *t, size_t i) { return t->text.data + t->text_off[i]; }
static const char *label_of(const hy_table *t, size_t i) { return t->label.data + t->label_off[i]; }

static void test_csv_rfc4180(void) {
    const char *p = W("a.csv", "\xEF\xBB\xBFid,text,label\r\n"
                               "1,\"a, \"\"quoted\"\" one\",pos\r\n"
                               "\r\n"
                               "2,\"two\r\nlines\",neg\n"
                               "3,plain,\"x\"\n"
                               "4,,y");
    hy_table t;
    CHECK_OK(hy_table_read(p, "text", NULL, "label", &t));
    CHECK(t.n == 4, "%zu records", t.n);
    if (t.n == 4) {
        CHECK(strcmp(text_of(&t, 0), "a, \"quoted\" one") == 0, "quoted: '%s'", text_of(&t, 0));
        CHECK(strcmp(text_of(&t, 1), "two\r\nlines") == 0, "embedded CRLF kept");
        CHECK(strcmp(text_of(&t, 2), "plain") == 0 && strcmp(label_of(&t, 2), "x") == 0, "plain");
        CHECK(strcmp(text_of(&t, 3), "") == 0 && strcmp(label_of(&t, 3), "y") == 0,
              "empty text, last row without newline");
        CHECK(t.line[0] == 2 && t.line[1] == 4 && t.line[2] == 6 && t.line[3] == 7,
              "lines %lld %lld %lld %lld", (long long)t.line[0], (long long)t.line[1],
              (long long)t.line[2], (long long)t.line[3]);
    }
    hy_table_release(&t);
    CHECK_OK(hy_table_read(p, "text", NULL, NULL, &t));
    CHECK(t.n == 4 && t.label_off == NULL, "no label column");
    hy_table_release(&t);
}

static void test_tsv_and_jsonl(void) {
    const char *p = W("a.tsv", "label\tsentence\n1\tsays \"hi\" twice\r\n0\ttab-free\n");
    hy_table t;
    CHECK_OK(hy_table_read(p, "sentence", NULL, "label", &t));
    CHECK(t.n == 2 && strcmp(text_of(&t, 0), "says \"hi\" twice") == 0 &&
          strcmp(text_of(&t, 1), "tab-free") == 0 && strcmp(label_of(&t, 0), "1") == 0,
          "tsv: quotes are ordinary characters");
    hy_table_release(&t);
    p = W("a.jsonl", "{\"t\": \"caf\\u00e9\", \"y\": 3}\n  \n{\"y\": \"neg\", \"t\": \"x\"}\r\n");
    CHECK_OK(hy_table_read(p, "t", NULL, "y", &t));
    CHECK(t.n == 2 && strcmp(text_of(&t, 0), "caf\xC3\xA9") == 0 &&
          strcmp(label_of(&t, 0), "3") == 0 && strcmp(label_of(&t, 1), "neg") == 0 &&
          t.line[1] == 3, "jsonl");
    hy_table_release(&t);
}

static void fails(const char *name, const char *content, size_t n, const char *tc,
                  const char *lc, const char *what) {
    const char *p = write_tmp(name, content, n);
    char want[800];
    snprintf(want, sizeof want, "table: '%s'%s", p, what);
    hy_table t;
    CHECK_FAIL(hy_table_read(p, tc, NULL, lc, &t), HY_EINVAL, want);
    CHECK(t.n == 0 && t.text.data == NULL, "zeroed on failure");
}

#define F(name, lit, tc, lc, what) fails(name, lit, sizeof(lit) - 1, tc, lc, what)

static void test_errors(void) {
    F("e1.csv", "a,b\n1,2\n3\n", "a", "b", ":3: row has 1 fields, the header has 2");
    F("e2.csv", "a,b\n\"x\"y,2\n", "a", "b",
      ":2: field 1: text after the closing quote (a '\"' inside a quoted field is written '\"\"')");
    F("e3.csv", "a,b\nx\"y,2\n", "a", "b",
      ":2: field 1: a '\"' inside an unquoted field (quote the whole field)");
    F("e4.csv", "a,b\n1,2\n\"open,\n\n", "a", "b",
      ":3: the file ends inside a quoted field (opened on this line)");
    F("e5.csv", "a,b\n1,\xC3(\n", "a", "b", ":2: column 'b' is not valid UTF-8 (byte 0)");
    F("e6.csv", "a,b\n1,\n", "a", "b", ":2: column 'b' is empty");
    F("e7.csv", "a,b\n1,2\n", "c", NULL, ":1: no column 'c' in the header (columns: a, b)");
    F("e8.csv", "a,b\n", "a", NULL, " has no records");
    F("e9.csv", "", "a", NULL, " is empty (no header row)");
    F("e10.tsv", "a\tb\nx\0y\t1\n", "a", "b", ":2: column 'a' holds a NUL byte");
    F("e11.jsonl", "{\"a\": \"x\", \"b\": 1.5}\n", "a", "b",
      ":1: column 'b' is a float (expected an integer or a string)");
    F("e12.jsonl", "{\"a\": \"x\"}\n[1]\n", "a", NULL, ":2: the line is an array (expected a JSON "
      "object)");
    F("e13.jsonl", "{\"a\": 5}\n", "a", NULL, ":1: column 'a' is an integer (expected a string)");
    F("e14.jsonl", "{\"b\": \"x\"}\n", "a", NULL, ":1: no key 'a'");
    F("e15.jsonl", "{\"a\": \"x\" \"b\": 1}\n", "a", NULL, ":1:13: '}' expected near '\"b\"'");
    F("e16.jsonl", "{\"a\": \"\xFF\"}\n", "a", NULL, ":1: not valid UTF-8 (byte 7)");
    F("e17.txt", "x", "a", NULL, ": unknown format (expected a .csv, .tsv or .jsonl file)");
    hy_table t;
    CHECK_FAIL_HAS(hy_table_read("/nonexistent.csv", "a", NULL, NULL, &t), HY_EIO,
                   "table: cannot open '/nonexistent.csv'");
}

static void test_pairs(void) {
    const char *p = W("p.csv", "premise,hypothesis,label\n\"A man, sleeping\",He rests,1\n");
    hy_table t;
    CHECK_OK(hy_table_read(p, "premise", "hypothesis", "label", &t));
    CHECK(t.n == 1 && t.pair_off && strcmp(t.pair.data + t.pair_off[0], "He rests") == 0 &&
          strcmp(text_of(&t, 0), "A man, sleeping") == 0, "csv pair");
    hy_table_release(&t);
    p = W("p.jsonl", "{\"a\": \"x\", \"b\": \"y\"}\n{\"a\": \"x\", \"b\": 2}\n");
    char want[700];
    snprintf(want, sizeof want, "table: '%s':2: column 'b' is an integer (expected a string)", p);
    CHECK_FAIL(hy_table_read(p, "a", "b", NULL, &t), HY_EINVAL, want);
    p = W("p2.csv", "a,c\nx,y\n");
    snprintf(want, sizeof want, "table: '%s':1: no column 'b' in the header (columns: a, c)", p);
    CHECK_FAIL(hy_table_read(p, "a", "b", NULL, &t), HY_EINVAL, want);
}

int main(void) {
    RUN(test_pairs);
    RUN(test_csv_rfc4180);
    RUN(test_tsv_and_jsonl);
    RUN(test_errors);
    return check_exit("test_table");
}
