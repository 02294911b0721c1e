import FoundationEssentials
import Age
import LanyardCore
import LanyardSupport
import LanyardStore

/// The fleet's members as this machine verified them: the membership log (`log/0000000001`, …)
/// from the genesis entry it pinned when it joined, each later entry linked to the one before by
/// its digest and signed by a member of that moment. etcd only carries the log: an entry that
/// does not verify is damaged, and it and everything after it are ignored (a member's next entry
/// replaces it), so a writer without a member's key can add, remove or revive no one.
///
/// This machine keeps the newest membership it verified (``MembershipCache``) and only ever
/// extends it, so a log that etcd rolls back or forks changes nothing here.
package struct Membership: Equatable, Sendable {
    package var fleet: String
    /// The genesis entry's digest: the fleet's identity, pinned at `init` or `join`.
    package var pin: String
    /// The newest entry verified: its number and digest.
    package var seq: Int64
    package var head: String
    package var members: [FleetMember]

    package static let entryType = "lanyard-fleet-membership"

    /// The fleet's fingerprint that `init`, `join` and `status` show (its genesis digest).
    package var fingerprint: String { Self.fingerprint(pin: pin) }
    package static func fingerprint(pin: String) -> String { MachineIdentity.grouped(hex: Array(hexBytes(pin))) }

    package func member(_ machine: String) -> FleetMember? { members.first { $0.machine == machine } }
    /// The member holding `identity`'s keys (nil: this machine is not a member).
    package func member(holding identity: MachineIdentity) -> FleetMember? {
        members.first { $0.recipient == identity.recipient && $0.signingKey == identity.signingKey }
    }
    package var recipients: [String] { members.map(\.recipient) }

    /// What an entry does.
    package enum Change: Equatable, Sendable {
        case genesis(FleetMember)
        case add(FleetMember)
        case remove(String)
    }

    /// The signed body of entry `seq` making `change`, linked to `prev`.
    package static func entry(fleet: String, seq: Int64, prev: String, change: Change, signer: String, at: Date,
                              key: Ed25519.SigningKey) -> [UInt8] {
        var body: [String: JSONValue] = ["type": .string(entryType), "fleet": .string(fleet), "seq": .string(String(seq)),
                                         "prev": .string(prev), "signer": .string(signer), "at": .date(at)]
        switch change {
        case .genesis(let m), .add(let m):
            body["op"] = .string(change == .genesis(m) ? "genesis" : "add")
            body["machine"] = .string(m.machine)
            body["recipient"] = .string(m.recipient)
            body["signing_key"] = .string(m.signingKey)
        case .remove(let machine):
            body["op"] = .string("remove")
            body["machine"] = .string(machine)
        }
        return SignedDocument.sign(.object(body), with: key)
    }

    /// The membership a genesis entry founds, checked: entry 1 of `fleet`, made and signed by its
    /// one member, and (when `pin` is given) the one pinned.
    package static func genesis(_ kv: EtcdKeyValue, fleet: String, pin: String?) throws(FleetError) -> Membership {
        let doc = try SignedDocument(kv.value, key: kv.key, kind: entryType)
        if let pin, doc.digest != pin {
            throw .untrustedFleet(fleet: fleet, detail: "its first membership entry is not the one this machine pinned (fingerprint \(fingerprint(pin: pin)))")
        }
        let change = try parse(doc, key: kv.key, fleet: fleet, seq: 1, prev: "")
        guard case .genesis(var founder) = change.0, change.signer == founder.machine, doc.isSigned(by: founder.signingKey) else {
            throw .corrupt(key: kv.key, detail: "it is not a genesis entry signed by its founder")
        }
        founder.addedAt = change.at
        founder.approvedBy = founder.machine
        return Membership(fleet: fleet, pin: doc.digest, seq: 1, head: doc.digest, members: [founder])
    }

    /// Applies the next entry (number `seq + 1`), checked: linked to the head, signed by a current
    /// member, and a change that makes sense (no second member of one name, no removing a
    /// stranger or the last member). Throws ``FleetError/corrupt(key:detail:)`` and changes
    /// nothing when it does not verify.
    package mutating func apply(_ kv: EtcdKeyValue) throws(FleetError) {
        let doc = try SignedDocument(kv.value, key: kv.key, kind: Self.entryType)
        let (change, signer, at) = try Self.parse(doc, key: kv.key, fleet: fleet, seq: seq + 1, prev: head)
        guard let signerMember = member(signer), doc.isSigned(by: signerMember.signingKey) else {
            throw .corrupt(key: kv.key, detail: "it is not signed by a member")
        }
        switch change {
        case .genesis: throw .corrupt(key: kv.key, detail: "a genesis entry can only be the first")
        case .add(var m):
            guard member(m.machine) == nil else { throw .corrupt(key: kv.key, detail: "it adds \(m.machine), who is a member already") }
            m.addedAt = at
            m.approvedBy = signer
            members.append(m)
            members.sort { $0.machine < $1.machine }
        case .remove(let machine):
            guard member(machine) != nil else { throw .corrupt(key: kv.key, detail: "it removes \(machine), who is not a member") }
            guard members.count > 1 else { throw .corrupt(key: kv.key, detail: "it removes the last member") }
            members.removeAll { $0.machine == machine }
        }
        seq += 1
        head = doc.digest
    }

    private static func parse(_ doc: SignedDocument, key: String, fleet: String, seq: Int64, prev: String) throws(FleetError)
        -> (Change, signer: String, at: Date?) {
        let f = doc.fields
        do {
            guard try f.string("fleet") == fleet else { throw FleetError.corrupt(key: key, detail: "it is another fleet's entry") }
            guard try f.counter("seq") == seq else { throw FleetError.corrupt(key: key, detail: "it is numbered \(try f.counter("seq")), not \(seq)") }
            guard try f.string("prev") == prev else { throw FleetError.corrupt(key: key, detail: "it does not follow the entry before it") }
            let signer = try f.machineName("signer")
            let at = try f.optionalDate("at")
            switch try f.string("op") {
            case "genesis": return (.genesis(try FleetMember(json: f)), signer, at)
            case "add": return (.add(try FleetMember(json: f)), signer, at)
            case "remove": return (.remove(try f.machineName("machine")), signer, at)
            case let other: throw FleetError.corrupt(key: key, detail: "its operation \(TerminalText.escaped(other)) is unknown")
            }
        } catch let error as FleetError {
            throw error
        } catch {
            throw .corrupt(key: key, detail: error.userFacingDescription)
        }
    }

    /// A log key's entry number, nil for anything else.
    package static func number(of key: String, in keys: FleetKeys) -> Int64? {
        keys.name(of: key, in: keys.log).flatMap { $0.count == 10 && $0.allSatisfy(\.isASCII) ? Int64($0) : nil }
    }
}

