import FoundationEssentials
import Age
import LanyardCore
import LanyardSupport

/// A machine of the fleet (or one asking to join), as `members/NAME` and `pending/NAME` hold it:
/// public data only.
public struct FleetMember: Equatable, Sendable, JSONDocument {
    /// The machine's name in the fleet (`[fleet] machine`).
    public var machine: String
    /// The machine's age recipient (`age1…`): what shared credentials are encrypted to.
    public var recipient: String
    /// When it was approved (a join request: when it asked).
    public var addedAt: Date?
    /// The member that approved it (itself for the fleet's first machine).
    public var approvedBy: String?

    package init(machine: String, recipient: String, addedAt: Date?, approvedBy: String?) {
        self.machine = machine
        self.recipient = recipient
        self.addedAt = addedAt
        self.approvedBy = approvedBy
    }

    /// The short fingerprint of its recipient that `join` prints and `approve` checks.
    public var fingerprint: String { MachineIdentity.fingerprint(of: recipient) }

    package init(json: JSONFields) throws(JSONShapeError) {
        machine = try json.string("machine")
        guard (try? Slot(machine)) != nil else { throw JSONShapeError(path: json.path + ".machine", problem: "is not a machine name") }
        recipient = try json.string("recipient")
        guard (try? X25519Recipient(recipient)) != nil else { throw JSONShapeError(path: json.path + ".recipient", problem: "is not an age X25519 recipient") }
        addedAt = try json.optionalDate("added_at")
        approvedBy = try json.optionalString("approved_by")
    }

    package var json: JSONValue {
        .object(["machine": .string(machine), "recipient": .string(recipient), "added_at": .date(addedAt),
                 "approved_by": .optional(approvedBy)]).droppingNulls
    }

    static func decode(_ kv: EtcdKeyValue) throws -> FleetMember {
        do { return try decode(Data(kv.value), source: "etcd key \(kv.key)") } catch {
            throw FleetError.corrupt(key: kv.key, detail: error.detail)
        }
    }
}
