import LanyardCore
import LanyardSupport
import LanyardStore
import LanyardFleet

/// Connects to a fleet's etcd cluster (injected in tests; the gateway client otherwise).
package typealias EtcdConnector = @Sendable (FleetSettings) throws -> any EtcdKV

extension AccountManager {
    /// This machine's fleet, from `[fleet]` in config.ini.
    package func openFleet() throws -> Fleet {
        guard let settings = config.fleet else { throw FleetError.notConfigured(configFile: paths.configFile) }
        let kv = try (etcdConnector ?? FleetConnection.gateway)(settings)
        let backend = IdentityBackend.load(paths) ?? backendForNewSlot()
        let store = try openStore(backend, false)
        if IdentityBackend.load(paths) == nil { try IdentityBackend.save(backend, paths: paths) }
        let clock = self.clock
        return Fleet(settings: settings, kv: kv, paths: paths, identityStore: store, clock: { clock.now() })
    }

    /// A due refresh of a shared slot, under the slot's local lock: adopt what another machine
    /// already refreshed; otherwise take the fleet lock, read the fleet's value again, record the
    /// intent to present its refresh token, refresh, and write the new credential to the fleet
    /// (fenced by the lock and the revision read) before the local store. Whenever the fleet
    /// cannot be trusted or reached, a token that has not expired is served as it is and none is
    /// refreshed: refreshing blind could spend a refresh token another machine spent.
    /// The decisions are ``SharedSlotDecision``'s.
    func refreshShared(slot: Slot, force: Bool, record: SlotRecord, store: any CredentialStore, before: Credential,
                       current local: Credential, state initial: SharedSlotState) async throws -> Credential {
        if let machine = initial.handedOverTo { throw FleetError.handedOver(slot: slot, fleet: initial.fleet, machine: machine) }
        let fleet: Fleet
        let identity: MachineIdentity
        let membership: Membership
        do {
            (fleet, identity, membership) = try await Self.blocking {
                let fleet = try self.openFleet()
                let (identity, membership) = try fleet.memberIdentity()
                return (fleet, identity, membership)
            }
        } catch let error as FleetError {
            return try await servedWithoutFleet(slot, local, error, force: force)
        }
        StartupTrace.mark("fleet membership")
        var current = local
        var state = initial
        if state.signInPending {
            // A sign-in made here while the fleet was unreachable: it replaces what the fleet holds.
            do {
                let (pending, signedIn) = (state, current)
                if let written = try await Self.blocking({ try self.writeSignIn(slot, signedIn, fleet: fleet, state: pending) }) {
                    state = written
                    if !stillDue(current, before: before, force: force) { return current }
                }
            } catch let error as FleetError {
                return try await servedWithoutFleet(slot, current, error, force: force)
            }
        }

        // Without the lock first: another machine's refresh is adopted without waiting for it.
        let unlocked = await readSharedOffPool(slot, fleet: fleet, identity: identity, membership: membership, record: record)
        StartupTrace.mark("fleet read")
        switch SharedSlotDecision.step(slot: slot, fleet: fleet.name, machine: fleet.machine, local: current, state: state, read: unlocked) {
        case .refuse(let error):
            return try await servedWithoutFleet(slot, current, error, force: force)
        case .keptHere:
            return try await refreshUnshared(slot, fleet: fleet, force: force, record: record, store: store, before: before, current: current)
        case .handedOver(let machine):
            guard case .value(let value) = unlocked else { throw FleetError.handedOver(slot: slot, fleet: fleet.name, machine: machine) }
            try await handOver(slot, to: machine, value: value, store: store, state: state)
        case .adopt:
            if case .value(let value) = unlocked, let credential = value.credential {
                (current, state) = try await adoptOffPool(slot, credential, value: value, store: store, state: state)
                if !stillDue(current, before: before, force: force) { return current }
            }
        case .upload:
            // Our tokens replaced the fleet's (a refresh whose fleet write never landed): its
            // refresh token is spent, so they go to the fleet now, not after waiting for the
            // lock, which a killed holder's lease can keep for a while.
            if case .value(let value) = unlocked,
               let written = try? await Self.blocking({ [current] in
                   try fleet.write(slot, credential: current, replacing: value, identity: identity, fence: nil)
               }) {
                state.recordWrite(written)
                try await save(state, slot)
                if !stillDue(current, before: before, force: force) && !force { return current }
            }
        case .current, .uploadPending:
            break
        }

        let lock: FleetLock
        do {
            // A live holder's refresh ends within the request's hard limit, and then its tokens
            // are adopted here. Longer means a holder killed with the lock, whose lease can keep
            // it for a minute: a token that is still valid is served meanwhile, not held back.
            let patience = !force && stillValid(current) ? config.httpTimeout + 5 : nil
            lock = try await Self.blocking { try fleet.lock(slot, httpTimeout: self.config.httpTimeout, patience: patience) }
        } catch let error as FleetError {
            return try await servedWithoutFleet(slot, current, error, force: force)
        }
        StartupTrace.mark("fleet lock")
        // Released on every path, on the blocking executor (an etcd delete and a lease revoke).
        let outcome: Result<Credential, any Error>
        do {
            outcome = .success(try await refreshSharedLocked(slot: slot, force: force, record: record, store: store, before: before, current: current,
                                                             state: state, fleet: fleet, identity: identity, membership: membership, lock: lock))
        } catch {
            outcome = .failure(error)
        }
        await BlockingExecutor.shared.run { lock.release() }
        return try outcome.get()
    }

