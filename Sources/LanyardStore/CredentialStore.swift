import FoundationEssentials
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
package protocol CredentialStore: Sendable {
    /// Which backend this is.
    var kind: BackendKind { get }
    /// The stored credential of `slot`; `StoreError.notFound` when there is none.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func get(_ slot: Slot) throws -> Credential
    /// Stores `credential` for `slot`, replacing any earlier one.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func put(_ credential: Credential, for slot: Slot) throws
    /// Stores every credential of `credentials` (a bundle import), replacing earlier ones: all of
    /// them or, when it throws, none. The file store does it as one write of its file (atomic even
    /// across a `kill -9`); the default, for stores that write item by item (the keyring has no
    /// transactions), puts each slot and on a failure puts back what it replaced, so only a
    /// process killed midway leaves some written (see ``CredentialStore/putAllItemByItem(_:)``).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func putAll(_ credentials: [Slot: Credential]) throws
    /// Makes ``putAll(_:)`` ready without making it visible, to land together with `transaction`'s
    /// registry change (both or neither, even across a `kill -9`; see
    /// ``Registry/transaction(_:)``). Returns false, writing nothing, when this store cannot
    /// (it writes item by item: call ``putAll(_:)`` instead).
    func stage(_ credentials: [Slot: Credential], in transaction: RegistryTransaction) throws -> Bool
    /// Removes the credential of `slot`; `StoreError.notFound` when there is none.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func delete(_ slot: Slot) throws
    /// Every slot with a stored credential.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func list() throws -> [Slot]
    /// Whether the backend answers, is locked, and keeps data across reboots.
    func health() -> StoreHealth
    /// `document` (a refreshed credential's JSON) encrypted for this store's recovery file: an age
    /// file to the store's recipients, readable without unlocking it. nil when the store has no
    /// recipient to encrypt to (the keyring): the refreshed tokens then wait in the kernel keyring
    /// instead (``RefreshEscrow``), never in clear on disk. Throws when the recipients cannot be
    /// read (a locked passphrase store whose key this process never saw): the same fallback.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func sealRecovery(_ document: Data) throws -> Data?
    /// A recovery file ``sealRecovery(_:)`` wrote, decrypted with the store's identity (unlocking
    /// it as `get` would).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func openRecovery(_ sealed: Data, source: String) throws -> Data
}

extension CredentialStore {
    package func putAll(_ credentials: [Slot: Credential]) throws { try putAllItemByItem(credentials) }

    package func stage(_ credentials: [Slot: Credential], in transaction: RegistryTransaction) throws -> Bool { false }

    package func sealRecovery(_ document: Data) throws -> Data? { nil }

    package func openRecovery(_ sealed: Data, source: String) throws -> Data {
        throw StoreError.corrupt(
            source: source,
            detail: "the recovery file is encrypted, and the \(kind.displayName) store has no key to open it"
        )
    }

    /// ``putAll(_:)`` one slot at a time, in slot order: each slot's current credential is read
    /// first, and when a put fails the slots written so far get back what they held (or, where
    /// they held nothing, are deleted) before the error is rethrown. A slot whose earlier item
    /// could not be read (it did not decode) cannot be put back and keeps the new credential.
    /// A process killed midway has no chance to undo: the slots written by then stay written.
    package func putAllItemByItem(_ credentials: [Slot: Credential]) throws {
        var written: [(slot: Slot, previous: Credential?, restorable: Bool)] = []
        do {
            for (slot, credential) in credentials.sorted(by: { $0.key < $1.key }) {
                var previous: Credential?
                var restorable = true
                do { previous = try get(slot) } catch StoreError.notFound {
                    previous = nil
                } catch StoreError.corrupt {
                    restorable = false
                }
                try put(credential, for: slot)
                written.append((slot, previous, restorable))
            }
        } catch {
            for item in written.reversed() where item.restorable {
                if let previous = item.previous { try? put(previous, for: item.slot) } else { try? delete(item.slot) }
            }
            throw error
        }
    }
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

    public init(
        backend: BackendKind,
        reachable: Bool,
        locked: Bool,
        persistent: Bool,
        location: String? = nil,
        problem: String? = nil
    ) {
        self.backend = backend
        self.reachable = reachable
        self.locked = locked
        self.persistent = persistent
        self.location = location
        self.problem = problem
    }
}
