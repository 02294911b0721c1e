import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

extension IntegrationCommands {
    static let exec = CommandSpec(
        name: "exec", summary: "run a command with a slot's credentials (a private CODEX_HOME for openai)", arguments: "[SLOT] -- CMD [ARG…]",
        minArguments: 1, maxArguments: 10_000, flags: [], prints: false, takesAccount: true,
        details: """
        The slot is SLOT before `--` (like every other command), else --account and the usual rules. \
        CMD gets LANYARD_ACCOUNT, the provider's env.NAME variables and, for openai slots, CODEX_HOME pointing at a private \
        0700 folder under $XDG_RUNTIME_DIR holding the slot's auth.json. When CMD exits, tokens it rotated are copied back \
        and the folder removed; CMD inherits the folder's lock, so a folder whose exec was killed is recovered (by the next \
        exec or doctor) only once CMD is gone too. CMD's exit status is passed through; SIGTERM and SIGHUP are forwarded.
        """,
        examples: [
            CommandExample("lanyard exec work -- codex", "run Codex as work, in a private CODEX_HOME"),
            CommandExample("lanyard exec gh-octocat -- gh pr list", "run gh with GH_TOKEN from the slot gh-octocat"),
        ]) { inv in
        // `exec SLOT -- CMD`: at most one word before `--`, the slot; without `--`, all is CMD.
        let before = inv.args.positionalsBeforeDashDash ?? 0
        guard before <= 1 else {
            throw UsageError(message: "exec takes one SLOT before `--` (then CMD and its arguments)", command: "exec")
        }
        let command = Array(inv.args.positionals.dropFirst(before))
        guard !command.isEmpty else { throw UsageError(message: "exec needs a command after `--`", command: "exec") }
        let (slot, record, _) = try inv.targetSlot(positional: before == 1 ? inv.args.positionals.first : nil)
        let manager = try inv.accounts()
        // First what killed execs left: the slot's stored refresh token may be one their command
        // has since rotated away, the live one waiting in its folder.
        for recovery in try inv.runAsync({ await manager.recoverAbandonedExecFolders() }) {
            let kept = if case .kept = recovery.outcome { true } else { false }
            inv.stderr.line("lanyard: \(kept ? "warning: " : "")\(recovery.description)")
        }
        let credential = try inv.freshCredential(manager, slot: slot)
        let provider = manager.config.providers[record.provider]
        var environment = inv.context.environment
        for (k, v) in Environment.variables(slot: slot, credential: credential, provider: provider) { environment[k] = v }
        var folder: ExecFolder?
        if provider?.kind == .openai {
            let made = try ExecFolder.create(for: slot, paths: inv.paths)
            do { try made.home.write(try CodexAuthFile(credential: credential, slot: slot)) } catch {
                made.remove()
                throw error
            }
            environment["CODEX_HOME"] = made.home.directory
            folder = made
        }
        let status: Int32
        do {
            status = try ChildProcess.run(command, environment: environment, inheriting: folder.map { [$0.lockDescriptor] } ?? [])
        } catch {
            folder?.remove()
            throw error
        }
        if let folder {
            do {
                if let into = try inv.runAsync({ try await folder.finish(manager) }) {
                    inv.stderr.line("lanyard: stored the tokens the command rotated in \(into.name)")
                }
            } catch {
                // The folder stays (its lock is released when this process ends): the tokens in it
                // may be the only live ones.
                inv.stderr.line("lanyard: could not copy rotated tokens back into \(slot.name): \(error.userFacingDescription); "
                                + "they stay in \(folder.home.directory) until `lanyard doctor` (or the next exec) recovers them")
            }
        }
        if status == 0 { return .ok }
        throw ChildExit(status: status)
    }
}

/// `exec`'s command is not on PATH (or not executable): exit 127, as a shell.
struct CommandNotFound: LanyardError {
    let name: String
    var code: String { "command_not_found" }
    var errorDescription: String? { "command not found: \(name)" }
}

/// The exit status of `exec`'s command, passed through as lanyard's own.
struct ChildExit: Error {
    let status: Int32
}

/// Runs a child in the same process group (so it keeps the terminal), forwarding SIGTERM and
/// SIGHUP; Ctrl-C already reaches it through the terminal. The descriptors in `inheriting`
/// (close-on-exec here) stay open in the child, at the same numbers.
enum ChildProcess {
    static func run(_ argv: [String], environment: [String: String], inheriting: [Int32] = []) throws -> Int32 {
        let path = argv[0].contains("/") ? argv[0] : searchPath(argv[0], environment["PATH"] ?? "/usr/bin:/bin")
        guard let path else { throw CommandNotFound(name: argv[0]) }
        let args = argv.map { strdup($0) } + [nil]
        let env = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { args.forEach { free($0) }; env.forEach { free($0) } }
        for sig in [SIGINT, SIGQUIT] { signal(sig, SIG_IGN) }  // the child handles the terminal's signals
        defer { for sig in [SIGINT, SIGQUIT] { signal(sig, SIG_DFL) } }
        // Forwarding is in place before the child starts, so a signal that arrives while it starts
        // is delivered once it exists rather than lost. A plain sigaction handler (kill is
        // async-signal-safe) works whatever threads block the signal.
        forwardPID = 0
        forwardPending = 0
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { sig in
            if forwardPID > 0 { kill(forwardPID, sig) } else { forwardPending = sig }
        }
        sigemptyset(&action.sa_mask)
        for sig in [SIGTERM, SIGHUP] { sigaction(sig, &action, nil) }
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in [SIGTERM, SIGHUP] { sigaddset(&unblock, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        defer { for sig in [SIGTERM, SIGHUP] { signal(sig, SIG_DFL) } }
        var pid: pid_t = 0
        var attributes = ChildSignals.attributes()
        defer { posix_spawnattr_destroy(&attributes) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 of a descriptor onto itself clears its close-on-exec flag in the child only.
        for fd in inheriting { posix_spawn_file_actions_adddup2(&actions, fd, fd) }
        let spawned = ProcessHardening.withInheritedCoreLimit { posix_spawn(&pid, path, &actions, &attributes, args, env) }
        guard spawned == 0 else {
            throw UsageError(message: "cannot run \(argv[0]): \(String(cString: strerror(spawned)))", command: "exec")
        }
        forwardPID = pid
        if forwardPending != 0 { kill(pid, forwardPending) }
        let status = (try? waitForExit(pid)) ?? 0
        forwardPID = 0
        return exitCode(ofWaitStatus: status)
    }

    static func searchPath(_ name: String, _ path: String) -> String? {
        path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}

/// The child `exec` forwards signals to, and a signal that came before it existed (read by the
/// signal handler, hence plain globals).
nonisolated(unsafe) private var forwardPID: pid_t = 0

nonisolated(unsafe) private var forwardPending: Int32 = 0

/// Spawn attributes that give a child default signal handling and an empty signal mask, whatever
/// lanyard itself ignores or blocks.
enum ChildSignals {
    static func attributes() -> posix_spawnattr_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, sig) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        return attributes
    }
}
