import FoundationEssentials
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

/// What `fleet sync` did with one shared slot.
public enum FleetSyncOutcome: String, Sendable, Equatable {
    /// The fleet's copy was newer and replaced the local one.
    case adopted
    /// The slot was not on this machine: created from the fleet's copy.
    case added
    /// The local copy is the fleet's.
    case current
    /// This machine's copy was newer (a refresh whose fleet write failed) and was written there.
    case uploaded
    /// A local slot of the same name is not shared: left alone (the message says how to fix it).
    case conflict
    /// The fleet's copy was refused, or is missing (see the message): the local copy was kept.
    case refused
    /// The slot was unshared on another machine, which kept the live credential: this copy
    /// needs a sign-in (or a sync once the slot is shared again).
    case handedOver = "handed-over"
    /// The slot was unshared from this machine: its copy is its own again.
    case unshared
}

/// What ``AccountManager/fetchSharedSlot(_:)`` found for a slot this machine does not have.
package enum SharedSlotFetch: Sendable, Equatable {
    /// The fleet shares it: it is here now (its fleet's name).
    case fetched(fleet: String)
    /// No fleet is configured, or the fleet shares no slot of that name.
    case notShared
    /// The fleet could not be asked (why, and the fleet's name).
    case unavailable(fleet: String, reason: String)
    /// The fleet's value for it is refused here (none a member signed, older than one seen, …).
    case refused(fleet: String, reason: String)
}

/// A slot this machine does not have, which its fleet may share but could not be asked for
/// (exit 3, like any unknown slot).
package struct UnsyncedSlotError: LanyardError {
    package let slot: Slot
    package let fleet: String
    package let reason: String
    package init(slot: Slot, fleet: String, reason: String) {
        self.slot = slot
        self.fleet = fleet
        self.reason = reason
    }
    package var code: ErrorCode { .unknownSlot }
    package var errorDescription: String? {
        "no slot named \(slot.name) here, and fleet \(fleet) could not be asked for it (\(reason)); "
            + "`lanyard fleet sync` brings the fleet's shared slots here once it answers"
    }
}

/// What became of a new sign-in of a shared slot in its fleet.
public enum FleetSignInOutcome: Sendable, Equatable {
    /// Written to the fleet: every member machine uses it from now on.
    case written(fleet: String)
    /// The fleet could not take it (the reason); it is kept here and written by the next
    /// refresh, `fleet sync` or the agent.
    case pending(fleet: String, reason: String)
    /// The slot was no longer shared in the fleet: it is this machine's own again.
    case unshared(fleet: String)
}

/// `fleet status`: the fleet as this machine sees it.
public struct FleetStatusReport: Sendable {
    public struct SharedSlot: Sendable {
        public var slot: Slot
        /// Which machine last wrote it, and when (nil when unknown).
        public var refreshedBy: String?
        public var refreshedAt: Date?
        /// Whether this machine has it, and whether its copy is the fleet's newest.
        public var local: Bool
        public var localCurrent: Bool
        public var uploadPending: Bool
        /// The generation of the fleet's value (0 when it could not be read).
        public var generation: Int64
        /// Why the fleet's value cannot be used here (nil: it can).
        public var problem: String?
    }

    public var fleet: String
    public var machine: String
    public var endpoints: [EtcdEndpointStatus]
    /// Whether a majority answered a linearizable read.
    public var healthy: Bool
    public var problem: String?
    /// The fleet's fingerprint (its genesis as pinned here); nil before this machine joined.
    public var fingerprint: String?
    public var members: [FleetMember]
    public var pending: [FleetMember]
    public var slots: [SharedSlot]
    /// Keys under the fleet's prefix that do not verify: each names the key and what is wrong.
    /// They are ignored, never trusted, and block nothing.
    public var damaged: [String]
    /// The agent that leads refreshes (nil: none running).
    public var leader: String?
    /// This machine's standing: `member`, `pending`, `outsider`, or `unknown` (etcd did not answer).
    public var standing: String
    /// Why this machine writes nothing for the fleet now (nil: it may write).
    public var alarm: Alarm?
    /// Machines this machine removed whose etcd access is not known to be gone.
    public var removedAccess: [RemovedAccess] = []

