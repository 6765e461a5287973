/* l_spawn.c: worker processes for `hydra sweep` (lua/hydra/sweep.lua): fork + exec, polling
 * waits, signals, and a SIGINT/SIGTERM trap so the parent can stop its workers cleanly.
 *   core.spawn(argv, env, log) -> pid   argv: array of strings (argv[1] is the program, a path);
 *                                       env: table NAME -> value added to (or replacing in) the
 *                                       environment; log: file the child's stdout and stderr are
 *                                       appended to (nil: inherit). The child runs in its own
 *                                       process group (pgid = pid) and, on Linux, is killed when
 *                                       the parent dies (even by SIGKILL). Exec failure: the child
 *                                       writes the reason to its log and exits 127.
 *   core.wait(pid [, block]) -> nil                 still running (block false, the default)
 *                            -> "exit", code | "signal", signo
 *   core.kill(pid, sig)      sends sig (an integer or "TERM", "INT", "KILL") to pid's process
 *                            group (falls back to pid); returns true, or false + reason
 *   core.trap_signals([on])  from now on SIGINT and SIGTERM set a flag instead of killing;
 *                            core.trap_signals(false) gives them back their default action
 *                            (the flag stays as it was)
 *   core.interrupted()       -> nil, or the number of the first trapped signal
 *   core.ncpu()              -> online processors (sysconf)
 *   core.exe()               -> the real path of the running executable (/proc/self/exe) */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "bind.h"

extern char **environ;

static volatile sig_atomic_t trapped_signal = 0;

static void on_signal(int sig) {
    if (trapped_signal == 0) trapped_signal = sig;
}

/* Copies the strings of the array at `arg` into a NULL-terminated char* array that lives in a
 * userdata pushed on the stack (GC-owned: no manual free). Returns the array. */
static const char **string_array(lua_State *L, int arg, const char *what, size_t extra,
                                 size_t *count) {
    size_t n = (size_t)lua_rawlen(L, arg);
    for (size_t i = 1; i <= n; i++) {
        if (lua_rawgeti(L, arg, (lua_Integer)i) != LUA_TSTRING)
            luaL_error(L, "spawn: %s[%d] must be a string (got %s)", what, (int)i,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    const char **a = lua_newuserdatauv(L, (n + extra + 1) * sizeof *a, 0);
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, arg, (lua_Integer)i);
        a[i - 1] = lua_tostring(L, -1); /* kept alive by the argument table */
        lua_pop(L, 1);
    }
    a[n] = NULL;
    *count = n;
    return a;
}

static int env_overridden(lua_State *L, int envarg, const char *entry) {
    const char *eq = strchr(entry, '=');
    if (eq == NULL || envarg == 0) return 0;
    lua_pushlstring(L, entry, (size_t)(eq - entry));
    int found = lua_rawget(L, envarg) != LUA_TNIL;
    lua_pop(L, 1);
    return found;
}

