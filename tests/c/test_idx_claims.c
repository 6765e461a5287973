/* test_idx_claims.c: an idx header's sizes are a claim the body must back: a 16-byte file whose
 * header says 100,000 x 1,000 x 1,000 bytes is refused as truncated without allocating them
 * (found by tests/fuzz/fuzz_idx: a 12-byte input made the reader ask for 6.5 GB). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "data/idx.h"

static void test_huge_claim_truncated(void) {
    char path[512], want[700];
    snprintf(path, sizeof path, "%s/claim.idx", check_tmpdir());
    static const unsigned char hdr[] = {0, 0, 0x08, 3, 0, 1, 0x86, 0xa0, 0, 0, 0x03, 0xe8,
                                        0, 0, 0x03, 0xe8, 1, 2, 3};
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL, "create %s", path);
    if (!fp) return;
    fwrite(hdr, 1, sizeof hdr, fp);
    fclose(fp);
    hy_tensor t;
    snprintf(want, sizeof want, "idx: '%s': truncated at byte 19 (header says 100000000016 bytes)",
             path);
    CHECK_FAIL(hy_idx_read(path, &t), HY_EIO, want);
    CHECK(t.data == NULL, "out zeroed");
}

/* A body just above the direct-read size still reads exactly (the growing-buffer path). */
static void test_large_body_round_trip(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/large.idx", check_tmpdir());
    int64_t shape[2] = {(int64_t)65 << 10, 1024};          /* 65 MiB of uint8 */
    hy_tensor a, b;
    CHECK_OK(hy_tensor_alloc(&a, HY_U8, 2, shape));
    unsigned char *p = a.data;
    for (size_t i = 0; i < hy_tensor_numel(&a); i++) p[i] = (unsigned char)(i * 131u >> 3);
    CHECK_OK(hy_idx_write(path, &a, 0));
    CHECK_OK(hy_idx_read(path, &b));
    CHECK(b.ndim == 2 && b.shape[0] == shape[0] && b.shape[1] == 1024 &&
          memcmp(a.data, b.data, hy_tensor_numel(&a)) == 0, "round trip");
    hy_tensor_release(&a);
    hy_tensor_release(&b);
}

int main(void) {
    RUN(test_huge_claim_truncated);
    RUN(test_large_body_round_trip);
    return check_exit("test_idx_claims");
}
