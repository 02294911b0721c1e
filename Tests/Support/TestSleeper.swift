import Foundation
import LanyardAuth
import LanyardCore

/// A ``Sleeper`` that does not wait: it records each requested wait, advances a virtual clock by it
/// and runs a per-call hook (1-based call number), which is how tests script the server "while the
/// user thinks" (approve on the 3rd wait, deny, expire…) deterministically.
public final class TestSleeper: Sleeper, @unchecked Sendable {
    public typealias Hook = @Sendable (_ call: Int) async throws -> Void
    private let lock = NSLock()
    private var waits: [TimeInterval] = []
    public let clock: ManualClock?
    public let hook: Hook?

    public init(clock: ManualClock? = nil, hook: Hook? = nil) {
        self.clock = clock
        self.hook = hook
    }

    /// Every wait asked for, in order.
    public var requested: [TimeInterval] { lock.withLock { waits } }

    public func sleep(seconds: TimeInterval) async throws {
        let call = lock.withLock { waits.append(seconds); return waits.count }
        try Task.checkCancellation()
        clock?.advance(by: seconds)
        try await hook?(call)
        await Task.yield()
        try Task.checkCancellation()
    }
}
