/* main.c: the `hydra` executable. Embeds Lua 5.4 and runs everything in one protected call with a
 * traceback handler, following lua.c. The command line goes to the Lua dispatcher
 * (lua/hydra/main.lua), which loads lua/hydra/cli/<command>.lua.
 * Exit status: 0 success, 1 any error, 2 usage error. An error raised as a hydra error object
 * (a table with fields `message` and `status`, made by hydra.fail / hydra.usage) prints its
 * message alone; any other error prints the message and a Lua traceback.
 * Threads: OpenMP threads that spin-wait after a parallel region fight OpenBLAS's own threads
 * for the cores (measured: 40x slower batch-1 inference on 2 cores), so the host makes the
 * OpenMP wait policy passive. libgomp reads OMP_WAIT_POLICY when it loads, before main(), so
 * when the variable is unset the host sets it and re-executes itself once. Before any Lua
 * runs, the host sets hydra's threads to 1 and OpenBLAS's to 1 (hy_threads_init(1)), so that
 * a product computed in a script's own process (a stage that prop1, b2_circuit_knockout or the
 * text pretraining builds without a run) rounds as it does in a run: OpenBLAS's own threading
 * rounds differently from one thread (core/README.md, "Threading and determinism"). A command
 * or script then sets its thread budget with hy_threads_init(n).
 * A failure to write standard output (checked when it is flushed and closed at exit) makes the
 * exit status 1. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "tensor/base.h"
#include "bind.h"

/* Finds the folder holding lua/hydra/main.lua: $HYDRA_HOME, else walks up from the real path of
 * this executable (./hydra at the repository root, or build/<mode>/bin/hydra). On failure writes
 * the reason (one line) to why. */
static int find_home(char *out, size_t n, char *why, size_t nwhy) {
    const char *env = getenv("HYDRA_HOME");
    char path[PATH_MAX + 32];
    if (env && *env) {
        snprintf(path, sizeof path, "%s/lua/hydra/main.lua", env);
        if (access(path, R_OK) == 0) { snprintf(out, n, "%s", env); return 1; }
        snprintf(why, nwhy, "HYDRA_HOME=%s has no readable lua/hydra/main.lua; set HYDRA_HOME to "
                 "the hydra source folder, or unset it", env);
        return 0;
    }
    snprintf(why, nwhy, "cannot find the hydra Lua library (lua/hydra/main.lua) above the "
             "executable; set HYDRA_HOME to the hydra source folder");
    char exe[PATH_MAX];
    if (!realpath("/proc/self/exe", exe)) return 0;
    for (;;) {
        char *slash = strrchr(exe, '/');
        if (!slash) return 0;
        *slash = '\0';
        snprintf(path, sizeof path, "%s/lua/hydra/main.lua", exe[0] ? exe : "");
        if (access(path, R_OK) == 0) { snprintf(out, n, "%s", exe[0] ? exe : "/"); return 1; }
        if (exe[0] == '\0') return 0;
    }
}

static int traceback(lua_State *L) {
    if (lua_istable(L, 1)) {                       /* hydra error object: no traceback */
        lua_getfield(L, 1, "status");
        int is_hydra = lua_isinteger(L, -1);
        lua_pop(L, 1);
        if (is_hydra) { lua_settop(L, 1); return 1; }
    }
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
        else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = lua_touserdata(L, 2);
    char home[PATH_MAX], why[PATH_MAX + 200];
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_hydra_core);
    lua_setfield(L, -2, "hydra.core");
    lua_pop(L, 1);
    if (!find_home(home, sizeof home, why, sizeof why)) {
        /* a hydra error object: the message alone, no traceback (a user's setting, not a bug) */
        lua_createtable(L, 0, 2);
        lua_pushstring(L, why);
        lua_setfield(L, -2, "message");
        lua_pushinteger(L, 1);
        lua_setfield(L, -2, "status");
        return lua_error(L);
    }
    /* package.path: the hydra library first, then whatever LUA_PATH gave */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s", home, home, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
    /* global `arg` like lua.c: arg[0] = program, arg[1..] = arguments */
    lua_createtable(L, argc, 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_setglobal(L, "arg");
    lua_pushstring(L, home);
    lua_setglobal(L, "HYDRA_HOME");
    /* hand over to the dispatcher */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "hydra.main");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "main");
    lua_createtable(L, argc, 0);
    for (int i = 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_call(L, 1, 1);
    return 1;                                      /* exit status from main (or nil) */
}

/* Sets OMP_WAIT_POLICY=passive and re-executes this binary when the user has not chosen a
 * policy; returns only when no re-exec happened (policy already set, or exec failed). */
static void ensure_passive_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") != NULL) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with libgomp's default policy */
}

int main(int argc, char **argv) {
    ensure_passive_wait(argv);
    (void)hy_threads_init(1);                      /* n = 1 cannot fail */
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fputs("hydra: cannot create Lua state\n", stderr);
        return 1;
    }
    lua_pushcfunction(L, traceback);
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int st = lua_pcall(L, 2, 1, 1);
    int code = 0;
    if (st != LUA_OK) {
        code = 1;
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "status");
            code = (int)lua_tointeger(L, -1);
            lua_getfield(L, -2, "message");
            fprintf(stderr, "hydra: %s\n", lua_tostring(L, -1));
            lua_pop(L, 2);
            if (code == 0) code = 1;
        } else {
            const char *msg = lua_tostring(L, -1);
            fprintf(stderr, "hydra: %s\n", msg ? msg : "(no message)");
        }
    } else if (lua_isinteger(L, -1)) {
        code = (int)lua_tointeger(L, -1);
    }
    lua_close(L);
    /* Output to a file that cannot take it (`hydra config > full-disk/c.yaml`) fails only when
     * the buffer is written: an error flushing or closing stdout is the command's error. A stdout
     * closed from the start (EBADF) is not. */
    int werr = 0;
    if (fflush(stdout) != 0) werr = errno;
    else if (ferror(stdout)) werr = -1;
    else if (fclose(stdout) != 0 && errno != EBADF) werr = errno;
    if (werr != 0 && werr != EBADF && code == 0) {   /* a failed command has said why */
        if (werr > 0) fprintf(stderr, "hydra: cannot write standard output: %s\n", strerror(werr));
        else fputs("hydra: cannot write standard output: a write failed\n", stderr);
        code = 1;
    }
    return code;
}