static int l_spawn(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int envarg = lua_isnoneornil(L, 2) ? 0 : 2;
    if (envarg) luaL_checktype(L, 2, LUA_TTABLE);
    const char *log = luaL_optstring(L, 3, NULL);
    size_t argc = 0;
    const char **argv = string_array(L, 1, "argv", 0, &argc);
    luaL_argcheck(L, argc >= 1, 1, "argv needs at least the program");

    /* environment: the parent's, less the overridden names, plus the overrides */
    size_t nenv = 0, nover = 0;
    while (environ[nenv]) nenv++;
    if (envarg) {
        lua_pushnil(L);
        while (lua_next(L, envarg)) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
                return luaL_error(L, "spawn: env must map names to strings or numbers");
            nover++;
            lua_pop(L, 1);
        }
    }
    const char **envp = lua_newuserdatauv(L, (nenv + nover + 1) * sizeof *envp, 0);
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (!env_overridden(L, envarg, environ[i])) envp[k++] = environ[i];
    if (envarg) {
        lua_newtable(L); /* keeps the "NAME=value" strings alive */
        int keep = lua_gettop(L);
        lua_Integer j = 0;
        lua_pushnil(L);
        while (lua_next(L, envarg)) {
            lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
            envp[k++] = lua_tostring(L, -1);
            lua_rawseti(L, keep, ++j);
            lua_pop(L, 1);
        }
    }
    envp[k] = NULL;

    int fd = -1;
    if (log) {
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) return luaL_error(L, "spawn: cannot open log '%s': %s", log, strerror(errno));
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return luaL_error(L, "spawn: fork failed: %s", strerror(e));
    }
    if (pid == 0) {
        /* child: async-signal-safe calls only (the parent may have had threads) */
        setpgid(0, 0);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
#else
        (void)parent;
#endif
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        execve(argv[0], (char *const *)(uintptr_t)argv, (char *const *)(uintptr_t)envp);
        static const char msg[] = "spawn: exec failed for the worker program\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    setpgid(pid, pid); /* also from the parent, so a kill right after spawn finds the group */
    if (fd >= 0) close(fd);
    lua_pushinteger(L, (lua_Integer)pid);
    return 1;
}

static int l_wait(lua_State *L) {
    lua_Integer pid = luaL_checkinteger(L, 1);
    luaL_argcheck(L, pid > 0, 1, "pid must be positive");
    int block = lua_toboolean(L, 2);
    int status = 0;
    pid_t r;
    do {
        r = waitpid((pid_t)pid, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR && block && trapped_signal == 0);
    if (r == 0 || (r < 0 && errno == EINTR)) {
        lua_pushnil(L);
        return 1;
    }
    if (r < 0) return luaL_error(L, "wait: pid %d: %s", (int)pid, strerror(errno));
    if (WIFEXITED(status)) {
        lua_pushliteral(L, "exit");
        lua_pushinteger(L, WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        lua_pushliteral(L, "signal");
        lua_pushinteger(L, WTERMSIG(status));
    } else {
        lua_pushnil(L);
        return 1;
    }
    return 2;
}

static int l_kill(lua_State *L) {
    lua_Integer pid = luaL_checkinteger(L, 1);
    luaL_argcheck(L, pid > 0, 1, "pid must be positive");
    int sig;
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *s = lua_tostring(L, 2);
        if (strcmp(s, "TERM") == 0) sig = SIGTERM;
        else if (strcmp(s, "INT") == 0) sig = SIGINT;
        else if (strcmp(s, "KILL") == 0) sig = SIGKILL;
        else return luaL_argerror(L, 2, "expected TERM, INT, KILL or a signal number");
    } else {
        sig = (int)luaL_checkinteger(L, 2);
    }
    if (kill(-(pid_t)pid, sig) == 0 || kill((pid_t)pid, sig) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, strerror(errno));
    return 2;
}

static int l_trap_signals(lua_State *L) {
    int on = lua_isnoneornil(L, 1) || lua_toboolean(L, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocking wait returns early */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return 0;
}

static int l_interrupted(lua_State *L) {
    if (trapped_signal == 0) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)trapped_signal);
    return 1;
}

static int l_ncpu(lua_State *L) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    lua_pushinteger(L, c > 0 ? (lua_Integer)c : 1);
    return 1;
}

static int l_exe(lua_State *L) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return luaL_error(L, "exe: cannot read /proc/self/exe: %s", strerror(errno));
    buf[n] = '\0';
    lua_pushstring(L, buf);
    return 1;
}

void l_open_spawn(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"spawn", l_spawn},       {"wait", l_wait}, {"kill", l_kill},
        {"trap_signals", l_trap_signals}, {"interrupted", l_interrupted},
        {"ncpu", l_ncpu},         {"exe", l_exe},   {NULL, NULL}};
    l_setfuncs(L, fns);
}
