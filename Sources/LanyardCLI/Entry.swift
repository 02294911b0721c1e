import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// The `lanyard` command: its table of commands and the function that runs one command line.
package enum Lanyard {
    /// The version this binary reports.
    package static let version = "0.1.0"
    /// The date of this version, as the man page shows it.
    package static let releaseDate = "2026-11-30"

    /// The commands as `lanyard help` groups them, in the order it lists them.
    package struct CommandGroup: Sendable {
        package let title: String
        package let commands: [CommandSpec]
    }

    package static let groups: [CommandGroup] = [
        CommandGroup(
            title: "Accounts",
            commands: [
                AuthCommands.login, AuthCommands.logout, SlotCommands.list, SlotCommands.status,
                SlotCommands.switchSlot,
                ResolutionCommands.which, ResolutionCommands.pin, ResolutionCommands.unpin, SlotCommands.rename,
                SlotCommands.remove,
                UsageCommand.usage,
            ]
        ),
        CommandGroup(
            title: "Tokens",
            commands: [
                TokenCommand.command, AuthCommands.refresh, IntegrationCommands.env, IntegrationCommands.exec,
                AskCommand.ask,
            ]
        ),
        CommandGroup(
            title: "Tools",
            commands: [
                IntegrationCommands.codex, GhCommand.command, GitCredentialCommand.command,
                CredentialHelperCommands.docker,
                CredentialHelperCommands.kube, CredentialHelperCommands.netrc,
            ]
        ),
        CommandGroup(
            title: "Store",
            commands: [
                StoreGroupCommand.store, FleetCommands.fleet, DoctorCommand.command, BundleCommands.export,
                BundleCommands.import,
            ]
        ),
        CommandGroup(title: "Agent", commands: [AgentCommands.agent, AgentCommands.tray, AgentCommands.events]),
        CommandGroup(title: "Other", commands: [MetaCommands.completion, MetaCommands.version, MetaCommands.help]),
    ]

    /// Every top-level command (groups of subcommands included), in the order `help` lists them,
    /// then the hidden ones. Help, the man page and completions are generated from this table.
    package static let commands: [CommandSpec] =
        groups.flatMap(\.commands)
        + [RefreshWorker.command, DesktopIconsCommand.command]

    /// Every command and subcommand, depth first.
    package static var allCommands: [CommandSpec] { commands.flatMap(\.withDescendants) }

    /// Every command and subcommand help, the man page and completions show (hidden ones left
    /// out), each group before its subcommands.
    package static var documentedCommands: [CommandSpec] {
        func walk(_ spec: CommandSpec) -> [CommandSpec] { [spec] + spec.visibleSubcommands.flatMap(walk) }
        return commands.filter { !$0.hidden }.flatMap(walk)
    }

    /// The examples `lanyard help` and the man page start with.
    package static let examples: [CommandExample] = [
        CommandExample(
            "lanyard login work",
            "sign an account into the slot work (the browser opens on a desktop; elsewhere, a device code)"
        ),
        CommandExample("lanyard switch personal", "make personal the slot commands use by default"),
        CommandExample(
            "curl -H \"Authorization: Bearer $(lanyard token)\" https://api.example.com/",
            "hand the slot's fresh token to a script"
        ),
        CommandExample("lanyard exec work -- codex", "run Codex as work while another Codex runs as personal"),
        CommandExample(
            "lanyard store init",
            "on a server without a desktop keyring, create the encrypted file store first"
        ),
    ]

    /// Runs one command line (without the program name) and returns the exit status.
    package static func run(_ argv: [String], context: CommandContext) -> Int32 {
        let json = argv.contains("--json")
        let spec: CommandSpec
        let args: ParsedArguments
        do {
            guard let parsed = try parse(argv) else {
                context.stdout.write(HumanText(MetaCommands.overview()))
                return argv.isEmpty ? ExitStatus.ok.rawValue : ExitStatus.usage.rawValue
            }
            (spec, args) = parsed
            StartupTrace.mark("parse")
        } catch {
            return report(error, json: json, context: context)
        }
        if args.has("help") {
            context.stdout.write(HumanText(MetaCommands.help(for: spec)))
            return ExitStatus.ok.rawValue
        }
        do {
            if spec.needsNetwork(args) && context.transport == nil && context.transportFactory == nil {
                try NetworkHandoff.exec(argv)  // returns only on failure
            }
            return try spec.run(Invocation(context: context, spec: spec, args: args)).rawValue
        } catch let child as ChildExit {
            return child.status
        } catch {
            return report(error, json: json, context: context)
        }
    }

    /// Finds the command (down to a subcommand: `store init`) and parses its arguments without
    /// running anything: nil when the line names no command (only options, or nothing). Tests
    /// check the docs' examples with it.
    package static func parse(_ argv: [String]) throws(UsageError) -> (CommandSpec, ParsedArguments)? {
        var argv = argv
        // Global options may come before the command: move them after it.
        var leading: [String] = []
        while let first = argv.first, first.hasPrefix("-") {
            if first == "--version" || first == "-V" {
                argv[0] = "version"
                break
            }
            if first == "--help" || first == "-h" {
                argv[0] = "help"
                break
            }
            leading.append(argv.removeFirst())
            if leading.last == "--account" || leading.last == "-a", !argv.isEmpty { leading.append(argv.removeFirst()) }
        }
        guard let name = argv.first else { return nil }
        guard let spec = command(named: name) else {
            let hint =
                Suggest.closest(to: name, in: commands.filter { !$0.hidden }.map(\.name)).map {
                    " (did you mean `\($0)`?)"
                } ?? ""
            throw UsageError(message: "unknown command \"\(name)\"\(hint); see `lanyard help`", command: nil)
        }
        return try ArgumentParser.dispatch(leading + Array(argv.dropFirst()), from: spec)
    }

    /// The commands that run in prompts, scripts and other tools' credential hooks, found by name
    /// without building the whole table: every command's spec (help text, flags, examples) is a
    /// static built on first use, and building all of them cost `token` 0.64 M instructions, a
    /// tenth of its run (docs/performance.md). `SubcommandParserTests` checks them against the table.
    static let quickCommands: [(name: String, spec: @Sendable () -> CommandSpec)] = [
        ("token", { TokenCommand.command }), ("which", { ResolutionCommands.which }),
        ("env", { IntegrationCommands.env }),
        ("exec", { IntegrationCommands.exec }), ("kube-credential", { CredentialHelperCommands.kube }),
        ("refresh-worker", { RefreshWorker.command }),
    ]

    /// The top-level command called `name` (nil: no such command).
    static func command(named name: String) -> CommandSpec? {
        quickCommands.first { $0.name == name }?.spec() ?? commands.first { $0.name == name }
    }

    /// The slot whose name is closest to a mistyped one (as commands and options get "did you
    /// mean"), read from the registry only on this error path; nil when none is close.
    static func closestSlot(to word: String, context: CommandContext) -> String? {
        guard let names = try? Registry(paths: Paths(environment: context.environment)).load().slots.keys.map(\.name)
        else { return nil }
        return Suggest.closest(to: word, in: names.sorted()).flatMap { $0 == word ? nil : $0 }
    }

    /// Prints an error (as `{"error": {"code", "message"}}` on stdout with --json) and returns its status.
    static func report(_ error: Error, json: Bool, context: CommandContext) -> Int32 {
        var message = error.userFacingDescription
        if case RegistryError.unknownSlot(let named, let rule) = error,
            let near = closestSlot(to: named.name, context: context)
        {
            message =
                "no slot named \(named.name); did you mean \(near)? (\(rule.map { "\($0); " } ?? "")see `lanyard list`)"
        }
        // People read the reset time as every human output writes times; JSON keeps RFC 3339.
        if !json, case ClientError.usageLimitReached(var limit) = error, let resetsAt = limit.resetsAt {
            limit.resetsAt = nil
            message = limit.summary + "; resets " + RelativeTime.describe(resetsAt, now: context.clock.now())
        }
        let status = ExitStatus(for: error)
        let code =
            switch error {
            case let e as any LanyardError: e.code
            case is CancellationError: ErrorCode.cancelled
            default: ErrorCode.error
            }
        if json {
            let view =
                (error as? any LanyardError).map { ErrorView($0, message: message) }
                ?? ErrorView(code: code, message: message)
            context.stdout.rawLine(view.json.serialized(pretty: true))
        } else {
            context.stderr.line("lanyard: \(message)")
            if let usage = error as? UsageError, let command = usage.command {
                context.stderr.line("Run `lanyard \(command) --help` for usage.")
            }
        }
        return status.rawValue
    }
}

