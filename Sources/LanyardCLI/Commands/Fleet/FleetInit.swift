import LanyardAuth
import LanyardCore
import LanyardFleet

extension FleetCommands {
    static let initFleet = CommandSpec(
        name: "fleet init",
        summary: "create the fleet with this machine as its first member",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Makes this machine's fleet keys (an X25519 age key and the Ed25519 signing key derived from it, kept \
            in its credential store) and writes the fleet's first membership entry, signed, under /lanyard/NAME/ \
            in etcd. Prints the fleet's fingerprint: a joining machine checks it (`fleet join \
            --fleet-fingerprint`). Fails when the fleet exists.
            """,
        examples: [CommandExample("lanyard fleet init", "start a fleet")]
    ) { inv in
        let manager = try inv.accounts()
        let member = try manager.fleetCreate()
        let fleetName = manager.config.fleet?.name ?? ""
        let fleetFingerprint = manager.fleetFingerprint() ?? ""
        inv.emit(FleetMemberView(member: member, fleetFingerprint: fleetFingerprint)) {
            inv.stdout.line("Created fleet \(fleetName) with \(member.machine) as its first member.")
            inv.stdout.line("Fleet fingerprint: \(fleetFingerprint)  (a joining machine checks it)")
            inv.stdout.line("This machine:      \(member.fingerprint)")
            inv.stdout.line(
                "Share a slot with `lanyard fleet share SLOT`; add a machine with "
                    + "`lanyard fleet join --fleet-fingerprint \(fleetFingerprint)` there."
            )
        }
        return .ok
    }
}
