// Time limits for blocking GIO calls: a GCancellable cancelled by a timer thread.

import CLibsecret
import FoundationEssentials
import Glibc

/// Owns one `GCancellable` reference; shared between an operation and its timer so the timer can
/// never touch a freed object. `@unchecked`: the pointer never changes, and GCancellable is
/// thread-safe (GLib documents cancelling from another thread).
package final class CancellableBox: @unchecked Sendable {
    // GCancellable is documented thread-safe: cancel from one thread while another waits on it.
    /// The cancellable, valid while `self` lives.
    package let pointer: UnsafeMutablePointer<GCancellable>

    /// nil only if GLib cannot allocate (it aborts on out-of-memory before that happens).
    package init?() {
        guard let pointer = g_cancellable_new() else { return nil }
        self.pointer = pointer
    }

    deinit { g_object_unref(pointer) }

    /// Cancels every call that was given this cancellable.
    package func cancel() { g_cancellable_cancel(pointer) }
    /// True once cancelled.
    package var isCancelled: Bool { g_cancellable_is_cancelled(pointer) != 0 }
}

/// A time limit for one operation: a `GCancellable` that the process's deadline thread cancels
/// when the time is up. Every blocking GIO call of the operation gets `cancellable`, so one
/// deadline bounds the whole operation, however many D-Bus calls it makes. `@unchecked`: every
/// property is immutable.
package final class Deadline: @unchecked Sendable {
    /// The time limit it was made with.
    package let seconds: TimeInterval
    /// When the time is up, in nanoseconds of CLOCK_MONOTONIC.
    private let end: UInt64
    private let box: CancellableBox
    private let token: UInt64

    /// Starts the clock. Fails (`refused`) only when GLib cannot allocate a `GCancellable`.
    package init(seconds: TimeInterval) throws(GLibCall.Failure) {
        guard let box = CancellableBox() else { throw .refused }
        self.box = box
        self.seconds = seconds
        let span = max(0, min(seconds, 1e9))
        end = DeadlineThread.now() &+ UInt64(span * 1e9)
        token = DeadlineThread.shared.add(end: end, box: box)
    }

    deinit { DeadlineThread.shared.remove(token) }

    /// The cancellable to pass to GIO calls. Valid while `self` lives.
    package var cancellable: UnsafeMutablePointer<GCancellable> { box.pointer }
    /// True once the time is up.
    package var expired: Bool { box.isCancelled || DeadlineThread.now() >= end }
    /// Seconds left (0 when expired).
    package var remaining: TimeInterval {
        let now = DeadlineThread.now()
        guard now < end else { return 0 }
        return Double(end - now) / 1e9
    }
    /// What is left, for D-Bus calls that also take a millisecond timeout (at least 1 ms).
    package var remainingMilliseconds: Int32 { Int32(clamping: max(1, Int((remaining * 1000).rounded(.up)))) }
}

/// One thread per process that cancels deadlines when they expire, started with the first one.
///
/// Why not a DispatchSourceTimer: libdispatch starts its worker-thread machinery for the first
/// timer (an overcommit queue thread, a timerfd, epoll), about a millisecond of CPU in every
/// `lanyard token` against the keyring (bench/startup.sh); a plain thread waiting on a condition
/// variable costs a `clone`. The thread keeps waiting while the process lives.
/// `@unchecked`: every mutable property is guarded by `mutex`.
final class DeadlineThread: @unchecked Sendable {
    static let shared = DeadlineThread()

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var pending: [UInt64: (end: UInt64, box: CancellableBox)] = [:]
    private var nextToken: UInt64 = 0
    private var started = false

    private init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    func add(end: UInt64, box: CancellableBox) -> UInt64 {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        nextToken += 1
        pending[nextToken] = (end, box)
        if !started {
            started = true
            var thread = pthread_t()
            let context = Unmanaged.passRetained(self).toOpaque()
            if pthread_create(
                &thread,
                nil,
                { context in
                    Unmanaged<DeadlineThread>.fromOpaque(context!).takeRetainedValue().run()
                },
                context
            ) == 0 {
                pthread_detach(thread)
            } else {
                // No thread, no timer: calls still end at GDBus's own timeouts.
                Unmanaged<DeadlineThread>.fromOpaque(context).release()
                started = false
            }
        }
        pthread_cond_signal(condition)
        return nextToken
    }

    func remove(_ token: UInt64) {
        pthread_mutex_lock(mutex)
        pending[token] = nil
        pthread_mutex_unlock(mutex)
    }

    private func run() -> Never {
        pthread_mutex_lock(mutex)
        while true {
            guard let earliest = pending.values.map(\.end).min() else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let now = Self.now()
            if earliest > now {
                var until = timespec(tv_sec: Int(earliest / 1_000_000_000), tv_nsec: Int(earliest % 1_000_000_000))
                pthread_cond_timedwait(condition, mutex, &until)
                continue
            }
            let expired = pending.filter { $0.value.end <= now }
            for token in expired.keys { pending[token] = nil }
            // Cancelling runs GLib's handlers: not under our lock.
            pthread_mutex_unlock(mutex)
            for entry in expired.values { entry.box.cancel() }
            pthread_mutex_lock(mutex)
        }
    }
}
