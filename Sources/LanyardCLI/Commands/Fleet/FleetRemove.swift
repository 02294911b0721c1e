import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardFleet

extension FleetCommands {
    static let remove = CommandSpec(
        name: "fleet remove", summary: "remove a machine: nothing written from now on is readable by it",
        arguments: "MACHINE", minArguments: 1, maxArguments: 1, flags: [], prints: true, takesAccount: false,
        details: """
        Deletes the member (or its join request) and re-encrypts every shared slot without it. The removed \
        machine still holds the tokens it had: refresh each shared slot it could read (`lanyard refresh \
        --force SLOT`) so those stop working at the next rotation.
        """,
        examples: [CommandExample("lanyard fleet remove old-laptop", "after a machine is lost")]) { inv in
        let machine = inv.args.positionals[0]
        let slots = try inv.accounts().fleetRemove(machine: machine)
        inv.emit(FleetRemoveView(machine: machine, slots: slots)) {
            inv.stdout.line("Removed \(machine) from the fleet.")
            if !slots.isEmpty {
                inv.stdout.line("It could read \(slots.map(\.name).joined(separator: ", ")): refresh them now so its copies stop working:")
                for slot in slots { inv.stdout.line("  lanyard refresh \(slot.name)") }
            }
        }
        return .ok
    }
}

/// `fleet remove --json`.
struct FleetRemoveView: JSONView {
    static let keys = ["machine", "refresh"]
    let machine: String
    let slots: [Slot]
    var json: JSONValue { .object(["machine": .string(machine), "refresh": .array(slots.map { .string($0.name) })]) }
}
