import LanyardCore
import LanyardSupport
import LanyardIntegrations

extension IntegrationCommands {
    static let codexExport = CommandSpec(
        name: "codex export", summary: "write a slot into Codex's auth.json", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1, flags: [codexHomeFlag], prints: true, takesAccount: true,
        details: """
        Writes the slot (the resolved one by default), refreshed first when due, to DIR/auth.json in Codex's \
        schema, atomically and with mode 0600. Tokens Codex rotated in the auth.json being replaced are first \
        copied back into the slot holding that account.
        """,
        examples: [
            CommandExample("lanyard codex export work", "Codex now runs as the slot work"),
            CommandExample("lanyard codex export --codex-home ~/.codex-ci ci", "write another Codex home"),
        ]) { inv in
        let home = CodexHome(explicit: inv.args.value("codex-home"), environment: inv.context.environment)
        let manager = try inv.accounts()
        let (slot, _, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let file = try inv.runAsync { try await CodexSync(manager: manager).export(slot: slot, to: home) }
        inv.emit(CodexExportView(slot: slot, authJSON: home.authPath, accountID: file.accountID)) {
            inv.stdout.line("Wrote \(slot.name) to \(home.authPath).")
        }
        return .ok
    }
}

/// `codex export --json`.
struct CodexExportView: JSONView {
    static let keys = ["slot", "auth_json", "account_id"]
    let slot: Slot
    let authJSON: String
    let accountID: String?
    var json: JSONValue { .object(["slot": .string(slot.name), "auth_json": .string(authJSON), "account_id": .optional(accountID)]) }
}
