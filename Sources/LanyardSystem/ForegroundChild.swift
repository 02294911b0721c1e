import Glibc

/// Runs a program in the foreground for the user (`lanyard exec`): in this process group, so it
/// keeps the terminal and gets Ctrl-C from it (this process ignores SIGINT and SIGQUIT while it
/// runs), with SIGTERM and SIGHUP sent to this process forwarded to it. One at a time per process.
package enum ForegroundChild {
    /// Starts `spawn`, waits for it and returns its exit code (128 + the signal that ended it).
    /// Blocks the calling thread meanwhile; the signal dispositions are restored to their defaults
    /// afterwards.
    package static func run(_ spawn: Spawn) throws(SystemCallError) -> Int32 {
        for sig in [SIGINT, SIGQUIT] { signal(sig, SIG_IGN) }  // the child handles the terminal's signals
        defer { for sig in [SIGINT, SIGQUIT] { signal(sig, SIG_DFL) } }
        // Forwarding is in place before the child starts, so a signal that arrives while it starts
        // is delivered once it exists rather than lost. A plain sigaction handler (kill is
        // async-signal-safe) works whatever threads block the signal.
        forwardPID = 0
        forwardPending = 0
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { sig in
            if forwardPID > 0 { kill(forwardPID, sig) } else { forwardPending = sig }
        }
        sigemptyset(&action.sa_mask)
        for sig in [SIGTERM, SIGHUP] { sigaction(sig, &action, nil) }
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in [SIGTERM, SIGHUP] { sigaddset(&unblock, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        defer { for sig in [SIGTERM, SIGHUP] { signal(sig, SIG_DFL) } }
        let pid = try spawn.start()
        forwardPID = pid
        if forwardPending != 0 { kill(pid, forwardPending) }
        let status = (try? waitForExit(pid)) ?? 0
        forwardPID = 0
        return exitCode(ofWaitStatus: status)
    }
}

/// The child signals are forwarded to, and a signal that came before it existed (read by the
/// signal handler, hence plain globals).
nonisolated(unsafe) private var forwardPID: pid_t = 0
nonisolated(unsafe) private var forwardPending: Int32 = 0
