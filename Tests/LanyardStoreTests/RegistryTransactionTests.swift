import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import Testing

/// A file-store write and a registry change landing together (`Registry.transaction`), the batch
/// writes of the stores (`putAll`), and what a transaction killed at each step leaves: the three
/// states of the table at the top of RegistryTransaction.swift, made by hand here (the real binary
/// killed mid-import is in BundleTests).
@Suite(.serialized) struct RegistryTransactionTests {
    let temp = TempDirectory()
    var paths: Paths { temp.paths }
    var store: EncryptedFileStore { EncryptedFileStore(paths: temp.paths, unlockCacheSeconds: 60) }
    var registry: Registry { Registry(paths: temp.paths) }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
    func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    func record(_ name: String) -> SlotRecord {
        SlotRecord(
            provider: "openai",
            backend: .file,
            account: AccountInfo(email: "\(name)@example.com", accountID: "acct-\(name)"),
            state: .signedIn(expiresAt: Date(timeIntervalSince1970: 1_800_000_000))
        )
    }

    func batch(_ count: Int) throws -> [Slot: Credential] {
        var batch: [Slot: Credential] = [:]
        for i in 0..<count { batch[try Slot("s-\(i)")] = sampleCredential("token-\(i)") }
        return batch
    }

    /// A file store and a registry holding the slot `keep`.
    @discardableResult
    func seeded() throws -> Slot {
        try store.initialize(passphrase: nil)
        let keep = try Slot("keep")
        try store.put(sampleCredential("kept"), for: keep)
        try registry.update { $0.slots[keep] = record("keep") }
        return keep
    }

    /// The registry a transaction adding `slots` would write, staged as a killed one leaves it.
    func stageRegistry(adding slots: [Slot]) throws {
        var next = try registry.load()
        for slot in slots { next.slots[slot] = record(slot.name) }
        try next.jsonData(pretty: true).write(to: URL(fileURLWithPath: paths.incomingRegistryFile))
    }

    @Test func aTransactionLandsTheStoreAndTheRegistryWithOneWriteEach() throws {
        let keep = try seeded()
        let storeBefore = bytes(store.storePath)
        let registryBefore = bytes(registry.path)
        let batch = try batch(40)
        try registry.transaction { doc, transaction in
            let staged = try store.stage(batch, in: transaction)
            #expect(staged)
            #expect(exists(paths.incomingStoreFile), "staged beside the store")
            #expect(bytes(store.storePath) == storeBefore, "not visible before the registry change lands")
            for slot in batch.keys { doc.slots[slot] = record(slot.name) }
        }
        // The generation before each file is the one from before the transaction: one write each.
        #expect(bytes(store.storePath + ".prev") == storeBefore)
        #expect(bytes(registry.path + ".prev") == registryBefore)
        #expect(try store.list() == ([keep] + batch.keys).sorted())
        #expect(try store.get(try Slot("s-7")).tokens.accessToken == "token-7")
        #expect(try registry.load().slots.count == 41)
        #expect(!exists(paths.incomingStoreFile) && !exists(paths.incomingRegistryFile))
    }

