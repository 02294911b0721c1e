import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardStore

/// One machine's view of its fleet: the etcd cluster, this machine's name and keys, and the
/// operations on members and shared slots.
///
/// etcd is a transport, never an authority: membership comes from the signed log this machine
/// verified from its pin (``Membership``), and a shared value counts only when a verified member
/// signed it (``SealedCredential``). Every write that replaces a shared value is a transaction
/// that compares the revision it read (and, for refreshes, the lock's fence), so no two writers
/// can both win.
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

    // MARK: Membership

    /// This machine's identity; nil before `init` or `join` made one.
    package func identity() throws -> MachineIdentity? { try MachineIdentity.load(from: identityStore) }

    /// The membership this machine verified, brought up to date from etcd's log: the entries
    /// after the newest one verified here are checked and applied in order; the first that does
    /// not verify, and every one after it, are returned as damaged (and ignored).
    package func membership() throws -> (Membership, damaged: [DamagedEntry]) {
        guard var known = try MembershipCache.load(paths), known.fleet == name else {
            throw FleetError.notJoined(fleet: name, pinned: (try? MembershipCache.load(paths))??.fleet)
        }
        let found = try etcd { try kv.range(keys.log, EtcdRangeOptions(prefix: true)) }
        var damaged: [DamagedEntry] = []
        for entry in found.kvs {
            guard let seq = Membership.number(of: entry.key, in: keys) else {
                damaged.append(DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: "it is not a numbered entry"))
                continue
            }
            if seq <= known.seq { continue }
            guard damaged.isEmpty, seq == known.seq + 1 else {
                damaged.append(DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: "it follows a missing or damaged entry"))
                continue
            }
            do { try known.apply(entry) } catch {
                damaged.append(DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: error.detail))
            }
        }
        return (try MembershipCache.save(known, paths: paths), damaged)
    }

    /// This machine's identity and the verified membership, which must hold it.
    package func memberIdentity() throws -> (MachineIdentity, Membership) {
        guard let identity = try identity() else { throw FleetError.notMember(fleet: name, machine: machine, pending: false) }
        let (membership, _) = try membership()
        guard let me = membership.member(holding: identity), me.machine == machine else {
            let pending = try etcd { try kv.get(keys.pending(machine)) } != nil
            throw FleetError.notMember(fleet: name, machine: machine, pending: pending)
        }
        return (identity, membership)
    }

    /// Creates the fleet with this machine as its only member: the genesis entry, pinned here.
    package func create() throws -> (FleetMember, Membership) {
        let identity = try MachineIdentity.loadOrCreate(in: identityStore)
        let now = clock()
        let me = FleetMember(machine: machine, recipient: identity.recipient, signingKey: identity.signingKey, addedAt: now, approvedBy: machine)
        let genesis = Membership.entry(fleet: name, seq: 1, prev: "", change: .genesis(me), signer: machine, at: now, key: identity.signing)
        let marker = JSONValue.object(["created_by": .string(machine), "created_at": .date(now)])
        let result = try etcd {
            try kv.transaction(compare: [.createRevision(keys.created, equals: 0), .createRevision(keys.log(1), equals: 0)],
                               success: [.put(keys.created, value: Array(marker.serialized().utf8)), .put(keys.log(1), value: genesis)],
                               failure: [])
        }
        guard result.succeeded else { throw FleetError.alreadyExists(fleet: name) }
        try? MembershipCache.remove(paths)
        let membership = try MembershipCache.save(try Membership.genesis(EtcdKeyValue(key: keys.log(1), value: genesis), fleet: name, pin: nil), paths: paths)
        return (me, membership)
    }

    /// The fleet's fingerprint as etcd serves it now (unverified: for a person to compare with a
    /// member's screen), nil when the fleet has no genesis.
    package func advertisedFingerprint() throws -> String? {
        guard let genesis = try etcd({ try kv.get(keys.log(1)) }) else { return nil }
        return Membership.fingerprint(pin: try Membership.genesis(genesis, fleet: name, pin: nil).pin)
    }

    /// Asks to join: pins the fleet's genesis once the person confirmed its fingerprint (as a
    /// member's `fleet status` shows it), then writes this machine's signed request under
    /// `pending/` for a member to approve.
    package func requestJoin(fleetFingerprint given: String) throws -> (FleetMember, Membership) {
        guard let genesis = try etcd({ try kv.get(keys.log(1)) }) else { throw FleetError.noSuchFleet(fleet: name) }
        let founded = try Membership.genesis(genesis, fleet: name, pin: nil)
        guard MachineIdentity.normalized(given) == MachineIdentity.normalized(founded.fingerprint) else {
            throw FleetError.fleetFingerprintMismatch(fleet: name, given: given)
        }
        if let pinned = try MembershipCache.load(paths), pinned.fleet == name, pinned.pin != founded.pin {
            throw FleetError.untrustedFleet(fleet: name, detail: "this machine pinned another genesis for it (fingerprint \(pinned.fingerprint))")
        }
        if (try MembershipCache.load(paths))?.fleet != name {
            try? MembershipCache.remove(paths)
            try MembershipCache.save(founded, paths: paths)
        }
        let identity = try MachineIdentity.loadOrCreate(in: identityStore)
        let (membership, _) = try membership()
        if let me = membership.member(holding: identity) { return (me, membership) }
        if let other = membership.member(machine) {
            throw FleetError.corrupt(key: keys.log, detail: "machine \(other.machine) is already a member with another identity: "
                                     + "remove it first (`lanyard fleet remove \(machine)` on a member) or choose another [fleet] machine name")
        }
        let at = clock()
        _ = try etcd { try kv.put(keys.pending(machine), value: JoinRequest.make(fleet: name, machine: machine, identity: identity, at: at), lease: 0) }
        return (FleetMember(machine: machine, recipient: identity.recipient, signingKey: identity.signingKey, addedAt: at, approvedBy: nil), membership)
    }

    /// The approved members, by name (verified).
    package func members() throws -> [FleetMember] { try membership().0.members }

    /// The join requests that verify, by name, and the keys under `pending/` that do not.
    package func pendingRequests() throws -> ([FleetMember], damaged: [DamagedEntry]) {
        let found = try etcd { try kv.range(keys.pending, EtcdRangeOptions(prefix: true)) }
        var requests: [FleetMember] = []
        var damaged: [DamagedEntry] = []
        for kv in found.kvs {
            do { requests.append(try JoinRequest.open(kv, fleet: name, machine: keys.name(of: kv.key, in: keys.pending))) } catch {
                damaged.append(DamagedEntry(key: kv.key, modRevision: kv.modRevision, problem: error.detail))
            }
        }
        return (requests.sorted { $0.machine < $1.machine }, damaged)
    }

    /// Approves a pending machine whose fingerprint the person checked on its screen: a signed
    /// `add` entry, then every shared slot re-sealed to the new membership.
    /// - Returns: the member and the slots re-sealed.
    package func approve(machine other: String, fingerprint: String) throws -> (FleetMember, [Slot]) {
        let (identity, current) = try memberIdentity()
        guard let request = try etcd({ try kv.get(keys.pending(other)) }) else {
            if let member = current.member(other) { return (member, []) }
            throw FleetError.unknownMachine(fleet: name, machine: other)
        }
        let asked = try JoinRequest.open(request, fleet: name, machine: other)
        guard MachineIdentity.normalized(fingerprint) == MachineIdentity.normalized(asked.fingerprint) else {
            throw FleetError.fingerprintMismatch(machine: other, given: fingerprint)
        }
        let membership = try append(.add(asked), identity: identity, also: [.delete(request.key)])
        guard let member = membership.member(other) else { throw FleetError.unknownMachine(fleet: name, machine: other) }
        return (member, try resealAll(identity: identity))
    }

    /// Removes a member (a signed `remove` entry) or a join request, and re-seals every shared
    /// slot without it. - Returns: the slots it could read.
    package func remove(machine other: String) throws -> [Slot] {
        let (identity, current) = try memberIdentity()
        let pendingDeleted = try etcd { try kv.delete(keys.pending(other), prefix: false) }
        guard current.member(other) != nil else {
            guard pendingDeleted > 0 else { throw FleetError.unknownMachine(fleet: name, machine: other) }
            return []
        }
        _ = try append(.remove(other), identity: identity, also: [])
        return try resealAll(identity: identity)
    }

    /// Appends a signed entry to the membership log after the newest verified one (in place of a
    /// damaged entry there, if any), trying again when another member appended first.
    func append(_ change: Membership.Change, identity: MachineIdentity, also: [EtcdOperation]) throws -> Membership {
        for _ in 0..<5 {
            let (current, damaged) = try membership()
            switch change {
            case .add(let m) where current.member(m.machine) != nil: return current
            case .remove(let machine) where current.member(machine) == nil: return current
            default: break
            }
            let seq = current.seq + 1
            let key = keys.log(seq)
            let entry = Membership.entry(fleet: name, seq: seq, prev: current.head, change: change, signer: machine, at: clock(), key: identity.signing)
            let compare: EtcdCompare = damaged.first(where: { $0.key == key }).map { .modRevision(key, equals: $0.modRevision) }
                ?? .createRevision(key, equals: 0)
            let result = try etcd { try kv.transaction(compare: [compare], success: [.put(key, value: entry)] + also, failure: []) }
            guard result.succeeded else { continue }
            var next = current
            try next.apply(EtcdKeyValue(key: key, value: entry, modRevision: result.revision))
            return try MembershipCache.save(next, paths: paths)
        }
        throw FleetError.unavailable(fleet: name, endpoints: settings.endpoints, detail: "the membership log kept changing under this write")
    }

    /// Re-seals each shared slot to the current members, each under its fleet lock, as a new
    /// generation (a tombstone stays one).
    func resealAll(identity: MachineIdentity) throws -> [Slot] {
        var done: [Slot] = []
        for slot in try sharedSlots() {
            let lock = try lock(slot)
            defer { lock.release() }
            let (_, membership) = try memberIdentity()
            guard let current = try newest(slot, identity: identity, membership: membership), let credential = current.credential else { continue }
            if let written = try write(slot, credential: credential, replacing: current, membership: membership, identity: identity, fence: lock.fence) {
                done.append(slot)
                // This machine has seen the new generation (a sign-in written here later must go above it).
                if var state = SharedSlotState.loadIfReadable(slot, paths: paths), state.fleet == name, state.generation < written.generation {
                    state.generation = written.generation
                    try state.save(slot, paths: paths)
                }
            }
        }
        return done
    }

    // MARK: Shared slots

    /// The slots with a value in the fleet (tombstones included).
    package func sharedSlots() throws -> [Slot] {
        let found = try etcd { try kv.range(keys.slots, EtcdRangeOptions(prefix: true, keysOnly: true)) }
        return found.kvs.compactMap { keys.name(of: $0.key, in: keys.slots).flatMap { try? Slot($0) } }
    }

    /// The fleet's value for `slot`, verified (``SealedCredential/open``); nil when etcd has none.
    package func newest(_ slot: Slot, identity: MachineIdentity, membership: Membership, account: AccountInfo? = nil,
                        provider: String? = nil) throws -> SharedValue? {
        guard let current = try etcd({ try kv.get(keys.slot(slot)) }) else { return nil }
        return try SealedCredential.open(current, slot: slot, fleet: name, membership: membership, identity: identity,
                                         expected: account, provider: provider)
    }

    /// Shares `credential` as `slot`: generation 1, or the one after a tombstone the slot left.
    /// - Returns: the value written.
    package func share(_ slot: Slot, credential: Credential) throws -> SharedValue {
        let (identity, membership) = try memberIdentity()
        let existing = try etcd { try kv.get(keys.slot(slot)) }
        var generation: Int64 = 1
        var compare = EtcdCompare.createRevision(keys.slot(slot), equals: 0)
        if let existing {
            // A live value is a slot already shared; a tombstone (or a value no member signed,
            // which is no value) is replaced.
            let opened = try? SealedCredential.open(existing, slot: slot, fleet: name, membership: membership, identity: identity)
            if let opened, opened.credential != nil { throw FleetError.alreadyShared(slot: slot, fleet: name) }
            generation = (opened?.generation ?? 0) + 1
            compare = .modRevision(existing.key, equals: existing.modRevision)
        }
        let sealed = try SealedCredential.seal(credential, slot: slot, fleet: name, generation: generation, membership: membership,
                                               writer: identity, machine: machine)
        let result = try etcd {
            try kv.transaction(compare: [compare], success: [.put(keys.slot(slot), value: sealed), .delete(keys.intent(slot)),
                                                             .put(keys.refreshed(slot), value: refreshedNote())], failure: [])
        }
        guard result.succeeded else { throw FleetError.alreadyShared(slot: slot, fleet: name) }
        return SharedValue(content: .credential(credential), generation: generation, writer: machine, modRevision: result.revision)
    }

    /// Stops sharing `slot` under `lock`: a signed tombstone replaces the value, so every other
    /// machine learns that the live credential stayed here. - Returns: the tombstone written.
    package func unshare(_ slot: Slot, under lock: FleetLock) throws -> SharedValue {
        let (identity, membership) = try memberIdentity()
        guard let current = try newest(slot, identity: identity, membership: membership), current.credential != nil else {
            throw FleetError.notShared(slot: slot, fleet: name)
        }
        let tombstone = try SealedCredential.seal(nil, slot: slot, fleet: name, generation: current.generation + 1, membership: membership,
                                                  writer: identity, machine: machine)
        let result = try etcd {
            try kv.transaction(compare: [lock.fence, .modRevision(keys.slot(slot), equals: current.modRevision)],
                               success: [.put(keys.slot(slot), value: tombstone), .delete(keys.intent(slot)),
                                         .put(keys.refreshed(slot), value: refreshedNote())], failure: [])
        }
        guard result.succeeded else { throw FleetError.lockLost(slot: slot, fleet: name) }
        return SharedValue(content: .tombstone, generation: current.generation + 1, writer: machine, modRevision: result.revision)
    }

    /// Writes `credential` as the generation after `replacing`, only if the fleet's value is still
    /// the one read (its revision) and, with `fence`, the lock is still ours; the refresh intent
    /// goes with it. - Returns: the value written, or nil when a comparison failed.
    package func write(_ slot: Slot, credential: Credential, replacing: SharedValue, membership: Membership, identity: MachineIdentity,
                       fence: EtcdCompare?) throws -> SharedValue? {
        let generation = replacing.generation + 1
        let sealed = try SealedCredential.seal(credential, slot: slot, fleet: name, generation: generation, membership: membership,
                                               writer: identity, machine: machine)
        let result = try etcd {
            try kv.transaction(compare: (fence.map { [$0] } ?? []) + [.modRevision(keys.slot(slot), equals: replacing.modRevision)],
                               success: [.put(keys.slot(slot), value: sealed), .delete(keys.intent(slot)),
                                         .put(keys.refreshed(slot), value: refreshedNote())], failure: [])
        }
        return result.succeeded ? SharedValue(content: .credential(credential), generation: generation, writer: machine, modRevision: result.revision) : nil
    }

    /// Records, under `lock`, that this machine is about to present the refresh token of
    /// `current` (see ``RefreshIntent``). - Returns: false when the fleet's value or the lock changed.
    package func writeIntent(_ slot: Slot, current: SharedValue, refreshToken: String, identity: MachineIdentity, under lock: FleetLock) throws -> Bool {
        let intent = RefreshIntent.make(fleet: name, slot: slot, machine: machine, token: TokenFingerprint.of(refreshToken),
                                        generation: current.generation, at: clock(), identity: identity)
        let result = try etcd {
            try kv.transaction(compare: [lock.fence, .modRevision(keys.slot(slot), equals: current.modRevision)],
                               success: [.put(keys.intent(slot), value: intent)], failure: [])
        }
        return result.succeeded
    }

    /// The refresh intent recorded for `slot`, nil when there is none that verifies.
    package func intent(_ slot: Slot, membership: Membership) throws -> RefreshIntent? {
        guard let kv = try etcd({ try self.kv.get(keys.intent(slot)) }) else { return nil }
        return RefreshIntent.open(kv, slot: slot, fleet: name, membership: membership)
    }

    /// Puts a new sign-in in place of whatever the fleet holds for `slot` (its session may have
    /// died everywhere, or its value was deleted or damaged), under `lock`, as a generation above
    /// both the fleet's and `seen` (the newest this machine saw). - Returns: the value written;
    /// nil when the slot was unshared (a tombstone).
    package func replace(_ slot: Slot, credential: Credential, seen: Int64, under lock: FleetLock) throws -> SharedValue? {
        let (identity, membership) = try memberIdentity()
        for _ in 0..<3 {
            var current = SharedValue(content: .tombstone, generation: seen, writer: "", modRevision: 0)
            if let raw = try etcd({ try kv.get(keys.slot(slot)) }) {
                current.modRevision = raw.modRevision
                // A value no member signed is no value: replaced like a missing one.
                if let opened = try? SealedCredential.open(raw, slot: slot, fleet: name, membership: membership, identity: identity) {
                    if opened.credential == nil { return nil }
                    current.generation = max(seen, opened.generation)
                }
            }
            if let written = try write(slot, credential: credential, replacing: current, membership: membership, identity: identity, fence: lock.fence) {
                return written
            }
            guard lock.held() else { throw FleetError.lockLost(slot: slot, fleet: name) }
        }
        throw FleetError.lockLost(slot: slot, fleet: name)
    }

    /// ``write(_:credential:replacing:membership:identity:fence:)`` for tokens the server just
    /// issued, which must not be lost: while etcd cannot answer (an election is under way) it
    /// tries again for up to `patience` seconds as long as the lock is held; a write whose answer
    /// was lost but that landed is recognised by reading the fleet's value back.
    package func writeRefreshed(_ slot: Slot, credential: Credential, replacing: SharedValue, under lock: FleetLock,
                                identity: MachineIdentity, membership: Membership, patience: TimeInterval = 15) throws -> SharedValue? {
        let deadline = ContinuousClock.now + .seconds(patience)
        var attempt = 0
        var base = replacing
        while true {
            do {
                if let written = try write(slot, credential: credential, replacing: base, membership: membership, identity: identity,
                                           fence: lock.fence) { return written }
                // The comparison failed: an earlier attempt of ours may have landed.
                guard let current = try? newest(slot, identity: identity, membership: membership) else { return nil }
                if current.writer == machine, current.credential?.tokens.refreshToken == credential.tokens.refreshToken,
                   current.credential?.tokens.accessToken == credential.tokens.accessToken {
                    return current
                }
                // The value changed but still holds the refresh token this refresh just spent (the
                // same value put again, by anyone who can write to etcd): nothing newer exists,
                // and leaving it would let another machine present the spent token. Replace it.
                if let held = current.credential?.tokens.refreshToken, credential.hasSpent(refreshToken: held),
                   current.generation >= replacing.generation, current.modRevision != base.modRevision, lock.held() {
                    base = current
                    continue
                }
                return nil
            } catch let error as FleetError {
                guard case .unavailable = error, ContinuousClock.now < deadline, lock.held() else { throw error }
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
    /// Who last wrote `slot` in the fleet, and when (informative: etcd says it, no one signs it;
    /// the name is shown only when it is a member's).
    package func refreshedNote(_ slot: Slot, membership: Membership) throws -> (machine: String, at: Date?)? {
        guard let kv = try etcd({ try self.kv.get(keys.refreshed(slot)) }),
              let fields = try? JSONFields(try JSONValue.parse(Data(kv.value))),
              let machine = try? fields.machineName("machine"), membership.member(machine) != nil else { return nil }
        return (machine, (try? fields.optionalDate("at")) ?? nil)
    }

    /// The machine whose agent leads (the oldest key under `leader/`), nil when no agent runs or
    /// the value there is not a member's name.
    package func leaderName(membership: Membership) throws -> String? {
        let first = try etcd { try kv.range(keys.leader, EtcdRangeOptions(prefix: true, limit: 1, sortByCreateRevision: true)) }
        return first.kvs.first.map { String(decoding: $0.value, as: UTF8.self) }.flatMap { membership.member($0)?.machine }
    }
}
