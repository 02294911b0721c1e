import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

extension SlotCommands {
    static let remove = CommandSpec(
        name: "remove",
        summary: "delete a slot and its stored credential (never revokes it)",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [FlagSpec("yes", short: "y", "do not ask for confirmation")],
        prints: true,
        takesAccount: false,
        details: "Without --yes it asks on a terminal and refuses when there is no terminal.",
        examples: [
            CommandExample("lanyard remove old", "delete the slot old and its stored credential (asks first)"),
            CommandExample("lanyard remove old --yes", "the same without asking (scripts)"),
        ]
    ) { inv in
        let slot = try parseSlot(inv.args.positionals[0], inv)
        let manager = try inv.accounts()
        let record = try manager.record(of: slot)
        if !inv.args.has("yes") {
            guard inv.context.stdinIsTTY else {
                throw UsageError(
                    message: "refusing to remove \(slot.name) without --yes (no terminal to ask)",
                    command: "remove"
                )
            }
            let who = record.account.email.map { " (\($0))" } ?? ""
            guard inv.confirm("Remove slot \(slot.name)\(who) and its stored credential?") else {
                inv.stderr.line("Nothing removed.")
                return .failure  // a "no" is an answer, not an interruption (130 is for Ctrl-C)
            }
        }
        try manager.remove(slot)
        inv.emit(RemoveView(removed: slot)) { inv.stdout.line("Removed \(slot.name).") }
        return .ok
    }
}

/// `remove --json`.
struct RemoveView: JSONView {
    static let keys = ["removed"]
    let removed: Slot
    var json: JSONValue { .object(["removed": .string(removed.name)]) }
}
