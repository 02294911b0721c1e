import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// Evidence that this machine must not seal, sign or write anything for its fleet, kept in
/// `$XDG_DATA_HOME/lanyard/fleet/alarm.json` (0600) so that an attacker who hides the evidence
/// again cannot make the machine forget it:
///
/// - **behind**: a member signed a value, intent or tombstone for membership entry `seq`, which
///   this machine cannot verify (etcd lost or hid it). Sealing to the membership verified here
///   could include a machine that entry removed. Cleared on its own once the log here reaches
///   entry `seq` with the digest named.
/// - **forked**: two different entries verify at number `seq` (or a member's value names a
///   different entry there than the one verified here). Only a person can say which is the
///   fleet's (`lanyard fleet resolve`); until then nothing is written.
///
/// Either way the machine still serves its valid local copies: the worst an attacker gets is a
/// denial of service.
package struct FleetAlarm: Equatable, Sendable, JSONDocument {
    package enum Kind: String, Sendable { case behind, forked }

    package var fleet: String
    package var kind: Kind
    /// The entry number in question.
    package var seq: Int64
    /// The digest the evidence names at `seq` (behind), or the other entry's digest (forked).
    package var digest: String
    /// Forked: the digest this machine verified at `seq` (nil when it never verified that number).
    package var ours: String?
    /// Forked: the other entry's bytes, when it was read from the log (what `resolve` applies).
    package var theirs: [UInt8]?
    /// The key the evidence was read from, and the member that signed it.
    package var source: String
    package var signer: String
    package var detectedAt: Date?

    package init(
        fleet: String,
        kind: Kind,
        seq: Int64,
        digest: String,
        ours: String? = nil,
        theirs: [UInt8]? = nil,
        source: String,
        signer: String,
        detectedAt: Date?
    ) {
        self.fleet = fleet
        self.kind = kind
        self.seq = seq
        self.digest = digest
        self.ours = ours
        self.theirs = theirs
        self.source = source
        self.signer = signer
        self.detectedAt = detectedAt
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        fleet = try json.string("fleet")
        let kindText = try json.string("kind")
        guard let kind = Kind(rawValue: kindText) else {
            throw JSONShapeError(path: json.path + ".kind", problem: "is not behind or forked")
        }
        self.kind = kind
        seq = try json.counter("seq")
        digest = try json.string("digest")
        ours = try json.optionalString("ours")
        theirs = try json.optionalString("theirs").map { Array($0.utf8) }
        source = try json.string("source")
        signer = try json.string("signer")
        detectedAt = try json.optionalDate("detected_at")
    }

    package var json: JSONValue {
        .object([
            "fleet": .string(fleet), "kind": .string(kind.rawValue), "seq": .string(String(seq)),
            "digest": .string(digest),
            "ours": .optional(ours), "theirs": .optional(theirs.map { String(decoding: $0, as: UTF8.self) }),
            "source": .string(source), "signer": .string(signer), "detected_at": .date(detectedAt),
        ]).droppingNulls
    }

    /// The error every fleet write answers while this alarm stands.
    package var error: FleetError {
        switch kind {
        case .behind: return .membershipBehind(fleet: fleet, seq: seq, digest: digest, signer: signer, source: source)
        case .forked: return .forked(fleet: fleet, seq: seq, digest: digest, ours: ours, signer: signer, source: source)
        }
    }

    /// Both entries of a fork, for people: their fingerprints, and who signed or named the other.
    static func forkDetail(digest: String, ours: String?, signer: String, source: String) -> String {
        let mine =
            ours.map { "entry \(MachineIdentity.grouped(hex: hexBytes($0))) verified here" } ?? "none verified here"
        let how =
            source.contains("/log/") ? "signed by \(signer)" : "named by \(signer) in \(TerminalText.escaped(source))"
        return "\(mine), and entry \(MachineIdentity.grouped(hex: hexBytes(digest))) \(how)"
    }

    static func path(_ paths: Paths) -> String { SharedSlotState.folder(paths) + "/alarm.json" }

    /// The alarm standing for `fleet`, nil when there is none. A file that does not decode counts
    /// as an alarm (writes stay stopped) rather than as none.
    package static func load(_ paths: Paths, fleet: String) throws(FleetError) -> FleetAlarm? {
        let path = path(paths)
        let data: Data?
        do { data = try SecureFiles.read(path) } catch {
            throw .corrupt(key: path, detail: error.userFacingDescription)
        }
        guard let data else { return nil }
        let alarm: FleetAlarm
        do { alarm = try decode(data, source: path) } catch {
            throw .corrupt(
                key: path,
                detail: "\(error.userFacingDescription): remove it once `lanyard fleet status` shows the log verifies"
            )
        }
        return alarm.fleet == fleet ? alarm : nil
    }

    /// Records `alarm` unless a weightier one stands: a fork is never replaced by a behind, and a
    /// behind only by one naming a later entry. - Returns: the alarm now standing.
    @discardableResult
    package static func raise(_ alarm: FleetAlarm, paths: Paths) throws -> FleetAlarm {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(SharedSlotState.folder(paths))
        let lock = try FileLock(path: path(paths) + ".lock")
        defer { withExtendedLifetime(lock) {} }
        if let standing = try? load(paths, fleet: alarm.fleet) {
            switch (standing.kind, alarm.kind) {
            case (.forked, _): return standing
            case (.behind, .behind) where standing.seq >= alarm.seq: return standing
            default: break
            }
        }
        try SecureFiles.atomicWrite(alarm.jsonData(), to: path(paths))
        return alarm
    }

    /// Records `alarm` in place of whatever stands (a behind that turned out a fork).
    package static func replace(with alarm: FleetAlarm, paths: Paths) throws {
        let lock = try FileLock(path: path(paths) + ".lock")
        defer { withExtendedLifetime(lock) {} }
        try SecureFiles.atomicWrite(alarm.jsonData(), to: path(paths))
    }

    /// Removes the alarm (the log caught up, or a person resolved the fork).
    package static func clear(_ paths: Paths) throws {
        let path = path(paths)
        if (try? SecureFiles.read(path)) != nil { try SecureFiles.removeDurably(path) }
    }
}

