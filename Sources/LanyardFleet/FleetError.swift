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
    case unavailable(fleet: String, endpoints: [String], detail: String)
    /// A shared slot's token has expired and the fleet cannot be reached to refresh it safely.
    case expiredWhileUnavailable(slot: Slot, fleet: String, endpoints: [String], detail: String)
    /// `fleet init` on a fleet that already exists.
    case alreadyExists(fleet: String)
    /// The fleet has not been created (`fleet init` on one machine first).
    case noSuchFleet(fleet: String)
    /// This machine is not (yet) a member: it has asked to join, or never did.
    case notMember(fleet: String, machine: String, pending: Bool)
    /// No such member or join request.
    case unknownMachine(fleet: String, machine: String)
    /// The fingerprint given to `approve` is not the joining machine's.
    case fingerprintMismatch(machine: String, expected: String, given: String)
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

    public var code: String {
        switch self {
        case .notConfigured: return "fleet_not_configured"
        case .unavailable: return "fleet_unavailable"
        case .expiredWhileUnavailable: return "fleet_unavailable"
        case .alreadyExists: return "fleet_exists"
        case .noSuchFleet: return "fleet_missing"
        case .notMember: return "fleet_not_member"
        case .unknownMachine: return "fleet_unknown_machine"
        case .fingerprintMismatch: return "fleet_fingerprint_mismatch"
        case .alreadyShared: return "fleet_slot_shared"
        case .notShared: return "fleet_slot_not_shared"
        case .refusedCredential: return "fleet_credential_refused"
        case .identityUnavailable: return "fleet_identity_unavailable"
        case .lockTimeout: return "fleet_lock_timeout"
        case .lockLost: return "fleet_lock_lost"
        case .corrupt: return "fleet_data_corrupt"
        case .sharedSlotRefused: return "fleet_slot_shared"
        }
    }

    public var errorDescription: String? {
        // The etcd error names each endpoint it tried; the list is added only when it does not.
        func tried(_ e: [String], _ detail: String) -> String {
            e.allSatisfy({ detail.contains($0) }) ? detail : "tried \(e.joined(separator: ", ")): \(detail)"
        }
        switch self {
        case .notConfigured(let file):
            return "no fleet is configured: add a [fleet] group (name, endpoints, ca, cert, key) to \(file); see docs/fleet.md"
        case .unavailable(let fleet, let endpoints, let detail):
            return "fleet \(fleet) is unreachable: \(tried(endpoints, detail))"
        case .expiredWhileUnavailable(let slot, let fleet, let endpoints, let detail):
            return "slot \(slot.name)'s token has expired and fleet \(fleet) cannot be reached to refresh it safely "
                + "(\(tried(endpoints, detail))); it will be refreshed once etcd answers again"
        case .alreadyExists(let fleet): return "fleet \(fleet) already exists: join it with `lanyard fleet join` instead"
        case .noSuchFleet(let fleet): return "fleet \(fleet) does not exist yet: run `lanyard fleet init` on its first machine"
        case .notMember(let fleet, let machine, let pending):
            return pending
                ? "machine \(machine) has asked to join fleet \(fleet) but is not approved yet: run `lanyard fleet approve \(machine)` on a member"
                : "machine \(machine) is not a member of fleet \(fleet): run `lanyard fleet join` here, then approve it on a member"
        case .unknownMachine(let fleet, let machine): return "fleet \(fleet) has no member or join request named \(machine)"
        case .fingerprintMismatch(let machine, let expected, let given):
            return "the fingerprint given (\(given)) is not \(machine)'s (\(expected)): nothing was approved; check which machine asked to join"
        case .alreadyShared(let slot, let fleet): return "slot \(slot.name) is already shared in fleet \(fleet)"
        case .notShared(let slot, let fleet): return "slot \(slot.name) is not shared in fleet \(fleet)"
        case .refusedCredential(let slot, let fleet, let reason):
            return "refused slot \(slot.name)'s credential from fleet \(fleet): \(reason); the local copy was kept"
        case .identityUnavailable(let detail): return "this machine's fleet identity is unavailable: \(detail)"
        case .lockTimeout(let slot, let fleet, let s):
            return "slot \(slot.name)'s fleet lock in \(fleet) was not free within \(Int(s)) s (another machine is refreshing it)"
        case .lockLost(let slot, let fleet):
            return "slot \(slot.name)'s fleet lock in \(fleet) expired during the refresh: the new tokens are kept on this machine "
                + "and written to the fleet on the next sync"
        case .sharedSlotRefused(let slot, let fleet, let action):
            return "slot \(slot.name) is shared in fleet \(fleet), so this machine cannot \(action) alone: "
                + "run `lanyard fleet unshare \(slot.name)` first (every machine keeps its copy)"
        case .corrupt(let key, let detail): return "etcd key \(TerminalText.escaped(key)) does not decode (left as it is): \(detail)"
        }
    }
}
