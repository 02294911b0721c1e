import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardSupport

extension IntegrationCommands {
    static let exec = CommandSpec(
        name: "exec",
        summary: "run a command with a slot's credentials (a private CODEX_HOME for openai)",
        arguments: "[SLOT] -- CMD [ARG…]",
        minArguments: 1,
        maxArguments: 10_000,
        flags: [
            FlagSpec(
                "best",
                "run CMD as the slot `switch --best` would choose (the most usage headroom), without switching"
            ),
            FlagSpec(
                "follow",
                "move Codex to the slot each `switch` (or auto-switch) chooses while it runs: "
                    + "stop it, then `codex resume` the session"
            ),
            FlagSpec(
                "grace",
                value: "SECONDS",
                "with --follow: how long Codex has to end after SIGINT before SIGTERM, "
                    + "and after SIGTERM before SIGKILL (default 10)"
            ),
        ],
        prints: false,
        takesAccount: true,
        details: """
            The slot is SLOT before `--` (like every other command), else --account and the usual rules. \
            CMD gets LANYARD_ACCOUNT, the provider's env.NAME variables and, \
            for openai slots, CODEX_HOME pointing at a private \
            0700 folder under $XDG_RUNTIME_DIR holding the slot's auth.json. \
            When CMD exits, tokens it rotated are copied back \
            and the folder removed; CMD inherits the folder's lock, \
            so a folder whose exec was killed is recovered (by the next \
            exec or doctor) only once CMD is gone too. \
            CMD's exit status is passed through; SIGTERM and SIGHUP are forwarded. \
            With --best, the slot is the one `switch --best` would choose \
            (asking the usage endpoint); the active slot does not change. \
            With --follow (openai slots, for Codex), \
            each change of the active slot while CMD runs moves it: CMD gets SIGINT \
            (SIGTERM after --grace seconds, SIGKILL after as many again), \
            the new slot's auth.json replaces the old in the same \
            CODEX_HOME, and `CMD resume SESSION_ID` starts for the session \
            CMD was recording (CMD as given when it recorded none). \
            A slot that cannot take over (it must sign in) leaves CMD running; \
            exec then exits with that error's status once CMD ends.
            """,
        examples: [
            CommandExample("lanyard exec work -- codex", "run Codex as work, in a private CODEX_HOME"),
            CommandExample("lanyard exec gh-octocat -- gh pr list", "run gh with GH_TOKEN from the slot gh-octocat"),
            CommandExample(
                "lanyard exec --best -- codex",
                "run Codex as the slot with the most usage headroom; the active slot stays"
            ),
            CommandExample(
                "lanyard exec --follow -- codex",
                "run Codex, and move it to the slot each `lanyard switch` chooses"
            ),
        ],
        networkFlags: ["best"]
    ) { inv in
        // `exec SLOT -- CMD`: at most one word before `--`, the slot; without `--`, all is CMD.
        let before = inv.args.positionalsBeforeDashDash ?? 0
        guard before <= 1 else {
            throw UsageError(message: "exec takes one SLOT before `--` (then CMD and its arguments)", command: "exec")
        }
        let command = Array(inv.args.positionals.dropFirst(before))
        guard !command.isEmpty else { throw UsageError(message: "exec needs a command after `--`", command: "exec") }
        if inv.args.value("grace") != nil && !inv.args.has("follow") {
            throw UsageError(message: "--grace goes with --follow", command: "exec")
        }
        let manager = try inv.accounts()
        let slot: Slot
        if inv.args.has("best") {
            guard before == 0, inv.args.value("account") == nil else {
                throw UsageError(message: "give a SLOT or --best, not both", command: "exec")
            }
            let chosen = try inv.runAsync { try await manager.bestSlot() }.chosen()
            slot = chosen.slot
            inv.stderr.line(
                "lanyard: running as \(slot.name), the slot with the most headroom "
                    + "(\((chosen.usedPercent ?? 0).rounded().saturatingInt)% used)"
            )
        } else {
            slot = try inv.targetSlot(positional: before == 1 ? inv.args.positionals.first : nil).0
        }
        let environment = inv.context.environment
        let stderr = inv.stderr
        if inv.args.has("follow") { return try follow(inv, command: command, slot: slot, manager: manager) }
        // No Ctrl-C handler of lanyard's own: the command gets the terminal's signals and SIGTERM
        // is forwarded to it. A refresh before it starts runs in a worker of its own session,
        // which finishes it even if lanyard is interrupted.
        let outcome = try inv.runAsync(interruptible: false) {
            try await manager.exec(command, slot: slot, environment: environment, recovered: reportRecoveries(stderr))
        }
        if let into = outcome.rotatedTokensStoredIn {
            inv.stderr.line("lanyard: stored the tokens the command rotated in \(into.name)")
        }
        if let failure = outcome.copyBackFailure {
            inv.stderr.line(
                "lanyard: could not copy rotated tokens back into \(slot.name): \(failure.reason); "
                    + "they stay in \(failure.folder) until `lanyard doctor` (or the next exec) recovers them"
            )
        }
        if outcome.status == 0 { return .ok }
        throw ChildExit(status: outcome.status)
    }
}

