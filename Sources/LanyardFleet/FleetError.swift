import FoundationEssentials
import LanyardCore
import LanyardSupport

/// What went wrong with a fleet. Descriptions name the fleet, machines and slots, never a token,
/// a key or a value read from etcd.
public enum FleetError: LanyardError, Equatable {
    /// `[fleet]` is missing from config.ini.
    case notConfigured(configFile: String)
    /// etcd could not serve the request (no endpoint answered, no quorum, TLS or permission
    /// failure): `detail` says which, naming the endpoints tried.
    case unavailable(fleet: String, endpoints: [String], detail: String, cause: ErrorCause? = nil)
    /// A shared slot's token has expired and the fleet cannot be reached to refresh it safely
    /// (`cause`: the etcd error that says why, as in ``unavailable(fleet:endpoints:detail:cause:)``).
    case expiredWhileUnavailable(
        slot: Slot,
        fleet: String,
        endpoints: [String],
        detail: String,
        cause: ErrorCause? = nil
    )
    /// `fleet init` on a fleet that already exists.
    case alreadyExists(fleet: String)
    /// The fleet has not been created (`fleet init` on one machine first).
    case noSuchFleet(fleet: String)
    /// This machine is not (yet) a member: it has asked to join, or never did.
    case notMember(fleet: String, machine: String, pending: Bool)
    /// No such member or join request.
    case unknownMachine(fleet: String, machine: String)
    /// The fingerprint given to `approve` is not the joining machine's (the right one is not
    /// said: it must be read on the joining machine's screen, not copied from an error).
    case fingerprintMismatch(machine: String, given: String)
    /// The fleet fingerprint given to `join` is not the fleet's genesis in etcd.
    case fleetFingerprintMismatch(fleet: String, given: String)
    /// This machine has not joined the configured fleet (no membership pinned for it: `[fleet] name`
    /// may be mistyped).
    case notJoined(fleet: String, pinned: String?)
    /// The fleet's membership log does not verify from this machine's pin (rolled back, forked or
    /// forged): nothing from the fleet is trusted until it does.
    case untrustedFleet(fleet: String, detail: String)
    /// A shared slot's value is missing from etcd (deleted): the slot stays shared; a valid token
    /// is served, none is refreshed.
    case valueMissing(slot: Slot, fleet: String)
    /// Another machine is presenting (or presented) this refresh token and has not written its
    /// successor: spending it here could revoke the sign-in.
    case refreshInFlight(slot: Slot, fleet: String, machine: String)
    /// The slot was unshared in the fleet, and the live credential stayed on `machine`.
    case handedOver(slot: Slot, fleet: String, machine: String)
    /// The slot is (or is not) shared, against what the command needs.
    case alreadyShared(slot: Slot, fleet: String)
    case notShared(slot: Slot, fleet: String)
    /// A credential read from etcd did not decrypt with this machine's identity, did not decode,
    /// or names another account than the slot's: it was refused and nothing local changed.
    case refusedCredential(slot: Slot, fleet: String, reason: String)
    /// The machine's own fleet identity could not be read from the local store.
    case identityUnavailable(detail: String)
    /// The fleet's lock could not be taken in time.
    case lockTimeout(slot: Slot, fleet: String, seconds: Double)
    /// The fleet lock was lost (its lease expired) before the refreshed credential was written:
    /// the new tokens were kept on this machine only.
    case lockLost(slot: Slot, fleet: String)
    /// An operation for one machine's slots asked of a shared slot (sign-out, rename, remove).
    case sharedSlotRefused(slot: Slot, fleet: String, action: String)
    /// A key of the fleet holds data that does not decode (left as it is).
    case corrupt(key: String, detail: String)
    /// A member signed something for membership entry `seq`, which this machine cannot verify
    /// (etcd lost or hid it): it writes nothing for the fleet until its log reaches that entry.
    case membershipBehind(fleet: String, seq: Int64, digest: String, signer: String, source: String)
    /// Two different entries claim number `seq` of the membership log: nothing is written until
    /// a person chooses one (`lanyard fleet resolve`).
    case forked(fleet: String, seq: Int64, digest: String, ours: String?, signer: String, source: String)
    /// `fleet resolve` with no fork standing, or with a fingerprint that is neither entry's.
    case noFork(fleet: String, given: String?)
    /// `approve` of a machine that is a member already, with a fingerprint that is not its own.
    case alreadyMember(machine: String, given: String)

