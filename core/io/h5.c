/* h5.c: see h5.h. HDF5 calls are wrapped so that every negative return becomes a hydra message
 * naming the object and the file, with HDF5's innermost message (H5Ewalk2) appended where the
 * cause is not already known. Every function holding hids uses one exit path (done:) and closes
 * them in reverse order. */
#define _POSIX_C_SOURCE 200809L
#include "io/h5.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t must fit hy_h5.id");

#define INVALID H5I_INVALID_HID
/* Target chunk size for compressed datasets. */
#define CHUNK_BYTES ((size_t)1 << 20)
#define DEFLATE_LEVEL 4u

/* ===== setup and error helpers ===== */

/* HDF5's automatic error printing is per thread in a thread-safe build: turn it off once for
 * every thread that uses this module. */
static void h5_init(void) {
    static _Thread_local int done;
    if (!done) {
        H5open();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

static const char *errno_text(int e);

/* What H5Ewalk2 collects: the innermost message, and the errno of a failed system call when the
 * stack holds one (the sec2 driver writes "..., errno = 5, ..." into its read/write/truncate
 * messages, next to a time stamp and buffer pointers that mean nothing to a user). */
typedef struct walk_info {
    char *buf;
    int err;
} walk_info;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    walk_info *w = data;
    if (n == 0 && e->desc) snprintf(w->buf, 200, "%s", e->desc);
    const char *s = e->desc ? strstr(e->desc, "errno = ") : NULL;
    if (s && !w->err) {
        long v = strtol(s + 8, NULL, 10);
        if (v > 0 && v < 4096) w->err = (int)v;
    }
    return 0;
}

/* The innermost message of the current HDF5 error stack ("" when empty). Call it right after the
 * failing HDF5 call: the next HDF5 call clears the stack. */
static const char *h5_detail(char buf[200]) {
    walk_info w = {buf, 0};
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
    return buf;
}

/* The cause of the current HDF5 error, ready to append to a message: ": no space left on device"
 * when the stack records a failed system call, else " (hdf5: <innermost>)", or "" when the stack
 * is empty. Same timing rule as h5_detail. */
static const char *h5_cause(char buf[220]) {
    char d[200];
    walk_info w = {d, 0};
    d[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
    if (w.err) snprintf(buf, 220, ": %s", errno_text(w.err));
    else if (d[0]) snprintf(buf, 220, " (hdf5: %s)", d);
    else buf[0] = '\0';
    return buf;
}

/* "h5: cannot <what> '<name>' in '<file>': <system error>" or "... (hdf5: <innermost>)" */
static hy_status h5_fail(const hy_h5 *f, const char *what, const char *name) {
    char c[220];
    return hy_fail(HY_EIO, "h5: cannot %s '%s' in '%s'%s", what, name, f->path, h5_cause(c));
}

static hy_status oom(void) { return hy_fail_prefix(HY_ENOMEM, "h5"); }

static hy_status need_open(const hy_h5 *f) {
    if (!f || !f->open) return hy_fail(HY_EINVAL, "h5: attempt to use a closed file");
    return HY_OK;
}

static hy_status need_writable(const hy_h5 *f, const char *name) {
    HY_TRY(need_open(f));
    if (!f->tmp)
        return hy_fail(HY_EINVAL, "h5: cannot write '%s': '%s' is open for reading", name,
                       f->path);
    return HY_OK;
}

/* ===== paths and objects ===== */

/* An owned absolute copy of name ("a/b" -> "/a/b", trailing slashes dropped, "" stays invalid). */
static hy_status abs_path(const hy_h5 *f, const char *name, char **out) {
    *out = NULL;
    if (!name || !*name) return hy_fail(HY_EINVAL, "h5: empty object name in '%s'", f->path);
    size_t n = strlen(name);
    char *p = hy_xmalloc(n + 2);
    if (!p) return oom();
    size_t k = 0;
    p[k++] = '/';
    for (const char *s = name; *s; s++)          /* collapse "//" */
        if (*s != '/' || p[k - 1] != '/') p[k++] = *s;
    while (k > 1 && p[k - 1] == '/') k--;
    p[k] = '\0';
    *out = p;
    return HY_OK;
}

/* 1 when every link along abs exists (H5Lexists fails, rather than answering 0, on a path whose
 * parent is missing, so walk it prefix by prefix). */
static int link_exists(hid_t fid, char *abs) {
    if (strcmp(abs, "/") == 0) return 1;
    for (char *s = abs + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            htri_t e = H5Lexists(fid, abs, H5P_DEFAULT);
            *s = c;
            if (e <= 0) return 0;
            if (c == '\0') return 1;
        }
    }
}

/* Kind of the object at abs, or -1 when there is none. */
static int object_kind(hid_t fid, char *abs) {
    if (!link_exists(fid, abs)) return -1;
    hid_t o = H5Oopen(fid, abs, H5P_DEFAULT);
    if (o < 0) return -1;
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    return t == H5I_GROUP ? HY_H5_GROUP : t == H5I_DATASET ? HY_H5_DATASET : HY_H5_OTHER;
}

static hid_t group_cpl(void) {
    hid_t p = H5Pcreate(H5P_GROUP_CREATE);
    if (p >= 0 && H5Pset_obj_track_times(p, 0) < 0) { H5Pclose(p); p = INVALID; }
    return p;
}

/* Creates the missing groups along abs: every proper prefix, and abs itself when include_last.
 * Fails when one of them exists and is not a group. */
static hy_status make_groups(hy_h5 *f, char *abs, int include_last) {
    hy_status st = HY_OK;
    hid_t gcpl = INVALID;
    for (char *s = abs + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        if (*s == '\0' && !include_last) break;
        char c = *s;
        *s = '\0';
        int kind = object_kind(f->id, abs);
        if (kind < 0) {
            if (gcpl < 0) gcpl = group_cpl();
            hid_t g = gcpl < 0 ? INVALID
                               : H5Gcreate2(f->id, abs, H5P_DEFAULT, gcpl, H5P_DEFAULT);
            if (g < 0) st = h5_fail(f, "create group", abs);
            else H5Gclose(g);
        } else if (kind != HY_H5_GROUP) {
            st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' is a dataset, not a group", abs, f->path);
        }
        *s = c;
        if (st != HY_OK || c == '\0') break;
    }
    if (gcpl >= 0) H5Pclose(gcpl);
    return st;
}

/* Creates the parents of abs (not abs itself). */
static hy_status make_parents(hy_h5 *f, char *abs) { return make_groups(f, abs, 0); }

/* ===== types ===== */

static hid_t mem_type(hy_dtype dt) {
    switch (dt) {
    case HY_F32: return H5T_NATIVE_FLOAT;
    case HY_F64: return H5T_NATIVE_DOUBLE;
    case HY_U8: return H5T_NATIVE_UINT8;
    case HY_I8: return H5T_NATIVE_INT8;
    case HY_I16: return H5T_NATIVE_INT16;
    case HY_I32: return H5T_NATIVE_INT32;
    case HY_I64: return H5T_NATIVE_INT64;
    default: HY_ASSERT(0);
    }
    return INVALID;
}

static hid_t file_type(hy_dtype dt) {
    switch (dt) {
    case HY_F32: return H5T_IEEE_F32LE;
    case HY_F64: return H5T_IEEE_F64LE;
    case HY_U8: return H5T_STD_U8LE;
    case HY_I8: return H5T_STD_I8LE;
    case HY_I16: return H5T_STD_I16LE;
    case HY_I32: return H5T_STD_I32LE;
    case HY_I64: return H5T_STD_I64LE;
    default: HY_ASSERT(0);
    }
    return INVALID;
}

/* Names a file type ("float32", "string", "uint32", ...) and returns its hy_dtype or -1. */
static int type_info(hid_t t, char name[16]) {
    H5T_class_t c = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    int dt = -1;
    const char *nm = "other";
    if (c == H5T_INTEGER) {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        static const char *const un[] = {"uint8", "uint16", "uint32", "uint64"};
        static const char *const sn[] = {"int8", "int16", "int32", "int64"};
        int lg = sz == 1 ? 0 : sz == 2 ? 1 : sz == 4 ? 2 : sz == 8 ? 3 : -1;
        if (lg >= 0) {
            nm = sgn ? sn[lg] : un[lg];
            static const int sd[] = {HY_I8, HY_I16, HY_I32, HY_I64};
            if (sgn) dt = sd[lg];
            else if (lg == 0) dt = HY_U8;
        }
    } else if (c == H5T_FLOAT) {
        if (sz == 4) { nm = "float32"; dt = HY_F32; }
        else if (sz == 8) { nm = "float64"; dt = HY_F64; }
        else if (sz == 2) nm = "float16";
    } else if (c == H5T_STRING) {
        nm = "string";
    } else if (c == H5T_COMPOUND) {
        nm = "compound";
    } else if (c == H5T_ENUM) {
        nm = "enum";
    }
    snprintf(name, 16, "%s", nm);
    return dt;
}

/* A variable-length string type with the given character set (caller closes it). */
static hid_t vlstr_type(H5T_cset_t cset) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return t;
    if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, cset) < 0) {
        H5Tclose(t);
        return INVALID;
    }
    return t;
}

