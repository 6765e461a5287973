/* l_metrics.c: Lua binding of the metrics core module (filled in as the module lands). */
#include "bind.h"

void l_open_metrics(lua_State *L) { (void)L; }
