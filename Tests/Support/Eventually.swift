#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Foundation
import LanyardSupport
import Testing

// How a test waits until something holds (a server counted a request, a process printed a line, a
// file gained an event): with `eventually`, never with a poll loop of its own. Every test must pass
// on a busy 2-core machine; these three keep what that takes in one place: a generous bound, the
// verdict from a probe taken after it, and the last value seen in the failure.

/// Waits until `condition` holds for what `probe` returns, checking every 50 ms, for at most
/// `seconds`; fails with `what` and the last value. The one helper for waiting in a test: use it
/// (or its twins below, for an async probe and for a synchronous test) instead of a poll loop.
///
/// A bound, not a schedule: a passing test returns as soon as the condition holds, so the bound
/// costs nothing and is generous (90 s) by default. A shorter one is a bet on the machine's speed,
/// which a loaded 2-core machine loses; pass another only for a reason the test states.
///
/// Each probe runs on the blocking executor, not on the test's cooperative thread: probes run
/// child processes (gdbus, dbusmenu-dumper) and wait for them, and with every test of the suite
/// running at once, tray tests probing every 50 ms on Swift's two cooperative threads starved the
/// whole process (a test whose tray registered 35 ms after start was reported passing after
/// 121 s). And the verdict comes from a probe made after the bound has passed: a test starved for
/// longer than the bound used to fail on its last probe, taken before the tray had registered
/// (`TrayAutostartTests.aSecondTrayInTheSessionExitsAtOnce`, "never listed within 90 s", the
/// tray alive and silent).
///
/// Make the probe return what the failure should show (the text seen so far, the events logged,
/// a process's state and the end of its log) rather than a bare `Bool`, but never a secret: the
/// failure prints it. An error the probe throws ends the wait at once: throw when waiting longer
/// cannot help (the process being waited for exited).
@discardableResult
package func eventually<Value: Sendable>(
    _ what: String,
    seconds: Double = 90,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ probe: @escaping () throws -> Value,
    until condition: (Value) -> Bool
) async throws -> Value {
    let deadline = ContinuousClock.now + .seconds(seconds)
    let boxed = Probe(run: probe)
    while true {
        let late = ContinuousClock.now >= deadline
        let last = try await BlockingExecutor.shared.run { try boxed.run() }
        if condition(last) { return last }
        if late { throw timedOut(what, seconds, last, sourceLocation) }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// ``eventually(_:seconds:sourceLocation:_:until:)`` for a probe that awaits (a test server's
/// counters over HTTP): the same bound, verdict and failure. The probe runs on the test's task, so
/// it must not block; a probe that does takes the other form.
@discardableResult
package func eventually<Value>(
    _ what: String,
    seconds: Double = 90,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ probe: () async throws -> Value,
    until condition: (Value) -> Bool
) async throws -> Value {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while true {
        let late = ContinuousClock.now >= deadline
        let last = try await probe()
        if condition(last) { return last }
        if late { throw timedOut(what, seconds, last, sourceLocation) }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// ``eventually(_:seconds:sourceLocation:_:until:)`` for a synchronous test (one that calls the
/// library's blocking APIs, as the etcd suites do) and the fixtures it starts: the same bound,
/// verdict and failure, probing every `interval` (50 ms unless the probe itself changes what it
/// observes, as a use renews an etcd token). It blocks the calling thread between probes, which a
/// synchronous test owns; async code cannot call it.
@available(*, noasync)
@discardableResult
package func eventually<Value>(
    _ what: String,
    seconds: Double = 90,
    every interval: Duration = .milliseconds(50),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ probe: () throws -> Value,
    until condition: (Value) -> Bool
) throws -> Value {
    let deadline = ContinuousClock.now + .seconds(seconds)
    let pause = interval.components
    let microseconds = pause.seconds * 1_000_000 + pause.attoseconds / 1_000_000_000_000
    while true {
        let late = ContinuousClock.now >= deadline
        let last = try probe()
        if condition(last) { return last }
        if late { throw timedOut(what, seconds, last, sourceLocation) }
        usleep(UInt32(microseconds))
    }
}

/// A probe sent to the blocking executor. It runs while the waiting task waits for it, never beside
/// the test's own code: `@unchecked`.
private struct Probe<Value>: @unchecked Sendable { let run: () throws -> Value }

/// Records the failure of a wait (what was awaited, the bound, the last value seen) where the test
/// waited, and returns the error that ends the test.
private func timedOut(_ what: String, _ seconds: Double, _ last: some Any, _ location: SourceLocation) -> ServerError {
    Issue.record("\(what) within \(seconds) s; last seen:\n\(last)", sourceLocation: location)
    return ServerError("timed out: \(what)")
}

/// What `pipe` holds now, without waiting for more (the output a process printed so far, for a
/// probe of ``eventually(_:seconds:sourceLocation:_:until:)``).
package func availableText(_ pipe: Pipe) -> String {
    let fd = pipe.fileHandleForReading.fileDescriptor
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    var out = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    return String(decoding: out, as: UTF8.self)
}

/// Blocking work started on a thread of its own at once, from the test's own code, whose result
/// the test awaits later (a watch, an agent's `run()`). Not `Task { await BlockingExecutor.shared
/// .run(.ownThread) { … } }`: that task needs a cooperative thread before its work can start, and in
/// a full parallel run those are busy for minutes on end, so a bound the test started meanwhile
/// (waiting for the watch to open) ran out before the work had begun.
package final class WorkOnItsOwnThread<Value: Sendable>: Sendable {
    private let result = Locked<Result<Value, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// Starts `body` now.
    package init(_ body: @escaping @Sendable () throws -> Value) {
        BlockingExecutor.shared.submitOnOwnThread { [result, done] in
            let outcome = Result { try body() }
            result.withLock { $0 = outcome }
            done.signal()
        }
    }

    /// What `body` returned or threw, once it has ended.
    package var value: Value {
        get async throws {
            await BlockingExecutor.shared.run(.ownThread) { [done] in
                done.wait()
                done.signal()  // for the next reader
            }
            return try result.withLock { $0 }!.get()
        }
    }
}
#endif
