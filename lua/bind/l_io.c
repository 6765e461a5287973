/* l_io.c: Lua binding of the io core module (filled in as the module lands). */
#include "bind.h"

void l_open_io(lua_State *L) { (void)L; }
