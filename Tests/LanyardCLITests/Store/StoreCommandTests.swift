import Foundation
import LanyardCLI
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// `lanyard store …` against the real file store (no keyring needed).
@Suite(.serialized) struct StoreCommandTests {
    func harness(passphrase: String) throws -> CLIHarness {
        let h = CLIHarness()
        h.realStores = true
        let file = h.root + "/pass"
        try (passphrase + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        h.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = file
        return h
    }

    @Test func initStatusLockUnlock() async throws {
        let h = try harness(passphrase: "correct horse")
        #expect(await h.run("store", "status").stdout == "No file store (create one with `lanyard store init`).\n")
        let created = await h.run("store", "init", "--json")
        #expect(created.status == 0)
        #expect(created.json["passphrase"] as? Bool == true)
        #expect(!created.stdout.contains("correct horse") && !created.stderr.contains("correct horse"))
        #expect(await h.run("store", "init").status == 1, "a second init refuses")

        let status = await h.run("store", "status", "--json")
        #expect(status.json["initialized"] as? Bool == true && status.json["locked"] as? Bool == false)
        #expect(await h.run("store", "lock").stdout == "Locked the file store.\n")
        #expect(await h.run("store", "lock", "--json").json["was_unlocked"] as? Bool == false)
        #expect(await h.run("store", "status").stdout.hasSuffix("store.age: locked\n"))

        // Locked: a read says so with exit 5.
        try h.registry.updateInTest { doc in
            doc.slots[try Slot("w")] = SlotRecord(provider: "openai", backend: .file, state: .signedIn(expiresAt: nil))
        }
        let locked = await h.run("token", "w", "--json")
        #expect(locked.status == 5)
        #expect((locked.json["error"] as? [String: Any])?["code"] as? String == "store_locked")

        // Readable by others: refused before it is read, with the mode and the fix.
        try "wrong horse\n".write(toFile: h.root + "/pass", atomically: true, encoding: .utf8)
        chmod(h.root + "/pass", 0o644)
        let exposed = await h.run("store", "unlock", "--json")
        #expect(exposed.status == 1)
        let exposedError = exposed.json["error"] as? [String: Any] ?? [:]
        #expect(exposedError["code"] as? String == "unsafe_path")
        #expect(
            exposedError["message"] as? String
                == "refusing to use \(h.root)/pass: it holds a secret and its mode is 0644, "
                + "so group or others can get at it; run `chmod 600 \(h.root)/pass`"
        )

        chmod(h.root + "/pass", 0o600)
        let wrong = await h.run("store", "unlock", "--json")
        #expect(wrong.status == 1)
        #expect((wrong.json["error"] as? [String: Any])?["code"] as? String == "wrong_passphrase")
        #expect(!wrong.stdout.contains("wrong horse"))
        #expect(
            (wrong.json["error"] as? [String: Any])?["message"] as? String
                == "wrong passphrase (from LANYARD_PASSPHRASE_FILE \(h.root)/pass): "
                + "the store was not unlocked and nothing changed; "
                + "check the passphrase there"
        )

        try "correct horse\n".write(toFile: h.root + "/pass", atomically: true, encoding: .utf8)
        chmod(h.root + "/pass", 0o600)
        let unlocked = await h.run("store", "unlock")
        #expect(unlocked.status == 0)
        #expect(unlocked.stdout.hasPrefix("Unlocked for 15 min"))
        #expect(await h.run("store", "status", "--json").json["locked"] as? Bool == false)
        await h.run("store", "lock")
    }

    @Test func askpassAndMissingSources() async throws {
        let h = CLIHarness()
        h.realStores = true
        let askpass = h.root + "/askpass.sh"
        try "#!/bin/sh\necho 'from askpass'\n".write(toFile: askpass, atomically: true, encoding: .utf8)
        chmod(askpass, 0o700)
        h.extraEnvironment["LANYARD_ASKPASS"] = askpass
        #expect(await h.run("store", "init").status == 0)
        #expect(await h.run("store", "lock").status == 0)
        #expect(await h.run("store", "unlock").status == 0)
        await h.run("store", "lock")
        h.extraEnvironment["LANYARD_ASKPASS"] = nil
        let none = await h.run("store", "unlock", "--json")  // no terminal in tests
        #expect(none.status == 1)
        #expect((none.json["error"] as? [String: Any])?["code"] as? String == "passphrase_unavailable")
    }

    @Test func noPassphraseWarnsAndUsageErrors() async throws {
        let h = CLIHarness()
        h.realStores = true
        let r = await h.run("store", "init", "--no-passphrase")
        #expect(r.status == 0)
        #expect(r.stderr.contains("unprotected") && r.stderr.contains("0600"))
        #expect(await h.run("store", "unlock").stdout == "This store has no passphrase; nothing to unlock.\n")
        let typo = await h.run("store", "unlok")
        #expect(typo.status == 2 && typo.stderr.contains("did you mean `unlock`?"))
        #expect(await h.run("store", "migrate").status == 2, "migrate needs --to")
        #expect(await h.run("store", "migrate", "--to", "cloud").status == 2)
        #expect(await h.run("store", "lock", "extra").status == 2)
    }
}
