import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

enum GitCredentialCommand {
    static let command = CommandSpec(
        group: "git-credential", summary: "git credential helper: hand git a slot's fresh access token",
        details: """
        get, store and erase speak git's credential-helper protocol on stdin and stdout (key=value lines ended by \
        a blank line); git runs them once `lanyard git-credential setup HOST` has configured it. Which slot's \
        token git gets for a host is set in the [git] group of config.ini (HOST = SLOT or HOST/PATH = SLOT).
        """,
        examples: [
            CommandExample("lanyard git-credential setup github.com --apply", "make git ask Lanyard for https://github.com"),
            CommandExample("printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential get", "what git would get"),
        ],
        subcommands: [get, store, erase, setup])

    /// What `get`, `store` and `erase` refuse before reading further.
    static let inputLimits = """
        Input that is not text (a NUL byte), a line over 64 KiB or a request over 1 MiB is refused at once (exit 2).
        """

    static let get = CommandSpec(
        name: "git-credential get", summary: "answer git's request with the mapped slot's token", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: false, takesAccount: false,
        details: """
        For a request (protocol=https) whose host, and path when git sends one, is mapped in the [git] group \
        (longest path prefix wins), prints username (the provider's git-username, else x-access-token), password \
        (the slot's access token, refreshed when due) and password_expiry_utc. For an unmapped host, or plain \
        http, it prints nothing, so git asks its other helpers. \(inputLimits)
        """,
        examples: [
            CommandExample("printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential get", "see what git gets for github.com"),
            CommandExample("git credential fill <<< $'protocol=https\\nhost=github.com\\n'", "the same through git, with every helper it has"),
        ]) { inv in
        try get(inv)
    }

    // Lanyard owns these tokens (it refreshes and rotates them): what git would store is a copy of
    // ours, and erasing after a rejected push must not delete the slot's session.
    static let store = CommandSpec(
        name: "git-credential store", summary: "read git's request and keep nothing (Lanyard owns the tokens)", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: false, takesAccount: false,
        details: "Reads the request and changes nothing: a copy stored by git would go stale at the next refresh. \(inputLimits)",
        examples: [CommandExample("printf 'protocol=https\\nhost=github.com\\nusername=x\\npassword=p\\n\\n' | lanyard git-credential store",
                                  "what git runs after a successful push: exits 0, stores nothing")]) { inv in
        _ = try GitCredential.read(inv.context.input)
        return .ok
    }

    static let erase = CommandSpec(
        name: "git-credential erase", summary: "read git's request and delete nothing (the slot stays signed in)", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: false, takesAccount: false,
        details: "Reads the request and changes nothing: a rejected push must not delete the slot's session. \(inputLimits)",
        examples: [CommandExample("printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential erase",
                                  "what git runs after a rejected password: exits 0, the slot keeps its session")]) { inv in
        _ = try GitCredential.read(inv.context.input)
        return .ok
    }

    static let setup = CommandSpec(
        name: "git-credential setup", summary: "configure git to use this helper for https://HOST", arguments: "HOST[/PATH]",
        minArguments: 1, maxArguments: 1,
        flags: [
            FlagSpec("slot", value: "SLOT", "also show the [git] config line mapping HOST to SLOT"),
            FlagSpec("apply", "run `git config --global` instead of printing the commands"),
        ],
        prints: false, takesAccount: false,
        details: """
        Prints (or with --apply runs) the git config that makes git use this helper for https://HOST, plus \
        useHttpPath when the argument has a path or [git] maps a path of that host. setup never edits config.ini: \
        with --slot it prints the [git] line to add when it is not there yet.
        """,
        examples: [
            CommandExample("lanyard git-credential setup github.com --slot work", "show the git config and the [git] line for github.com"),
            CommandExample("lanyard git-credential setup github.com/acme --apply", "configure git for repositories under github.com/acme"),
        ]) { inv in
        try setup(inv, target: inv.args.positionals[0])
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
