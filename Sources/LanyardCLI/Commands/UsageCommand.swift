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
        name: "usage",
        summary: "show plan and usage windows (with reset times) from the provider",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [FlagSpec("all", "every signed-in slot of a provider with a usage endpoint")],
        prints: true,
        takesAccount: true,
        details: "Each window is named by its length (5 h, daily, weekly, "
            + "monthly, else its length in words), with its reset. "
            + "Exit 7 when a slot shown is at its usage limit "
            + "(a window at 100 %, the server's limit_reached, or a 429), "
            + "6 when the server cannot be reached. "
            + "With --all and [switch] auto = usage, `next` marks the slot "
            + "auto-switching would switch to from the active slot.",
        examples: [
            CommandExample("lanyard usage", "plan and usage windows of the resolved slot, with reset times"),
            CommandExample("lanyard usage --all", "every signed-in slot whose provider reports usage"),
        ],
        network: true
    ) { inv in
        let document = try inv.registry.load()
        let manager = try inv.accounts()
        let all = inv.args.has("all")
        let slots: [Slot]
        if all {
            slots = document.sortedSlots.filter { slot, record in
                if case .signedIn = record.state {
                    return manager.config.providers[record.provider]?.usageBaseURL != nil
                }
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
        // The mark answers "where does auto-switching go next?": only asked when it is on.
        let marksNext = all && manager.config.autoSwitch.mode == .usage
        let next =
            marksNext
            ? autoSwitchNext(outcomes, document: document, threshold: manager.config.autoSwitch.threshold) : nil
        var results: [UsageView.Entry] = []
        for (slot, result) in outcomes {
            let record = document.slots[slot]
            switch result {
            case .report(let report):
                results.append(.report(slot, report, next: marksNext ? slot == next : nil))
                if !inv.json { render(slot, record, report, next: slot == next, inv) }
            case .failed(let error):
                var limitResetsAt: Date?? = nil
                if case ClientError.usageLimitReached(let limit) = error { limitResetsAt = .some(limit.resetsAt) }
                results.append(
                    .failed(
                        slot,
                        ErrorView(error),
                        limitResetsAt: limitResetsAt,
                        next: marksNext ? false : nil
                    )
                )
                if !inv.json {
                    inv.stdout.line(
                        "\(inv.style.bold(slot.name))  \(inv.style.yellow(HumanText(error.userFacingDescription)))"
                    )
                }
            }
        }
        if inv.json { inv.emit(UsageView(slots: results)) {} }
        // A slot shown at its limit exits 7, as a 429 `usage_limit_reached` does (docs/cli.md),
        // unless something worse happened.
        if worst == .ok,
            outcomes.contains(where: {
                if case .report(let report) = $0.result { return report.isAtLimit }
                return false
            })
        {
            return .usageLimit
        }
        return worst
    }

    /// The slot auto-switching would go to from the active slot, among the slots of its provider
    /// shown: as `AccountManager.autoSwitchTarget` chooses, from the reports already in hand.
    static func autoSwitchNext(
        _ outcomes: [(slot: Slot, result: UsageOutcome)],
        document: RegistryDocument,
        threshold: Double
    ) -> Slot? {
        let provider = document.active.flatMap { document.slots[$0]?.provider } ?? "openai"
        let weighed: [(slot: Slot, verdict: SlotCandidate.Verdict)] = outcomes.compactMap { slot, result in
            guard document.slots[slot]?.provider == provider, case .report(let report) = result, !report.isAtLimit
            else { return nil }
            return (slot, .headroom(usedPercent: report.highestUsedPercent))
        }
        return AccountManager.autoSwitchTarget(weighed, active: document.active, threshold: threshold)?.slot
    }

    /// One slot: a title line, then every window the server sent (named by its length, never by
    /// its position: a weekly-only account shows one weekly row), credits and banked resets when
    /// sent.
    static func render(
        _ slot: Slot,
        _ record: SlotRecord?,
        _ report: UsageReport,
        next: Bool = false,
        _ inv: Invocation
    ) {
        let s = inv.style
        let who = record?.account.email.map { "  \($0)" } ?? ""
        let limit: HumanText = report.isAtLimit ? s.red("  at limit") : ""
        let mark: HumanText = next ? s.green("  (next: auto-switch goes here)") : ""
        inv.stdout.line("\(s.bold(slot.name))\(who)  \(report.plan?.displayName ?? "-")\(limit)\(mark)")
        func rows(_ primary: UsageWindow?, _ secondary: UsageWindow?, indent: Int) {
            for (field, window) in [("primary", primary), ("secondary", secondary)] {
                guard let window else { continue }
                // Without a length the server gave nothing to name it by but its field.
                let name = window.length?.name ?? "\(field) window"
                let resets = window.resetsAt.map { "resets " + RelativeTime.describe($0, now: inv.now) } ?? ""
                let whole = "\(window.usedPercent.rounded().saturatingInt)%"
                let percent = String(repeating: " ", count: max(0, 4 - whole.count)) + whole
                let label = String(repeating: " ", count: indent) + name.padded(toWidth: 17 - indent)
                inv.stdout.line("\(label)\(bar(window.usedPercent, s))  \(percent)  \(resets)")
            }
        }
        rows(report.primary, report.secondary, indent: 2)
        if report.windows.isEmpty { inv.stdout.line("  no usage windows reported") }
        for extra in report.additionalLimits {
            // Outside text: HumanText escapes the name.
            inv.stdout.line("  \(extra.name) only\(extra.isAtLimit ? s.red("  at limit") : ""):")
            rows(extra.primary, extra.secondary, indent: 4)
        }
        if let credits = report.credits {
            var text: HumanText = credits.unlimited == true ? "unlimited" : "balance \(credits.balance ?? "-")"
            if credits.unlimited != true && credits.hasCredits == false { text += " (no credits)" }
            inv.stdout.line("  \("credits".padded(toWidth: 15))\(text)")
        }
        if let banked = report.resetCredits {
            inv.stdout.line("  \("banked resets".padded(toWidth: 15))\(banked)")
        }
    }

    static func bar(_ percent: Double, _ s: Style) -> HumanText {
        let width = 20
        let filled = Int((min(max(percent, 0), 100) / 100 * Double(width)).rounded())
        let text = HumanText(String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled))
        return percent >= 90 ? s.red(text) : percent >= 70 ? s.yellow(text) : s.green(text)
    }
}

