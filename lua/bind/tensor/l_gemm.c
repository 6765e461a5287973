/* l_gemm.c: Lua binding of core/gemm (the sgemm every linear layer runs through).
 *   core.bench_sgemm(n, reps) -> best GFLOP/s of reps n x n x n sgemm calls (row-major, through
 *   hy_gemm), for the % of peak that `make bench` reports
 *   core.blas_info() -> { corename = openblas_get_corename(), config = openblas_get_config() }
 *   (the kernels OpenBLAS picked on this CPU; recorded by `make bench`)
 *   core.bf16_available() -> whether precision bf16 runs here (tensor/gemm_bf16.h: AVX-512 BF16) */
#include "bind.h"
#include "tensor/gemm.h"
#include "tensor/gemm_bf16.h"

static int l_bf16_available(lua_State *L) {
    lua_pushboolean(L, hy_bf16_available());
    return 1;
}

static int l_bench_sgemm(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 3);
    luaL_argcheck(L, n >= 1 && n <= 8192, 1, "size must be in [1, 8192]");
    luaL_argcheck(L, reps >= 1, 2, "reps must be >= 1");
    int64_t shape[2] = {n, n};
    hy_tensor *a = l_pushtensor(L), *b = l_pushtensor(L), *c = l_pushtensor(L);
    if (hy_tensor_alloc(a, HY_F32, 2, shape) != HY_OK || hy_tensor_alloc(b, HY_F32, 2, shape) !=
        HY_OK || hy_tensor_alloc(c, HY_F32, 2, shape) != HY_OK)
        return l_raise(L);
    float *x = a->data, *y = b->data;
    for (size_t i = 0; i < (size_t)(n * n); i++) {
        x[i] = (float)(i % 7) * 0.125f;
        y[i] = (float)(i % 5) * 0.25f;
    }
    double best = 0;
    for (lua_Integer r = 0; r <= reps; r++) {   /* first call warms up */
        double t0 = hy_now();
        hy_gemm(CblasNoTrans, CblasNoTrans, (size_t)n, (size_t)n, (size_t)n, 1.0f, a->data,
                (size_t)n, b->data, (size_t)n, 0.0f, c->data, (size_t)n);
        double dt = hy_now() - t0;
        double gf = 2.0 * (double)n * (double)n * (double)n / dt / 1e9;
        if (r > 0 && gf > best) best = gf;
    }
    lua_pushnumber(L, best);
    return 1;
}

static int l_blas_info(lua_State *L) {
    const char *core = openblas_get_corename(), *config = openblas_get_config();
    lua_createtable(L, 0, 2);
    lua_pushstring(L, core ? core : "");
    lua_setfield(L, -2, "corename");
    lua_pushstring(L, config ? config : "");
    lua_setfield(L, -2, "config");
    return 1;
}

void l_open_gemm(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"bench_sgemm", l_bench_sgemm}, {"blas_info", l_blas_info},
        {"bf16_available", l_bf16_available}, {NULL, NULL}};
    l_setfuncs(L, fns);
}
