/* l_text.c: Lua binding of the text core module (filled in as the module lands). */
#include "bind.h"

void l_open_text(lua_State *L) { (void)L; }
