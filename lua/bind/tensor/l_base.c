/* l_base.c: Lua binding of core/base (clock, threads, allocation counter, build facts).
 *   core.now() -> monotonic seconds
 *   core.threads_init(n) -> count   sets OpenMP + OpenBLAS threads once (n <= 0: HYDRA_THREADS,
 *                                   else SLURM_CPUS_PER_TASK, else every core);
 *   core.threads() -> the count in force;  core.threads_default() -> what n <= 0 would use
 *   core.blas_threads() -> the count OpenBLAS would use for its own products (1 once set)
 *   core.alloc_count() -> allocations made through hy_x* so far (failure-injection tests)
 *   core.version (string)  core.debug (built with HY_DEBUG, make MODE=asan: HYDRA_FAIL_ALLOC=N
 *   is honoured)  core.vector_isa ("avx512", "avx2" or "baseline": the vector unit the build
 *   targets, which sets the float kernels' lane counts) */
#include "bind.h"

static int l_now(lua_State *L) {
    lua_pushnumber(L, hy_now());
    return 1;
}

static int l_threads_init(lua_State *L) {
    if (hy_threads_init((int64_t)luaL_optinteger(L, 1, 0)) != HY_OK) return l_raise(L);
    lua_pushinteger(L, hy_threads());
    return 1;
}

static int l_threads(lua_State *L) {
    lua_pushinteger(L, hy_threads());
    return 1;
}

static int l_blas_threads(lua_State *L) {
    lua_pushinteger(L, hy_blas_threads());
    return 1;
}

static int l_threads_default(lua_State *L) {
    int64_t n = 0;
    if (hy_threads_default(&n) != HY_OK) return l_raise(L);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int l_alloc_count(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)hy_alloc_count());
    return 1;
}

void l_open_base(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"now", l_now},         {"threads_init", l_threads_init},
        {"threads", l_threads}, {"threads_default", l_threads_default},
        {"blas_threads", l_blas_threads}, {"alloc_count", l_alloc_count},
        {NULL, NULL}};
    l_setfuncs(L, fns);
    lua_pushliteral(L, HY_VERSION);
    lua_setfield(L, -2, "version");
#ifdef HY_DEBUG
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "debug");
    /* the widest vector unit the build targets: the float kernels' lane counts follow it
     * (attention's key vectors: 16 floats with AVX-512, else 8), so their rounding does too */
#if defined(__AVX512F__)
    lua_pushliteral(L, "avx512");
#elif defined(__AVX2__)
    lua_pushliteral(L, "avx2");
#else
    lua_pushliteral(L, "baseline");
#endif
    lua_setfield(L, -2, "vector_isa");
}
