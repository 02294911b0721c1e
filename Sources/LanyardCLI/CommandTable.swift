import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// One flag of a command.
package struct FlagSpec: Sendable {
    package let name: String
    package let short: Character?
    /// The value's placeholder (`SLOT`), or nil for a switch.
    package let value: String?
    package let help: String
    /// The only values the flag accepts (checked by the parser, offered by completions); empty means any.
    package let choices: [String]

    init(_ name: String, short: Character? = nil, value: String? = nil, choices: [String] = [], _ help: String) {
        self.name = name
        self.short = short
        self.value = value
        self.choices = choices
        self.help = help
    }

    /// What the flag's value is, for completions.
    package var valueKind: ArgumentKind {
        guard let value else { return .none }
        if !choices.isEmpty { return .choice(choices) }
        return ArgumentKind(placeholder: value)
    }
}

/// What a positional argument or flag value names, so completions can offer the right words.
package enum ArgumentKind: Sendable, Equatable {
    case none
    case slot
    case file
    case directory
    /// A `lanyard` command name (`help COMMAND`).
    case lanyardCommand
    /// A program to run (`exec -- CMD`).
    case program
    case choice([String])

    /// The kind a usage placeholder (`SLOT`, `[SLOT…]`, `FILE`) stands for.
    init(placeholder: String) {
        if placeholder.contains("SLOT") {
            self = .slot
        } else if placeholder.contains("FILE") {
            self = .file
        } else if placeholder.contains("DIR") {
            self = .directory
        } else if placeholder.contains("COMMAND") {
            self = .lanyardCommand
        } else if placeholder.contains("CMD") {
            self = .program
        } else {
            self = .none
        }
    }
}

/// One worked example in a command's help and the man page: a shell line and what it does.
package struct CommandExample: Sendable {
    /// A shell command line using lanyard (the parser must accept each `lanyard …` in it).
    package let command: String
    /// What it does, as a phrase.
    package let explanation: String

    init(_ command: String, _ explanation: String) {
        self.command = command
        self.explanation = explanation
    }
}

/// One command: what `--help`, the man page and completions are generated from, and how it runs.
/// A command either runs (`run`) or groups subcommands (`store init`, `store migrate`, …), each a
/// `CommandSpec` of its own with its own flags, help, examples and attributes, as
/// swift-argument-parser's `CommandConfiguration(subcommands:)`.
package struct CommandSpec: Sendable {
    /// The command as typed after `lanyard`: `token`, or `store init` for a subcommand.
    package let name: String
    package let summary: String
    /// Positional arguments as shown in usage (`SLOT`, `[SLOT]`, `OLD NEW`).
    package let arguments: String
    package let minArguments: Int
    package let maxArguments: Int
    package let flags: [FlagSpec]
    /// Whether the command prints results (and so takes `--json`).
    package let prints: Bool
    /// Whether it acts on one slot chosen by account resolution (and so takes `--account`).
    package let takesAccount: Bool
    package let details: String
    /// Worked examples, shown under "Examples:" in help and in the man page.
    package var examples: [CommandExample] = []
    /// Internal commands left out of help, the man page and completions.
    package var hidden = false
    /// Commands that talk to a provider (run by `lanyard-net`, which links HTTP).
    package var network = false
    /// Flags that make the command talk to a provider.
    package var networkFlags: Set<String> = []
    /// The commands this one groups (`store` → `store init`, …); empty for a command that runs.
    package private(set) var subcommands: [CommandSpec] = []
    let run: @Sendable (Invocation) throws -> ExitStatus

    init(
        name: String,
        summary: String,
        arguments: String,
        minArguments: Int,
        maxArguments: Int,
        flags: [FlagSpec],
        prints: Bool,
        takesAccount: Bool,
        details: String,
        examples: [CommandExample] = [],
        hidden: Bool = false,
        network: Bool = false,
        networkFlags: Set<String> = [],
        run: @escaping @Sendable (Invocation) throws -> ExitStatus
    ) {
        self.name = name
        self.summary = summary
        self.arguments = arguments
        self.minArguments = minArguments
        self.maxArguments = maxArguments
        self.flags = flags
        self.prints = prints
        self.takesAccount = takesAccount
        self.details = details
        self.examples = examples
        self.hidden = hidden
        self.network = network
        self.networkFlags = networkFlags
        self.run = run
    }

    /// A command that groups subcommands, each named `NAME WORD`. The parser dispatches
    /// `lanyard NAME WORD …` to the subcommand; `lanyard NAME` alone is a usage error.
    init(
        group name: String,
        summary: String,
        details: String,
        examples: [CommandExample] = [],
        subcommands: [CommandSpec]
    ) {
        for sub in subcommands {
            precondition(
                sub.name.hasPrefix(name + " ") && !sub.word.isEmpty,
                "subcommand \(sub.name) is not named `\(name) WORD`"
            )
        }
        self.init(
            name: name,
            summary: summary,
            arguments: "<command>",
            minArguments: 0,
            maxArguments: 0,
            flags: [],
            prints: false,
            takesAccount: false,
            details: details,
            examples: examples
        ) { inv in
            throw UsageError(message: "missing \(inv.spec.name) command", command: inv.spec.name)
        }
        self.subcommands = subcommands
    }
}