    /// The part of ``refreshShared`` made under the fleet lock.
    private func refreshSharedLocked(slot: Slot, force: Bool, record: SlotRecord, store: any CredentialStore, before: Credential,
                                     current initialCurrent: Credential, state initialState: SharedSlotState, fleet: Fleet,
                                     identity: MachineIdentity, membership: Membership, lock: FleetLock) async throws -> Credential {
        var current = initialCurrent
        var state = initialState

        let locked = await readSharedOffPool(slot, fleet: fleet, identity: identity, membership: membership, record: record)
        StartupTrace.mark("fleet read, locked")
        guard case .value(var base) = locked else {
            if case .failed(let error) = locked { return try await servedWithoutFleet(slot, current, error, force: force) }
            return try await servedWithoutFleet(slot, current, .valueMissing(slot: slot, fleet: fleet.name), force: force)
        }
        do {
            switch SharedSlotDecision.step(slot: slot, fleet: fleet.name, machine: fleet.machine, local: current, state: state, read: locked) {
            case .refuse(let error):
                return try await servedWithoutFleet(slot, current, error, force: force)
            case .keptHere:
                return try await refreshUnshared(slot, fleet: fleet, force: force, record: record, store: store, before: before, current: current)
            case .handedOver(let machine):
                try await handOver(slot, to: machine, value: base, store: store, state: state)
            case .adopt:
                // Another machine refreshed while we waited for the lock: use its tokens.
                if let credential = base.credential {
                    (current, state) = try await adoptOffPool(slot, credential, value: base, store: store, state: state)
                    if !refreshRule.needsRefresh(current, now: clock.now(), boot: clock.bootInstant()) { return current }
                }
            case .upload, .uploadPending:
                // This machine's tokens are newer than the fleet's (a refresh whose fleet write
                // never landed): write them, or the next machine would spend the fleet's dead token.
                if let written = try await Self.blocking({ [current, base] in
                    try fleet.write(slot, credential: current, replacing: base, identity: identity, fence: lock.fence)
                }) {
                    state.recordWrite(written)
                    try await save(state, slot)
                    base = written
                }
                if !stillDue(current, before: before, force: force) { return current }
            case .current:
                if base.generation != state.generation || base.modRevision != state.revision || state.uploadPending {
                    state.revision = base.modRevision
                    state.generation = max(state.generation, base.generation)
                    state.uploadPending = false
                    try await save(state, slot)
                }
                if !stillDue(current, before: before, force: force) { return current }
            }
        } catch let error as FleetError {
            if case .handedOver = error { throw error }
            return try await servedWithoutFleet(slot, current, error, force: force)
        }

        // Never present a refresh token another machine said it is presenting.
        let intent = try? await Self.blocking { try fleet.intent(slot, membership: membership) }
        if let blocked = SharedSlotDecision.refreshBlocked(slot: slot, fleet: fleet.name, machine: fleet.machine,
                                                           refreshToken: current.tokens.refreshToken, intent: intent ?? nil) {
            return try await servedWithoutFleet(slot, current, blocked, force: force)
        }
        // A removal rotates every shared slot at once: a value sealed before a removal this
        // machine verified is one put back (or a rotation that failed), and its refresh token may
        // be spent. Never present it; only the remover's own rotation starts from such a value.
        if let removal = membership.lastRemoval, base.headSeq > 0, base.headSeq < removal.seq,
           !(try await Self.blocking { RotationNote.allows(removal: removal.seq, fleet: fleet.name, paths: self.paths) }) {
            let refused = FleetError.refusedCredential(slot: slot, fleet: fleet.name,
                reason: "it was sealed before membership entry \(removal.seq) removed \(removal.machine), and a removal rotates every "
                    + "shared slot at once, so it is a value put back (or that rotation failed); sign the slot in again on a member "
                    + "(`lanyard login \(slot.name)`)")
            return try await servedWithoutFleet(slot, current, refused, force: force)
        }
        // The request must finish well inside the lease: never start it on a lease about to end.
        guard lock.held(margin: config.httpTimeout + 5) else { throw FleetError.lockLost(slot: slot, fleet: fleet.name) }
        if let token = current.tokens.refreshToken {
            let recorded: Bool
            do {
                recorded = try await Self.blocking { [base] in try fleet.writeIntent(slot, current: base, refreshToken: token, identity: identity, under: lock) }
            } catch let error as FleetError {
                return try await servedWithoutFleet(slot, current, error, force: force)
            }
            guard recorded else { throw FleetError.lockLost(slot: slot, fleet: fleet.name) }
        }
        StartupTrace.mark("fleet intent")
        let refreshed = try await exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
        StartupTrace.mark("provider refresh")
        // The recovery file, the fleet (libcurl) and the store, in that order: all blocking.
        try await Self.blocking { [state, base, current] in
            var next = state
            try self.keepRefreshed(slot: slot, refreshed, previous: current, store: store, share: {
                do {
                    if let written = try fleet.writeRefreshed(slot, credential: refreshed, replacing: base, under: lock,
                                                              identity: identity, membership: membership, seen: max(next.generation, next.evidence)) {
                        next.recordWrite(written)
                    } else {
                        next.uploadPending = true
                    }
                } catch {
                    next.uploadPending = true
                }
            })
            try next.save(slot, paths: self.paths)
            StartupTrace.mark("fleet write, stored")
            if next.uploadPending {
                self.eventLog.appendError(.fleetWritePending, slot: slot,
                                          message: "the refreshed tokens are kept here and will be written to fleet "
                                              + "\(fleet.name) on the next sync")
            }
        }
        return refreshed
    }

