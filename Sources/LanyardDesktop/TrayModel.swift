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

    /// The sizes ``pixels(size:)`` draws for IconPixmap: hosts pick the nearest and scale it.
    package static let pixmapSizes = [16, 22, 32, 48]

    /// The icon for hosts whose theme lacks ``iconName``: a disc in the state's colour (green,
    /// amber, red, blue, grey), with a white bar at the limit and a white keyhole dot when the slot
    /// must sign in, so the states differ without colour too; a dark rim keeps it visible on light
    /// panels. `size` × `size` ARGB32 pixels in network byte order, edges smoothed (4 × 4 samples a
    /// pixel).
    package func pixels(size: Int) -> [UInt8] {
        let (red, green, blue): (Double, Double, Double) = switch self {
        case .ok: (0x2E, 0x7D, 0x32)
        case .nearThreshold: (0xF9, 0xA8, 0x25)
        case .atLimit: (0xC6, 0x28, 0x28)
        case .mustSignIn: (0x15, 0x65, 0xC0)
        case .noSlot: (0x75, 0x75, 0x75)
        }
        let radius = Double(size) / 2 - 0.5, rim = max(1, Double(size) / 16), center = Double(size) / 2
        var out = [UInt8](repeating: 0, count: size * size * 4)
        for y in 0..<size {
            for x in 0..<size {
                // Coverage of the disc, of its rim and of the white mark, over 16 samples.
                var disc = 0.0, dark = 0.0, white = 0.0
                for sy in 0..<4 {
                    for sx in 0..<4 {
                        let px = Double(x) + (Double(sx) + 0.5) / 4 - center, py = Double(y) + (Double(sy) + 0.5) / 4 - center
                        let distance = (px * px + py * py).squareRoot()
                        guard distance <= radius else { continue }
                        disc += 1
                        if distance > radius - rim { dark += 1; continue }
                        switch self {
                        case .atLimit where abs(py) <= radius * 0.16 && abs(px) <= radius * 0.6: white += 1
                        case .mustSignIn where distance <= radius * 0.3: white += 1
                        default: break
                        }
                    }
                }
                guard disc > 0 else { continue }
                // Rim samples are the colour darkened to 55 %, mark samples white, the rest the colour.
                let fill = disc - dark - white
                func channel(_ c: Double) -> UInt8 { UInt8(((fill * c + dark * c * 0.55 + white * 255) / disc).rounded()) }
                let i = (y * size + x) * 4
                out[i] = UInt8((disc / 16 * 255).rounded())
                out[i + 1] = channel(red)
                out[i + 2] = channel(green)
                out[i + 3] = channel(blue)
            }
        }
        return out
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

    /// A model with ids of its own (tests, one-off menus).
    package init(document: RegistryDocument, usage: [Slot: TrayUsage], describe: (Date) -> String) {
        var ids = TrayMenuIDs()
        self.init(document: document, usage: usage, ids: &ids, describe: describe)
    }

    /// - Parameters:
    ///   - usage: what is known of each slot's usage (missing: unknown).
    ///   - ids: the tray's entry ids, kept across rebuilds (see ``TrayMenuIDs``).
    ///   - describe: a time for people (the CLI's "in 2 h (14:05)").
    package init(document: RegistryDocument, usage: [Slot: TrayUsage], ids: inout TrayMenuIDs, describe: (Date) -> String) {
        func add(_ key: String, _ label: String, parent: Int32 = 0, radio: Bool? = nil, enabled: Bool = true, separator: Bool = false,
                 action: TrayAction? = nil) -> Int32 {
            let id = ids.id(for: key)
            entries.append(TrayMenuEntry(id: id, parent: parent, label: label, radio: radio, enabled: enabled, isSeparator: separator))
            if let action { actions[id] = action }
            return id
        }
        let slots = document.sortedSlots
        if slots.isEmpty {
            _ = add("no-slots", "No slots yet: run lanyard login", enabled: false)
        }
        for (slot, record) in slots {
            _ = add("slot:\(slot.name)", Self.slotLabel(slot, record, usage[slot] ?? .unknown, describe: describe),
                    radio: slot == document.active, action: .switchTo(slot))
        }
        _ = add("separator:slots", "", separator: true)
        if slots.count > 1 { _ = add("best", "Best account now", action: .best) }
        if !slots.isEmpty {
            let refresh = add("refresh", "Refresh now")
            for (slot, _) in slots { _ = add("refresh:\(slot.name)", Self.mnemonicSafe(slot.name), parent: refresh, action: .refresh(slot)) }
        }
        let mustSignIn = slots.filter { !$0.record.state.isSignedIn }
        if !mustSignIn.isEmpty {
            let signIn = add("sign-in", "Sign in again\u{2026}")
            for (slot, _) in mustSignIn { _ = add("sign-in:\(slot.name)", Self.mnemonicSafe(slot.name), parent: signIn, action: .signIn(slot)) }
        }
        _ = add("usage", "Open usage details", action: .openUsage)
        _ = add("separator:quit", "", separator: true)
        _ = add("quit", "Quit", action: .quit)

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
    fileprivate var isSignedIn: Bool { if case .signedIn = self { return true }; return false }
}
