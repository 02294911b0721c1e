import Glibc
import LanyardSupport
import Synchronization

/// Ctrl-C (SIGINT) and SIGTERM, handed to the code that wants them: while at least one
/// ``InterruptWatch`` is open, this process handles both signals itself instead of taking their
/// default action, and runs every open watch's handler on a thread of its own.
///
/// Why not a dispatch signal source: on Linux libdispatch installs its own handler only when the
/// source is registered, later and on another thread, and only the first time in the process for a
/// given signal. A signal sent in between (`lanyard agent` has announced itself; its service manager
/// or a test sends SIGTERM at once) met the disposition the caller had set meanwhile, and was lost;
/// and a second source for the same signal found the first one's handler replaced and never put back.
/// Here the handler is in place when ``watch(_:)`` returns, and it is the same for every watch.
package enum InterruptSignals {
    /// Runs `handler` on each SIGINT or SIGTERM this process receives, until the returned watch is
    /// cancelled. The handler runs on a thread that does nothing else, so it must not block for
    /// long; a signal that arrives while no watch is open takes its default action again.
    package static func watch(_ handler: @escaping @Sendable () -> Void) -> InterruptWatch {
        let watch = InterruptWatch()
        state.withLock { state in
            // Without its reader (no pipe or thread left in the process) the handler would swallow
            // the signals: they keep their default action then.
            if state.handlers.isEmpty && startReaderIfNeeded(&state) {
                var action = sigaction()
                action.__sigaction_handler.sa_handler = { _ in
                    // Only async-signal-safe calls: one byte down a non-blocking pipe, errno kept.
                    let savedErrno = errno
                    var byte: UInt8 = 1
                    _ = write(interruptPipeWriteEnd, &byte, 1)
                    errno = savedErrno
                }
                sigemptyset(&action.sa_mask)
                action.sa_flags = SA_RESTART
                for (index, sig) in signals.enumerated() {
                    sigaction(sig, &action, &state.previous[index])
                }
            }
            state.handlers[ObjectIdentifier(watch)] = handler
        }
        // The parent may have started this thread with the signals blocked; the handler must run.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in signals { sigaddset(&unblock, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        return watch
    }

    /// Closes `watch`; with the last one closed the signals' earlier dispositions are restored.
    fileprivate static func close(_ watch: InterruptWatch) {
        state.withLock { state in
            guard state.handlers.removeValue(forKey: ObjectIdentifier(watch)) != nil,
                state.handlers.isEmpty, state.readerStarted
            else { return }
            for (index, sig) in signals.enumerated() {
                sigaction(sig, &state.previous[index], nil)
            }
        }
    }

    private static let signals = [SIGINT, SIGTERM]

    private struct State: ~Copyable {
        var handlers: [ObjectIdentifier: @Sendable () -> Void] = [:]
        var previous = [Glibc.sigaction](repeating: Glibc.sigaction(), count: InterruptSignals.signals.count)
        var readerStarted = false
    }

    private static let state = Mutex(State())

    /// The pipe the handler writes to and the thread that reads it, made once per process; false
    /// when they cannot be made.
    private static func startReaderIfNeeded(_ state: inout State) -> Bool {
        guard !state.readerStarted else { return true }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return false }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // A burst of signals never blocks the handler: a full pipe already says "interrupted".
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        interruptPipeReadEnd = ends[0]
        interruptPipeWriteEnd = ends[1]
        state.readerStarted = DetachedThread.start { InterruptSignals.readForever() }
        if !state.readerStarted { for end in ends { Glibc.close(end) } }
        return state.readerStarted
    }

    /// The reader thread: each byte is one signal; every open watch's handler runs for it. Returns
    /// only if the pipe fails, which ends the thread.
    private static func readForever() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = read(interruptPipeReadEnd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            let handlers = state.withLock { Array($0.handlers.values) }
            for handler in handlers { handler() }
        }
    }
}

/// One caller's interest in SIGINT and SIGTERM (see ``InterruptSignals``); ``cancel()`` ends it.
package final class InterruptWatch: Sendable {
    fileprivate init() {}

    /// Stops this watch's handler; safe to call more than once.
    package func cancel() { InterruptSignals.close(self) }

    deinit { InterruptSignals.close(self) }
}

/// The pipe's ends: globals, because the signal handler can capture nothing.
nonisolated(unsafe) private var interruptPipeWriteEnd: Int32 = -1
nonisolated(unsafe) private var interruptPipeReadEnd: Int32 = -1
