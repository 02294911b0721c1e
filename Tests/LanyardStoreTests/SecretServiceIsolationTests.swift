// Secret Service failure modes that need a D-Bus setup of their own: no bus, a bus without a
// Secret Service, and a gnome-keyring that is killed or hangs mid-run. A process connects to one
// session bus for its lifetime (GIO and libsecret cache it), so each case re-runs one test of this
// binary in a child process (SecretServiceChildTests) with its own environment. None of them
// touches the shared test keyring.

import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

@Suite("Secret Service without a usable keyring")
struct SecretServiceIsolationTests {
    @Test("no session bus: .unavailable at once, no bus autolaunched")
    func noBus() throws {
        let scratch = try ScratchDirectory("nobus")
        var env = try isolatedEnvironment(in: scratch)
        // A display that does not exist: GIO would try `dbus-launch --autolaunch` through it.
        env["DISPLAY"] = ":93"
        try expectChildPasses("noBus", env)
    }

    @Test("a bus with no Secret Service: .unavailable at once")
    func noService() throws {
        let scratch = try ScratchDirectory("nosvc")
        let bus = try PrivateSessionBus(folder: try scratch.subdirectory("bus"))
        var env = try isolatedEnvironment(in: scratch)
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        try expectChildPasses("noService", env)
        withExtendedLifetime(bus) {}
    }

    @Test("gnome-keyring killed or hung mid-run: .unavailable / .timedOut within the timeout, nothing lost")
    func killedDaemon() throws {
        try expectChildPassesOnPrivateKeyring("killedDaemon", scratch: "killed")
    }

    @Test(
        "the keyring's collection deleted under Lanyard: .unavailable within the timeout, no new collection, no prompt"
    )
    func deletedCollection() throws {
        try expectChildPassesOnPrivateKeyring("deletedCollection", scratch: "deleted")
    }
}

/// Runs child test `name` on a private bus where it starts gnome-keyring daemons of its own.
func expectChildPassesOnPrivateKeyring(
    _ name: String,
    scratch prefix: String,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let scratch = try ScratchDirectory(prefix)
    let bus = try PrivateSessionBus(folder: try scratch.subdirectory("bus"))
    var env = try isolatedEnvironment(in: scratch)
    env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
    env["LANYARD_TEST_KEYRING_PASSWORD"] = "\(name)-test"
    try expectChildPasses(name, env, sourceLocation: sourceLocation)
    withExtendedLifetime(bus) {}
}

/// Runs child test `name` with `env` and expects it to pass.
func expectChildPasses(
    _ name: String,
    _ env: [String: String],
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let result = try runChildTest(name, environment: env)
    // The child's own measurements, for the log.
    for line in result.text.split(separator: "\n") where line.hasPrefix("child:") { print(line) }
    #expect(
        result.status == 0 && result.text.contains(childDoneMarker(name)),
        "child test \(name) failed (status \(result.status)):\n\(result.text)\n\(result.stderr)",
        sourceLocation: sourceLocation
    )
}

/// Which child test this process runs (set only by runChildTest).
private let childTest = ProcessInfo.processInfo.environment["LANYARD_STORE_PROBE"]

/// The halves of SecretServiceIsolationTests (and the latency measurement) that run in a child
/// process. Disabled (reported as skipped) in a normal run.
@Suite("Secret Service child processes (run by other tests)")
struct SecretServiceChildTests {
    static let hintWords = "backend = file"

