/* fuzz_common.h: helpers shared by the libFuzzer targets in tests/fuzz/ (built by `make fuzz`).
 * The file readers take a path, so each input is written to one memfd per process and the
 * reader opens "/proc/self/fd/N": no disk I/O, nothing left behind. */
#ifndef HY_FUZZ_COMMON_H
#define HY_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensor/base.h"

/* Writes data[0..size) as the whole content of the process's scratch file; returns its path. */
static const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hydra-fuzz", 0);
        if (fd < 0) { perror("memfd_create"); abort(); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    return path;
}

/* Every failure must leave a message (the contract of every core function). */
static void fuzz_check_message(hy_status st) {
    if (st != HY_OK && hy_errmsg()[0] == '\0') {
        fprintf(stderr, "status %d without a message\n", (int)st);
        abort();
    }
}

#endif
