// Secret Service backend against a real gnome-keyring (scripts/with-keyring.sh). The tests share
// one keyring (the locked-collection test locks a keyring of its own, in a child process); the
// suite runs serially.

import Foundation
import LanyardCore
import LanyardGLib
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardStore

@Suite("Secret Service store (gnome-keyring)", .serialized)
struct SecretServiceStoreTests {
    let store = SecretServiceStore(timeout: 5)

    @Test("round trip, overwrite, delete and list", arguments: [1, 100])
    func roundTrip(count: Int) throws {
        try requireTestKeyring()
        let slots = (0..<count).map { _ in uniqueSlot("rt") }
        defer { for slot in slots { try? store.delete(slot) } }

        for (i, slot) in slots.enumerated() { try store.put(sampleCredential("v1-\(i)"), for: slot) }
        let listed = Set(try store.list())
        #expect(listed.isSuperset(of: slots))
        for (i, slot) in slots.enumerated() { #expect(try store.get(slot) == sampleCredential("v1-\(i)")) }

        for (i, slot) in slots.enumerated() { try store.put(sampleCredential("v2-\(i)"), for: slot) }
        for (i, slot) in slots.enumerated() { #expect(try store.get(slot) == sampleCredential("v2-\(i)")) }
        #expect(Set(try store.list()).isSuperset(of: slots))
        // Overwriting replaced items instead of adding: still one item per slot.
        for slot in slots.prefix(3) { #expect(try SecretTool.search(slot: slot).count == 1) }

        for slot in slots { try store.delete(slot) }
        #expect(Set(try store.list()).isDisjoint(with: slots))
        for slot in slots.prefix(5) {
            let (error, _) = storeError { try store.get(slot) }
            #expect(error == .notFound(slot: slot))
            let (again, _) = storeError { try store.delete(slot) }
            #expect(again == .notFound(slot: slot))
        }
    }

    @Test("a re-sign-in with another provider and account keeps one item per slot")
    func overwriteWithChangedAttributes() throws {
        try requireTestKeyring()
        let slot = uniqueSlot("resign")
        defer { try? store.delete(slot) }

        try store.put(sampleCredential("a", provider: "openai", accountID: "acct-a", email: "a@example.com"), for: slot)
        let second = sampleCredential("b", provider: "corp-sso", accountID: nil, email: nil)
        try store.put(second, for: slot)

        #expect(try store.get(slot) == second)
        let items = try SecretTool.search(slot: slot)
        try #require(items.count == 1)
        #expect(items[0]["attribute.provider"] == "corp-sso")
        #expect(items[0]["attribute.account-id"] == "")
        #expect(items[0]["label"] == "Lanyard: \(slot)")
    }

    @Test("items are found by secret-tool with the documented attributes and label")
    func secretToolSeesItems() throws {
        try requireTestKeyring()
        let slot = uniqueSlot("visible")
        defer { try? store.delete(slot) }
        let credential = sampleCredential("x", accountID: "acct-9")
        try store.put(credential, for: slot)

        let items = try SecretTool.search(slot: slot)
        try #require(items.count == 1)
        let item = items[0]
        #expect(item["schema"] == "dev.lanyard.Credential")
        #expect(item["attribute.slot"] == slot.name)
        #expect(item["attribute.provider"] == "openai")
        #expect(item["attribute.account-id"] == "acct-9")
        #expect(item["label"] == "Lanyard: \(slot) (alice@example.com)")
        // `secret-tool lookup xdg:schema dev.lanyard.Credential slot <slot>` prints the JSON document.
        // KWallet keeps the content type Lanyard stores (application/json) where gnome-keyring and
        // KeePassXC answer text/plain, and secret-tool lookup prints only text ("secret does not
        // contain a textual password"): there `secret-tool search` shows the document.
        if testKeyringIsKWallet {
            #expect(try SecretTool.lookup(slot: slot) == nil)
            #expect(item["secret"].map { Data($0.utf8) } == credential.jsonData())
            return
        }
        let printed = try #require(try SecretTool.lookup(slot: slot))
        #expect(printed == credential.jsonData())
        #expect(try Credential.decode(printed, source: "secret-tool") == credential)
    }

    @Test("a secret replaced with secret-tool store is read back; an item secret-tool made is updated in place")
    func secretToolReplacement() throws {
        try requireTestKeyring()
        let slot = uniqueSlot("handmade")
        defer { try? store.delete(slot) }
        // KeePassXC before 2.7.6 hangs when one client replaces an item another client made
        // (upstream bug 9255, Debian 12 has 2.7.4), so there only Lanyard's side is exercised:
        // Lanyard updates an existing item in place, which works whoever made it.
        if !testKeyringIsKeePassXC {
            try store.put(sampleCredential("old", accountID: "acct-h"), for: slot)
            let replacement = sampleCredential("new", accountID: "acct-h")
            try SecretTool.store(slot: slot, provider: "openai", accountID: "acct-h", secret: replacement.jsonData())
            #expect(try store.get(slot) == replacement)
            #expect(try SecretTool.search(slot: slot).count == 1)
            try store.delete(slot)
        }
        try SecretTool.store(
            slot: slot,
            provider: "openai",
            accountID: "acct-h",
            secret: sampleCredential("made-elsewhere", accountID: "acct-h").jsonData()
        )
        let (_, seconds) = try timed { try store.put(sampleCredential("updated", accountID: "acct-h"), for: slot) }
        #expect(seconds < store.timeout)
        #expect(try store.get(slot) == sampleCredential("updated", accountID: "acct-h"))
        #expect(try SecretTool.search(slot: slot).count == 1)
        #expect(try store.list().contains(slot))
    }

    @Test(
        "a secret that is not a credential document is reported corrupt and left alone",
        arguments: [Data("{not json".utf8), Data(#"{"version":1,"provider":"openai"}"#.utf8)]
    )
    func corruptSecret(secret: Data) throws {
        try requireTestKeyring()
        let slot = uniqueSlot("corrupt")
        defer { try? store.delete(slot) }
        try SecretTool.store(slot: slot, provider: "openai", accountID: "", secret: secret)

        let (error, _) = storeError { try store.get(slot) }
        guard case .corrupt(let source, let detail)? = error else {
            Issue.record("expected .corrupt, got \(String(describing: error))")
            return
        }
        #expect(source == "keyring item for slot \(slot)")
        #expect(!detail.isEmpty)
        #expect(try SecretTool.lookup(slot: slot) == secret)
        #expect(try SecretTool.search(slot: slot).count == 1)
        // Listing does not read secrets, so a corrupt item still shows up.
        #expect(try store.list().contains(slot))
    }

    @Test("a duplicate item left by another program is removed by the next put")
    func duplicateCleanedUp() throws {
        try requireTestKeyring()
        let slot = uniqueSlot("dupe")
        defer { try? store.delete(slot) }
        try store.put(sampleCredential("one", accountID: "acct-1"), for: slot)
        // Different attributes, so gnome-keyring keeps both items.
        try SecretTool.store(
            slot: slot,
            provider: "other",
            accountID: "acct-2",
            secret: sampleCredential("two").jsonData()
        )
        #expect(try SecretTool.search(slot: slot).count == 2)
        #expect(try store.list().filter { $0 == slot }.count == 1)

        try store.put(sampleCredential("three"), for: slot)
        #expect(try SecretTool.search(slot: slot).count == 1)
        #expect(try store.get(slot) == sampleCredential("three"))
        try store.delete(slot)
        #expect(try SecretTool.search(slot: slot).isEmpty)
    }

    /// Locking the collection would fail every other test using the shared test keyring at the
    /// same time (`swift test` runs them in parallel): with gnome-keyring the test runs in a child
    /// process on a keyring of its own. The KeePassXC and KWallet runs (scripts/with-keepassxc.sh,
    /// scripts/with-kwallet.sh) are serial and lock their own provider.
    @Test("a locked collection gives .locked within the timeout and changes nothing")
    func lockedCollection() throws {
        try requireTestKeyring()
        if testKeyringIsKeePassXC || testKeyringIsKWallet {
            try lockedCollectionChangesNothing(store)
        } else {
            try expectChildPassesOnPrivateKeyring("lockedCollection", scratch: "locked")
        }
    }

    /// `list` while another connection adds and deletes items: an item deleted between the search
    /// and libsecret's look at it (it failed the whole list with "No such secret item", seen with
    /// the suites running in parallel) never fails the list.
    @Test("list never fails because an item was deleted while it listed")
    func listWhileItemsComeAndGo() async throws {
        try requireTestKeyring()
        let slots = (0..<4).map { uniqueSlot("churn\($0)") }
        let kept = uniqueSlot("churn-kept")
        try store.put(sampleCredential("kept"), for: kept)
        defer { try? store.delete(kept) }
        let churning = Locked(true)
        let store = self.store
        // Another process's logouts and sign-ins, on a thread of the blocking executor.
        let churn = Task {
            try await BlockingExecutor.shared.run {
                var rounds = 0
                while churning.withLock({ $0 }) || rounds < 20 {
                    for slot in slots { try store.put(sampleCredential("c\(rounds)"), for: slot) }
                    for slot in slots { try store.delete(slot) }
                    rounds += 1
                }
                return rounds
            }
        }
        for _ in 0..<60 {
            let listed = try await BlockingExecutor.shared.run { try store.list() }
            #expect(listed.contains(kept))
        }
        churning.withLock { $0 = false }
        #expect(try await churn.value >= 20)
    }

    @Test("health reports the collection, its lock state and persistence")
    func health() throws {
        try requireTestKeyring()
        let login = store.health()
        #expect(
            login.reachable && !login.locked && login.persistent && login.location == loginCollection
                && login.problem == nil
        )
        #expect(login.provider == testKeyringProviderName)
        #expect(login.notes?.isEmpty == false)
        let session = SecretServiceStore(timeout: 5, collection: "session").health()
        if testKeyringIsKeePassXC || testKeyringIsKWallet {
            // One collection per open database (KeePassXC) or per wallet (KWallet), and no session
            // collection.
            #expect(
                session.reachable && session.location == nil && session.problem?.contains("session") == true,
                "\(session)"
            )
        } else {
            #expect(session.reachable && !session.persistent)
            #expect(session.location == "/org/freedesktop/secrets/collection/session")
        }
        for spec in ["no-such-alias", "/org/freedesktop/secrets/collection/nope"] {
            let missing = SecretServiceStore(timeout: 5, collection: spec).health()
            #expect(
                missing.reachable && missing.location == nil && missing.problem?.contains(spec) == true,
                "\(missing)"
            )
        }
    }

    @Test("put moves a slot between collections, keeping one item")
    func moveBetweenCollections() throws {
        try requireTestKeyring()
        let slot = uniqueSlot("moved")
        let sessionStore = SecretServiceStore(timeout: 5, collection: "session")
        defer { try? store.delete(slot) }
        if testKeyringIsKeePassXC || testKeyringIsKWallet {
            // KeePassXC and KWallet have no session collection to move from: the put is refused,
            // nothing is written, and the hint says how to make a collection in this provider.
            let (error, _) = storeError { try sessionStore.put(sampleCredential("in-session"), for: slot) }
            #expect(
                error?.isUnavailable == true && error?.hint.contains(testKeyringProviderName) == true,
                "\(String(describing: error))"
            )
            #expect(try SecretTool.search(slot: slot).isEmpty)
        } else {
            try sessionStore.put(sampleCredential("in-session"), for: slot)
            #expect(try store.get(slot) == sampleCredential("in-session"))
        }

        try store.put(sampleCredential("in-login"), for: slot)
        let items = try SecretTool.search(slot: slot)
        #expect(items.count == 1)
        #expect(try store.get(slot) == sampleCredential("in-login"))
        // A store with a missing collection refuses to write instead of writing elsewhere.
        for spec in ["no-such-alias", "/org/freedesktop/secrets/collection/nope"] {
            let missing = SecretServiceStore(timeout: 5, collection: spec)
            let (error, _) = storeError { try missing.put(sampleCredential("x"), for: slot) }
            #expect(error?.isUnavailable == true && error?.hint.contains(spec) == true, "\(String(describing: error))")
            // Reads still see the slot: they search every collection.
            #expect(try missing.get(slot) == sampleCredential("in-login"))
        }
        #expect(try SecretTool.search(slot: slot).count == 1)
    }

    @Test("concurrent use from several threads")
    func concurrentUse() throws {
        try requireTestKeyring()
        let slots = (0..<8).map { _ in uniqueSlot("thread") }
        defer { for slot in slots { try? store.delete(slot) } }
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: slots.count) { i in
            do {
                for round in 0..<5 {
                    try store.put(sampleCredential("t\(i)-\(round)"), for: slots[i])
                    guard try store.get(slots[i]) == sampleCredential("t\(i)-\(round)") else {
                        throw KeyringTestError.tool("thread \(i) read back something else")
                    }
                    _ = try store.list()
                }
            } catch {
                failures.append("\(slots[i]): \(error)")
            }
        }
        #expect(failures.all.isEmpty)
        for slot in slots { #expect(try SecretTool.search(slot: slot).count == 1) }
    }

    @Test("putAll writes item by item; a failure midway puts back what it replaced and removes what it added")
    func putAllIsUndoneOnAFailure() throws {
        try requireTestKeyring()
        let slots = (0..<6).map { _ in uniqueSlot("batch") }.sorted()
        defer { for slot in slots { try? store.delete(slot) } }
        try store.put(sampleCredential("old"), for: slots[2])
        var batch: [Slot: Credential] = [:]
        for (i, slot) in slots.enumerated() { batch[slot] = sampleCredential("new-\(i)") }

        let failing = FailingPuts(store, failOn: 5)  // slots[4]'s put fails
        #expect(throws: StoreError.self) { try failing.putAll(batch) }
        #expect(try store.get(slots[2]) == sampleCredential("old"), "the item it replaced holds its old secret again")
        #expect(Set(try store.list()).intersection(slots) == [slots[2]], "the items it added are gone")
        #expect(try SecretTool.search(slot: slots[2]).count == 1)

        try store.putAll(batch)
        for (i, slot) in slots.enumerated() { #expect(try store.get(slot) == sampleCredential("new-\(i)")) }
    }

    @Test("get latency in a fresh process: first call and 100 more")
    func latency() throws {
        try requireTestKeyring()
        let slot = try Slot("latency-probe")
        try store.put(sampleCredential("latency"), for: slot)
        defer { try? store.delete(slot) }
        var env = ProcessInfo.processInfo.environment
        env["LANYARD_LATENCY_SLOT"] = slot.name
        let result = try runChildTest("latency", environment: env)
        let report = result.text.split(separator: "\n").filter { $0.hasPrefix("latency:") }
        print(report.joined(separator: "\n"))
        #expect(
            result.status == 0 && result.text.contains(childDoneMarker("latency")),
            "\(result.text)\n\(result.stderr)"
        )
    }
}

/// Another store whose Nth put fails (the protocol's default putAll goes through it slot by slot).
final class FailingPuts: CredentialStore, @unchecked Sendable {
    let inner: any CredentialStore
    let failOn: Int
    private var puts = 0
    init(_ inner: any CredentialStore, failOn: Int) {
        self.inner = inner
        self.failOn = failOn
    }
    var kind: BackendKind { inner.kind }
    func get(_ slot: Slot) throws -> Credential { try inner.get(slot) }
    func put(_ credential: Credential, for slot: Slot) throws {
        puts += 1
        if puts == failOn { throw StoreError.timedOut(backend: "test", operation: "put", seconds: 1) }
        try inner.put(credential, for: slot)
    }
    func delete(_ slot: Slot) throws { try inner.delete(slot) }
    func list() throws -> [Slot] { try inner.list() }
    func health() -> StoreHealth { inner.health() }
}

/// Collects failure messages from several threads.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    func append(_ message: String) { lock.withLock { messages.append(message) } }
    var all: [String] { lock.withLock { messages } }
}

