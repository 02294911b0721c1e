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
    private let clock: @Sendable (Date) -> String
    private let diagnostics: @Sendable (String) -> Void
    /// Slots whose first usage has not arrived since start: until they have, a warning about the
    /// active slot waits (in ``held``), so its "Switch to …" button can name the best of them.
    private var awaitingFirst: Set<Slot>?
    private var held: (slot: Slot, report: UsageReport)?

    /// Connects (on the blocking executor) and reads what was notified before this start.
    static func start(
        manager: AccountManager,
        describe: @escaping @Sendable (Date) -> String,
        clock: @escaping @Sendable (Date) -> String,
        diagnostics: @escaping @Sendable (String) -> Void
    ) async -> TrayNotifications {
        let paths = manager.paths
        let (center, problem, notified) = await BlockingExecutor.shared.run {
            () -> (DesktopNotifications?, String?, (notified: [NotifiedWindow], problem: String?)) in
            let notified = UsageAlerts.load(paths)
            do { return (try DesktopNotifications(), nil, notified) } catch { return (nil, "\(error)", notified) }
        }
        if let problem { diagnostics("notifications are off: \(problem)") }
        if let damaged = notified.problem { diagnostics(TerminalText.escaped(damaged)) }
        return TrayNotifications(
            center: center,
            alerts: UsageAlerts(percents: manager.config.desktopNotifyPercents, notified: notified.notified),
            paths: paths,
            describe: describe,
            clock: clock,
            diagnostics: diagnostics
        )
    }

    private init(
        center: DesktopNotifications?,
        alerts: UsageAlerts,
        paths: Paths,
        describe: @escaping @Sendable (Date) -> String,
        clock: @escaping @Sendable (Date) -> String,
        diagnostics: @escaping @Sendable (String) -> Void
    ) {
        self.center = center
        self.alerts = alerts
        self.paths = paths
        self.describe = describe
        self.clock = clock
        self.diagnostics = diagnostics
    }

    /// The slots whose usage was asked at start: a warning waits for all of them to answer.
    mutating func awaitFirstUsage(of slots: Set<Slot>) {
        awaitingFirst = slots.isEmpty ? nil : slots
    }

    /// Whether usage notifications are on (`[desktop] notify` is not off): the tray then polls the
    /// active slot's usage on a timer.
    var watchesUsage: Bool { !alerts.percents.isEmpty }

    /// `slot`'s usage arrived: says what crossed or reset, and saves that it did before saying it
    /// (a crash in between loses a notification rather than repeating it).
    mutating func usageArrived(
        _ slot: Slot,
        _ known: SlotUsage,
        document: RegistryDocument,
        usage: [Slot: SlotUsage]
    ) async {
        if var waiting = awaitingFirst {
            // Answered, with figures or without: either way there is nothing more to wait for.
            waiting.remove(slot)
            awaitingFirst = waiting.isEmpty ? nil : waiting
            if let report = known.report, known.failure == nil, slot == document.active { held = (slot, report) }
            if awaitingFirst != nil { return }
            if let (heldSlot, heldReport) = held, heldSlot == document.active {
                held = nil
                await observe(heldSlot, heldReport, document: document, usage: usage)
            }
            held = nil
            if slot == document.active { return }
        }
        guard let report = known.report, known.failure == nil, document.slots[slot] != nil else { return }
        await observe(slot, report, document: document, usage: usage)
    }

    private mutating func observe(
        _ slot: Slot,
        _ report: UsageReport,
        document: RegistryDocument,
        usage: [Slot: SlotUsage]
    ) async {
        let said = alerts.observe(slot: slot, report: report, isActive: slot == document.active)
        guard !said.isEmpty else { return }
        await save()
        for alert in said {
            let (summary, body) = UsageAlertText.text(alert, describe: describe, clock: clock)
            var actions: [DesktopNotificationAction] = []
            switch alert {
            case .crossed(_, let window, _):
                if let target = UsageAlerts.switchTarget(
                    from: slot,
                    activeUsed: window.usedPercent,
                    document: document,
                    usage: usage
                ) {
                    actions.append(
                        DesktopNotificationAction(
                            key: "switch:\(target.slot.name)",
                            label: UsageAlertText.switchLabel(target.slot, used: target.usedPercent)
                        )
                    )
                }
            case .reset:
                if slot != document.active {
                    actions.append(
                        DesktopNotificationAction(
                            key: "switch:\(slot.name)",
                            label: UsageAlertText.switchLabel(slot, used: nil)
                        )
                    )
                }
            }
            actions.append(DesktopNotificationAction(key: "dismiss", label: "Dismiss"))
            send(
                summary,
                body,
                actions,
                urgency: { if case .crossed(_, _, let p) = alert, p >= 95 { return 2 } else { return 1 } }()
            )
        }
    }

    /// The registry changed from `old` to `new`: a slot that had to sign in and now is signed in
    /// gets "SLOT is signed in again" (once: the next change sees it signed in already).
    mutating func registryChanged(from old: RegistryDocument, to new: RegistryDocument, usage: [Slot: SlotUsage]) async
    {
        for (slot, record) in new.sortedSlots {
            guard case .signedIn = record.state, let before = old.slots[slot] else { continue }
            if case .signedIn = before.state { continue }
            send(
                "\(slot.name) is signed in again",
                "Lanyard can use it again.",
                [DesktopNotificationAction(key: "dismiss", label: "Dismiss")]
            )
        }
        // A switch (the menu's, a terminal's, the agent's) to a slot that cannot be used now.
        if let active = new.active, active != old.active, let record = new.slots[active] {
            let dismiss = DesktopNotificationAction(key: "dismiss", label: "Dismiss")
            if !record.state.isSignedIn {
                send(
                    "\(active.name) must sign in again",
                    "Lanyard switched to it, but its session has ended.",
                    [
                        DesktopNotificationAction(key: "sign-in:\(active.name)", label: "Sign in again\u{2026}"),
                        dismiss,
                    ],
                    urgency: 2
                )
            } else if let known = usage[active], known.isAtLimit {
                var actions: [DesktopNotificationAction] = []
                if let target = UsageAlerts.switchTarget(from: active, activeUsed: 100, document: new, usage: usage) {
                    actions.append(
                        DesktopNotificationAction(
                            key: "switch:\(target.slot.name)",
                            label: UsageAlertText.switchLabel(target.slot, used: target.usedPercent)
                        )
                    )
                }
                send(
                    "\(active.name) is at its limit" + (known.limitResetsAt.map { " until \(clock($0))" } ?? ""),
                    "Lanyard switched to it, but it cannot be used until then.",
                    actions + [dismiss],
                    urgency: 2
                )
            }
        }
        if alerts.forget(keeping: Set(new.slots.keys)) { await save() }
    }

    /// What the tray does for a notification event: a chosen "Switch to …" button switches; a
    /// failed Notify is said once per reason.
    mutating func action(for event: DesktopNotificationEvent) -> TrayAction? {
        switch event {
        case .actionInvoked(_, let key):
            if key.hasPrefix("sign-in:"), let slot = try? Slot(String(key.dropFirst("sign-in:".count))) {
                return .signIn(slot)
            }
            guard key.hasPrefix("switch:"), let slot = try? Slot(String(key.dropFirst("switch:".count))) else {
                return nil
            }
            return .switchTo(slot)
        case .failed(_, let reason):
            if let line = problems.line(for: reason) { diagnostics(TerminalText.escaped(line)) }
            return nil
        case .sent, .closed:
            return nil
        }
    }

    /// A notification of the tray's own making (a sign-in's outcome, why nothing happened).
    mutating func say(_ summary: String, _ body: String, urgency: UInt8 = 1) {
        send(summary, body, [DesktopNotificationAction(key: "dismiss", label: "Dismiss")], urgency: urgency)
    }

    private mutating func send(
        _ summary: String,
        _ body: String,
        _ actions: [DesktopNotificationAction],
        urgency: UInt8 = 1
    ) {
        guard let center else { return }
        center.send(token: nextToken, summary: summary, body: body, actions: actions, urgency: urgency)
        nextToken += 1
    }

    private func save() async {
        let alerts = alerts
        let paths = paths
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
