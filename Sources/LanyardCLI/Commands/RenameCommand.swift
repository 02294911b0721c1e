import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardCore
import LanyardStore

extension SlotCommands {
    static let rename = CommandSpec(
        name: "rename", summary: "rename a slot, moving its stored credential", arguments: "OLD NEW",
        minArguments: 2, maxArguments: 2, flags: [], prints: true, takesAccount: false,
        details: "The credential is copied to the new name and read back before the old one is deleted.",
        examples: [
            CommandExample("lanyard rename alice-example-com alice", "give a slot named after an email a shorter name"),
        ]) { inv in
        let old = try parseSlot(inv.args.positionals[0], inv)
        let new = try parseSlot(inv.args.positionals[1], inv)
        let outcome = try inv.accounts().rename(old, to: new)
        for warning in outcome.warnings { inv.stderr.line("lanyard: warning: \(warning)") }
        inv.emit(.object(["from": .string(old.name), "to": .string(new.name)])) { inv.stdout.line("Renamed \(old.name) to \(new.name).") }
        return .ok
    }
}
