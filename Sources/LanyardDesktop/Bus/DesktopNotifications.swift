// Desktop notifications with actions (CStatusNotifier's desktop_notifications.c) behind a Swift
// API: Lanyard's one implementation of org.freedesktop.Notifications.Notify (the tray sends through
// it, and the agent through DesktopNotifier).

import CStatusNotifier
import Dispatch
import Glibc
import LanyardGLib
import LanyardSupport

/// One button of a notification: `key` comes back in ``DesktopNotificationEvent/actionInvoked(id:action:)``.
package struct DesktopNotificationAction: Sendable, Equatable {
    package var key: String
    package var label: String

    package init(key: String, label: String) {
        self.key = key
        self.label = label
    }
}

/// What the notification service answered or did.
package enum DesktopNotificationEvent: Sendable, Equatable {
    /// Notify for the request `token` was accepted as notification `id`.
    case sent(token: UInt64, id: UInt32)
    /// Notify for `token` failed (no service on the bus, a refusal, no answer in 5 s).
    case failed(token: UInt64, reason: String)
    /// A button of a notification sent here was chosen.
    case actionInvoked(id: UInt32, action: String)
    /// A notification sent here was closed (`reason`: 1 expired, 2 dismissed, 3 closed by a call, 4 other).
    case closed(id: UInt32, reason: UInt32)
}