/// Layout and plumbing that need no keyring.
@Suite("Secret Service layout")
struct SecretServiceLayoutTests {
    @Test func labelAndAttributes() throws {
        let slot = try Slot("work")
        #expect(SecretServiceStore.label(slot: slot, email: "alice@example.com") == "Lanyard: work (alice@example.com)")
        #expect(SecretServiceStore.label(slot: slot, email: nil) == "Lanyard: work")
        #expect(SecretServiceStore.label(slot: slot, email: "") == "Lanyard: work")
        #expect(
            SecretServiceStore.attributes(slot: slot, credential: sampleCredential("a", accountID: nil))
                == ["slot": "work", "provider": "openai", "account-id": ""]
        )
        #expect(SecretServiceStore.schemaName == "dev.lanyard.Credential")
        #expect(LanyardSchema.name == SecretServiceStore.schemaName)
        #expect(
            LanyardSchema.attributeNames
                == Set(SecretServiceStore.attributes(slot: slot, credential: sampleCredential("a")).keys)
        )
    }

    @Test func collectionOfItem() {
        #expect(
            SecretServiceStore.collectionPath(of: "/org/freedesktop/secrets/collection/login/7")
                == "/org/freedesktop/secrets/collection/login"
        )
    }

    @Test("the bus check never lets GIO autolaunch a bus")
    func missingBus() throws {
        let scratch = try ScratchDirectory("busprobe")
        let runtime = try scratch.subdirectory("runtime")
        func reason(_ env: [String: String]) -> String? { KeyringConnection.missingBusReason { env[$0] } }
        #expect(reason(["DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]) == nil)
        #expect(reason(["DBUS_SESSION_BUS_ADDRESS": ""]) == "DBUS_SESSION_BUS_ADDRESS is set but empty")
        let missing = reason(["XDG_RUNTIME_DIR": runtime, "DISPLAY": ":0"])
        #expect(missing == "DBUS_SESSION_BUS_ADDRESS is not set and \(runtime)/bus does not exist")
        // A systemd user bus at $XDG_RUNTIME_DIR/bus counts, as it does for GIO.
        #expect(FileManager.default.createFile(atPath: runtime + "/bus", contents: nil))
        #expect(reason(["XDG_RUNTIME_DIR": runtime]) == nil)
    }

    @Test("a libsecret call that fails without a GError is an error, not an empty result")
    func failureWithoutGError() throws {
        #expect(throws: GLibCall.Failure.self) { try GLibCall.bool { _ in 0 } }
        #expect(throws: GLibCall.Failure.self) { try GLibCall.pointer { _ -> UnsafeMutableRawPointer? in nil } }
        #expect(try GLibCall.optionalPointer { _ -> UnsafeMutableRawPointer? in nil } == nil)
        #expect(throws: KeyringFailure.self) { try LanyardSchema.validate(["slot": "work", "bogus": "x"]) }
        try LanyardSchema.validate(["slot": "work", "provider": "p", "account-id": ""])
    }
}

