/* l_ens.c: Lua binding of core/ens (BatchEnsemble and LoRA-Ensemble models, ens.h).
 *   core.model_load(path) -> hydra.Model: a checkpoint's model, an ensemble when the file has
 *     /ensemble (hy_ens_load)
 *   core.ens_model_new(model, method, section) -> hydra.Model: an ensemble of the resolved model
 *     section `model` (as core.model_new); method "batch_ensemble" | "lora_ensemble" and its
 *     resolved section, read by its YAML keys: <method>.members, and for lora_ensemble
 *     lora_ensemble.rank, lora_ensemble.alpha, lora_ensemble.targets (words of q, k, v, o, mlp
 *     joined by commas: "q,v").
 *     Initialise it with m:init(seed).
 *   m:ensemble() -> nil (a single model) or { method =, members =, rank =, alpha =,
 *     targets = "q,v" } (the /ensemble attributes of its checkpoint)
 *   m:copy_backbone(single) copies a trained single model's weights and gates into the
 *     ensemble's backbone (lora_ensemble: the frozen part)
 * Forward, training, prediction, saving: the ordinary Model methods (an ensemble predicts
 * [M,N,K] member logits and probabilities, l_train.c). */
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "hydra/ens.h"

static void read_ens(lua_State *L, int arg, const char *method, hy_ens_config *e) {
    memset(e, 0, sizeof *e);
    if (hy_ens_method_parse(method, &e->kind) != HY_OK)
        luaL_error(L, "ens: method must be batch_ensemble or lora_ensemble (got '%s')", method);
    luaL_checktype(L, arg, LUA_TTABLE);
    char key[64];
    snprintf(key, sizeof key, "%s.members", method);
    e->members = l_cfgsize(L, arg, key);
    if (e->kind != HY_ENS_LORA) return;
    e->rank = l_cfgsize(L, arg, "lora_ensemble.rank");
    e->alpha = (float)l_cfgnum(L, arg, "lora_ensemble.alpha");
    const char *tg = l_cfgstr(L, arg, "lora_ensemble.targets");
    char word[16];
    for (const char *p = tg;;) {   /* words split at ',' */
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        unsigned bit = 0;
        if (n >= sizeof word) n = sizeof word - 1;
        memcpy(word, p, n);
        word[n] = '\0';
        if (hy_ens_target_parse(word, &bit) != HY_OK)
            luaL_error(L, "lora_ensemble.targets: '%s' is not one of q, k, v, o, mlp (got '%s'; "
                       "words joined by commas, e.g. q,v)", word, tg);
        if (e->targets & bit)
            luaL_error(L, "lora_ensemble.targets: '%s' is listed twice (got '%s')", word, tg);
        e->targets |= bit;
        if (!comma) break;
        p = comma + 1;
    }
}

static int l_model_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    if (hy_ens_load(path, l_pushmodel(L)) != HY_OK) return l_raise(L);
    return 1;
}

static int l_ens_model_new(lua_State *L) {
    hy_xfmr_config c;
    l_read_model_config(L, 1, &c);
    const char *method = luaL_checkstring(L, 2);
    hy_ens_config e;
    read_ens(L, 3, method, &e);
    if (hy_ens_new(l_pushmodel(L), &c, &e) != HY_OK) return l_raise(L);
    return 1;
}

static int l_model_ensemble(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const hy_ens *ens = hy_ens_of(m);
    if (!ens) {
        lua_pushnil(L);
        return 1;
    }
    const hy_ens_config *e = &ens->cfg;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, hy_ens_method_name(e->kind));
    lua_setfield(L, -2, "method");
    lua_pushinteger(L, (lua_Integer)e->members);
    lua_setfield(L, -2, "members");
    if (e->kind == HY_ENS_LORA) {
        lua_pushinteger(L, (lua_Integer)e->rank);
        lua_setfield(L, -2, "rank");
        lua_pushnumber(L, (lua_Number)e->alpha);
        lua_setfield(L, -2, "alpha");
        char tg[32];
        lua_pushstring(L, hy_ens_targets_str(e->targets, tg, sizeof tg));
        lua_setfield(L, -2, "targets");
    }
    return 1;
}

static int l_model_copy_backbone(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_xfmr *src = l_checkmodel(L, 2);
    if (!hy_ens_of(m)) return luaL_error(L, "ens: copy_backbone needs an ensemble model");
    if (hy_ens_copy_backbone(m, src) != HY_OK) return l_raise(L);
    return 0;
}

void l_open_ens(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"ensemble", l_model_ensemble}, {"copy_backbone", l_model_copy_backbone}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"model_load", l_model_load}, {"ens_model_new", l_ens_model_new}, {NULL, NULL}};
    l_addmethods(L, L_MODEL, methods);
    l_setfuncs(L, fns);
}
