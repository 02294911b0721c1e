#if canImport(Glibc)
import Glibc
#endif

/// A value that is only read and written under its lock, so a type holding one can be checked
/// `Sendable` by the compiler.
///
/// Why not the standard library's `Synchronization.Mutex`: on Linux it locks with raw futex calls,
/// which Thread Sanitizer cannot see, so `make check`'s TSan run reported races between accesses
/// that the mutex did order. This lock is a pthread mutex, which TSan understands (and not NSLock,
/// which is in full Foundation, not linked by the command-line binary). This is the one
/// `@unchecked Sendable` that the lock itself justifies: every access to `value` goes through
/// ``withLock(_:)``.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex = PthreadMutex()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}

/// A pthread mutex that can give up waiting: for callers that hold it across blocking calls with a
/// deadline (the Secret Service connection), where NSLock's `lock(before:)` was used.
package final class TimedLock: @unchecked Sendable {
    private let mutex = PthreadMutex()

    package init() {}

    /// Takes the lock, waiting at most `seconds`; false when the time ran out first.
    package func lock(within seconds: Double) -> Bool { mutex.lock(within: seconds) }

    package func unlock() { mutex.unlock() }
}

/// One heap-allocated pthread mutex (its address must not move), shared by the two locks above.
final class PthreadMutex: @unchecked Sendable {
    private let pointer: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: pthread_mutex_t())
        pthread_mutex_init(pointer, nil)
    }

    deinit {
        pthread_mutex_destroy(pointer)
        pointer.deallocate()
    }

    func lock() { pthread_mutex_lock(pointer) }
    func unlock() { pthread_mutex_unlock(pointer) }

    func lock(within seconds: Double) -> Bool {
        if pthread_mutex_trylock(pointer) == 0 { return true }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var total = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + max(0, seconds)
        if total > Double(Int.max / 2) { total = Double(Int.max / 2) }
        var until = timespec(tv_sec: Int(total), tv_nsec: Int((total - total.rounded(.down)) * 1e9))
        while true {
            let result = pthread_mutex_timedlock(pointer, &until)
            if result == 0 { return true }
            if result != EINTR { return false }
        }
    }
}
