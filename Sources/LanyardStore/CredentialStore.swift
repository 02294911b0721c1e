import FoundationEssentials
import Glibc
import LanyardCore

/// Where a slot's secret lives.
public enum BackendKind: String, Codable, Sendable, CaseIterable {
    /// The desktop keyring through libsecret (gnome-keyring, KWallet, KeePassXC).
    case secretService = "secret-service"
    /// One age-encrypted file in `$XDG_DATA_HOME/lanyard/`.
    case file

    /// The name people see.
    public var displayName: String {
        switch self {
        case .secretService: return "Secret Service"
        case .file: return "encrypted file"
        }
    }
}

/// A place that keeps slots' credentials.
///
/// Every call is bounded by the store's timeout and fails with a ``StoreError``: `unavailable`,
/// `locked`, `timedOut`, `corrupt` or `notFound`. No failure deletes or replaces stored data, and a
/// store never writes to another backend instead of itself.
public protocol CredentialStore: Sendable {
    /// Which backend this is.
    var kind: BackendKind { get }
    /// The stored credential of `slot`; `StoreError.notFound` when there is none.
    func get(_ slot: Slot) throws -> Credential
    /// Stores `credential` for `slot`, replacing any earlier one.
    func put(_ credential: Credential, for slot: Slot) throws
    /// Removes the credential of `slot`; `StoreError.notFound` when there is none.
    func delete(_ slot: Slot) throws
    /// Every slot with a stored credential.
    func list() throws -> [Slot]
    /// Whether the backend answers, is locked, and keeps data across reboots.
    func health() -> StoreHealth
}

/// What `lanyard doctor` reports about a backend.
public struct StoreHealth: Hashable, Sendable, Codable {
    public var backend: BackendKind
    /// True when a call reached the backend.
    public var reachable: Bool
    /// True when secrets cannot be read without unlocking first.
    public var locked: Bool
    /// True when items survive a reboot (an on-disk collection, not a session one).
    public var persistent: Bool
    /// Where the data lives (collection path or file path).
    public var location: String?
    /// What went wrong, when unreachable.
    public var problem: String?
    /// The program behind the backend (Secret Service: gnome-keyring, KeePassXC, KWallet, or the
    /// owner's process name); nil for the file store or when it cannot be told.
    public var provider: String?
    /// What matters to Lanyard about that provider (how it locks, where items go).
    public var notes: [String]?

    public init(backend: BackendKind, reachable: Bool, locked: Bool, persistent: Bool, location: String? = nil,
                problem: String? = nil) {
        self.backend = backend
        self.reachable = reachable
        self.locked = locked
        self.persistent = persistent
        self.location = location
        self.problem = problem
    }
}
