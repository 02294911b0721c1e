import LanyardAuth
import LanyardCore
import LanyardSupport

extension AuthCommands {
    static let logout = CommandSpec(
        name: "logout",
        summary: "remove a slot's credential locally (the slot is kept, signed out)",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [
            FlagSpec("revoke", "also revoke the refresh token at the provider (ends that session everywhere)"),
            FlagSpec(
                "yes",
                short: "y",
                "with --revoke: sign out even when the token cannot be revoked, without asking"
            ),
        ],
        prints: true,
        takesAccount: false,
        details: """
            Revocation is never the default: it would sign the account out of other tools that share the session. \
            When --revoke cannot revoke (ChatGPT sign-in has no \
            revocation endpoint; a fleet's token; a failed request), \
            logout says so before it signs out and asks on a terminal; without a terminal it changes nothing unless \
            --yes is given, and with --yes it signs out and says the token was not revoked.
            """,
        examples: [
            CommandExample(
                "lanyard logout work",
                "forget work's credential here; the account stays signed in elsewhere"
            ),
            CommandExample(
                "lanyard logout work --revoke",
                "also end the session at the provider (every tool sharing it is signed out)"
            ),
            CommandExample(
                "lanyard logout work --revoke --yes",
                "the same, signing out even when it cannot be revoked (scripts)"
            ),
        ],
        network: true
    ) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        let manager = try inv.accounts()
        let revoke = inv.args.has("revoke")
        let yes = inv.args.has("yes")
        var outcome: SignOutOutcome
        do {
            outcome = try inv.runAsync {
                try await manager.signOut(slot: slot, revoke: revoke, ifNotRevoked: yes ? .signOutAnyway : .refuse)
            }
        } catch let error as NotRevokedError {
            // Nothing changed. Without a terminal to ask, the error says so and names --yes.
            guard inv.context.stdinIsTTY, !inv.json else { throw error }
            inv.stderr.line("Could not revoke \(slot.name)'s refresh token: \(error.reason.description).")
            guard inv.confirm("Sign out of \(slot.name) here anyway? The refresh token stays valid at the provider.")
            else {
                inv.stderr.line("Nothing changed: \(slot.name) is still signed in.")
                return .failure  // a "no" is an answer, not an interruption (130 is for Ctrl-C)
            }
            outcome = try inv.runAsync { try await manager.signOut(slot: slot, revoke: false) }
            outcome.notRevoked = error.reason
        }
        let notRevoked = outcome.notRevoked
        inv.emit(LogoutView(slot: slot, revoked: outcome.revoked, notRevoked: notRevoked?.description)) {
            if let notRevoked, yes {
                inv.stdout.line("Could not revoke \(slot.name)'s refresh token: \(notRevoked.description).")
            }
            inv.stdout.line("Signed out of \(slot.name). `lanyard login \(slot.name)` signs it in again.")
            if notRevoked != nil {
                inv.stdout.line("The refresh token was not revoked: it stays valid at the provider.")
            } else if revoke && !outcome.revoked {
                inv.stdout.line("The slot was already signed out; nothing was revoked.")
            }
        }
        return .ok
    }
}

/// `logout --json`: the slot is always signed out afterwards; `not_revoked` says why a
/// revocation asked for did not happen (with --yes).
struct LogoutView: JSONView {
    static let keys = ["slot", "state", "revoked", "not_revoked"]
    static let optionalKeys: Set<String> = ["not_revoked"]
    let slot: Slot
    let revoked: Bool
    var notRevoked: String? = nil
    var json: JSONValue {
        JSONValue.object([
            "slot": .string(slot.name), "state": .string("signed-out"), "revoked": .bool(revoked),
            "not_revoked": .optional(notRevoked),
        ]).droppingNulls
    }
}
