import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// A locked file store, met by a person at a terminal: `token`, `login` and `store unlock` ask for
/// the passphrase (three tries), and `store init` asks again when the two entries differ. The
/// built binary runs on a pseudo-terminal and the answers are typed at its prompts. Off a terminal
/// nothing is asked: a typed error (exit 5) with the advice.
@Suite struct TerminalUnlockTests {
    static let passphrase = "correct horse battery"

    /// A home whose config points `openai` at `emulator` (when given) and whose file store is
    /// protected by ``passphrase`` and locked; with `slot`, a signed-in slot in it.
    static func lockedHome(slot: String? = nil, emulator: OAuthTestServer? = nil) throws -> TestHome {
        let home = TestHome()
        var config = "[store]\nbackend = file\n"
        if let emulator { config += "[provider.openai]\nissuer = \(emulator.baseURL.absoluteString)\n" }
        try home.writeConfig(config)
        let paths = Paths(environment: home.environment)
        // A small scrypt work factor keeps each try fast; the store records it.
        let file = EncryptedFileStore(paths: paths)
        try file.initialize(passphrase: passphrase, workFactor: 10)
        if let slot {
            let name = try Slot(slot)
            let credential = Credential(
                provider: "openai",
                tokens: TokenSet(
                    accessToken: "AT-\(slot)-terminal",
                    refreshToken: "RT-\(slot)",
                    expiresAt: Date() + 7200
                ),
                lastRefresh: Date(),
                account: AccountInfo(email: "\(slot)@example.com")
            )
            try file.put(credential, for: name)
            try Registry(paths: paths).update { doc in
                doc.slots[name] = SlotRecord(
                    provider: "openai",
                    backend: .file,
                    account: credential.account,
                    state: .signedIn(expiresAt: credential.tokens.expiresAt),
                    createdAt: Date()
                )
                doc.active = name
            }
        }
        file.lock()
        #expect(file.health().locked)
        return home
    }

    static func terminal(_ home: TestHome, _ args: [String]) throws -> TerminalRun {
        var environment = home.environment
        environment["NO_COLOR"] = "1"
        return try TerminalRun(lanyardBinary(), args, environment: environment)
    }

    /// `token` on a terminal: one wrong passphrase, then the right one; the token follows.
    @Test func tokenOffersToUnlock() async throws {
        let home = try Self.lockedHome(slot: "work")
        defer { _ = try? home.run("store", "lock") }
        let run = try Self.terminal(home, ["token", "work"])
        try await run.answer("The file store is locked. Passphrase for the Lanyard file store: ", with: "wrong horse")
        try await run.answer("Wrong passphrase; try again: ", with: Self.passphrase)
        let (status, text) = try await run.finish()
        #expect(status == 0, "\(text)")
        #expect(text.contains("AT-work-terminal"), "\(text)")
        #expect(!text.contains(Self.passphrase) && !text.contains("wrong horse"), "nothing typed is echoed")
        // Unlocked for the next commands, as `store unlock` leaves it.
        #expect(try home.run("token", "work").stdout == "AT-work-terminal\n")
    }

    /// `store unlock`: three wrong passphrases and it gives up (exit 1), nothing unlocked; the
    /// right one on the third try unlocks.
    @Test func storeUnlockGivesThreeTries() async throws {
        let home = try Self.lockedHome()
        defer { _ = try? home.run("store", "lock") }
        let failing = try Self.terminal(home, ["store", "unlock"])
        try await failing.answer("Passphrase for the Lanyard file store: ", with: "one")
        try await failing.answer("Wrong passphrase; try again: ", with: "two")
        try await failing.answer("Wrong passphrase; try again: ", time: 2, with: "three")
        let failed = try await failing.finish()
        #expect(failed.status == 1, "\(failed.text)")
        #expect(
            failed.text.contains("lanyard: wrong passphrase: the store was not unlocked and nothing changed"),
            "\(failed.text)"
        )
        #expect(failing.shown("Wrong passphrase; try again: ") == 2)
        #expect(try home.run("store", "status").stdout.hasSuffix(": locked\n"))

        let unlocking = try Self.terminal(home, ["store", "unlock"])
        try await unlocking.answer("Passphrase for the Lanyard file store: ", with: "one")
        try await unlocking.answer("Wrong passphrase; try again: ", with: "two")
        try await unlocking.answer("Wrong passphrase; try again: ", time: 2, with: Self.passphrase)
        let unlocked = try await unlocking.finish()
        #expect(unlocked.status == 0, "\(unlocked.text)")
        #expect(unlocked.text.contains("Unlocked for 15 min"))
        #expect(try home.run("store", "status").stdout.hasSuffix(": unlocked\n"))
    }

    /// `login` asks before it requests a code, so the approval lands in an open store.
    @Test func loginUnlocksBeforeTheCode() async throws {
        let emulator = try OAuthTestServer(.chatgptEmulator)
        try await emulator.hook("/_test/config", ["interval": 1])
        let home = try Self.lockedHome(emulator: emulator)
        defer { _ = try? home.run("store", "lock") }
        let run = try Self.terminal(home, ["login", "work"])
        try await run.answer("The file store is locked. Passphrase for the Lanyard file store: ", with: Self.passphrase)
        try await run.waitUntilShown("enter the code")
        let prompt = try #require(run.text.range(of: "Passphrase for the Lanyard file store"))
        let code = try #require(run.text.range(of: "To sign in, open"))
        #expect(prompt.lowerBound < code.lowerBound, "asked before the code was shown")
        try await emulator.hook("/_test/approve", ["email": "alice@example.com", "plan": "pro"])
        let (status, text) = try await run.finish()
        #expect(status == 0, "\(text)")
        #expect(text.contains("Signed alice@example.com (Pro) into slot work."))
        #expect(
            try EncryptedFileStore(paths: Paths(environment: home.environment)).get(try Slot("work")).account.email
                == "alice@example.com"
        )
    }

    /// `store init`: when the two entries differ it says so and asks for both again.
    @Test func storeInitAsksAgainAfterAMismatch() async throws {
        let home = TestHome()
        let run = try Self.terminal(home, ["store", "init"])
        defer { _ = try? home.run("store", "lock") }
        try await run.answer("New passphrase for the Lanyard file store: ", with: "first try")
        try await run.answer("Repeat to confirm: ", with: "first tyr")
        try await run.answer(
            "The passphrases did not match; try again. New passphrase for the Lanyard file store: ",
            with: Self.passphrase
        )
        try await run.answer("Repeat to confirm: ", time: 2, with: Self.passphrase)
        let (status, text) = try await run.finish()
        #expect(status == 0, "\(text)")
        #expect(text.contains("Created the encrypted file store"))
        let store = EncryptedFileStore(paths: Paths(environment: home.environment))
        store.lock()
        try store.unlock(passphrase: Self.passphrase)
    }

    /// Off a terminal nothing is asked: the locked store is a typed error with the advice.
    @Test func offATerminalALockedStoreIsAnError() throws {
        let home = try Self.lockedHome(slot: "work")
        let token = try home.run("token", "work")
        #expect(token.status == 5)
        #expect(token.stderr == "lanyard: encrypted file is locked: run `lanyard store unlock`\n", "\(token.stderr)")
        let json = try home.run("token", "work", "--json")
        #expect(json.status == 5 && json.stdout.contains("\"store_locked\""))
    }
}