/* Reads n strings from a dataset or attribute `src` whose file type is ftype (variable or fixed
 * length) into out[0..n) as owned copies. On failure out holds NULLs only. */
static herr_t src_read(hid_t src, int is_attr, hid_t mtype, void *buf) {
    return is_attr ? H5Aread(src, mtype, buf)
                   : H5Dread(src, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
}

static hy_status read_strs(const hy_h5 *f, const char *what, hid_t src, int is_attr, hid_t ftype,
                           size_t n, char **out) {
    hy_status st = HY_OK;
    hid_t mtype = INVALID;
    void *buf = NULL;
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    if (n == 0) return HY_OK;
    H5T_cset_t cset = H5Tget_cset(ftype);
    if (cset < 0) cset = H5T_CSET_ASCII;
    htri_t var = H5Tis_variable_str(ftype);
    if (var > 0) {
        char **p = hy_xcalloc(n, sizeof *p);
        if (!p) return oom();
        buf = p;
        mtype = vlstr_type(cset);
        if (mtype < 0 || src_read(src, is_attr, mtype, p) < 0) {
            st = h5_fail(f, "read strings of", what);
        } else {
            for (size_t i = 0; i < n && st == HY_OK; i++) {
                out[i] = hy_xstrdup(p[i] ? p[i] : "");
                if (!out[i]) st = oom();
            }
            for (size_t i = 0; i < n; i++) if (p[i]) H5free_memory(p[i]);
        }
    } else {
        size_t sz = H5Tget_size(ftype);
        if (sz == 0 || n > SIZE_MAX / (sz + 1))
            return hy_fail(HY_EIO, "h5: bad string size in '%s' of '%s'", what, f->path);
        char *p = hy_xmalloc(n * (sz + 1));
        if (!p) return oom();
        buf = p;
        mtype = H5Tcopy(H5T_C_S1);
        if (mtype < 0 || H5Tset_size(mtype, sz + 1) < 0 ||
            H5Tset_strpad(mtype, H5T_STR_NULLTERM) < 0 || H5Tset_cset(mtype, cset) < 0 ||
            src_read(src, is_attr, mtype, p) < 0) {
            st = h5_fail(f, "read strings of", what);
        } else {
            for (size_t i = 0; i < n && st == HY_OK; i++) {
                char *s = p + i * (sz + 1);
                s[sz] = '\0';
                out[i] = hy_xstrdup(s);
                if (!out[i]) st = oom();
            }
        }
    }
    if (st != HY_OK)
        for (size_t i = 0; i < n; i++) { hy_free(out[i]); out[i] = NULL; }
    if (mtype >= 0) H5Tclose(mtype);
    hy_free(buf);
    return st;
}

/* ===== files ===== */

static atomic_uint tmp_counter;

/* Files being written live in memory (the core driver, no backing store) until hy_h5_commit
 * writes their image with checked write(2) calls: HDF5 itself then never writes to the disk.
 * HDF5 1.10 cannot recover from a failed write while flushing (the metadata cache stays
 * half-flushed, every later flush or close fails, the file stays registered and the library's
 * atexit handler crashes on it), so a full disk must never reach it. Memory grows in steps of
 * CORE_INCREMENT. */
#define CORE_INCREMENT ((size_t)4 << 20)

static hid_t file_access_pl(int in_memory) {
    hid_t p = H5Pcreate(H5P_FILE_ACCESS);
    if (p < 0) return p;
    if (in_memory && H5Pset_fapl_core(p, CORE_INCREMENT, 0) < 0) { H5Pclose(p); return INVALID; }
    /* Closing the file closes every object still open in it, so commit never renames a file
     * whose metadata was not written. */
    if (H5Pset_fclose_degree(p, H5F_CLOSE_STRONG) < 0) { H5Pclose(p); return INVALID; }
#if H5_VERSION_GE(1, 10, 7) && !(H5_VERS_MINOR == 12 && H5_VERS_RELEASE == 0)
    /* Filesystems without lock support (some NFS/Lustre mounts) still work. */
    H5Pset_file_locking(p, 1, 1);
#endif
    return p;
}

/* >0 when path has an HDF5 signature, 0 when not, <0 on error. */
static htri_t is_hdf5(const char *path) {
#if H5_VERSION_GE(1, 12, 0)
    return H5Fis_accessible(path, H5P_DEFAULT);
#else
    return H5Fis_hdf5(path);
#endif
}

static const char *errno_text(int e) {
    switch (e) {
    case ENOENT: return "no such file";
    case EACCES: case EPERM: return "permission denied";
    case EISDIR: return "it is a folder";
    case ENOSPC: return "no space left on device";
    case EROFS: return "read-only file system";
    default: return strerror(e);
    }
}

hy_status hy_h5_create(hy_h5 *f, const char *path) {
    memset(f, 0, sizeof *f);
    h5_init();
    hy_status st = HY_OK;
    hid_t fcpl = INVALID, fapl = INVALID;
    char *tmp = NULL, *dir = NULL;
    if (!path || !*path) return hy_fail(HY_EINVAL, "h5: empty file name");
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return hy_fail(HY_EINVAL, "h5: cannot create '%s': not a file name", path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return hy_fail(HY_EIO, "h5: cannot create '%s': it is a folder", path);
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    dir = hy_xmalloc(dlen + 2);
    tmp = hy_xmalloc(n + 64);
    if (!dir || !tmp) { st = oom(); goto done; }
    if (slash) {
        memcpy(dir, path, dlen ? dlen : 1);     /* "/x.h5" -> "/" */
        dir[dlen ? dlen : 1] = '\0';
    } else {
        strcpy(dir, ".");
    }
    snprintf(tmp, n + 64, "%.*s.%s.tmp-%ld-%u", (int)(base - path), path, base, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1u));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            st = hy_fail(HY_EIO, "h5: cannot create '%s': folder '%s' does not exist", path, dir);
        else if (e == EACCES || e == EPERM || e == EROFS)
            st = hy_fail(HY_EIO, "h5: cannot create '%s': folder '%s' is not writable", path, dir);
        else
            st = hy_fail(HY_EIO, "h5: cannot create '%s': %s", path, errno_text(e));
        goto done;
    }
    close(fd);
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    fapl = file_access_pl(1);
    if (fcpl >= 0) H5Pset_obj_track_times(fcpl, 0);   /* the root group: no timestamps */
    hid_t id = fcpl < 0 || fapl < 0 ? INVALID : H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (id < 0) {
        char c[220];
        st = hy_fail(HY_EIO, "h5: cannot create '%s'%s", path, h5_cause(c));
        unlink(tmp);
        goto done;
    }
    f->path = hy_xstrdup(path);
    if (!f->path) {
        st = oom();
        H5Fclose(id);
        unlink(tmp);
        goto done;
    }
    f->id = id;
    f->tmp = tmp;
    f->dir = dir;
    tmp = dir = NULL;
    f->pid = (int64_t)getpid();
    f->open = 1;
done:
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    hy_free(tmp);
    hy_free(dir);
    return st;
}

