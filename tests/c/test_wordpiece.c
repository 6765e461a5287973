/* test_wordpiece.c: BERT's BasicTokenizer + WordPiece (core/data/wordpiece.c) against the ids of
 * the Python re-statement of HF's tokenizer (tests/ref/wordpiece_ref.py ->
 * tests/ref/wordpiece_tiny.h5: real sentences, hand-made hard strings under 5 option sets,
 * invalid UTF-8, pairs), plus the Unicode tables, vocab.txt loading and the error messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/unitab.h"
#include "data/wordpiece.h"
#include "io/h5.h"
#include "tensor/tensor.h"

#define FIXTURE "tests/ref/wordpiece_tiny.h5"

static hy_wordpiece g_wp;

static hy_status load_fixture_vocab(hy_wordpiece *wp) {
    hy_h5 f;
    char **tok = NULL;
    size_t n = 0;
    HY_TRY(hy_h5_open(&f, FIXTURE));
    hy_status st = hy_h5_read_strings(&f, "/vocab", &tok, &n);
    hy_h5_close(&f);
    if (st != HY_OK) return st;
    st = hy_wordpiece_from_tokens(wp, (const char *const *)tok, n, FIXTURE ":/vocab");
    hy_h5_strings_free(tok, n);
    return st;
}

static void test_unicode_tables(void) {
    CHECK(hy_uc_class_of('a') == HY_UC_OTHER, "a");
    CHECK(hy_uc_class_of('$') == HY_UC_PUNCT && hy_uc_class_of('~') == HY_UC_PUNCT &&
          hy_uc_class_of('^') == HY_UC_PUNCT && hy_uc_class_of('`') == HY_UC_PUNCT, "ascii punct");
    CHECK(hy_uc_class_of(0x00BF) == HY_UC_PUNCT, "inverted question mark is Po");
    CHECK(hy_uc_class_of(0x20AC) == HY_UC_OTHER, "euro sign is Sc, not punctuation");
    CHECK(hy_uc_class_of(0) == HY_UC_DROP && hy_uc_class_of(0xFFFD) == HY_UC_DROP &&
          hy_uc_class_of(0x200B) == HY_UC_DROP && hy_uc_class_of(0xE000) == HY_UC_DROP &&
          hy_uc_class_of(0xE0080) == HY_UC_DROP && hy_uc_class_of(0x110000) == HY_UC_DROP,
          "controls, format, private use, unassigned");
    CHECK(hy_uc_class_of('\t') == HY_UC_SPACE && hy_uc_class_of(0x3000) == HY_UC_SPACE &&
          hy_uc_class_of(0xA0) == HY_UC_SPACE, "whitespace");
    CHECK(hy_uc_class_of(0x2028) == HY_UC_SPLIT && hy_uc_class_of(0x2029) == HY_UC_SPLIT,
          "line/paragraph separators split words");
    CHECK(hy_uc_class_of(0x4E2D) == HY_UC_CJK && hy_uc_class_of(0x20000) == HY_UC_CJK &&
          hy_uc_class_of(0xAC00) == HY_UC_OTHER && hy_uc_class_of(0x3042) == HY_UC_OTHER,
          "CJK ideographs, not Hangul or kana");
    CHECK(hy_uc_class_of(0x0301) == HY_UC_MN, "combining acute");
    uint32_t o[4];
    CHECK(hy_uc_lower('A', o) == 1 && o[0] == 'a', "lower A");
    CHECK(hy_uc_lower(0x0100, o) == 1 && o[0] == 0x0101, "lower A macron (stride-2 run)");
    CHECK(hy_uc_lower(0x0101, o) == 1 && o[0] == 0x0101, "lower a macron");
    CHECK(hy_uc_lower(0x0130, o) == 2 && o[0] == 'i' && o[1] == 0x0307, "lower dotted I");
    CHECK(hy_uc_lower(0x03A3, o) == 1 && o[0] == 0x03C3, "sigma: no final-sigma rule");
    CHECK(hy_uc_nfd(0x00E9, o) == 2 && o[0] == 'e' && o[1] == 0x0301, "nfd e acute");
    CHECK(hy_uc_nfd(0x1EC7, o) == 3 && o[0] == 'e' && o[1] == 0x0323 && o[2] == 0x0302,
          "nfd e circumflex dot below (recursive)");
    CHECK(hy_uc_nfd(0xD55C, o) == 3 && o[0] == 0x1112 && o[1] == 0x1161 && o[2] == 0x11AB,
          "nfd hangul syllable");
    CHECK(hy_uc_nfd(0xFB01, o) == 1 && o[0] == 0xFB01, "ligature has no canonical decomposition");
    CHECK(hy_uc_ccc(0x0301) == 230 && hy_uc_ccc(0x0323) == 220 && hy_uc_ccc('a') == 0, "ccc");
}

/* a case's ids, compared and reported */
static int same_ids(const int32_t *got, size_t ng, const int32_t *want, size_t nw) {
    if (ng != nw) return 0;
    for (size_t i = 0; i < ng; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)v[i]);
    fputc('\n', stderr);
}

