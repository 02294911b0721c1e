import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore
import LanyardAgent

/// How `switch` reports Codex's auth.json following it (`[integrations] codex = true`).
enum CodexFollowView {
    static func render(_ codex: CodexFollow, previous: Slot?, _ inv: Invocation) -> JSONValue {
        if !codex.runningCodexPIDs.isEmpty && !inv.json {
            inv.stderr.line("lanyard: Codex is running (pid \(codex.runningCodexPIDs.map(String.init).joined(separator: ", "))); "
                            + "it keeps its old account until restarted.")
        }
        if codex.copiedBack, let previous, !inv.json { inv.stderr.line("Copied the tokens Codex rotated back into \(previous.name).") }
        return .object(["auth_json": .string(codex.authPath), "copied_back": .bool(codex.copiedBack),
                        "running_codex_pids": .array(codex.runningCodexPIDs.map { .number(Double($0)) })])
    }
}

/// `switch --best`: shows how each slot of the active provider was weighed, and the choice.
enum BestSlotView {
    static func choose(_ inv: Invocation, _ manager: AccountManager) throws -> (Slot, [JSONValue]) {
        let choice = try inv.runAsync { try await manager.bestSlot() }
        var reasons: [JSONValue] = []
        for candidate in choice.candidates {
            // One switch, on a copy: Swift 6.3's optimiser mis-handles a second switch on the
            // borrowed enum (an ownership verifier crash in `make release`).
            let verdict = candidate.verdict
            var used: JSONValue = .null
            let reason: String
            switch verdict {
            case .headroom(let percent):
                used = .number(percent)
                reason = "\(percent.rounded().saturatingInt)% used in its busiest window"
            case .atLimit(let resetsAt):
                reason = "at its usage limit" + (resetsAt.map { " until \(RelativeTime.describe($0, now: inv.now))" } ?? "")
            case .failed(let code): reason = "skipped: \(code)"
            case .notSignedIn(let state): reason = "skipped: \(state.description)"
            }
            reasons.append(.object(["slot": .string(candidate.slot.name), "used_percent": used, "reason": .string(reason)]))
            if !inv.json { inv.stdout.line("  \(candidate.slot.name.padded(toWidth: 16))\(reason)") }
        }
        let chosen = try choice.chosen()
        if !inv.json { inv.stdout.line("Choosing \(chosen.slot.name): the most headroom (\((chosen.usedPercent ?? 0).rounded().saturatingInt)% used).") }
        return (chosen.slot, reasons)
    }
}

extension SlotCommands {
    static let switchSlot = CommandSpec(
        name: "switch", summary: "make SLOT the active slot (--best: the one with most usage headroom)", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1,
        flags: [FlagSpec("best", "choose among the active provider's slots by the usage endpoint, and say why")],
        prints: true, takesAccount: false,
        details: """
        The active slot is used when no --account, LANYARD_ACCOUNT or .lanyard file chooses one. With `[integrations] codex = true` \
        Codex's auth.json follows: tokens Codex rotated are first copied back into the slot that was active.
        """,
        examples: [
            CommandExample("lanyard switch personal", "make personal the slot used when nothing else chooses one"),
            CommandExample("lanyard switch --best", "switch to the slot with the most usage headroom, and say why"),
        ], networkFlags: ["best"]) { inv in
        var reasons: [JSONValue] = []
        let slot: Slot
        let manager = try inv.accounts()
        if inv.args.has("best") {
            guard inv.args.positionals.isEmpty else { throw UsageError(message: "give a SLOT or --best, not both", command: "switch") }
            (slot, reasons) = try BestSlotView.choose(inv, manager)
        } else {
            guard let name = inv.args.positionals.first else { throw UsageError(message: "missing argument: usage: \(inv.spec.usage)", command: "switch") }
            slot = try parseSlot(name, inv)
        }
        let environment = inv.context.environment
        let outcome = try inv.runAsync { try await manager.switchActive(to: slot, environment: environment) }
        let previous = outcome.change.previous
        var output: [String: JSONValue] = ["active": .string(slot.name), "previous": .optional(previous?.name)]
        if !reasons.isEmpty { output["candidates"] = .array(reasons) }
        if let codex = outcome.codex { output["codex"] = CodexFollowView.render(codex, previous: previous, inv) }
        if let other = outcome.codexStillUses {
            output["codex_still_uses"] = .string(other)
            if !inv.json {
                inv.stderr.line("lanyard: Codex still uses \(other): set `[integrations] codex = true` in config.ini, "
                                + "or run `lanyard codex export` (Codex does not follow `switch` otherwise)")
            }
        }
        inv.emit(.object(output)) {
            let who = outcome.change.record.account.email.map { " (\($0))" } ?? ""
            inv.stdout.line(previous == slot ? "\(slot.name)\(who) is already active." : "Switched to \(slot.name)\(who).")
        }
        return .ok
    }
}
