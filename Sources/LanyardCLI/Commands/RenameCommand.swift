import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardCore
import LanyardStore

extension SlotCommands {
    static let rename = CommandSpec(
        name: "rename", summary: "rename a slot, moving its stored credential", arguments: "OLD NEW",
        minArguments: 2, maxArguments: 2, flags: [], prints: true, takesAccount: false,
        details: """
        The credential is copied to the new name and read back before the old one is deleted. \
        `.lanyard` pins that still name OLD (the one in effect here, and those below the working directory \
        and under the home folder) are listed with a warning, not rewritten.
        """,
        examples: [
            CommandExample("lanyard rename alice-example-com alice", "give a slot named after an email a shorter name"),
        ]) { inv in
        let old = try parseSlot(inv.args.positionals[0], inv)
        let new = try parseSlot(inv.args.positionals[1], inv)
        let outcome = try inv.accounts().rename(old, to: new, pins: inv.pinSearch)
        for warning in outcome.warnings { inv.stderr.line("lanyard: warning: \(warning)") }
        for pin in outcome.stalePins {
            inv.stderr.line("lanyard: warning: \(pin) still names \(old.name): run `lanyard pin \(new.name)` in that folder")
        }
        inv.emit(.object(["from": .string(old.name), "to": .string(new.name), "stale_pins": .array(outcome.stalePins.map(JSONValue.string))])) {
            inv.stdout.line("Renamed \(old.name) to \(new.name).")
        }
        return .ok
    }
}