/// `usage --json`: one entry per slot, with every window the server sent (`windows`, each with its
/// `limit_window_seconds` and class); `next` only with `--all` while auto-switching is on.
struct UsageView: JSONView {
    enum Entry {
        case report(Slot, UsageReport, next: Bool?)
        /// `limitResetsAt` is set (to the reset time, if known) when the error is `usage_limit_reached`.
        case failed(Slot, ErrorView, limitResetsAt: Date??, next: Bool?)

        var json: JSONValue {
            switch self {
            case .report(let slot, let report, let next):
                func window(_ w: UsageWindow?, _ field: String) -> JSONValue? {
                    guard let w else { return nil }
                    return JSONValue.object([
                        "field": .string(field), "window": .optional(w.length?.className),
                        "name": .optional(w.length?.name),
                        "limit_window_seconds": w.windowSeconds.map { .number(Double($0)) } ?? .null,
                        "used_percent": .number(w.usedPercent), "at_limit": .bool(w.isAtLimit),
                        "resets_at": .date(w.resetsAt),
                    ]).droppingNulls
                }
                let windows = [window(report.primary, "primary_window"), window(report.secondary, "secondary_window")]
                    .compactMap { $0 }
                var fields: [String: JSONValue] = [
                    "slot": .string(slot.name), "plan": .optional(report.plan?.rawValue),
                    "plan_name": .optional(report.plan?.displayName),
                    "windows": .array(windows), "limit_reached": .bool(report.isAtLimit),
                ]
                if let credits = report.credits {
                    fields["credits"] =
                        JSONValue.object([
                            "has_credits": credits.hasCredits.map(JSONValue.bool) ?? .null,
                            "unlimited": credits.unlimited.map(JSONValue.bool) ?? .null,
                            "balance": .optional(credits.balance),
                        ]).droppingNulls
                }
                if let banked = report.resetCredits { fields["reset_credits"] = .number(Double(banked)) }
                if !report.additionalLimits.isEmpty {
                    fields["additional_limits"] = .array(
                        report.additionalLimits.map { extra in
                            JSONValue.object([
                                "limit_name": .string(extra.name), "metered_feature": .optional(extra.feature),
                                "limit_reached": .bool(extra.isAtLimit),
                                "windows": .array(
                                    [
                                        window(extra.primary, "primary_window"),
                                        window(extra.secondary, "secondary_window"),
                                    ].compactMap { $0 }
                                ),
                            ]).droppingNulls
                        }
                    )
                }
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