/// A locked collection gives `.locked` within the timeout for every call and changes nothing;
/// unlocked again, everything is as it was. Locks and unlocks the session's login collection.
func lockedCollectionChangesNothing(_ store: SecretServiceStore) throws {
    let slot = uniqueSlot("locked")
    let original = sampleCredential("before-lock")
    try store.put(original, for: slot)
    defer { try? store.delete(slot) }

    try TestKeyring.lockLogin()
    var unlocked = false
    defer { if !unlocked { try? TestKeyring.unlockLogin() } }
    #expect(try TestKeyring.isLoginLocked())

    let other = uniqueSlot("locked-new")
    let calls: [(String, () throws -> Void)] = [
        ("get", { _ = try store.get(slot) }),
        ("get missing", { _ = try store.get(other) }),
        ("put", { try store.put(sampleCredential("during-lock"), for: slot) }),
        ("put new slot", { try store.put(sampleCredential("during-lock"), for: other) }),
        ("list", { _ = try store.list() }),
        ("delete", { try store.delete(slot) }),
    ]
    for (name, call) in calls {
        let (error, seconds) = storeError(call)
        #expect(error?.isLocked == true, "\(name): \(String(describing: error))")
        #expect(seconds < store.timeout, "\(name) took \(seconds) s")
        #expect(error?.hint.contains(loginCollection) == true)
    }
    let health = store.health()
    #expect(health.reachable && health.locked)

    try TestKeyring.unlockLogin()
    unlocked = true
    #expect(try !TestKeyring.isLoginLocked())
    #expect(try store.get(slot) == original)
    #expect(try SecretTool.search(slot: slot).count == 1)
    #expect(try SecretTool.search(slot: other).isEmpty)
    try store.put(sampleCredential("after-lock"), for: slot)
    #expect(try store.get(slot) == sampleCredential("after-lock"))
    #expect(try store.list().contains(slot))
    #expect(!store.health().locked)
}
