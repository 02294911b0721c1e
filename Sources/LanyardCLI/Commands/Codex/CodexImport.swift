import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

extension IntegrationCommands {
    static let codexImport = CommandSpec(
        name: "codex import",
        summary: "adopt the sign-in in Codex's auth.json into a slot",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [codexHomeFlag],
        prints: true,
        takesAccount: false,
        details: """
            Adopts the sign-in in auth.json into SLOT (default: named after its email) without revoking anything, so \
            Codex and Lanyard share the session. A slot that holds another account is refused (exit 1); a malformed \
            auth.json is refused with the field named.
            """,
        examples: [
            CommandExample("lanyard codex import", "adopt Codex's account into a slot named after its email"),
            CommandExample("lanyard codex import work", "adopt it into the slot work"),
        ]
    ) { inv in
        let home = CodexHome(explicit: inv.args.value("codex-home"), environment: inv.context.environment)
        let manager = try inv.accounts()
        let requested = try inv.args.positionals.first.map { try SlotCommands.parseSlot($0, inv) }
        let adopted = try manager.adoptCodexSignIn(from: home, into: requested)
        inv.emit(CodexImportView(slot: adopted.slot, email: adopted.account.email, backend: adopted.backend)) {
            inv.stdout.line(
                "Adopted Codex's sign-in (\(adopted.account.email ?? "unknown account")) "
                    + "into slot \(adopted.slot.name)."
            )
        }
        if adopted.legacyOAuthMode {
            inv.stderr.line(
                "lanyard: Codex's sign-in says auth_mode \"oauth\", which current Codex refuses; "
                    + "`lanyard codex export \(adopted.slot.name)` rewrites it as \"chatgpt\""
            )
        }
        return .ok
    }
}

/// `codex import --json`.
struct CodexImportView: JSONView {
    static let keys = ["slot", "email", "backend"]
    let slot: Slot
    let email: String?
    let backend: BackendKind
    var json: JSONValue {
        .object(["slot": .string(slot.name), "email": .optional(email), "backend": .string(backend.rawValue)])
    }
}
