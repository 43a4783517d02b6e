#include "mpath.h"

_Atomic uint32_t vramtap_module_current;