static void release(hy_h5 *f) {
    hy_free(f->path);
    hy_free(f->tmp);
    hy_free(f->dir);
    memset(f, 0, sizeof *f);
}

void hy_h5_close(hy_h5 *f) {
    if (!f) return;
    if (f->open) {
        H5Fclose((hid_t)f->id);            /* in memory: no I/O */
        /* A forked child never removes its parent's temporary file. */
        if (f->tmp && f->pid == (int64_t)getpid()) unlink(f->tmp);
    }
    release(f);
}

/* Writes n bytes of buf to fd; 0 or -1 with errno set. */
static int write_all(int fd, const unsigned char *buf, size_t n) {
    while (n > 0) {
        size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, buf, k);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { errno = EIO; return -1; }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the in-memory file's image to f->tmp and syncs it. */
static hy_status write_image(hy_h5 *f) {
    char c[220];
    if (H5Fflush((hid_t)f->id, H5F_SCOPE_GLOBAL) < 0)
        return hy_fail(HY_EIO, "h5: cannot write '%s'%s", f->path, h5_cause(c));
    ssize_t n = H5Fget_file_image((hid_t)f->id, NULL, 0);
    if (n < 0) return hy_fail(HY_EIO, "h5: cannot write '%s'%s", f->path, h5_cause(c));
    unsigned char *img = hy_xmalloc(n > 0 ? (size_t)n : 1);
    if (!img) return oom();
    hy_status st = HY_OK;
    if (H5Fget_file_image((hid_t)f->id, img, (size_t)n) != n) {
        st = hy_fail(HY_EIO, "h5: cannot write '%s'%s", f->path, h5_cause(c));
    } else {
        int fd = open(f->tmp, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0 || write_all(fd, img, (size_t)n) != 0 || fsync(fd) != 0)
            st = hy_fail(HY_EIO, "h5: cannot write '%s': %s", f->path, errno_text(errno));
        if (fd >= 0 && close(fd) != 0 && st == HY_OK)
            st = hy_fail(HY_EIO, "h5: cannot write '%s': %s", f->path, errno_text(errno));
    }
    hy_free(img);
    return st;
}

hy_status hy_h5_commit(hy_h5 *f) {
    HY_TRY(need_open(f));
    if (!f->tmp)
        return hy_fail(HY_EINVAL, "h5: cannot commit '%s': it is open for reading", f->path);
    char c[220];
    hy_status st = write_image(f);
    /* An in-memory file: closing it does no I/O. */
    if (H5Fclose((hid_t)f->id) < 0 && st == HY_OK)
        st = hy_fail(HY_EIO, "h5: cannot close '%s'%s", f->path, h5_cause(c));
    f->open = 0;
    if (st == HY_OK && rename(f->tmp, f->path) != 0)
        st = hy_fail(HY_EIO, "h5: cannot rename '%s' to '%s': %s", f->tmp, f->path,
                     errno_text(errno));
    if (st == HY_OK) {
        /* Make the rename durable; best effort (some filesystems refuse fsync on folders). */
        int fd = open(f->dir, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) { (void)fsync(fd); close(fd); }
    } else {
        unlink(f->tmp);
    }
    release(f);
    return st;
}

hy_status hy_h5_open(hy_h5 *f, const char *path) {
    memset(f, 0, sizeof *f);
    h5_init();
    if (!path || !*path) return hy_fail(HY_EINVAL, "h5: empty file name");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return hy_fail(HY_EIO, "h5: cannot open '%s': no such file", path);
        return hy_fail(HY_EIO, "h5: cannot open '%s': %s", path, errno_text(e));
    }
    if (S_ISDIR(sb.st_mode)) return hy_fail(HY_EIO, "h5: cannot open '%s': it is a folder", path);
    /* a FIFO would block the open until a writer comes; a device is no HDF5 file either */
    if (!S_ISREG(sb.st_mode))
        return hy_fail(HY_EIO, "h5: cannot open '%s': it is not a regular file", path);
    if (access(path, R_OK) != 0)
        return hy_fail(HY_EIO, "h5: cannot open '%s': %s", path, errno_text(errno));
    hid_t fapl = file_access_pl(0);
    hid_t id = fapl < 0 ? INVALID : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    char d[200];
    h5_detail(d);                           /* before H5Pclose clears the error stack */
    if (fapl >= 0) H5Pclose(fapl);
    if (id < 0) {
        if (is_hdf5(path) == 0) return hy_fail(HY_EIO, "h5: '%s' is not an HDF5 file", path);
        return hy_fail(HY_EIO, "h5: cannot open '%s' (hdf5: %s)", path, d);
    }
    f->path = hy_xstrdup(path);
    if (!f->path) { H5Fclose(id); return oom(); }
    f->id = id;
    f->open = 1;
    return HY_OK;
}