    /// A standing ``FleetAlarm``, for people and scripts.
    public struct Alarm: Sendable {
        /// `membership_behind` or `forked`.
        public var kind: String
        /// The membership entry in question.
        public var seq: Int64
        /// What happened and what to do.
        public var message: String
        /// A fork's two entries: their fingerprints (what `fleet resolve` takes) and who signed them.
        public var entries: [(fingerprint: String, about: String)]

        init(_ alarm: FleetAlarm) {
            kind = alarm.kind == .behind ? "membership_behind" : "forked"
            seq = alarm.seq
            message = alarm.error.userFacingDescription
            entries = []
            if alarm.kind == .forked {
                if let ours = alarm.ours {
                    entries.append((MachineIdentity.grouped(hex: hexBytes(ours)), "verified here"))
                }
                entries.append(
                    (
                        MachineIdentity.grouped(hex: hexBytes(alarm.digest)),
                        alarm.theirs != nil
                            ? "signed by \(alarm.signer)" : "named by \(alarm.signer) in \(alarm.source)"
                    )
                )
            }
        }
    }

    /// A removed machine's etcd access.
    public struct RemovedAccess: Sendable {
        public var machine: String
        public var access: EtcdAccessStatus
    }
}

/// What `fleet remove` did.
public struct FleetRemoval: Sendable {
    /// What became of one shared slot.
    public struct SlotOutcome: Sendable, Equatable {
        public enum Result: Sendable, Equatable {
            /// Refreshed and written as `generation`, sealed to the members left: the removed
            /// machine's refresh token is spent.
            case rotated(generation: Int64)
            /// A personal access token: nothing rotates it. Re-sealed; revoke it at the provider
            /// (`page`, when config.ini names it) and store a new one.
            case notRotatable(page: String?)
            /// The rotation failed (why): re-sealed; sign it in again on a member.
            case failed(reason: String)
            /// The slot is no longer shared.
            case unshared
            /// The value under its key is none a member signed (`reason`): no shared slot, nothing
            /// to rotate (someone who can write to etcd put it there).
            case refused(reason: String)
        }
        public var slot: Slot
        public var result: Result
        public var rotated: Bool { if case .rotated = result { return true } else { return false } }
    }
    public var machine: String
    /// False when only a join request was deleted.
    public var wasMember: Bool
    public var slots: [SlotOutcome]
    /// The removed machine's etcd access (nil: it was not a member).
    public var etcdAccess: EtcdAccessStatus?
}

extension AccountManager {
    /// `fleet init`: creates the fleet in etcd with this machine as its first member.
    package func fleetCreate() throws -> FleetMember { try openFleet().create().0 }

    /// `fleet join`: pins the fleet whose fingerprint the person read on a member's screen, and
    /// asks to join; a member approves with the fingerprint returned here.
    package func fleetJoin(fleetFingerprint: String) throws -> FleetMember {
        try openFleet().requestJoin(fleetFingerprint: fleetFingerprint).0
    }

    /// The fleet's fingerprint as this machine pinned it (nil: it has not joined the configured fleet).
    package func fleetFingerprint() -> String? {
        guard let name = config.fleet?.name, let pinned = (try? MembershipCache.load(paths)) ?? nil,
            pinned.fleet == name
        else { return nil }
        return pinned.fingerprint
    }

    /// `fleet approve`: admits a machine whose fingerprint the person checked; every shared slot
    /// is re-sealed to it. - Returns: the member and the slots re-sealed.
    package func fleetApprove(machine: String, fingerprint: String) throws -> (FleetMember, [Slot]) {
        try openFleet().approve(machine: machine, fingerprint: fingerprint)
    }

