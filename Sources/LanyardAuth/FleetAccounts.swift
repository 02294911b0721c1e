import FoundationEssentials
import LanyardCore
import LanyardSupport
import LanyardStore
import LanyardFleet

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
    /// A local slot of the same name is not shared: left alone.
    case conflict
    /// The fleet's copy was refused (see the message).
    case refused
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
    }

    public var fleet: String
    public var machine: String
    public var endpoints: [EtcdEndpointStatus]
    /// Whether a majority answered a linearizable read.
    public var healthy: Bool
    public var problem: String?
    public var members: [FleetMember]
    public var pending: [FleetMember]
    public var slots: [SharedSlot]
    /// The agent that leads refreshes (nil: none running).
    public var leader: String?
    /// This machine's standing: `member`, `pending`, `outsider`, or `unknown` (etcd did not answer).
    public var standing: String
}

extension AccountManager {
    /// `fleet init`: creates the fleet in etcd with this machine as its first member.
    package func fleetCreate() throws -> FleetMember { try openFleet().create() }

    /// `fleet join`: asks to join; a member approves with the fingerprint printed here.
    package func fleetJoin() throws -> FleetMember { try openFleet().requestJoin() }

    /// `fleet approve`: admits a machine whose fingerprint the person checked; every shared slot
    /// is re-encrypted to it. - Returns: the member and the slots re-encrypted.
    package func fleetApprove(machine: String, fingerprint: String) throws -> (FleetMember, [Slot]) {
        try openFleet().approve(machine: machine, fingerprint: fingerprint)
    }

    /// `fleet remove`: the member can no longer read what is written from now on.
    /// - Returns: the slots it could read (refresh them so its copies stop working).
    package func fleetRemove(machine: String) throws -> [Slot] { try openFleet().remove(machine: machine) }

    /// `fleet share`: puts the slot's credential in the fleet, encrypted to every member.
    package func fleetShare(_ slot: Slot) async throws -> Int64 {
        let fleet = try openFleet()
        let lock = try await lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        if SharedSlotState.loadIfReadable(slot, paths: paths) != nil { throw FleetError.alreadyShared(slot: slot, fleet: fleet.name) }
        let (_, store) = try storeOf(slot)
        let credential = try read(slot, store)
        let revision = try fleet.share(slot, credential: credential)
        try SharedSlotState(fleet: fleet.name, revision: revision).save(slot, paths: paths)
        eventLog.append("fleet", slot: slot, fields: ["action": .string("shared"), "fleet": .string(fleet.name)])
        return revision
    }

    /// `fleet unshare`: removes the slot from the fleet; this machine keeps its copy as its own.
    package func fleetUnshare(_ slot: Slot) async throws {
        let fleet = try openFleet()
        let lock = try await lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        try fleet.unshare(slot)
        try forgetShared(slot, fleet: fleet.name)
    }

    /// A new sign-in of a shared slot becomes the slot's credential for the whole fleet, in place
    /// of whatever the fleet holds: this is how a fleet recovers from a session that died on every
    /// machine. Written under the fleet lock; when the fleet cannot take it, it stays here marked
    /// `upload_pending`, and the next refresh, `fleet sync` or the agent writes it (unless another
    /// machine writes the slot first, whose copy is then adopted).
    func shareSignIn(_ slot: Slot, _ credential: Credential, state initial: SharedSlotState) async -> FleetSignInOutcome {
        var state = initial
        state.uploadPending = true
        state.signInPending = true
        do {
            let fleet = try openFleet()
            let pending = state
            guard try await Self.blocking({ try self.writeSignIn(slot, credential, fleet: fleet, state: pending) }) != nil else {
                try forgetShared(slot, fleet: fleet.name)
                return .unshared(fleet: fleet.name)
            }
            return .written(fleet: fleet.name)
        } catch {
            try? state.save(slot, paths: paths)
            let reason = error.userFacingDescription
            eventLog.append("error", slot: slot, fields: ["code": .string("fleet_write_pending"),
                                                          "message": .string("the new sign-in is kept here and will be written to fleet \(state.fleet) on the next sync: \(reason)")])
            return .pending(fleet: state.fleet, reason: reason)
        }
    }

    /// Writes a sign-in made on this machine to the fleet, in place of whatever it holds, under
    /// the fleet lock. - Returns: the state after the write (saved); nil when the slot is no
    /// longer shared in the fleet (the caller forgets it: ``forgetShared(_:fleet:)``).
    func writeSignIn(_ slot: Slot, _ credential: Credential, fleet: Fleet, state: SharedSlotState) throws -> SharedSlotState? {
        let lock = try fleet.lock(slot, httpTimeout: config.httpTimeout)
        defer { lock.release() }
        guard let written = try fleet.replace(slot, credential: credential, under: lock) else { return nil }
        var next = state
        next.revision = written
        next.uploadPending = false
        next.signInPending = false
        try next.save(slot, paths: paths)
        eventLog.append("fleet", slot: slot, fields: ["action": .string("signed-in"), "fleet": .string(fleet.name),
                                                      "revision": .string(String(written))])
        return next
    }

    /// The slot is no longer shared (unshared here or elsewhere): this machine's copy is its own again.
    func forgetShared(_ slot: Slot, fleet: String) throws {
        try SharedSlotState.remove(slot, paths: paths)
        eventLog.append("fleet", slot: slot, fields: ["action": .string("unshared"), "fleet": .string(fleet)])
    }