extension IntegrationCommands {
    /// `exec --follow`: Codex moved to each slot `switch` chooses while it runs.
    private static func follow(
        _ inv: Invocation,
        command: [String],
        slot: Slot,
        manager: AccountManager
    ) throws -> ExitStatus {
        let options =
            try inv.args.value("grace").map { raw in
                guard let seconds = Double(raw), seconds.isFinite, seconds > 0, seconds <= 3600 else {
                    throw UsageError(
                        message: "--grace needs a number of seconds above 0, "
                            + "at most 3600, got \"\(TerminalText.escaped(raw))\"",
                        command: "exec"
                    )
                }
                return FollowOptions(grace: seconds)
            } ?? FollowOptions()
        let environment = inv.context.environment
        let stderr = inv.stderr
        // As exec: no Ctrl-C handler of lanyard's own; Ctrl-C belongs to Codex.
        let outcome = try inv.runAsync(interruptible: false) {
            try await manager.execFollowing(
                command,
                slot: slot,
                environment: environment,
                options: options,
                recovered: reportRecoveries(stderr),
                report: { event in
                    switch event {
                    case .moving(let move):
                        let how =
                            move.session.map { "resuming session \($0)" }
                            ?? "no session recorded yet: starting it again"
                        stderr.line("lanyard: moving Codex from \(move.from.name) to \(move.to.name) (\(how))")
                    case .notFollowing(let failure):
                        stderr.line("lanyard: \(failure.userFacingDescription)")
                    }
                }
            )
        }
        if let into = outcome.rotatedTokensStoredIn {
            inv.stderr.line("lanyard: stored the tokens the command rotated in \(into.name)")
        }
        if let failure = outcome.copyBackFailure {
            inv.stderr.line(
                "lanyard: could not copy rotated tokens back into "
                    + "\((outcome.moves.last?.to ?? slot).name): \(failure.reason); "
                    + "they stay in \(failure.folder) until `lanyard doctor` (or the next exec) recovers them"
            )
        }
        if let failure = outcome.notFollowed { throw failure }
        if outcome.status == 0 { return .ok }
        throw ChildExit(status: outcome.status)
    }

    /// Prints what became of the folders killed runs left (before the command starts).
    private static func reportRecoveries(_ stderr: TextSink) -> @Sendable ([ExecFolderRecovery]) -> Void {
        { recoveries in
            for recovery in recoveries {
                let kept = if case .kept = recovery.outcome { true } else { false }
                stderr.line("lanyard: \(kept ? "warning: " : "")\(recovery.description)")
            }
        }
    }
}

/// The exit status of `exec`'s command, passed through as lanyard's own.
struct ChildExit: Error {
    let status: Int32
}
