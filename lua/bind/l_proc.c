/* l_proc.c: process and file-system helpers for the stage cache and runs (lua/hydra/stages.lua):
 * exclusive lock files, process liveness, sleeping, the host name.
 *   core.lock_create(path, text) -> true | false, why   O_CREAT|O_EXCL create + write text; false
 *                                                       with "exists" when the file is there,
 *                                                       else with the system's message
 *   core.pid_alive(pid)          -> boolean             kill(pid, 0): true unless ESRCH
 *   core.sleep(seconds)                                 nanosleep (0 <= seconds <= 3600)
 *   core.hostname()              -> string */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "bind.h"

static int l_lock_create(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *text = luaL_checklstring(L, 2, &n);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        int e = errno;
        lua_pushboolean(L, 0);
        if (e == EEXIST) lua_pushliteral(L, "exists");
        else lua_pushfstring(L, "cannot create lock '%s': %s", path, strerror(e));
        return 2;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(path);
            lua_pushboolean(L, 0);
            lua_pushfstring(L, "cannot write lock '%s': %s", path, strerror(e));
            return 2;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(path);
        lua_pushboolean(L, 0);
        lua_pushfstring(L, "cannot write lock '%s': %s", path, strerror(e));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
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

static int l_hostname(lua_State *L) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) buf[0] = '\0';
    buf[sizeof buf - 1] = '\0';
    lua_pushstring(L, buf[0] ? buf : "unknown");
    return 1;
}

void l_open_proc(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"lock_create", l_lock_create}, {"pid_alive", l_pid_alive}, {"sleep", l_sleep},
        {"hostname", l_hostname},       {NULL, NULL}};
    l_setfuncs(L, fns);
}
