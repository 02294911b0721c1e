import LanyardCore
import LanyardStore

/// The fleet protocol's decisions for one shared slot, as one pure function over what this
/// machine holds (its copy and ``SharedSlotState``) and what it read from etcd (the verified
/// value, or why there is none, and the refresh intent). Every path that touches a shared slot
/// (a due refresh before and under the fleet lock, `fleet sync`, the agent) asks it, so the rules
/// live in one place and are tested as a table (FleetDecisionTests).
package enum SharedSlotDecision {
    /// What to do with the slot.
    package enum Step: Equatable, Sendable {
        /// The local copy is the fleet's value: nothing to change (but remember its generation).
        case current
        /// The fleet's value is newer (another machine refreshed or signed in): take it.
        case adopt
        /// This machine's tokens replaced the fleet's (its refresh token is spent at the
        /// provider): write them as the next generation at once.
        case upload
        /// A refresh or sign-in made here is not in the fleet yet and the fleet still holds the
        /// value it came from: write it (under the lock).
        case uploadPending
        /// The slot was unshared by this machine: its copy is its own again.
        case keptHere
        /// The slot was unshared by `machine`, which kept the live credential.
        case handedOver(machine: String)
        /// Nothing from the fleet can be used (a value deleted, rolled back, refused, or the
        /// fleet itself untrusted): a valid token is served, none is refreshed.
        case refuse(FleetError)
    }

    /// What etcd gave for the slot.
    package enum Read: Sendable {
        case value(SharedValue)
        case missing
        case failed(FleetError)
    }

    /// The step for `slot`, given the local copy `local` (nil: not on this machine), its `state`
    /// (nil: not known as shared here) and what was read.
    package static func step(
        slot: Slot,
        fleet: String,
        machine: String,
        local: Credential?,
        state: SharedSlotState?,
        read: Read
    ) -> Step {
        let seen = state?.generation ?? 0
        // A value older than one a member signed and this machine saw, even without adopting it.
        let newest = max(seen, state?.evidence ?? 0)
        if local != nil, let state, state.signInPending, state.handedOverTo == nil {
            // A sign-in made here replaces whatever the fleet holds (a value deleted, put back or
            // refused; a session that died): it is how a fleet recovers. Only what stops every
            // write stops it.
            if case .failed(let error) = read, Self.stopsWrites(error) { return .refuse(error) }
            if case .value(let v) = read, v.credential == nil, v.generation > seen {
                return v.writer == machine ? .keptHere : .handedOver(machine: v.writer)
            }
            return .uploadPending
        }
        let value: SharedValue
        switch read {
        case .failed(let error): return .refuse(error)
        case .missing:
            // A deleted value never turns a shared slot into a local one: that would let two
            // machines spend one refresh token.
            return .refuse(.valueMissing(slot: slot, fleet: fleet))
        case .value(let v): value = v
        }
        if value.generation < newest {
            return .refuse(
                .refusedCredential(
                    slot: slot,
                    fleet: fleet,
                    reason: "its generation \(value.generation) is older than "
                        + "generation \(newest) seen here (a value put back)"
                )
            )
        }
        guard let fleetCredential = value.credential else {
            return value.writer == machine ? .keptHere : .handedOver(machine: value.writer)
        }
        if let handed = state?.handedOverTo, value.generation == seen { return .handedOver(machine: handed) }
        guard let local, let state else { return .adopt }
        switch relation(local: local, fleet: fleetCredential) {
        case .same: return .current
        case .fleetOlder: return .upload
        case .other:
            if value.generation > seen { return .adopt }
            return state.uploadPending ? .uploadPending : .current
        }
    }

    /// Whether `error` stops every write for the fleet (nothing to do but wait or ask a person).
    package static func stopsWrites(_ error: FleetError) -> Bool {
        switch error {
        case .unavailable, .membershipBehind, .forked, .untrustedFleet, .notMember, .notJoined, .identityUnavailable:
            return true
        default: return false
        }
    }

    /// Why this machine must not present `refreshToken` now, nil when it may: another machine
    /// recorded that it is presenting the same token and has not written the successor.
    package static func refreshBlocked(
        slot: Slot,
        fleet: String,
        machine: String,
        refreshToken: String?,
        intent: RefreshIntent?
    ) -> FleetError? {
        guard let intent, let refreshToken, intent.machine != machine, intent.token == TokenFingerprint.of(refreshToken)
        else { return nil }
        return .refreshInFlight(slot: slot, fleet: fleet, machine: intent.machine)
    }

    /// What the lock holder does with tokens the provider just issued (`refreshed`, whose
    /// predecessor it presented) when its fenced write failed: the fleet's value is no longer
    /// the one it replaced (`replaced`). `now` is what etcd holds now; `seen` the highest
    /// generation this machine has seen.
    package enum AfterFailedWrite: Equatable, Sendable {
        /// An earlier attempt of ours landed (its answer was lost): done.
        case landed(SharedValue)
        /// Write the tokens as `generation`, fenced on the lock and on what stands now: the value
        /// vanished, or was put back or replaced by one holding a token this refresh spent (or by
        /// one no member signed). Leaving it would hand a spent token to the next machine.
        case overwrite(generation: Int64)
        /// Keep the tokens here, marked pending: the lock is lost, the membership cannot be
        /// trusted, or a newer value another member wrote stands (ours are then the older).
        case keepHere
    }

    package static func afterFailedWrite(
        refreshed: Credential,
        machine: String,
        replaced: SharedValue,
        seen: Int64,
        now: Read,
        lockHeld: Bool
    ) -> AfterFailedWrite {
        guard lockHeld else { return .keepHere }
        let floor = max(replaced.generation, seen)
        switch now {
        case .missing:
            return .overwrite(generation: floor + 1)
        case .failed(let error):
            // A value no member signed, or one rolled back, is no value.
            return stopsWrites(error) ? .keepHere : .overwrite(generation: floor + 1)
        case .value(let value):
            if value.writer == machine, let mine = value.credential,
                mine.tokens.refreshToken == refreshed.tokens.refreshToken,
                mine.tokens.accessToken == refreshed.tokens.accessToken
            {
                return .landed(value)
            }
            let held = value.credential?.tokens.refreshToken
            let holdsSpent =
                held.map { $0 == refreshed.tokens.refreshToken ? false : refreshed.hasSpent(refreshToken: $0) } ?? false
            if holdsSpent || value.generation <= replaced.generation {
                return .overwrite(generation: max(floor, value.generation) + 1)
            }
            return .keepHere
        }
    }

    /// How the fleet's copy of a shared slot stands to this machine's, by their refresh tokens.
    package enum Relation: Equatable, Sendable {
        /// The same refresh token.
        case same
        /// This machine's copy replaced the fleet's refresh token: the fleet's is spent.
        case fleetOlder
        /// Anything else: the fleet's is newer (another machine refreshed), or unrelated.
        case other
    }

    package static func relation(local: Credential, fleet: Credential) -> Relation {
        guard let mine = local.tokens.refreshToken, let theirs = fleet.tokens.refreshToken else {
            // Tokens that do not rotate (or none): the same access token is the same credential.
            return local.tokens.accessToken == fleet.tokens.accessToken
                && local.tokens.refreshToken == fleet.tokens.refreshToken ? .same : .other
        }
        if mine == theirs { return .same }
        return local.hasSpent(refreshToken: theirs) ? .fleetOlder : .other
    }
}
