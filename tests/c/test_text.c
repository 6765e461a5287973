/* test_text.c: the text core: normaliser/tokeniser on tricky lines, corpora (split, filter),
 * readers (TSV, lines, records, ARFF, gzip) with their exact error messages, the vocabulary
 * (order, reserved ids, knobs, hash) and encoding (UNK, truncation, padding, determinism). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "data/text.h"

/* normalise s and compare with want */
static void norm_is(const char *s, unsigned flags, const char *want) {
    size_t want_ntok = 0;
    for (const char *p = want; *p; p++) want_ntok += *p == ' ';
    if (*want) want_ntok++;
    hy_buf out = {0};
    size_t ntok = 999;
    CHECK_OK(hy_text_normalize(&out, s, strlen(s), flags, &ntok));
    CHECK(out.data && strcmp(out.data, want) == 0, "normalize(\"%s\")\n  got:  \"%s\"\n  want: \"%s\"",
          s, out.data ? out.data : "(null)", want);
    CHECK(ntok == want_ntok, "normalize(\"%s\"): %zu tokens, want %zu", s, ntok, want_ntok);
    hy_buf_release(&out);
}

static void test_contractions_and_quotes(void) {
    norm_is("Don't you think it's a \"great\" movie? I can't, won't.", 0,
            "do n't you think it 's a `` great '' movie ? i ca n't , wo n't .");
    norm_is("They'll say we're sure I'm done, you'd've; he's", 0,
            "they 'll say we 're sure i 'm done , you 'd 've ; he 's");
    /* SST-2 is already tokenised: the normaliser leaves it unchanged */
    norm_is("you 've ever -lrb- sic -rrb- does n't `` work '' -- it 's ...", 0,
            "you 've ever ( sic ) does n't `` work '' -- it 's ...");
    norm_is("'disappointed' parents' rock'n'roll o'clock '90s", 0,
            "` disappointed ' parents ' rock'n'roll o'clock ` 90s");
    norm_is("he said \" hello \" twice", 0, "he said `` hello '' twice");
}

static void test_punctuation_numbers_hyphens(void) {
    norm_is("A slow-moving, aimless movie... It cost $1,000.50 (10:30 p.m.) in the U.S. & Mr. "
            "Smith's house!!!", 0,
            "a slow-moving , aimless movie ... it cost $ 1,000.50 ( 10:30 p.m. ) in the u.s. & "
            "mr. smith 's house !!!");
    norm_is("  tabs\tand\n\nnew   lines  ", 0, "tabs and new lines");
    norm_is("", 0, "");
    norm_is(" \t\n ", 0, "");
    norm_is("end.", 0, "end .");
    norm_is("a--b -x- 5% x/y", 0, "a -- b - x - 5 % x / y");
}

static void test_html_and_encodings(void) {
    norm_is("Great<br /><br />film &amp; &quot;fun&quot; &#39;ok&#39; &lt;b&gt;x&lt;/b&gt; "
            "a<b", 0, "great film & `` fun '' ` ok ' x a < b");
    /* entities that lost their '&' (AG News), Windows-1252 numeric references */
    norm_is("Turner#39;s quot;deal quot; #151; #36;10", 0,
            "turner 's `` deal '' -- $ 10");
    /* UTF-8 folding, typographic punctuation, invalid UTF-8 read as Windows-1252 */
    norm_is("cr\xc3\xa8me br\xc3\xbbl\xc3\xa9\x65 \xc3\x86sop \xe2\x80\x9cq\xe2\x80\x9d "
            "\xe2\x80\x98x\xe2\x80\x99 a\xe2\x80\x94" "b \xe2\x80\xa6", 0,
            "creme brulee aesop `` q '' ` x ' a -- b ...");
    norm_is("caf\xe9 \x93hi\x94", 0, "cafe `` hi ''");
    norm_is("\xe6\x97\xa5\xe6\x9c\xac ok", 0, "\xe6\x97\xa5\xe6\x9c\xac ok");
    /* overstrike (nroff bold and underline) and control characters */
    norm_is("_\bb_\bo_\bl_\bd B\bBO\bOL\bLD x\x01y", 0, "bold bold x y");
}