/// The process entry point. `transportFactory` is nil in `lanyard` (no HTTP linked: commands that
/// need it continue in `lanyard-net`) and LanyardNetwork's `CurlTransport` in `lanyard-net`.
package func lanyardMain(
    transportFactory: (@Sendable (TimeInterval) -> any HTTPTransport)?,
    streamFactory: ResponseStreamFactory? = nil
) -> Int32 {
    StartupTrace.start()
    // Tokens pass through every command's memory: no core dump, no ptrace by the same user.
    ProcessHardening.apply()
    signal(SIGPIPE, SIG_IGN)
    // A parent may have started us with signals blocked (threads of many runtimes block them);
    // Ctrl-C, SIGTERM and SIGHUP must reach our handlers and the commands we run.
    var unblock = sigset_t()
    sigemptyset(&unblock)
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&unblock, sig) }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    let context = CommandContext.process(transportFactory: transportFactory, streamFactory: streamFactory)
    let stderr = context.stderr
    EventLog.reportFailures { stderr.line("lanyard: warning: \($0)") }
    StartupTrace.mark("context")
    var arguments = Array(CommandLine.arguments.dropFirst())
    // Run as `docker-credential-lanyard ACTION` (a link to this binary), as Docker calls helpers.
    if CommandLine.arguments.first.map({ PathText.lastComponent(of: $0) }) == CredentialHelperCommands.dockerHelperName
    {
        arguments.insert("docker-credential", at: 0)
    }
    let status = Lanyard.run(arguments, context: context)
    if let trace = StartupTrace.report() {
        context.stderr.line(HumanText(trace))
        context.stderr.line(HumanText(OperationCounts.report()))
    }
    return status
}