    /// The slot was unshared from this machine (a tombstone of its own): its copy is its own again.
    private func refreshUnshared(_ slot: Slot, fleet: Fleet, force: Bool, record: SlotRecord, store: any CredentialStore, before: Credential,
                                 current: Credential) async throws -> Credential {
        try await Self.blocking { try self.forgetShared(slot, fleet: fleet.name) }
        if !stillDue(current, before: before, force: force) { return current }
        let refreshed = try await exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
        try await Self.blocking { try self.keepRefreshed(slot: slot, refreshed, previous: current, store: store) }
        return refreshed
    }

    /// ``adopt(_:_:value:store:state:)`` on the blocking executor. - Returns: the adopted
    /// credential and the state after it.
    private func adoptOffPool(_ slot: Slot, _ credential: Credential, value: SharedValue, store: any CredentialStore,
                              state: SharedSlotState) async throws -> (Credential, SharedSlotState) {
        try await Self.blocking {
            var next = state
            let adopted = try self.adopt(slot, credential, value: value, store: store, state: &next)
            return (adopted, next)
        }
    }

    /// Marks the copy handed over (``markHandedOver``, on the blocking executor) and says so.
    private func handOver(_ slot: Slot, to machine: String, value: SharedValue, store: any CredentialStore, state: SharedSlotState) async throws -> Never {
        try await Self.blocking {
            var handed = state
            try self.markHandedOver(slot, to: machine, generation: value.generation, store: store, state: &handed)
        }
        throw FleetError.handedOver(slot: slot, fleet: state.fleet, machine: machine)
    }

    private func save(_ state: SharedSlotState, _ slot: Slot) async throws {
        try await Self.blocking { try state.save(slot, paths: self.paths) }
    }

    /// ``servedWithoutFleet(_:_:_:force:)``, whose event-log line is written on the blocking executor.
    func servedWithoutFleet(_ slot: Slot, _ current: Credential, _ error: FleetError, force: Bool = false) async throws -> Credential {
        try await Self.blocking { try self.servedWithoutFleet(slot, current, error, force: force) }
    }

    private func readSharedOffPool(_ slot: Slot, fleet: Fleet, identity: MachineIdentity, membership: Membership, record: SlotRecord) async -> SharedSlotDecision.Read {
        (try? await Self.blocking { self.readShared(slot, fleet: fleet, identity: identity, membership: membership, record: record) })
            ?? .failed(.unavailable(fleet: fleet.name, endpoints: fleet.settings.endpoints, detail: "the read was interrupted"))
    }

