import Dispatch
import Glibc
import LanyardSupport
import LanyardSystem
import LanyardTestSupport
import Testing

/// Ctrl-C and SIGTERM reach a command that said it handles them: the moment it says so, and in
/// every later operation of the same process. Each runs in a process of its own, since a signal
/// reaches the whole process and a lost one would end every test beside it.
@Suite struct InterruptSignalTests {
    /// The signal is sent right after the watch opens, as `lanyard agent`'s service manager does
    /// once the agent says it started; then again with a second and a third watch in the same
    /// process, as `lanyard usage` opens one per slot. A dispatch signal source lost the first (its
    /// handler was not in place yet) and the third (a second source for the same signal has none).
    @Test func aSignalSentTheMomentAWatchOpensReachesItsHandlerEveryTime() async throws {
        try await inProcessOfItsOwn("InterruptSignalTests/aSignalSentTheMomentAWatchOpensReachesItsHandlerEveryTime") {
            for (index, sig) in [SIGTERM, SIGINT, SIGTERM].enumerated() {
                let received = DispatchSemaphore(value: 0)
                let watch = InterruptSignals.watch { received.signal() }
                kill(getpid(), sig)
                // Bounded only so that a lost signal fails the test instead of hanging it.
                let arrived = await BlockingExecutor.shared.run { received.wait(timeout: .now() + 120) == .success }
                watch.cancel()
                #expect(arrived, "watch \(index + 1): signal \(sig) never reached its handler")
            }
        }
    }

    /// With no watch open, the signals take their default action again (the command has finished
    /// what it could stop cleanly).
    @Test func closingTheLastWatchRestoresTheDefaultAction() async throws {
        try await inProcessOfItsOwn("InterruptSignalTests/closingTheLastWatchRestoresTheDefaultAction") {
            let outer = InterruptSignals.watch {}
            let inner = InterruptSignals.watch {}
            inner.cancel()
            #expect(Self.disposition(SIGTERM) != Self.defaultAction, "one watch is still open")
            outer.cancel()
            for sig in [SIGINT, SIGTERM] {
                #expect(Self.disposition(sig) == Self.defaultAction, "signal \(sig)")
            }
        }
    }

    private static let defaultAction = unsafeBitCast(SIG_DFL, to: Int.self)

    private static func disposition(_ sig: Int32) -> Int {
        var action = sigaction()
        sigaction(sig, nil, &action)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
    }
}
