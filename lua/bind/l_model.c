/* l_model.c: Lua binding of the model core module (filled in as the module lands). */
#include "bind.h"

void l_open_model(lua_State *L) { (void)L; }
