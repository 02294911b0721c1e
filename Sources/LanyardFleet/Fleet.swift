import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardStore

/// One machine's view of its fleet: the etcd cluster, this machine's name and identity, and the
/// operations on members and shared slots. Every write that replaces a shared credential is a
/// transaction that compares the revision it read (and, for refreshes, the lock's fence), so no
/// two writers can both win.
package struct Fleet: Sendable {
    package let settings: FleetSettings
    package let kv: any EtcdKV
    package let keys: FleetKeys
    package let paths: Paths
    /// The store that keeps this machine's identity (the backend new slots use).
    package let identityStore: any CredentialStore
    let clock: @Sendable () -> Date

    package init(settings: FleetSettings, kv: any EtcdKV, paths: Paths, identityStore: any CredentialStore,
                 clock: @escaping @Sendable () -> Date = { Date() }) {
        self.settings = settings
        self.kv = kv
        self.keys = FleetKeys(fleet: settings.name)
        self.paths = paths
        self.identityStore = identityStore
        self.clock = clock
    }

    package var name: String { settings.name }
    package var machine: String { settings.machine }

    /// Runs an etcd call, turning its failures into ``FleetError/unavailable``.
    package func etcd<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as EtcdError { throw unavailable(error) }
    }

    func unavailable(_ error: EtcdError) -> FleetError {
        .unavailable(fleet: name, endpoints: settings.endpoints, detail: error.userFacingDescription)
    }

    // MARK: Members

    /// This machine's identity; nil before `init` or `join` made one.
    package func identity() throws -> MachineIdentity? { try MachineIdentity.load(from: identityStore) }

    /// The identity, which must exist and be an approved member's.
    package func memberIdentity() throws -> MachineIdentity {
        guard let identity = try identity() else { throw FleetError.notMember(fleet: name, machine: machine, pending: false) }
        let members = try self.members()
        guard let me = members.first(where: { $0.machine == machine }), me.recipient == identity.recipient else {
            let pending = try etcd { try kv.get(keys.pending(machine)) } != nil
            throw FleetError.notMember(fleet: name, machine: machine, pending: pending)
        }
        return identity
    }

    /// Creates the fleet with this machine as its only member.
    package func create() throws -> FleetMember {
        let identity = try MachineIdentity.loadOrCreate(in: identityStore)
        let me = FleetMember(machine: machine, recipient: identity.recipient, addedAt: clock(), approvedBy: machine)
        let marker = JSONValue.object(["created_by": .string(machine), "created_at": .date(clock())])
        let result = try etcd {
            try kv.transaction(compare: [.createRevision(keys.created, equals: 0)],
                               success: [.put(keys.created, value: Array(marker.serialized().utf8)),
                                         .put(keys.member(machine), value: Array(me.jsonData()))],
                               failure: [])
        }
        guard result.succeeded else { throw FleetError.alreadyExists(fleet: name) }
        return me
    }

    /// Asks to join: writes this machine's recipient under `pending/` for a member to approve.
    package func requestJoin() throws -> FleetMember {
        guard try etcd({ try kv.get(keys.created) }) != nil else { throw FleetError.noSuchFleet(fleet: name) }
        let identity = try MachineIdentity.loadOrCreate(in: identityStore)
        if let existing = try members().first(where: { $0.machine == machine }) {
            guard existing.recipient == identity.recipient else {
                throw FleetError.corrupt(key: keys.member(machine), detail: "machine \(machine) is already a member with another identity: "
                                         + "remove it first (`lanyard fleet remove \(machine)` on a member) or choose another [fleet] machine name")
            }
            return existing
        }
        let request = FleetMember(machine: machine, recipient: identity.recipient, addedAt: clock(), approvedBy: nil)
        _ = try etcd { try kv.put(keys.pending(machine), value: Array(request.jsonData()), lease: 0) }
        return request
    }

    /// The approved members, by name.
    package func members() throws -> [FleetMember] { try records(under: keys.members) }

    /// The machines waiting for approval, by name.
    package func pendingMembers() throws -> [FleetMember] { try records(under: keys.pending) }

    private func records(under folder: String) throws -> [FleetMember] {
        let found = try etcd { try kv.range(folder, prefix: true) }
        return try found.kvs.map { try FleetMember.decode($0) }.sorted { $0.machine < $1.machine }
    }

    /// Approves a pending machine whose fingerprint the person checked, then re-encrypts every
    /// shared slot to the new set of members. - Returns: the slots re-encrypted.
    package func approve(machine other: String, fingerprint: String) throws -> (FleetMember, [Slot]) {
        let identity = try memberIdentity()
        guard let request = try etcd({ try kv.get(keys.pending(other)) }) else {
            if try members().contains(where: { $0.machine == other }) { return (try members().first { $0.machine == other }!, []) }
            throw FleetError.unknownMachine(fleet: name, machine: other)
        }
        var member = try FleetMember.decode(request)
        let given = fingerprint.uppercased().filter { $0 != "-" && $0 != " " }
        guard given == member.fingerprint.filter({ $0 != "-" }) else {
            throw FleetError.fingerprintMismatch(machine: other, expected: member.fingerprint, given: fingerprint)
        }
        member.approvedBy = machine
        member.addedAt = clock()
        let result = try etcd {
            try kv.transaction(compare: [.modRevision(request.key, equals: request.modRevision)],
                               success: [.put(keys.member(other), value: Array(member.jsonData())), .delete(request.key)],
                               failure: [])
        }
        guard result.succeeded else { throw FleetError.unknownMachine(fleet: name, machine: other) }
        return (member, try resealAll(identity: identity))
    }

    /// Removes a member (or a join request) and re-encrypts every shared slot without it.
    /// - Returns: the slots it could read, which should be refreshed so what it holds stops working.
    package func remove(machine other: String) throws -> [Slot] {
        let identity = try memberIdentity()
        let deleted = try etcd { try kv.delete(keys.member(other), prefix: false) + kv.delete(keys.pending(other), prefix: false) }
        guard deleted > 0 else { throw FleetError.unknownMachine(fleet: name, machine: other) }
        return try resealAll(identity: identity)
    }

    /// Re-encrypts each shared slot to the current members, each under its fleet lock.
    func resealAll(identity: MachineIdentity) throws -> [Slot] {
        let recipients = try members().map(\.recipient)
        var done: [Slot] = []
        for slot in try sharedSlots() {
            let lock = try lock(slot)
            defer { lock.release() }
            guard let current = try etcd({ try kv.get(keys.slot(slot)) }) else { continue }
            let credential = try SealedCredential.open(current.value, slot: slot, fleet: name, identity: identity)
            let sealed = try SealedCredential.seal(credential, slot: slot, to: recipients)
            let written = try etcd {
                try kv.transaction(compare: [lock.fence, .modRevision(current.key, equals: current.modRevision)],
                                   success: [.put(current.key, value: sealed)], failure: [])
            }
            if written.succeeded { done.append(slot) }
        }
        return done
    }

    // MARK: Shared slots

    /// The slots shared in the fleet.
    package func sharedSlots() throws -> [Slot] {
        let found = try etcd { try kv.range(keys.slots, EtcdRangeOptions(prefix: true, keysOnly: true)) }
        return found.kvs.compactMap { keys.name(of: $0.key, in: keys.slots).flatMap { try? Slot($0) } }
    }

    /// Shares `credential` as `slot`: encrypted to every member. - Returns: the revision written.
    package func share(_ slot: Slot, credential: Credential) throws -> Int64 {
        _ = try memberIdentity()
        let sealed = try SealedCredential.seal(credential, slot: slot, to: try members().map(\.recipient))
        let result = try etcd {
            try kv.transaction(compare: [.createRevision(keys.slot(slot), equals: 0)],
                               success: [.put(keys.slot(slot), value: sealed), .put(keys.refreshed(slot), value: refreshedNote())],
                               failure: [])
        }
        guard result.succeeded else { throw FleetError.alreadyShared(slot: slot, fleet: name) }
        return result.revision
    }

    /// Stops sharing `slot` in the fleet (every machine keeps its local copy).
    package func unshare(_ slot: Slot) throws {
        let deleted = try etcd { try kv.delete(keys.slot(slot), prefix: false) }
        _ = try? kv.delete(keys.refreshed(slot), prefix: false)
        guard deleted > 0 else { throw FleetError.notShared(slot: slot, fleet: name) }
    }

    /// The fleet's newest credential for `slot` and its revision, opened and checked against the
    /// slot's account; nil when the slot is not shared.
    package func newest(_ slot: Slot, identity: MachineIdentity, account: AccountInfo?, provider: String?) throws -> (Credential, Int64)? {
        guard let current = try etcd({ try kv.get(keys.slot(slot)) }) else { return nil }
        let credential = try SealedCredential.open(current.value, slot: slot, fleet: name, identity: identity, expected: account, provider: provider)
        return (credential, current.modRevision)
    }

    /// Writes a refreshed credential under `lock`, only if the fleet's copy is still the one read
    /// at `revision`. - Returns: the new revision, or nil when the fence or the revision failed.
    package func write(_ slot: Slot, credential: Credential, replacing revision: Int64, under lock: FleetLock) throws -> Int64? {
        let sealed = try SealedCredential.seal(credential, slot: slot, to: try members().map(\.recipient))
        let result = try etcd {
            try kv.transaction(compare: [lock.fence, .modRevision(keys.slot(slot), equals: revision)],
                               success: [.put(keys.slot(slot), value: sealed), .put(keys.refreshed(slot), value: refreshedNote())],
                               failure: [])
        }
        return result.succeeded ? result.revision : nil
    }

    /// Writes tokens that replaced the fleet's copy (their credential rotated away from its refresh
    /// token: a refresh whose fleet write never landed) without waiting for the lock: only the copy
    /// read at `revision` is replaced, and its refresh token is already spent at the provider, so
    /// nothing newer can be lost, while every moment it stays in the fleet another machine may
    /// present it. - Returns: the new revision, or nil when the fleet's copy changed meanwhile.
    package func writeSuccessor(_ slot: Slot, credential: Credential, replacing revision: Int64) throws -> Int64? {
        let sealed = try SealedCredential.seal(credential, slot: slot, to: try members().map(\.recipient))
        let result = try etcd {
            try kv.transaction(compare: [.modRevision(keys.slot(slot), equals: revision)],
                               success: [.put(keys.slot(slot), value: sealed), .put(keys.refreshed(slot), value: refreshedNote())],
                               failure: [])
        }
        return result.succeeded ? result.revision : nil
    }

    /// Puts a new sign-in in place of whatever the fleet holds for `slot` (its session may have
    /// died everywhere), under `lock`. Another writer can slip in between the read and the write
    /// only without the lock (``writeSuccessor(_:credential:replacing:)``): then it reads again.
    /// - Returns: the revision written; nil when the slot is no longer shared.
    package func replace(_ slot: Slot, credential: Credential, under lock: FleetLock) throws -> Int64? {
        for _ in 0..<3 {
            guard let current = try etcd({ try kv.get(keys.slot(slot)) }) else { return nil }
            if let written = try write(slot, credential: credential, replacing: current.modRevision, under: lock) { return written }
            guard lock.held() else { throw FleetError.lockLost(slot: slot, fleet: name) }
        }
        throw FleetError.lockLost(slot: slot, fleet: name)
    }

    /// ``write(_:credential:replacing:under:)`` for tokens the server just issued, which must
    /// not be lost: while etcd cannot answer (its leader was killed, an election is under way) it
    /// tries again for up to `patience` seconds as long as the lock is held; a write whose answer
    /// was lost but that landed is recognised by reading the fleet's copy back.
    /// - Returns: the revision written, or nil when the fence or the revision failed.
    package func writeRefreshed(_ slot: Slot, credential: Credential, replacing revision: Int64, under lock: FleetLock,
                                identity: MachineIdentity, patience: TimeInterval = 15) throws -> Int64? {
        let deadline = Date().addingTimeInterval(patience)
        var attempt = 0
        while true {
            do {
                if let written = try write(slot, credential: credential, replacing: revision, under: lock) { return written }
                // The comparison failed: an earlier attempt of ours may have landed.
                if let current = try etcd({ try kv.get(keys.slot(slot)) }),
                   let opened = try? SealedCredential.open(current.value, slot: slot, fleet: name, identity: identity),
                   opened.tokens.refreshToken == credential.tokens.refreshToken, opened.tokens.accessToken == credential.tokens.accessToken {
                    return current.modRevision
                }
                return nil
            } catch let error as FleetError {
                guard case .unavailable = error, Date() < deadline, lock.held() else { throw error }
                attempt += 1
                usleep(useconds_t(min(2, 0.2 * Double(attempt)) * 1_000_000))
            }
        }
    }

    /// `refreshed/SLOT`: who wrote the slot last, and when (no secret).
    func refreshedNote() -> [UInt8] {
        Array(JSONValue.object(["machine": .string(machine), "at": .date(clock())]).serialized().utf8)
    }

    /// The lease a refresh lock is taken with: the configured `lock-ttl`, else long enough for the
    /// refresh request's hard limit (`httpTimeout`) twice over plus ten seconds, so a live request
    /// never outlasts its lock.
    package static func lockTTL(settings: FleetSettings, httpTimeout: TimeInterval) -> Int64 {
        Int64((settings.lockTTL ?? (2 * httpTimeout + 10)).rounded(.up))
    }

    /// Takes `slot`'s fleet lock, waiting as long as a holder may keep it (its lease's TTL), or at
    /// most `patience` seconds.
    package func lock(_ slot: Slot, httpTimeout: TimeInterval = 30, patience: TimeInterval? = nil) throws -> FleetLock {
        let ttl = Self.lockTTL(settings: settings, httpTimeout: httpTimeout)
        let longest = TimeInterval(ttl) + 15
        do {
            return try FleetLock.acquire(kv, folder: keys.locks(slot), ttl: ttl, timeout: min(longest, patience ?? longest))
        } catch let timeout as FleetLockTimeout {
            throw FleetError.lockTimeout(slot: slot, fleet: name, seconds: timeout.seconds)
        } catch let error as EtcdError {
            throw unavailable(error)
        }
    }
}

extension Fleet {
    /// Who last wrote `slot` in the fleet, and when.
    package func refreshedNote(_ slot: Slot) throws -> (machine: String, at: Date?)? {
        guard let kv = try etcd({ try self.kv.get(keys.refreshed(slot)) }),
              let fields = try? JSONFields(try JSONValue.parse(Data(kv.value))),
              let machine = try? fields.string("machine") else { return nil }
        return (machine, try? fields.optionalDate("at"))
    }

    /// The machine whose agent leads (the oldest key under `leader/`), nil when no agent runs.
    package func leaderName() throws -> String? {
        let first = try etcd { try kv.range(keys.leader, EtcdRangeOptions(prefix: true, limit: 1, sortByCreateRevision: true)) }
        return first.kvs.first.map { String(decoding: $0.value, as: UTF8.self) }
    }
}
