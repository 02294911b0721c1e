import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

extension IntegrationCommands {
    static let env = CommandSpec(
        name: "env",
        summary: "print shell lines that export the slot's credentials",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [
            FlagSpec(
                "shell",
                value: "SHELL",
                choices: ["bash", "zsh", "fish", "sh", "json"],
                "bash, zsh, fish or json (default bash)"
            )
        ],
        prints: true,
        takesAccount: true,
        details: """
            For `eval "$(lanyard env)"`. Sets LANYARD_ACCOUNT and the variables the provider's env.NAME keys name. \
            --json (the same as --shell json) prints them as one JSON object. \
            A ChatGPT (openai) slot names no env.NAME variables, so for it env sets only LANYARD_ACCOUNT: \
            Codex reads its credential from auth.json, not from the environment. Use \
            `lanyard exec SLOT -- codex …` (a private CODEX_HOME for that one run) or \
            `lanyard codex export SLOT` (writes Codex's auth.json) instead.
            """,
        examples: [
            CommandExample("eval \"$(lanyard env work)\"", "export work's variables into this shell"),
            CommandExample("lanyard env --shell fish | source", "the same in fish"),
            CommandExample("lanyard env work --json", "the variables as one JSON object"),
            CommandExample("lanyard exec work -- codex", "for a ChatGPT slot: run Codex with work's account"),
        ]
    ) { inv in
        if inv.json, let shell = inv.args.value("shell"), shell != "json" {
            throw UsageError(message: "--json prints JSON; it cannot be given with --shell \(shell)", command: "env")
        }
        let (slot, record, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let variables = SlotEnvironment.variables(
            slot: slot,
            credential: credential,
            provider: manager.config.providers[record.provider]
        )
        let shell = inv.json ? "json" : inv.args.value("shell") ?? "bash"
        if shell == "json" {
            inv.stdout.rawLine(JSONValue.object(variables.mapValues(JSONValue.string)).serialized(pretty: true))
            return .ok
        }
        guard let syntax = ShellQuoting.Shell(rawValue: shell) else {
            throw UsageError(message: "unknown shell \"\(shell)\" (bash, zsh, sh, fish or json)", command: "env")
        }
        for line in try ShellQuoting.exports(variables, for: syntax) { inv.stdout.rawLine(line) }
        return .ok
    }
}
