import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardSupport

extension FleetCommands {
    static let fingerprintFlag = FlagSpec(
        "fingerprint",
        value: "FINGERPRINT",
        "the fingerprint `fleet join` printed on the machine"
    )

    static let approve = CommandSpec(
        name: "fleet approve",
        summary: "admit a machine that asked to join",
        arguments: "MACHINE",
        minArguments: 1,
        maxArguments: 1,
        flags: [fingerprintFlag],
        prints: true,
        takesAccount: false,
        details: """
            The fingerprint must be the one `lanyard fleet join` printed on that machine (compare it through a \
            channel you trust): it proves the request came from the machine you mean. Every shared slot is then \
            encrypted to the new member too.
            """,
        examples: [
            CommandExample("lanyard fleet approve ci-runner --fingerprint 3F2A-91BC-0D11-77E4", "admit ci-runner")
        ]
    ) { inv in
        guard let fingerprint = inv.args.value("fingerprint") else {
            throw UsageError(
                message: "missing --fingerprint: copy it from `lanyard fleet join` on that machine",
                command: inv.spec.name
            )
        }
        let (member, slots) = try inv.accounts().fleetApprove(
            machine: inv.args.positionals[0],
            fingerprint: fingerprint
        )
        inv.emit(FleetApproveView(member: member, slots: slots)) {
            inv.stdout.line(
                "Approved \(member.machine); \(slots.count) shared slot\(slots.count == 1 ? "" : "s") re-sealed to it."
            )
            inv.stdout.line("On \(member.machine), run `lanyard fleet sync` (or start the agent) to fetch them.")
        }
        return .ok
    }
}

/// `fleet approve --json`.
struct FleetApproveView: JSONView {
    static let keys = ["member", "slots"]
    let member: FleetMember
    let slots: [Slot]
    var json: JSONValue {
        .object(["member": FleetMemberView(member: member).json, "slots": .array(slots.map { .string($0.name) })])
    }
}