    /// `fleet remove`: a signed `remove` entry, then every shared slot rotated at once, each
    /// under its locks and sealed only to the remaining members, so the removed machine's copy
    /// holds a spent refresh token (it cannot refresh with it, and a member that missed the
    /// removal holds a spent token too, never one that mints tokens for the removed machine).
    /// A slot that cannot rotate (a personal access token) or whose rotation failed is re-sealed
    /// and said so. Then the removed machine's etcd user is deleted where this machine may.
    package func fleetRemove(machine: String) async throws -> FleetRemoval {
        let fleet = try await BlockingExecutor.shared.run(.toCompletion) { try self.openFleet() }
        let (member, shared) = try await BlockingExecutor.shared.run(.toCompletion) {
            try fleet.remove(machine: machine)
        }
        guard let member else { return FleetRemoval(machine: machine, wasMember: false, slots: [], etcdAccess: nil) }
        // The rotations start from values sealed before the removal, which every other member now
        // refuses to refresh from: this machine's note lets its own rotations through.
        let paths = self.paths
        try await BlockingExecutor.shared.run(.toCompletion) {
            if let removal = try fleet.membership().0.lastRemoval {
                try RotationNote.begin(removal: removal.seq, fleet: fleet.name, paths: paths)
            }
        }
        var outcomes: [FleetRemoval.SlotOutcome] = []
        var reseal: [Slot] = []
        for slot in shared {
            outcomes.append(await rotateAfterRemoval(slot, fleet: fleet.name, reseal: &reseal))
        }
        if !reseal.isEmpty {
            // Sealed again without the removed machine (what cannot rotate stays readable to it only
            // as the copy it already had).
            let only = reseal
            _ = try? await BlockingExecutor.shared.run(.toCompletion) { () -> [Slot] in
                let (identity, _) = try fleet.memberIdentity()
                return try fleet.resealAll(identity: identity, only: only)
            }
        }
        await BlockingExecutor.shared.run(.toCompletion) { RotationNote.end(paths: paths) }
        let access = await BlockingExecutor.shared.run(.toCompletion) { fleet.revokeEtcdAccess(of: member) }
        let rotated = outcomes.filter(\.rotated).map { JSONValue.string($0.slot.name) }
        _ = await BlockingExecutor.shared.run {
            self.eventLog.append(
                "fleet",
                slot: nil,
                fields: [
                    "action": .string("removed"), "fleet": .string(fleet.name), "machine": .string(machine),
                    "rotated": .array(rotated),
                ]
            )
        }
        return FleetRemoval(machine: machine, wasMember: true, slots: outcomes, etcdAccess: access)
    }

    /// One shared slot after a removal: a forced refresh (fetched from the fleet first when this
    /// machine does not have it), which writes the next generation sealed to the members left.
    private func rotateAfterRemoval(_ slot: Slot, fleet: String, reseal: inout [Slot]) async -> FleetRemoval.SlotOutcome
    {
        if (try? await BlockingExecutor.shared.run(.toCompletion, { try self.registry.load().slots[slot] })) == nil {
            switch await fetchSharedSlot(slot) {
            case .refused(_, let reason):
                // A value no member signed is no shared slot (someone wrote junk under slots/).
                return FleetRemoval.SlotOutcome(slot: slot, result: .refused(reason: reason))
            case .unavailable(_, let reason):
                reseal.append(slot)
                return FleetRemoval.SlotOutcome(slot: slot, result: .failed(reason: reason))
            case .notShared:
                return FleetRemoval.SlotOutcome(slot: slot, result: .unshared)
            case .fetched:
                break
            }
        }
        guard
            let record = try? await BlockingExecutor.shared.run(.toCompletion, { try self.registry.load().slots[slot] })
        else {
            return FleetRemoval.SlotOutcome(slot: slot, result: .unshared)
        }
        if !record.rotates {
            reseal.append(slot)
            return FleetRemoval.SlotOutcome(
                slot: slot,
                result: .notRotatable(page: config.providers[record.provider]?.tokensPageURL?.absoluteString)
            )
        }
        do {
            let credential = try await freshCredential(slot: slot, force: true)
            let generation = SharedSlotState.loadIfReadable(slot, paths: paths)?.generation ?? 0
            _ = credential
            return FleetRemoval.SlotOutcome(slot: slot, result: .rotated(generation: generation))
        } catch {
            reseal.append(slot)
            return FleetRemoval.SlotOutcome(slot: slot, result: .failed(reason: error.userFacingDescription))
        }
    }

    /// `fleet resolve`: a person chose which entry of a forked membership log is the fleet's.
    package func fleetResolve(keep fingerprint: String) throws -> Membership {
        try openFleet().resolveFork(keep: fingerprint)
    }