    public var code: ErrorCode {
        switch self {
        case .notConfigured: return .fleetNotConfigured
        case .unavailable: return .fleetUnavailable
        case .expiredWhileUnavailable: return .fleetUnavailable
        case .alreadyExists: return .fleetExists
        case .noSuchFleet: return .fleetMissing
        case .notMember: return .fleetNotMember
        case .unknownMachine: return .fleetUnknownMachine
        case .fingerprintMismatch: return .fleetFingerprintMismatch
        case .fleetFingerprintMismatch: return .fleetPinMismatch
        case .notJoined: return .fleetNotJoined
        case .untrustedFleet: return .fleetUntrusted
        case .valueMissing: return .fleetValueMissing
        case .refreshInFlight: return .fleetRefreshInFlight
        case .handedOver: return .fleetHandedOver
        case .alreadyShared: return .fleetSlotShared
        case .notShared: return .fleetSlotNotShared
        case .refusedCredential: return .fleetCredentialRefused
        case .identityUnavailable: return .fleetIdentityUnavailable
        case .lockTimeout: return .fleetLockTimeout
        case .lockLost: return .fleetLockLost
        case .corrupt: return .fleetDataCorrupt
        case .sharedSlotRefused: return .fleetSlotShared
        case .membershipBehind: return .fleetMembershipBehind
        case .forked: return .fleetForked
        case .alreadyMember: return .fleetFingerprintMismatch
        case .noFork: return .usage
        }
    }

    public var errorDescription: String? {
        // The etcd error names each endpoint it tried; the list is added only when it does not.
        func tried(_ e: [String], _ detail: String) -> String {
            e.allSatisfy({ detail.contains($0) }) ? detail : "tried \(e.joined(separator: ", ")): \(detail)"
        }
        switch self {
        case .notConfigured(let file):
            return "no fleet is configured: add a [fleet] group "
                + "(name, endpoints, ca, cert, key) to \(file); see docs/fleet.md"
        case .unavailable(let fleet, let endpoints, let detail, _):
            return "fleet \(fleet) is unreachable: \(tried(endpoints, detail))"
        case .expiredWhileUnavailable(let slot, let fleet, let endpoints, let detail, _):
            return "slot \(slot.name)'s token has expired and fleet \(fleet) cannot be reached to refresh it safely "
                + "(\(tried(endpoints, detail))); it will be refreshed once etcd answers again"
        case .alreadyExists(let fleet):
            return "fleet \(fleet) already exists: join it with `lanyard fleet join` instead"
        case .noSuchFleet(let fleet):
            return "fleet \(fleet) does not exist yet: run `lanyard fleet init` on its first machine"
        case .notMember(let fleet, let machine, let pending):
            return pending
                ? "machine \(machine) has asked to join fleet \(fleet) but is not approved yet: "
                    + "run `lanyard fleet approve \(machine)` on a member"
                : "machine \(machine) is not a member of fleet \(fleet): "
                    + "run `lanyard fleet join` here, then approve it on a member"
        case .unknownMachine(let fleet, let machine):
            return "fleet \(fleet) has no member or join request named \(machine)"
        case .fingerprintMismatch(let machine, let given):
            return "the fingerprint given (\(TerminalText.escaped(given))) is not the "
                + "one \(machine)'s join request carries: nothing was approved; "
                + "read the fingerprint on \(machine)'s own screen (`lanyard fleet join` printed it), "
                + "or someone else asked to join under that name"
        case .fleetFingerprintMismatch(let fleet, let given):
            return "fleet \(fleet) in etcd does not have the fingerprint given "
                + "(\(TerminalText.escaped(given))): nothing was pinned or asked; "
                + "read it on a member's screen (`lanyard fleet status`), and check [fleet] name and endpoints"
        case .notJoined(let fleet, let pinned):
            return "this machine has not joined fleet \(fleet)"
                + (pinned.map { " (it belongs to fleet \($0): check [fleet] name in config.ini)" }
                    ?? ": run `lanyard fleet join`")
                + "; shared slots keep serving valid tokens and are not refreshed"
        case .untrustedFleet(let fleet, let detail):
            return "fleet \(fleet)'s membership in etcd does not verify: \(detail); "
                + "nothing from etcd is trusted, valid tokens are served "
                + "and none is refreshed (run `lanyard doctor`)"
        case .valueMissing(let slot, let fleet):
            return "slot \(slot.name)'s value is missing from fleet \(fleet): "
                + "the slot stays shared and its token is not refreshed here; "
                + "sign in again on a member (`lanyard login \(slot.name)`) to put a live credential back"
        case .refreshInFlight(let slot, let fleet, let machine):
            return "machine \(machine) of fleet \(fleet) presented slot \(slot.name)'s "
                + "refresh token and has not written the new tokens: "
                + "this machine will not spend the same token; "
                + "run any lanyard command (or `lanyard fleet sync`) on \(machine), "
                + "or sign in again (`lanyard login \(slot.name)`) if \(machine) is gone"
        case .handedOver(let slot, let fleet, let machine):
            return "slot \(slot.name) was unshared in fleet \(fleet) and its live "
                + "credential stayed on \(machine): sign in again here "
                + "(`lanyard login \(slot.name)`), or `lanyard fleet sync` once it is shared again"
        case .alreadyShared(let slot, let fleet): return "slot \(slot.name) is already shared in fleet \(fleet)"
        case .notShared(let slot, let fleet): return "slot \(slot.name) is not shared in fleet \(fleet)"
        case .refusedCredential(let slot, let fleet, let reason):
            return "refused slot \(slot.name)'s credential from fleet \(fleet): \(reason); the local copy was kept"
        case .identityUnavailable(let detail): return "this machine's fleet identity is unavailable: \(detail)"
        case .lockTimeout(let slot, let fleet, let s):
            return "slot \(slot.name)'s fleet lock in \(fleet) was not free "
                + "within \(Int(s)) s (another machine is refreshing it)"
        case .lockLost(let slot, let fleet):
            return "slot \(slot.name)'s fleet lock in \(fleet) expired during the refresh: "
                + "the new tokens are kept on this machine "
                + "and written to the fleet on the next sync"
        case .sharedSlotRefused(let slot, let fleet, let action):
            return "slot \(slot.name) is shared in fleet \(fleet), so this machine cannot \(action) alone: "
                + "run `lanyard fleet unshare \(slot.name)` first (every machine keeps its copy)"
        case .corrupt(let key, let detail):
            return "etcd key \(TerminalText.escaped(key)) does not decode (left as it is): \(detail)"
        case .membershipBehind(let fleet, let seq, _, let signer, let source):
            return "fleet \(fleet): member \(signer) signed \(TerminalText.escaped(source)) "
                + "for membership entry \(seq), which this machine "
                + "cannot verify (the log in etcd does not reach it: lost or hidden); "
                + "this machine seals and writes nothing for the fleet "
                + "(no refresh, sign-in, share or approval) until it can, "
                + "and serves valid local tokens meanwhile. Run `lanyard fleet status` "
                + "on \(signer) or another member that verified entry \(seq): it puts missing entries back"
        case .forked(let fleet, let seq, let digest, let ours, let signer, let source):
            let detail = FleetAlarm.forkDetail(digest: digest, ours: ours, signer: signer, source: source)
            return "fleet \(fleet)'s membership log is forked at entry \(seq) (\(detail)): "
                + "this machine seals and writes nothing for the "
                + "fleet until a person chooses the fleet's entry with "
                + "`lanyard fleet resolve FINGERPRINT` (both are listed by "
                + "`lanyard fleet status`); valid local tokens are served meanwhile"
        case .noFork(let fleet, let given):
            guard let given else {
                return "fleet \(fleet)'s membership log is not forked here: there is nothing to resolve"
            }
            return "neither entry of fleet \(fleet)'s fork has the fingerprint "
                + "\(TerminalText.escaped(given)): `lanyard fleet status` lists both"
        case .alreadyMember(let machine, let given):
            return "\(machine) is already a member, and that fingerprint "
                + "(\(TerminalText.escaped(given))) is not its: nothing was approved; "
                + "compare with `lanyard fleet status` here and \(machine)'s own screen"
        }
    }
}

