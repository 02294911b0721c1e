import LanyardAuth
import LanyardCore
import LanyardSupport

extension ResolutionCommands {
    static let pin = CommandSpec(
        name: "pin",
        summary: "pin SLOT to this directory tree (writes ./.lanyard)",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "Commands run in this directory or below use SLOT unless --account or LANYARD_ACCOUNT say otherwise.",
        examples: [
            CommandExample("lanyard pin work", "commands run in this folder and below use work")
        ]
    ) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        let path = try inv.accounts().pin(slot, in: inv.context.workingDirectory)
        inv.emit(PinView(slot: slot, path: path)) {
            inv.stdout.line("Pinned \(slot.name) to \(inv.context.workingDirectory).")
        }
        return .ok
    }
}

/// `pin --json`.
struct PinView: JSONView {
    static let keys = ["slot", "path"]
    let slot: Slot
    /// The pin file written.
    let path: String
    var json: JSONValue { .object(["slot": .string(slot.name), "path": .string(path)]) }
}
