import FoundationEssentials
import Dispatch
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
    /// already refreshed; otherwise take the fleet lock, read the fleet's copy again, refresh, and
    /// write the new credential to the fleet (fenced by the lock and the revision read) before the
    /// local store. Without the fleet, a token that has not expired is served as it is; an expired
    /// one is an error: refreshing it blind could spend a refresh token another machine spent.
    func refreshShared(slot: Slot, force: Bool, record: SlotRecord, store: any CredentialStore, before: Credential,
                       current local: Credential, state initial: SharedSlotState) async throws -> Credential {
        let fleet: Fleet
        let identity: MachineIdentity
        do {
            fleet = try openFleet()
            guard let id = try fleet.identity() else { throw FleetError.identityUnavailable(detail: "this machine has none: run `lanyard fleet join`") }
            identity = id
        } catch let error as FleetError {
            return try servedWithoutFleet(slot, local, error, force: force)
        }
        var current = local
        var state = initial
        if state.signInPending {
            // A sign-in made here while the fleet was unreachable: it replaces what the fleet holds.
            // (Unshared meanwhile: the fleet's copy is gone too, and the next step finds that.)
            do {
                let (pending, signedIn) = (state, current)
                if let written = try await Self.blocking({ try self.writeSignIn(slot, signedIn, fleet: fleet, state: pending) }) {
                    state = written
                    if !stillDue(current, before: before, force: force) { return current }
                }
            } catch let error as FleetError {
                return try servedWithoutFleet(slot, current, error, force: force)
            }
        }
        do {
            guard let (newest, revision) = try fleet.newest(slot, identity: identity, account: record.account, provider: record.provider) else {
                // Unshared elsewhere: the slot is this machine's own again.
                try forgetShared(slot, fleet: fleet.name)
                if !stillDue(current, before: before, force: force) { return current }
                let refreshed = try await exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
                try keepRefreshed(slot: slot, refreshed, previous: current, store: store)
                return refreshed
            }
            if Self.relation(local: current, fleet: newest) == .fleetOlder {
                // Our tokens replaced the fleet's (a refresh whose fleet write never landed): its
                // refresh token is spent, so they go to the fleet now, not after waiting for the
                // lock, which a killed holder's lease can keep for a while.
                if let written = try fleet.writeSuccessor(slot, credential: current, replacing: revision) {
                    state.revision = written
                    state.uploadPending = false
                    try state.save(slot, paths: paths)
                    if !stillDue(current, before: before, force: force) && !force { return current }
                }
            } else if revision != state.revision && !state.uploadPending {
                current = try adopt(slot, newest, revision: revision, store: store, state: &state)
                if !stillDue(current, before: before, force: force) { return current }
            }
        } catch let error as FleetError {
            return try servedWithoutFleet(slot, current, error, force: force)
        }

        let lock: FleetLock
        do {
            // A live holder's refresh ends within the request's hard limit, and then its tokens
            // are adopted here. Longer means a holder killed with the lock, whose lease can keep
            // it for a minute: a token that is still valid is served meanwhile, not held back.
            let patience = !force && stillValid(current) ? config.httpTimeout + 5 : nil
            lock = try await Self.blocking { try fleet.lock(slot, httpTimeout: self.config.httpTimeout, patience: patience) }
        } catch let error as FleetError {
            return try servedWithoutFleet(slot, current, error, force: force)
        }
        defer { lock.release() }
        do {
            guard let (latest, revision) = try fleet.newest(slot, identity: identity, account: record.account, provider: record.provider) else {
                throw FleetError.notShared(slot: slot, fleet: fleet.name)
            }
            switch Self.relation(local: current, fleet: latest) {
            case .fleetOlder:
                // This machine's tokens replaced the fleet's (a refresh whose fleet write never
                // landed: its process was killed after the recovery file, or etcd failed): write
                // them, or the next machine to refresh would spend the fleet's dead token.
                if let written = try fleet.write(slot, credential: current, replacing: revision, under: lock) {
                    state.revision = written
                    state.uploadPending = false
                    try state.save(slot, paths: paths)
                }
                if !stillDue(current, before: before, force: force) { return current }
            case .same where revision != state.revision || state.uploadPending:
                // Our own write landed though its answer was lost, or the same tokens re-sealed.
                state.revision = revision
                state.uploadPending = false
                try state.save(slot, paths: paths)
                if !stillDue(current, before: before, force: force) { return current }
            case _ where revision != state.revision:
                // Another machine refreshed while we waited for the lock (or after our write
                // landed): use its tokens.
                current = try adopt(slot, latest, revision: revision, store: store, state: &state)
                if !refreshRule.needsRefresh(current, now: clock.now(), boot: clock.bootInstant()) { return current }
            case _ where state.uploadPending:
                // Our last refresh could not be written to the fleet: write it now.
                if let written = try fleet.write(slot, credential: current, replacing: revision, under: lock) {
                    state.revision = written
                    state.uploadPending = false
                    try state.save(slot, paths: paths)
                }
                if !stillDue(current, before: before, force: force) { return current }
            default:
                if !stillDue(current, before: before, force: force) { return current }
            }
        } catch let error as FleetError {
            if case .notShared = error { throw error }
            return try servedWithoutFleet(slot, current, error, force: force)
        }
        // The request must finish well inside the lease: never start it on a lease about to end.
        guard lock.held(margin: config.httpTimeout + 5) else { throw FleetError.lockLost(slot: slot, fleet: fleet.name) }
        let refreshed = try await exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
        var next = state
        try keepRefreshed(slot: slot, refreshed, previous: current, store: store, share: {
            do {
                if let written = try fleet.writeRefreshed(slot, credential: refreshed, replacing: state.revision, under: lock, identity: identity) {
                    next.revision = written
                    next.uploadPending = false
                } else {
                    next.uploadPending = true
                }
            } catch {
                next.uploadPending = true
            }
        })
        try next.save(slot, paths: paths)
        if next.uploadPending {
            eventLog.append("error", slot: slot, fields: ["code": .string("fleet_write_pending"),
                                                          "message": .string("the refreshed tokens are kept here and will be written to fleet \(fleet.name) on the next sync")])
        }
        return refreshed
    }

    /// A shared slot this machine found dead (its refresh token refused): a sign-in on another
    /// machine may have put a live credential in the fleet since. Adopted when the fleet's copy is
    /// newer than the one that died here; otherwise, or without the fleet, the slot still needs a
    /// sign-in. Under the slot's local lock.
    func reviveShared(_ slot: Slot, store: any CredentialStore, state initial: SharedSlotState) throws -> Credential {
        let record = try record(of: slot)  // another process may have revived it while we waited
        if record.state != .reauthenticationRequired { return try read(slot, store) }
        let dead = ClientError.reauthenticationRequired(slot: slot.name, reason: record.lastErrorCode ?? "the session ended")
        var state = initial
        guard let fleet = try? openFleet(), let identity = try? fleet.identity(),
              let (newest, revision) = try? fleet.newest(slot, identity: identity, account: record.account, provider: record.provider),
              revision != state.revision else { throw dead }
        return try adopt(slot, newest, revision: revision, store: store, state: &state)
    }

    /// A shared slot belongs to every machine of its fleet: signing it out (which may revoke the
    /// session at the provider), renaming or removing it on one machine would pull it from under
    /// the others. `fleet unshare` first.
    func refuseIfShared(_ slot: Slot, _ action: String) throws {
        guard let state = SharedSlotState.loadIfReadable(slot, paths: paths) else { return }
        throw FleetError.sharedSlotRefused(slot: slot, fleet: state.fleet, action: action)
    }

    /// How the fleet's copy of a shared slot stands to this machine's, by their refresh tokens.
    enum FleetCopy: Equatable {
        /// The same refresh token.
        case same
        /// This machine's copy replaced the fleet's refresh token: the fleet's is spent.
        case fleetOlder
        /// Anything else: the fleet's is newer (another machine refreshed), or unrelated.
        case other
    }

    static func relation(local: Credential, fleet: Credential) -> FleetCopy {
        guard let mine = local.tokens.refreshToken, let theirs = fleet.tokens.refreshToken else { return .other }
        if mine == theirs { return .same }
        return local.hasSpent(refreshToken: theirs) ? .fleetOlder : .other
    }

    /// Puts the fleet's newer credential into the local store and records its revision.
    func adopt(_ slot: Slot, _ credential: Credential, revision: Int64, store: any CredentialStore, state: inout SharedSlotState) throws -> Credential {
        var adopted = credential
        adopted.lastRefreshBoot = nil  // measured on another machine's boot clock
        try store.put(adopted, for: slot)
        try recordStored(slot: slot, adopted)
        state.revision = revision
        state.uploadPending = false
        try state.save(slot, paths: paths)
        eventLog.append("adopt", slot: slot, fields: ["revision": .string(String(revision)),
                                                      "expires_at": .date(adopted.tokens.expiresAt)])
        return adopted
    }

    /// Without the fleet: the local token when it has not expired (logged, once per call), else
    /// the fleet's error as one that says the token expired. A forced refresh (`lanyard refresh`)
    /// fails with the fleet's error instead.
    func servedWithoutFleet(_ slot: Slot, _ current: Credential, _ error: FleetError, force: Bool = false) throws -> Credential {
        // A refresh asked for explicitly is not done: say so rather than hand back the old token.
        if force { throw error }
        let valid = stillValid(current)
        switch error {
        case .unavailable(let fleet, let endpoints, let detail) where !valid:
            throw FleetError.expiredWhileUnavailable(slot: slot, fleet: fleet, endpoints: endpoints, detail: detail)
        case .unavailable where valid, .lockTimeout where valid:
            eventLog.append("error", slot: slot, fields: ["code": .string(error.code), "message": .string(error.userFacingDescription + "; the token is due but still valid: served as it is")])
            return current
        default:
            throw error
        }
    }

    /// Whether the credential's access token has not expired (one with no known expiry has).
    func stillValid(_ credential: Credential) -> Bool {
        credential.tokens.expiry.map { $0 > clock.now() } ?? false
    }

    /// Runs blocking etcd work off the cooperative thread pool.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
            }
        }
    }
}
