import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardFleet

extension FleetCommands {
    static let initFleet = CommandSpec(
        name: "fleet init", summary: "create the fleet with this machine as its first member", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: """
        Makes this machine's fleet identity (an X25519 age key kept in its credential store) and writes the \
        fleet and this member under /lanyard/NAME/ in etcd. Fails when the fleet exists.
        """,
        examples: [CommandExample("lanyard fleet init", "start a fleet")]) { inv in
        let manager = try inv.accounts()
        let member = try manager.fleetCreate()
        let fleetName = manager.config.fleet?.name ?? ""
        inv.emit(FleetMemberView(member: member)) {
            inv.stdout.line("Created fleet \(fleetName) with \(member.machine) as its first member.")
            inv.stdout.line("Fingerprint: \(member.fingerprint)")
            inv.stdout.line("Share a slot with `lanyard fleet share SLOT`; add a machine with `lanyard fleet join` there.")
        }
        return .ok
    }
}