    /// `fleet share`: puts the slot's credential in the fleet, sealed to every member.
    /// - Returns: the etcd revision written.
    package func fleetShare(_ slot: Slot) async throws -> Int64 {
        let lock = try await lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        return try await BlockingExecutor.shared.run(.toCompletion) {
            let fleet = try self.openFleet()
            let known = SharedSlotState.loadIfReadable(slot, paths: self.paths)
            if let known, known.handedOverTo == nil { throw FleetError.alreadyShared(slot: slot, fleet: fleet.name) }
            let (_, store) = try self.storeOf(slot)
            let credential = try self.read(slot, store)
            let value = try fleet.share(slot, credential: credential)
            try SharedSlotState(fleet: fleet.name, revision: value.modRevision, generation: value.generation).save(
                slot,
                paths: self.paths
            )
            self.eventLog.append(
                "fleet",
                slot: slot,
                fields: ["action": .string("shared"), "fleet": .string(fleet.name)]
            )
            return value.modRevision
        }
    }

    /// `fleet unshare`: under the fleet lock, a signed tombstone replaces the slot's value; this
    /// machine keeps the live credential as its own, and every other member marks its copy
    /// handed over (it never spends that refresh token again).
    package func fleetUnshare(_ slot: Slot) async throws {
        let lock = try await lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        let httpTimeout = config.httpTimeout
        try await BlockingExecutor.shared.run(.toCompletion) {
            let fleet = try self.openFleet()
            let fleetLock = try fleet.lock(slot, httpTimeout: httpTimeout)
            defer { fleetLock.release() }
            _ = try fleet.unshare(slot, under: fleetLock)
            try self.forgetShared(slot, fleet: fleet.name)
        }
    }

    /// A new sign-in of a shared slot becomes the slot's credential for the whole fleet, in place
    /// of whatever the fleet holds: this is how a fleet recovers from a session that died on every
    /// machine. Written under the fleet lock; when the fleet cannot take it, it stays here marked
    /// `upload_pending`, and the next refresh, `fleet sync` or the agent writes it (unless another
    /// machine writes the slot first, whose copy is then adopted).
    func shareSignIn(_ slot: Slot, _ credential: Credential, state initial: SharedSlotState) async -> FleetSignInOutcome
    {
        if initial.handedOverTo != nil {
            // Handed over: the new sign-in is this machine's own.
            _ = try? await BlockingExecutor.shared.run(.toCompletion) {
                try self.forgetShared(slot, fleet: initial.fleet)
            }
            return .unshared(fleet: initial.fleet)
        }
        var state = initial
        state.uploadPending = true
        state.signInPending = true
        let pending = state
        do {
            return try await BlockingExecutor.shared.run(.toCompletion) {
                let fleet = try self.openFleet()
                var written = pending
                guard try self.writeSignIn(slot, credential, fleet: fleet, state: &written, under: nil) != nil else {
                    try self.forgetShared(slot, fleet: fleet.name)
                    return .unshared(fleet: fleet.name)
                }
                return .written(fleet: fleet.name)
            }
        } catch {
            let reason = error.userFacingDescription
            await BlockingExecutor.shared.run {
                try? pending.save(slot, paths: self.paths)
                self.eventLog.appendError(
                    .fleetWritePending,
                    slot: slot,
                    message: "the new sign-in is kept here and will be written to fleet "
                        + "\(pending.fleet) on the next sync: \(reason)"
                )
            }
            return .pending(fleet: pending.fleet, reason: reason)
        }
    }

