import FoundationEssentials
import Glibc
import LanyardCore

enum MetaCommands {
    static let version = CommandSpec(
        name: "version", summary: "print Lanyard's version", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false, details: "") { inv in
        inv.emit(.object(["version": .string(Lanyard.version)])) { inv.stdout.line("lanyard \(Lanyard.version)") }
        return .ok
    }

    static let help = CommandSpec(
        name: "help", summary: "show help for all commands or one", arguments: "[COMMAND]",
        minArguments: 0, maxArguments: 1, flags: [FlagSpec("man", "print the lanyard(1) manual page (roff), generated from the command table")],
        prints: false, takesAccount: false, details: "") { inv in
        if inv.args.has("man") {
            guard inv.args.positionals.isEmpty else {
                throw UsageError(message: "--man prints the whole manual; give no COMMAND", command: "help")
            }
            inv.stdout.raw(ManPage.render())
            return .ok
        }
        guard let name = inv.args.positionals.first else {
            inv.stdout.write(HumanText(overview()))
            return .ok
        }
        guard let spec = Lanyard.commands.first(where: { $0.name == name }) else {
            let hint = Suggest.closest(to: name, in: Lanyard.commands.map(\.name)).map { " (did you mean `\($0)`?)" } ?? ""
            throw UsageError(message: "unknown command \"\(name)\"\(hint)", command: nil)
        }
        inv.stdout.write(HumanText(help(for: spec)))
        return .ok
    }

    static let completion = CommandSpec(
        name: "completion", summary: "print a shell completion script (bash, zsh or fish)", arguments: "bash|zsh|fish",
        minArguments: 1, maxArguments: 1, flags: [], prints: false, takesAccount: false,
        details: """
        Generated from the command table, so it always matches this binary; slot names complete from the registry. \
        bash: `lanyard completion bash > ~/.local/share/bash-completion/completions/lanyard`; \
        zsh: `lanyard completion zsh > ~/.zfunc/_lanyard` with ~/.zfunc on $fpath before compinit; \
        fish: `lanyard completion fish > ~/.config/fish/completions/lanyard.fish`.
        """, subcommands: Completion.shells) { inv in
        inv.stdout.raw(Completion.script(for: inv.args.positionals[0]))
        return .ok
    }

    static func overview() -> String {
        let width = Lanyard.commands.map(\.name.count).max() ?? 0
        var out = """
        lanyard \(Lanyard.version): sign several accounts into the same tools, keep their tokens fresh, switch between them.

        Usage: lanyard <command> [options]

        Commands:

        """
        for c in Lanyard.commands where !c.hidden {
            out += "  " + c.name.padded(toWidth: width + 2) + c.summary + "\n"
        }
        out += """

        Every command takes --help; commands that print take --json.
        Environment: LANYARD_ACCOUNT chooses the slot; NO_COLOR turns colour off.
        Exit status: 0 ok, 1 error, 2 usage, 3 not signed in, 4 sign-in required,
        5 store locked or unavailable, 6 network or server, 7 usage limit, 130 cancelled.
        The manual (`man lanyard`, or `lanyard help --man`) has every command, variable and file.

        """
        return out
    }

    static func help(for spec: CommandSpec) -> String {
        var out = "Usage: \(spec.usage)\n\n\(spec.summary.prefix(1).uppercased() + spec.summary.dropFirst()).\n"
        if !spec.details.isEmpty { out += "\(spec.details)\n" }
        out += "\nOptions:\n"
        let rendered = spec.allFlags.map { f -> (String, String) in
            let short = f.short.map { "-\($0), " } ?? "    "
            return (short + "--" + f.name + (f.value.map { " \($0)" } ?? ""), f.help)
        }
        let width = rendered.map(\.0.count).max() ?? 0
        for (left, right) in rendered { out += "  " + left.padded(toWidth: width + 2) + right + "\n" }
        return out
    }
}
