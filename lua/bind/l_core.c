/* l_core.c: luaopen_hydra_core builds the hydra.core table from every l_<module>.c, and holds the
 * helpers shared by all bindings (l_raise, l_checkindex, l_checktensor). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bind.h"

int l_raise(lua_State *L) { return luaL_error(L, "%s", hy_errmsg()); }

size_t l_checkindex(lua_State *L, int arg, size_t n) {
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || (lua_Unsigned)i > n)
        luaL_argerror(L, arg, lua_pushfstring(L, "index %I out of range [1, %I]", i,
                                              (lua_Integer)n));
    return (size_t)(i - 1);
}

hy_tensor *l_checktensor(lua_State *L, int arg) {
    l_tensor *u = luaL_checkudata(L, arg, L_TENSOR);
    return &u->t;
}

hy_tensor *l_pushtensor(lua_State *L) {
    l_tensor *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_TENSOR);
    return &u->t;
}

void l_setfuncs(lua_State *L, const luaL_Reg *fns) { luaL_setfuncs(L, fns, 0); }

/* core.listdir(path) -> sorted array of names (without . and ..); raises on error */
static int l_listdir(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    DIR *d = opendir(path);
    if (!d) return luaL_error(L, "cannot list '%s': %s", path, strerror(errno));
    lua_newtable(L);
    lua_Integer n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(d);
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    return 1;
}

/* core.stat(path) -> "file" | "dir" | "other", size   or nil when it does not exist */
static int l_stat(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    struct stat sb;
    if (stat(path, &sb) != 0) { lua_pushnil(L); return 1; }
    lua_pushstring(L, S_ISREG(sb.st_mode) ? "file" : S_ISDIR(sb.st_mode) ? "dir" : "other");
    lua_pushinteger(L, (lua_Integer)sb.st_size);
    lua_pushinteger(L, (lua_Integer)sb.st_mtime);
    return 3;
}

/* core.mkdir_p(path): creates path and its parents (like mkdir -p); raises on error */
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

/* core.getpid() -> integer */
static int l_getpid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

/* core.now() -> monotonic seconds */
static int l_now(lua_State *L) {
    lua_pushnumber(L, hy_now());
    return 1;
}

/* core.threads_init(n) sets OpenMP + OpenBLAS threads once (n <= 0: HYDRA_THREADS or cores);
 * core.threads() -> the count in force */
static int l_threads_init(lua_State *L) {
    hy_threads_init((int)luaL_optinteger(L, 1, 0));
    lua_pushinteger(L, hy_threads());
    return 1;
}

static int l_threads(lua_State *L) {
    lua_pushinteger(L, hy_threads());
    return 1;
}

/* core.alloc_count() -> allocations made through hy_x* so far (failure-injection tests) */
static int l_alloc_count(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)hy_alloc_count());
    return 1;
}

/* core.isatty(fd) -> boolean (fd 0, 1 or 2) */
static int l_isatty(lua_State *L) {
    lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
    return 1;
}

int luaopen_hydra_core(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"listdir", l_listdir}, {"stat", l_stat},       {"mkdir_p", l_mkdir_p},
        {"getpid", l_getpid},   {"now", l_now},         {"threads_init", l_threads_init},
        {"threads", l_threads}, {"isatty", l_isatty},   {"alloc_count", l_alloc_count},
        {NULL, NULL}};
    lua_newtable(L);
    luaL_setfuncs(L, fns, 0);
    l_open_tensor(L);
    l_open_io(L);
    l_open_config(L);
    l_open_data(L);
    l_open_text(L);
    l_open_metrics(L);
    l_open_model(L);
    l_open_prune(L);
    l_open_fused(L);
    l_open_proc(L);
    l_open_spawn(L);
    l_open_bench(L);
    lua_pushliteral(L, HY_VERSION);
    lua_setfield(L, -2, "version");
    /* core.debug: built with HY_DEBUG (make MODE=asan): HYDRA_FAIL_ALLOC=N is honoured */
#ifdef HY_DEBUG
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "debug");
    return 1;
}