/// `org.freedesktop.Notifications` with actions: Notify, and its ActionInvoked and
/// NotificationClosed signals for the notifications sent here. GDBus serves it from a GLib main
/// loop on a thread of its own, so nothing waits for the service: answers come as `events`.
/// `@unchecked`: the C object is thread-safe (requests are handed to its loop), and `stop` is
/// called once, by the owner.
package final class DesktopNotifications: @unchecked Sendable {
    private let handle: OpaquePointer
    private let sink: Sink
    /// Every answer and signal, in the order the bus delivered them.
    package let events: AsyncStream<DesktopNotificationEvent>

    /// Keeps the stream's continuation alive for the C callbacks (which get it unretained), and
    /// hands the answers someone waits for (``sendWaiting``) to them instead of the stream.
    private final class Sink: Sendable {
        let continuation: AsyncStream<DesktopNotificationEvent>.Continuation
        let waiters = Locked<[UInt64: Waiter]>([:])
        init(_ continuation: AsyncStream<DesktopNotificationEvent>.Continuation) { self.continuation = continuation }

        func deliver(_ event: DesktopNotificationEvent, token: UInt64) {
            if let waiter = waiters.withLock({ $0.removeValue(forKey: token) }) {
                waiter.outcome = event
                waiter.answered.signal()
            } else {
                continuation.yield(event)
            }
        }
    }

    /// One caller waiting for Notify's answer. `@unchecked`: `outcome` is written before
    /// `answered` is signalled and read after the wait returns.
    private final class Waiter: @unchecked Sendable {
        let answered = DispatchSemaphore(value: 0)
        var outcome: DesktopNotificationEvent?
    }

    /// Tokens of ``sendWaiting`` (the high half, apart from the tokens callers choose).
    private let waitedTokens = Locked<UInt64>(1 << 63)

    /// Loads GLib and GIO (first use), connects to the session bus and listens for the signals.
    /// Blocks while connecting: not on a cooperative thread.
    package init() throws(StatusNotifierFailure) {
        if let reason = LazyLibraries.desktopLoadFailure() { throw StatusNotifierFailure(description: reason) }
        let (events, continuation) = AsyncStream<DesktopNotificationEvent>.makeStream(bufferingPolicy: .unbounded)
        let sink = Sink(continuation)
        var message = [CChar](repeating: 0, count: 512)
        let onReply: lanyard_notify_reply_fn = { context, token, id, error in
            let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
            if let error {
                sink.deliver(.failed(token: token, reason: String(cString: error)), token: token)
            } else {
                sink.deliver(.sent(token: token, id: id), token: token)
            }
        }
        let onSignal: lanyard_notification_signal_fn = { context, id, action, reason in
            let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
            if let action {
                sink.continuation.yield(.actionInvoked(id: id, action: String(cString: action)))
            } else {
                sink.continuation.yield(.closed(id: id, reason: reason))
            }
        }
        guard
            let handle = lanyard_notifications_start(
                onReply,
                onSignal,
                Unmanaged.passUnretained(sink).toOpaque(),
                &message,
                Int32(message.count)
            )
        else {
            throw StatusNotifierFailure(description: String(nulTerminated: message))
        }
        self.handle = handle
        self.sink = sink
        self.events = events
    }

    /// Sends one notification (does not wait: the answer is an event with `token`).
    /// - Parameters:
    ///   - icon: the `app_icon`, a theme icon name: Lanyard's own (``LanyardIcon/name``).
    ///   - image: sent as the `image-data` hint, which servers show before `app_icon`: Lanyard's
    ///     icon as pixels, so it shows where the theme lacks the name.
    ///   - urgency: 0 low, 1 normal, 2 critical.
    package func send(
        token: UInt64,
        summary: String,
        body: String,
        actions: [DesktopNotificationAction] = [],
        icon: String = LanyardIcon.name,
        image: NotificationImage? = LanyardIcon.notificationImage,
        urgency: UInt8 = 1,
        timeoutMilliseconds: Int32 = -1
    ) {
        let texts: [String] = actions.flatMap { [$0.key, $0.label] }
        let strings: [UnsafeMutablePointer<CChar>] = texts.map { strdup($0)! }
        defer { for pointer in strings { free(pointer) } }
        let pointers: [UnsafePointer<CChar>?] = strings.map { UnsafePointer($0) }
        let count = Int32(pointers.count)
        func send(_ picture: UnsafePointer<lanyard_notification_image>?) {
            lanyard_notifications_send(
                handle,
                token,
                "Lanyard",
                icon,
                summary,
                body,
                pointers,
                count,
                picture,
                urgency,
                timeoutMilliseconds
            )
        }
        guard let image else { return send(nil) }
        image.rgba.withUnsafeBufferPointer { pixels in
            var picture = lanyard_notification_image(
                width: Int32(image.width),
                height: Int32(image.height),
                rgba: pixels.baseAddress
            )
            send(&picture)
        }
    }

    /// Sends one notification and waits for the service's answer, at most `timeoutSeconds` (for
    /// synchronous callers: the agent). Blocks: not on a cooperative thread.
    /// - Returns: nil when the service took it, else why not.
    package func sendWaiting(
        summary: String,
        body: String,
        icon: String = LanyardIcon.name,
        urgency: UInt8 = 1,
        timeoutSeconds: Double = 2
    ) -> String? {
        let token = waitedTokens.withLock { next in
            next += 1
            return next
        }
        let waiter = Waiter()
        sink.waiters.withLock { $0[token] = waiter }
        send(token: token, summary: summary, body: body, icon: icon, urgency: urgency)
        guard waiter.answered.wait(timeout: .now() + timeoutSeconds) == .success else {
            // Too late: a late answer goes to the stream, which no one reads for these tokens.
            if sink.waiters.withLock({ $0.removeValue(forKey: token) }) != nil {
                return "the notification service did not answer within \(Int(timeoutSeconds.rounded(.up))) s"
            }
            waiter.answered.wait()  // answered between the timeout and the removal
            return Self.problem(waiter.outcome)
        }
        return Self.problem(waiter.outcome)
    }

    private static func problem(_ outcome: DesktopNotificationEvent?) -> String? {
        if case .failed(_, let reason)? = outcome { return reason }
        return nil
    }

    /// Stops listening and ends `events`. Call once, not on a cooperative thread (it joins the loop's thread).
    package func stop() {
        lanyard_notifications_stop(handle)
        sink.continuation.finish()
    }
}
