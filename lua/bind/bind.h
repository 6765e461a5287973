/* bind.h: shared pieces of the Lua binding (lua/bind/). Only luaopen_hydra_core is exported to
 * the host; each l_<module>.c binds one core module (core/<layer>/<module>.h) and adds its
 * functions to the hydra.core table through l_open_<module>(L), which is called with that table
 * on top of the stack (l_core.c calls them in dependency order: a class is made before others
 * add methods).
 * Order inside every binding: check arguments, box (userdata + metatable) before acquiring any C
 * resource, call the core, raise last (l_raise). Lua indices are 1-based; convert with
 * l_checkindex here and nowhere else. A binding reads another file's userdata only through the
 * l_check* / l_push* functions below, never through its layout. */
#ifndef HY_BIND_H
#define HY_BIND_H

#include <lauxlib.h>
#include <lua.h>

#include "tensor/gemm_bf16.h"
#include "tensor/tensor.h"

/* The classes of higher layers that bindings share, by name only: a binding that reads inside
 * one includes its header itself (io/h5.h, data/loader.h, nn/xfmr.h), within its own layer or
 * below, so bind.h, included by every layer's bindings, stays at the lowest layer. */
typedef struct hy_h5 hy_h5;
typedef struct hy_dataset hy_dataset;
typedef struct hy_augment hy_augment;
typedef struct hy_xfmr hy_xfmr;
typedef struct hy_xfmr_config hy_xfmr_config;
typedef struct hy_batch hy_batch;

#define L_TENSOR "hydra.Tensor"
#define L_MODEL "hydra.Model"
#define L_DATASET "hydra.Dataset"
#define L_H5FILE "hydra.H5File"

int luaopen_hydra_core(lua_State *L);

/* ===== l_core.c: errors, indices, classes ===== */

/* Raises hy_errmsg() as a Lua error; use as `return l_raise(L);`. */
int l_raise(lua_State *L);
/* A 1-based Lua index in [1, n] converted to 0-based. */
size_t l_checkindex(lua_State *L, int arg, size_t n);
/* Sets fields of the table at the top of the stack. */
void l_setfuncs(lua_State *L, const luaL_Reg *fns);
/* n standard-normal floats from seed: the input images of the timing functions (m:time, f:time). */
void l_random_images(float *x, size_t n, uint64_t seed);
/* Registers class `name`: a metatable whose __index is a table of methods (none when NULL), with
 * __gc = gc and __close = close (each left out when NULL). Leaves the stack as it was. */
void l_newclass(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                lua_CFunction close);
/* Adds methods to class `name` (made by l_newclass with methods), e.g. m:save from l_ckpt.c. */
void l_addmethods(lua_State *L, const char *name, const luaL_Reg *methods);
/* Sets further metamethods (__len, __tostring, ...) of class `name`. */
void l_setmeta(lua_State *L, const char *name, const luaL_Reg *meta);

/* Keys of a resolved config section (a table from hydra.config at stack index t) by their dotted
 * YAML name: the first part names the section t holds, the rest is walked, so
 * l_cfgsize(L, t, "train.epochs") reads t.epochs and "train.augment.hflip" t.augment.hflip.
 * Every key is required (configs/defaults.yaml gives each one a value; a binding applies no
 * default of its own); a missing or mistyped one raises "<key> must be <what> (got <type>)". */
size_t l_cfgsize(lua_State *L, int t, const char *key);      /* an integer >= 0 */
double l_cfgnum(lua_State *L, int t, const char *key);       /* a number */
int l_cfgbool(lua_State *L, int t, const char *key);         /* a boolean */
const char *l_cfgstr(lua_State *L, int t, const char *key);  /* a string (kept alive by t) */
/* Whether the key is present (not nil): for the optional keys of a schema that gives their
 * default itself (the model schema's FLOAT and ENUM fields, xfmr.h). */
int l_cfghas(lua_State *L, int t, const char *key);

/* ===== l_tensor.c ===== */

/* The hy_tensor inside a hydra.Tensor argument (raises a type error otherwise). */
hy_tensor *l_checktensor(lua_State *L, int arg);
/* Pushes a new, empty (zeroed) boxed tensor and returns its header; fill it with
 * hy_tensor_alloc or by moving an owned tensor in (the box then owns it). */
hy_tensor *l_pushtensor(lua_State *L);

/* ===== l_xfmr.c ===== */

/* The model inside a hydra.Model argument; raises "model: attempt to use a closed model". */
hy_xfmr *l_checkmodel(lua_State *L, int arg);
/* A precision name at arg ("fp32" | "bf16"; tensor/gemm_bf16.h), else raises
 * "precision must be fp32 or bf16 (got 'x')". */
hy_precision l_checkprecision(lua_State *L, int arg);
/* A set_precision method's return: raises hy_errmsg() when st failed, else pushes the name of
 * the precision in force; returns 1. */
int l_pushprecision(lua_State *L, hy_status st, hy_precision used);
/* Pushes a new, empty (zeroed) hydra.Model box; fill it with hy_xfmr_new or hy_ckpt_load. */
hy_xfmr *l_pushmodel(lua_State *L);
/* Reads a resolved model section (table at arg) into c by its YAML keys (model.kind, ...). */
void l_read_model_config(lua_State *L, int arg, hy_xfmr_config *c);
/* l_checkmodel for operations defined on single models only (pruning, fusing, per-sample
 * timing): an ensemble raises "<who>: '<method>' models are not supported (a single model is
 * expected)". */
