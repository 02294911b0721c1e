// The usage every Lanyard program fetched, shared through one small file.
import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// The last usage each slot's provider reported, with when it was fetched: written by whichever
/// Lanyard program asked (`lanyard usage`, `lanyard status`, the agent's check, the tray), read by
/// the tray, which follows the file with inotify, so every program shows the same figures within a
/// second. `$XDG_STATE_HOME/lanyard/usage.json`, 0600, replaced durably (temp file, fsync,
/// rename) under `usage.json.lock`, at most ``capacity`` slots (the oldest figures go first).
/// No secret is in it. A damaged file is replaced by the next write: it only caches figures the
/// provider gives again.
package struct UsageState: Sendable, Equatable {
    /// One slot's figures.
    package struct Entry: Sendable, Equatable {
        package var report: UsageReport
        package var fetchedAt: Date

        package init(report: UsageReport, fetchedAt: Date) {
            self.report = report
            self.fetchedAt = fetchedAt
        }
    }

    package var slots: [Slot: Entry] = [:]

    /// The most slots the file keeps.
    package static let capacity = 256

    package init(slots: [Slot: Entry] = [:]) { self.slots = slots }

    package static func path(_ paths: Paths) -> String { paths.stateDirectory + "/usage.json" }

    /// The file as it is; empty when it is missing or cannot be read (a cache: never a failure).
    /// Blocks: not on a cooperative thread.
    @available(*, noasync, message: "reads a file: run it on the blocking executor")
    package static func load(_ paths: Paths) -> UsageState {
        guard let data = try? SecureFiles.read(path(paths)) else { return UsageState() }
        return decode(data) ?? UsageState()
    }

    /// Records `report` for `slot`, fetched at `time`, unless the file holds newer figures for it.
    /// Blocks (a lock, a durable write): not on a cooperative thread.
    @available(*, noasync, message: "locks and writes a file: run it on the blocking executor")
    package static func record(_ report: UsageReport, slot: Slot, at time: Date, paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.stateDirectory)
        let lock = try FileLock(path: path(paths) + ".lock")
        defer { withExtendedLifetime(lock) {} }
        var state = load(paths)
        if let known = state.slots[slot], known.fetchedAt > time { return }
        state.slots[slot] = Entry(report: report, fetchedAt: time)
        while state.slots.count > capacity,
            let oldest = state.slots.min(by: { $0.value.fetchedAt < $1.value.fetchedAt })?.key
        {
            state.slots[oldest] = nil
        }
        try SecureFiles.atomicWrite(state.encoded(), to: path(paths))
    }

    /// The file's text.
    package func encoded() -> Data {
        var object: [String: JSONValue] = [:]
        for (slot, entry) in slots {
            let report = entry.report
            // Milliseconds: the tray adopts figures newer than its own, and whole seconds would tie
            // (its own fetch and a `lanyard usage` a moment later in the same second).
            var fields: [String: JSONValue] = ["limit_reached": .bool(report.limitReached)]
            fields["fetched_at"] = .string(RFC3339.stringWithMilliseconds(from: entry.fetchedAt))
            if let plan = report.plan { fields["plan"] = .string(plan.rawValue) }
            for (name, window) in [("primary", report.primary), ("secondary", report.secondary)] {
                guard let window else { continue }
                fields[name] =
                    JSONValue.object([
                        "used_percent": .number(window.usedPercent),
                        "window_seconds": window.windowSeconds.map { .number(Double($0)) } ?? .null,
                        "resets_at": .date(window.resetsAt),
                    ]).droppingNulls
            }
            object[slot.name] = .object(fields)
        }
        let value = JSONValue.object(["version": .number(1), "slots": .object(object)])
        return Data((value.serialized(pretty: true) + "\n").utf8)
    }

    /// The figures in `data`; nil when it is not the file Lanyard writes. An entry that does not
    /// read is left out (the others stay usable).
    package static func decode(_ data: Data) -> UsageState? {
        guard let value = try? JSONValue.parse(data), value["version"]?.number == 1,
            case .object(let slots)? = value["slots"]
        else {
            return nil
        }
        var state = UsageState()
        for (name, fields) in slots {
            guard let slot = try? Slot(name), let fetched = fields["fetched_at"]?.string.flatMap(RFC3339.date(from:))
            else { continue }
            func window(_ key: String) -> UsageWindow? {
                guard let window = fields[key], let used = window["used_percent"]?.number, used.isFinite, used >= 0,
                    used <= 1000
                else {
                    return nil
                }
                let seconds = window["window_seconds"]?.number.flatMap {
                    $0.isFinite && $0 > 0 && $0 < 1e9 ? Int($0) : nil
                }
                return UsageWindow(
                    usedPercent: used,
                    windowSeconds: seconds,
                    resetsAt: window["resets_at"]?.string.flatMap(RFC3339.date(from:))
                )
            }
            let report = UsageReport(
                plan: fields["plan"]?.string.map { Plan(rawValue: $0) },
                primary: window("primary"),
                secondary: window("secondary"),
                limitReached: fields["limit_reached"]?.bool ?? false
            )
            state.slots[slot] = Entry(report: report, fetchedAt: fetched)
        }
        return state
    }
}
