import FoundationEssentials
import Glibc
import LanyardCore

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
        if placeholder.contains("SLOT") { self = .slot }
        else if placeholder.contains("FILE") { self = .file }
        else if placeholder.contains("DIR") { self = .directory }
        else if placeholder.contains("COMMAND") { self = .lanyardCommand }
        else if placeholder.contains("CMD") { self = .program }
        else { self = .none }
    }
}

/// One command: what `--help`, the man page and completions are generated from, and how it runs.
package struct CommandSpec: Sendable {
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
    /// Internal commands left out of help, the man page and completions.
    package var hidden = false
    /// Commands that talk to a provider (run by `lanyard-net`, which links HTTP).
    package var network = false
    /// Flags that make the command talk to a provider.
    package var networkFlags: Set<String> = []
    /// The words its first argument must be one of (`store init|unlock|…`); empty for none.
    package var subcommands: [String] = []
    let run: @Sendable (Invocation) throws -> ExitStatus
}

/// Flags every command accepts.
let globalFlags: [FlagSpec] = [
    FlagSpec("help", short: "h", "show help for the command"),
    FlagSpec("no-color", "never colour the output (also NO_COLOR=1)"),
]
let jsonFlag = FlagSpec("json", "print machine-readable JSON")
let accountFlag = FlagSpec("account", short: "a", value: "SLOT", "act on SLOT (overrides LANYARD_ACCOUNT, .lanyard and the active slot)")

extension CommandSpec {
    /// Every flag the command accepts, its own first.
    package var allFlags: [FlagSpec] {
        flags + (prints ? [jsonFlag] : []) + (takesAccount ? [accountFlag] : []) + globalFlags
    }

    /// What the arguments after the subcommand (if any) name, for completions.
    package var argumentKind: ArgumentKind {
        ArgumentKind(placeholder: arguments)
    }

    package var usage: String {
        "lanyard \(name)" + (arguments.isEmpty ? "" : " \(arguments)") + (allFlags.count > globalFlags.count ? " [options]" : "")
    }
}

/// A command line that does not fit the command table (exit 2).
package struct UsageError: LanyardError, Equatable {
    package let message: String
    package let command: String?
    package var code: String { "usage" }
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
    /// Splits `args` (after the command name) by `spec`; `--` ends options.
    static func parse(_ args: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
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
                    throw unknownFlag(arg, spec: spec)
                }
                flag = flags.first { $0.short == c }
                name = flag?.name ?? arg
            }
            guard let flag else { throw unknownFlag(arg, spec: spec) }
            if let placeholder = flag.value {
                let value: String
                if let inline { value = inline } else {
                    guard i < args.count else {
                        throw UsageError(message: "--\(flag.name) needs a value (\(placeholder))", command: spec.name)
                    }
                    value = args[i]
                    i += 1
                }
                if !flag.choices.isEmpty && !flag.choices.contains(value) {
                    let hint = Suggest.closest(to: value, in: flag.choices).map { " (did you mean \($0)?)" } ?? ""
                    throw UsageError(message: "--\(flag.name) must be one of \(flag.choices.joined(separator: ", ")), not \"\(value)\"\(hint)",
                                     command: spec.name)
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
        if let sub = parsed.positionals.first, !spec.subcommands.isEmpty, !spec.subcommands.contains(sub) {
            let hint = Suggest.closest(to: sub, in: spec.subcommands).map { " (did you mean `\($0)`?)" } ?? ""
            throw UsageError(message: "unknown \(spec.name) command \"\(sub)\"\(hint); one of \(spec.subcommands.joined(separator: ", "))",
                             command: spec.name)
        }
        if parsed.positionals.count > spec.maxArguments {
            let extra = parsed.positionals[spec.maxArguments]
            throw UsageError(message: "unexpected argument \"\(extra)\": usage: \(spec.usage)", command: spec.name)
        }
        return parsed
    }

    private static func unknownFlag(_ arg: String, spec: CommandSpec) -> UsageError {
        let candidates = spec.allFlags.map { "--" + $0.name }
        let hint = Suggest.closest(to: arg.split(separator: "=").first.map(String.init) ?? arg, in: candidates)
            .map { " (did you mean \($0)?)" } ?? ""
        return UsageError(message: "unknown option \(arg) for `lanyard \(spec.name)`\(hint)", command: spec.name)
    }
}

/// "Did you mean" suggestions by edit distance.
enum Suggest {
    static func closest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        let limit = max(2, word.count / 3)
        if best.1 <= limit { return best.0 }
        return candidates.first { $0.hasPrefix(word) && word.count >= 2 }
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
