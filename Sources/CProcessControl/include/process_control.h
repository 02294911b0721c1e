// prctl(2) is variadic, which Swift cannot call; this names the one use Lanyard has for it.
#ifndef LANYARD_PROCESS_CONTROL_H
#define LANYARD_PROCESS_CONTROL_H

/// prctl(PR_SET_DUMPABLE, 0): no core dump of this process, and no ptrace or /proc/PID/mem,
/// environ, fd … by other processes of the same user. Reset by execve for the programs it runs.
/// Returns 0, or -1 with errno set.
int lanyard_set_not_dumpable(void);

/// prctl(PR_GET_DUMPABLE): 1 when dumpable, 0 when not, -1 on error.
int lanyard_dumpable(void);

#endif
