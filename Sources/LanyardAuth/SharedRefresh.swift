import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

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

    /// A due refresh of a shared slot, under the slot's local lock, as one loop of
    /// read → ``SharedSlotDecision/step(slot:fleet:machine:local:state:read:)`` → ``performShared``:
    /// first without the fleet lock (what another machine refreshed is adopted without waiting
    /// for it), then once more under the lock, where the refresh intent is recorded, the provider
    /// asked, and the new credential written to the fleet (fenced by the lock and the revision
    /// read) before the local store. Whenever the fleet cannot be trusted or reached, a token that
    /// has not expired is served as it is and none is refreshed: refreshing blind could spend a
    /// refresh token another machine spent.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    func refreshShared(
        _ stored: StoredCredential,
        force: Bool,
        current local: Credential,
        state initial: SharedSlotState
    ) throws -> Credential {
        let (slot, record, store, before) = (stored.slot, stored.record, stored.store, stored.credential)
        if let machine = initial.handedOverTo {
            throw FleetError.handedOver(slot: slot, fleet: initial.fleet, machine: machine)
        }
        let fleet: Fleet
        let identity: MachineIdentity
        let membership: Membership
        do {
            fleet = try openFleet()
            (identity, membership) = try fleet.memberIdentity()
        } catch let error as FleetError {
            return try servedWithoutFleet(slot, local, error, force: force)
        }
        StartupTrace.mark("fleet membership")
        var current = local
        var state = initial
        var fleetLock: FleetLock?
        // Released on every path (an etcd delete and a lease revoke).
        defer { fleetLock?.release() }
        var lockedValue: SharedValue?
        while lockedValue == nil {
            let read = readShared(slot, fleet: fleet, identity: identity, membership: membership, record: record)
            StartupTrace.mark(fleetLock == nil ? "fleet read" : "fleet read, locked")
            let step = SharedSlotDecision.step(
                slot: slot,
                fleet: fleet.name,
                machine: fleet.machine,
                local: current,
                state: state,
                read: read
            )
            let performed: SharedPerformed
            do {
                performed = try performShared(
                    step,
                    read: read,
                    slot: slot,
                    local: current,
                    store: store,
                    state: &state,
                    fleet: fleet,
                    identity: identity,
                    lock: fleetLock
                )
            } catch let error as FleetError {
                if case .handedOver = error { throw error }
                if fleetLock != nil { return try servedWithoutFleet(slot, current, error, force: force) }
                // Without the lock a write is a head start only: the pass under the lock tries again.
                performed = .needsLock
            }
            switch performed {
            case .refused(let error):
                return try servedWithoutFleet(slot, current, error, force: force)
            case .unshared:
                return try refreshUnshared(stored, force: force, current: current)
            case .handedOver(let machine):
                throw FleetError.handedOver(slot: slot, fleet: fleet.name, machine: machine)
            case .adopted(let adopted):
                current = adopted
                if !stillDue(current, before: before, force: force) { return current }
            case .uploaded, .unchanged:
                if !stillDue(current, before: before, force: force) { return current }
            case .needsLock:
                break
            }
            if fleetLock != nil {
                guard case .value(let value) = read else {
                    return try servedWithoutFleet(
                        slot,
                        current,
                        .valueMissing(slot: slot, fleet: fleet.name),
                        force: force
                    )
                }
                lockedValue = performed.written ?? value
                continue
            }
            do {
                // A live holder's refresh ends within the request's hard limit, and then its tokens
                // are adopted here. Longer means a holder killed with the lock, whose lease can keep
                // it for a minute: a token that is still valid is served meanwhile, not held back.
                let patience = !force && stillValid(current) ? config.httpTimeout + 5 : nil
                fleetLock = try fleet.lock(slot, httpTimeout: config.httpTimeout, patience: patience)
            } catch let error as FleetError {
                return try servedWithoutFleet(slot, current, error, force: force)
            }
            StartupTrace.mark("fleet lock")
        }
        guard let lock = fleetLock, let base = lockedValue else {
            throw FleetError.lockLost(slot: slot, fleet: fleet.name)
        }

        // Never present a refresh token another machine said it is presenting.
        let intent = try? fleet.intent(slot, membership: membership)
        if let blocked = SharedSlotDecision.refreshBlocked(
            slot: slot,
            fleet: fleet.name,
            machine: fleet.machine,
            refreshToken: current.tokens.refreshToken,
            intent: intent ?? nil
        ) {
            return try servedWithoutFleet(slot, current, blocked, force: force)
        }
        // A removal rotates every shared slot at once: a value sealed before a removal this
        // machine verified is one put back (or a rotation that failed), and its refresh token may
        // be spent. Never present it; only the remover's own rotation starts from such a value.
        if let removal = membership.lastRemoval, base.headSeq > 0, base.headSeq < removal.seq,
            !RotationNote.allows(removal: removal.seq, fleet: fleet.name, paths: paths)
        {
            let refused = FleetError.refusedCredential(
                slot: slot,
                fleet: fleet.name,
                reason: "it was sealed before membership entry \(removal.seq) removed "
                    + "\(removal.machine), and a removal rotates every "
                    + "shared slot at once, so it is a value put back (or that rotation failed); "
                    + "sign the slot in again on a member "
                    + "(`lanyard login \(slot.name)`)"
            )
            return try servedWithoutFleet(slot, current, refused, force: force)
        }
        // The request must finish well inside the lease: never start it on a lease about to end.
        guard lock.held(margin: config.httpTimeout + 5) else {
            throw FleetError.lockLost(slot: slot, fleet: fleet.name)
        }
        if let token = current.tokens.refreshToken {
            let recorded: Bool
            do {
                recorded = try fleet.writeIntent(
                    slot,
                    current: base,
                    refreshToken: token,
                    identity: identity,
                    under: lock
                )
            } catch let error as FleetError {
                return try servedWithoutFleet(slot, current, error, force: force)
            }
            guard recorded else { throw FleetError.lockLost(slot: slot, fleet: fleet.name) }
        }
        StartupTrace.mark("fleet intent")
        let refreshed = try exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
        StartupTrace.mark("provider refresh")
        // The recovery file, the fleet and the store, in that order.
        try keepRefreshed(
            slot: slot,
            refreshed,
            previous: current,
            store: store,
            share: {
                do {
                    if let written = try fleet.writeRefreshed(
                        slot,
                        credential: refreshed,
                        replacing: base,
                        under: lock,
                        identity: identity,
                        membership: membership,
                        seen: max(state.generation, state.evidence)
                    ) {
                        state.record(written)
                    } else {
                        state.uploadPending = true
                    }
                } catch {
                    state.uploadPending = true
                }
            }
        )
        try state.save(slot, paths: paths)
        StartupTrace.mark("fleet write, stored")
        if state.uploadPending {
            eventLog.appendError(
                .fleetWritePending,
                slot: slot,
                message:
                    "the refreshed tokens are kept here and will be written to fleet \(fleet.name) on the next sync"
            )
        }
        return refreshed
    }

    /// What ``performShared`` did with one step.
    enum SharedPerformed {
        /// Nothing changed here (the fleet's revision may have been recorded).
        case unchanged
        /// The fleet's newer credential is now this machine's.
        case adopted(Credential)
        /// This machine's credential is now the fleet's value (the one written).
        case uploaded(SharedValue)
        /// The step is made only under the fleet lock, which is not held: take it and read again.
        case needsLock
        /// The slot is no longer shared: its copy here is this machine's own.
        case unshared
        /// Another machine kept the slot when it was unshared; the copy here is dead.
        case handedOver(machine: String)
        /// Nothing from the fleet can be used.
        case refused(FleetError)

        /// The value this step wrote to the fleet, if it wrote one.
        var written: SharedValue? {
            if case .uploaded(let value) = self { return value }
            return nil
        }
    }

    /// Carries out one ``SharedSlotDecision`` step for a shared slot this machine holds: the one
    /// place where a refresh (before and under the fleet lock), `fleet sync` and the agent act on
    /// a decision. A write is fenced on the fleet lock when `lock` is held, on the value read
    /// otherwise; `.uploadPending` waits for the lock, `.upload` does not (the fleet's refresh
    /// token is spent: leaving it would hand it to the next machine).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func performShared(
        _ step: SharedSlotDecision.Step,
        read: SharedSlotDecision.Read,
        slot: Slot,
        local: Credential,
        store: any CredentialStore,
        state: inout SharedSlotState,
        fleet: Fleet,
        identity: MachineIdentity,
        lock: FleetLock?
    ) throws -> SharedPerformed {
        switch step {
        case .refuse(let error):
            return .refused(error)
        case .keptHere:
            try forgetShared(slot, fleet: fleet.name)
            return .unshared
        case .handedOver(let machine):
            if state.handedOverTo == nil, case .value(let value) = read {
                try markHandedOver(slot, to: machine, generation: value.generation, store: store, state: &state)
            }
            return .handedOver(machine: machine)
        case .adopt:
            guard case .value(let value) = read, let credential = value.credential else { return .unchanged }
            return .adopted(try adopt(slot, credential, value: value, store: store, state: &state))
        case .current:
            if case .value(let value) = read,
                value.generation != state.generation || value.modRevision != state.revision || state.uploadPending
            {
                state.record(value)
                try state.save(slot, paths: paths)
            }
            return .unchanged
        case .upload, .uploadPending:
            if state.signInPending {
                // A sign-in made here replaces whatever the fleet holds.
                guard let written = try writeSignIn(slot, local, fleet: fleet, state: &state, under: lock) else {
                    try forgetShared(slot, fleet: fleet.name)
                    return .unshared
                }
                return .uploaded(written)
            }
            guard case .value(let value) = read, step == .upload || lock != nil else { return .needsLock }
            guard
                let written = try fleet.write(
                    slot,
                    credential: local,
                    replacing: value,
                    identity: identity,
                    fence: lock?.fence
                )
            else {
                return .unchanged
            }
            state.record(written)
            try state.save(slot, paths: paths)
            return .uploaded(written)
        }
    }

    /// The slot was unshared from this machine (a tombstone of its own): its copy is its own again.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    private func refreshUnshared(_ stored: StoredCredential, force: Bool, current: Credential) throws -> Credential {
        if !stillDue(current, before: stored.credential, force: force) { return current }
        let refreshed = try exchangeRefreshToken(
            slot: stored.slot,
            current: current,
            record: stored.record,
            store: stored.store
        )
        try keepRefreshed(slot: stored.slot, refreshed, previous: current, store: stored.store)
        return refreshed
    }

    /// A shared slot this machine found dead (its refresh token refused, or handed over): a
    /// sign-in on another machine, or the slot shared again, may have put a live credential in the
    /// fleet since. Adopted when the fleet's value is a newer generation than any seen here;
    /// otherwise, or without the fleet, the slot still needs a sign-in. Under the slot's local lock.
    func reviveShared(_ slot: Slot, store: any CredentialStore, state initial: SharedSlotState) throws -> Credential {
        let record = try record(of: slot)  // another process may have revived it while we waited
        if record.state != .reauthenticationRequired { return try read(slot, store) }
        let dead: any Error =
            initial.handedOverTo.map { FleetError.handedOver(slot: slot, fleet: initial.fleet, machine: $0) }
            ?? ClientError.reauthenticationRequired(
                slot: slot.name,
                reason: record.lastErrorCode ?? "the session ended"
            )
        var state = initial
        guard let fleet = try? openFleet(), let (identity, membership) = try? fleet.memberIdentity(),
            let value = try? fleet.newest(
                slot,
                identity: identity,
                membership: membership,
                account: record.account,
                provider: record.provider
            ),
            let credential = value.credential, value.generation > state.generation
        else { throw dead }
        return try adopt(slot, credential, value: value, store: store, state: &state)
    }

    /// Whether `slot` is shared from this machine's point of view: a slot handed over, or one
    /// whose fleet removed this machine, is not (it can be signed out here; the fleet is left alone).
    func sharedHere(_ slot: Slot) -> SharedSlotState? {
        guard let state = SharedSlotState.loadIfReadable(slot, paths: paths), state.handedOverTo == nil else {
            return nil
        }
        if let fleet = try? openFleet(), let identity = try? fleet.identity(),
            let (membership, _) = try? fleet.membership(), membership.member(holding: identity) == nil,
            (try? fleet.kv.get(fleet.keys.pending(fleet.machine))) == nil
        {
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
    func adopt(
        _ slot: Slot,
        _ credential: Credential,
        value: SharedValue,
        store: any CredentialStore,
        state: inout SharedSlotState
    ) throws -> Credential {
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
        eventLog.append(
            "adopt",
            slot: slot,
            fields: [
                "revision": .string(String(value.modRevision)), "generation": .string(String(value.generation)),
                "expires_at": .date(adopted.tokens.expiresAt),
            ]
        )
        return adopted
    }

    /// Whether `credential`, which a refresh of `slot` returned, was adopted from another machine
    /// of the fleet rather than refreshed here: that machine's name, nil otherwise.
    package func adoptedFrom(_ slot: Slot, _ credential: Credential) -> String? {
        guard credential.lastRefreshBoot == nil, let state = SharedSlotState.loadIfReadable(slot, paths: paths),
            let writer = state.writer, writer != config.fleet?.machine
        else { return nil }
        return writer
    }

    /// Without a fleet to trust: the local token when it has not expired (logged, once per call),
    /// else an error that says why it cannot be refreshed. A forced refresh (`lanyard refresh`)
    /// fails with the fleet's error instead.
    func servedWithoutFleet(
        _ slot: Slot,
        _ current: Credential,
        _ error: FleetError,
        force: Bool = false
    ) throws -> Credential {
        // A refresh asked for explicitly is not done: say so rather than hand back the old token.
        if force { throw error }
        let valid = stillValid(current)
        switch error {
        case .unavailable(let fleet, let endpoints, let detail, let cause) where !valid:
            throw FleetError.expiredWhileUnavailable(
                slot: slot,
                fleet: fleet,
                endpoints: endpoints,
                detail: detail,
                cause: cause
            )
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
}
