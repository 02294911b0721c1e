import LanyardAuth
import LanyardCore
import LanyardSupport

extension SlotCommands {
    static let rename = CommandSpec(
        name: "rename",
        summary: "rename a slot, moving its stored credential",
        arguments: "OLD NEW",
        minArguments: 2,
        maxArguments: 2,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            The credential is copied to the new name and read back before the old one is deleted. \
            `.lanyard` pins that still name OLD (the one in effect here, and those below the working directory \
            and under the home folder) are listed with a warning, not rewritten.
            """,
        examples: [
            CommandExample("lanyard rename alice-example-com alice", "give a slot named after an email a shorter name")
        ]
    ) { inv in
        let old = try parseSlot(inv.args.positionals[0], inv)
        let new = try parseSlot(inv.args.positionals[1], inv)
        let outcome = try inv.accounts().rename(old, to: new, pins: inv.pinSearch)
        for warning in outcome.warnings { inv.stderr.line("lanyard: warning: \(warning)") }
        for pin in outcome.stalePins {
            inv.stderr.line(
                "lanyard: warning: \(pin) still names \(old.name): run `lanyard pin \(new.name)` in that folder"
            )
        }
        inv.emit(RenameView(from: old, to: new, stalePins: outcome.stalePins)) {
            inv.stdout.line("Renamed \(old.name) to \(new.name).")
        }
        return .ok
    }
}

/// `rename --json`.
struct RenameView: JSONView {
    static let keys = ["from", "to", "stale_pins"]
    let from: Slot
    let to: Slot
    /// Pin files that still name the old slot.
    let stalePins: [String]
    var json: JSONValue {
        .object([
            "from": .string(from.name), "to": .string(to.name), "stale_pins": .array(stalePins.map(JSONValue.string)),
        ])
    }
}
