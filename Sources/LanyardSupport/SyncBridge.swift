import Dispatch

/// The one way synchronous code waits for async work: the CLI's main thread running a command,
/// the agent's own thread, a follower loop on a ``BlockingExecutor`` thread. The work runs as a
/// detached task on the cooperative pool while the calling thread waits.
///
/// Never called from inside a task (debug builds assert it): there the wait would hold one of the
/// cooperative pool's few threads, and the work it waits for may need that very thread. Async code
/// awaits the async API instead, and hands blocking calls to ``BlockingExecutor``.
package enum SyncBridge {
    /// Runs `work` and returns its result (or throws its error) once it is done.
    /// - Parameter whileWaiting: called before the wait with a closure that cancels `work` (for a
    ///   Ctrl-C handler); whatever it sets up, the caller tears down after ``wait(_:whileWaiting:)``
    ///   returns.
    package static func wait<T: Sendable>(
        _ work: @escaping @Sendable () async throws -> T,
        whileWaiting: (_ cancel: @escaping @Sendable () -> Void) -> Void = { _ in }
    ) throws -> T {
        assert(!isInsideTask, "SyncBridge.wait called from inside a task: await the async API instead")
        let result = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = Task.detached {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        whileWaiting { task.cancel() }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    /// ``wait(_:whileWaiting:)`` for work that cannot fail: its value.
    package static func value<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
        // The throwing form cannot throw when `work` does not.
        try! wait({ await work() } as @Sendable () async throws -> T)
    }

    /// Whether the calling code runs inside a task (on a cooperative thread, or synchronously
    /// called from one).
    package static var isInsideTask: Bool { withUnsafeCurrentTask { $0 != nil } }
}
