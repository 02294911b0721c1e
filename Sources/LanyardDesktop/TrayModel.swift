import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// What `lanyard tray` knows of one slot's usage: the last figures the provider gave and when
/// (kept when a later check fails, and then shown as stale with the reason), a usage limit a
/// request ran into, and why the latest check failed.
package struct SlotUsage: Sendable, Equatable {
    /// The last figures the provider gave (nil: none yet, or the provider reports none).
    package var report: UsageReport?
    /// When ``report`` was fetched.
    package var fetchedAt: Date?
    /// A `usage_limit_reached` a request ran into (the tray's own, or another program's through
    /// the event log) since ``report``, with the reset when known.
    package var limit: LimitSeen?
    /// Why the latest check failed, for people ("the server answered 503"); nil when it gave
    /// ``report``.
    package var failure: String?

    /// A usage limit seen, and when it resets (nil: not said).
    package struct LimitSeen: Sendable, Equatable {
        package var resetsAt: Date?
        package init(resetsAt: Date?) { self.resetsAt = resetsAt }
    }

    package init(report: UsageReport? = nil, fetchedAt: Date? = nil, limit: LimitSeen? = nil, failure: String? = nil) {
        self.report = report
        self.fetchedAt = fetchedAt
        self.limit = limit
        self.failure = failure
    }

    /// Fresh figures: they replace everything known before.
    package mutating func record(_ report: UsageReport, at time: Date) {
        self = SlotUsage(report: report, fetchedAt: time)
    }

    /// A request ran into the limit: the figures stay, marked at the limit.
    package mutating func recordLimit(resetsAt: Date?) {
        limit = LimitSeen(resetsAt: resetsAt)
        failure = nil
    }

    /// A check failed: the last figures stay, now stale, with `reason`.
    package mutating func recordFailure(_ reason: String) { failure = reason }

    /// At a limit: one was run into, or the figures say so.
    package var isAtLimit: Bool { limit != nil || report?.isAtLimit == true }

    /// When the limit lifts, when known.
    package var limitResetsAt: Date? { limit?.resetsAt ?? report?.limitResetsAt }

    /// The figures are older than a failed check.
    package var isStale: Bool { report != nil && failure != nil }

    /// The busiest window's percentage as the figures say (100 at a limit run into).
    package var busiestPercent: Double? {
        if limit != nil { return 100 }
        return report?.busiest?.usedPercent
    }
}

/// What a menu entry does when chosen.
package enum TrayAction: Sendable, Equatable {
    /// Make the slot active (as `lanyard switch SLOT`).
    case switchTo(Slot)
    /// As `lanyard switch --best`.
    case best
    /// Ask the provider for the slot's usage now.
    case refresh(Slot)
    /// Sign the slot in again (`lanyard login SLOT`: in a terminal, or the browser sign-in).
    case signIn(Slot)
    /// `lanyard usage --all` in a terminal.
    case openUsage
    case quit
}

/// A slot's state, which its icon (the tray's, and its row's) shows.
package enum TrayState: String, Sendable, Hashable {
    case ok
    /// Its busiest window is at or past ``TrayModel/nearThreshold``.
    case nearThreshold = "near-threshold"
    case atLimit = "at-limit"
    case mustSignIn = "must-sign-in"
    /// No slot is active.
    case noSlot = "no-slot"

    /// The StatusNotifierItem status: hosts draw attention to a NeedsAttention item. Never
    /// Passive: hosts hide a Passive item (Xfce's Status Tray does), and with no slot active the
    /// menu is where a new user finds how to add one.
    package var itemStatus: String {
        switch self {
        case .ok, .noSlot: return "Active"
        case .nearThreshold, .atLimit, .mustSignIn: return "NeedsAttention"
        }
    }
}

