import FoundationEssentials
import LanyardCore
import LanyardSupport

/// `lanyard token`: the slot's access token, for scripts.
enum TokenCommand {
    static let command = CommandSpec(
        name: "token",
        summary: "print the slot's access token (for scripts)",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: true,
        details: """
            Refreshes first when the token expires within the refresh lead (one refresh per slot across processes). \
            Prints only the token and a newline, so `$(lanyard token)` works. \
            Exit 3 when the slot has none, 4 when it must sign in again.
            """,
        examples: [
            CommandExample(
                "curl -H \"Authorization: Bearer $(lanyard token work)\" https://api.example.com/",
                "call an API as work with a fresh token"
            ),
            CommandExample("lanyard token --json", "the token with its expiry and slot, as JSON"),
        ]
    ) { inv in
        let (slot, _, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        StartupTrace.mark("resolve")
        let manager = try inv.accounts()
        StartupTrace.mark("config")
        let credential = try inv.freshCredential(manager, slot: slot)
        inv.emit(
            TokenView(slot: slot, accessToken: credential.tokens.accessToken, expiresAt: credential.tokens.expiresAt)
        ) {
            inv.stdout.rawLine(credential.tokens.accessToken)  // checked at the door: visible ASCII only
        }
        StartupTrace.mark("output")
        return .ok
    }
}

/// `token --json`: the one document that carries a token.
struct TokenView: JSONView {
    static let keys = ["slot", "access_token", "expires_at"]
    static let optionalKeys: Set<String> = ["expires_at"]
    let slot: Slot
    let accessToken: String
    let expiresAt: Date?
    var json: JSONValue {
        JSONValue.object([
            "slot": .string(slot.name), "access_token": .string(accessToken), "expires_at": .date(expiresAt),
        ]).droppingNulls
    }
}
