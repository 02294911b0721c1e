import LanyardAuth
import LanyardCore
import LanyardSupport

extension FleetCommands {
    static let remove = CommandSpec(
        name: "fleet remove", summary: "remove a machine: nothing written from now on is readable by it",
        arguments: "MACHINE", minArguments: 1, maxArguments: 1, flags: [], prints: true, takesAccount: false,
        details: """
        Appends a signed `remove` entry to the membership log (or deletes a join request) and re-seals every \
        shared slot without it. The removed machine still holds a refresh token of each shared slot's sign-in: \
        once the fleet rotates it, that token is spent, and presenting it makes the provider revoke the whole \
        sign-in for every machine. The cure is a new sign-in on a member (`lanyard login SLOT`), which \
        replaces the fleet's copy in one step with a session the removed machine has no token of. Revoke its \
        etcd user and certificate too (docs/fleet.md).
        """,
        examples: [CommandExample("lanyard fleet remove old-laptop", "after a machine is lost")]) { inv in
        let machine = inv.args.positionals[0]
        let slots = try inv.accounts().fleetRemove(machine: machine)
        inv.emit(FleetRemoveView(machine: machine, slots: slots)) {
            inv.stdout.line("Removed \(machine) from the fleet.")
            if !slots.isEmpty {
                inv.stdout.line("It still holds a refresh token of \(slots.map(\.name).joined(separator: ", ")): if it presents one after the fleet's next")
                inv.stdout.line("refresh, the provider revokes that sign-in everywhere. Sign each in again here now (the new sign-in")
                inv.stdout.line("replaces the fleet's copy, and \(machine) has no token of it):")
                for slot in slots { inv.stdout.line("  lanyard login \(slot.name)") }
                inv.stdout.line("Then revoke \(machine)'s etcd user and certificate (docs/fleet.md, \"Removing a machine\").")
            }
        }
        return .ok
    }
}

/// `fleet remove --json`.
struct FleetRemoveView: JSONView {
    static let keys = ["machine", "sign_in_again"]
    let machine: String
    let slots: [Slot]
    var json: JSONValue { .object(["machine": .string(machine), "sign_in_again": .array(slots.map { .string($0.name) })]) }
}
