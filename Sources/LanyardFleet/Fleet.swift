import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore
import LanyardSupport

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

    package init(
        settings: FleetSettings,
        kv: any EtcdKV,
        paths: Paths,
        identityStore: any CredentialStore,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
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
        .unavailable(
            fleet: name,
            endpoints: settings.endpoints,
            detail: error.userFacingDescription,
            cause: ErrorCause(error)
        )
    }

    // MARK: Membership

    /// This machine's identity; nil before `init` or `join` made one.
    package func identity() throws -> MachineIdentity? { try MachineIdentity.load(from: identityStore) }

    /// The membership this machine verified, brought up to date from etcd's log: the entries
    /// after the newest one verified here are checked and applied in order; the first that does
    /// not verify, and every one after it, are returned as damaged (and ignored).
    ///
    /// The entries verified before are compared too, never skipped: one etcd lost is put back
    /// (it is signed data; any member may restore it), one that does not verify is replaced by
    /// the verified one, and a *different entry that verifies* at a known number is a fork,
    /// raised as a ``FleetAlarm`` that stops every write until a person resolves it.
    package func membership() throws -> (Membership, damaged: [DamagedEntry]) {
        guard var known = try MembershipCache.load(paths), known.fleet == name else {
            throw FleetError.notJoined(fleet: name, pinned: (try? MembershipCache.load(paths))??.fleet)
        }
        let found = try etcd { try kv.range(keys.log, EtcdRangeOptions(prefix: true)) }
        var damaged: [DamagedEntry] = []
        var byNumber: [Int64: EtcdKeyValue] = [:]
        for entry in found.kvs {
            guard let seq = Membership.number(of: entry.key, in: keys) else {
                damaged.append(
                    DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: "it is not a numbered entry")
                )
                continue
            }
            byNumber[seq] = entry
        }
        if known.log.isEmpty { known.log = relearnedLog(known, byNumber) }
        if known.log.count == Int(known.seq) {
            for seq in 1...known.seq {
                let mine = known.log[Int(seq - 1)]
                guard let entry = byNumber[seq] else {
                    restore(mine, at: seq, over: nil)
                    continue
                }
                if entry.value == mine.bytes { continue }
                if let problem = try compare(entry, at: seq, with: known) {
                    damaged.append(DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: problem))
                }
            }
        }
        var broken = false
        for seq in byNumber.keys.sorted() where seq > known.seq {
            let entry = byNumber[seq]!
            guard !broken, seq == known.seq + 1 else {
                damaged.append(
                    DamagedEntry(
                        key: entry.key,
                        modRevision: entry.modRevision,
                        problem: "it follows a missing or damaged entry"
                    )
                )
                continue
            }
            do { try known.apply(entry) } catch {
                broken = true
                damaged.append(DamagedEntry(key: entry.key, modRevision: entry.modRevision, problem: error.detail))
            }
        }
        let saved = try MembershipCache.save(known, paths: paths)
        try settleAlarm(saved)
        return (saved, damaged)
    }

    /// For a cache written before entries were kept: the entries up to its head, verified again
    /// from the pin, when etcd still holds them all and they lead to the head verified here.
    private func relearnedLog(_ known: Membership, _ byNumber: [Int64: EtcdKeyValue]) -> [Membership.VerifiedEntry] {
        guard let first = byNumber[1], var m = try? Membership.genesis(first, fleet: name, pin: known.pin) else {
            return []
        }
        while m.seq < known.seq {
            guard let next = byNumber[m.seq + 1], (try? m.apply(next)) != nil else { return [] }
        }
        return m.head == known.head ? m.log : []
    }

    /// An entry at number `seq`, which this machine verified as another: nil when it is the same
    /// entry (other bytes of one body), else what is wrong. One that does not verify is replaced
    /// by the verified one; one that verifies is a fork (raised, and left for a person).
    private func compare(_ entry: EtcdKeyValue, at seq: Int64, with known: Membership) throws -> String? {
        let mine = known.log[Int(seq - 1)]
        guard let doc = try? SignedDocument(entry.value, key: entry.key, kind: Membership.entryType) else {
            restore(mine, at: seq, over: entry)
            return "it is not the entry verified here, and not a signed entry (the verified one was put back)"
        }
        if doc.digest == mine.digest { return nil }
        let verifies: Bool
        if seq == 1 {
            verifies = false  // the genesis is pinned: another one is no fleet of ours
        } else if var before = known.replayed(upTo: seq - 1) {
            verifies = (try? before.apply(entry)) != nil
        } else {
            verifies = false
        }
        guard verifies else {
            restore(mine, at: seq, over: entry)
            return "it is not the entry verified here and does not verify (the verified one was put back)"
        }
        let signer = (try? doc.fields.machineName("signer")) ?? "?"
        // Signed by a machine an entry verified here removed (at this number or before): its
        // signature counts for nothing from its removal on, so this is damage, not a fork (else a
        // removed machine could stop every member that saw its removal).
        if known.removals.contains(where: { $0.seq <= seq && $0.machine == signer }) {
            restore(mine, at: seq, over: entry)
            return "it is signed by \(signer), whom entry \(seq) or an earlier "
                + "one verified here removed (the verified one was put back)"
        }
        try FleetAlarm.raise(
            FleetAlarm(
                fleet: name,
                kind: .forked,
                seq: seq,
                digest: doc.digest,
                ours: mine.digest,
                theirs: entry.value,
                source: entry.key,
                signer: signer,
                detectedAt: clock()
            ),
            paths: paths
        )
        return "a fork: it verifies, signed by \(signer), "
            + "but entry \(seq) verified here is another; nothing is written until "
            + "a person resolves it (`lanyard fleet resolve`)"
    }

    /// Puts a verified entry back in etcd where it is missing (`over` nil) or damaged, fenced so
    /// that nothing written meanwhile is replaced. Best effort: the next reader tries again.
    private func restore(_ entry: Membership.VerifiedEntry, at seq: Int64, over damaged: EtcdKeyValue?) {
        let key = keys.log(seq)
        let compare: EtcdCompare =
            damaged.map { .modRevision(key, equals: $0.modRevision) } ?? .createRevision(key, equals: 0)
        _ = try? kv.transaction(compare: [compare], success: [.put(key, value: entry.bytes)], failure: [])
    }

    /// Clears a ``FleetAlarm/Kind/behind`` alarm once the log here reached the entry it named
    /// (or turns it into a fork when the entry verified there is another).
    private func settleAlarm(_ membership: Membership) throws {
        guard let alarm = try FleetAlarm.load(paths, fleet: name), alarm.kind == .behind,
            let mine = membership.digest(at: alarm.seq)
        else { return }
        if mine == alarm.digest {
            try FleetAlarm.clear(paths)
        } else {
            var fork = alarm
            fork.kind = .forked
            fork.ours = mine
            fork.detectedAt = clock()
            try FleetAlarm.replace(with: fork, paths: paths)
        }
    }

    /// The membership to seal to and sign for, read afresh from the log, checked: no
    /// ``FleetAlarm`` stands. Every write for the fleet goes through it, so nothing is sealed to a
    /// membership older than the evidence this machine has seen.
    package func sealingMembership() throws -> Membership {
        let (membership, _) = try membership()
        if let alarm = try FleetAlarm.load(paths, fleet: name) { throw alarm.error }
        return membership
    }

    /// `error`, after raising the alarm it is evidence of (a member's value, intent or tombstone
    /// naming a membership entry this machine cannot verify, or another one than it verified).
    ///
    /// A value that is such evidence was signed by a member (the signature is checked before the
    /// membership it names), so its generation is one this machine has now seen: an older value
    /// put back afterwards is refused as a rollback, never refreshed with its (spent) token.
    func evidence(_ thrown: any Error, value: EtcdKeyValue? = nil, slot: Slot? = nil) -> any Error {
        guard let error = thrown as? FleetError else { return thrown }
        switch error {
        case .membershipBehind, .forked:
            if let value, let slot,
                let doc = try? SignedDocument(value.value, key: value.key, kind: SealedCredential.type),
                let generation = try? doc.fields.counter("generation"),
                var state = SharedSlotState.loadIfReadable(slot, paths: paths), state.fleet == name,
                max(state.generation, state.evidence) < generation
            {
                state.evidence = generation
                try? state.save(slot, paths: paths)
            }
        default: break
        }
        let alarm: FleetAlarm
        switch error {
        case .membershipBehind(let fleet, let seq, let digest, let signer, let source):
            alarm = FleetAlarm(
                fleet: fleet,
                kind: .behind,
                seq: seq,
                digest: digest,
                source: source,
                signer: signer,
                detectedAt: clock()
            )
        case .forked(let fleet, let seq, let digest, let ours, let signer, let source):
            alarm = FleetAlarm(
                fleet: fleet,
                kind: .forked,
                seq: seq,
                digest: digest,
                ours: ours,
                source: source,
                signer: signer,
                detectedAt: clock()
            )
        default:
            return error
        }
        return ((try? FleetAlarm.raise(alarm, paths: paths)) ?? alarm).error
    }

    /// The alarm standing for this fleet, if any (for `fleet status` and `doctor`).
    package func alarm() -> FleetAlarm? { (try? FleetAlarm.load(paths, fleet: name)) ?? nil }

    /// This machine's identity and the verified membership, which must hold it.
    package func memberIdentity() throws -> (MachineIdentity, Membership) {
        guard let identity = try identity() else {
            throw FleetError.notMember(fleet: name, machine: machine, pending: false)
        }
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
        var me = FleetMember(
            machine: machine,
            recipient: identity.recipient,
            signingKey: identity.signingKey,
            addedAt: now,
            approvedBy: machine
        )
        me.etcdUser = settings.user
        let genesis = Membership.entry(
            fleet: name,
            seq: 1,
            prev: "",
            change: .genesis(me),
            signer: machine,
            at: now,
            key: identity.signing
        )
        let marker = JSONValue.object(["created_by": .string(machine), "created_at": .date(now)])
        let result = try etcd {
            try kv.transaction(
                compare: [.createRevision(keys.created, equals: 0), .createRevision(keys.log(1), equals: 0)],
                success: [
                    .put(keys.created, value: Array(marker.serialized().utf8)), .put(keys.log(1), value: genesis),
                ],
                failure: []
            )
        }
        guard result.succeeded else { throw FleetError.alreadyExists(fleet: name) }
        try? MembershipCache.remove(paths)
        let membership = try MembershipCache.save(
            try Membership.genesis(EtcdKeyValue(key: keys.log(1), value: genesis), fleet: name, pin: nil),
            paths: paths
        )
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
            throw FleetError.untrustedFleet(
                fleet: name,
                detail: "this machine pinned another genesis for it (fingerprint \(pinned.fingerprint))"
            )
        }
        if (try MembershipCache.load(paths))?.fleet != name {
            try? MembershipCache.remove(paths)
            try MembershipCache.save(founded, paths: paths)
        }
        let identity = try MachineIdentity.loadOrCreate(in: identityStore)
        let (membership, _) = try membership()
        if let me = membership.member(holding: identity) { return (me, membership) }
        if let other = membership.member(machine) {
            throw FleetError.corrupt(
                key: keys.log,
                detail: "machine \(other.machine) is already a member with another identity: "
                    + "remove it first (`lanyard fleet remove \(machine)` on a member) "
                    + "or choose another [fleet] machine name"
            )
        }
        let at = clock()
        _ = try etcd {
            try kv.put(
                keys.pending(machine),
                value: JoinRequest.make(
                    fleet: name,
                    machine: machine,
                    identity: identity,
                    etcdUser: settings.user,
                    at: at
                ),
                lease: 0
            )
        }
        return (
            FleetMember(
                machine: machine,
                recipient: identity.recipient,
                signingKey: identity.signingKey,
                addedAt: at,
                approvedBy: nil
            ), membership
        )
    }

    /// The approved members, by name (verified).
    package func members() throws -> [FleetMember] { try membership().0.members }

    /// The join requests that verify, by name, and the keys under `pending/` that do not.
    package func pendingRequests() throws -> ([FleetMember], damaged: [DamagedEntry]) {
        let found = try etcd { try kv.range(keys.pending, EtcdRangeOptions(prefix: true)) }
        var requests: [FleetMember] = []
        var damaged: [DamagedEntry] = []
        for kv in found.kvs {
            do {
                requests.append(try JoinRequest.open(kv, fleet: name, machine: keys.name(of: kv.key, in: keys.pending)))
            } catch {
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
        if let member = current.member(other) {
            // Approving a member again changes nothing, and only with its own fingerprint.
            guard MachineIdentity.normalized(fingerprint) == MachineIdentity.normalized(member.fingerprint) else {
                throw FleetError.alreadyMember(machine: other, given: fingerprint)
            }
            return (member, [])
        }
        guard let request = try etcd({ try kv.get(keys.pending(other)) }) else {
            throw FleetError.unknownMachine(fleet: name, machine: other)
        }
        let asked = try JoinRequest.open(request, fleet: name, machine: other)
        guard MachineIdentity.normalized(fingerprint) == MachineIdentity.normalized(asked.fingerprint) else {
            throw FleetError.fingerprintMismatch(machine: other, given: fingerprint)
        }
        let membership = try append(.add(asked), identity: identity, also: [.delete(request.key)])
        guard let member = membership.member(other) else {
            throw FleetError.unknownMachine(fleet: name, machine: other)
        }
        return (member, try resealAll(identity: identity))
    }

    /// Removes a member (a signed `remove` entry) or a join request. The shared slots are not
    /// touched here: the caller rotates each (a refresh sealed to the remaining members spends
    /// the removed machine's refresh token) or re-seals what cannot rotate.
    /// - Returns: the member removed (nil: only a join request was deleted) and the shared slots.
    package func remove(machine other: String) throws -> (FleetMember?, [Slot]) {
        let (identity, current) = try memberIdentity()
        let pendingDeleted = try etcd { try kv.delete(keys.pending(other), prefix: false) }
        guard let member = current.member(other) else {
            guard pendingDeleted > 0 else { throw FleetError.unknownMachine(fleet: name, machine: other) }
            return (nil, [])
        }
        _ = try append(.remove(other), identity: identity, also: [])
        return (member, try sharedSlots())
    }

    /// Appends a signed entry to the membership log after the newest verified one (in place of a
    /// damaged entry there, if any), trying again when another member appended first.
    func append(_ change: Membership.Change, identity: MachineIdentity, also: [EtcdOperation]) throws -> Membership {
        for _ in 0..<5 {
            let (current, damaged) = try membership()
            if let alarm = try FleetAlarm.load(paths, fleet: name) { throw alarm.error }
            switch change {
            case .add(let m) where current.member(m.machine) != nil: return current
            case .remove(let machine) where current.member(machine) == nil: return current
            default: break
            }
            let seq = current.seq + 1
            let key = keys.log(seq)
            let entry = Membership.entry(
                fleet: name,
                seq: seq,
                prev: current.head,
                change: change,
                signer: machine,
                at: clock(),
                key: identity.signing
            )
            let compare: EtcdCompare =
                damaged.first(where: { $0.key == key }).map { .modRevision(key, equals: $0.modRevision) }
                ?? .createRevision(key, equals: 0)
            let result = try etcd {
                try kv.transaction(compare: [compare], success: [.put(key, value: entry)] + also, failure: [])
            }
            guard result.succeeded else { continue }
            var next = current
            try next.apply(EtcdKeyValue(key: key, value: entry, modRevision: result.revision))
            return try MembershipCache.save(next, paths: paths)
        }
        throw FleetError.unavailable(
            fleet: name,
            endpoints: settings.endpoints,
            detail: "the membership log kept changing under this write"
        )
    }

    /// Re-seals each shared slot to the current members, each under its fleet lock, as a new
    /// generation (a tombstone stays one).
    package func resealAll(identity: MachineIdentity, only: [Slot]? = nil) throws -> [Slot] {
        var done: [Slot] = []
        for slot in try only ?? sharedSlots() {
            let lock = try lock(slot)
            defer { lock.release() }
            let (_, membership) = try memberIdentity()
            // A key under slots/ whose value no member signed (or that is damaged) is no shared
            // slot: skipped, so it cannot stop the others from being re-sealed.
            let found: SharedValue?
            do { found = try newest(slot, identity: identity, membership: membership) } catch let error as FleetError {
                switch error {
                case .refusedCredential, .corrupt: continue
                default: throw error
                }
            }
            guard let current = found, let credential = current.credential else { continue }
            if let written = try write(
                slot,
                credential: credential,
                replacing: current,
                identity: identity,
                fence: lock.fence
            ) {
                done.append(slot)
                // This machine has seen the new generation (a sign-in written here later must go above it).
                if var state = SharedSlotState.loadIfReadable(slot, paths: paths), state.fleet == name,
                    state.generation < written.generation
                {
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
    package func newest(
        _ slot: Slot,
        identity: MachineIdentity,
        membership: Membership,
        account: AccountInfo? = nil,
        provider: String? = nil
    ) throws -> SharedValue? {
        guard let current = try etcd({ try kv.get(keys.slot(slot)) }) else { return nil }
        return try open(
            current,
            slot: slot,
            identity: identity,
            membership: membership,
            account: account,
            provider: provider
        )
    }

    /// ``SealedCredential/open`` of a value read from etcd. One sealed for a membership entry
    /// beyond `membership` is opened again with the log read afresh (a member may have appended
    /// since); what still names an entry this machine cannot verify, or another one than it
    /// verified, raises the ``FleetAlarm`` it is evidence of.
    func open(
        _ value: EtcdKeyValue,
        slot: Slot,
        identity: MachineIdentity,
        membership: Membership,
        account: AccountInfo? = nil,
        provider: String? = nil
    ) throws -> SharedValue {
        try verified(membership, value: value, slot: slot) { membership in
            try SealedCredential.open(
                value,
                slot: slot,
                fleet: name,
                membership: membership,
                identity: identity,
                expected: account,
                provider: provider
            )
        }
    }

    /// `open` checked against `membership`, and once more against the log read afresh when what
    /// it opens names a later entry (a member may have appended since); what still names an entry
    /// this machine cannot verify, or another one than it verified, raises the ``FleetAlarm`` it
    /// is evidence of (``evidence(_:value:slot:)``).
    private func verified<T>(
        _ membership: Membership,
        value: EtcdKeyValue? = nil,
        slot: Slot? = nil,
        _ open: (Membership) throws -> T
    ) throws -> T {
        do { return try open(membership) } catch FleetError.membershipBehind {
            do { return try open(try self.membership().0) } catch { throw evidence(error, value: value, slot: slot) }
        } catch { throw evidence(error, value: value, slot: slot) }
    }

    /// Shares `credential` as `slot`: generation 1, or the one after a tombstone the slot left.
    /// - Returns: the value written.
    package func share(_ slot: Slot, credential: Credential) throws -> SharedValue {
        let (identity, _) = try memberIdentity()
        let membership = try sealingMembership()
        let existing = try etcd { try kv.get(keys.slot(slot)) }
        var generation: Int64 = 1
        var compare = EtcdCompare.createRevision(keys.slot(slot), equals: 0)
        if let existing {
            // A live value is a slot already shared; a tombstone (or a value no member signed,
            // which is no value) is replaced.
            let opened = try? SealedCredential.open(
                existing,
                slot: slot,
                fleet: name,
                membership: membership,
                identity: identity
            )
            if let opened, opened.credential != nil { throw FleetError.alreadyShared(slot: slot, fleet: name) }
            generation = (opened?.generation ?? 0) + 1
            compare = .modRevision(existing.key, equals: existing.modRevision)
        }
        let sealed = try SealedCredential.seal(
            credential,
            slot: slot,
            fleet: name,
            generation: generation,
            membership: membership,
            writer: identity,
            machine: machine
        )
        let note = refreshedNote(slot, generation: generation, identity: identity)
        let result = try etcd {
            try kv.transaction(
                compare: [compare],
                success: [
                    .put(keys.slot(slot), value: sealed), .delete(keys.intent(slot)),
                    .put(keys.refreshed(slot), value: note),
                ],
                failure: []
            )
        }
        guard result.succeeded else { throw FleetError.alreadyShared(slot: slot, fleet: name) }
        return SharedValue(
            content: .credential(credential),
            generation: generation,
            writer: machine,
            modRevision: result.revision
        )
    }

    /// Stops sharing `slot` under `lock`: a signed tombstone replaces the value, so every other
    /// machine learns that the live credential stayed here. - Returns: the tombstone written.
    package func unshare(_ slot: Slot, under lock: FleetLock) throws -> SharedValue {
        let (identity, _) = try memberIdentity()
        let membership = try sealingMembership()
        guard let current = try newest(slot, identity: identity, membership: membership), current.credential != nil
        else {
            throw FleetError.notShared(slot: slot, fleet: name)
        }
        let tombstone = try SealedCredential.seal(
            nil,
            slot: slot,
            fleet: name,
            generation: current.generation + 1,
            membership: membership,
            writer: identity,
            machine: machine
        )
        let note = refreshedNote(slot, generation: current.generation + 1, identity: identity)
        let result = try etcd {
            try kv.transaction(
                compare: [lock.fence, .modRevision(keys.slot(slot), equals: current.modRevision)],
                success: [
                    .put(keys.slot(slot), value: tombstone), .delete(keys.intent(slot)),
                    .put(keys.refreshed(slot), value: note),
                ],
                failure: []
            )
        }
        guard result.succeeded else { throw FleetError.lockLost(slot: slot, fleet: name) }
        return SharedValue(
            content: .tombstone,
            generation: current.generation + 1,
            writer: machine,
            modRevision: result.revision
        )
    }

    /// Writes `credential` as the generation after `replacing`, only if the fleet's value is still
    /// the one read (its revision; 0: the key is absent) and, with `fence`, the lock is still
    /// ours; the refresh intent goes with it. Sealed to the membership verified at this moment
    /// (``sealingMembership()``), never while a ``FleetAlarm`` stands.
    /// - Returns: the value written, or nil when a comparison failed.
    package func write(
        _ slot: Slot,
        credential: Credential,
        replacing: SharedValue,
        identity: MachineIdentity,
        fence: EtcdCompare?
    ) throws -> SharedValue? {
        let membership = try sealingMembership()
        let generation = replacing.generation + 1
        let sealed = try SealedCredential.seal(
            credential,
            slot: slot,
            fleet: name,
            generation: generation,
            membership: membership,
            writer: identity,
            machine: machine
        )
        let note = refreshedNote(slot, generation: generation, identity: identity)
        let result = try etcd {
            try kv.transaction(
                compare: (fence.map { [$0] } ?? []) + [.modRevision(keys.slot(slot), equals: replacing.modRevision)],
                success: [
                    .put(keys.slot(slot), value: sealed), .delete(keys.intent(slot)),
                    .put(keys.refreshed(slot), value: note),
                ],
                failure: []
            )
        }
        return result.succeeded
            ? SharedValue(
                content: .credential(credential),
                generation: generation,
                writer: machine,
                modRevision: result.revision
            ) : nil
    }

    /// Records, under `lock`, that this machine is about to present the refresh token of
    /// `current` (see ``RefreshIntent``). - Returns: false when the fleet's value or the lock changed.
    package func writeIntent(
        _ slot: Slot,
        current: SharedValue,
        refreshToken: String,
        identity: MachineIdentity,
        under lock: FleetLock
    ) throws -> Bool {
        let membership = try sealingMembership()
        let intent = RefreshIntent.make(
            fleet: name,
            slot: slot,
            machine: machine,
            token: TokenFingerprint.of(refreshToken),
            generation: current.generation,
            at: clock(),
            membership: membership,
            identity: identity
        )
        let result = try etcd {
            try kv.transaction(
                compare: [lock.fence, .modRevision(keys.slot(slot), equals: current.modRevision)],
                success: [.put(keys.intent(slot), value: intent)],
                failure: []
            )
        }
        return result.succeeded
    }

    /// The refresh intent recorded for `slot`, nil when there is none that verifies.
    package func intent(_ slot: Slot, membership: Membership) throws -> RefreshIntent? {
        guard let kv = try etcd({ try self.kv.get(keys.intent(slot)) }) else { return nil }
        return try verified(membership) { membership in
            try RefreshIntent.open(kv, slot: slot, fleet: name, membership: membership)
        }
    }

    /// Puts a new sign-in in place of whatever the fleet holds for `slot` (its session may have
    /// died everywhere, or its value was deleted or damaged), under `lock`, as a generation above
    /// both the fleet's and `seen` (the newest this machine saw) and at least the sign-in's time
    /// (``signInGeneration(above:)``): a member that missed generations (offline, or shown an
    /// older value put back) still writes one above any another member saw.
    /// - Returns: the value written; nil when the slot was unshared (a tombstone).
    package func replace(
        _ slot: Slot,
        credential: Credential,
        seen: Int64,
        under lock: FleetLock
    ) throws -> SharedValue? {
        let (identity, _) = try memberIdentity()
        for _ in 0..<3 {
            let membership = try sealingMembership()
            var current = SharedValue(
                content: .tombstone,
                generation: signInGeneration(above: seen) - 1,
                writer: "",
                modRevision: 0
            )
            if let raw = try etcd({ try kv.get(keys.slot(slot)) }) {
                current.modRevision = raw.modRevision
                // A value no member signed is no value: replaced like a missing one. One that is
                // evidence of a newer or forked membership stops the write (raised as an alarm).
                do {
                    let opened = try open(raw, slot: slot, identity: identity, membership: membership)
                    if opened.credential == nil { return nil }
                    current.generation = signInGeneration(above: max(seen, opened.generation)) - 1
                } catch let error as FleetError {
                    switch error {
                    case .membershipBehind, .forked, .unavailable: throw error
                    default: break
                    }
                }
            }
            if let written = try write(
                slot,
                credential: credential,
                replacing: current,
                identity: identity,
                fence: lock.fence
            ) {
                return written
            }
            guard lock.held() else { throw FleetError.lockLost(slot: slot, fleet: name) }
        }
        throw FleetError.lockLost(slot: slot, fleet: name)
    }

    /// A sign-in's generation: one above `known` (the highest this machine knows of), and at
    /// least its wall-clock time in milliseconds times 1024. Several sign-ins made while this
    /// machine was away (cut off, or shown an older value put back) each took such a floor, so a
    /// later one still goes above them all and no member refuses it as a rollback; a refresh adds
    /// one, so a floor a millisecond later is already 1024 refreshes above. Correctness does not
    /// rest on it (generations only have to grow): a clock off by minutes only makes a sign-in on
    /// that machine lose to one made on another within those minutes.
    func signInGeneration(above known: Int64) -> Int64 {
        let floor = Int64((clock().timeIntervalSince1970 * 1000).rounded(.down)) << 10
        return max(known + 1, floor)
    }

    /// ``write(_:credential:replacing:identity:fence:)`` for tokens the server just issued, which
    /// must not be lost: while etcd cannot answer (an election is under way) it tries again for up
    /// to `patience` seconds as long as the lock is held. When the fenced write fails because the
    /// fleet's value changed under the lock (deleted, put back, replaced by one no member signed),
    /// ``SharedSlotDecision/afterFailedWrite(refreshed:machine:replaced:seen:now:lockHeld:)``
    /// decides: a spent token is never left as the fleet's newest value, so the tokens are written
    /// as the generation above everything seen, fenced on the lock and on what is there now.
    /// - Returns: the value written, or nil when the tokens stay here (pending) because a value
    ///   this machine cannot replace stands.
    package func writeRefreshed(
        _ slot: Slot,
        credential: Credential,
        replacing: SharedValue,
        under lock: FleetLock,
        identity: MachineIdentity,
        membership: Membership,
        seen: Int64 = 0,
        patience: TimeInterval = 15
    ) throws -> SharedValue? {
        let deadline = ContinuousClock.now + .seconds(patience)
        var attempt = 0
        var base = replacing
        for _ in 0..<8 {
            do {
                if let written = try write(
                    slot,
                    credential: credential,
                    replacing: base,
                    identity: identity,
                    fence: lock.fence
                ) {
                    return written
                }
                // The comparison failed: see what stands now.
                let now: SharedSlotDecision.Read
                let revision: Int64
                if let raw = try etcd({ try kv.get(keys.slot(slot)) }) {
                    revision = raw.modRevision
                    do { now = .value(try open(raw, slot: slot, identity: identity, membership: membership)) } catch let
                        error as FleetError
                    {
                        now = .failed(error)
                    }
                } else {
                    revision = 0
                    now = .missing
                }
                switch SharedSlotDecision.afterFailedWrite(
                    refreshed: credential,
                    machine: machine,
                    replaced: replacing,
                    seen: seen,
                    now: now,
                    lockHeld: lock.held()
                ) {
                case .landed(let value): return value
                case .keepHere: return nil
                case .overwrite(let generation):
                    base = SharedValue(
                        content: .tombstone,
                        generation: generation - 1,
                        writer: "",
                        modRevision: revision
                    )
                }
            } catch let error as FleetError {
                guard case .unavailable = error, ContinuousClock.now < deadline, lock.held() else { throw error }
                attempt += 1
                usleep(useconds_t(min(2, 0.2 * Double(attempt)) * 1_000_000))
            }
        }
        return nil
    }

    /// `refreshed/SLOT`: who wrote the slot last, at which generation and when, signed by the
    /// writer (no secret). Shown by `fleet status` only when a member's signature verifies.
    func refreshedNote(_ slot: Slot, generation: Int64, identity: MachineIdentity) -> [UInt8] {
        SignedDocument.sign(
            .object([
                "type": .string(RefreshedNote.type), "fleet": .string(name), "slot": .string(slot.name),
                "machine": .string(machine), "generation": .string(String(generation)), "at": .date(clock()),
            ]),
            with: identity.signing
        )
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
            return try FleetLock.acquire(
                kv,
                folder: keys.locks(slot),
                ttl: ttl,
                timeout: min(longest, patience ?? longest)
            )
        } catch let timeout as FleetLockTimeout {
            throw FleetError.lockTimeout(slot: slot, fleet: name, seconds: timeout.seconds)
        } catch let error as EtcdError {
            throw unavailable(error)
        }
    }
}

extension Fleet {
    /// Who last wrote `slot` in the fleet, and when: signed by that member (a note no member
    /// signed, or one from before notes were signed, is not shown).
    package func refreshedNote(_ slot: Slot, membership: Membership) throws -> (machine: String, at: Date?)? {
        guard let kv = try etcd({ try self.kv.get(keys.refreshed(slot)) }),
            let doc = try? SignedDocument(kv.value, key: kv.key, kind: RefreshedNote.type),
            let machine = try? doc.fields.machineName("machine"), let member = membership.member(machine),
            doc.isSigned(by: member.signingKey),
            (try? doc.fields.string("fleet")) == name, (try? doc.fields.string("slot")) == slot.name
        else { return nil }
        return (machine, (try? doc.fields.optionalDate("at")) ?? nil)
    }

    /// The machine whose agent leads: the oldest key under `leader/` that has a live lease (a
    /// key put without one never expires, and would stop every agent from leading), nil when no
    /// agent runs or the value there is not a member's name. - Returns: also the keys ignored.
    package func leaderName(membership: Membership) throws -> (String?, ignored: [DamagedEntry]) {
        let found = try etcd { try kv.range(keys.leader, EtcdRangeOptions(prefix: true, sortByCreateRevision: true)) }
        let ignored = found.kvs.filter { $0.lease == 0 }.map {
            DamagedEntry(
                key: $0.key,
                modRevision: $0.modRevision,
                problem: "it has no lease, so it is no agent's candidacy (ignored)"
            )
        }
        let first = found.kvs.first { $0.lease != 0 }
        return (
            first.map { String(decoding: $0.value, as: UTF8.self) }.flatMap { membership.member($0)?.machine }, ignored
        )
    }
}

/// `refreshed/SLOT`'s signed note.
enum RefreshedNote {
    static let type = "lanyard-fleet-refreshed"
}