static void test_fixture_cases(void) {
    hy_h5 f;
    CHECK_OK(hy_h5_open(&f, FIXTURE));
    hy_tensor text = {0}, offs = {0}, opts = {0}, ids = {0}, ioffs = {0}, err = {0}, kind = {0};
    CHECK_OK(hy_h5_read(&f, "/cases/text", &text));
    CHECK_OK(hy_h5_read_as(&f, "/cases/offsets", HY_I64, &offs));
    CHECK_OK(hy_h5_read_as(&f, "/cases/options", HY_I32, &opts));
    CHECK_OK(hy_h5_read_as(&f, "/cases/ids", HY_I32, &ids));
    CHECK_OK(hy_h5_read_as(&f, "/cases/ids_offsets", HY_I64, &ioffs));
    CHECK_OK(hy_h5_read_as(&f, "/cases/error", HY_I32, &err));
    CHECK_OK(hy_h5_read_as(&f, "/cases/kind", HY_I32, &kind));
    hy_h5_close(&f);
    if (check_failures) goto done;
    size_t n = (size_t)err.shape[0], bad = 0, real = 0, hard = 0, nerr = 0;
    const char *tx = text.data;
    const int64_t *of = offs.data, *io = ioffs.data;
    const int32_t *op = opts.data, *want = ids.data, *er = err.data, *kd = kind.data;
    int32_t buf[512];
    for (size_t i = 0; i < n; i++) {
        hy_wordpiece wp = g_wp;
        wp.do_lower_case = op[4 * i];
        wp.strip_accents = op[4 * i + 1];
        wp.tokenize_chinese_chars = op[4 * i + 2];
        size_t max_len = (size_t)op[4 * i + 3];
        const char *s = tx + of[i];
        size_t slen = (size_t)(of[i + 1] - of[i]);
        hy_i32s got = {0};
        hy_status st;
        const int32_t *gv;
        size_t gn;
        if (max_len) {
            st = hy_wordpiece_encode(&wp, s, slen, NULL, 0, max_len, buf, NULL, &gn, NULL);
            gv = buf;
        } else {
            st = hy_wordpiece_tokenize(&wp, s, slen, &got);
            gv = got.v;
            gn = got.n;
        }
        if (er[i]) {
            nerr++;
            if (st == HY_OK || strncmp(hy_errmsg(), "wordpiece: invalid UTF-8 at byte ", 33) != 0) {
                bad++;
                fprintf(stderr, "case %zu: invalid UTF-8 not refused (%s)\n", i, hy_errmsg());
            }
        } else if (st != HY_OK) {
            bad++;
            fprintf(stderr, "case %zu failed: %s\n", i, hy_errmsg());
        } else if (!same_ids(gv, gn, want + io[i], (size_t)(io[i + 1] - io[i]))) {
            if (bad++ < 10) {
                fprintf(stderr, "case %zu (options %d %d %d %zu) \"%.*s\"\n", i, (int)op[4 * i],
                        (int)op[4 * i + 1], (int)op[4 * i + 2], max_len, (int)slen, s);
                print_ids("got ", gv, gn);
                print_ids("want", want + io[i], (size_t)(io[i + 1] - io[i]));
            }
        } else if (kd[i] == 0) {
            real++;
        } else {
            hard++;
        }
        hy_i32s_release(&got);
    }
    CHECK(bad == 0, "%zu of %zu cases differ from the reference", bad, n);
    CHECK(real >= 1000 && hard >= 300 && nerr >= 5, "only %zu real, %zu hand-made, %zu invalid",
          real, hard, nerr);
done:
    hy_tensor_release(&text);
    hy_tensor_release(&offs);
    hy_tensor_release(&opts);
    hy_tensor_release(&ids);
    hy_tensor_release(&ioffs);
    hy_tensor_release(&err);
    hy_tensor_release(&kind);
}

