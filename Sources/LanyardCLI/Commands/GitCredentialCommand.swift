import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

enum GitCredentialCommand {
    static let command = CommandSpec(
        name: "git-credential", summary: "git credential helper: hand git a slot's fresh access token",
        arguments: "get|store|erase | setup HOST[/PATH]", minArguments: 1, maxArguments: 2,
        flags: [
            FlagSpec("slot", value: "SLOT", "setup: also show the [git] config line mapping HOST to SLOT"),
            FlagSpec("apply", "setup: run `git config --global` instead of printing the commands"),
        ],
        prints: false, takesAccount: false,
        details: """
        get/store/erase speak git's credential-helper protocol on stdin/stdout (key=value lines ended by a blank line). \
        get answers for hosts mapped in the [git] config group (longest path prefix wins): username (the provider's \
        git-username, else x-access-token), password (the slot's access token, refreshed when due) and password_expiry_utc; \
        for unmapped hosts it prints nothing, so git asks its other helpers. store and erase do nothing: Lanyard owns \
        the tokens. Input that is not text (a NUL byte), a line over 64 KiB or a request over 1 MiB is refused at once \
        (exit 2). setup prints (or with --apply runs) the git config that makes git use this helper for https://HOST.
        """, subcommands: ["get", "store", "erase", "setup"]) { inv in
        let sub = inv.args.positionals[0]
        switch sub {
        case "get":
            guard inv.args.positionals.count == 1 else { throw extra(inv) }
            return try get(inv)
        case "store", "erase":
            guard inv.args.positionals.count == 1 else { throw extra(inv) }
            // Lanyard owns these tokens (it refreshes and rotates them): what git would store is a
            // copy of ours, and erasing after a rejected push must not delete the slot's session.
            _ = try GitCredential.read(inv.context.input)
            return .ok
        case "setup":
            guard inv.args.positionals.count == 2 else {
                throw UsageError(message: "setup needs HOST (like github.com or github.com/org)", command: inv.spec.name)
            }
            return try setup(inv, target: inv.args.positionals[1])
        default:
            preconditionFailure("the parser admits only the table's subcommands")
        }
    }

    static func extra(_ inv: Invocation) -> UsageError {
        UsageError(message: "unexpected argument \"\(inv.args.positionals[1])\": usage: \(inv.spec.usage)", command: inv.spec.name)
    }

    static func get(_ inv: Invocation) throws -> ExitStatus {
        let request = try GitCredential.read(inv.context.input)
        let config = try inv.config()
        // Only https: a token must never go out over plain http.
        guard request.protocol?.lowercased() == "https", let host = request.host,
              let (_, slot) = GitCredential.slot(host: host, path: request.path, in: config.gitCredentials) else {
            return .ok
        }
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let token = credential.tokens.accessToken
        guard !token.isEmpty, !token.contains(where: { $0.isNewline || $0 == "\0" }) else {
            throw StoreError.corrupt(source: "slot \(slot.name)", detail: "the access token cannot be passed to git")
        }
        let username = config.providers[credential.provider]?.gitUsername ?? "x-access-token"
        inv.stdout.raw(GitCredential.answer(username: username, password: token, expiresAt: credential.tokens.expiresAt))
        return .ok
    }

    static func setup(_ inv: Invocation, target: String) throws -> ExitStatus {
        guard let pattern = ConfigFile.gitPattern(target) else {
            throw UsageError(message: "setup needs HOST or HOST/PATH (like github.com or github.com/org), without https://", command: inv.spec.name)
        }
        let host = String(pattern.split(separator: "/")[0])
        let config = try inv.config()
        let slot = try inv.args.value("slot").map { try SlotCommands.parseSlot($0, inv) }
        let usesPath = pattern.contains("/") || GitCredential.hostUsesPaths(host, in: config.gitCredentials)
        var settings: [(String, String)] = [("credential.https://\(host).helper", "!lanyard git-credential")]
        if usesPath { settings.append(("credential.https://\(host).useHttpPath", "true")) }
        let mapped = config.gitCredentials[pattern]
        if inv.args.has("apply") {
            for (key, value) in settings {
                try runGit(["config", "--global", "--replace-all", key, value], inv)
                inv.stdout.line("set \(key) = \(value)")
            }
        } else {
            for (key, value) in settings {
                inv.stdout.line("git config --global \(key) '\(value)'")
            }
        }
        if let slot, mapped != slot {
            inv.stderr.line("Add this to \(inv.paths.configFile):")
            inv.stderr.line("[git]")
            inv.stderr.line("\(pattern) = \(slot.name)")
        } else if mapped == nil, slot == nil {
            inv.stderr.line("lanyard: warning: no [git] mapping for \(pattern) in \(inv.paths.configFile): git gets nothing from Lanyard until you add one (`\(pattern) = SLOT`).")
        }
        return .ok
    }

    static func runGit(_ args: [String], _ inv: Invocation) throws {
        let run: Subprocess.Result
        do {
            run = try Subprocess.run("/usr/bin/env", ["git"] + args, environment: inv.context.environment, stderr: .capture)
        } catch { throw UsageError(message: "cannot run git: \(error.userFacingDescription)", command: inv.spec.name) }
        guard run.status == 0 else {
            let message = String(decoding: run.stderr, as: UTF8.self)
            throw GitSetupError(message: "git config failed (status \(run.status)): \(TerminalText.escaped(message.trimmingWhitespaceAndNewlines()))")
        }
    }
}

struct GitSetupError: LanyardError {
    let message: String
    var code: String { "git_config_failed" }
    var errorDescription: String? { message }
}
