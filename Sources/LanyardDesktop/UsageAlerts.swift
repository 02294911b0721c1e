import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// A usage window `lanyard tray` has notified about: which slot and window, the window's reset
/// (what tells this window from the next one of the same length) and the highest `[desktop]
/// notify` percentage said for it.
package struct NotifiedWindow: Sendable, Equatable {
    package var slot: Slot
    /// ``UsageAlerts/windowName(_:field:)``: the length's class (`5h`, `weekly`, `5400s`), or the
    /// field (`primary`, `secondary`) when the server did not say how long the window is.
    package var window: String
    package var resetsAt: Date?
    package var percent: Int

    package init(slot: Slot, window: String, resetsAt: Date?, percent: Int) {
        self.slot = slot
        self.window = window
        self.resetsAt = resetsAt
        self.percent = percent
    }
}

/// A notification ``UsageAlerts`` decided on.
package enum UsageAlert: Sendable, Equatable {
    /// The active slot's `window` reached `percent`, a `[desktop] notify` percentage not said yet
    /// for this window (the highest one reached, when a jump passed several).
    case crossed(slot: Slot, window: UsageWindow, percent: Int)
    /// A window notified about before reset: a new window began, or its usage fell under the
    /// lowest percentage. `window` is the window now.
    case reset(slot: Slot, window: UsageWindow)
}

/// Which usage notifications `lanyard tray` owes: at most one per slot, window, window's reset and
/// percentage, however often usage is asked and across restarts (``load(_:)``/``save(_:)``
/// keep what was said in `$XDG_STATE_HOME/lanyard/tray-notified.json`). Pure: it is told each
/// report as it arrives and answers with what to say.
package struct UsageAlerts: Sendable, Equatable {
    /// `[desktop] notify`, ascending; empty: nothing is ever said.
    package var percents: [Int]
    package private(set) var notified: [NotifiedWindow]

    package init(percents: [Int], notified: [NotifiedWindow] = []) {
        self.percents = percents
        self.notified = notified
    }

    /// How far two reports' reset instants of the same window may lie apart: servers that send
    /// `reset_after_seconds` move it by the seconds between answers. The next window of a length
    /// resets at least that length later, so half of it (at most 15 minutes) tells them apart.
    static func tolerance(_ window: UsageWindow) -> TimeInterval {
        min(900, window.windowSeconds.map { Double($0) / 2 } ?? 900)
    }

    /// The name a window is remembered by.
    package static func windowName(_ window: UsageWindow, field: String) -> String {
        switch window.length {
        case .other(let seconds): "\(seconds)s"
        case let length?: length.className
        case nil: field
        }
    }

    /// Takes `slot`'s new `report`: a reset notice for each window notified about that has reset
    /// (any slot), then, for the active slot only, a crossing for each window past a percentage
    /// not said yet for it.
    package mutating func observe(slot: Slot, report: UsageReport, isActive: Bool) -> [UsageAlert] {
        guard !percents.isEmpty else { return [] }
        var alerts: [UsageAlert] = []
        for (field, window) in [("primary", report.primary), ("secondary", report.secondary)] {
            guard let window else { continue }
            let name = Self.windowName(window, field: field)
            var index = notified.firstIndex { $0.slot == slot && $0.window == name }
            if let i = index {
                let previous = notified[i]
                var newWindow = false
                if let old = previous.resetsAt, let new = window.resetsAt {
                    newWindow = new.timeIntervalSince(old) > Self.tolerance(window)
                }
                // Under the lowest percentage (or under the one said, after `notify` was raised):
                // the window's use fell, as after a reset.
                if newWindow || window.usedPercent < Double(min(percents[0], previous.percent)) {
                    alerts.append(.reset(slot: slot, window: window))
                    notified.remove(at: i)
                    index = nil
                } else {
                    // The same window: follow its reset as reported, so drift never adds up.
                    notified[i].resetsAt = window.resetsAt ?? previous.resetsAt
                }
            }
            // The limit itself is said too, once per window, whatever `notify` lists below it.
            let said = percents.last == 100 ? percents : percents + [100]
            guard isActive, let reached = said.last(where: { window.usedPercent >= Double($0) }) else { continue }
            if let i = index {
                guard reached > notified[i].percent else { continue }
                notified[i].percent = reached
            } else {
                notified.append(NotifiedWindow(slot: slot, window: name, resetsAt: window.resetsAt, percent: reached))
            }
            alerts.append(.crossed(slot: slot, window: window, percent: reached))
        }
        return alerts
    }

    /// Forgets the windows of slots no longer in `slots`; true when something was forgotten.
    @discardableResult
    package mutating func forget(keeping slots: Set<Slot>) -> Bool {
        let before = notified.count
        notified.removeAll { !slots.contains($0.slot) }
        return notified.count != before
    }

    // MARK: - What was said, on disk

    package static func path(_ paths: Paths) -> String { paths.stateDirectory + "/tray-notified.json" }

    /// The windows notified about, as saved; none when there is no file. A file that cannot be
    /// read or does not parse is set aside with `problem` saying why (it only costs a repeated
    /// notification), never a failure.
    package static func load(_ paths: Paths) -> (notified: [NotifiedWindow], problem: String?) {
        let path = path(paths)
        let data: Data
        do {
            guard let read = try SecureFiles.read(path) else { return ([], nil) }
            data = read
        } catch {
            return ([], "cannot read \(path): \(error.userFacingDescription); notifications may repeat")
        }
        return decode(data, path: path)
    }

    /// What `data` (the file at `path`) says was notified, or why it is ignored: all of it or
    /// nothing, never part of a damaged file.
    package static func decode(_ data: Data, path: String) -> (notified: [NotifiedWindow], problem: String?) {
        guard let value = try? JSONValue.parse(data), value["version"]?.number == 1,
            case .array(let items)? = value["windows"]
        else {
            return ([], "\(path) is damaged (not the JSON Lanyard writes); it is ignored and notifications may repeat")
        }
        var notified: [NotifiedWindow] = []
        for item in items {
            guard let slot = item["slot"]?.string.flatMap({ try? Slot($0) }), let window = item["window"]?.string,
                let percent = item["percent"]?.number, percent >= 1, percent <= 100
            else {
                return (
                    [],
                    "\(path) is damaged (an entry without slot, window or percent); "
                        + "it is ignored and notifications may repeat"
                )
            }
            notified.append(
                NotifiedWindow(
                    slot: slot,
                    window: window,
                    resetsAt: item["resets_at"]?.string.flatMap(RFC3339.date(from:)),
                    percent: Int(percent)
                )
            )
        }
        return (notified, nil)
    }

    /// Saves ``notified`` durably (0600, replaced whole). Blocks: not on a cooperative thread.
    package func save(_ paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.stateDirectory)
        try SecureFiles.atomicWrite(encoded(), to: Self.path(paths))
    }

    /// The file ``save(_:)`` writes.
    package func encoded() -> Data {
        let windows = notified.map { entry in
            JSONValue.object([
                "slot": .string(entry.slot.name), "window": .string(entry.window),
                "resets_at": JSONValue.date(entry.resetsAt),
                "percent": .number(Double(entry.percent)),
            ]).droppingNulls
        }
        let value = JSONValue.object(["version": .number(1), "windows": .array(windows)])
        return Data((value.serialized(pretty: true) + "\n").utf8)
    }
}

