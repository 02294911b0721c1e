extension MetaCommands {
    static let completion = CommandSpec(
        group: "completion",
        summary: "print a shell completion script (bash, zsh or fish)",
        details: """
            Generated from the command table, so it always matches this binary: commands, subcommands, each one's \
            flags and flag values, files, and slot names from the registry (through `lanyard list --names`, which \
            unlocks nothing). Packages install all three.
            """,
        examples: [
            CommandExample(
                "lanyard completion bash > ~/.local/share/bash-completion/completions/lanyard",
                "install for bash"
            ),
            CommandExample("source <(lanyard completion bash)", "try it in the current bash"),
        ],
        subcommands: Completion.shells.map(completionScript)
    )

    static func completionScript(_ shell: Completion.Shell) -> CommandSpec {
        let details: String
        let examples: [CommandExample]
        switch shell {
        case .bash:
            details =
                "Install it as ~/.local/share/bash-completion/completions/lanyard: "
                + "bash-completion loads it on first use."
            examples = [
                CommandExample(
                    "lanyard completion bash > ~/.local/share/bash-completion/completions/lanyard",
                    "install for your user"
                ),
                CommandExample("source <(lanyard completion bash)", "load it into the current shell only"),
            ]
        case .zsh:
            details = "Install it as _lanyard in a folder on $fpath, added to $fpath before compinit runs in ~/.zshrc."
            examples = [
                CommandExample(
                    "lanyard completion zsh > ~/.zfunc/_lanyard",
                    "install, with fpath=(~/.zfunc $fpath) before compinit in ~/.zshrc"
                )
            ]
        case .fish:
            details = "Install it as ~/.config/fish/completions/lanyard.fish: fish loads it on first use."
            examples = [
                CommandExample(
                    "lanyard completion fish > ~/.config/fish/completions/lanyard.fish",
                    "install for your user"
                )
            ]
        }
        return CommandSpec(
            name: "completion \(shell.rawValue)",
            summary: "print the \(shell.rawValue) completion script",
            arguments: "",
            minArguments: 0,
            maxArguments: 0,
            flags: [],
            prints: false,
            takesAccount: false,
            details: details,
            examples: examples
        ) { inv in
            inv.stdout.raw(Completion.script(for: shell))
            return .ok
        }
    }
}
