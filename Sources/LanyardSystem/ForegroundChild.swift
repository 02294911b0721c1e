import Glibc

/// Runs a program in the foreground for the user (`lanyard exec`): in this process group, so it
/// keeps the terminal and gets Ctrl-C from it (this process ignores SIGINT and SIGQUIT while it
/// runs), with SIGTERM and SIGHUP sent to this process forwarded to it. One at a time per process.
package enum ForegroundChild {
    /// Starts `spawn`, waits for it and returns its exit code (128 + the signal that ended it).
    /// Blocks the calling thread meanwhile; the signal dispositions are restored to their defaults
    /// afterwards.
    package static func run(_ spawn: Spawn) throws(SystemCallError) -> Int32 {
        beginForwarding()
        defer { endForwarding() }
        let pid = try start(spawn)
        let status = (try? waitForExit(pid)) ?? 0
        forwardPID = 0
        return exitCode(ofWaitStatus: status)
    }

    /// Takes the terminal's signals away from this process and forwards SIGTERM and SIGHUP to the
    /// child ``start(_:)`` starts next, until ``endForwarding()``. For a caller that runs several
    /// children in turn (`exec --follow`); ``run(_:)`` is this around one child.
    package static func beginForwarding() {
        for sig in [SIGINT, SIGQUIT] { signal(sig, SIG_IGN) }  // the child handles the terminal's signals
        // Forwarding is in place before the child starts, so a signal that arrives while it starts
        // is delivered once it exists rather than lost. A plain sigaction handler (kill is
        // async-signal-safe) works whatever threads block the signal.
        forwardPID = 0
        forwardPending = 0
        forwardedSignal = 0
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { sig in
            forwardedSignal = sig
            if forwardPID > 0 { kill(forwardPID, sig) } else { forwardPending = sig }
        }
        sigemptyset(&action.sa_mask)
        for sig in [SIGTERM, SIGHUP] { sigaction(sig, &action, nil) }
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in [SIGTERM, SIGHUP] { sigaddset(&unblock, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// Restores the default dispositions ``beginForwarding()`` changed.
    package static func endForwarding() {
        forwardPID = 0
        for sig in [SIGINT, SIGQUIT, SIGTERM, SIGHUP] { signal(sig, SIG_DFL) }
    }

    /// Starts `spawn` as the child signals are forwarded to (a signal that came before it existed
    /// is delivered now). Between ``beginForwarding()`` and ``endForwarding()``.
    package static func start(_ spawn: Spawn) throws(SystemCallError) -> pid_t {
        let pid = try spawn.start()
        forwardPID = pid
        if forwardPending != 0 { kill(pid, forwardPending) }
        return pid
    }

    /// The child has ended (not yet reaped): nothing more is forwarded to its pid.
    package static func ended() { forwardPID = 0 }

    /// SIGTERM or SIGHUP, when one was sent to this process since ``beginForwarding()`` (and
    /// passed on to the child): the user wants it all to end, not a child started again.
    package static var terminationRequested: Int32 { forwardedSignal }
}

/// The child signals are forwarded to, a signal that came before it existed, and the last one
/// forwarded (read and written by the signal handler, hence plain globals).
nonisolated(unsafe) private var forwardPID: pid_t = 0
nonisolated(unsafe) private var forwardPending: Int32 = 0
nonisolated(unsafe) private var forwardedSignal: Int32 = 0

/// A child that is watched without being reaped until its caller says so, so signalling it by pid
/// can never reach another process that reused the pid: ``waitForEnd()`` (on a thread of its own)
/// makes ``endedDescriptor`` readable once it has ended, and ``reap()`` collects its status.
package final class WatchedChild: Sendable {
    package let pid: pid_t
    private let ended: (read: Int32, write: Int32)

    /// Watches `pid`, a child of this process.
    package init(pid: pid_t) throws(SystemCallError) {
        self.pid = pid
        ended = try closeOnExecPipe()
    }

    deinit {
        close(ended.read)
        close(ended.write)
    }

    /// Readable once the child has ended (for poll, beside other descriptors).
    package var endedDescriptor: Int32 { ended.read }

    /// Blocks until the child has ended, without reaping it, then marks ``endedDescriptor``.
    package func waitForEnd() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        var byte: UInt8 = 1
        _ = retryingOnInterrupt { write(ended.write, &byte, 1) }
    }

    /// Sends `sig` to the child (a zombie until reaped, so never to a stranger).
    package func signal(_ sig: Int32) { kill(pid, sig) }

    /// What ``wait(orChangeOf:timeout:)`` saw.
    package enum Wake: Equatable, Sendable {
        case ended
        case changed
        case timedOut
    }

    /// Blocks until the child has ended, `watch` (a descriptor, -1 for none) is readable, or
    /// `timeout` seconds pass (nil: no limit). The child's end wins when both happened.
    package func wait(orChangeOf watch: Int32, timeout: Double?) -> Wake {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = timeout.map { Double(deadline.tv_sec) + Double(deadline.tv_nsec) / 1e9 + $0 }
        while true {
            var fds = [
                pollfd(fd: ended.read, events: Int16(POLLIN), revents: 0),
                pollfd(fd: watch, events: Int16(POLLIN), revents: 0),
            ]
            var wait: Int32 = -1
            if let end {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let left = end - (Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
                if left <= 0 { return .timedOut }
                wait = Int32(min((left * 1000).rounded(.up), Double(Int32.max)))
            }
            let n = poll(&fds, watch >= 0 ? 2 : 1, wait)
            if n < 0 && errno == EINTR { continue }
            if fds[0].revents != 0 { return .ended }
            if n > 0 && fds[1].revents != 0 { return .changed }
            if n == 0 { return .timedOut }
        }
    }

    /// Collects the ended child's exit code (128 + the signal that ended it). Call after
    /// ``wait(orChangeOf:timeout:)`` said it ended.
    package func reap() -> Int32 {
        ForegroundChild.ended()
        return exitCode(ofWaitStatus: (try? waitForExit(pid)) ?? 0)
    }
}

/// The terminal modes of standard input, saved before a child takes the terminal and put back
/// after it was stopped: a program killed in raw mode (a full-screen one like Codex) leaves the
/// terminal without echo or line editing.
package struct TerminalModes: @unchecked Sendable {
    private let saved: termios?

    /// The modes now, when standard input is a terminal.
    package static func save() -> TerminalModes {
        var modes = termios()
        return TerminalModes(saved: isatty(0) == 1 && tcgetattr(0, &modes) == 0 ? modes : nil)
    }

    /// Puts the saved modes back, when this process is in the terminal's foreground (from the
    /// background, tcsetattr would stop it with SIGTTOU, and the modes are not ours to change).
    package func restore() {
        guard var modes = saved, tcgetpgrp(0) == getpgrp() else { return }
        _ = retryingOnInterrupt { tcsetattr(0, TCSADRAIN, &modes) }
    }
}