int hy_h5_is_file(const char *path) {
    h5_init();
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || access(path, R_OK) != 0)
        return 0;
    return is_hdf5(path) > 0;
}

/* ===== numeric datasets ===== */

/* Chunk shape of about CHUNK_BYTES: whole trailing dims while they fit, then part of one dim. */
static void chunk_shape(int ndim, const int64_t *shape, size_t es, hsize_t *chunk) {
    size_t acc = es;
    for (int i = ndim - 1; i >= 0; i--) {
        size_t d = (size_t)shape[i];
        if (acc * d <= CHUNK_BYTES) {
            chunk[i] = (hsize_t)d;
            acc *= d;
        } else {
            size_t k = CHUNK_BYTES / acc;
            chunk[i] = (hsize_t)(k < 1 ? 1 : k);
            for (int j = 0; j < i; j++) chunk[j] = 1;
            return;
        }
    }
}

/* Creates dataset abs (parents made) with file type ftype and the given extent; *dset open. */
static hy_status create_dataset(hy_h5 *f, const char *name, char *abs, hid_t ftype, int ndim,
                                const int64_t *shape, size_t es, hid_t *dset) {
    hy_status st = HY_OK;
    hid_t space = INVALID, dcpl = INVALID;
    hsize_t dims[HY_MAXDIM], chunk[HY_MAXDIM];
    *dset = INVALID;
    if (object_kind(f->id, abs) >= 0)
        return hy_fail(HY_EINVAL, "h5: '%s' already exists in '%s'", name, f->path);
    HY_TRY(make_parents(f, abs));
    size_t nbytes = es;
    for (int i = 0; i < ndim; i++) {
        dims[i] = (hsize_t)shape[i];
        nbytes *= (size_t)shape[i];
    }
    space = ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndim, dims, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
        st = h5_fail(f, "create dataset", name);
        goto done;
    }
    if (ndim > 0 && nbytes > HY_H5_COMPRESS_BYTES && H5Tget_class(ftype) != H5T_STRING &&
        H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
        chunk_shape(ndim, shape, es, chunk);
        if (H5Pset_chunk(dcpl, ndim, chunk) < 0 || H5Pset_shuffle(dcpl) < 0 ||
            H5Pset_deflate(dcpl, DEFLATE_LEVEL) < 0) {
            st = h5_fail(f, "set compression of", name);
            goto done;
        }
    }
    *dset = H5Dcreate2(f->id, abs, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (*dset < 0) st = h5_fail(f, "create dataset", name);
done:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    return st;
}

static hy_status check_shape_arg(const hy_h5 *f, const char *name, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > HY_MAXDIM)
        return hy_fail(HY_EINVAL, "h5: '%s' in '%s': %d dims (at most %d)", name, f->path, ndim,
                       HY_MAXDIM);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return hy_fail(HY_EINVAL, "h5: '%s' in '%s': dim %d has negative size %lld", name,
                           f->path, i + 1, (long long)shape[i]);
    return HY_OK;
}