/// An entry of the log that did not verify: reported, never trusted, replaced by the next member
/// that writes the log.
package struct DamagedEntry: Equatable, Sendable {
    package var key: String
    package var modRevision: Int64
    package var problem: String
}

/// This machine's verified membership, in `$XDG_DATA_HOME/lanyard/fleet/membership.json` (0600):
/// written only forward (a newer head of the same fleet), under a lock, so no process can put an
/// older membership back.
package enum MembershipCache {
    static func path(_ paths: Paths) -> String { SharedSlotState.folder(paths) + "/membership.json" }

    package static func load(_ paths: Paths) throws -> Membership? {
        let path = path(paths)
        guard let data = try SecureFiles.read(path) else { return nil }
        do {
            let f = try JSONFields(try JSONValue.parse(data))
            guard case .array(let items)? = f.object["members"] else { throw JSONShapeError(path: ".members", problem: "is not a list") }
            var members: [FleetMember] = []
            for (i, item) in items.enumerated() { members.append(try FleetMember(json: try JSONFields(item, path: ".members[\(i)]"))) }
            return Membership(fleet: try f.string("fleet"), pin: try f.string("pin"), seq: try f.counter("seq"), head: try f.string("head"), members: members)
        } catch {
            throw StoreError.corrupt(source: path, detail: error.userFacingDescription)
        }
    }

    /// Saves `membership` unless the file holds a newer head of the same fleet.
    /// - Returns: the membership now saved (the file's when it was newer).
    @discardableResult
    package static func save(_ membership: Membership, paths: Paths) throws -> Membership {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(SharedSlotState.folder(paths))
        let lock = try FileLock(path: path(paths) + ".lock")
        defer { withExtendedLifetime(lock) {} }
        if let saved = try? load(paths), saved.fleet == membership.fleet, saved.pin == membership.pin, saved.seq >= membership.seq {
            return saved
        }
        let doc = JSONValue.object(["fleet": .string(membership.fleet), "pin": .string(membership.pin), "seq": .string(String(membership.seq)),
                                    "head": .string(membership.head), "members": .array(membership.members.map(\.json))])
        try SecureFiles.atomicWrite(Data(doc.serialized().utf8), to: path(paths))
        return membership
    }

    package static func remove(_ paths: Paths) throws {
        let path = path(paths)
        if (try? SecureFiles.read(path)) != nil { try SecureFiles.removeDurably(path) }
    }
}

/// The bytes of a lower-case hex string (pairs that do not parse are skipped).
func hexBytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var chars = Array(hex.utf8)[...]
    while chars.count >= 2 {
        if let b = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) { out.append(b) }
        chars = chars.dropFirst(2)
    }
    return out
}