/// Flags every command accepts.
let globalFlags: [FlagSpec] = [
    FlagSpec("help", short: "h", "show help for the command"),
    FlagSpec("no-color", "never colour the output (also NO_COLOR=1)"),
]
let jsonFlag = FlagSpec("json", "print machine-readable JSON")
let accountFlag = FlagSpec(
    "account",
    short: "a",
    value: "SLOT",
    "act on SLOT (overrides LANYARD_ACCOUNT, .lanyard and the active slot)"
)

extension CommandSpec {
    /// Every flag the command accepts, its own first.
    package var allFlags: [FlagSpec] {
        flags + (prints ? [jsonFlag] : []) + (takesAccount ? [accountFlag] : []) + globalFlags
    }

    /// The last word of the name: what is typed to choose this command (`init` of `store init`).
    package var word: String { String(name.split(separator: " ").last ?? "") }

    /// Whether the command groups subcommands rather than running itself.
    package var isGroup: Bool { !subcommands.isEmpty }

    /// The subcommand named `word`, if any.
    package func subcommand(_ word: String) -> CommandSpec? {
        subcommands.first { $0.word == word }
    }

    /// The subcommands shown in help, the man page and completions.
    package var visibleSubcommands: [CommandSpec] { subcommands.filter { !$0.hidden } }

    /// This command and every command below it, depth first (the group before its subcommands).
    package var withDescendants: [CommandSpec] {
        [self] + subcommands.flatMap(\.withDescendants)
    }

    /// What the arguments name, for completions.
    package var argumentKind: ArgumentKind {
        ArgumentKind(placeholder: arguments)
    }

    package var usage: String {
        "lanyard \(name)" + (arguments.isEmpty ? "" : " \(arguments)")
            + (allFlags.count > globalFlags.count ? " [options]" : "")
    }

    /// Whether this run of the command talks to a provider (and so runs in `lanyard-net`).
    package func needsNetwork(_ args: ParsedArguments) -> Bool {
        network || !networkFlags.isDisjoint(with: args.switches.union(args.values.keys))
    }
}

/// A command line that does not fit the command table (exit 2).
package struct UsageError: LanyardError, Equatable {
    package let message: String
    package let command: String?
    package var code: ErrorCode { .usage }
    package var errorDescription: String? { message }
}

/// Parsed arguments of one command.
package struct ParsedArguments: Sendable {
    package var positionals: [String] = []
    package var values: [String: String] = [:]
    package var switches: Set<String> = []
    /// Every value of each flag in command-line order (for repeatable flags); `values` keeps the last.
    package var allValues: [String: [String]] = [:]
    /// How many positionals came before `--`, when there was one (`exec SLOT -- CMD`).
    package var positionalsBeforeDashDash: Int?

    package func has(_ flag: String) -> Bool { switches.contains(flag) }
    package func value(_ flag: String) -> String? { values[flag] }
    /// Every value given for a repeatable flag, in order.
    package func repeated(_ flag: String) -> [String] { allValues[flag] ?? [] }
}

enum ArgumentParser {
    /// Finds the command `args` (after `spec`'s name) names, going down through subcommands, and
    /// parses the rest by it. Options written before a subcommand's word belong to the subcommand
    /// (`store --json status` is `store status --json`), as global options before a command do.
    static func dispatch(
        _ args: [String],
        from spec: CommandSpec,
        parent: CommandSpec? = nil
    ) throws(UsageError) -> (CommandSpec, ParsedArguments) {
        guard spec.isGroup else { return (spec, try parse(args, for: spec, parent: parent)) }
        let valueFlags = Set(spec.withDescendants.flatMap(\.allFlags).filter { $0.value != nil }.flatMap(\.spellings))
        var leading: [String] = []
        var i = 0
        while i < args.count, args[i].hasPrefix("-"), args[i] != "-", args[i] != "--" {
            let arg = args[i]
            leading.append(arg)
            i += 1
            if valueFlags.contains(arg), i < args.count {
                leading.append(args[i])
                i += 1
            }
        }
        let words = spec.visibleSubcommands.map(\.word)
        guard i < args.count, args[i] != "--" else {
            // No subcommand: only --help (the group's own help) makes sense here.
            if leading.contains("--help") || leading.contains("-h") {
                var parsed = ParsedArguments()
                parsed.switches = ["help"]
                return (spec, parsed)
            }
            throw UsageError(
                message: "missing \(spec.name) command: one of \(words.joined(separator: ", "))",
                command: spec.name
            )
        }
        return try dispatch(leading + args[(i + 1)...], from: try subcommand(args[i], of: spec), parent: spec)
    }

