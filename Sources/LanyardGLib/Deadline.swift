// Time limits for blocking GIO calls: a GCancellable cancelled by a timer.

import CLibsecret
import Dispatch
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

/// A time limit for one operation: a `GCancellable` that a timer on a private queue cancels
/// when the time is up. Every blocking GIO call of the operation gets `cancellable`, so one
/// deadline bounds the whole operation, however many D-Bus calls it makes. `@unchecked`: every
/// property is immutable; DispatchSourceTimer is thread-safe but not marked `Sendable`.
package final class Deadline: @unchecked Sendable {
    // The timer queue is overcommitting (a serial queue of its own), so it fires even when every
    // cooperative-pool thread is blocked in a keyring call.
    private static let timerQueue = DispatchQueue(label: "dev.lanyard.secret-service.deadline")

    /// The time limit it was made with.
    package let seconds: TimeInterval
    /// When the time is up.
    package let end: DispatchTime
    private let box: CancellableBox
    private let timer: DispatchSourceTimer

    /// Starts the clock. Fails (`refused`) only when GLib cannot allocate a `GCancellable`.
    package init(seconds: TimeInterval) throws(GLibCall.Failure) {
        guard let box = CancellableBox() else { throw .refused }
        self.box = box
        self.seconds = seconds
        end = .now() + max(0, seconds)
        timer = DispatchSource.makeTimerSource(queue: Deadline.timerQueue)
        timer.schedule(deadline: end)
        timer.setEventHandler { [box] in box.cancel() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// The cancellable to pass to GIO calls. Valid while `self` lives.
    package var cancellable: UnsafeMutablePointer<GCancellable> { box.pointer }
    /// True once the time is up.
    package var expired: Bool { box.isCancelled || DispatchTime.now() >= end }
    /// Seconds left (0 when expired).
    package var remaining: TimeInterval {
        let now = DispatchTime.now()
        guard now < end else { return 0 }
        return Double(end.uptimeNanoseconds - now.uptimeNanoseconds) / 1e9
    }
    /// What is left, for D-Bus calls that also take a millisecond timeout (at least 1 ms).
    package var remainingMilliseconds: Int32 { Int32(clamping: max(1, Int((remaining * 1000).rounded(.up)))) }
}