static void test_fixture_pairs(void) {
    hy_h5 f;
    CHECK_OK(hy_h5_open(&f, FIXTURE));
    hy_tensor a = {0}, ao = {0}, b = {0}, bo = {0}, ml = {0}, ids = {0}, ty = {0}, len = {0};
    CHECK_OK(hy_h5_read(&f, "/pairs/a", &a));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/a_offsets", HY_I64, &ao));
    CHECK_OK(hy_h5_read(&f, "/pairs/b", &b));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/b_offsets", HY_I64, &bo));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/max_len", HY_I32, &ml));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/ids", HY_I32, &ids));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/types", HY_I32, &ty));
    CHECK_OK(hy_h5_read_as(&f, "/pairs/len", HY_I32, &len));
    hy_h5_close(&f);
    if (check_failures) goto done;
    size_t P = (size_t)ml.shape[0], W = (size_t)ids.shape[1], bad = 0;
    const int64_t *aof = ao.data, *bof = bo.data;
    const int32_t *m = ml.data, *wi = ids.data, *wt = ty.data, *wl = len.data;
    for (size_t k = 0; k < P; k++) {
        int32_t gi[256], gt[256];
        size_t gl = 0;
        const char *sa = (const char *)a.data + aof[k], *sb = (const char *)b.data + bof[k];
        CHECK_OK(hy_wordpiece_encode(&g_wp, sa, (size_t)(aof[k + 1] - aof[k]), sb,
                                     (size_t)(bof[k + 1] - bof[k]), (size_t)m[k], gi, gt, &gl,
                                     NULL));
        int ok = gl == (size_t)wl[k];
        for (size_t j = 0; ok && j < (size_t)m[k]; j++)
            ok = gi[j] == wi[k * W + j] && gt[j] == wt[k * W + j];
        if (!ok) {
            bad++;
            print_ids("got ", gi, (size_t)m[k]);
            print_ids("want", wi + k * W, (size_t)m[k]);
        }
    }
    CHECK(bad == 0, "%zu of %zu pairs differ", bad, P);
done:
    hy_tensor_release(&a);
    hy_tensor_release(&ao);
    hy_tensor_release(&b);
    hy_tensor_release(&bo);
    hy_tensor_release(&ml);
    hy_tensor_release(&ids);
    hy_tensor_release(&ty);
    hy_tensor_release(&len);
}

static void write_file(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(s, 1, n, f);
    fclose(f);
}

