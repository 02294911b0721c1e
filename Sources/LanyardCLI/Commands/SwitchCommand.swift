import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

/// How `switch` reports Codex's auth.json following it (`[integrations] codex = true`).
enum CodexFollowView {
    /// Says on stderr (without `--json`) what Codex does about the switch.
    static func report(_ codex: CodexFollow, previous: Slot?, _ inv: Invocation) {
        if !codex.runningCodexPIDs.isEmpty && !inv.json {
            inv.stderr.line(
                "lanyard: Codex is running (pid \(codex.runningCodexPIDs.map(String.init).joined(separator: ", "))); "
                    + "it keeps its old account until restarted."
            )
        }
        if codex.copiedBack, let previous, !inv.json {
            inv.stderr.line("Copied the tokens Codex rotated back into \(previous.name).")
        }
    }

    static func json(_ codex: CodexFollow) -> JSONValue {
        .object([
            "auth_json": .string(codex.authPath), "copied_back": .bool(codex.copiedBack),
            "running_codex_pids": .array(codex.runningCodexPIDs.map { .number(Double($0)) }),
        ])
    }
}

/// `switch --json`.
struct SwitchView: JSONView {
    static let keys = ["active", "previous", "candidates", "codex", "codex_still_uses"]
    static let optionalKeys: Set<String> = ["candidates", "codex", "codex_still_uses"]
    let active: Slot
    let previous: Slot?
    /// `switch --best`: how each slot was weighed (left out when empty).
    let candidates: [JSONValue]
    /// Codex's auth.json following the switch (`[integrations] codex = true`).
    let codex: CodexFollow?
    /// The slot Codex's auth.json still holds when it does not follow.
    let codexStillUses: String?
    var json: JSONValue {
        var output: [String: JSONValue] = ["active": .string(active.name), "previous": .optional(previous?.name)]
        if !candidates.isEmpty { output["candidates"] = .array(candidates) }
        if let codex { output["codex"] = CodexFollowView.json(codex) }
        if let codexStillUses { output["codex_still_uses"] = .string(codexStillUses) }
        return .object(output)
    }
}

/// `switch --best`: shows how each slot of the active provider was weighed, and the choice.
enum BestSlotView {
    /// - Returns: the chosen slot, its busiest window's percentage, and each slot's reason (JSON).
    static func choose(_ inv: Invocation, _ manager: AccountManager) throws -> (Slot, Double?, [JSONValue]) {
        let choice = try inv.runAsync { try await manager.bestSlot() }
        var reasons: [JSONValue] = []
        for candidate in choice.candidates {
            // One switch, on a copy: Swift 6.3's optimiser mis-handles a second switch on the
            // borrowed enum (an ownership verifier crash in `make release`).
            let verdict = candidate.verdict
            var used: JSONValue = .null
            let reason: String
            let which = candidate.window.map { " (\(windowName($0)))" } ?? ""
            switch verdict {
            case .headroom(let percent):
                used = .number(percent)
                reason = "\(percent.rounded().saturatingInt)% used in its busiest window\(which)"
            case .atLimit(let resetsAt):
                reason =
                    "at its usage limit\(which)"
                    + (resetsAt.map { ", resets \(RelativeTime.describe($0, now: inv.now))" } ?? "")
            case .failed(let code): reason = "skipped: \(code.rawValue)"
            case .notSignedIn(let state): reason = "skipped: \(state.description)"
            }
            reasons.append(
                JSONValue.object([
                    "slot": .string(candidate.slot.name), "used_percent": used, "reason": .string(reason),
                    "window": .optional(candidate.window?.length?.className),
                    "limit_window_seconds": candidate.window?.windowSeconds.map { .number(Double($0)) } ?? .null,
                ])
                .droppingNulls
            )
            if !inv.json { inv.stdout.line("  \(candidate.slot.name.padded(toWidth: 16))\(reason)") }
        }
        let chosen = try choice.chosen()
        if !inv.json {
            inv.stdout.line(
                "Choosing \(chosen.slot.name): the most headroom "
                    + "(\((chosen.usedPercent ?? 0).rounded().saturatingInt)% used)."
            )
        }
        return (chosen.slot, chosen.usedPercent, reasons)
    }

    /// A window's name for people: its class by length ("5 h", "weekly", "12 days"), else
    /// "length not given".
    static func windowName(_ window: UsageWindow) -> String {
        window.length.map { "\($0.name) window" } ?? "window of unknown length"
    }
}