extension Fleet {
    /// `fleet resolve FINGERPRINT`: a person chose which of a fork's two entries is the fleet's
    /// (by the fingerprint `fleet status` shows for each). Keeping the one verified here puts it
    /// back in etcd in place of the other; keeping the other rebuilds this machine's membership
    /// from the entries before the fork plus that one (it must verify). Either way the alarm is
    /// cleared and the log is read again.
    package func resolveFork(keep given: String) throws -> Membership {
        guard let alarm = try FleetAlarm.load(paths, fleet: name), alarm.kind == .forked else {
            throw FleetError.noFork(fleet: name, given: nil)
        }
        guard let known = try MembershipCache.load(paths), known.fleet == name, known.log.count == Int(known.seq) else {
            throw FleetError.notJoined(fleet: name, pinned: nil)
        }
        let wanted = MachineIdentity.normalized(given)
        func chosen(_ digest: String?) -> Bool {
            guard let digest, !wanted.isEmpty else { return false }
            return MachineIdentity.normalized(MachineIdentity.grouped(hex: hexBytes(digest))) == wanted
        }
        let key = keys.log(alarm.seq)
        if chosen(alarm.ours), alarm.seq <= known.seq {
            let mine = known.log[Int(alarm.seq - 1)]
            let there = try etcd { try kv.get(key) }
            let compare: EtcdCompare =
                there.map { .modRevision(key, equals: $0.modRevision) } ?? .createRevision(key, equals: 0)
            if there?.value != mine.bytes {
                let result = try etcd {
                    try kv.transaction(compare: [compare], success: [.put(key, value: mine.bytes)], failure: [])
                }
                guard result.succeeded else {
                    throw FleetError.unavailable(
                        fleet: name,
                        endpoints: settings.endpoints,
                        detail: "the log entry changed while it was put back: run it again"
                    )
                }
            }
            try FleetAlarm.clear(paths)
            return try membership().0
        }
        if chosen(alarm.digest) {
            var theirs = alarm.theirs
            if theirs == nil, let there = try etcd({ try kv.get(key) }),
                (try? SignedDocument(there.value, key: key, kind: Membership.entryType))?.digest == alarm.digest
            {
                theirs = there.value
            }
            guard let theirs else {
                throw FleetError.untrustedFleet(
                    fleet: name,
                    detail: "entry \(alarm.seq) with that fingerprint is not in etcd, so it cannot be checked here; "
                        + "resolve the fork on a member that verified it first"
                )
            }
            guard var before = known.replayed(upTo: alarm.seq - 1) else {
                throw FleetError.untrustedFleet(
                    fleet: name,
                    detail: "the entries before \(alarm.seq) kept here do not verify"
                )
            }
            try before.apply(EtcdKeyValue(key: key, value: theirs))
            try MembershipCache.replace(with: before, paths: paths)
            try FleetAlarm.clear(paths)
            return try membership().0
        }
        throw FleetError.noFork(fleet: name, given: given)
    }
}