    /// A shared slot this machine found dead (its refresh token refused, or handed over): a
    /// sign-in on another machine, or the slot shared again, may have put a live credential in the
    /// fleet since. Adopted when the fleet's value is a newer generation than any seen here;
    /// otherwise, or without the fleet, the slot still needs a sign-in. Under the slot's local lock.
    func reviveShared(_ slot: Slot, store: any CredentialStore, state initial: SharedSlotState) throws -> Credential {
        let record = try record(of: slot)  // another process may have revived it while we waited
        if record.state != .reauthenticationRequired { return try read(slot, store) }
        let dead: any Error = initial.handedOverTo.map { FleetError.handedOver(slot: slot, fleet: initial.fleet, machine: $0) }
            ?? ClientError.reauthenticationRequired(slot: slot.name, reason: record.lastErrorCode ?? "the session ended")
        var state = initial
        guard let fleet = try? openFleet(), let (identity, membership) = try? fleet.memberIdentity(),
              let value = try? fleet.newest(slot, identity: identity, membership: membership, account: record.account, provider: record.provider),
              let credential = value.credential, value.generation > state.generation else { throw dead }
        return try adopt(slot, credential, value: value, store: store, state: &state)
    }

    /// Whether `slot` is shared from this machine's point of view: a slot handed over, or one
    /// whose fleet removed this machine, is not (it can be signed out here; the fleet is left alone).
    func sharedHere(_ slot: Slot) -> SharedSlotState? {
        guard let state = SharedSlotState.loadIfReadable(slot, paths: paths), state.handedOverTo == nil else { return nil }
        if let fleet = try? openFleet(), let identity = try? fleet.identity(),
           let (membership, _) = try? fleet.membership(), membership.member(holding: identity) == nil,
           (try? fleet.kv.get(fleet.keys.pending(fleet.machine))) == nil {
            return nil  // removed from the fleet (verified): its copy is its own to drop
        }
        return state
    }

    /// A shared slot belongs to every machine of its fleet: signing it out, renaming or removing
    /// it on one machine would pull it from under the others. `fleet unshare` first.
    func refuseIfShared(_ slot: Slot, _ action: String) throws {
        guard let state = sharedHere(slot) else { return }
        throw FleetError.sharedSlotRefused(slot: slot, fleet: state.fleet, action: action)
    }

    /// Puts the fleet's newer credential into the local store and records its revision and generation.
    func adopt(_ slot: Slot, _ credential: Credential, value: SharedValue, store: any CredentialStore, state: inout SharedSlotState) throws -> Credential {
        var adopted = credential
        adopted.lastRefreshBoot = nil  // measured on another machine's boot clock
        try store.put(adopted, for: slot)
        try recordStored(slot: slot, adopted)
        state.revision = value.modRevision
        state.generation = max(state.generation, value.generation)
        state.uploadPending = false
        state.handedOverTo = nil
        state.writer = value.writer
        try state.save(slot, paths: paths)
        eventLog.append("adopt", slot: slot, fields: ["revision": .string(String(value.modRevision)), "generation": .string(String(value.generation)),
                                                      "expires_at": .date(adopted.tokens.expiresAt)])
        return adopted
    }

    /// Whether `credential`, which a refresh of `slot` returned, was adopted from another machine
    /// of the fleet rather than refreshed here: that machine's name, nil otherwise.
    package func adoptedFrom(_ slot: Slot, _ credential: Credential) -> String? {
        guard credential.lastRefreshBoot == nil, let state = SharedSlotState.loadIfReadable(slot, paths: paths),
              let writer = state.writer, writer != config.fleet?.machine else { return nil }
        return writer
    }

    /// Without a fleet to trust: the local token when it has not expired (logged, once per call),
    /// else an error that says why it cannot be refreshed. A forced refresh (`lanyard refresh`)
    /// fails with the fleet's error instead.
    func servedWithoutFleet(_ slot: Slot, _ current: Credential, _ error: FleetError, force: Bool = false) throws -> Credential {
        // A refresh asked for explicitly is not done: say so rather than hand back the old token.
        if force { throw error }
        let valid = stillValid(current)
        switch error {
        case .unavailable(let fleet, let endpoints, let detail, let cause) where !valid:
            throw FleetError.expiredWhileUnavailable(slot: slot, fleet: fleet, endpoints: endpoints, detail: detail,
                                                     cause: cause)
        case .handedOver:
            throw error
        case _ where valid:
            let message = error.userFacingDescription + "; the token is due but still valid: served as it is"
            eventLog.appendError(error.code, slot: slot, message: message)
            return current
        default:
            throw error
        }
    }

    /// Whether the credential's access token has not expired (one with no known expiry has).
    func stillValid(_ credential: Credential) -> Bool {
        credential.tokens.expiry.map { $0 > clock.now() } ?? false
    }

    /// Runs blocking work (etcd, the stores, files) on the blocking executor, off the cooperative
    /// pool, to its end even when the task is cancelled meanwhile: an account operation's blocking
    /// section may keep tokens a server just issued (``BlockingExecutor/runToCompletion(_:)``).
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingExecutor.shared.runToCompletion(body)
    }
}