    /// Writes a sign-in made on this machine to the fleet, in place of whatever it holds, under
    /// the fleet lock (`held`, or taken here), and saves `state` after it.
    /// - Returns: the value written; nil when the slot was unshared in the fleet (the caller
    ///   forgets it: ``forgetShared(_:fleet:)``).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func writeSignIn(
        _ slot: Slot,
        _ credential: Credential,
        fleet: Fleet,
        state: inout SharedSlotState,
        under held: FleetLock?
    ) throws -> SharedValue? {
        let lock = try held ?? fleet.lock(slot, httpTimeout: config.httpTimeout)
        defer { if held == nil { lock.release() } }
        guard
            let written = try fleet.replace(
                slot,
                credential: credential,
                seen: max(state.generation, state.evidence),
                under: lock
            )
        else { return nil }
        state.record(written)
        state.signInPending = false
        state.handedOverTo = nil
        try state.save(slot, paths: paths)
        eventLog.append(
            "fleet",
            slot: slot,
            fields: [
                "action": .string("signed-in"), "fleet": .string(fleet.name),
                "revision": .string(String(written.modRevision)),
            ]
        )
        return written
    }

    /// The slot is no longer shared (unshared from here): this machine's copy is its own again.
    func forgetShared(_ slot: Slot, fleet: String) throws {
        try SharedSlotState.remove(slot, paths: paths)
        eventLog.append("fleet", slot: slot, fields: ["action": .string("unshared"), "fleet": .string(fleet)])
    }

    /// The slot was unshared by `machine`, which kept the live credential: this copy's refresh
    /// token is dropped (it is the fleet's, and the other machine spends it from now on) and the
    /// slot needs a sign-in, unless it is shared again (then a sync adopts it).
    func markHandedOver(
        _ slot: Slot,
        to machine: String,
        generation: Int64,
        store: any CredentialStore,
        state: inout SharedSlotState
    ) throws {
        if var local = try? store.get(slot), local.tokens.refreshToken != nil {
            local.tokens.refreshToken = nil
            try store.put(local, for: slot)
        }
        try registry.update { doc in
            doc.slots[slot]?.state = .reauthenticationRequired
            doc.slots[slot]?.lastErrorCode =
                FleetError.handedOver(slot: slot, fleet: state.fleet, machine: machine).code.rawValue
        }
        state.handedOverTo = machine
        state.generation = max(state.generation, generation)
        state.uploadPending = false
        state.signInPending = false
        try state.save(slot, paths: paths)
        eventLog.append(
            "fleet",
            slot: slot,
            fields: ["action": .string("handed-over"), "fleet": .string(state.fleet), "machine": .string(machine)]
        )
    }

    /// Reads the fleet's value for `slot` as the decision function takes it.
    func readShared(
        _ slot: Slot,
        fleet: Fleet,
        identity: MachineIdentity,
        membership: Membership,
        record: SlotRecord?
    ) -> SharedSlotDecision.Read {
        do {
            guard
                let value = try fleet.newest(
                    slot,
                    identity: identity,
                    membership: membership,
                    account: record?.account,
                    provider: record?.provider
                )
            else {
                return .missing
            }
            return .value(value)
        } catch let error as FleetError {
            return .failed(error)
        } catch {
            return .failed(.corrupt(key: fleet.keys.slot(slot), detail: error.userFacingDescription))
        }
    }

    /// `fleet sync` (and the agent, on each change it sees): brings every shared slot's local
    /// copy up to the fleet's, creating slots this machine does not have yet.
    package func fleetSync(only: Slot? = nil) async throws -> [(Slot, FleetSyncOutcome, String?)] {
        // One hop into the blocking core.
        try await BlockingExecutor.shared.run(.toCompletion) { try self.fleetSyncBlocking(only: only) }
    }

    /// The one synchronous core of ``fleetSync(only:)``: the membership, then each slot under its
    /// local lock, every step blocking on this thread (the agent's follower calls it from its own).
    @available(*, noasync, message: "blocking: await fleetSync(only:) instead")
    package func fleetSyncBlocking(only: Slot? = nil) throws -> [(Slot, FleetSyncOutcome, String?)] {
        let fleet = try openFleet()
        let (identity, membership) = try fleet.memberIdentity()
        let knownHere = SharedSlotState.all(paths: paths).filter { $0.1.fleet == fleet.name }.map(\.0)
        var results: [(Slot, FleetSyncOutcome, String?)] = []
        for slot in Set(try fleet.sharedSlots() + knownHere).sorted() where only == nil || only == slot {
            let (lock, _) = try lockSlotBlocking(slot)
            defer { withExtendedLifetime(lock) {} }
            if let outcome = try syncShared(slot, fleet: fleet, identity: identity, membership: membership) {
                results.append(outcome)
            }
        }
        return results
    }

    /// For a slot this machine does not have (a machine just approved into its fleet has synced
    /// nothing yet): one sync of that slot when `[fleet]` is configured and the fleet shares it,
    /// so `lanyard token work` works without a `fleet sync` first. Never throws: what kept the
    /// slot away is in the answer.
    package func fetchSharedSlot(_ slot: Slot) async -> SharedSlotFetch {
        guard let fleet = config.fleet?.name else { return .notShared }
        do {
            guard let (_, outcome, message) = try await fleetSync(only: slot).first else { return .notShared }
            switch outcome {
            case .added, .adopted, .current, .uploaded: return .fetched(fleet: fleet)
            case .refused: return .refused(fleet: fleet, reason: message ?? outcome.rawValue)
            default: return .unavailable(fleet: fleet, reason: message ?? outcome.rawValue)
            }
        } catch {
            return .unavailable(fleet: fleet, reason: error.userFacingDescription)
        }
    }

    /// One slot of ``fleetSync(only:)``, under the slot's local lock; nil when there is nothing
    /// to say (a tombstone of a slot this machine never had).
    func syncShared(
        _ slot: Slot,
        fleet: Fleet,
        identity: MachineIdentity,
        membership: Membership
    ) throws -> (Slot, FleetSyncOutcome, String?)? {
        let registryDoc = try registry.load()
        let record = registryDoc.slots[slot]
        let state = try SharedSlotState.load(slot, paths: paths)
        if record != nil && state == nil {
            let name = slot.name
            return (
                slot, .conflict,
                "a slot named \(name) exists on this machine and is not shared, so the fleet's \(name) was not "
                    + "brought here: rename this one (`lanyard rename \(name) \(name)-local`) "
                    + "or remove it (`lanyard remove \(name)`), "
                    + "then run `lanyard fleet sync` again"
            )
        }
        var local: Credential?
        var store: (any CredentialStore)?
        if let record, state != nil {
            let opened = try openStore(record.backend, false)
            // Tokens a killed refresh left in the recovery file are this machine's newest: in place first.
            _ = try RecoveryFile(paths: paths, slot: slot).settle(into: opened, slot: slot)
            local = try read(slot, opened)
            store = opened
        }
        let read = readShared(slot, fleet: fleet, identity: identity, membership: membership, record: record)
        let step = SharedSlotDecision.step(
            slot: slot,
            fleet: fleet.name,
            machine: fleet.machine,
            local: local,
            state: state,
            read: read
        )
        guard let local, let store, var known = state else {
            // Not on this machine: only a live value is brought here.
            guard step == .adopt, case .value(let value) = read, let credential = value.credential else {
                if case .refuse(let error) = step, case .value = read {
                    return (slot, .refused, error.userFacingDescription)
                }
                if case .failed(let error) = read { return (slot, .refused, error.userFacingDescription) }
                return nil
            }
            try addFromFleet(slot, credential, value: value, fleet: fleet.name)
            return (slot, .added, nil)
        }
        func outcome(_ performed: SharedPerformed) -> (Slot, FleetSyncOutcome, String?) {
            switch performed {
            case .refused(let error): return (slot, .refused, error.userFacingDescription)
            case .unshared: return (slot, .unshared, nil)
            case .handedOver(let machine):
                return (
                    slot, .handedOver,
                    FleetError.handedOver(slot: slot, fleet: fleet.name, machine: machine).userFacingDescription
                )
            case .adopted: return (slot, .adopted, nil)
            case .uploaded: return (slot, .uploaded, nil)
            case .unchanged, .needsLock: return (slot, .current, nil)
            }
        }
        let performed = try performShared(
            step,
            read: read,
            slot: slot,
            local: local,
            store: store,
            state: &known,
            fleet: fleet,
            identity: identity,
            lock: nil
        )
        guard case .needsLock = performed else { return outcome(performed) }
        // A refresh made here whose fleet write never landed: written under the fleet lock,
        // against the value read again under it.
        let lock = try fleet.lock(slot, httpTimeout: config.httpTimeout)
        defer { lock.release() }
        let again = readShared(slot, fleet: fleet, identity: identity, membership: membership, record: record)
        let next = SharedSlotDecision.step(
            slot: slot,
            fleet: fleet.name,
            machine: fleet.machine,
            local: local,
            state: known,
            read: again
        )
        return outcome(
            try performShared(
                next,
                read: again,
                slot: slot,
                local: local,
                store: store,
                state: &known,
                fleet: fleet,
                identity: identity,
                lock: lock
            )
        )
    }

    /// A slot new here: made in the store new slots use, with the fleet's credential.
    func addFromFleet(_ slot: Slot, _ credential: Credential, value: SharedValue, fleet: String) throws {
        let backend = backendForNewSlot()
        let store = try openStore(backend, false)
        var adopted = credential
        adopted.lastRefreshBoot = nil
        let now = clock.now()
        try registry.update { doc in
            try store.put(adopted, for: slot)
            var made = SlotRecord(provider: adopted.provider, backend: backend, createdAt: now)
            made.account = adopted.account
            made.state = .signedIn(expiresAt: adopted.tokens.expiresAt)
            made.rotates = !adopted.isPersonalAccessToken
            made.lastRefresh = adopted.lastRefresh
            doc.slots[slot] = made
            if doc.active == nil { doc.active = slot }
        }
        try SharedSlotState(fleet: fleet, revision: value.modRevision, generation: value.generation).save(
            slot,
            paths: paths
        )
        eventLog.append(
            "adopt",
            slot: slot,
            fields: [
                "revision": .string(String(value.modRevision)), "generation": .string(String(value.generation)),
                "expires_at": .date(adopted.tokens.expiresAt),
            ]
        )
    }

    /// `fleet status`: never fails on what etcd holds; damaged keys are listed.
    package func fleetStatus() -> FleetStatusReport {
        guard let settings = config.fleet else {
            return FleetStatusReport(
                fleet: "",
                machine: "",
                endpoints: [],
                healthy: false,
                problem: FleetError.notConfigured(configFile: paths.configFile).userFacingDescription,
                fingerprint: nil,
                members: [],
                pending: [],
                slots: [],
                damaged: [],
                leader: nil,
                standing: "outsider"
            )
        }
        var report = FleetStatusReport(
            fleet: settings.name,
            machine: settings.machine,
            endpoints: [],
            healthy: false,
            problem: nil,
            fingerprint: fleetFingerprint(),
            members: [],
            pending: [],
            slots: [],
            damaged: [],
            leader: nil,
            standing: "unknown"
        )
        let fleet: Fleet
        do { fleet = try openFleet() } catch {
            report.problem = error.userFacingDescription
            return report
        }
        report.endpoints = fleet.kv.endpointStatus()
        do {
            let (requests, badRequests) = try fleet.pendingRequests()
            report.pending = requests
            report.damaged += badRequests.map { "\(TerminalText.escaped($0.key)): \($0.problem)" }
            report.healthy = true
            report.standing = requests.contains(where: { $0.machine == settings.machine }) ? "pending" : "outsider"
            let (membership, damaged) = try fleet.membership()
            report.damaged += damaged.map { "\(TerminalText.escaped($0.key)): \($0.problem)" }
            report.members = membership.members
            let identity = try fleet.identity()
            if let identity, membership.member(holding: identity)?.machine == settings.machine {
                report.standing = "member"
            }
            let (leader, ignoredLeaders) = try fleet.leaderName(membership: membership)
            report.leader = leader
            report.damaged += ignoredLeaders.map { "\(TerminalText.escaped($0.key)): \($0.problem)" }
            report.alarm = fleet.alarm().map { FleetStatusReport.Alarm($0) }
            report.removedAccess = fleet.removedMachinesAccess().map {
                FleetStatusReport.RemovedAccess(machine: $0.machine, access: $0.access)
            }
            for slot in try fleet.sharedSlots() {
                let note = try fleet.refreshedNote(slot, membership: membership)
                let state = SharedSlotState.loadIfReadable(slot, paths: paths)
                var entry = FleetStatusReport.SharedSlot(
                    slot: slot,
                    refreshedBy: note?.machine,
                    refreshedAt: note?.at,
                    local: state != nil,
                    localCurrent: false,
                    uploadPending: state?.uploadPending ?? false,
                    generation: 0,
                    problem: nil
                )
                if let identity, report.standing == "member" {
                    switch readShared(slot, fleet: fleet, identity: identity, membership: membership, record: nil) {
                    case .value(let value):
                        if value.credential == nil { continue }  // a tombstone: no longer shared
                        entry.generation = value.generation
                        entry.localCurrent = state?.generation == value.generation
                    case .missing: continue
                    case .failed(let error): entry.problem = error.userFacingDescription
                    }
                }
                report.slots.append(entry)
            }
        } catch {
            report.problem = error.userFacingDescription
        }
        return report
    }
}

extension SharedSlotState {
    /// Remembers the fleet's value as this machine's copy: one it wrote, or one it found to be
    /// its own (the fleet holds what this machine holds). Nothing is left to upload.
    mutating func record(_ value: SharedValue) {
        revision = value.modRevision
        generation = max(generation, value.generation)
        uploadPending = false
        writer = value.writer
    }
}