hy_status hy_h5_write_data(hy_h5 *f, const char *name, hy_dtype dt, int ndim,
                           const int64_t *shape, const void *data) {
    HY_TRY(need_writable(f, name));
    HY_TRY(check_shape_arg(f, name, ndim, shape));
    if ((int)dt < 0 || dt >= HY_NDTYPES)
        return hy_fail(HY_EINVAL, "h5: '%s' in '%s': bad dtype %d", name, f->path, (int)dt);
    char *abs = NULL;
    HY_TRY(abs_path(f, name, &abs));
    hid_t dset = INVALID;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    hy_status st = create_dataset(f, name, abs, file_type(dt), ndim, shape, hy_dtype_size(dt),
                                  &dset);
    if (st == HY_OK && numel > 0 &&
        H5Dwrite(dset, mem_type(dt), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = h5_fail(f, "write", name);
    if (dset >= 0) H5Dclose(dset);
    hy_free(abs);
    return st;
}

hy_status hy_h5_write(hy_h5 *f, const char *name, const hy_tensor *t) {
    return hy_h5_write_data(f, name, t->dtype, t->ndim, t->shape, t->data);
}

/* Opens dataset `name` with clean messages for a missing name or a group. */
static hy_status open_dataset(hy_h5 *f, const char *name, hid_t *dset) {
    *dset = INVALID;
    HY_TRY(need_open(f));
    char *abs = NULL;
    HY_TRY(abs_path(f, name, &abs));
    hy_status st = HY_OK;
    int kind = object_kind(f->id, abs);
    if (kind < 0) st = hy_fail(HY_EIO, "h5: no dataset '%s' in '%s'", name, f->path);
    else if (kind != HY_H5_DATASET)
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' is a group, not a dataset", name, f->path);
    else if ((*dset = H5Dopen2(f->id, abs, H5P_DEFAULT)) < 0)
        st = h5_fail(f, "open dataset", name);
    hy_free(abs);
    return st;
}

/* Extent of a dataset's simple or scalar dataspace. */
static hy_status dataset_extent(const hy_h5 *f, const char *name, hid_t dset, int *ndim,
                                int64_t *shape) {
    hid_t space = H5Dget_space(dset);
    hy_status st = HY_OK;
    hsize_t dims[H5S_MAX_RANK];
    int nd = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (nd < 0) st = h5_fail(f, "get the shape of", name);
    else if (H5Sget_simple_extent_type(space) == H5S_NULL)
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has an empty (null) dataspace", name, f->path);
    else if (nd > HY_MAXDIM)
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has %d dims (hydra reads at most %d)", name,
                     f->path, nd, HY_MAXDIM);
    else if (H5Sget_simple_extent_dims(space, dims, NULL) < 0)
        st = h5_fail(f, "get the shape of", name);
    else {
        *ndim = nd;
        for (int i = 0; i < nd; i++) shape[i] = (int64_t)dims[i];
    }
    if (space >= 0) H5Sclose(space);
    return st;
}

/* want < 0: the file's dtype. buf != NULL: read into buf after checking shape (read_into);
 * else allocate out. */
static hy_status read_numeric(hy_h5 *f, const char *name, int want, int ndim,
                              const int64_t *shape, void *buf, hy_tensor *out) {
    hy_status st;
    hid_t dset = INVALID, ftype = INVALID;
    int fnd = 0;
    int64_t fshape[HY_MAXDIM];
    char tname[16];
    if (out) memset(out, 0, sizeof *out);
    if (want >= HY_NDTYPES) return hy_fail(HY_EINVAL, "h5: bad dtype %d", want);
    st = open_dataset(f, name, &dset);
    if (st != HY_OK) goto done;
    ftype = H5Dget_type(dset);
    if (ftype < 0) { st = h5_fail(f, "get the type of", name); goto done; }
    int fdt = type_info(ftype, tname);
    H5T_class_t cls = H5Tget_class(ftype);
    if (cls == H5T_STRING) {
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' holds strings, not numbers", name, f->path);
        goto done;
    }
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has type %s, not numbers", name, f->path, tname);
        goto done;
    }
    if (want < 0 && fdt < 0) {
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has type %s, which has no hydra dtype (read it "
                     "converted to one)", name, f->path, tname);
        goto done;
    }
    hy_dtype dt = (hy_dtype)(want < 0 ? fdt : want);
    st = dataset_extent(f, name, dset, &fnd, fshape);
    if (st != HY_OK) goto done;
    if (buf) {
        int same = fnd == ndim;
        for (int i = 0; same && i < ndim; i++) same = fshape[i] == shape[i];
        if (!same) {
            char a[128], b[128];
            st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has shape %s, expected %s", name, f->path,
                         hy_shape_str(a, sizeof a, fnd, fshape),
                         hy_shape_str(b, sizeof b, ndim, shape));
            goto done;
        }
    } else {
        st = hy_tensor_alloc(out, dt, fnd, fshape);
        if (st != HY_OK) { hy_fail_prefix(st, "h5: '%s' in '%s'", name, f->path); goto done; }
        buf = out->data;
    }
    size_t numel = 1;
    for (int i = 0; i < fnd; i++) numel *= (size_t)fshape[i];
    if (numel > 0 && H5Dread(dset, mem_type(dt), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        st = h5_fail(f, "read", name);
done:
    if (st != HY_OK && out) hy_tensor_release(out);
    if (ftype >= 0) H5Tclose(ftype);
    if (dset >= 0) H5Dclose(dset);
    return st;
}

hy_status hy_h5_read(hy_h5 *f, const char *name, hy_tensor *out) {
    return read_numeric(f, name, -1, 0, NULL, NULL, out);
}

hy_status hy_h5_read_as(hy_h5 *f, const char *name, hy_dtype dt, hy_tensor *out) {
    return read_numeric(f, name, (int)dt, 0, NULL, NULL, out);
}

hy_status hy_h5_read_into(hy_h5 *f, const char *name, hy_dtype dt, int ndim,
                          const int64_t *shape, void *buf) {
    HY_ASSERT(buf != NULL && ndim >= 0 && ndim <= HY_MAXDIM);
    return read_numeric(f, name, (int)dt, ndim, shape, buf, NULL);
}

/* ===== strings ===== */

static hy_status write_strs(hy_h5 *f, const char *name, int scalar, const char *const *s,
                            size_t n) {
    HY_TRY(need_writable(f, name));
    char *abs = NULL;
    HY_TRY(abs_path(f, name, &abs));
    for (size_t i = 0; i < n; i++)
        if (!s[i]) {
            hy_free(abs);
            return hy_fail(HY_EINVAL, "h5: string %zu of '%s' is NULL", i + 1, name);
        }
    hid_t dset = INVALID, t = vlstr_type(H5T_CSET_UTF8);
    int64_t shape[1] = {(int64_t)n};
    hy_status st = t < 0 ? h5_fail(f, "create dataset", name)
                         : create_dataset(f, name, abs, t, scalar ? 0 : 1, shape, sizeof(char *),
                                          &dset);
    if (st == HY_OK && n > 0 && H5Dwrite(dset, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0)
        st = h5_fail(f, "write", name);
    if (dset >= 0) H5Dclose(dset);
    if (t >= 0) H5Tclose(t);
    hy_free(abs);
    return st;
}

hy_status hy_h5_write_string(hy_h5 *f, const char *name, const char *s) {
    const char *one[1] = {s};
    return write_strs(f, name, 1, one, 1);
}

hy_status hy_h5_write_strings(hy_h5 *f, const char *name, const char *const *s, size_t n) {
    return write_strs(f, name, 0, s, n);
}

/* Reads a string dataset: want_scalar 1 needs a scalar (or 1-element) dataset, 0 a 1-d array. */
static hy_status read_str_dataset(hy_h5 *f, const char *name, int want_scalar, char ***out,
                                  size_t *n) {
    hid_t dset = INVALID, ftype = INVALID;
    int nd = 0;
    int64_t shape[HY_MAXDIM];
    char **v = NULL;
    size_t count = 0;
    *out = NULL;
    *n = 0;
    hy_status st = open_dataset(f, name, &dset);
    if (st != HY_OK) goto done;
    ftype = H5Dget_type(dset);
    if (ftype < 0) { st = h5_fail(f, "get the type of", name); goto done; }
    if (H5Tget_class(ftype) != H5T_STRING) {
        char tname[16];
        type_info(ftype, tname);
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has type %s, not string", name, f->path, tname);
        goto done;
    }
    st = dataset_extent(f, name, dset, &nd, shape);
    if (st != HY_OK) goto done;
    count = 1;
    for (int i = 0; i < nd; i++) count *= (size_t)shape[i];
    if (want_scalar ? count != 1 : nd != 1) {
        char a[128];
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has shape %s, expected %s", name, f->path,
                     hy_shape_str(a, sizeof a, nd, shape), want_scalar ? "a single string"
                                                                       : "a 1-d string array");
        goto done;
    }
    v = hy_xcalloc(count ? count : 1, sizeof *v);
    if (!v) { st = oom(); goto done; }
    st = read_strs(f, name, dset, 0, ftype, count, v);
    if (st == HY_OK) {
        *out = v;
        *n = count;
        v = NULL;
    }
done:
    hy_free(v);
    if (ftype >= 0) H5Tclose(ftype);
    if (dset >= 0) H5Dclose(dset);
    return st;
}

hy_status hy_h5_read_string(hy_h5 *f, const char *name, char **out) {
    char **v = NULL;
    size_t n = 0;
    *out = NULL;
    HY_TRY(read_str_dataset(f, name, 1, &v, &n));
    *out = v[0];
    hy_free(v);
    return HY_OK;
}

hy_status hy_h5_read_strings(hy_h5 *f, const char *name, char ***out, size_t *n) {
    return read_str_dataset(f, name, 0, out, n);
}

void hy_h5_strings_free(char **s, size_t n) {
    if (!s) return;
    for (size_t i = 0; i < n; i++) hy_free(s[i]);
    hy_free(s);
}

/* ===== attributes ===== */

/* Opens object obj; with create (a file being written), a missing obj becomes a group. */
static hy_status open_object(hy_h5 *f, const char *obj, int create, hid_t *oid) {
    *oid = INVALID;
    char *abs = NULL;
    HY_TRY(abs_path(f, obj, &abs));
    hy_status st = HY_OK;
    if (object_kind(f->id, abs) < 0) {
        if (create) st = make_groups(f, abs, 1);
        else st = hy_fail(HY_EIO, "h5: no object '%s' in '%s'", obj, f->path);
    }
    if (st == HY_OK && (*oid = H5Oopen(f->id, abs, H5P_DEFAULT)) < 0)
        st = h5_fail(f, "open object", obj);
    hy_free(abs);
    return st;
}

static hy_status attr_fail(const hy_h5 *f, const char *what, const char *obj, const char *key) {
    char d[200];
    h5_detail(d);
    return hy_fail(HY_EIO, "h5: cannot %s attribute '%s' on '%s' in '%s'%s%s%s", what, key, obj,
                   f->path, d[0] ? " (hdf5: " : "", d, d[0] ? ")" : "");
}

/* Writes attribute key on obj (replacing one of that name); n < 0 means a scalar. */
static hy_status set_attr(hy_h5 *f, const char *obj, const char *key, hid_t ftype, hid_t mtype,
                          int64_t n, const void *buf) {
    HY_TRY(need_writable(f, obj));
    if (!key || !*key)
        return hy_fail(HY_EINVAL, "h5: empty attribute name on '%s' in '%s'", obj, f->path);
    hid_t oid = INVALID, space = INVALID, aid = INVALID;
    hy_status st = open_object(f, obj, 1, &oid);
    if (st != HY_OK) goto done;
    hsize_t dims[1] = {(hsize_t)(n < 0 ? 0 : n)};
    space = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, NULL);
    if (space < 0) { st = attr_fail(f, "set", obj, key); goto done; }
    htri_t ex = H5Aexists(oid, key);
    if (ex < 0 || (ex > 0 && H5Adelete(oid, key) < 0)) {
        st = attr_fail(f, "replace", obj, key);
        goto done;
    }
    aid = H5Acreate2(oid, key, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (aid < 0 || (n != 0 && H5Awrite(aid, mtype, buf) < 0)) st = attr_fail(f, "set", obj, key);
done:
    if (aid >= 0) H5Aclose(aid);
    if (space >= 0) H5Sclose(space);
    if (oid >= 0) H5Oclose(oid);
    return st;
}

hy_status hy_h5_set_attr_str(hy_h5 *f, const char *obj, const char *key, const char *value) {
    hid_t t = vlstr_type(H5T_CSET_UTF8);
    if (t < 0) return hy_fail(HY_EIO, "h5: cannot make a string type");
    const char *one[1] = {value};
    hy_status st = set_attr(f, obj, key, t, t, -1, one);
    H5Tclose(t);
    return st;
}

hy_status hy_h5_set_attr_f64(hy_h5 *f, const char *obj, const char *key, double value) {
    return set_attr(f, obj, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, -1, &value);
}

hy_status hy_h5_set_attr_i64(hy_h5 *f, const char *obj, const char *key, int64_t value) {
    return set_attr(f, obj, key, H5T_STD_I64LE, H5T_NATIVE_INT64, -1, &value);
}

hy_status hy_h5_set_attr_f64s(hy_h5 *f, const char *obj, const char *key, const double *v,
                              size_t n) {
    return set_attr(f, obj, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, (int64_t)n, v);
}

hy_status hy_h5_set_attr_i64s(hy_h5 *f, const char *obj, const char *key, const int64_t *v,
                              size_t n) {
    return set_attr(f, obj, key, H5T_STD_I64LE, H5T_NATIVE_INT64, (int64_t)n, v);
}

void hy_h5_attr_free(hy_h5_attr *a) {
    if (!a) return;
    hy_free(a->key);
    hy_h5_strings_free(a->strs, a->strs ? a->n : 0);
    hy_free(a->i64);
    hy_free(a->f64);
    memset(a, 0, sizeof *a);
}

/* Reads the open attribute aid (named key, on obj) into out. */
static hy_status read_attr(const hy_h5 *f, const char *obj, const char *key, hid_t aid,
                           hy_h5_attr *out) {
    hy_status st = HY_OK;
    hid_t space = INVALID, ftype = INVALID;
    memset(out, 0, sizeof *out);
    out->key = hy_xstrdup(key);
    if (!out->key) return oom();
    space = H5Aget_space(aid);
    ftype = H5Aget_type(aid);
    hssize_t np = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    int nd = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (np < 0 || nd < 0 || ftype < 0) { st = attr_fail(f, "read", obj, key); goto done; }
    out->n = (size_t)np;
    out->is_array = nd > 0;
    H5T_class_t cls = H5Tget_class(ftype);
    size_t n = out->n;
    if (cls == H5T_INTEGER) {
        out->type = HY_H5_ATTR_I64;
        out->i64 = hy_xcalloc(n ? n : 1, sizeof *out->i64);
        if (!out->i64) { st = oom(); goto done; }
        if (n && H5Aread(aid, H5T_NATIVE_INT64, out->i64) < 0) st = attr_fail(f, "read", obj, key);
    } else if (cls == H5T_FLOAT) {
        out->type = HY_H5_ATTR_F64;
        out->f64 = hy_xcalloc(n ? n : 1, sizeof *out->f64);
        if (!out->f64) { st = oom(); goto done; }
        if (n && H5Aread(aid, H5T_NATIVE_DOUBLE, out->f64) < 0) st = attr_fail(f, "read", obj, key);
    } else if (cls == H5T_STRING) {
        out->type = HY_H5_ATTR_STR;
        out->strs = hy_xcalloc(n ? n : 1, sizeof *out->strs);
        if (!out->strs) { st = oom(); goto done; }
        st = read_strs(f, key, aid, 1, ftype, n, out->strs);
    } else {
        out->type = HY_H5_ATTR_OTHER;
    }
done:
    if (st != HY_OK) hy_h5_attr_free(out);
    if (ftype >= 0) H5Tclose(ftype);
    if (space >= 0) H5Sclose(space);
    return st;
}

hy_status hy_h5_get_attr(hy_h5 *f, const char *obj, const char *key, hy_h5_attr *out) {
    memset(out, 0, sizeof *out);
    HY_TRY(need_open(f));
    hid_t oid = INVALID, aid = INVALID;
    hy_status st = open_object(f, obj, 0, &oid);
    if (st != HY_OK) goto done;
    htri_t ex = H5Aexists(oid, key);
    if (ex == 0) {
        st = hy_fail(HY_EIO, "h5: no attribute '%s' on '%s' in '%s'", key, obj, f->path);
        goto done;
    }
    if (ex < 0 || (aid = H5Aopen(oid, key, H5P_DEFAULT)) < 0) {
        st = attr_fail(f, "open", obj, key);
        goto done;
    }
    st = read_attr(f, obj, key, aid, out);
done:
    if (aid >= 0) H5Aclose(aid);
    if (oid >= 0) H5Oclose(oid);
    return st;
}

static const char *atype_name(const hy_h5_attr *a) {
    static const char *const names[] = {"a string", "an integer", "a number", "of another type"};
    return names[a->type];
}

/* Gets attribute key as numbers (want_int: int64, else double); scalar: exactly one value. */
static hy_status get_attr_nums(hy_h5 *f, const char *obj, const char *key, int want_int,
                               int scalar, void **vals, size_t *n) {
    hy_h5_attr a;
    *vals = NULL;
    *n = 0;
    HY_TRY(hy_h5_get_attr(f, obj, key, &a));
    hy_status st = HY_OK;
    if (a.type != HY_H5_ATTR_I64 && a.type != HY_H5_ATTR_F64) {
        st = hy_fail(HY_EINVAL, "h5: attribute '%s' on '%s' in '%s' is %s, not a number", key, obj,
                     f->path, atype_name(&a));
    } else if (scalar && a.n != 1) {
        st = hy_fail(HY_EINVAL, "h5: attribute '%s' on '%s' in '%s' has %zu values, expected 1",
                     key, obj, f->path, a.n);
    } else if (want_int && a.type == HY_H5_ATTR_F64) {
        int64_t *v = hy_xcalloc(a.n ? a.n : 1, sizeof *v);
        if (!v) st = oom();
        for (size_t i = 0; v && i < a.n && st == HY_OK; i++) {
            double x = a.f64[i];
            /* 2^63 is exactly representable; every double below it converts exactly. */
            if (!(x == floor(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0))
                st = hy_fail(HY_EINVAL, "h5: attribute '%s' on '%s' in '%s' is %.17g, not an "
                             "integer", key, obj, f->path, x);
            else v[i] = (int64_t)x;
        }
        if (st == HY_OK) { *vals = v; *n = a.n; }
        else hy_free(v);
    } else if (!want_int && a.type == HY_H5_ATTR_I64) {
        double *v = hy_xcalloc(a.n ? a.n : 1, sizeof *v);
        if (!v) st = oom();
        for (size_t i = 0; v && i < a.n; i++) v[i] = (double)a.i64[i];
        if (v) { *vals = v; *n = a.n; }
    } else if (want_int) {
        *vals = a.i64;
        *n = a.n;
        a.i64 = NULL;
    } else {
        *vals = a.f64;
        *n = a.n;
        a.f64 = NULL;
    }
    hy_h5_attr_free(&a);
    return st;
}

hy_status hy_h5_get_attr_f64(hy_h5 *f, const char *obj, const char *key, double *out) {
    void *v;
    size_t n;
    HY_TRY(get_attr_nums(f, obj, key, 0, 1, &v, &n));
    *out = ((double *)v)[0];
    hy_free(v);
    return HY_OK;
}

hy_status hy_h5_get_attr_i64(hy_h5 *f, const char *obj, const char *key, int64_t *out) {
    void *v;
    size_t n;
    HY_TRY(get_attr_nums(f, obj, key, 1, 1, &v, &n));
    *out = ((int64_t *)v)[0];
    hy_free(v);
    return HY_OK;
}

hy_status hy_h5_get_attr_f64s(hy_h5 *f, const char *obj, const char *key, double **out,
                              size_t *n) {
    void *v;
    HY_TRY(get_attr_nums(f, obj, key, 0, 0, &v, n));
    if (*n == 0) { hy_free(v); v = NULL; }
    *out = v;
    return HY_OK;
}

hy_status hy_h5_get_attr_i64s(hy_h5 *f, const char *obj, const char *key, int64_t **out,
                              size_t *n) {
    void *v;
    HY_TRY(get_attr_nums(f, obj, key, 1, 0, &v, n));
    if (*n == 0) { hy_free(v); v = NULL; }
    *out = v;
    return HY_OK;
}

hy_status hy_h5_get_attr_str(hy_h5 *f, const char *obj, const char *key, char **out) {
    hy_h5_attr a;
    *out = NULL;
    HY_TRY(hy_h5_get_attr(f, obj, key, &a));
    hy_status st = HY_OK;
    if (a.type != HY_H5_ATTR_STR)
        st = hy_fail(HY_EINVAL, "h5: attribute '%s' on '%s' in '%s' is %s, not a string", key, obj,
                     f->path, atype_name(&a));
    else if (a.n != 1)
        st = hy_fail(HY_EINVAL, "h5: attribute '%s' on '%s' in '%s' has %zu strings, expected 1",
                     key, obj, f->path, a.n);
    else {
        *out = a.strs[0];
        a.strs[0] = NULL;
    }
    hy_h5_attr_free(&a);
    return st;
}

int hy_h5_attr_exists(hy_h5 *f, const char *obj, const char *key) {
    if (!f || !f->open || !key || !obj || !*obj) return 0;
    char *abs = NULL;
    if (abs_path(f, obj, &abs) != HY_OK) return -1;   /* out of memory: cannot tell */
    int r = 0;
    if (object_kind(f->id, abs) >= 0) {
        hid_t oid = H5Oopen(f->id, abs, H5P_DEFAULT);
        if (oid >= 0) {
            r = H5Aexists(oid, key) > 0;
            H5Oclose(oid);
        }
    }
    hy_free(abs);
    return r;
}

/* ===== inspection ===== */

int hy_h5_exists(hy_h5 *f, const char *name) {
    if (!f || !f->open || !name || !*name) return 0;
    char *abs = NULL;
    if (abs_path(f, name, &abs) != HY_OK) return -1;  /* out of memory: cannot tell */
    int r = object_kind(f->id, abs) >= 0;
    hy_free(abs);
    return r;
}

void hy_h5_entry_free(hy_h5_entry *e) {
    if (!e) return;
    hy_free(e->name);
    hy_free(e->path);
    memset(e, 0, sizeof *e);
}

/* Describes the object at abs (which exists). */
static hy_status stat_abs(hy_h5 *f, const char *name, const char *abs, hy_h5_entry *out) {
    memset(out, 0, sizeof *out);
    out->dtype = -1;
    const char *base = strrchr(abs, '/');
    base = base[1] ? base + 1 : base;
    out->name = hy_xstrdup(base);
    out->path = hy_xstrdup(abs);
    if (!out->name || !out->path) { hy_h5_entry_free(out); return oom(); }
    hid_t o = H5Oopen(f->id, abs, H5P_DEFAULT);
    if (o < 0) { hy_status st = h5_fail(f, "open object", name); hy_h5_entry_free(out); return st; }
    hy_status st = HY_OK;
    H5I_type_t t = H5Iget_type(o);
    if (t == H5I_GROUP) {
        out->kind = HY_H5_GROUP;
    } else if (t == H5I_DATASET) {
        out->kind = HY_H5_DATASET;
        hid_t ftype = H5Dget_type(o);
        if (ftype < 0) st = h5_fail(f, "get the type of", name);
        else {
            out->dtype = type_info(ftype, out->type);
            H5Tclose(ftype);
            st = dataset_extent(f, name, o, &out->ndim, out->shape);
        }
    } else {
        out->kind = HY_H5_OTHER;
        snprintf(out->type, sizeof out->type, "other");
    }
    H5Oclose(o);
    if (st != HY_OK) hy_h5_entry_free(out);
    return st;
}

hy_status hy_h5_stat(hy_h5 *f, const char *name, hy_h5_entry *out) {
    memset(out, 0, sizeof *out);
    HY_TRY(need_open(f));
    char *abs = NULL;
    HY_TRY(abs_path(f, name, &abs));
    hy_status st = object_kind(f->id, abs) < 0
                       ? hy_fail(HY_EIO, "h5: no object '%s' in '%s'", name, f->path)
                       : stat_abs(f, name, abs, out);
    hy_free(abs);
    return st;
}

hy_status hy_h5_shape(hy_h5 *f, const char *name, hy_dtype *dtype, int *ndim, int64_t *shape) {
    hy_h5_entry e;
    HY_TRY(hy_h5_stat(f, name, &e));
    hy_status st = HY_OK;
    if (e.kind != HY_H5_DATASET)
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' is a group, not a dataset", name, f->path);
    else if (e.dtype < 0)
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' has type %s, which has no hydra dtype", name,
                     f->path, e.type);
    else {
        *dtype = (hy_dtype)e.dtype;
        *ndim = e.ndim;
        memcpy(shape, e.shape, sizeof(int64_t) * (size_t)e.ndim);
    }
    hy_h5_entry_free(&e);
    return st;
}

typedef struct names {
    char **v;
    size_t n, cap;
    int oom;
} names;

static int names_add(names *nm, const char *s) {
    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? 2 * nm->cap : 16;
        char **v = hy_xrealloc(nm->v, cap * sizeof *v);
        if (!v) { nm->oom = 1; return -1; }
        nm->v = v;
        nm->cap = cap;
    }
    if (!(nm->v[nm->n] = hy_xstrdup(s))) { nm->oom = 1; return -1; }
    nm->n++;
    return 0;
}

