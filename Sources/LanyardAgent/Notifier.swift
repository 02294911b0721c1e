import LanyardGLib

/// Desktop notifications through `org.freedesktop.Notifications` on the session bus (GDBus).
/// Every failure (no bus, no notification service, a slow one) is reported, never thrown: the
/// agent works the same without a desktop.
package struct DesktopNotifier: Sendable {
    package var timeoutMilliseconds: Int32 = 2000

    package init() {}

    /// Sends one notification.
    /// - Returns: nil when the service took it, else why not.
    @discardableResult
    package func notify(summary: String, body: String, urgency: UInt8 = 1) -> String? {
        if let reason = LazyLibraries.loadFailure() { return reason }
        let bus: GDBusClient
        do { bus = try GDBusClient.sessionBus(nil) } catch {
            return error.originalMessage(or: "no session bus")
        }
        // Notify(app_name s, replaces_id u, app_icon s, summary s, body s, actions as, hints a{sv}, expire_timeout i)
        let arguments: [DBusValue] = [
            .string("Lanyard"), .uint32(0), .string("dialog-password"), .string(summary), .string(body),
            .stringArray([]), .dictionary([.init("urgency", .byte(urgency))]), .int32(-1),
        ]
        do {
            _ = try bus.call(destination: "org.freedesktop.Notifications", path: "/org/freedesktop/Notifications",
                             interface: "org.freedesktop.Notifications", method: "Notify", arguments: arguments,
                             timeoutMilliseconds: timeoutMilliseconds, deadline: nil)
        } catch {
            return error.originalMessage(or: "Notify failed")
        }
        return nil
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
        return "notification not shown: \(problem) (said once; later notifications that fail the same way are not reported)"
    }
}