    /// `fleet sync` (and the agent, on each change it sees): brings every shared slot's local
    /// copy up to the fleet's, creating slots this machine does not have yet.
    package func fleetSync(only: Slot? = nil) async throws -> [(Slot, FleetSyncOutcome, String?)] {
        let fleet = try openFleet()
        let identity = try fleet.memberIdentity()
        var results: [(Slot, FleetSyncOutcome, String?)] = []
        for slot in try fleet.sharedSlots() where only == nil || only == slot {
            let lock = try await lockSlot(slot)
            defer { withExtendedLifetime(lock) {} }
            do {
                results.append((slot, try syncShared(slot, fleet: fleet, identity: identity), nil))
            } catch let error as FleetError {
                if case .refusedCredential = error { results.append((slot, .refused, error.userFacingDescription)); continue }
                throw error
            }
        }
        return results
    }

    /// One slot of ``fleetSync(only:)``, under the slot's local lock.
    func syncShared(_ slot: Slot, fleet: Fleet, identity: MachineIdentity) throws -> FleetSyncOutcome {
        let registryDoc = try registry.load()
        let record = registryDoc.slots[slot]
        var state = try SharedSlotState.load(slot, paths: paths)
        if record != nil && state == nil { return .conflict }
        guard let (credential, revision) = try fleet.newest(slot, identity: identity, account: record?.account, provider: record?.provider) else {
            return .current
        }
        guard let record, var known = state else {
            // New here: a slot in the store new slots use, with the fleet's credential.
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
                made.lastRefresh = adopted.lastRefresh
                doc.slots[slot] = made
                if doc.active == nil { doc.active = slot }
            }
            state = SharedSlotState(fleet: fleet.name, revision: revision)
            try state?.save(slot, paths: paths)
            eventLog.append("adopt", slot: slot, fields: ["revision": .string(String(revision)), "expires_at": .date(adopted.tokens.expiresAt)])
            return .added
        }
        let store = try openStore(record.backend, false)
        // Tokens a killed refresh left in the recovery file are this machine's newest: in place first.
        _ = try RecoveryFile(paths: paths, slot: slot).settle(into: store, slot: slot)
        let local = try read(slot, store)
        if known.signInPending {
            if try writeSignIn(slot, local, fleet: fleet, state: known) != nil { return .uploaded }
            try forgetShared(slot, fleet: fleet.name)
            return .current
        }
        let relation = Self.relation(local: local, fleet: credential)
        if relation == .fleetOlder {
            // This machine refreshed last and the fleet holds the token it spent: write it there at
            // once (see Fleet.writeSuccessor).
            if let written = try fleet.writeSuccessor(slot, credential: local, replacing: revision) {
                known.revision = written
                known.uploadPending = false
                try known.save(slot, paths: paths)
                return .uploaded
            }
            return .current
        }
        if known.uploadPending && revision == known.revision {
            // This machine refreshed last and the fleet does not have it yet: write it there.
            let lock = try fleet.lock(slot, httpTimeout: config.httpTimeout)
            defer { lock.release() }
            if let written = try fleet.write(slot, credential: local, replacing: revision, under: lock) {
                known.revision = written
                known.uploadPending = false
                try known.save(slot, paths: paths)
                return .uploaded
            }
            return .current
        }
        if relation == .same {
            if revision != known.revision || known.uploadPending {
                known.revision = revision
                known.uploadPending = false
                try known.save(slot, paths: paths)
            }
            return .current
        }
        if revision == known.revision { return .current }
        _ = try adopt(slot, credential, revision: revision, store: store, state: &known)
        return .adopted
    }

    /// `fleet status`.
    package func fleetStatus() -> FleetStatusReport {
        guard let settings = config.fleet else {
            return FleetStatusReport(fleet: "", machine: "", endpoints: [], healthy: false, problem: FleetError.notConfigured(configFile: paths.configFile).userFacingDescription,
                                     members: [], pending: [], slots: [], leader: nil, standing: "outsider")
        }
        var report = FleetStatusReport(fleet: settings.name, machine: settings.machine, endpoints: [], healthy: false, problem: nil,
                                       members: [], pending: [], slots: [], leader: nil, standing: "unknown")
        let fleet: Fleet
        do { fleet = try openFleet() } catch {
            report.problem = error.userFacingDescription
            return report
        }
        report.endpoints = fleet.kv.endpointStatus()
        do {
            report.members = try fleet.members()
            report.pending = try fleet.pendingMembers()
            report.healthy = true
            report.standing = "outsider"
            let recipient = try? fleet.identity()?.recipient
            if report.members.contains(where: { $0.machine == settings.machine && $0.recipient == recipient }) {
                report.standing = "member"
            } else if report.pending.contains(where: { $0.machine == settings.machine }) {
                report.standing = "pending"
            }
            report.leader = try fleet.leaderName()
            for slot in try fleet.sharedSlots() {
                let note = try fleet.refreshedNote(slot)
                let state = SharedSlotState.loadIfReadable(slot, paths: paths)
                let revision = try fleet.etcd { try fleet.kv.get(fleet.keys.slot(slot))?.modRevision }
                report.slots.append(.init(slot: slot, refreshedBy: note?.machine, refreshedAt: note?.at, local: state != nil,
                                          localCurrent: state?.revision == revision, uploadPending: state?.uploadPending ?? false))
            }
        } catch {
            report.problem = error.userFacingDescription
        }
        return report
    }
}
