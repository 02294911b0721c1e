import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

// The registry and the stores' calls are `noasync` in the library: async library code reaches
// them only through the blocking executor. A test's assertions may block (the test owns its
// thread, and nothing else waits on it), so async tests read through these instead.

extension Registry {
    /// ``Registry/load()`` from an async test.
    package func loadInTest() throws -> RegistryDocument { try load() }
    /// ``Registry/update(_:)`` from an async test.
    package func updateInTest<T>(_ body: (inout RegistryDocument) throws -> T) throws -> T { try update(body) }
}

extension AccountManager {
    /// The slot's stored credential when no refresh is due, nil when one is
    /// (``AccountManager/storedCredential(slot:force:)``), from an async test.
    package func credentialIfFreshInTest(slot: Slot) throws -> Credential? {
        let stored = try storedCredential(slot: slot, force: false)
        return stored.due ? nil : stored.credential
    }
}

extension CredentialStore {
    /// ``CredentialStore/get(_:)`` from an async test.
    package func getInTest(_ slot: Slot) throws -> Credential { try get(slot) }
    /// ``CredentialStore/put(_:for:)`` from an async test.
    package func putInTest(_ credential: Credential, for slot: Slot) throws { try put(credential, for: slot) }
    /// ``CredentialStore/delete(_:)`` from an async test.
    package func deleteInTest(_ slot: Slot) throws { try delete(slot) }
    /// ``CredentialStore/list()`` from an async test.
    package func listInTest() throws -> [Slot] { try list() }
}

extension EventLog {
    /// ``EventLog/append(_:slot:fields:)`` from an async test.
    @discardableResult
    package func appendInTest(_ event: String, slot: Slot?, fields: [String: JSONValue] = [:]) -> JSONValue {
        append(event, slot: slot, fields: fields)
    }
}

extension EtcdKV {
    /// ``EtcdKV/range(_:prefix:)`` from an async test.
    package func rangeInTest(_ key: String, prefix: Bool = false) throws -> EtcdRange { try range(key, prefix: prefix) }
    /// ``EtcdKV/get(_:)`` from an async test.
    package func getInTest(_ key: String) throws -> EtcdKeyValue? { try get(key) }
    /// ``EtcdKV/put(_:value:lease:)`` from an async test.
    @discardableResult
    package func putInTest(_ key: String, value: [UInt8]) throws -> Int64 { try put(key, value: value, lease: 0) }
    /// ``EtcdKV/delete(_:prefix:)`` from an async test.
    @discardableResult
    package func deleteInTest(_ key: String) throws -> Int64 { try delete(key, prefix: false) }
}
