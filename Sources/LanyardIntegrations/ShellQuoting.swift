import FoundationEssentials
import LanyardCore
import LanyardSupport

/// Shell code that sets environment variables, quoted by each shell's own rules so that any value
/// (quotes, backslashes, `$()`, backticks, newlines, escape sequences, any Unicode) arrives byte
/// for byte and nothing in it runs.
package enum ShellQuoting {
    /// The shells `lanyard env` writes for.
    package enum Shell: String, CaseIterable, Sendable {
        case bash, zsh, sh, fish
    }

    /// A value no shell variable can hold.
    package struct UnrepresentableValue: LanyardError, Equatable {
        package let variable: String
        package var code: ErrorCode { .invalidValue }
        package var errorDescription: String? {
            "\(TerminalText.escaped(variable)) holds a NUL byte, which no environment variable can carry"
        }
    }

    /// `value` as one word of `shell`: single-quoted. POSIX shells (bash, zsh, dash) take
    /// everything inside single quotes literally, so a quote is written as `'\''`. Fish also reads
    /// `\\` and `\'` inside single quotes, so there a backslash and a quote are each escaped with
    /// a backslash (quoting fish by the POSIX rule lets `\'` end the quote early).
    package static func quote(_ value: String, for shell: Shell) -> String {
        var out = "'"
        out.reserveCapacity(value.utf8.count + 2)
        for ch in value.unicodeScalars {
            switch (ch, shell) {
            case ("'", .fish): out += "\\'"
            case ("\\", .fish): out += "\\\\"
            case ("'", _): out += "'\\''"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out + "'"
    }

    /// Lines that export `variables` in `shell`, sorted by name. Names must be shell identifiers
    /// (config checks `env.NAME`); a value with a NUL byte is refused, as no variable can hold it.
    package static func exports(
        _ variables: [String: String],
        for shell: Shell
    ) throws(UnrepresentableValue) -> [String] {
        try variables.sorted(by: { $0.key < $1.key }).map { (name, value) throws(UnrepresentableValue) in
            guard !value.utf8.contains(0) else { throw UnrepresentableValue(variable: name) }
            switch shell {
            case .fish: return "set -gx \(name) \(quote(value, for: shell))"
            case .bash, .zsh, .sh: return "export \(name)=\(quote(value, for: shell))"
            }
        }
    }
}