static void test_vocab_file(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/vocab.txt", check_tmpdir());
    /* the fixture's vocab written as vocab.txt: same ids, same hash as sha256 of the file */
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; f && i < g_wp.n; i++) fprintf(f, "%s\n", hy_wordpiece_token(&g_wp, i));
    if (f) fclose(f);
    hy_wordpiece wp;
    CHECK_OK(hy_wordpiece_load(&wp, path));
    CHECK(wp.n == g_wp.n, "%zu tokens, want %zu", wp.n, g_wp.n);
    CHECK(wp.unk_id == 3 && wp.cls_id == 4 && wp.sep_id == 5 && wp.mask_id == 6 && wp.pad_id == 0,
          "special ids looked up by string: %d %d %d %d %d", wp.pad_id, wp.unk_id, wp.cls_id,
          wp.sep_id, wp.mask_id);
    char h1[65], h2[65];
    hy_wordpiece_sha256(&wp, h1);
    hy_wordpiece_sha256(&g_wp, h2);
    CHECK(strcmp(h1, h2) == 0, "sha256 %s vs %s", h1, h2);
    hy_wordpiece_release(&wp);
    /* \r\n and \r line ends, a last line without newline, a repeated token (last id wins) */
    const char *v7 = "[PAD]\r\n[UNK]\rab\n##c\nab\n[CLS]\n[SEP]";
    write_file(path, v7, strlen(v7));
    CHECK_OK(hy_wordpiece_load(&wp, path));
    CHECK(wp.n == 7 && wp.unk_id == 1 && wp.cls_id == 5 && wp.sep_id == 6 && wp.mask_id == -1,
          "n %zu unk %d cls %d sep %d mask %d", wp.n, wp.unk_id, wp.cls_id, wp.sep_id,
          wp.mask_id);
    CHECK(hy_wordpiece_lookup(&wp, "ab", 2) == 4, "repeated token keeps its last id");
    hy_i32s out = {0};
    CHECK_OK(hy_wordpiece_tokenize(&wp, "ABC abd [MASK]", 14, &out));
    CHECK(out.n == 4 && out.v[0] == 4 && out.v[1] == 3 && out.v[2] == 1 && out.v[3] == 1,
          "ABC -> ab ##c, abd -> [UNK], [MASK] (absent) -> [UNK]; got %zu ids", out.n);
    hy_i32s_release(&out);
    int32_t ids[8];
    size_t len = 0, trunc = 0;
    CHECK_OK(hy_wordpiece_encode(&wp, "abc abc abc", 11, NULL, 0, 5, ids, NULL, &len, &trunc));
    CHECK(len == 5 && trunc == 3 && ids[0] == 5 && ids[1] == 4 && ids[2] == 3 && ids[3] == 4 &&
          ids[4] == 6, "truncated to max_len - 2 pieces: len %zu trunc %zu", len, trunc);
    CHECK_FAIL(hy_wordpiece_encode(&wp, "x", 1, "y", 1, 2, ids, NULL, &len, NULL), HY_EINVAL,
               "wordpiece: max_len 2 leaves no room for [CLS] and [SEP]");
    CHECK_FAIL(hy_wordpiece_tokenize(&wp, "ok \xc3(", 5, &out), HY_EINVAL,
               "wordpiece: invalid UTF-8 at byte 3 (0xc3)");
    CHECK(out.n == 0, "nothing appended on failure");
    hy_wordpiece_release(&wp);
    /* errors */
    write_file(path, "[PAD]\nx\n", 8);
    char msg[700];
    snprintf(msg, sizeof msg, "wordpiece: '%s' has no [UNK] token (2 tokens)", path);
    CHECK_FAIL(hy_wordpiece_load(&wp, path), HY_EINVAL, msg);
    write_file(path, "[UNK]\nb\xffz\n", 10);
    snprintf(msg, sizeof msg, "wordpiece: '%s' line 2 is not valid UTF-8", path);
    CHECK_FAIL(hy_wordpiece_load(&wp, path), HY_EINVAL, msg);
    write_file(path, "", 0);
    snprintf(msg, sizeof msg, "wordpiece: '%s' is empty", path);
    CHECK_FAIL(hy_wordpiece_load(&wp, path), HY_EINVAL, msg);
    CHECK_FAIL_HAS(hy_wordpiece_load(&wp, "/nonexistent/vocab.txt"), HY_EIO,
                   "wordpiece: cannot open '/nonexistent/vocab.txt'");
}

int main(void) {
    if (load_fixture_vocab(&g_wp) != HY_OK) {
        fprintf(stderr, "test_wordpiece: cannot load %s: %s\n", FIXTURE, hy_errmsg());
        return 1;
    }
    RUN(test_unicode_tables);
    RUN(test_fixture_cases);
    RUN(test_fixture_pairs);
    RUN(test_vocab_file);
    hy_wordpiece_release(&g_wp);
    return check_exit("test_wordpiece");
}
