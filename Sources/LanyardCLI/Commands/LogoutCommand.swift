import LanyardAuth
import LanyardCore
import LanyardSupport

extension AuthCommands {
    static let logout = CommandSpec(
        name: "logout", summary: "remove a slot's credential locally (the slot is kept, signed out)", arguments: "SLOT",
        minArguments: 1, maxArguments: 1,
        flags: [FlagSpec("revoke", "also revoke the refresh token at the provider (ends that session everywhere)")],
        prints: true, takesAccount: false,
        details: "Revocation is never the default: it would sign the account out of other tools that share the session.",
        examples: [
            CommandExample("lanyard logout work", "forget work's credential here; the account stays signed in elsewhere"),
            CommandExample("lanyard logout work --revoke", "also end the session at the provider (every tool sharing it is signed out)"),
        ], network: true) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        let manager = try inv.accounts()
        let revoke = inv.args.has("revoke")
        let outcome = try inv.runAsync { try await manager.signOut(slot: slot, revoke: revoke) }
        inv.emit(LogoutView(slot: slot, revoked: outcome.revoked)) {
            inv.stdout.line("Signed out of \(slot.name). `lanyard login \(slot.name)` signs it in again.")
            if revoke && !outcome.revoked {
                inv.stdout.line(outcome.wasSignedOut ? "The slot was already signed out; nothing was revoked."
                                             : "The provider has no revocation endpoint; nothing was revoked.")
            }
        }
        return .ok
    }
}

/// `logout --json`: the slot is always signed out afterwards.
struct LogoutView: JSONView {
    static let keys = ["slot", "state", "revoked"]
    let slot: Slot
    let revoked: Bool
    var json: JSONValue { .object(["slot": .string(slot.name), "state": .string("signed-out"), "revoked": .bool(revoked)]) }
}
