import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

enum UsageCommand {
    /// One slot's answer.
    enum UsageOutcome {
        case report(UsageReport)
        case failed(any LanyardError)
    }

    static let usage = CommandSpec(
        name: "usage", summary: "show plan and usage windows (with reset times) from the provider", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1, flags: [FlagSpec("all", "every signed-in slot of a provider with a usage endpoint")],
        prints: true, takesAccount: true,
        details: "Exit 7 when the slot is at its usage limit (one slot), 6 when the server cannot be reached. "
            + "With --all, `next` marks the slot auto-switching ([switch] auto = usage) would switch to from the active slot.",
        examples: [
            CommandExample("lanyard usage", "plan and usage windows of the resolved slot, with reset times"),
            CommandExample("lanyard usage --all", "every signed-in slot whose provider reports usage"),
        ], network: true) { inv in
        let document = try inv.registry.load()
        let manager = try inv.accounts()
        let all = inv.args.has("all")
        let slots: [Slot]
        if all {
            slots = document.sortedSlots.filter { slot, record in
                if case .signedIn = record.state { return manager.config.providers[record.provider]?.usageBaseURL != nil }
                return false
            }.map(\.slot)
        } else {
            slots = [try inv.targetSlot(positional: inv.args.positionals.first).0]
        }
        // Each slot's result, shown once the slot auto-switching would choose next is known.
        var outcomes: [(slot: Slot, result: UsageOutcome)] = []
        var worst: ExitStatus = .ok
        for slot in slots {
            do {
                outcomes.append((slot, .report(try inv.runAsync { try await manager.usage(slot: slot) })))
            } catch let error as any LanyardError {
                guard slots.count > 1 || inv.json else { throw error }
                outcomes.append((slot, .failed(error)))
                if worst == .ok { worst = error.exitStatus }
            }
        }
        let next = all ? autoSwitchNext(outcomes, document: document, threshold: manager.config.autoSwitch.threshold) : nil
        var results: [UsageView.Entry] = []
        for (slot, result) in outcomes {
            let record = document.slots[slot]
            switch result {
            case .report(let report):
                results.append(.report(slot, report, next: all ? slot == next : nil))
                if !inv.json { render(slot, record, report, next: slot == next, inv) }
            case .failed(let error):
                var limitResetsAt: Date?? = nil
                if case ClientError.usageLimitReached(let limit) = error { limitResetsAt = .some(limit.resetsAt) }
                results.append(.failed(slot, ErrorView(code: error.code, message: error.userFacingDescription),
                                       limitResetsAt: limitResetsAt, next: all ? false : nil))
                if !inv.json { inv.stdout.line("\(inv.style.bold(slot.name))  \(inv.style.yellow(HumanText(error.userFacingDescription)))") }
            }
        }
        if inv.json { inv.emit(UsageView(slots: results)) {} }
        return worst
    }

    /// The slot auto-switching would go to from the active slot, among the slots of its provider
    /// shown: as `AccountManager.autoSwitchTarget` chooses, from the reports already in hand.
    static func autoSwitchNext(_ outcomes: [(slot: Slot, result: UsageOutcome)], document: RegistryDocument,
                               threshold: Double) -> Slot? {
        let provider = document.active.flatMap { document.slots[$0]?.provider } ?? "openai"
        let weighed: [(slot: Slot, verdict: SlotCandidate.Verdict)] = outcomes.compactMap { slot, result in
            guard document.slots[slot]?.provider == provider, case .report(let report) = result, !report.limitReached else { return nil }
            return (slot, .headroom(usedPercent: report.highestUsedPercent))
        }
        return AccountManager.autoSwitchTarget(weighed, active: document.active, threshold: threshold)?.slot
    }

    static func render(_ slot: Slot, _ record: SlotRecord?, _ report: UsageReport, next: Bool = false, _ inv: Invocation) {
        let s = inv.style
        let who = record?.account.email.map { "  \($0)" } ?? ""
        let limit: HumanText = report.limitReached ? s.red("  at limit") : ""
        let mark: HumanText = next ? s.green("  (next: auto-switch goes here)") : ""
        inv.stdout.line("\(s.bold(slot.name))\(who)  \(report.plan?.displayName ?? "-")\(limit)\(mark)")
        for (fallback, window) in [("primary", report.primary), ("secondary", report.secondary)] {
            guard let window else { continue }
            let name = window.windowMinutes.map(windowName) ?? fallback
            let resets = window.resetsAt.map { "resets " + RelativeTime.describe($0, now: inv.now) } ?? ""
            let whole = "\(window.usedPercent.rounded().saturatingInt)%"
            let percent = String(repeating: " ", count: max(0, 4 - whole.count)) + whole
            inv.stdout.line("  \(name.padded(toWidth: 12))\(bar(window.usedPercent, s))  \(percent)  \(resets)")
        }
    }

    static func windowName(_ minutes: Int) -> String {
        if minutes % (24 * 60) == 0 { return minutes == 7 * 24 * 60 ? "weekly" : "\(minutes / (24 * 60)) d window" }
        if minutes % 60 == 0 { return "\(minutes / 60) h window" }
        return "\(minutes) min window"
    }

    static func bar(_ percent: Double, _ s: Style) -> HumanText {
        let width = 20
        let filled = Int((min(max(percent, 0), 100) / 100 * Double(width)).rounded())
        let text = HumanText(String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled))
        return percent >= 90 ? s.red(text) : percent >= 70 ? s.yellow(text) : s.green(text)
    }
}

/// `usage --json`: one entry per slot; `next` only with `--all`.
struct UsageView: JSONView {
    enum Entry {
        case report(Slot, UsageReport, next: Bool?)
        /// `limitResetsAt` is set (to the reset time, if known) when the error is `usage_limit_reached`.
        case failed(Slot, ErrorView, limitResetsAt: Date??, next: Bool?)

        var json: JSONValue {
            switch self {
            case .report(let slot, let report, let next):
                func window(_ w: UsageWindow?) -> JSONValue {
                    guard let w else { return .null }
                    return JSONValue.object(["used_percent": .number(w.usedPercent), "window_minutes": w.windowMinutes.map { .number(Double($0)) } ?? .null,
                                             "resets_at": .date(w.resetsAt)]).droppingNulls
                }
                var fields: [String: JSONValue] = [
                    "slot": .string(slot.name), "plan": .optional(report.plan?.rawValue), "plan_name": .optional(report.plan?.displayName),
                    "primary": window(report.primary), "secondary": window(report.secondary), "limit_reached": .bool(report.limitReached),
                ]
                if let next { fields["next"] = .bool(next) }
                return .object(fields)
            case .failed(let slot, let error, let limitResetsAt, let next):
                var fields: [String: JSONValue] = ["slot": .string(slot.name), "error": error.json["error"] ?? .null]
                if let resetsAt = limitResetsAt {
                    fields["limit_reached"] = .bool(true)
                    fields["resets_at"] = .date(resetsAt)
                }
                if let next { fields["next"] = .bool(next) }
                return .object(fields)
            }
        }
    }

    static let keys = ["slots"]
    let slots: [Entry]
    var json: JSONValue { .object(["slots": .array(slots.map(\.json))]) }
}