extension FleetError {
    /// The error behind ``unavailable(fleet:endpoints:detail:cause:)`` and
    /// ``expiredWhileUnavailable(slot:fleet:endpoints:detail:cause:)`` (etcd's: TLS, permission, no
    /// quorum…; or the password file's), kept so callers and `--json` can tell a misconfiguration
    /// from an outage.
    public var underlying: (any Error)? {
        switch self {
        case .unavailable(_, _, _, let cause?), .expiredWhileUnavailable(_, _, _, _, let cause?): cause.error
        default: nil
        }
    }
}

extension FleetError: SlotNamingError {
    package var slotName: String? {
        switch self {
        case .expiredWhileUnavailable(let slot, _, _, _, _), .valueMissing(let slot, _),
            .refreshInFlight(let slot, _, _),
            .handedOver(let slot, _, _), .alreadyShared(let slot, _), .notShared(let slot, _),
            .refusedCredential(let slot, _, _), .lockTimeout(let slot, _, _), .lockLost(let slot, _),
            .sharedSlotRefused(let slot, _, _):
            slot.name
        default: nil
        }
    }
}

extension FleetError {
    /// What is wrong, without the key (for lists that name the key themselves).
    package var detail: String {
        if case .corrupt(_, let detail) = self { return detail }
        return userFacingDescription
    }
}
