#!/usr/bin/env python3
"""Runs a command as a child subreaper (PR_SET_CHILD_SUBREAPER), for scripts/soak/concurrency.sh.

Processes of the soak that outlive their parent (a `lanyard-net refresh-worker` whose caller went
away, say) are re-parented to this process instead of to PID 1, which in some containers never
reaps anything (every orphan would end as a zombie there, whoever's fault). Each adopted process
that exits is reaped here and recorded, with its name, in the file named by $SOAK_ORPHANS_LOG
(one line "pid comm status"), so the soak can tell "a lanyard process outlived its caller".
Exports SOAK_REAPER_PID: the soak's processes are the descendants of that process.
Forwards SIGINT/SIGTERM/SIGHUP to the child and exits with the child's status.

  reaper.py CMD [ARG...]
"""
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: reaper.py CMD [ARG...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("reaper.py: prctl(PR_SET_CHILD_SUBREAPER) failed; running without it", file=sys.stderr)
    log_path = os.environ.get("SOAK_ORPHANS_LOG")
    # Lanyard's processes are not dumpable (their /proc/PID/environ is root's): the soak tells its
    # own by descent from this process, which every one of them has (orphans are adopted here).
    os.environ["SOAK_REAPER_PID"] = str(os.getpid())
    child = os.fork()
    if child == 0:
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        except OSError as e:
            print(f"reaper.py: cannot run {sys.argv[1]}: {e}", file=sys.stderr)
            os._exit(127)

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)

    status = None
    give_up = None
    while True:
        flags = os.WEXITED | os.WNOWAIT | (os.WNOHANG if status is not None else 0)
        try:
            # Peek first (WNOWAIT) so the name of an adopted process can still be read.
            info = os.waitid(os.P_ALL, 0, flags)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if info is None:
            # The child is gone and adopted processes still run: the soak has reported (and
            # stopped) its leftovers; give the rest 2 s, then leave them.
            if time.monotonic() > give_up:
                break
            time.sleep(0.05)
            continue
        pid = info.si_pid
        comm = "?"
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            pass
        try:
            _, raw = os.waitpid(pid, 0)
        except ChildProcessError:
            continue
        code = os.waitstatus_to_exitcode(raw)
        if pid == child:
            status = code if code >= 0 else 128 - code
            give_up = time.monotonic() + 2
            continue
        if log_path:
            try:
                with open(log_path, "a") as f:
                    f.write(f"{pid} {comm} {code}\n")
            except OSError:
                pass
    return 1 if status is None else status


if __name__ == "__main__":
    sys.exit(main())