static herr_t link_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
    (void)g;
    (void)info;
    return names_add(data, name) < 0 ? -1 : 0;
}

static herr_t attr_cb(hid_t o, const char *name, const H5A_info_t *info, void *data) {
    (void)o;
    (void)info;
    return names_add(data, name) < 0 ? -1 : 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

hy_status hy_h5_list(hy_h5 *f, const char *group, hy_h5_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    HY_TRY(need_open(f));
    char *abs = NULL;
    HY_TRY(abs_path(f, group, &abs));
    hy_status st = HY_OK;
    names nm = {0};
    hid_t g = INVALID;
    hy_h5_entry *ents = NULL;
    char *child = NULL;
    int kind = object_kind(f->id, abs);
    if (kind < 0) { st = hy_fail(HY_EIO, "h5: no group '%s' in '%s'", group, f->path); goto done; }
    if (kind != HY_H5_GROUP) {
        st = hy_fail(HY_EINVAL, "h5: '%s' in '%s' is a dataset, not a group", group, f->path);
        goto done;
    }
    g = H5Gopen2(f->id, abs, H5P_DEFAULT);
    hsize_t idx = 0;
    if (g < 0 || H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, link_cb, &nm) < 0) {
        st = nm.oom ? oom() : h5_fail(f, "list group", group);
        goto done;
    }
    if (nm.n) qsort(nm.v, nm.n, sizeof *nm.v, cmp_str);
    ents = hy_xcalloc(nm.n ? nm.n : 1, sizeof *ents);
    size_t alen = strlen(abs), maxn = 0;
    for (size_t i = 0; i < nm.n; i++) if (strlen(nm.v[i]) > maxn) maxn = strlen(nm.v[i]);
    child = hy_xmalloc(alen + maxn + 2);
    if (!ents || !child) { st = oom(); goto done; }
    size_t k = 0;
    for (; k < nm.n && st == HY_OK; k++) {
        snprintf(child, alen + maxn + 2, "%s/%s", strcmp(abs, "/") == 0 ? "" : abs, nm.v[k]);
        st = stat_abs(f, child, child, &ents[k]);
    }
    if (st == HY_OK) {
        *out = ents;
        *n = nm.n;
        ents = NULL;
    } else {
        hy_h5_list_free(ents, k);
        ents = NULL;
    }
done:
    hy_free(child);
    hy_free(ents);
    if (g >= 0) H5Gclose(g);
    for (size_t i = 0; i < nm.n; i++) hy_free(nm.v[i]);
    hy_free(nm.v);
    hy_free(abs);
    return st;
}

