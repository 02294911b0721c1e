import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// What `lanyard tray` knows of one slot's usage.
package enum TrayUsage: Sendable, Equatable {
    /// Not asked yet (or the provider reports none).
    case unknown
    case report(UsageReport)
    /// The last check failed (`usage_limit_reached` counts as at the limit, with its reset).
    case atLimit(resetsAt: Date?)
    case failed(ErrorCode)
}

/// What a menu entry does when chosen.
package enum TrayAction: Sendable, Equatable {
    /// Make the slot active (as `lanyard switch SLOT`).
    case switchTo(Slot)
    /// As `lanyard switch --best`.
    case best
    /// Ask the provider for the slot's usage now.
    case refresh(Slot)
    /// Sign the slot in again (`lanyard login SLOT` in a terminal).
    case signIn(Slot)
    /// `lanyard usage --all` in a terminal.
    case openUsage
    case quit
}

/// The active slot's state, which the icon shows.
package enum TrayState: String, Sendable, Equatable {
    case ok
    /// Its busiest window is at or past ``TrayModel/nearThreshold``.
    case nearThreshold = "near-threshold"
    case atLimit = "at-limit"
    case mustSignIn = "must-sign-in"
    /// No slot is active.
    case noSlot = "no-slot"

    /// A themed icon name every common theme has (Adwaita, Breeze, elementary).
    package var iconName: String {
        switch self {
        case .ok: return "security-high"
        case .nearThreshold: return "security-medium"
        case .atLimit: return "security-low"
        case .mustSignIn: return "dialog-password"
        case .noSlot: return "dialog-question"
        }
    }

    /// The StatusNotifierItem status: hosts may hide a Passive item and draw attention to a
    /// NeedsAttention one.
    package var itemStatus: String {
        switch self {
        case .ok: return "Active"
        case .nearThreshold, .atLimit, .mustSignIn: return "NeedsAttention"
        case .noSlot: return "Passive"
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
}

/// The tray's menu, icon and tooltip for one state of the registry and of the usage known,
/// with what each entry does. Pure: `lanyard tray` rebuilds it on every change.
package struct TrayModel: Sendable, Equatable {
    package var entries: [TrayMenuEntry] = []
    package var actions: [Int32: TrayAction] = [:]
    package var state: TrayState = .noSlot
    package var tooltipTitle = "Lanyard"
    package var tooltipBody = ""

    /// The busiest window's percentage from which the icon says "near the threshold".
    package static let nearThreshold: Double = 80

    /// - Parameters:
    ///   - usage: what is known of each slot's usage (missing: unknown).
    ///   - describe: a time for people (the CLI's "in 2 h (14:05)").
    package init(document: RegistryDocument, usage: [Slot: TrayUsage], describe: (Date) -> String) {
        var nextID: Int32 = 0
        func add(_ label: String, parent: Int32 = 0, radio: Bool? = nil, enabled: Bool = true, separator: Bool = false,
                 action: TrayAction? = nil) -> Int32 {
            nextID += 1
            entries.append(TrayMenuEntry(id: nextID, parent: parent, label: label, radio: radio, enabled: enabled, isSeparator: separator))
            if let action { actions[nextID] = action }
            return nextID
        }
        let slots = document.sortedSlots
        if slots.isEmpty {
            _ = add("No slots yet: run lanyard login", enabled: false)
        }
        for (slot, record) in slots {
            _ = add(Self.slotLabel(slot, record, usage[slot] ?? .unknown, describe: describe), radio: slot == document.active,
                    action: .switchTo(slot))
        }
        _ = add("", separator: true)
        if slots.count > 1 { _ = add("Best account now", action: .best) }
        if !slots.isEmpty {
            let refresh = add("Refresh now")
            for (slot, _) in slots { _ = add(Self.mnemonicSafe(slot.name), parent: refresh, action: .refresh(slot)) }
        }
        let mustSignIn = slots.filter { !$0.record.state.isSignedIn }
        if !mustSignIn.isEmpty {
            let signIn = add("Sign in again\u{2026}")
            for (slot, _) in mustSignIn { _ = add(Self.mnemonicSafe(slot.name), parent: signIn, action: .signIn(slot)) }
        }
        _ = add("Open usage details", action: .openUsage)
        _ = add("", separator: true)
        _ = add("Quit", action: .quit)

        guard let active = document.active, let record = document.slots[active] else { return }
        let known = usage[active] ?? .unknown
        tooltipTitle = "Lanyard: \(active.name)"
        if !record.state.isSignedIn {
            state = .mustSignIn
            tooltipBody = "\(active.name) must sign in again"
            return
        }
        switch known {
        case .report(let report):
            state = report.isAtLimit ? .atLimit : report.highestUsedPercent >= Self.nearThreshold ? .nearThreshold : .ok
            tooltipBody = report.busiest.map { Self.windowText($0, field: nil, describe: describe) } ?? "no usage windows reported"
        case .atLimit(let resetsAt):
            state = .atLimit
            tooltipBody = "at its usage limit" + (resetsAt.map { ", resets \(describe($0))" } ?? "")
        case .failed(let code):
            state = .ok
            tooltipBody = "usage unknown (\(code.rawValue))"
        case .unknown:
            state = .ok
            tooltipBody = "usage not checked yet"
        }
    }

    /// One slot's radio entry: name, email, plan, then each window's percentage and reset.
    static func slotLabel(_ slot: Slot, _ record: SlotRecord, _ usage: TrayUsage, describe: (Date) -> String) -> String {
        var parts = [slot.name]
        if let email = record.account.email { parts.append(TerminalText.escaped(email)) }
        var plan = record.account.plan
        var details: [String] = []
        if !record.state.isSignedIn {
            details.append("must sign in again")
        } else {
            switch usage {
            case .report(let report):
                plan = report.plan ?? plan
                let fields = [("primary", report.primary), ("secondary", report.secondary)]
                details += fields.compactMap { field, window in window.map { windowText($0, field: field, describe: describe) } }
                if report.windows.isEmpty { details.append("no usage windows reported") }
                if report.isAtLimit { details.append("at limit") }
            case .atLimit(let resetsAt): details.append("at its usage limit" + (resetsAt.map { ", resets \(describe($0))" } ?? ""))
            case .failed(let code): details.append("usage unknown (\(code.rawValue))")
            case .unknown: break
            }
        }
        if let plan { parts.append(TerminalText.escaped(plan.displayName)) }
        return mnemonicSafe((parts + details).joined(separator: " \u{00B7} "))
    }

    /// "5 h 42% (resets in 2 h (14:05))": a window named as `lanyard usage` names it.
    static func windowText(_ window: UsageWindow, field: String?, describe: (Date) -> String) -> String {
        let name = window.length?.name ?? field.map { "\($0) window" } ?? "window"
        let resets = window.resetsAt.map { " (resets \(describe($0)))" } ?? ""
        return "\(name) \(window.usedPercent.rounded().saturatingInt)%\(resets)"
    }

    /// dbusmenu reads `_` as the mnemonic marker and `__` as a literal underscore.
    static func mnemonicSafe(_ text: String) -> String { text.replacing("_", with: "__") }
}

extension AuthState {
    /// Signed in, whether or not the access token has expired (a refresh renews it).
    fileprivate var isSignedIn: Bool { if case .signedIn = self { return true }; return false }
}