    /// Every operation of `store` fails with `.unavailable` in under `limit` seconds.
    private func expectUnavailable(
        _ store: SecretServiceStore,
        under limit: TimeInterval,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let slot = try Slot("work")
        let calls: [(String, () throws -> Void)] = [
            ("get", { _ = try store.get(slot) }),
            ("put", { try store.put(sampleCredential("x"), for: slot) }),
            ("delete", { try store.delete(slot) }),
            ("list", { _ = try store.list() }),
        ]
        for (name, call) in calls {
            let (error, seconds) = storeError(call, sourceLocation: sourceLocation)
            #expect(
                error?.isUnavailable == true,
                "\(name): \(String(describing: error))",
                sourceLocation: sourceLocation
            )
            #expect(seconds < limit, "\(name) took \(seconds) s", sourceLocation: sourceLocation)
            #expect(
                error?.hint.contains(Self.hintWords) == true,
                "\(name): hint \(error?.hint ?? "")",
                sourceLocation: sourceLocation
            )
            print(
                "child: \(name) -> \(error.map { String(describing: $0) } ?? "no error") in \(Int(seconds * 1000)) ms"
            )
        }
        let (health, seconds) = timed { store.health() }
        #expect(!health.reachable && health.problem?.contains(Self.hintWords) == true, sourceLocation: sourceLocation)
        #expect(seconds < limit, sourceLocation: sourceLocation)
    }

    /// Nothing was written anywhere else instead (no keyring files, no fallback store).
    private func expectNothingWritten(sourceLocation: SourceLocation = #_sourceLocation) {
        let env = ProcessInfo.processInfo.environment
        for key in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
            guard let dir = env[key] else { continue }
            let contents = (try? FileManager.default.subpathsOfDirectory(atPath: dir)) ?? []
            #expect(contents.isEmpty, "\(key) has \(contents)", sourceLocation: sourceLocation)
        }
    }

    @Test(.enabled(if: childTest == "noBus"))
    func noBus() throws {
        #expect(ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] == nil)
        try expectUnavailable(SecretServiceStore(timeout: 10), under: 1)
        let (error, _) = storeError { try SecretServiceStore(timeout: 10).get(Slot("work")) }
        #expect(error?.hint.contains("DBUS_SESSION_BUS_ADDRESS is not set") == true)
        expectNothingWritten()
        print(childDoneMarker("noBus"))
    }

    @Test(.enabled(if: childTest == "noService"))
    func noService() throws {
        try expectUnavailable(SecretServiceStore(timeout: 10), under: 1)
        let (error, _) = storeError { try SecretServiceStore(timeout: 10).get(Slot("work")) }
        #expect(error?.hint.contains("org.freedesktop.secrets") == true)
        expectNothingWritten()
        print(childDoneMarker("noService"))
    }

    @Test(.enabled(if: childTest == "lockedCollection"))
    func lockedCollection() throws {
        let env = ProcessInfo.processInfo.environment
        let daemon = try KeyringDaemon(environment: env, password: env["LANYARD_TEST_KEYRING_PASSWORD"] ?? "")
        defer { daemon.kill() }
        try lockedCollectionChangesNothing(SecretServiceStore(timeout: 5))
        print(childDoneMarker("lockedCollection"))
    }

    @Test(.enabled(if: childTest == "deletedCollection"))
    func deletedCollection() throws {
        let env = ProcessInfo.processInfo.environment
        let daemon = try KeyringDaemon(environment: env, password: env["LANYARD_TEST_KEYRING_PASSWORD"] ?? "")
        defer { daemon.kill() }
        let timeout: TimeInterval = 2
        let store = SecretServiceStore(timeout: timeout)
        let slot = try Slot("work")
        try store.put(sampleCredential("w"), for: slot)
        let collection = try #require(store.health().location)
        let deleted = try runTool(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", collection,
                "--method", "org.freedesktop.Secret.Collection.Delete",
            ],
            environment: env
        )
        try #require(deleted.status == 0, "Delete: \(deleted.stderr)")
        // Every call says the collection is gone (not "no credential": the slot is not signed
        // out, its keyring changed), in time, and put makes no collection of its own.
        for (name, call) in [
            ("get", { _ = try store.get(slot) }), ("put", { try store.put(sampleCredential("x"), for: slot) }),
            ("list", { _ = try store.list() }),
        ] as [(String, () throws -> Void)] {
            let (error, seconds) = storeError(call)
            #expect(
                error?.isUnavailable == true && error?.hint.contains("no collection") == true,
                "\(name): \(String(describing: error))"
            )
            #expect(seconds < timeout, "\(name) took \(seconds) s")
            print(
                "child: \(name) after the collection was deleted -> "
                    + "\(error.map { String(describing: $0) } ?? "no error") in \(Int(seconds * 1000)) ms"
            )
        }
        let health = store.health()
        #expect(health.reachable && health.problem?.contains("no collection") == true, "\(health)")
        let collections = try runTool(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Service", "Collections",
            ],
            environment: env
        )
        #expect(!collections.text.contains(collection), "no collection was made again: \(collections.text)")
        print(childDoneMarker("deletedCollection"))
    }

    @Test(.enabled(if: childTest == "killedDaemon"))
    func killedDaemon() throws {
        let env = ProcessInfo.processInfo.environment
        let password = env["LANYARD_TEST_KEYRING_PASSWORD"] ?? ""
        let timeout: TimeInterval = 2
        let store = SecretServiceStore(timeout: timeout)
        let slots = try (0..<5).map { try Slot("slot-\($0)") }

        // 1. A working keyring, then SIGKILL: every call is .unavailable well within the timeout.
        let first = try KeyringDaemon(environment: env, password: password)
        for (i, slot) in slots.enumerated() { try store.put(sampleCredential("k\(i)"), for: slot) }
        #expect(try store.get(slots[0]) == sampleCredential("k0"))
        first.kill()
        try expectUnavailable(store, under: timeout)

        // 2. Restarted against the same keyring directory: the same store reconnects and every
        //    credential is still there.
        let second = try KeyringDaemon(environment: env, password: password)
        for (i, slot) in slots.enumerated() { #expect(try store.get(slot) == sampleCredential("k\(i)")) }
        #expect(try store.list() == slots)

        // 3. A hung service (SIGSTOP): .timedOut at the timeout, and fine again once it resumes.
        second.kill(signal: SIGSTOP)
        let (hung, hungSeconds) = storeError { try store.get(slots[0]) }
        #expect(hung == .timedOut(backend: "Secret Service", operation: "get slot-0", seconds: timeout))
        #expect(hungSeconds >= timeout - 0.05 && hungSeconds < timeout + 1, "took \(hungSeconds) s")
        let (hungPut, putSeconds) = storeError { try store.put(sampleCredential("lost"), for: slots[1]) }
        #expect(hungPut?.isTimedOut == true && putSeconds < timeout + 1)
        print("child: hung get -> \(String(describing: hung)) in \(Int(hungSeconds * 1000)) ms")
        second.kill(signal: SIGCONT)
        #expect(try store.get(slots[0]) == sampleCredential("k0"))

        // 4. Killed while a call is waiting for it: that call ends with .unavailable, not a hang.
        second.kill(signal: SIGSTOP)
        let killer = DispatchWorkItem { second.kill(signal: SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3, execute: killer)
        let (midCall, midSeconds) = storeError { try store.get(slots[2]) }
        killer.wait()
        #expect(midCall?.isUnavailable == true, "\(String(describing: midCall))")
        #expect(midSeconds < timeout, "took \(midSeconds) s")
        print("child: killed mid-call -> \(String(describing: midCall)) in \(Int(midSeconds * 1000)) ms")

        // 5. Nothing lost: a third daemon on the same directory has every slot, and the put that
        //    timed out while the service hung did not replace slot-1 with a partial write.
        let third = try KeyringDaemon(environment: env, password: password)
        let expected = ["k0", "k1", "k2", "k3", "k4"]
        for (slot, marker) in zip(slots, expected) {
            let stored = try store.get(slot)
            #expect(stored == sampleCredential(marker) || (slot == slots[1] && stored == sampleCredential("lost")))
        }
        third.kill()
        print(childDoneMarker("killedDaemon"))
    }

    @Test(.enabled(if: childTest == "latency"))
    func latency() throws {
        let slot = try Slot(ProcessInfo.processInfo.environment["LANYARD_LATENCY_SLOT"] ?? "latency-probe")
        let store = SecretServiceStore(timeout: 5)
        let (_, first) = try timed { try store.get(slot) }
        let (_, second) = try timed { try store.get(slot) }
        let (_, hundred) = try timed { for _ in 0..<100 { _ = try store.get(slot) } }
        let (_, list) = try timed { try store.list() }
        let (_, put) = try timed { try store.put(sampleCredential("latency-2"), for: slot) }
        func ms(_ s: TimeInterval) -> String { String(format: "%.2f ms", s * 1000) }
        print("latency: first get \(ms(first)) (connects, opens a session); second get \(ms(second))")
        print("latency: 100 gets \(ms(hundred)) total, \(ms(hundred / 100)) each")
        print("latency: list \(ms(list)); put (same attributes, in place) \(ms(put))")
        print(childDoneMarker("latency"))
    }
}
