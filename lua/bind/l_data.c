/* l_data.c: Lua binding of the data core module (filled in as the module lands). */
#include "bind.h"

void l_open_data(lua_State *L) { (void)L; }
