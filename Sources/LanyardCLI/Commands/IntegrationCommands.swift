import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

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
                reason = "at its usage limit" + (resetsAt.map { ", resets \(RelativeTime.describe($0, now: inv.now))" } ?? "")
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

enum IntegrationCommands {
    static let codex = CommandSpec(
        name: "codex", summary: "write a slot into Codex's auth.json, or adopt Codex's sign-in into a slot",
        arguments: "export|import [SLOT]", minArguments: 1, maxArguments: 2,
        flags: [FlagSpec("codex-home", value: "DIR", "Codex's home (default $CODEX_HOME, else ~/.codex)")],
        prints: true, takesAccount: true,
        details: """
        export writes auth.json (atomically, 0600) for the slot (the resolved one by default); import adopts the sign-in \
        in auth.json into SLOT (default: named after its email) without revoking anything.
        """, subcommands: ["export", "import"]) { inv in
        let sub = inv.args.positionals[0]
        let home = CodexHome(explicit: inv.args.value("codex-home"), environment: inv.context.environment)
        let manager = try inv.accounts()
        switch sub {
        case "export":
            let (slot, _, _) = try inv.targetSlot(positional: inv.args.positionals.dropFirst().first)
            let file = try inv.runAsync { try await CodexSync(manager: manager).export(slot: slot, to: home) }
            inv.emit(.object(["slot": .string(slot.name), "auth_json": .string(home.authPath), "account_id": .optional(file.accountID)])) {
                inv.stdout.line("Wrote \(slot.name) to \(home.authPath).")
            }
        case "import":
            let requested = try inv.args.positionals.dropFirst().first.map { try SlotCommands.parseSlot($0, inv) }
            let adopted = try manager.adoptCodexSignIn(from: home, into: requested)
            inv.emit(.object(["slot": .string(adopted.slot.name), "email": .optional(adopted.account.email), "backend": .string(adopted.backend.rawValue)])) {
                inv.stdout.line("Adopted Codex's sign-in (\(adopted.account.email ?? "unknown account")) into slot \(adopted.slot.name).")
            }
        default:
            throw UsageError(message: "unknown codex command \"\(sub)\" (export or import)", command: "codex")
        }
        return .ok
    }

    static let env = CommandSpec(
        name: "env", summary: "print shell lines that export the slot's credentials", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1, flags: [FlagSpec("shell", value: "SHELL", choices: ["bash", "zsh", "fish", "sh", "json"], "bash, zsh, fish or json (default bash)")],
        prints: true, takesAccount: true,
        details: """
        For `eval "$(lanyard env)"`. Sets LANYARD_ACCOUNT and the variables the provider's env.NAME keys name. \
        --json (the same as --shell json) prints them as one JSON object.
        """) { inv in
        if inv.json, let shell = inv.args.value("shell"), shell != "json" {
            throw UsageError(message: "--json prints JSON; it cannot be given with --shell \(shell)", command: "env")
        }
        let (slot, record, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let variables = SlotEnvironment.variables(slot: slot, credential: credential, provider: manager.config.providers[record.provider])
        let shell = inv.json ? "json" : inv.args.value("shell") ?? "bash"
        if shell == "json" {
            inv.stdout.rawLine(JSONValue.object(variables.mapValues(JSONValue.string)).serialized(pretty: true))
            return .ok
        }
        guard let syntax = ShellQuoting.Shell(rawValue: shell) else {
            throw UsageError(message: "unknown shell \"\(shell)\" (bash, zsh, sh, fish or json)", command: "env")
        }
        for line in try ShellQuoting.exports(variables, for: syntax) { inv.stdout.rawLine(line) }
        return .ok
    }

    static let exec = CommandSpec(
        name: "exec", summary: "run a command with a slot's credentials (a private CODEX_HOME for openai)", arguments: "[SLOT] -- CMD [ARG…]",
        minArguments: 1, maxArguments: 10_000, flags: [], prints: false, takesAccount: true,
        details: """
        The slot is SLOT before `--` (like every other command), else --account and the usual rules. \
        CMD gets LANYARD_ACCOUNT, the provider's env.NAME variables and, for openai slots, CODEX_HOME pointing at a private \
        0700 folder under $XDG_RUNTIME_DIR holding the slot's auth.json. When CMD exits, tokens it rotated are copied back \
        and the folder removed; CMD inherits the folder's lock, so a folder whose exec was killed is recovered (by the next \
        exec or doctor) only once CMD is gone too. CMD's exit status is passed through; SIGTERM and SIGHUP are forwarded.
        """) { inv in
        // `exec SLOT -- CMD`: at most one word before `--`, the slot; without `--`, all is CMD.
        let before = inv.args.positionalsBeforeDashDash ?? 0
        guard before <= 1 else {
            throw UsageError(message: "exec takes one SLOT before `--` (then CMD and its arguments)", command: "exec")
        }
        let command = Array(inv.args.positionals.dropFirst(before))
        guard !command.isEmpty else { throw UsageError(message: "exec needs a command after `--`", command: "exec") }
        let (slot, _, _) = try inv.targetSlot(positional: before == 1 ? inv.args.positionals.first : nil)
        let manager = try inv.accounts()
        let environment = inv.context.environment
        let stderr = inv.stderr
        // No Ctrl-C handler of lanyard's own: the command gets the terminal's signals and SIGTERM
        // is forwarded to it. A refresh before it starts runs in a worker of its own session,
        // which finishes it even if lanyard is interrupted.
        let outcome = try inv.runAsync(interruptible: false) {
            try await manager.exec(command, slot: slot, environment: environment) { recoveries in
                for recovery in recoveries {
                    let kept = if case .kept = recovery.outcome { true } else { false }
                    stderr.line("lanyard: \(kept ? "warning: " : "")\(recovery.description)")
                }
            }
        }
        if let into = outcome.rotatedTokensStoredIn {
            inv.stderr.line("lanyard: stored the tokens the command rotated in \(into.name)")
        }
        if let failure = outcome.copyBackFailure {
            inv.stderr.line("lanyard: could not copy rotated tokens back into \(slot.name): \(failure.reason); "
                            + "they stay in \(failure.folder) until `lanyard doctor` (or the next exec) recovers them")
        }
        if outcome.status == 0 { return .ok }
        throw ChildExit(status: outcome.status)
    }
}

/// The exit status of `exec`'s command, passed through as lanyard's own.
struct ChildExit: Error {
    let status: Int32
}
