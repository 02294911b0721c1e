import FoundationEssentials
import LanyardGLib
import LanyardSupport

/// One entry of another program's keyring store, kept where and as the Rust `keyring` crate
/// (v3, its Secret Service backend, which Codex uses on Linux) keeps it: an item in the default
/// collection with the attributes `service`, `username`, `target` (`default`) and `application`
/// (`rust-keyring`), no `xdg:schema`, found by `service` and `username` in every collection
/// (items whose `target` is another are someone else's) and updated in place when it exists.
///
/// Never unlocks anything (the unlock prompt is the desktop's to raise): a locked item or
/// collection is reported. Every call blocks (D-Bus): callers run it on the blocking executor.
package struct RustKeyringEntry: Sendable {
    package let service: String
    package let username: String
    /// Seconds each call may take, waiting for the service included.
    package let timeout: TimeInterval

    package init(service: String, username: String, timeout: TimeInterval) {
        self.service = service
        self.username = username
        self.timeout = timeout
    }

    /// Why the entry could not be read or written.
    package enum Failure: Error, Equatable {
        /// No Secret Service answers (no bus, no libsecret, no provider); the reason says which.
        case unavailable(String)
        /// The item or the default collection is locked.
        case locked
        /// More than one item matches (the crate refuses those too).
        case ambiguous(count: Int)
        /// The service did not answer in time.
        case timedOut
        /// The service reported an error.
        case failed(String)
    }

    /// The attributes the crate gives a new item.
    package var attributes: [String: String] {
        ["service": service, "username": username, "target": "default", "application": "rust-keyring"]
    }

    /// The label the crate gives a new item (only people see it).
    package var label: String {
        "keyring-rs v3.6.3 for target 'default', service '\(service)', user '\(username)'"
    }

    /// Whether the service answers with an unlocked default collection, where a new item goes;
    /// nil when it does.
    package func problem() -> Failure? {
        do {
            return try run { service, deadline throws(KeyringFailure) in
                guard let path = try service.readAlias("default", deadline: deadline) else {
                    return Failure.unavailable("the keyring has no default collection")
                }
                return try service.isLocked(collection: path, deadline: deadline) ? Failure.locked : nil
            }
        } catch { return error }
    }

    /// The entry's secret as text, or nil when there is no item.
    package func read() throws(Failure) -> String? {
        try run { service, deadline throws(KeyringFailure) -> Result<String?, Failure> in
            let items = try matchingItems(service, deadline)
            guard let item = items.first else { return .success(nil) }
            if items.count > 1 { return .failure(.ambiguous(count: items.count)) }
            if item.isLocked { return .failure(.locked) }
            return .success(try item.withSecret(deadline: deadline) { String(decoding: $0, as: UTF8.self) })
        }.get()
    }

    /// Sets the secret: on the one matching item, else on a new item in the default collection.
    package func write(_ secret: String) throws(Failure) {
        try run { service, deadline throws(KeyringFailure) -> Result<Void, Failure> in
            let items = try matchingItems(service, deadline)
            if items.count > 1 { return .failure(.ambiguous(count: items.count)) }
            if let item = items.first {
                if item.isLocked { return .failure(.locked) }
                try item.setSecret(Data(secret.utf8), contentType: "text/plain", deadline: deadline)
                return .success(())
            }
            guard let path = try service.readAlias("default", deadline: deadline) else {
                return .failure(.unavailable("the keyring has no default collection"))
            }
            if try service.isLocked(collection: path, deadline: deadline) { return .failure(.locked) }
            try service.storeUnchecked(
                attributes: attributes,
                collectionPath: path,
                label: label,
                secret: Data(secret.utf8),
                contentType: "text/plain",
                deadline: deadline
            )
            return .success(())
        }.get()
    }

    /// Deletes the matching items. - Returns: whether there were any.
    @discardableResult
    package func delete() throws(Failure) -> Bool {
        try run { service, deadline throws(KeyringFailure) -> Result<Bool, Failure> in
            let items = try matchingItems(service, deadline)
            if items.contains(where: \.isLocked) { return .failure(.locked) }
            for item in items { try item.delete(deadline: deadline) }
            return .success(!items.isEmpty)
        }.get()
    }

    /// The items the crate would take for this entry.
    private func matchingItems(_ service: KeyringService, _ deadline: Deadline) throws(KeyringFailure) -> [KeyringItem]
    {
        try service.searchUnchecked(["service": self.service, "username": username], deadline: deadline)
            .filter { item in item.attributes["target"].map { $0 == "default" } ?? true }
    }

    private func run<T>(_ body: (KeyringService, Deadline) throws(KeyringFailure) -> T) throws(Failure) -> T {
        let deadline: Deadline
        do { deadline = try Deadline(seconds: timeout) } catch { throw .failed("could not set up a time limit") }
        do {
            return try body(try KeyringConnection.shared.service(deadline), deadline)
        } catch {
            switch error {
            case .noBus(let reason, _): throw .unavailable("there is no D-Bus session bus (\(reason))")
            case .noLibrary(let reason): throw .unavailable(reason)
            case .noService(let reason, _): throw .unavailable("no Secret Service is running (\(reason))")
            case .timedOut: throw .timedOut
            case .refused(let what): throw .failed("libsecret refused \(what)")
            case .glib(let e):
                if e.isCancelled || deadline.expired { throw .timedOut }
                if e.isLocked { throw .locked }
                if e.isServiceGone { throw .unavailable("the Secret Service stopped answering (\(e))") }
                throw .failed("\(e)")
            }
        }
    }
}
