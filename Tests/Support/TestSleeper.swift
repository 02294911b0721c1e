import Foundation
import LanyardAuth
import LanyardCore

/// A ``Sleeper`` that does not wait: it records each requested wait, advances a virtual clock by it
/// and runs a per-call hook (1-based call number), which is how tests script the server "while the
/// user thinks" (approve on the 3rd wait, deny, expire…) deterministically.
package final class TestSleeper: Sleeper, @unchecked Sendable {
    package typealias Hook = @Sendable (_ call: Int) async throws -> Void
    private let lock = NSLock()
    private var waits: [TimeInterval] = []
    package let clock: ManualClock?
    package let hook: Hook?

    package init(clock: ManualClock? = nil, hook: Hook? = nil) {
        self.clock = clock
        self.hook = hook
    }

    /// Every wait asked for, in order.
    package var requested: [TimeInterval] { lock.withLock { waits } }

    package func sleep(seconds: TimeInterval) async throws {
        let call = lock.withLock {
            waits.append(seconds)
            return waits.count
        }
        try Task.checkCancellation()
        clock?.advance(by: seconds)
        try await hook?(call)
        await Task.yield()
        try Task.checkCancellation()
    }
}