static void test_attribution_and_news(void) {
    norm_is("A day for firm decisions!  Or is it?\n\t\t-- Mark Twain\n\t\t   \"Huck Finn\"", 0,
            "a day for firm decisions ! or is it ?");
    norm_is("Q: Why?\nA: Because.\n-- Anon\nnot indented stays", 0,
            "q : why ? a : because . not indented stays");
    /* a record that starts with "--" is text, not an attribution */
    norm_is("-- a mess", 0, "-- a mess");
    norm_is(" NEW YORK (Reuters) - Stocks rose on Monday.", HY_TEXT_NEWS,
            "stocks rose on monday .");
    norm_is("SPACE.com - TORONTO, Canada -- A second\\team  #36;10", HY_TEXT_NEWS,
            "a second team $ 10");
    norm_is("&lt;p&gt;\\&lt;/p&gt; By Ann Lee&lt;/p&gt; LONDON (Reuters) - Oil fell.", HY_TEXT_NEWS,
            "oil fell .");
    norm_is("OIL UP Prices rose, Mr. Li (AP) said.\n REUTER\n&#3;", HY_TEXT_NEWS,
            "oil up prices rose , mr. li said .");
    /* a sentence with a dash is not a source prefix */
    norm_is("Stocks rose - and fell", HY_TEXT_NEWS, "stocks rose - and fell");
    norm_is(" NEW YORK (Reuters) - x", 0, "new york ( reuters ) - x");
}

/* ===== files ===== */

static const char *write_file(const char *name, const char *content) {
    static char path[8][512];
    static int k = 0;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", check_tmpdir(), name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "cannot write %s", p);
    if (f) { fputs(content, f); fclose(f); }
    return p;
}

static void raw_is(const hy_corpus *c, size_t i, const char *want) {
    size_t l;
    const char *s = hy_corpus_raw(c, i, &l);
    CHECK(l == strlen(want) && memcmp(s, want, l) == 0, "record %zu: got '%.*s', want '%s'", i,
          (int)l, s, want);
}

static void test_tsv(void) {
    const char *p = write_file("a.tsv", "label\tsentence\n0\tit 's bad .\r\n\n1\t  good  \n");
    hy_tsv_spec spec = {2, 1, 0, 1};
    hy_corpus c = {0};
    CHECK_OK(hy_text_read_tsv(&c, p, &spec, 0));
    CHECK(c.n == 2, "n = %zu", c.n);
    if (c.n == 2) {
        raw_is(&c, 0, "it 's bad .");
        raw_is(&c, 1, "good");
        CHECK(c.labels[0] == 0 && c.labels[1] == 1, "labels %d %d", c.labels[0], c.labels[1]);
        CHECK(c.ntok[0] == 4, "ntok %d", c.ntok[0]);
    }
    char want[600];
    const char *bad = write_file("b.tsv", "label\tsentence\n1\tfine\n0\ttoo\tmany\n");
    snprintf(want, sizeof want, "text: %s:3: expected 2 tab-separated fields, got 3", bad);
    CHECK_FAIL(hy_text_read_tsv(&c, bad, &spec, 0), HY_EINVAL, want);
    CHECK(c.n == 2, "a failed read leaves the corpus as it was (n = %zu)", c.n);
    bad = write_file("c.tsv", "h\th\n1\tok\nx1\tbad label\n");
    snprintf(want, sizeof want, "text: %s:3: expected an integer label in [0, 32767] in field 1, "
             "got 'x1'", bad);
    CHECK_FAIL(hy_text_read_tsv(&c, bad, &spec, 0), HY_EINVAL, want);
    bad = write_file("d.tsv", "h\th\n40000\tbig\n");
    snprintf(want, sizeof want, "text: %s:2: expected an integer label in [0, 32767] in field 1, "
             "got '40000'", bad);
    CHECK_FAIL(hy_text_read_tsv(&c, bad, &spec, 0), HY_EINVAL, want);
    bad = write_file("e.tsv", "h\th\n1\t \n");
    snprintf(want, sizeof want, "text: %s:2: expected text in field 2, got an empty field", bad);
    CHECK_FAIL(hy_text_read_tsv(&c, bad, &spec, 0), HY_EINVAL, want);
    snprintf(want, sizeof want, "text: cannot read '%s/missing.tsv': No such file or directory",
             check_tmpdir());
    char miss[600];
    snprintf(miss, sizeof miss, "%s/missing.tsv", check_tmpdir());
    CHECK_FAIL(hy_text_read_tsv(&c, miss, &spec, 0), HY_EIO, want);
    CHECK(c.n == 2, "n = %zu", c.n);
    hy_corpus_release(&c);
}

