import FoundationEssentials
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

extension GitCredentialCommand {
    static let setup = CommandSpec(
        name: "git-credential setup",
        summary: "configure git to use this helper for https://HOST",
        arguments: "HOST[/PATH]",
        minArguments: 1,
        maxArguments: 1,
        flags: [
            FlagSpec("slot", value: "SLOT", "also show the [git] config line mapping HOST to SLOT"),
            FlagSpec("apply", "run `git config --global` instead of printing the commands"),
        ],
        prints: false,
        takesAccount: false,
        details: """
            Prints (or with --apply runs) the git config that makes git use this helper for https://HOST, plus \
            useHttpPath when the argument has a path or [git] maps a path of that host. setup never edits config.ini: \
            with --slot it prints the [git] line to add when it is not there yet.
            """,
        examples: [
            CommandExample(
                "lanyard git-credential setup github.com --slot work",
                "show the git config and the [git] line for github.com"
            ),
            CommandExample(
                "lanyard git-credential setup github.com/acme --apply",
                "configure git for repositories under github.com/acme"
            ),
        ]
    ) { inv in
        try setup(inv, target: inv.args.positionals[0])
    }

    static func setup(_ inv: Invocation, target: String) throws -> ExitStatus {
        guard let pattern = ConfigFile.gitPattern(target) else {
            throw UsageError(
                message: "setup needs HOST or HOST/PATH (like github.com or github.com/org), without https://",
                command: inv.spec.name
            )
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
            inv.stderr.line(
                "lanyard: warning: no [git] mapping for \(pattern) in \(inv.paths.configFile): "
                    + "git gets nothing from Lanyard until you add one (`\(pattern) = SLOT`)."
            )
        }
        return .ok
    }

    static func runGit(_ args: [String], _ inv: Invocation) throws {
        let run: Subprocess.Result
        do {
            run = try Subprocess.run(
                "/usr/bin/env",
                ["git"] + args,
                environment: inv.context.environment,
                stderr: .capture
            )
        } catch { throw UsageError(message: "cannot run git: \(error.userFacingDescription)", command: inv.spec.name) }
        guard run.status == 0 else {
            let message = String(decoding: run.stderr, as: UTF8.self)
            throw GitSetupError(
                message: "git config failed (status \(run.status)): "
                    + "\(TerminalText.escaped(message.trimmingWhitespaceAndNewlines()))"
            )
        }
    }
}

struct GitSetupError: LanyardError {
    let message: String
    var code: ErrorCode { .gitConfigFailed }
    var errorDescription: String? { message }
}
