import Foundation

/// A value that is only read and written under its lock, so a type holding one can be checked
/// `Sendable` by the compiler.
///
/// Why not the standard library's `Synchronization.Mutex`: on Linux it locks with raw futex calls,
/// which Thread Sanitizer cannot see, so `make check`'s TSan run reported races between accesses
/// that the mutex did order. This lock is a pthread mutex (NSLock), which TSan understands. This is
/// the one `@unchecked Sendable` that the lock itself justifies: every access to `value` goes
/// through ``withLock(_:)``.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