static void test_lines_records_gzip(void) {
    const char *p = write_file("trec.txt", "DESC:manner How did it go ?\n5 Who was Galileo ?\n\n");
    hy_corpus c = {0};
    CHECK_OK(hy_text_read_lines(&c, p, 1, 0));
    CHECK(c.n == 2, "n = %zu", c.n);
    if (c.n == 2) { raw_is(&c, 0, "How did it go ?"); raw_is(&c, 1, "Who was Galileo ?"); }
    CHECK(c.n == 2 && c.labels[0] == -1, "OOD labels are -1");
    const char *bad = write_file("trec2.txt", "NUM:date When ?\nHUM:ind\n");
    char want[600];
    snprintf(want, sizeof want, "text: %s:2: expected a label, a blank and the text, got "
             "'HUM:ind'", bad);
    CHECK_FAIL(hy_text_read_lines(&c, bad, 1, 0), HY_EINVAL, want);
    CHECK(c.n == 2, "n = %zu", c.n);
    hy_corpus_release(&c);

    p = write_file("fort", "First one.\n%\n\n%\nSecond\nline.\n\t\t-- Someone\n%\nLast");
    CHECK_OK(hy_text_read_records(&c, p, 0));
    CHECK(c.n == 3, "records: n = %zu", c.n);
    if (c.n == 3) {
        raw_is(&c, 1, "Second\nline.\n\t\t-- Someone");
        size_t l;
        const char *m = hy_corpus_norm(&c, 1, &l);
        CHECK(l == 13 && memcmp(m, "second line .", 13) == 0, "norm '%.*s'", (int)l, m);
        raw_is(&c, 2, "Last");
    }
    hy_corpus_release(&c);

    /* gzip, read transparently; a truncated gzip is an error naming the file */
    char gzpath[600];
    snprintf(gzpath, sizeof gzpath, "%s/caps.en.gz", check_tmpdir());
    gzFile g = gzopen(gzpath, "wb");
    CHECK(g != NULL, "gzopen");
    for (int i = 0; i < 200; i++) gzprintf(g, "A dog runs number %d on the grass.\n", i);
    gzclose(g);
    CHECK_OK(hy_text_read_lines(&c, gzpath, 0, 0));
    CHECK(c.n == 200, "gz lines: n = %zu", c.n);
    if (c.n == 200) raw_is(&c, 7, "A dog runs number 7 on the grass.");
    static char whole[8192];
    FILE *f = fopen(gzpath, "rb");
    size_t sz = f ? fread(whole, 1, sizeof whole, f) : 0;
    if (f) fclose(f);
    f = fopen(gzpath, "wb");                /* keep the first half only */
    if (f) { fwrite(whole, 1, sz / 2, f); fclose(f); }
    CHECK_FAIL_HAS(hy_text_read_lines(&c, gzpath, 0, 0), HY_EIO, "(truncated or corrupt gzip)");
    CHECK(c.n == 200, "n = %zu", c.n);
    hy_corpus_release(&c);
}