extension SlotCommands {
    static let switchSlot = CommandSpec(
        name: "switch",
        summary: "make SLOT the active slot (--best: the one with most usage headroom)",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [FlagSpec("best", "choose among the active provider's slots by the usage endpoint, and say why")],
        prints: true,
        takesAccount: false,
        details: """
            The active slot is used when no --account, LANYARD_ACCOUNT or \
            .lanyard file chooses one. With `[integrations] codex = true` \
            Codex's auth.json follows: tokens Codex rotated are first copied back into the slot that was active. \
            With no SLOT: the only slot, or of two slots the one that is not active; otherwise it lists the slots \
            and asks on a terminal (exit 2 without one).
            """,
        examples: [
            CommandExample("lanyard switch personal", "make personal the slot used when nothing else chooses one"),
            CommandExample("lanyard switch", "with two slots, switch to the other one"),
            CommandExample("lanyard switch --best", "switch to the slot with the most usage headroom, and say why"),
        ],
        networkFlags: ["best"]
    ) { inv in
        var reasons: [JSONValue] = []
        let slot: Slot
        var why = SwitchReason.user
        let manager = try inv.accounts()
        if inv.args.has("best") {
            guard inv.args.positionals.isEmpty else {
                throw UsageError(message: "give a SLOT or --best, not both", command: "switch")
            }
            let used: Double?
            (slot, used, reasons) = try BestSlotView.choose(inv, manager)
            why = .best(usedPercent: used)
        } else {
            if let name = inv.args.positionals.first {
                slot = try parseSlot(name, inv)
            } else if let implied = try manager.impliedSwitchTarget() {
                slot = implied
            } else if let chosen = try askWhichSlot(inv, manager) {
                slot = chosen
            } else {
                inv.stderr.line("Nothing switched.")
                return .failure  // a "no" is an answer, not an interruption
            }
        }
        let environment = inv.context.environment
        let reason = why
        let outcome = try inv.runAsync {
            try await manager.switchActive(to: slot, environment: environment, reason: reason)
        }
        let previous = outcome.change.previous
        if let codex = outcome.codex { CodexFollowView.report(codex, previous: previous, inv) }
        if let other = outcome.codexStillUses {
            if !inv.json {
                inv.stderr.line(
                    "lanyard: Codex still uses \(other): set `[integrations] codex = true` in config.ini, "
                        + "or run `lanyard codex export` (Codex does not follow `switch` otherwise)"
                )
            }
        }
        inv.emit(
            SwitchView(
                active: slot,
                previous: previous,
                candidates: reasons,
                codex: outcome.codex,
                codexStillUses: outcome.codexStillUses
            )
        ) {
            let who = outcome.change.record.account.email.map { " (\($0))" } ?? ""
            inv.stdout.line(
                previous == slot ? "\(slot.name)\(who) is already active." : "Switched to \(slot.name)\(who)."
            )
        }
        // The switch stands (exit 0), but a slot that cannot be used now is said, with the fix.
        if !inv.json, let warning = unusableWarning(slot, outcome.change.record, inv) { inv.stderr.line(warning) }
        return .ok
    }

    /// Why `slot`, just made active, cannot be used now, with the fix: it must sign in again, or
    /// the last usage any Lanyard program fetched (usage.json) says it is at its limit.
    static func unusableWarning(_ slot: Slot, _ record: SlotRecord, _ inv: Invocation) -> HumanText? {
        if case .signedIn = record.state {
        } else {
            return "lanyard: warning: \(slot.name) must sign in again before "
                + "it can be used: run `lanyard login \(slot.name)`"
        }
        guard let known = UsageState.load(inv.paths).slots[slot], known.report.isAtLimit else { return nil }
        let resets = known.report.limitResetsAt
        if let resets, resets <= inv.now { return nil }  // that window has reset since
        let until = resets.map { " until \(RelativeTime.clockTime($0, now: inv.now))" } ?? ""
        let asOf = RelativeTime.clockTime(known.fetchedAt, now: inv.now)
        return """
            lanyard: warning: \(slot.name) is at its usage limit\(until) (as of \(asOf)): \
            `lanyard switch --best` picks the slot with \
            the most headroom; `lanyard usage \(slot.name)` checks again
            """
    }

    /// `switch` with no slot and no implied one: lists the slots and asks on a terminal (nil
    /// for no answer); off a terminal, a usage error that lists them.
    static func askWhichSlot(_ inv: Invocation, _ manager: AccountManager) throws -> Slot? {
        let document = try manager.registry.load()
        let slots = document.sortedSlots
        guard !slots.isEmpty else { throw RegistryError.noActiveSlot }
        guard inv.context.stdinIsTTY && !inv.json else {
            let names = slots.map(\.slot.name).joined(separator: ", ")
            throw UsageError(message: "switch needs a SLOT: one of \(names)", command: "switch")
        }
        for (index, entry) in slots.enumerated() {
            let who = entry.record.account.email.map { " (\($0))" } ?? ""
            let mark = entry.slot == document.active ? "  [active]" : ""
            inv.stderr.line("  \(index + 1)) \(entry.slot.name)\(who)\(mark)")
        }
        inv.stderr.write("Switch to which slot? [1-\(slots.count) or a name] ")
        guard let answer = ((try? inv.context.input.line(maxBytes: 1024)) ?? nil)?.trimmingSpaces(), !answer.isEmpty
        else { return nil }
        if let number = Int(answer), (1...slots.count).contains(number) { return slots[number - 1].slot }
        if let match = slots.first(where: { $0.slot.name == answer }) { return match.slot }
        let hint = Suggest.closest(to: answer, in: slots.map(\.slot.name)).map { " (did you mean \($0)?)" } ?? ""
        throw UsageError(message: "no slot \"\(answer)\" among the \(slots.count) listed\(hint)", command: "switch")
    }
}
