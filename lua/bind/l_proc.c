/* l_proc.c: process and file-system helpers (POSIX, no core module) for the stage cache, runs
 * and scripts: folders, file status, flock locks, process liveness, sleeping, names.
 *   core.listdir(path) -> sorted array of names (without . and ..); raises on error
 *   core.stat(path) -> "file" | "dir" | "other", size, mtime, dev, ino   or nil when it does not
 *                                  exist (follows links; the same dev and ino = the same file)
 *   core.mkdir_p(path)           creates path and its parents (like mkdir -p); raises on error
 *   core.getpid() -> integer     core.isatty(fd) -> boolean (fd 0, 1 or 2)
 *   core.flock_open(path, text) -> lock, old | false, why   opens (creating) path, takes an
 *                                  exclusive flock(2) without blocking, then replaces its content
 *                                  (returned as old, at most 256 bytes) by text; false with "busy" (another open file holds it),
 *                                  "moved" (path was removed or replaced meanwhile: try again) or
 *                                  the system's message. The lock is held while the returned
 *                                  object lives: lock:close() (also __close, __gc) releases it;
 *                                  the kernel releases it when the process dies. The descriptor
 *                                  is close-on-exec, so spawned workers never inherit it.
 *   core.pid_alive(pid)          -> boolean             kill(pid, 0): true unless ESRCH
 *   core.sleep(seconds)                                 nanosleep (0 <= seconds <= 3600)
 *   core.hostname()              -> string
 *   core.getcwd()                -> string              the current folder (getcwd(3)) */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "bind.h"

#define L_DIR "hydra.Dir"

/* An open directory stream, boxed so that an error while listing closes it. */
typedef struct l_dir {
    DIR *d;
} l_dir;

static int l_dir_gc(lua_State *L) {
    l_dir *u = luaL_checkudata(L, 1, L_DIR);
    if (u->d) closedir(u->d);
    u->d = NULL;
    return 0;
}

static int l_listdir(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    l_dir *u = lua_newuserdatauv(L, sizeof *u, 0);   /* box first: GC closes the stream */
    u->d = NULL;
    luaL_setmetatable(L, L_DIR);
    u->d = opendir(path);
    if (!u->d) return luaL_error(L, "cannot list '%s': %s", path, strerror(errno));
    lua_newtable(L);
    lua_Integer n = 0;
    struct dirent *e;
    while ((e = readdir(u->d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(u->d);
    u->d = NULL;
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    return 1;
}

static int l_stat(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    struct stat sb;
    if (stat(path, &sb) != 0) { lua_pushnil(L); return 1; }
    lua_pushstring(L, S_ISREG(sb.st_mode) ? "file" : S_ISDIR(sb.st_mode) ? "dir" : "other");
    lua_pushinteger(L, (lua_Integer)sb.st_size);
    lua_pushinteger(L, (lua_Integer)sb.st_mtime);
    lua_pushinteger(L, (lua_Integer)sb.st_dev);
    lua_pushinteger(L, (lua_Integer)sb.st_ino);
    return 5;
}

static int l_mkdir_p(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    char buf[4096];
    size_t n = strlen(path);
    luaL_argcheck(L, n > 0 && n < sizeof buf, 1, "path empty or too long");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return luaL_error(L, "cannot create folder '%s': %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    return 0;
}

static int l_getpid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int l_isatty(lua_State *L) {
    lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
    return 1;
}

#define L_LOCK "hydra.Lock"

/* A held flock: the open descriptor (-1 once released). */
typedef struct l_lock {
    int fd;
} l_lock;

static int l_lock_close(lua_State *L) {
    l_lock *u = luaL_checkudata(L, 1, L_LOCK);
    if (u->fd >= 0) close(u->fd);   /* closing the last descriptor drops the flock */
    u->fd = -1;
    return 0;
}

static int l_flock_open(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *text = luaL_checklstring(L, 2, &n);
    l_lock *u = lua_newuserdatauv(L, sizeof *u, 0);   /* box first: GC closes what goes in */
    u->fd = -1;
    luaL_setmetatable(L, L_LOCK);
    const char *why = NULL;
    int e = 0;
    u->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (u->fd < 0) {
        e = errno;
        why = "cannot open lock";
        goto fail;
    }
    while (flock(u->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        e = errno;
        if (e == EWOULDBLOCK) {
            close(u->fd);
            u->fd = -1;
            lua_pushboolean(L, 0);
            lua_pushliteral(L, "busy");
            return 2;
        }
        why = "cannot lock (the filesystem must support flock(2) locks)";
        goto fail;
    }
    /* the holder before us may have removed the file after we opened it: the lock is ours only
     * while path still names the file we locked */
    struct stat a, b;
    if (fstat(u->fd, &a) != 0 || stat(path, &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
        close(u->fd);
        u->fd = -1;
        lua_pushboolean(L, 0);
        lua_pushliteral(L, "moved");
        return 2;
    }
    /* what an earlier holder that died without releasing left there (a release removes the
     * file first, so a fresh lock file is empty) */
    char old[256];
    ssize_t got;
    do got = pread(u->fd, old, sizeof old, 0); while (got < 0 && errno == EINTR);
    if (got < 0) got = 0;
    lua_pushlstring(L, old, (size_t)got);
    if (ftruncate(u->fd, 0) != 0) {
        e = errno;
        why = "cannot write lock";
        goto fail;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = pwrite(u->fd, text + off, n - off, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            e = errno;
            why = "cannot write lock";
            goto fail;
        }
        off += (size_t)w;
    }
    return 2;
fail:
    if (u->fd >= 0) close(u->fd);
    u->fd = -1;
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "%s '%s': %s", why, path, strerror(e));
    return 2;
}

static int l_pid_alive(lua_State *L) {
    lua_Integer pid = luaL_checkinteger(L, 1);
    luaL_argcheck(L, pid > 0, 1, "pid must be positive");
    int alive = kill((pid_t)pid, 0) == 0 || errno != ESRCH;
    lua_pushboolean(L, alive);
    return 1;
}

static int l_sleep(lua_State *L) {
    double s = luaL_checknumber(L, 1);
    luaL_argcheck(L, s >= 0 && s <= 3600, 1, "seconds must be in [0, 3600]");
    struct timespec ts, rem;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
    return 0;
}

static int l_getcwd(lua_State *L) {
    char buf[4096];
    if (!getcwd(buf, sizeof buf)) return luaL_error(L, "getcwd: %s", strerror(errno));
    lua_pushstring(L, buf);
    return 1;
}

static int l_hostname(lua_State *L) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) buf[0] = '\0';
    buf[sizeof buf - 1] = '\0';
    lua_pushstring(L, buf[0] ? buf : "unknown");
    return 1;
}

void l_open_proc(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"listdir", l_listdir},         {"stat", l_stat},           {"mkdir_p", l_mkdir_p},
        {"getpid", l_getpid},           {"isatty", l_isatty},
        {"pid_alive", l_pid_alive},     {"sleep", l_sleep},
        {"hostname", l_hostname},       {"flock_open", l_flock_open}, {"getcwd", l_getcwd},
        {NULL, NULL}};
    static const luaL_Reg lock_methods[] = {{"close", l_lock_close}, {NULL, NULL}};
    l_newclass(L, L_DIR, NULL, l_dir_gc, NULL);
    l_newclass(L, L_LOCK, lock_methods, l_lock_close, l_lock_close);
    l_setfuncs(L, fns);
}
