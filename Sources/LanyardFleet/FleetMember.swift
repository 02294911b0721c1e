import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// A machine of the fleet (or one asking to join): public data only. Members come from the
/// verified membership log (``Membership``), never from a value etcd serves on its own.
public struct FleetMember: Equatable, Sendable, JSONDocument {
    /// The machine's name in the fleet (`[fleet] machine`).
    public var machine: String
    /// The machine's age recipient (`age1…`): what shared credentials are encrypted to.
    public var recipient: String
    /// The machine's Ed25519 public key (base64): what its signatures are checked with.
    public var signingKey: String
    /// When it was approved (a join request: when it asked).
    public var addedAt: Date?
    /// The member that approved it (itself for the fleet's first machine).
    public var approvedBy: String?
    /// Its etcd user (`[fleet] user` on it), when it has one: what `fleet remove` deletes.
    public var etcdUser: String?

    package init(machine: String, recipient: String, signingKey: String, addedAt: Date?, approvedBy: String?) {
        self.machine = machine
        self.recipient = recipient
        self.signingKey = signingKey
        self.addedAt = addedAt
        self.approvedBy = approvedBy
    }

    /// The short fingerprint of its two public keys that `join` prints and `approve` checks.
    public var fingerprint: String { MachineIdentity.fingerprint(recipient: recipient, signingKey: signingKey) }

    package init(json: JSONFields) throws(JSONShapeError) {
        machine = try json.machineName("machine")
        recipient = try json.string("recipient")
        guard (try? X25519Recipient(recipient)) != nil else {
            throw JSONShapeError(path: json.path + ".recipient", problem: "is not an age X25519 recipient")
        }
        signingKey = try json.string("signing_key")
        guard let key = Data(base64Encoded: signingKey), key.count == Ed25519.publicKeyBytes else {
            throw JSONShapeError(path: json.path + ".signing_key", problem: "is not an Ed25519 public key")
        }
        addedAt = try json.optionalDate("added_at")
        approvedBy = try json.optionalString("approved_by")
        if let name = approvedBy, (try? Slot(name)) == nil {
            throw JSONShapeError(path: json.path + ".approved_by", problem: "is not a machine name")
        }
        etcdUser = try json.optionalString("etcd_user")
        if let user = etcdUser,
            user.isEmpty || user.count > 128 || user.contains(where: { $0.isNewline || $0 == "\u{0}" })
        {
            throw JSONShapeError(path: json.path + ".etcd_user", problem: "is not an etcd user name")
        }
    }

    package var json: JSONValue {
        .object([
            "machine": .string(machine), "recipient": .string(recipient), "signing_key": .string(signingKey),
            "added_at": .date(addedAt), "approved_by": .optional(approvedBy), "etcd_user": .optional(etcdUser),
        ]).droppingNulls
    }
}

/// A machine's request to join, as `pending/MACHINE` holds it: signed with the key it asks to be
/// admitted with (so a request cannot carry someone else's keys), checked by a person through
/// its fingerprint before a member signs it into the log.
package enum JoinRequest {
    static let type = "lanyard-fleet-join"

    package static func make(
        fleet: String,
        machine: String,
        identity: MachineIdentity,
        etcdUser: String?,
        at: Date
    ) -> [UInt8] {
        SignedDocument.sign(
            .object([
                "type": .string(type), "fleet": .string(fleet), "machine": .string(machine),
                "recipient": .string(identity.recipient), "signing_key": .string(identity.signingKey),
                "etcd_user": .optional(etcdUser), "at": .date(at),
            ]).droppingNulls,
            with: identity.signing
        )
    }

    /// The machine a request asks to admit, checked: well formed, for this fleet and name, and
    /// signed by the key it carries.
    package static func open(
        _ kv: EtcdKeyValue,
        fleet: String,
        machine expected: String?
    ) throws(FleetError) -> FleetMember {
        let doc = try SignedDocument(kv.value, key: kv.key, kind: type)
        do {
            var member = try FleetMember(json: doc.fields)
            member.addedAt = try doc.fields.optionalDate("at")
            guard try doc.fields.string("fleet") == fleet else {
                throw FleetError.corrupt(key: kv.key, detail: "it asks to join another fleet")
            }
            if let expected, member.machine != expected {
                throw FleetError.corrupt(key: kv.key, detail: "it names another machine than its key")
            }
            guard doc.isSigned(by: member.signingKey) else {
                throw FleetError.corrupt(key: kv.key, detail: "its signature does not match the key it carries")
            }
            return member
        } catch let error as FleetError { throw error } catch {
            throw .corrupt(key: kv.key, detail: error.userFacingDescription)
        }
    }
}
