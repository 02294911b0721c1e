import FoundationEssentials
import LanyardCore
import LanyardGLib
import LanyardSupport

/// Credentials in the desktop keyring (gnome-keyring, KWallet, KeePassXC) through libsecret and
/// the freedesktop Secret Service API.
///
/// One keyring item per slot, of schema ``schemaName`` with the attributes `slot`, `provider` and
/// `account-id`; the secret is the credential's JSON document. The layout is documented in
/// docs/store-format.md ("Secret Service").
///
/// Reads, deletes and listings match on the schema and the `slot` attribute in every collection;
/// `put` writes into the configured collection and removes the slot's items elsewhere, so a slot
/// keeps one item even when its provider or account changes.
///
/// Every call is bounded by `timeout`, including waiting for a hung service or a desktop prompt,
/// and fails with a ``StoreError``: `.unavailable` when there is no session bus or no Secret
/// Service (at once, without trying to autolaunch a bus), `.locked` when the collection is locked
/// (it never prompts), `.timedOut`, `.corrupt` when an item's secret does not decode (the item is
/// left alone), or `.notFound`.
///
/// The store is safe to use from several threads at once; writes from one store are serialized.
package final class SecretServiceStore: CredentialStore {
    /// The item schema name (`xdg:schema` attribute). Part of every item's identity: it must never
    /// change, or existing items would no longer be found.
    package static let schemaName = "dev.lanyard.Credential"
    /// The MIME type stored with each secret.
    package static let contentType = "application/json"
    /// The backend name used in errors.
    package static let backendName = "Secret Service"

    /// Always ``BackendKind/secretService``.
    package let kind: BackendKind = .secretService
    /// The limit for each call, in seconds.
    package let timeout: TimeInterval
    /// Where `put` stores new items: an alias (`default`, `login`, `session`) or a collection's
    /// D-Bus object path. nil means the `default` alias.
    package let collection: String?

    // Serializes this store's writes so two threads cannot both create an item for one slot.
    private let writeLock = TimedLock()

    /// A store whose calls each give up after `timeout` seconds.
    /// - Parameter collection: an alias or object path for new items; nil uses the `default` alias.
    package init(timeout: TimeInterval, collection: String? = nil) {
        self.timeout = timeout
        self.collection = collection
    }

    // MARK: CredentialStore

    /// The credential of `slot`. `.locked` when its item (or, with no item found, the collection) is
    /// locked; `.corrupt` when the item's secret is not a credential document.
    package func get(_ slot: Slot) throws -> Credential {
        OperationCounts.storeRead()
        return try run("get \(slot)") { service, deadline in
            let source = "keyring item for slot \(slot)"
            // The common case the way secret-tool does it: one SearchItems, one GetSecret.
            let paths = try service.searchPaths(["slot": slot.name], deadline: deadline)
            if let locked = paths.locked.first { throw self.lockedError(Self.collectionPath(of: locked)) }
            if paths.unlocked.count == 1 {
                return try Self.decode(
                    service.withSecret(ofItem: paths.unlocked[0], deadline: deadline) { data in
                        Self.decodeResult(data, source: source)
                    },
                    source: source
                )
            }
            // None (is the collection locked?) or several (the newest wins): items with their properties.
            let items = try service.search(["slot": slot.name], deadline: deadline)
            if items.isEmpty {
                // Some services hide the items of a locked collection, and a deleted collection
                // holds none: "nothing found" only means "not stored" when the collection is there
                // and open (else the slot would look signed out when the keyring is what changed).
                try self.requireOpenCollection(service, deadline)
                throw StoreError.notFound(slot: slot)
            }
            if let locked = items.first(where: \.isLocked) {
                throw self.lockedError(Self.collectionPath(of: locked.path))
            }
            // More than one item only after an interrupted put or a hand-made item: the newest wins
            // and the next put removes the others.
            let item = Self.newest(items)
            return try Self.decode(
                item.withSecret(deadline: deadline) { data in Self.decodeResult(data, source: source) },
                source: source
            )
        }
    }

    /// Decodes a secret inside the closure that sees its bytes (they are wiped afterwards).
    private static func decodeResult(_ data: Data, source: String) -> Result<Credential, DecodeError> {
        do throws(DecodeError) { return .success(try Credential.decode(data, source: source)) } catch {
            return .failure(error)
        }
    }

    private static func decode(_ decoded: Result<Credential, DecodeError>, source: String) throws -> Credential {
        switch decoded {
        case .success(let credential): return credential
        case .failure(let error): throw StoreError.corrupt(source: source, detail: error.detail)
        }
    }

    /// Stores `credential` as the only item of `slot`. An item of the slot in the target collection
    /// is updated in place; items of the slot elsewhere are removed once the new secret is stored.
    /// A failure before the secret is stored changes nothing.
    package func put(_ credential: Credential, for slot: Slot) throws {
        var secret = credential.jsonData()
        defer { secret.resetBytes(in: 0..<secret.count) }
        let attributes = Self.attributes(slot: slot, credential: credential)
        let label = Self.label(slot: slot, email: credential.account.email)

        try run("put \(slot)", exclusive: true) { service, deadline in
            let target = try self.targetCollection(service, deadline)
            guard let locked = try Self.lockState(service, target, deadline) else {
                throw StoreError.unavailable(backend: Self.backendName, hint: self.noCollectionHint)
            }
            if locked { throw self.lockedError(target) }
            let existing = try service.search(["slot": slot.name], deadline: deadline)
            // A locked copy elsewhere could not be removed afterwards: refuse rather than leave two.
            if let locked = existing.first(where: \.isLocked) {
                throw self.lockedError(Self.collectionPath(of: locked.path))
            }

            let inTarget = existing.filter { Self.collectionPath(of: $0.path) == target }
            let kept: KeyringItem?
            if !inTarget.isEmpty {
                let item = Self.newest(inTarget)
                // The secret first: once it is in, the slot has the new credential whatever fails next.
                try item.setSecret(secret, contentType: Self.contentType, deadline: deadline)
                let current = item.attributes
                if current["xdg:schema"] != Self.schemaName
                    || attributes.contains(where: { current[$0.key] != $0.value })
                {
                    try item.setAttributes(attributes, deadline: deadline)
                }
                if item.label != label { try item.setLabel(label, deadline: deadline) }
                kept = item
            } else {
                try service.store(
                    attributes: attributes,
                    collectionPath: target,
                    label: label,
                    secret: secret,
                    contentType: Self.contentType,
                    deadline: deadline
                )
                kept = nil
            }
            for old in existing where old.path != kept?.path {
                try Self.deleteIgnoringGone(old, deadline)
            }
        }
    }

    /// Removes every item of `slot`.
    package func delete(_ slot: Slot) throws {
        try run("delete \(slot)", exclusive: true) { service, deadline in
            let items = try service.search(["slot": slot.name], deadline: deadline)
            if items.isEmpty {
                if let path = try self.lockedCollection(service, deadline) { throw self.lockedError(path) }
                throw StoreError.notFound(slot: slot)
            }
            if let locked = items.first(where: \.isLocked) {
                throw self.lockedError(Self.collectionPath(of: locked.path))
            }
            for item in items { try Self.deleteIgnoringGone(item, deadline) }
        }
    }

    /// The slots that have an item, sorted. `.locked` when the target collection or any matching
    /// item is locked, since a locked collection may hide items. Items whose `slot` attribute is
    /// not a valid slot name (made by hand) are left out.
    package func list() throws -> [Slot] {
        try run("list") { service, deadline in
            // A missing collection lists nothing, which doctor would take for lost credentials.
            try self.requireOpenCollection(service, deadline)
            // Paths first, then each item's attributes: an item another process deletes in
            // between (a logout, a refresh replacing it) is gone, not an error. (libsecret's own
            // search makes a proxy of every item it found and fails whole on one that vanished.)
            let (unlocked, locked) = try service.searchPaths([:], deadline: deadline)
            if let path = locked.first { throw self.lockedError(Self.collectionPath(of: path)) }
            var slots: Set<Slot> = []
            for path in unlocked {
                if let name = try service.attributes(ofItem: path, deadline: deadline)?["slot"],
                    let slot = try? Slot(stored: name)
                {
                    slots.insert(slot)
                }
            }
            return slots.sorted()
        }
    }

    /// Whether the service answers, whether the target collection is locked, whether it is kept on
    /// disk (any collection but the in-memory `session` one), and its object path.
    package func health() -> StoreHealth {
        guard let deadline = try? Deadline(seconds: timeout) else {
            return StoreHealth(
                backend: kind,
                reachable: false,
                locked: false,
                persistent: false,
                problem: "could not set up a time limit"
            )
        }
        do {
            let service = try KeyringConnection.shared.service(deadline)
            guard let path = try resolveCollection(service, deadline) else {
                return StoreHealth(
                    backend: kind,
                    reachable: true,
                    locked: false,
                    persistent: false,
                    location: nil,
                    problem: noCollectionHint
                )
            }
            guard let locked = try Self.lockState(service, path, deadline) else {
                return StoreHealth(
                    backend: kind,
                    reachable: true,
                    locked: false,
                    persistent: false,
                    location: nil,
                    problem: noCollectionHint
                )
            }
            let session = try? service.readAlias("session", deadline: deadline)
            let persistent = path != session && !path.hasSuffix("/session")
            var health = StoreHealth(
                backend: kind,
                reachable: true,
                locked: locked,
                persistent: persistent,
                location: path
            )
            if let process = service.ownerProcessName(deadline: deadline) {
                (health.provider, health.notes) = SecretServiceProvider.identify(processName: process)
            }
            return health
        } catch {
            let problem = storeError(error, operation: "health check", deadline: deadline)
            return StoreHealth(
                backend: kind,
                reachable: false,
                locked: false,
                persistent: false,
                location: nil,
                problem: problem.userFacingDescription
            )
        }
    }

    // MARK: Layout

    /// The attributes of a slot's item: `slot`, `provider`, and `account-id` (empty when unknown).
    package static func attributes(slot: Slot, credential: Credential) -> [String: String] {
        ["slot": slot.name, "provider": credential.provider, "account-id": credential.account.accountID ?? ""]
    }

    /// The item label people see in Seahorse: `Lanyard: work (alice@example.com)`, or
    /// `Lanyard: work` without an email.
    package static func label(slot: Slot, email: String?) -> String {
        guard let email, !email.isEmpty else { return "Lanyard: \(slot)" }
        return "Lanyard: \(slot) (\(email))"
    }

    // MARK: Internals

    /// Runs one operation under a fresh deadline and turns every failure into a StoreError.
    private func run<T>(
        _ operation: String,
        exclusive: Bool = false,
        _ body: (KeyringService, Deadline) throws -> T
    ) throws(StoreError) -> T {
        let deadline: Deadline
        do { deadline = try Deadline(seconds: timeout) } catch {
            throw .io(path: Self.backendName, detail: "\(operation): could not set up a time limit")
        }
        do {
            if exclusive {
                guard writeLock.lock(within: deadline.remaining) else {
                    throw KeyringFailure.timedOut
                }
            }
            defer { if exclusive { writeLock.unlock() } }
            let service = try KeyringConnection.shared.service(deadline)
            StartupTrace.mark("connect")
            defer { StartupTrace.mark("read") }
            return try body(service, deadline)
        } catch {
            throw storeError(error, operation: operation, deadline: deadline)
        }
    }

    /// The way out when the keyring cannot be reached: new slots can go to the file store, but
    /// slots already in the keyring stay there until migrated, which needs the keyring once more.
    static let fileStoreAdvice =
        "or use the encrypted-file backend (`lanyard store init`, then `backend = file` in config.ini "
        + "for new slots); slots already in the keyring move with "
        + "`lanyard store migrate --to file` once it answers again"

    /// ``fileStoreAdvice`` once the file store exists: `store init` has been run.
    static let existingFileStoreAdvice =
        "or use the encrypted file store, which is set up (with `backend = auto` or `file` in "
        + "config.ini new sign-ins go there); slots already in the keyring "
        + "move with `lanyard store migrate --to file` once it answers again"

    /// `problem` (a keyring failure's text) advising the file store that exists instead of
    /// `lanyard store init`: the keyring cannot tell whether the file store is set up, its caller can.
    package static func adviceForExistingFileStore(_ problem: String) -> String {
        problem.replacing(fileStoreAdvice, with: existingFileStoreAdvice)
    }

    /// The StoreError a failed keyring call means (internal for tests: the cause it keeps).
    func storeError(_ error: any Error, operation: String, deadline: Deadline) -> StoreError {
        let backend = Self.backendName
        if let error = error as? StoreError { return error }
        guard let failure = error as? KeyringFailure else {
            return .io(path: backend, detail: "\(operation): \(error.userFacingDescription)")
        }
        switch failure {
        case .noBus(let reason, let cause):
            return .unavailable(
                backend: backend,
                hint: "there is no D-Bus session bus (\(reason)). "
                    + "Run Lanyard inside a desktop session, or start a Secret Service provider such as gnome-keyring "
                    + "in a D-Bus session, " + Self.fileStoreAdvice,
                cause: cause.map(ErrorCause.init)
            )
        case .noLibrary(let reason):
            return .unavailable(
                backend: backend,
                hint: "\(reason). Install libsecret-1-0, "
                    + Self.fileStoreAdvice
            )
        case .noService(let reason, let cause):
            return .unavailable(
                backend: backend,
                hint: "no Secret Service is running on the session bus (\(reason)). "
                    + "Start gnome-keyring-daemon (or KeePassXC / KWallet with Secret Service integration), "
                    + Self.fileStoreAdvice,
                cause: cause.map(ErrorCause.init)
            )
        case .timedOut:
            return .timedOut(backend: backend, operation: operation, seconds: timeout)
        case .refused(let what):
            return .io(path: backend, detail: "\(operation): libsecret refused \(what) without saying why")
        case .glib(let e):
            if e.isCancelled || deadline.expired {
                return .timedOut(backend: backend, operation: operation, seconds: timeout)
            }
            if e.isServiceGone {
                return .unavailable(
                    backend: backend,
                    hint: "the Secret Service stopped answering during \(operation) "
                        + "(\(e)). Check that gnome-keyring (or your Secret Service provider) is running, "
                        + Self.fileStoreAdvice,
                    cause: ErrorCause(e)
                )
            }
            if e.isLocked { return lockedError(nil) }
            return .io(path: backend, detail: "\(operation): \(e)", cause: ErrorCause(e))
        }
    }

    private var noCollectionHint: String {
        "the keyring has no collection named by \(collection.map { "\"\($0)\"" } ?? "the default alias"); "
            + "create one (for example in Seahorse; in KeePassXC, "
            + "expose a database group under Settings › Secret Service "
            + "Integration; in KWallet, each wallet is a collection: "
            + "create a wallet in KWalletManager) or configure another collection"
    }

    private func lockedError(_ collectionPath: String?) -> StoreError {
        .locked(
            backend: Self.backendName,
            hint: "the keyring collection \(collectionPath.map { $0 + " " } ?? "")is locked; "
                + "unlock it (log in to the desktop session, "
                + "or unlock it in Seahorse, or unlock the database in KeePassXC, "
                + "or open the wallet in KWalletManager) and try again"
        )
    }

    /// The object path of the configured collection, or nil when its alias is unset.
    private func resolveCollection(_ service: KeyringService, _ deadline: Deadline) throws -> String? {
        let spec = collection ?? "default"
        if spec.hasPrefix("/") { return spec }
        return try service.readAlias(spec, deadline: deadline)
    }

    private func targetCollection(_ service: KeyringService, _ deadline: Deadline) throws -> String {
        guard let path = try resolveCollection(service, deadline) else {
            throw StoreError.unavailable(backend: Self.backendName, hint: noCollectionHint)
        }
        return path
    }

    /// Throws `.unavailable` when the configured collection does not exist, `.locked` when it is locked.
    private func requireOpenCollection(_ service: KeyringService, _ deadline: Deadline) throws {
        guard let target = try resolveCollection(service, deadline),
            let locked = try Self.lockState(service, target, deadline)
        else {
            throw StoreError.unavailable(backend: Self.backendName, hint: noCollectionHint)
        }
        if locked { throw lockedError(target) }
    }

    /// The configured collection's path when it exists and is locked.
    private func lockedCollection(_ service: KeyringService, _ deadline: Deadline) throws -> String? {
        guard let path = try resolveCollection(service, deadline) else { return nil }
        return try Self.lockState(service, path, deadline) == true ? path : nil
    }

    /// The collection's Locked property, or nil when there is no collection at `path`.
    private static func lockState(_ service: KeyringService, _ path: String, _ deadline: Deadline) throws -> Bool? {
        do {
            return try service.isLocked(collection: path, deadline: deadline)
        } catch KeyringFailure.glib(let e) where e.isNoSuchObject {
            return nil
        }
    }

    /// `/org/freedesktop/secrets/collection/login` for `/org/freedesktop/secrets/collection/login/7`.
    static func collectionPath(of itemPath: String) -> String {
        guard let slash = itemPath.lastIndex(of: "/") else { return itemPath }
        return String(itemPath[..<slash])
    }

    /// The most recently modified item (ties broken by path, so the choice is stable).
    static func newest(_ items: [KeyringItem]) -> KeyringItem {
        // Callers pass a non-empty array.
        items.max { ($0.modified, $0.path) < ($1.modified, $1.path) } ?? items[0]
    }

    /// Deletes `item`; an item that is already gone (another process deleted it) is fine.
    private static func deleteIgnoringGone(_ item: KeyringItem, _ deadline: Deadline) throws {
        do { try item.delete(deadline: deadline) } catch KeyringFailure.glib(let e) where e.isNoSuchObject {}
    }
}