void hy_h5_list_free(hy_h5_entry *e, size_t n) {
    if (!e) return;
    for (size_t i = 0; i < n; i++) hy_h5_entry_free(&e[i]);
    hy_free(e);
}

hy_status hy_h5_attrs(hy_h5 *f, const char *obj, hy_h5_attr **out, size_t *n) {
    *out = NULL;
    *n = 0;
    HY_TRY(need_open(f));
    hid_t oid = INVALID;
    names nm = {0};
    hy_h5_attr *as = NULL;
    size_t k = 0;
    hy_status st = open_object(f, obj, 0, &oid);
    if (st != HY_OK) goto done;
    hsize_t idx = 0;
    if (H5Aiterate2(oid, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &nm) < 0) {
        st = nm.oom ? oom() : h5_fail(f, "list the attributes of", obj);
        goto done;
    }
    if (nm.n) qsort(nm.v, nm.n, sizeof *nm.v, cmp_str);
    as = hy_xcalloc(nm.n ? nm.n : 1, sizeof *as);
    if (!as) { st = oom(); goto done; }
    for (; k < nm.n && st == HY_OK; k++) {
        hid_t aid = H5Aopen(oid, nm.v[k], H5P_DEFAULT);
        if (aid < 0) { st = attr_fail(f, "open", obj, nm.v[k]); break; }
        st = read_attr(f, obj, nm.v[k], aid, &as[k]);
        H5Aclose(aid);
    }
    if (st == HY_OK) {
        *out = as;
        *n = nm.n;
        as = NULL;
    }
done:
    if (as) hy_h5_attrs_free(as, k);
    if (oid >= 0) H5Oclose(oid);
    for (size_t i = 0; i < nm.n; i++) hy_free(nm.v[i]);
    hy_free(nm.v);
    return st;
}

void hy_h5_attrs_free(hy_h5_attr *a, size_t n) {
    if (!a) return;
    for (size_t i = 0; i < n; i++) hy_h5_attr_free(&a[i]);
    hy_free(a);
}