static void test_arff(void) {
    const char *p = write_file("r.arff",
        "% a comment\n@relation 'Reuters-21578 Corn'\n\n@attribute 'class att' {0,1}\n"
        "@ATTRIBUTE Text string\n@attribute w numeric\n@data\n"
        "0, 'Hello, world \\'quoted\\' \\\"dq\\\"\\nline2', 1.5\n"
        "% comment in data\n"
        "1,\"double, quoted\",2\n"
        "0, ?, 3\n"
        "1,'tail&lt;X.T> REUTER\\n&#3;',4\n");
    hy_corpus c = {0};
    CHECK_OK(hy_text_read_arff(&c, p, "Text", HY_TEXT_NEWS));
    CHECK(c.n == 3, "arff: n = %zu (the '?' row is skipped)", c.n);
    if (c.n == 3) {
        raw_is(&c, 0, "Hello, world 'quoted' \"dq\"\nline2");
        raw_is(&c, 1, "double, quoted");
        size_t l;
        const char *m = hy_corpus_norm(&c, 2, &l);
        CHECK(l == 4 && memcmp(m, "tail", 4) == 0, "news norm '%.*s'", (int)l, m);
    }
    hy_corpus_release(&c);
    CHECK_OK(hy_text_read_arff(&c, p, NULL, 0));        /* the first string attribute */
    CHECK(c.n == 3, "n = %zu", c.n);
    hy_corpus_release(&c);

    char want[700];
    const char *bad = write_file("b1.arff", "@relation r\n@attribute t string\n@attribute c {0,1}\n"
                                 "@data\n'ok',1\n'no end,1\n");
    snprintf(want, sizeof want, "text: %s:6: unterminated quoted string starting at column 1 "
             "(expected a closing ')", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    CHECK(c.n == 0, "nothing kept after a failure (n = %zu)", c.n);
    bad = write_file("b2.arff", "@relation r\n@attribute t string\n@attribute c {0,1}\n@data\n"
                     "'a',1\n'b'\n");
    snprintf(want, sizeof want, "text: %s:6: expected 2 values, got 1", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    bad = write_file("b3.arff", "@relation r\n@attribute t string\n@data\n'a' 'b'\n");
    snprintf(want, sizeof want, "text: %s:4: expected ',' after value 1 at column 5, got '''", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    bad = write_file("b4.arff", "@relation r\n@attribute t string\nsomething\n@data\n");
    snprintf(want, sizeof want, "text: %s:3: expected @relation, @attribute or @data, got "
             "'something'", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    bad = write_file("b5.arff", "@relation r\n@attribute n numeric\n@data\n1\n");
    snprintf(want, sizeof want, "text: %s: no string attribute 'Text' (attributes: n)", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "Text", 0), HY_EINVAL, want);
    bad = write_file("b6.arff", "@relation r\n@attribute t string\n@data\n{0 'x'}\n");
    snprintf(want, sizeof want, "text: %s:4: sparse ARFF rows are not supported (expected 1 "
             "comma-separated values)", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    bad = write_file("b7.arff", "@relation r\n@attribute t string\n");
    snprintf(want, sizeof want, "text: %s: no @data section (expected an ARFF file)", bad);
    CHECK_FAIL(hy_text_read_arff(&c, bad, "t", 0), HY_EINVAL, want);
    hy_corpus_release(&c);
}

/* ===== vocabulary and encoding ===== */

static void add(hy_corpus *c, const char *s, int16_t label) {
    CHECK_OK(hy_corpus_add(c, s, strlen(s), label, 0));
}

static void test_vocab_order(void) {
    hy_corpus c = {0};
    add(&c, "b a c a", 0);
    add(&c, "b a d e", 1);
    hy_vocab v;
    CHECK_OK(hy_vocab_build(&v, &c, 1, 0));
    const char *want[] = {"[PAD]", "[UNK]", "[CLS]", "[MASK]", "a", "b", "c", "d", "e"};
    CHECK(v.n == 9, "vocab size %zu", v.n);
    for (size_t i = 0; i < 9 && i < v.n; i++)
        CHECK(strcmp(hy_vocab_word(&v, i), want[i]) == 0, "word %zu is '%s', want '%s'", i,
              hy_vocab_word(&v, i), want[i]);
    CHECK(v.n == 9 && v.counts[4] == 3 && v.counts[5] == 2 && v.counts[8] == 1, "counts");
    CHECK(hy_vocab_lookup(&v, "c", 1) == 6 && hy_vocab_lookup(&v, "zz", 2) == -1, "lookup");
    hy_vocab_release(&v);
    CHECK_OK(hy_vocab_build(&v, &c, 2, 0));              /* min_count */
    CHECK(v.n == 6 && strcmp(hy_vocab_word(&v, 5), "b") == 0, "min_count 2: %zu words", v.n);
    hy_vocab_release(&v);
    CHECK_OK(hy_vocab_build(&v, &c, 1, 7));              /* max_size counts the reserved ids */
    CHECK(v.n == 7 && strcmp(hy_vocab_word(&v, 6), "c") == 0, "max_size 7: %zu words", v.n);
    char hex[65];
    hy_vocab_release(&v);
    CHECK_OK(hy_vocab_build(&v, &c, 2, 6));
    hy_vocab_sha256(&v, hex);                 /* sha256("[PAD]\n[UNK]\n[CLS]\n[MASK]\na\nb\n") */
    CHECK(strcmp(hex, "28e114565f71f5e5033e1c53f78ebaa37dac18f9ee6df9cde432307e3f56b733") == 0,
          "vocab sha256 %s", hex);
    hy_vocab_release(&v);
    CHECK_FAIL(hy_vocab_build(&v, &c, 0, 0), HY_EINVAL,
               "text: vocabulary min_count must be >= 1, got 0");
    CHECK_FAIL(hy_vocab_build(&v, &c, 1, 4), HY_EINVAL,
               "text: vocabulary max_size must be 0 (no cap) or >= 5, got 4");

    const char *ok[] = {"[PAD]", "[UNK]", "[CLS]", "[MASK]", "x", "y"};
    CHECK_OK(hy_vocab_from_words(&v, ok, 6));
    CHECK(hy_vocab_lookup(&v, "y", 1) == 5, "from_words lookup");
    hy_vocab_release(&v);
    const char *dup[] = {"[PAD]", "[UNK]", "[CLS]", "[MASK]", "x", "x"};
    CHECK_FAIL(hy_vocab_from_words(&v, dup, 6), HY_EINVAL,
               "text: vocabulary word 'x' repeats (ids 4 and 5)");
    const char *nomask[] = {"[PAD]", "[UNK]", "[CLS]", "the", "x"};   /* a 3-reserved file */
    CHECK_FAIL(hy_vocab_from_words(&v, nomask, 5), HY_EINVAL,
               "text: vocabulary word 3 is 'the' (expected '[MASK]')");
    const char *noreserved[] = {"[PAD]", "x", "[CLS]", "[MASK]"};
    CHECK_FAIL(hy_vocab_from_words(&v, noreserved, 4), HY_EINVAL,
               "text: vocabulary word 1 is 'x' (expected '[UNK]')");
    const char *blank[] = {"[PAD]", "[UNK]", "[CLS]", "[MASK]", "a b"};
    CHECK_FAIL(hy_vocab_from_words(&v, blank, 5), HY_EINVAL,
               "text: vocabulary word 4 'a b' is empty or holds a blank");
    hy_corpus_release(&c);
}

static void test_encode(void) {
    hy_corpus tr = {0}, te = {0};
    add(&tr, "the film is good", 1);
    add(&tr, "the film is bad", 0);
    hy_vocab v;
    CHECK_OK(hy_vocab_build(&v, &tr, 1, 0));   /* [PAD] [UNK] [CLS] [MASK] film is the bad good */
    add(&te, "The film is GREAT!", 1);
    add(&te, "", 0);
    add(&te, "bad bad bad bad bad bad", 0);
    hy_tensor ids, len;
    hy_text_stats st;
    CHECK_OK(hy_text_encode(&ids, &len, &v, &te, 4, &st));
    CHECK(ids.dtype == HY_I32 && ids.ndim == 2 && ids.shape[0] == 3 && ids.shape[1] == 4, "shape");
    const int32_t want[12] = {6, 4, 5, 1, 0, 0, 0, 0, 7, 7, 7, 7};
    const int32_t wlen[3] = {4, 0, 4};
    CHECK(memcmp(ids.data, want, sizeof want) == 0, "ids");
    CHECK(memcmp(len.data, wlen, sizeof wlen) == 0, "lengths");
    CHECK(st.tokens == 8 && st.unk == 1 && st.truncated == 2, "stats %lld %lld %lld",
          (long long)st.tokens, (long long)st.unk, (long long)st.truncated);
    hy_tensor ids2, len2;
    CHECK_OK(hy_text_encode(&ids2, &len2, &v, &te, 4, NULL));
    CHECK(memcmp(ids.data, ids2.data, hy_tensor_nbytes(&ids)) == 0, "encode is deterministic");
    hy_tensor_release(&ids2);
    hy_tensor_release(&len2);
    CHECK_OK(hy_text_encode(&ids2, &len2, &v, &te, 8, NULL));
    int32_t *r = ids2.data;
    CHECK(r[16] == 7 && r[21] == 7 && r[22] == 0 && ((int32_t *)len2.data)[2] == 6, "max_len 8");
    hy_tensor_release(&ids2);
    hy_tensor_release(&len2);
    CHECK_FAIL(hy_text_encode(&ids2, &len2, &v, &te, 0, NULL), HY_EINVAL,
               "text: max_len must be >= 1, got 0");
    hy_tensor_release(&ids);
    hy_tensor_release(&len);
    hy_vocab_release(&v);
    hy_corpus_release(&tr);
    hy_corpus_release(&te);
}

static void test_split_filter(void) {
    hy_corpus c = {0};
    char buf[64];
    for (int i = 0; i < 100; i++) {
        snprintf(buf, sizeof buf, "record %d", i);
        add(&c, buf, (int16_t)(i < 80 ? 1 : 0));
    }
    hy_corpus r1 = {0}, h1 = {0}, r2 = {0}, h2 = {0};
    CHECK_OK(hy_corpus_split(&r1, &h1, &c, 10, 7, 1));
    CHECK(r1.n == 90 && h1.n == 10, "split sizes %zu %zu", r1.n, h1.n);
    int ones = 0;
    for (size_t i = 0; i < h1.n; i++) ones += h1.labels[i] == 1;
    CHECK(ones == 8, "stratified: 8 of 10 held-out records have label 1, got %d", ones);
    CHECK_OK(hy_corpus_split(&r2, &h2, &c, 10, 7, 1));
    CHECK(h2.n == 10 && memcmp(h1.raw.data, h2.raw.data, h1.raw.len) == 0, "same seed, same split");
    CHECK_OK(hy_corpus_split(&r2, &h2, &c, 10, 8, 1));
    CHECK(h2.raw.len != h1.raw.len || memcmp(h1.raw.data, h2.raw.data, h1.raw.len) != 0,
          "another seed, another split");
    /* order kept: held-out records appear in their original order */
    int prev = -1, sorted = 1;
    for (size_t i = 0; i < h1.n; i++) {
        size_t l;
        const char *s = hy_corpus_raw(&h1, i, &l);
        int k = atoi(s + 7);
        if (k <= prev) sorted = 0;
        prev = k;
    }
    CHECK(sorted, "held-out records keep the original order");
    CHECK_FAIL(hy_corpus_split(&r2, &h2, &c, 101, 1, 0), HY_EINVAL,
               "text: cannot hold out 101 of 100 records");
    hy_corpus_release(&r1);
    hy_corpus_release(&h1);
    hy_corpus_release(&r2);
    hy_corpus_release(&h2);
    hy_corpus_release(&c);

    hy_corpus a = {0}, ex = {0}, out = {0};
    add(&a, "Hello, World", -1);
    add(&a, "<br />", -1);                 /* empty after normalisation */
    add(&a, "hello ,   world", -1);        /* same normalisation as the first */
    add(&a, "kept", -1);
    add(&a, "in test", -1);
    add(&ex, "In TEST", -1);
    size_t dropped = 0;
    CHECK_OK(hy_corpus_filter(&out, &a, 1, &ex, &dropped));
    CHECK(out.n == 2 && dropped == 3, "filter kept %zu, dropped %zu", out.n, dropped);
    if (out.n == 2) { raw_is(&out, 0, "Hello, World"); raw_is(&out, 1, "kept"); }
    CHECK_OK(hy_corpus_filter(&out, &a, 0, NULL, &dropped));
    CHECK(out.n == 4 && dropped == 1, "no dedup: kept %zu", out.n);
    int64_t idx[3] = {3, 0, 3};
    CHECK_OK(hy_corpus_take(&out, &a, idx, 3));
    CHECK(out.n == 3, "take n");
    if (out.n == 3) raw_is(&out, 2, "kept");
    int64_t badidx[1] = {5};
    CHECK_FAIL(hy_corpus_take(&out, &a, badidx, 1), HY_EINVAL,
               "text: take index 5 out of range [0, 5)");
    CHECK_OK(hy_corpus_append(&out, &a));
    CHECK(out.n == 5, "append: n %zu", out.n);
    hy_corpus_release(&a);
    hy_corpus_release(&ex);
    hy_corpus_release(&out);
}

/* Random bytes must never crash the normaliser, and the output is always well-formed. */
static void test_fuzz_normalize(void) {
    uint64_t s = check_seed();
    char in[256];
    hy_buf out = {0};
    for (int it = 0; it < 3000; it++) {
        size_t n = (size_t)(s % 200);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            const char alphabet[] = "aZ9 '\"-.,&;#<>/\\\n\t\bx%n't&amp;\xc3\xa9\xe2\x80\x9c\xff";
            in[i] = (s >> 33) % 4 == 0 ? (char)(s >> 40) : alphabet[(s >> 40) % (sizeof alphabet - 1)];
        }
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t ntok;
        if (hy_text_normalize(&out, in, n, (s >> 60) & 1 ? HY_TEXT_NEWS : 0, &ntok) != HY_OK) {
            CHECK(0, "normalize failed: %s", hy_errmsg());
            break;
        }
        size_t spaces = 0;
        for (size_t i = 0; i < out.len; i++) spaces += out.data[i] == ' ';
        int ok = (out.len == 0 && ntok == 0) ||
                 (out.len > 0 && out.data[0] != ' ' && out.data[out.len - 1] != ' ' &&
                  spaces + 1 == ntok && !strstr(out.data, "  "));
        CHECK(ok, "malformed output for input %d: '%s' (%zu tokens)", it, out.data, ntok);
        if (!ok) break;
    }
    hy_buf_release(&out);
}

int main(void) {
    RUN(test_contractions_and_quotes);
    RUN(test_punctuation_numbers_hyphens);
    RUN(test_html_and_encodings);
    RUN(test_attribution_and_news);
    RUN(test_tsv);
    RUN(test_lines_records_gzip);
    RUN(test_arff);
    RUN(test_vocab_order);
    RUN(test_encode);
    RUN(test_split_filter);
    RUN(test_fuzz_normalize);
    return check_exit("test_text");
}
