import LanyardSupport

extension MetaCommands {
    static let help = CommandSpec(
        name: "help",
        summary: "show help for all commands or one",
        arguments: "[COMMAND [SUBCOMMAND]]",
        minArguments: 0,
        maxArguments: 2,
        flags: [FlagSpec("man", "print the lanyard(1) manual page (roff), generated from the command table")],
        prints: false,
        takesAccount: false,
        details: """
            Without COMMAND, lists the commands by group. With one, shows its usage, options and examples; a group \
            (store, codex, gh, …) lists its subcommands, and `lanyard help store init` shows one of them, \
            the same as `lanyard store init --help`.
            """,
        examples: [
            CommandExample("lanyard help store migrate", "usage, options and examples of one subcommand"),
            CommandExample("lanyard help --man | man -l -", "read the whole manual from a build folder"),
        ]
    ) { inv in
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
        guard var spec = Lanyard.commands.first(where: { $0.name == name }) else {
            let hint =
                Suggest.closest(to: name, in: Lanyard.commands.filter { !$0.hidden }.map(\.name)).map {
                    " (did you mean `\($0)`?)"
                } ?? ""
            throw UsageError(message: "unknown command \"\(name)\"\(hint)", command: nil)
        }
        for word in inv.args.positionals.dropFirst() {
            guard spec.isGroup else {
                throw UsageError(message: "`lanyard \(spec.name)` has no subcommands", command: "help")
            }
            spec = try ArgumentParser.subcommand(word, of: spec)
        }
        inv.stdout.write(HumanText(help(for: spec)))
        return .ok
    }

    /// What `lanyard help` (and `lanyard` alone) prints: the commands by group, and examples.
    static func overview() -> String {
        let width = Lanyard.commands.filter { !$0.hidden }.map(\.name.count).max() ?? 0
        var out = """
            lanyard \(Lanyard.version): sign several accounts into the same tools, \
            keep their tokens fresh, switch between them.

            Usage: lanyard <command> [options]

            """
        for group in Lanyard.groups {
            out += "\n\(group.title):\n"
            for c in group.commands where !c.hidden {
                out += "  " + c.name.padded(toWidth: width + 2) + c.summary + "\n"
            }
        }
        out += "\n" + examples(Lanyard.examples)
        out += """

            Every command takes --help (`lanyard help store init` for a subcommand); commands that print take --json.
            Environment: LANYARD_ACCOUNT chooses the slot; NO_COLOR turns colour off.
            Exit status: 0 ok, 1 error, 2 usage, 3 not signed in, 4 sign-in required,
            5 store locked or unavailable, 6 network or server, 7 usage limit, 130 cancelled.
            The manual (`man lanyard`, or `lanyard help --man`) has every command, variable and file.

            """
        return out
    }

    /// The width help text is wrapped to.
    static let helpWidth = 80

    /// `lanyard COMMAND --help`: usage, what it does, its subcommands (for a group), options and examples.
    static func help(for spec: CommandSpec) -> String {
        var out = "Usage: \(spec.usage)\n\n"
        out += wrap(capitalized(spec.summary) + ".", width: helpWidth)
        if !spec.details.isEmpty { out += "\n" + wrap(spec.details, width: helpWidth) }
        let subcommands = spec.visibleSubcommands
        if !subcommands.isEmpty {
            out += "\nCommands:\n"
            let width = subcommands.map(\.word.count).max() ?? 0
            for sub in subcommands { out += "  " + sub.word.padded(toWidth: width + 2) + sub.summary + "\n" }
        }
        out += "\nOptions:\n"
        let rendered = spec.allFlags.map { f -> (String, String) in
            let short = f.short.map { "-\($0), " } ?? "    "
            return (short + "--" + f.name + (f.value.map { " \($0)" } ?? ""), f.help)
        }
        let width = rendered.map(\.0.count).max() ?? 0
        for (left, right) in rendered { out += "  " + left.padded(toWidth: width + 2) + right + "\n" }
        if !spec.examples.isEmpty { out += "\n" + examples(spec.examples) }
        if !subcommands.isEmpty {
            out +=
                "\nRun `lanyard \(spec.name) <command> --help` "
                + "(or `lanyard help \(spec.name) <command>`) for a command's options.\n"
        }
        return out
    }

    /// An "Examples:" section: each example's explanation as a comment, then its command line.
    static func examples(_ examples: [CommandExample]) -> String {
        "Examples:\n"
            + examples.map { "  # \(capitalized($0.explanation))\n  $ \($0.command)\n" }.joined(separator: "\n")
    }

    static func capitalized(_ s: String) -> String { s.prefix(1).uppercased() + s.dropFirst() }

    /// Text broken at spaces into lines of at most `width` columns (a longer word gets a line of
    /// its own); line breaks in `text` are kept.
    static func wrap(_ text: String, width: Int) -> String {
        var out = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var current = ""
            for word in line.split(separator: " ") {
                if !current.isEmpty && current.count + 1 + word.count > width {
                    out += current + "\n"
                    current = String(word)
                } else {
                    current += current.isEmpty ? String(word) : " " + word
                }
            }
            out += current + "\n"
        }
        return out
    }
}
