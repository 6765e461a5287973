/* bind.h: shared pieces of the Lua binding (lua/bind/). Only luaopen_hydra_core is exported to
 * the host; each l_<module>.c adds its functions to the hydra.core table through
 * l_open_<module>(L), which is called with that table on top of the stack.
 * Order inside every binding: check arguments, box (userdata + metatable) before acquiring any C
 * resource, call the core, raise last (l_raise). Lua indices are 1-based; convert with
 * l_checkindex here and nowhere else. */
#ifndef HY_BIND_H
#define HY_BIND_H

#include <lauxlib.h>
#include <lua.h>

#include "tensor.h"

#define L_TENSOR "hydra.Tensor"

typedef struct l_tensor {
    hy_tensor t;
} l_tensor;

int luaopen_hydra_core(lua_State *L);

/* Raises hy_errmsg() as a Lua error; use as `return l_raise(L);`. */
int l_raise(lua_State *L);
/* A 1-based Lua index in [1, n] converted to 0-based. */
size_t l_checkindex(lua_State *L, int arg, size_t n);
/* The hy_tensor inside a hydra.Tensor argument (raises a type error otherwise). */
hy_tensor *l_checktensor(lua_State *L, int arg);
/* Pushes a new, empty (zeroed) boxed tensor and returns its header; fill it with
 * hy_tensor_alloc or by moving an owned tensor in (the box then owns it). */
hy_tensor *l_pushtensor(lua_State *L);
/* Sets fields of the table at the top of the stack. */
void l_setfuncs(lua_State *L, const luaL_Reg *fns);

void l_open_tensor(lua_State *L);
void l_open_io(lua_State *L);
void l_open_config(lua_State *L);
void l_open_data(lua_State *L);
void l_open_text(lua_State *L);
void l_open_metrics(lua_State *L);
void l_open_model(lua_State *L);
void l_open_prune(lua_State *L);
void l_open_fused(lua_State *L);
void l_open_proc(lua_State *L);
void l_open_spawn(lua_State *L);
void l_open_bench(lua_State *L);

#endif
