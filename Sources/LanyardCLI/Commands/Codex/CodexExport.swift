import LanyardCore
import LanyardIntegrations
import LanyardSupport

extension IntegrationCommands {
    static let codexExport = CommandSpec(
        name: "codex export",
        summary: "write a slot into Codex's auth.json",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [codexHomeFlag],
        prints: true,
        takesAccount: true,
        details: """
            Writes the slot (the resolved one by default), refreshed first when due, to DIR/auth.json in Codex's \
            schema, atomically and with mode 0600 (a personal access token slot as Codex writes one). When Codex's \
            config.toml says cli_auth_credentials_store = keyring (or auto, with a keyring answering), the sign-in \
            goes to Codex's keyring item instead, and a keyring that is locked or absent is an error (exit 5). \
            Tokens Codex rotated in the sign-in being replaced are first copied back into the slot holding that \
            account; a sign-in Lanyard does not hold (an API key, an agent identity) is refused, not overwritten.
            """,
        examples: [
            CommandExample("lanyard codex export work", "Codex now runs as the slot work"),
            CommandExample("lanyard codex export --codex-home ~/.codex-ci ci", "write another Codex home"),
        ]
    ) { inv in
        let home = CodexHome(explicit: inv.args.value("codex-home"), environment: inv.context.environment)
        let manager = try inv.accounts()
        let (slot, _, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let exported = try inv.runAsync { try await CodexSync(manager: manager).export(slot: slot, to: home) }
        let inFile = exported.place == home.authPath
        inv.emit(
            CodexExportView(
                slot: slot,
                authJSON: inFile ? home.authPath : nil,
                keyringItem: inFile ? nil : exported.place,
                accountID: exported.account.accountID
            )
        ) {
            inv.stdout.line("Wrote \(slot.name) to \(exported.place).")
        }
        if exported.fixedLegacyOAuthMode {
            inv.stderr.line(
                "lanyard: the sign-in replaced said auth_mode \"oauth\", "
                    + "which current Codex refuses; it says \"chatgpt\" now"
            )
        }
        return .ok
    }
}

/// `codex export --json`.
struct CodexExportView: JSONView {
    static let keys = ["slot", "auth_json", "keyring_item", "account_id"]
    let slot: Slot
    /// auth.json's path, when Codex reads its sign-in there (else null).
    let authJSON: String?
    /// Codex's keyring item, when Codex reads its sign-in there (keyring mode; else null).
    let keyringItem: String?
    let accountID: String?
    var json: JSONValue {
        .object([
            "slot": .string(slot.name), "auth_json": .optional(authJSON), "keyring_item": .optional(keyringItem),
            "account_id": .optional(accountID),
        ])
    }
}
