import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

/// The tray's desktop notifications (see docs/desktop.md): usage crossing a `[desktop] notify`
/// percentage, a window that reset after one, a slot signed in again. ``UsageAlerts`` decides;
/// this sends through ``DesktopNotifications`` (the buttons come back as
/// ``DesktopNotificationEvent``s, turned into ``TrayAction``s by ``action(for:)``) and keeps what
/// was said on disk. Owned by the tray's event loop: one task, no locks.
struct TrayNotifications {
    /// Nil without a session bus that could be reached (the tray itself then fails first).
    let center: DesktopNotifications?
    private(set) var alerts: UsageAlerts
    private var problems = NotificationProblems()
    private var nextToken: UInt64 = 1
    private let paths: Paths
    private let describe: @Sendable (Date) -> String
    private let diagnostics: @Sendable (String) -> Void

    /// Connects (on the blocking executor) and reads what was notified before this start.
    static func start(manager: AccountManager, describe: @escaping @Sendable (Date) -> String,
                      diagnostics: @escaping @Sendable (String) -> Void) async -> TrayNotifications {
        let paths = manager.paths
        let (center, problem, notified) = await BlockingExecutor.shared.run { () -> (DesktopNotifications?, String?, (notified: [NotifiedWindow], problem: String?)) in
            let notified = UsageAlerts.load(paths)
            do { return (try DesktopNotifications(), nil, notified) } catch { return (nil, "\(error)", notified) }
        }
        if let problem { diagnostics("notifications are off: \(problem)") }
        if let damaged = notified.problem { diagnostics(TerminalText.escaped(damaged)) }
        return TrayNotifications(center: center, alerts: UsageAlerts(percents: manager.config.desktopNotifyPercents, notified: notified.notified),
                                 paths: paths, describe: describe, diagnostics: diagnostics)
    }

    private init(center: DesktopNotifications?, alerts: UsageAlerts, paths: Paths, describe: @escaping @Sendable (Date) -> String,
                 diagnostics: @escaping @Sendable (String) -> Void) {
        self.center = center
        self.alerts = alerts
        self.paths = paths
        self.describe = describe
        self.diagnostics = diagnostics
    }

    /// Whether usage notifications are on (`[desktop] notify` is not off): the tray then polls the
    /// active slot's usage on a timer.
    var watchesUsage: Bool { !alerts.percents.isEmpty }

    /// `slot`'s usage arrived: says what crossed or reset, and saves that it did before saying it
    /// (a crash in between loses a notification rather than repeating it).
    mutating func usageArrived(_ slot: Slot, _ known: TrayUsage, document: RegistryDocument, usage: [Slot: TrayUsage]) async {
        guard case .report(let report) = known, document.slots[slot] != nil else { return }
        let said = alerts.observe(slot: slot, report: report, isActive: slot == document.active)
        guard !said.isEmpty else { return }
        await save()
        for alert in said {
            let (summary, body) = UsageAlertText.text(alert, describe: describe)
            var actions: [DesktopNotificationAction] = []
            switch alert {
            case .crossed(_, let window, _):
                if let target = UsageAlerts.switchTarget(from: slot, activeUsed: window.usedPercent, document: document, usage: usage) {
                    actions.append(DesktopNotificationAction(key: "switch:\(target.slot.name)",
                                                             label: UsageAlertText.switchLabel(target.slot, used: target.usedPercent)))
                }
            case .reset:
                if slot != document.active {
                    actions.append(DesktopNotificationAction(key: "switch:\(slot.name)", label: UsageAlertText.switchLabel(slot, used: nil)))
                }
            }
            actions.append(DesktopNotificationAction(key: "dismiss", label: "Dismiss"))
            send(summary, body, actions, urgency: { if case .crossed(_, _, let p) = alert, p >= 95 { return 2 } else { return 1 } }())
        }
    }

    /// The registry changed from `old` to `new`: a slot that had to sign in and now is signed in
    /// gets "SLOT is signed in again" (once: the next change sees it signed in already).
    mutating func registryChanged(from old: RegistryDocument, to new: RegistryDocument) async {
        for (slot, record) in new.sortedSlots {
            guard case .signedIn = record.state, let before = old.slots[slot] else { continue }
            if case .signedIn = before.state { continue }
            send("\(slot.name) is signed in again", "Lanyard can use it again.", [DesktopNotificationAction(key: "dismiss", label: "Dismiss")])
        }
        if alerts.forget(keeping: Set(new.slots.keys)) { await save() }
    }

    /// What the tray does for a notification event: a chosen "Switch to …" button switches; a
    /// failed Notify is said once per reason.
    mutating func action(for event: DesktopNotificationEvent) -> TrayAction? {
        switch event {
        case .actionInvoked(_, let key):
            guard key.hasPrefix("switch:"), let slot = try? Slot(String(key.dropFirst("switch:".count))) else { return nil }
            return .switchTo(slot)
        case .failed(_, let reason):
            if let line = problems.line(for: reason) { diagnostics(TerminalText.escaped(line)) }
            return nil
        case .sent, .closed:
            return nil
        }
    }

    private mutating func send(_ summary: String, _ body: String, _ actions: [DesktopNotificationAction], urgency: UInt8 = 1) {
        guard let center else { return }
        center.send(token: nextToken, summary: summary, body: body, actions: actions, icon: "dialog-information", urgency: urgency)
        nextToken += 1
    }

    private func save() async {
        let alerts = alerts, paths = paths
        do {
            try await BlockingExecutor.shared.run { try alerts.save(paths) }
        } catch let error as any LanyardError {
            diagnostics("cannot save the notifications given: \(error.userFacingDescription)")
        } catch {
            diagnostics("cannot save the notifications given: \(error)")
        }
    }

    /// Stops listening (joins the loop's thread: on the blocking executor).
    func stop() async {
        guard let center else { return }
        await BlockingExecutor.shared.run { center.stop() }
    }
}
