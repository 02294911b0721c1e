#include <sys/prctl.h>
#include "process_control.h"

int lanyard_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int lanyard_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