    /// The subcommand of `spec` named `word`, or a usage error with the closest name.
    static func subcommand(_ word: String, of spec: CommandSpec) throws(UsageError) -> CommandSpec {
        if let child = spec.subcommand(word) { return child }
        let words = spec.visibleSubcommands.map(\.word)
        let hint = Suggest.closest(to: word, in: words).map { " (did you mean `\($0)`?)" } ?? ""
        throw UsageError(
            message: "unknown \(spec.name) command \"\(word)\"\(hint); one of \(words.joined(separator: ", "))",
            command: spec.name
        )
    }

    /// Splits `args` (after the command name) by `spec`; `--` ends options. `parent` is the group
    /// `spec` belongs to, whose other subcommands an unknown option is looked up in.
    static func parse(
        _ args: [String],
        for spec: CommandSpec,
        parent: CommandSpec? = nil
    ) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        let flags = spec.allFlags
        var i = 0
        var optionsEnded = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if optionsEnded || arg == "-" || !arg.hasPrefix("-") {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" {
                optionsEnded = true
                parsed.positionalsBeforeDashDash = parsed.positionals.count
                continue
            }
            var name: String
            var inline: String?
            let flag: FlagSpec?
            if arg.hasPrefix("--") {
                name = String(arg.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                flag = flags.first { $0.name == name }
            } else {
                guard arg.count == 2, let c = arg.last else {
                    throw unknownFlag(arg, spec: spec, parent: parent)
                }
                flag = flags.first { $0.short == c }
                name = flag?.name ?? arg
            }
            guard let flag else { throw unknownFlag(arg, spec: spec, parent: parent) }
            if let placeholder = flag.value {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard i < args.count else {
                        throw UsageError(message: "--\(flag.name) needs a value (\(placeholder))", command: spec.name)
                    }
                    value = args[i]
                    i += 1
                }
                if !flag.choices.isEmpty && !flag.choices.contains(value) {
                    let hint = Suggest.closest(to: value, in: flag.choices).map { " (did you mean \($0)?)" } ?? ""
                    throw UsageError(
                        message: "--\(flag.name) must be one of \(flag.choices.joined(separator: ", ")), "
                            + "not \"\(value)\"\(hint)",
                        command: spec.name
                    )
                }
                parsed.values[flag.name] = value
                parsed.allValues[flag.name, default: []].append(value)
            } else {
                if inline != nil { throw UsageError(message: "--\(flag.name) takes no value", command: spec.name) }
                parsed.switches.insert(flag.name)
            }
        }
        if parsed.has("help") { return parsed }
        if parsed.positionals.count < spec.minArguments {
            throw UsageError(message: "missing argument: usage: \(spec.usage)", command: spec.name)
        }
        if parsed.positionals.count > spec.maxArguments {
            let extra = parsed.positionals[spec.maxArguments]
            throw UsageError(
                message: "unexpected argument \(ArgumentText.shown(extra)): usage: \(spec.usage)",
                command: spec.name
            )
        }
        return parsed
    }

    private static func unknownFlag(_ arg: String, spec: CommandSpec, parent: CommandSpec?) -> UsageError {
        let spelling = arg.split(separator: "=").first.map(String.init) ?? arg
        let candidates = spec.allFlags.map { "--" + $0.name }
        var hint = Suggest.closest(to: spelling, in: candidates).map { " (did you mean \($0)?)" } ?? ""
        // An option of another subcommand of the same group, spelled exactly: name the one that
        // takes it (before a near spelling of this one's: `store init --to` means migrate's, not --tpm).
        if let sibling = parent?.visibleSubcommands.first(where: {
            $0.flags.contains { $0.spellings.contains(spelling) }
        }) {
            hint = " (did you mean `lanyard \(sibling.name) \(spelling)`?)"
        }
        return UsageError(message: "unknown option \(arg) for `lanyard \(spec.name)`\(hint)", command: spec.name)
    }
}

/// How an error quotes an argument from the command line: as given, unless it looks like a secret
/// (a token pasted where it does not belong, such as `login --with-access-token at-…`), which is
/// never repeated (error text reaches terminals, logs and CI output).
enum ArgumentText {
    static func looksSecret(_ argument: String) -> Bool {
        if argument.count > 64 { return true }
        let prefixes = ["eyJ", "at-", "at_", "sk-", "rt-", "rt_", "sess-", "ghp_", "github_pat_"]
        return argument.count >= 16 && prefixes.contains { argument.hasPrefix($0) }
    }

    /// `"ARGUMENT"`, or what it is without its text.
    static func shown(_ argument: String) -> String {
        looksSecret(argument)
            ? "(\(argument.count) characters that look like a token, not repeated here)" : "\"\(argument)\""
    }
}
