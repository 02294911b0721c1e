import Age
import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// The fleet's members as this machine verified them: the membership log (`log/0000000001`, …)
/// from the genesis entry it pinned when it joined, each later entry linked to the one before by
/// its digest and signed by a member of that moment. etcd only carries the log: an entry that
/// does not verify is damaged, and it and everything after it are ignored (a member's next entry
/// replaces it), so a writer without a member's key can add, remove or revive no one.
///
/// This machine keeps the newest membership it verified (``MembershipCache``) with every entry
/// that led to it, and only ever extends it: a log that etcd cuts back is put back from here, and
/// a different entry at a number verified here is a fork (``FleetAlarm``), never skipped.
package struct Membership: Equatable, Sendable {
    package var fleet: String
    /// The genesis entry's digest: the fleet's identity, pinned at `init` or `join`.
    package var pin: String
    /// The newest entry verified: its number and digest.
    package var seq: Int64
    package var head: String
    package var members: [FleetMember]
    /// Every entry verified, in order (entry `n` at index `n - 1`), as etcd held it: what a
    /// different entry at a known number is compared with, and what is put back when etcd loses
    /// one. Empty in a cache written before entries were kept, until the log is verified again.
    package var log: [VerifiedEntry] = []

    /// One verified entry: its digest (what the next entry and sealed values name) and its bytes.
    package struct VerifiedEntry: Equatable, Sendable {
        package var digest: String
        package var bytes: [UInt8]
    }

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

    /// The digest of entry `seq` as verified here; nil when this machine has not verified it (or
    /// no longer has it: a cache from before entries were kept).
    package func digest(at seq: Int64) -> String? {
        if seq == self.seq { return head }
        guard seq >= 1, seq <= Int64(log.count) else { return nil }
        return log[Int(seq - 1)].digest
    }

    /// Checks what a member signed "for membership entry `seq` with digest `digest`" against what
    /// this machine verified: an entry beyond the log here throws
    /// ``FleetError/membershipBehind(fleet:seq:signer:source:)``, another digest at a number
    /// verified here ``FleetError/forked(fleet:seq:detail:)``.
    package func check(head seq: Int64, digest: String, signer: String, source: String) throws(FleetError) {
        if seq > self.seq {
            throw .membershipBehind(fleet: fleet, seq: seq, digest: digest, signer: signer, source: source)
        }
        if let mine = self.digest(at: seq), mine != digest {
            throw .forked(fleet: fleet, seq: seq, digest: digest, ours: mine, signer: signer, source: source)
        }
    }

    /// The verified entries that remove a machine, oldest first: each one's number and the
    /// machine (none when the entries are not kept here).
    package var removals: [(seq: Int64, machine: String)] {
        log.enumerated().compactMap { i, entry in
            guard let doc = try? SignedDocument(entry.bytes, key: "log", kind: Membership.entryType),
                (try? doc.fields.string("op")) == "remove", let machine = try? doc.fields.machineName("machine")
            else { return nil }
            return (Int64(i + 1), machine)
        }
    }

    /// The newest verified entry that removes a machine (nil: none, or the entries are not kept here).
    package var lastRemoval: (seq: Int64, machine: String)? { removals.last }

    /// The membership as it stood after entry `seq` (at most this one), rebuilt from the entries
    /// kept: nil when they are not all here.
    package func replayed(upTo seq: Int64) -> Membership? {
        guard seq >= 1, seq <= Int64(log.count) else { return nil }
        guard var m = try? Membership.genesis(EtcdKeyValue(key: "log/1", value: log[0].bytes), fleet: fleet, pin: pin)
        else { return nil }
        for entry in log[1..<Int(seq)] {
            guard (try? m.apply(EtcdKeyValue(key: "log", value: entry.bytes))) != nil else { return nil }
        }
        return m
    }

    /// What an entry does.
    package enum Change: Equatable, Sendable {
        case genesis(FleetMember)
        case add(FleetMember)
        case remove(String)
    }

    /// The signed body of entry `seq` making `change`, linked to `prev`.
    package static func entry(
        fleet: String,
        seq: Int64,
        prev: String,
        change: Change,
        signer: String,
        at: Date,
        key: Ed25519.SigningKey
    ) -> [UInt8] {
        var body: [String: JSONValue] = [
            "type": .string(entryType), "fleet": .string(fleet), "seq": .string(String(seq)),
            "prev": .string(prev), "signer": .string(signer), "at": .date(at),
        ]
        switch change {
        case .genesis(let m), .add(let m):
            body["op"] = .string(change == .genesis(m) ? "genesis" : "add")
            body["machine"] = .string(m.machine)
            body["recipient"] = .string(m.recipient)
            body["signing_key"] = .string(m.signingKey)
            if let user = m.etcdUser { body["etcd_user"] = .string(user) }
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
            throw .untrustedFleet(
                fleet: fleet,
                detail: "its first membership entry is not the one this machine "
                    + "pinned (fingerprint \(fingerprint(pin: pin)))"
            )
        }
        let change = try parse(doc, key: kv.key, fleet: fleet, seq: 1, prev: "")
        guard case .genesis(var founder) = change.0, change.signer == founder.machine,
            doc.isSigned(by: founder.signingKey)
        else {
            throw .corrupt(key: kv.key, detail: "it is not a genesis entry signed by its founder")
        }
        founder.addedAt = change.at
        founder.approvedBy = founder.machine
        return Membership(
            fleet: fleet,
            pin: doc.digest,
            seq: 1,
            head: doc.digest,
            members: [founder],
            log: [VerifiedEntry(digest: doc.digest, bytes: kv.value)]
        )
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
            guard member(m.machine) == nil else {
                throw .corrupt(key: kv.key, detail: "it adds \(m.machine), who is a member already")
            }
            m.addedAt = at
            m.approvedBy = signer
            members.append(m)
            members.sort { $0.machine < $1.machine }
        case .remove(let machine):
            guard member(machine) != nil else {
                throw .corrupt(key: kv.key, detail: "it removes \(machine), who is not a member")
            }
            guard members.count > 1 else { throw .corrupt(key: kv.key, detail: "it removes the last member") }
            members.removeAll { $0.machine == machine }
        }
        if log.count == Int(seq) { log.append(VerifiedEntry(digest: doc.digest, bytes: kv.value)) }
        seq += 1
        head = doc.digest
    }

    private static func parse(
        _ doc: SignedDocument,
        key: String,
        fleet: String,
        seq: Int64,
        prev: String
    ) throws(FleetError)
        -> (Change, signer: String, at: Date?)
    {
        let f = doc.fields
        do {
            guard try f.string("fleet") == fleet else {
                throw FleetError.corrupt(key: key, detail: "it is another fleet's entry")
            }
            guard try f.counter("seq") == seq else {
                throw FleetError.corrupt(key: key, detail: "it is numbered \(try f.counter("seq")), not \(seq)")
            }
            guard try f.string("prev") == prev else {
                throw FleetError.corrupt(key: key, detail: "it does not follow the entry before it")
            }
            let signer = try f.machineName("signer")
            let at = try f.optionalDate("at")
            switch try f.string("op") {
            case "genesis": return (.genesis(try FleetMember(json: f)), signer, at)
            case "add": return (.add(try FleetMember(json: f)), signer, at)
            case "remove": return (.remove(try f.machineName("machine")), signer, at)
            case let other:
                throw FleetError.corrupt(key: key, detail: "its operation \(TerminalText.escaped(other)) is unknown")
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
            guard case .array(let items)? = f.object["members"] else {
                throw JSONShapeError(path: ".members", problem: "is not a list")
            }
            var members: [FleetMember] = []
            for (i, item) in items.enumerated() {
                members.append(try FleetMember(json: try JSONFields(item, path: ".members[\(i)]")))
            }
            var log: [Membership.VerifiedEntry] = []
            if case .array(let entries)? = f.object["log"] {
                for (i, item) in entries.enumerated() {
                    let e = try JSONFields(item, path: ".log[\(i)]")
                    log.append(
                        Membership.VerifiedEntry(
                            digest: try e.string("digest"),
                            bytes: Array(try e.string("entry").utf8)
                        )
                    )
                }
            }
            var m = Membership(
                fleet: try f.string("fleet"),
                pin: try f.string("pin"),
                seq: try f.counter("seq"),
                head: try f.string("head"),
                members: members,
                log: log
            )
            // A log that does not end at the head is not this membership's: verified again from etcd.
            if m.log.count != Int(m.seq) || m.log.last?.digest != m.head || m.log.first?.digest != m.pin { m.log = [] }
            return m
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
        if let saved = try? load(paths), saved.fleet == membership.fleet, saved.pin == membership.pin,
            saved.seq > membership.seq
                || (saved.seq == membership.seq && (!saved.log.isEmpty || membership.log.isEmpty))
        {
            return saved
        }
        try write(membership, paths: paths)
        return membership
    }

    /// Saves `membership` in place of what the file holds, older or not: only for a fork a person
    /// resolved (``Fleet/resolveFork(keep:)``).
    package static func replace(with membership: Membership, paths: Paths) throws {
        let lock = try FileLock(path: path(paths) + ".lock")
        defer { withExtendedLifetime(lock) {} }
        try write(membership, paths: paths)
    }

    private static func write(_ membership: Membership, paths: Paths) throws {
        let log = JSONValue.array(
            membership.log.map {
                .object(["digest": .string($0.digest), "entry": .string(String(decoding: $0.bytes, as: UTF8.self))])
            }
        )
        let doc = JSONValue.object([
            "fleet": .string(membership.fleet), "pin": .string(membership.pin), "seq": .string(String(membership.seq)),
            "head": .string(membership.head), "members": .array(membership.members.map(\.json)), "log": log,
        ])
        try SecureFiles.atomicWrite(Data(doc.serialized().utf8), to: path(paths))
    }

    package static func remove(_ paths: Paths) throws {
        let path = path(paths)
        if (try? SecureFiles.read(path)) != nil { try SecureFiles.removeDurably(path) }
    }
}

/// The bytes of a lower-case hex string (pairs that do not parse are skipped).
package func hexBytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var chars = Array(hex.utf8)[...]
    while chars.count >= 2 {
        if let b = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) { out.append(b) }
        chars = chars.dropFirst(2)
    }
    return out
}
