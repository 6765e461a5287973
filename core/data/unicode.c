/* unicode.c: lookups into the generated Unicode tables of unitab.c (see unitab.h). */
#include "data/unitab.h"

hy_uc_class hy_uc_class_of(uint32_t cp) {
    if (cp > 0x10FFFF) return HY_UC_DROP;
    /* the rightmost range starting at or before cp */
    size_t lo = 0, hi = hy_uc_nclass_runs;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (hy_uc_class_start[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return (hy_uc_class)hy_uc_class_value[lo];
}

size_t hy_uc_lower(uint32_t cp, uint32_t out[3]) {
    for (size_t i = 0; i < hy_uc_nlower_multi; i++)
        if (hy_uc_lower_multis[i].cp == cp) {
            for (size_t k = 0; k < hy_uc_lower_multis[i].n; k++)
                out[k] = hy_uc_lower_multis[i].to[k];
            return hy_uc_lower_multis[i].n;
        }
    out[0] = cp;
    /* the rightmost range whose first <= cp */
    size_t lo = 0, hi = hy_uc_nlower_runs;
    if (hi == 0 || hy_uc_lower_runs[0].first > cp) return 1;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (hy_uc_lower_runs[mid].first <= cp) lo = mid;
        else hi = mid;
    }
    const hy_uc_lower_run *r = &hy_uc_lower_runs[lo];
    if (cp <= r->last && (cp - r->first) % r->stride == 0)
        out[0] = (uint32_t)((int64_t)cp + r->delta);
    return 1;
}

/* Hangul syllable decomposition (Unicode §3.12) */
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19,
       VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

size_t hy_uc_nfd(uint32_t cp, uint32_t out[HY_UC_NFD_MAX]) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT == 0) return 2;
        out[2] = TBASE + s % TCOUNT;
        return 3;
    }
    size_t lo = 0, hi = hy_uc_nnfd;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hy_uc_nfd_cp[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < hy_uc_nnfd && hy_uc_nfd_cp[lo] == cp) {
        size_t off = (size_t)(hy_uc_nfd_at[lo] >> 3), n = (size_t)(hy_uc_nfd_at[lo] & 7);
        for (size_t k = 0; k < n; k++) out[k] = hy_uc_nfd_pool[off + k];
        return n;
    }
    out[0] = cp;
    return 1;
}

int hy_uc_ccc(uint32_t cp) {
    size_t lo = 0, hi = hy_uc_nccc_runs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hy_uc_ccc_runs[mid].last < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < hy_uc_nccc_runs && hy_uc_ccc_runs[lo].first <= cp) return hy_uc_ccc_runs[lo].ccc;
    return 0;
}
