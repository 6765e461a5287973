/* l_config.c: Lua binding of the config core module (filled in as the module lands). */
#include "bind.h"

void l_open_config(lua_State *L) { (void)L; }
