// Another program's keyring entry (RustKeyringEntry: Codex's, as its Rust `keyring` crate keeps
// it) against gnome-keyring: written where and as the crate writes it, and a locked collection
// refused without a prompt, on a keyring of its own in a child process (locking the shared test
// keyring would fail the tests running beside this one).

import Foundation
import LanyardStore
import LanyardTestSupport
import Testing

@Suite("Another program's keyring entry")
struct RustKeyringEntryTests {
    @Test("a locked keyring: .locked for reading, writing and deleting, and nothing changes")
    func lockedKeyring() throws {
        try requireTestKeyring()
        // KeePassXC's Lock answers with a prompt of its own; the gnome-keyring run covers this.
        if testKeyringIsKeePassXC { return }
        try expectChildPassesOnPrivateKeyring("rustKeyringLocked", scratch: "rustlocked")
    }
}

extension SecretServiceChildTests {
    /// The child half of ``RustKeyringEntryTests/lockedKeyring()``.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["LANYARD_STORE_PROBE"] == "rustKeyringLocked"))
    func rustKeyringLocked() throws {
        let env = ProcessInfo.processInfo.environment
        let daemon = try KeyringDaemon(environment: env, password: env["LANYARD_TEST_KEYRING_PASSWORD"] ?? "")
        defer { daemon.kill() }
        let entry = RustKeyringEntry(service: "Codex Auth", username: "cli|0123456789abcdef", timeout: 5)
        #expect(entry.problem() == nil)
        try entry.write("before")
        #expect(try entry.read() == "before")

        try TestKeyring.lockLogin()
        #expect(entry.problem() == .locked)
        #expect(throws: RustKeyringEntry.Failure.locked) { _ = try entry.read() }
        #expect(throws: RustKeyringEntry.Failure.locked) { try entry.write("during") }
        #expect(throws: RustKeyringEntry.Failure.locked) { try entry.delete() }
        let other = RustKeyringEntry(service: "Codex Auth", username: "cli|fedcba9876543210", timeout: 5)
        #expect(throws: RustKeyringEntry.Failure.locked) { try other.write("new") }

        try TestKeyring.unlockLogin()
        #expect(try entry.read() == "before")
        #expect(try other.read() == nil)
        #expect(try entry.delete())
        #expect(try entry.read() == nil)
        print(childDoneMarker("rustKeyringLocked"))
    }
}