/// The words of the tray's notifications (kept here, beside the decisions, so tests read them).
package enum UsageAlertText {
    /// "83 %": a whole percentage, as the notifications write it.
    package static func percent(_ used: Double) -> String { "\(Int(used.rounded(.down))) %" }

    /// The button that switches to `slot`, whose busiest window is `used` % full.
    package static func switchLabel(_ slot: Slot, used: Double?) -> String {
        "Switch to \(slot.name)" + (used.map { " (\(percent($0)))" } ?? "")
    }

    /// Summary and body of `alert`; `describe` says when a window resets ("in 2 h (14:05)"),
    /// `clock` the time of day ("21:11").
    package static func text(
        _ alert: UsageAlert,
        describe: (Date) -> String,
        clock: (Date) -> String
    ) -> (summary: String, body: String) {
        switch alert {
        case .crossed(let slot, let window, let percent) where percent >= 100:
            let name = window.length?.name ?? "usage"
            return (
                "\(slot.name) is at its limit" + (window.resetsAt.map { " until \(clock($0))" } ?? ""),
                "Its \(name) window is used up" + (window.resetsAt.map { "; it resets \(describe($0))." } ?? ".")
            )
        case .crossed(let slot, let window, _):
            let name = window.length?.name ?? "usage"
            return (
                "\(slot.name) has used \(percent(window.usedPercent)) of its \(name) window",
                window.resetsAt.map { "It resets \(describe($0))." } ?? ""
            )
        case .reset(let slot, let window):
            let name = window.length?.name ?? "usage"
            return (
                "\(slot.name)'s \(name) window has reset",
                "\(slot.name) has used \(percent(window.usedPercent)) of it now."
            )
        }
    }
}

extension UsageAlerts {
    /// The slot a crossing notification offers to switch to, with its busiest window's use: of
    /// the other signed-in slots of `active`'s provider whose usage `usage` knows and that are not
    /// at a limit, the least used (as `switch --best` chooses), and only when it is less used than
    /// `activeUsed`; nil when there is none.
    package static func switchTarget(
        from active: Slot,
        activeUsed: Double,
        document: RegistryDocument,
        usage: [Slot: SlotUsage]
    ) -> (slot: Slot, usedPercent: Double)? {
        guard let provider = document.slots[active]?.provider else { return nil }
        var best: (slot: Slot, usedPercent: Double)?
        for (slot, record) in document.sortedSlots where slot != active && record.provider == provider {
            guard case .signedIn = record.state, let known = usage[slot], !known.isAtLimit, let report = known.report,
                let busiest = report.busiest
            else { continue }
            if busiest.usedPercent < activeUsed && busiest.usedPercent < (best?.usedPercent ?? .infinity) {
                best = (slot, busiest.usedPercent)
            }
        }
        return best
    }
}
