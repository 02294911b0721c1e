import LanyardSupport

/// Desktop notifications from synchronous code (the agent's thread), through
/// ``DesktopNotifications``, the one sender of `org.freedesktop.Notifications.Notify`. Its
/// connection and listening thread start at the first notification and stay for the notifier's
/// life. Every failure (no bus, no notification service, a slow one) is reported, never thrown:
/// the agent works the same without a desktop.
package final class DesktopNotifier: Sendable {
    package let timeoutSeconds: Double
    /// The connection once one was made (a failed attempt is tried again at the next notification).
    private let center = Locked<DesktopNotifications?>(nil)

    package init(timeoutSeconds: Double = 2) { self.timeoutSeconds = timeoutSeconds }

    deinit { center.withLock { $0 }?.stop() }

    /// Sends one notification and waits for the service's answer (at most ``timeoutSeconds``).
    /// Blocks: not on a cooperative thread.
    /// - Returns: nil when the service took it, else why not.
    @discardableResult
    package func notify(summary: String, body: String, urgency: UInt8 = 1) -> String? {
        let connected: DesktopNotifications
        do {
            connected = try center.withLock { current throws(StatusNotifierFailure) in
                if let current { return current }
                let made = try DesktopNotifications()
                current = made
                return made
            }
        } catch {
            return error.description
        }
        return connected.sendWaiting(summary: summary, body: body, urgency: urgency, timeoutSeconds: timeoutSeconds)
    }
}

/// Why notifications were not shown, said once per agent run: on a machine without a notification
/// service every notification fails the same way ("Cannot autolaunch D-Bus without X11 $DISPLAY"),
/// and saying so at every switch buries the switches. A new reason is said once too.
package struct NotificationProblems {
    private var said: Set<String> = []

    package init() {}

    /// The line to print for `problem`, or nil when this run has said it already.
    package mutating func line(for problem: String) -> String? {
        guard said.insert(problem).inserted else { return nil }
        return "notification not shown: \(problem) (said once; "
            + "later notifications that fail the same way are not reported)"
    }
}