/// One menu entry: the StatusNotifierItem's dbusmenu shows exactly these.
package struct TrayMenuEntry: Sendable, Equatable {
    package var id: Int32
    /// 0 for the top level, else the submenu's entry.
    package var parent: Int32
    /// dbusmenu's label: outside text escaped, every literal `_` doubled (a single one marks a mnemonic).
    package var label: String
    /// Radio entries (one per slot): on for the active slot.
    package var radio: Bool?
    package var enabled: Bool
    package var isSeparator: Bool
    /// A small icon beside the label (dbusmenu's `icon-data`, PNG), where the host shows them.
    package var icon: TrayIcon?
}

/// The tray's menu, icon, tooltip and label for one state of the registry and of the usage
/// known, with what each entry does. Pure: `lanyard tray` rebuilds it on every change.
package struct TrayModel: Sendable, Equatable {
    package var entries: [TrayMenuEntry] = []
    package var actions: [Int32: TrayAction] = [:]
    /// The active slot's state.
    package var state: TrayState = .noSlot
    /// The item's icon: the active slot's meter.
    package var icon = TrayIcon(state: .noSlot)
    package var tooltipTitle = "Lanyard"
    package var tooltipBody = ""
    /// The text beside the icon (`[desktop] label`); empty for none.
    package var label = ""

    /// The busiest window's percentage from which a slot counts as near its limit.
    package static let nearThreshold: Double = 80
    /// The longest label a row gets (a name, a state, a window): the menu stays narrow.
    package static let widestLabel = 48

    /// How times are written: `describe` for a reset ("in 2 h (14:05)"), `clock` for the time
    /// of day ("21:11", "Jan 16 21:11"), `now` for "3 min ago".
    package struct Clock: Sendable {
        package var now: Date
        package var describe: @Sendable (Date) -> String
        package var clock: @Sendable (Date) -> String

        package init(
            now: Date,
            describe: @escaping @Sendable (Date) -> String,
            clock: @escaping @Sendable (Date) -> String
        ) {
            self.now = now
            self.describe = describe
            self.clock = clock
        }

        /// "just now", "3 min ago", "2 h ago", "4 d ago".
        package func ago(_ time: Date) -> String {
            let seconds = max(0, now.timeIntervalSince(time))
            if seconds < 60 { return "just now" }
            if seconds < 3600 { return "\(Int(seconds / 60)) min ago" }
            if seconds < 86400 { return "\(Int(seconds / 3600)) h ago" }
            return "\(Int(seconds / 86400)) d ago"
        }
    }

    /// A model with ids of its own (tests, one-off menus).
    package init(document: RegistryDocument, usage: [Slot: SlotUsage], clock: Clock, label: DesktopLabel = .percent) {
        var ids = TrayMenuIDs()
        self.init(document: document, usage: usage, ids: &ids, clock: clock, label: label)
    }

    /// - Parameters:
    ///   - usage: what is known of each slot's usage (missing: nothing yet).
    ///   - ids: the tray's entry ids, kept across rebuilds (see ``TrayMenuIDs``).
    ///   - label: `[desktop] label`.
    package init(
        document: RegistryDocument,
        usage: [Slot: SlotUsage],
        ids: inout TrayMenuIDs,
        clock: Clock,
        label labelMode: DesktopLabel = .percent
    ) {
        func add(
            _ key: String,
            _ label: String,
            parent: Int32 = 0,
            radio: Bool? = nil,
            enabled: Bool = true,
            separator: Bool = false,
            icon: TrayIcon? = nil,
            action: TrayAction? = nil
        ) -> Int32 {
            let id = ids.id(for: key)
            entries.append(
                TrayMenuEntry(
                    id: id,
                    parent: parent,
                    label: label,
                    radio: radio,
                    enabled: enabled,
                    isSeparator: separator,
                    icon: icon
                )
            )
            if let action { actions[id] = action }
            return id
        }
        let slots = document.sortedSlots
        if slots.isEmpty {
            _ = add("no-slots", "No slots yet: run lanyard login", enabled: false)
        }
        for (slot, record) in slots {
            let known = usage[slot] ?? SlotUsage()
            _ = add(
                "slot:\(slot.name)",
                Self.mnemonicSafe(Self.rowText(slot, record, known, clock: clock)),
                radio: slot == document.active,
                icon: Self.icon(record, known),
                action: .switchTo(slot)
            )
        }
        _ = add("separator:slots", "", separator: true)
        if !slots.isEmpty {
            let details = add("details", "Details")
            for (slot, record) in slots {
                let known = usage[slot] ?? SlotUsage()
                let entry = add(
                    "details:\(slot.name)",
                    Self.mnemonicSafe(Self.bounded(slot.name)),
                    parent: details,
                    icon: Self.icon(record, known)
                )
                for (index, line) in Self.detailLines(record, known, clock: clock).enumerated() {
                    _ = add("details:\(slot.name):\(index)", Self.mnemonicSafe(line), parent: entry, enabled: false)
                }
            }
        }
        if slots.count > 1 { _ = add("best", "Best account now", action: .best) }
        if !slots.isEmpty {
            let refresh = add("refresh", "Refresh now")
            for (slot, _) in slots {
                _ = add(
                    "refresh:\(slot.name)",
                    Self.mnemonicSafe(Self.bounded(slot.name)),
                    parent: refresh,
                    action: .refresh(slot)
                )
            }
        }
        let mustSignIn = slots.filter { !$0.record.state.isSignedIn }
        if !mustSignIn.isEmpty {
            let signIn = add("sign-in", "Sign in again\u{2026}")
            for (slot, _) in mustSignIn {
                _ = add(
                    "sign-in:\(slot.name)",
                    Self.mnemonicSafe(Self.bounded(slot.name)),
                    parent: signIn,
                    action: .signIn(slot)
                )
            }
        }
        _ = add("usage", "Open usage details", action: .openUsage)
        _ = add("separator:quit", "", separator: true)
        _ = add("quit", "Quit", action: .quit)

        guard let active = document.active, let record = document.slots[active] else { return }
        let known = usage[active] ?? SlotUsage()
        state = Self.state(record, known)
        icon = Self.icon(record, known)
        tooltipTitle = Self.rowText(active, record, known, clock: clock)
        tooltipBody = Self.detailLines(record, known, clock: clock).dropFirst(record.account.email == nil ? 0 : 1)
            .joined(separator: "\n")
        switch labelMode {
        case .off: label = ""
        case .slot: label = active.name
        case .percent:
            if !record.state.isSignedIn {
                label = "sign in"
            } else {
                label = known.busiestPercent.map(Self.percent) ?? ""
            }
        }
    }

    /// A slot's state from its registry record and its usage.
    static func state(_ record: SlotRecord, _ usage: SlotUsage) -> TrayState {
        if !record.state.isSignedIn { return .mustSignIn }
        if usage.isAtLimit { return .atLimit }
        if let used = usage.busiestPercent, used >= nearThreshold { return .nearThreshold }
        return .ok
    }

    /// A slot's meter: its two busiest windows, in its state's colour.
    static func icon(_ record: SlotRecord, _ usage: SlotUsage) -> TrayIcon {
        let state = state(record, usage)
        guard state != .mustSignIn, let report = usage.report else {
            return TrayIcon(state: state, bars: usage.limit != nil ? [1] : [])
        }
        var windows = report.windows.sorted { $0.usedPercent > $1.usedPercent }
        if windows.count > 2 { windows = Array(windows.prefix(2)) }
        var bars = windows.map { min(1, max(0, $0.usedPercent / 100)) }
        if usage.limit != nil { bars = bars.isEmpty ? [1] : [1] + bars.dropFirst() }
        return TrayIcon(state: state, bars: bars, stale: usage.isStale)
    }

    /// "42 %": a whole percentage, rounded down (99.6 % is not yet the limit).
    package static func percent(_ used: Double) -> String { "\(Int(max(0, used).rounded(.down))) %" }

    /// A slot's row, its state first: "work — 42 % of 5 h", "bob — at limit until 21:11",
    /// "alice — must sign in", "carol — 42 % of 5 h · 3 min ago" (stale figures).
    static func rowText(_ slot: Slot, _ record: SlotRecord, _ usage: SlotUsage, clock: Clock) -> String {
        let name = bounded(slot.name, 24)
        if !record.state.isSignedIn { return "\(name) \u{2014} must sign in" }
        if usage.isAtLimit {
            return "\(name) \u{2014} at limit" + (usage.limitResetsAt.map { " until \(clock.clock($0))" } ?? "")
        }
        guard let report = usage.report else {
            return usage.failure == nil ? name : "\(name) \u{2014} usage unknown"
        }
        guard let busiest = report.busiest else { return "\(name) \u{2014} no usage windows reported" }
        var text = "\(name) \u{2014} \(percent(busiest.usedPercent)) of \(windowName(busiest))"
        if usage.isStale, let time = usage.fetchedAt { text += " \u{00B7} \(clock.ago(time))" }
        return text
    }

    /// The lines of a slot's details: email, plan, each window with its reset, and how fresh the
    /// figures are (with why they are stale). Each line bounded.
    static func detailLines(_ record: SlotRecord, _ usage: SlotUsage, clock: Clock) -> [String] {
        var lines: [String] = []
        if let email = record.account.email { lines.append(bounded(TerminalText.escaped(email))) }
        if let plan = usage.report?.plan ?? record.account.plan {
            lines.append("Plan: " + bounded(TerminalText.escaped(plan.displayName)))
        }
        if !record.state.isSignedIn {
            lines.append("Must sign in again (Sign in again\u{2026})")
            return lines
        }
        if let limit = usage.limit {
            lines.append("At its usage limit" + (limit.resetsAt.map { ", resets \(clock.describe($0))" } ?? ""))
        }
        if let report = usage.report {
            for window in report.windows {
                let resets = window.resetsAt.map { " \u{2014} resets \(clock.describe($0))" } ?? ""
                lines.append("\(windowName(window)): \(percent(window.usedPercent))\(resets)")
            }
            if report.windows.isEmpty { lines.append("No usage windows reported") }
            if let time = usage.fetchedAt {
                if let failure = usage.failure {
                    lines.append(
                        bounded(
                            "\(percent(report.highestUsedPercent)) \u{00B7} \(clock.ago(time)) \u{2014} \(failure)",
                            64
                        )
                    )
                } else {
                    lines.append("Updated \(clock.ago(time))")
                }
            }
        } else if let failure = usage.failure {
            lines.append(bounded("Usage unknown \u{2014} \(failure)", 64))
        } else if usage.limit == nil {
            lines.append("Usage not checked yet")
        }
        return lines
    }

    /// A window's name as `lanyard usage` writes it ("5 h", "weekly").
    static func windowName(_ window: UsageWindow) -> String { window.length?.name ?? "its window" }

    /// `text` cut to `limit` characters with an ellipsis, so no row widens the menu.
    static func bounded(_ text: String, _ limit: Int = widestLabel) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "\u{2026}"
    }

    /// dbusmenu reads `_` as the mnemonic marker and `__` as a literal underscore.
    static func mnemonicSafe(_ text: String) -> String { text.replacing("_", with: "__") }
}

/// The tray's menu entry ids, one per entry for the tray's whole run. A host sends a click with
/// the id from the layout it showed, which may be older than the one just published (a slot
/// added or signed out meanwhile): were ids positions, that click could switch to another slot.
/// Here an id always names the same entry, and an entry that is gone is a click ignored.
package struct TrayMenuIDs: Sendable, Equatable {
    private var assigned: [String: Int32] = [:]
    private var last: Int32 = 0

    package init() {}

    /// The id of the entry `key` ("slot:work", "quit", …): the one it had, or the next unused.
    package mutating func id(for key: String) -> Int32 {
        if let id = assigned[key] { return id }
        last += 1
        assigned[key] = last
        return last
    }
}

extension AuthState {
    /// Signed in, whether or not the access token has expired (a refresh renews it).
    package var isSignedIn: Bool {
        if case .signedIn = self { return true }
        return false
    }
}