hy_xfmr *l_checksingle(lua_State *L, int arg, const char *who);

/* ===== l_import.c ===== */

/* The inputs table at arg of a forward of a model of config c into in (borrowing its tensors,
 * which the table keeps alive): inputs.images float32 [B,C,H,W] (vit), or inputs.ids int32
 * [B,len], inputs.lengths int32 [B] and the optional inputs.type_ids int32 [B,len] (text),
 * checked by hy_xfmr_check_inputs; returns B. Raises "<who>: inputs.images must be [B,3,32,32]"
 * and the like; allocates nothing. */
size_t l_checkinputs(lua_State *L, int arg, const hy_xfmr_config *c, const char *who,
                     hy_batch *in);

/* ===== l_loader.c ===== */

/* The dataset inside a hydra.Dataset argument. */
hy_dataset *l_checkdataset(lua_State *L, int arg);
/* Pushes a new, empty (zeroed) hydra.Dataset box. */
hy_dataset *l_pushdataset(lua_State *L);

/* ===== l_fit.c ===== */

/* Pushes a trainer's progress table (t:progress(): epoch, step, loss, acc, seconds, ...). */
struct hy_progress;
void l_pushprogress(lua_State *L, const struct hy_progress *p);
/* The training loop (fit.h hy_fit) of a trainer of class cls at arg: every trainer box
 * (hydra.Trainer, hydra.MimoTrainer, hydra.MLMTrainer) starts with its trainer, whose first
 * member is its hy_fit; a released one has fit.model NULL. Raises "<who>: attempt to use a
 * closed trainer" or "model: attempt to use a closed model". */
struct hy_fit;
struct hy_fit *l_checkfit(lua_State *L, int arg, const char *cls, const char *who);
/* Adds the loop's methods to trainer class cls: t:start_epoch(e) (1-based), t:run(n) -> ran,
 * t:progress() -> table. */
void l_addfitmethods(lua_State *L, const char *cls, const char *who);

/* ===== l_train.c ===== */

/* Reads the resolved train (stack index tr), optim (op) and, when ft != 0, finetune sections by
 * their YAML keys into *c and *aug, as core.trainer_new does (raises on a missing key or a bad
 * optim.schedule); seed: the run's seed. */
struct hy_train_config;
void l_read_train_config(lua_State *L, int tr, int op, int ft, lua_Integer seed,
                         struct hy_train_config *c, hy_augment *aug);
/* A classifier trainer's t:save(path, meta [, best]) (args 2..4): model m's checkpoint with meta
 * as /meta, the resumable state of o and p (hy_train_state_write), and best (float32
 * [n_params]: the weights train.select_best keeps so far) as /train_state/best; atomic, so a
 * kill leaves the previous file. t:resume(path) (arg 2) reads the parameters and the state back
 * and pushes best (or nil). Both raise on failure. */
struct hy_adamw;
int l_train_save(lua_State *L, hy_xfmr *m, const struct hy_adamw *o, const struct hy_progress *p);
int l_train_resume(lua_State *L, hy_xfmr *m, struct hy_adamw *o, struct hy_progress *p);

/* ===== l_h5.c ===== */

/* Pushes a new, closed hydra.H5File box; open it with hy_h5_create / hy_h5_open. Its __gc closes
 * it, discarding a file being written that was not committed. */
hy_h5 *l_pushh5(lua_State *L);
/* The open file inside a hydra.H5File argument; raises "h5: attempt to use a closed file". */
hy_h5 *l_checkh5(lua_State *L, int arg);
/* Checks the optional /meta table at arg (nil or none: nothing): string keys, values strings,
 * numbers or booleans (booleans are written as integers 0 / 1); raises "<what>: meta ...". */
void l_checkmeta(lua_State *L, int arg, const char *what);
/* Writes the table checked by l_checkmeta as /meta attributes of f (strings as strings,
 * integers and booleans as int64, other numbers as float64). Never raises. */
hy_status l_writemeta(lua_State *L, int arg, hy_h5 *f);

void l_open_base(lua_State *L);
void l_open_tensor(lua_State *L);
void l_open_h5(lua_State *L);
void l_open_mlm(lua_State *L);
void l_open_config(lua_State *L);
void l_open_hash(lua_State *L);
void l_open_idx(lua_State *L);
void l_open_imgio(lua_State *L);
void l_open_imgprep(lua_State *L);
void l_open_wordpiece(lua_State *L);
void l_open_sample(lua_State *L);
void l_open_glyph(lua_State *L);
void l_open_corrupt(lua_State *L);
void l_open_text(lua_State *L);
void l_open_metrics(lua_State *L);
void l_open_xfmr(lua_State *L);
void l_open_loader(lua_State *L);
void l_open_ckpt(lua_State *L);
void l_open_train(lua_State *L);
void l_open_ens(lua_State *L);
void l_open_gemm(lua_State *L);
void l_open_prune(lua_State *L);
void l_open_fused(lua_State *L);
void l_open_vilu(lua_State *L);
void l_open_mimo(lua_State *L);
void l_open_hvp(lua_State *L);
void l_open_proc(lua_State *L);
void l_open_spawn(lua_State *L);
void l_open_prof(lua_State *L);
void l_open_import(lua_State *L);
void l_open_json(lua_State *L);
void l_open_safetensors(lua_State *L);

#endif
