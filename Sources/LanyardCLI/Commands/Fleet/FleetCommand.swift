import LanyardCore
import LanyardFleet
import LanyardSupport

/// `lanyard fleet init|join|approve|share|unshare|sync|status|remove`: sharing slots between a
/// user's machines through etcd.
enum FleetCommands {
    static let fleet = CommandSpec(
        group: "fleet",
        summary: "share slots between machines through etcd",
        details: """
            A fleet keeps shared slots in etcd (configured under [fleet] in config.ini), encrypted to the age \
            recipient of every member machine: etcd never sees a token. A due shared slot is refreshed by one \
            machine under an etcd lock; the others adopt its new tokens. See docs/fleet.md.
            """,
        examples: [
            CommandExample("lanyard fleet init", "create the fleet with this machine as its first member"),
            CommandExample("lanyard fleet join", "on another machine: ask to join (prints a fingerprint)"),
            CommandExample(
                "lanyard fleet approve ci-runner --fingerprint 3F2A-91BC-0D11-77E4",
                "on a member: admit it"
            ),
            CommandExample("lanyard fleet share work", "share the slot work with every member"),
            CommandExample("lanyard fleet status", "members, shared slots, the leader and etcd's health"),
        ],
        subcommands: [initFleet, join, approve, share, unshare, sync, status, remove, resolve]
    )

    static func slotArgument(_ inv: Invocation) throws -> Slot {
        guard let raw = inv.args.positionals.first else {
            throw UsageError(message: "missing SLOT", command: inv.spec.name)
        }
        do { return try Slot(raw) } catch {
            throw UsageError(message: error.userFacingDescription, command: inv.spec.name)
        }
    }
}

/// A member or join request in `--json` output.
struct FleetMemberView: JSONView {
    static let keys = [
        "machine", "recipient", "signing_key", "fingerprint", "added_at", "approved_by", "fleet_fingerprint",
    ]
    static let optionalKeys: Set<String> = ["added_at", "approved_by", "fleet_fingerprint"]
    let member: FleetMember
    /// The fleet's fingerprint, where the command shows it (`init`, `join`).
    var fleetFingerprint: String? = nil
    var json: JSONValue {
        JSONValue.object([
            "machine": .string(member.machine), "recipient": .string(member.recipient),
            "signing_key": .string(member.signingKey),
            "fingerprint": .string(member.fingerprint), "added_at": .date(member.addedAt),
            "approved_by": .optional(member.approvedBy),
            "fleet_fingerprint": .optional(fleetFingerprint),
        ]).droppingNulls
    }
}
