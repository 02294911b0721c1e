import LanyardAuth
import LanyardFleet

extension FleetCommands {
    static let fleetFingerprintFlag = FlagSpec(
        "fleet-fingerprint",
        value: "FINGERPRINT",
        "the fleet's fingerprint as a member shows it (`lanyard fleet status`)"
    )

    static let join = CommandSpec(
        name: "fleet join",
        summary: "ask to join the fleet (prints this machine's fingerprint)",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [fleetFingerprintFlag],
        prints: true,
        takesAccount: false,
        details: """
            --fleet-fingerprint is the fleet's fingerprint as a member shows it (`lanyard fleet status`, or what \
            `fleet init` printed): this machine pins that fleet's first membership entry and from then on trusts \
            only members that entry's signed log admits. Then it makes this machine's fleet keys and writes a \
            join request signed with them. A member approves it with `lanyard fleet approve MACHINE --fingerprint \
            FINGERPRINT` after checking the fingerprint printed here; then `lanyard fleet sync` (or the agent) \
            brings the shared slots here.
            """,
        examples: [
            CommandExample("lanyard fleet join --fleet-fingerprint 9C1E-04B2-7D3A-55F0-E812", "on a new machine")
        ]
    ) { inv in
        guard let fleetFingerprint = inv.args.value("fleet-fingerprint") else {
            throw UsageError(
                message: "missing --fleet-fingerprint: read it on a member's screen (`lanyard fleet status`)",
                command: inv.spec.name
            )
        }
        let manager = try inv.accounts()
        let request = try manager.fleetJoin(fleetFingerprint: fleetFingerprint)
        inv.emit(FleetMemberView(member: request, fleetFingerprint: manager.fleetFingerprint())) {
            if request.approvedBy != nil {
                inv.stdout.line("\(request.machine) is already a member.")
            } else {
                inv.stdout.line("Asked to join as \(request.machine).")
                inv.stdout.line("Recipient:   \(request.recipient)")
                inv.stdout.line("Signing key: \(request.signingKey)")
                inv.stdout.line("Fingerprint: \(request.fingerprint)")
                inv.stdout.line("On a member, check the fingerprint and run:")
                inv.stdout.line("  lanyard fleet approve \(request.machine) --fingerprint \(request.fingerprint)")
            }
        }
        return .ok
    }
}
