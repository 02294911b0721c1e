import Foundation
import LanyardCore
import LanyardStore

/// An in-memory credential store for unit tests of command logic (backends have their own tests
/// against real services).
package final class MemoryStore: CredentialStore, @unchecked Sendable {
    package let kind: BackendKind
    private let lock = NSLock()
    private var items: [Slot: Credential] = [:]
    package var failWith: StoreError?

    package init(kind: BackendKind = .secretService) { self.kind = kind }

    package func get(_ slot: Slot) throws -> Credential {
        try lock.withLock {
            if let failWith { throw failWith }
            guard let c = items[slot] else { throw StoreError.notFound(slot: slot) }
            return c
        }
    }
    package func put(_ credential: Credential, for slot: Slot) throws {
        try lock.withLock {
            if let failWith { throw failWith }
            items[slot] = credential
        }
    }
    package func delete(_ slot: Slot) throws {
        try lock.withLock {
            if let failWith { throw failWith }
            guard items.removeValue(forKey: slot) != nil else { throw StoreError.notFound(slot: slot) }
        }
    }
    package func list() throws -> [Slot] {
        try lock.withLock {
            if let failWith { throw failWith }
            return items.keys.sorted()
        }
    }
    /// What health() reports as the collection's lock state (the real keyring's is tested in LanyardStoreTests).
    package var reportsLocked = false
    package func health() -> StoreHealth {
        StoreHealth(backend: kind, reachable: true, locked: reportsLocked, persistent: false)
    }
}