    @Test func aTransactionThatThrowsLandsNothing() throws {
        try seeded()
        let storeBefore = bytes(store.storePath)
        let registryBefore = bytes(registry.path)
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try registry.transaction { doc, transaction in
                _ = try store.stage(try batch(3), in: transaction)
                doc.slots[try Slot("s-0")] = record("s-0")
                throw Refused()
            }
        }
        #expect(bytes(store.storePath) == storeBefore && bytes(registry.path) == registryBefore)
        #expect(!exists(paths.incomingStoreFile) && !exists(paths.incomingRegistryFile))
        // The store's lock was released: it can be written again.
        try store.put(sampleCredential("again"), for: try Slot("keep"))
    }

    @Test func killedAfterTheStoreWasReplacedTheRegistryFollows() throws {
        let keep = try seeded()
        let added = [try Slot("s-0"), try Slot("s-1")]
        let registryBefore = bytes(registry.path)
        // Killed between steps 3 and 4: the store holds the slots, the next registry waits beside.
        try store.putAll(try batch(2))
        try stageRegistry(adding: added)
        // A reader settles it (nobody holds the lock): the registry lists what the store holds.
        #expect(Set(try registry.load().slots.keys) == Set([keep] + added))
        #expect(!exists(paths.incomingRegistryFile))
        #expect(bytes(registry.path + ".prev") == registryBefore)
    }

    @Test func killedBeforeTheStoreWasReplacedNothingHappened() throws {
        let keep = try seeded()
        let storeBefore = bytes(store.storePath)
        let registryBefore = bytes(registry.path)
        // Killed between steps 2 and 3: both staged files, the store untouched.
        try stageRegistry(adding: [try Slot("s-0")])
        try Data("staged store".utf8).write(to: URL(fileURLWithPath: paths.incomingStoreFile))
        #expect(Array(try registry.view().document().slots.keys) == [keep])
        #expect(!exists(paths.incomingRegistryFile) && !exists(paths.incomingStoreFile))
        #expect(bytes(store.storePath) == storeBefore && bytes(registry.path) == registryBefore)
    }

    @Test func aStagedStoreAloneIsRemovedByTheNextChange() throws {
        let keep = try seeded()
        // Killed between steps 1 and 2.
        try Data("staged store".utf8).write(to: URL(fileURLWithPath: paths.incomingStoreFile))
        try registry.update { $0.active = keep }
        #expect(!exists(paths.incomingStoreFile))
        #expect(try store.list() == [keep])
    }

    @Test func readersLeaveATransactionInProgressAlone() throws {
        let keep = try seeded()
        try store.putAll(try batch(1))
        try stageRegistry(adding: [try Slot("s-0")])
        do {
            // Someone holds the registry lock: a transaction in progress, not the reader's to settle.
            let held = try FileLock(path: registry.path + ".lock")
            #expect(Array(try registry.load().slots.keys) == [keep])
            #expect(exists(paths.incomingRegistryFile))
            withExtendedLifetime(held) {}
        }
        #expect(try registry.load().slots.count == 2)
    }

    @Test func fileStorePutAllIsOneWrite() throws {
        let keep = try seeded()
        let before = bytes(store.storePath)
        let batch = try batch(30)
        try store.putAll(batch)
        #expect(bytes(store.storePath + ".prev") == before)
        #expect(try store.list() == ([keep] + batch.keys).sorted())
    }

    @Test func itemByItemPutAllPutsBackWhatItReplacedWhenAPutFails() throws {
        let store = FlakyStore()
        let old = try Slot("s-1")
        try store.put(sampleCredential("old"), for: old)
        store.failOnPut = 4  // the fourth put of the batch (s-3) fails
        #expect(throws: StoreError.timedOut(backend: "test", operation: "put", seconds: 1)) {
            try store.putAll(try batch(5))
        }
        #expect(try store.list() == [old], "the slots added are removed again")
        #expect(try store.get(old).tokens.accessToken == "old", "the slot replaced has its credential back")
        store.failOnPut = nil
        try store.putAll(try batch(5))
        #expect(try store.list().count == 5)
    }
}

/// An item-by-item store (the protocol's default putAll) whose Nth put fails.
final class FlakyStore: CredentialStore, @unchecked Sendable {
    let kind = BackendKind.secretService
    private var items: [Slot: Credential] = [:]
    private var puts = 0
    var failOnPut: Int? {
        didSet { puts = 0 }
    }

    func get(_ slot: Slot) throws -> Credential {
        guard let credential = items[slot] else { throw StoreError.notFound(slot: slot) }
        return credential
    }
    func put(_ credential: Credential, for slot: Slot) throws {
        puts += 1
        if puts == failOnPut { throw StoreError.timedOut(backend: "test", operation: "put", seconds: 1) }
        items[slot] = credential
    }
    func delete(_ slot: Slot) throws {
        guard items.removeValue(forKey: slot) != nil else { throw StoreError.notFound(slot: slot) }
    }
    func list() throws -> [Slot] { items.keys.sorted() }
    func health() -> StoreHealth { StoreHealth(backend: kind, reachable: true, locked: false, persistent: false) }
}
