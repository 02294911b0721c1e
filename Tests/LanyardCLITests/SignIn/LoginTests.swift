import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

// `lanyard login` and `lanyard logout` against the OAuth test servers: in-process through
// CLIHarness (real file store, virtual time), and as real processes for SIGINT and the backend
// fallback.

extension CLIHarness {
    /// Runs `lanyard args` in-process with the test's virtual-time sleeper.
    func runDetached(_ args: String...) async -> Result { await run(args, sleeper: TestSleeper(clock: clock)) }

    /// Writes config.ini.
    func writeConfig(_ text: String) throws {
        try FileManager.default.createDirectory(atPath: paths.configDirectory, withIntermediateDirectories: true)
        try text.write(toFile: paths.configFile, atomically: true, encoding: .utf8)
    }

    var fileStore: EncryptedFileStore { EncryptedFileStore(paths: paths) }

    /// The registry file and the encrypted store, as bytes (any write changes the store's bytes).
    func storedBytes() -> [Data?] {
        [
            FileManager.default.contents(atPath: paths.registryFile),
            FileManager.default.contents(atPath: paths.encryptedStoreFile),
        ]
    }
}

extension OAuthTestServer {
    /// The user code the server issued most recently.
    func lastUserCode() async throws -> String? {
        (try await get("/_test/devices")["devices"] as? [[String: Any]] ?? []).last?["user_code"] as? String
    }
}

/// A harness with real stores (the file store, set up without a passphrase), and config pointing
/// `openai` at the emulator and `test` at the device server.
struct LoginRig {
    let h = CLIHarness()
    let emulator: OAuthTestServer
    private let deviceServer: OAuthTestServer?

    /// The device server (only for rigs made `withDevice`).
    var device: OAuthTestServer { deviceServer! }

    init(backend: String? = "file", withDevice: Bool = false) async throws {
        emulator = try OAuthTestServer(.chatgptEmulator)
        deviceServer = withDevice ? try OAuthTestServer(.deviceServer, arguments: ["--poll-tolerance", "1000"]) : nil
        h.realStores = true
        try h.writeConfig(Self.config(emulator: emulator, device: deviceServer, backend: backend))
        let initialised = await h.run("store", "init", "--no-passphrase")
        try #require(initialised.status == 0, "\(initialised.stderr)")
    }

    static func config(emulator: OAuthTestServer, device: OAuthTestServer?, backend: String?) -> String {
        var text = ""
        if let backend { text += "[store]\nbackend = \(backend)\n\n" }
        text += "[provider.openai]\nissuer = \(emulator.baseURL.absoluteString)\n\n"
        if let device {
            text += """
                [provider.test]
                type = device-code
                issuer = \(device.baseURL.absoluteString)
                client-id = lanyard-test-client
                plan-claim = org.example.plan

                """
        }
        return text
    }

    /// A sleeper that approves on its `call`th wait (as `fields`' account) at `server`.
    func approving(at call: Int = 1, on server: OAuthTestServer? = nil, _ fields: [String: Any] = [:]) -> TestSleeper {
        let server = server ?? emulator
        nonisolated(unsafe) let fields = fields  // JSON values only, read once
        return TestSleeper(clock: h.clock) { n in if n == call { try await server.hook("/_test/approve", fields) } }
    }

    /// A sleeper that runs `path` (deny, expire…) on its `call`th wait.
    func hooking(_ path: String, at call: Int = 1, on server: OAuthTestServer? = nil) -> TestSleeper {
        let server = server ?? emulator
        return TestSleeper(clock: h.clock) { n in if n == call { try await server.hook(path) } }
    }
}

@Suite struct LoginCommandTests {
    @Test func loginHuman() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        let r = await h.run(
            ["login", "work"],
            sleeper: rig.approving(at: 2, ["email": "alice@example.com", "plan": "pro"])
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Signed alice@example.com (Pro) into slot work.\n")
        let code = try #require(try await rig.emulator.lastUserCode())
        #expect(r.stderr.contains("To sign in, open \(rig.emulator.baseURL.absoluteString)/codex/device\n"))
        #expect(r.stderr.contains("and enter the code:\n\n    \(code)\n"))
        #expect(r.stderr.contains("Waiting for approval… 15 min left (Ctrl-C cancels)\n"))

        let slot = try Slot("work")
        let credential = try h.fileStore.get(slot)
        let record = try #require(try h.registry.loadInTest().slots[slot])
        #expect(record.provider == "openai" && record.backend == .file)
        #expect(record.state == .signedIn(expiresAt: h.clock.now() + 3600))
        #expect(record.account == credential.account && credential.account.email == "alice@example.com")
        for token in [credential.tokens.accessToken, credential.tokens.refreshToken, credential.tokens.idToken]
            .compactMap({ $0 })
        {
            #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
        }
    }

    /// A sign-in into a slot that comes back as another account leaves the slot alone (every pin
    /// naming it would hand out that account's tokens) unless --replace is given, and keeps the
    /// approved sign-in in a new slot named after its email, saying so; the same account signs in
    /// again freely.
    @Test func loginNeverPutsAnotherAccountIntoASlotUnasked() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        let alice: [String: Any] = ["email": "alice@example.com", "plan": "pro", "account_id": "acct-a"]
        #expect(await h.run(["login", "alice"], sleeper: rig.approving(alice)).status == 0)
        let slot = try Slot("alice")
        let before = try h.fileStore.get(slot)

        let bob: [String: Any] = ["email": "bob@work.example", "plan": "pro", "account_id": "acct-b"]
        let kept = await h.run(["login", "alice"], sleeper: rig.approving(bob))
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(
            kept.stderr.contains(
                "Slot alice holds alice@example.com, account acct-a, "
                    + "another account: this sign-in is kept in the slot bob "
                    + "instead (`lanyard login alice --replace` puts it into alice)."
            ),
            "\(kept.stderr)"
        )
        #expect(kept.stdout == "Signed bob@work.example (Pro) into slot bob.\n")
        #expect(try h.fileStore.get(slot) == before, "alice's credential is untouched")
        #expect(try h.registry.loadInTest().slots[slot]?.account.email == "alice@example.com")
        #expect(try h.fileStore.get(try Slot("bob")).account.email == "bob@work.example")
        let events = await h.run("events", "--json")
        #expect(
            events.stdout.contains("\"event\":\"new_slot\"") && events.stdout.contains("\"requested\":\"alice\""),
            "\(events.stdout)"
        )

        let json = await h.run(["login", "alice", "--json"], sleeper: rig.approving(bob))
        #expect(
            json.status == 0 && json.json["slot"] as? String == "bob" && json.json["instead_of"] as? String == "alice",
            "\(json.stdout)"
        )

        // The same account again: a fresh credential, no question asked.
        let again = await h.run(["login", "alice"], sleeper: rig.approving(alice))
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try h.fileStore.get(slot).tokens.refreshToken != before.tokens.refreshToken)

        let replaced = await h.run(["login", "alice", "--replace"], sleeper: rig.approving(bob))
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(replaced.stdout == "Signed bob@work.example (Pro) into slot alice.\n")
        #expect(try h.fileStore.get(slot).account.email == "bob@work.example")
    }

    /// While one sign-in into a slot waits for approval, a second is refused before it shows a
    /// code (the first one's lock names its pid); once the first ends, a sign-in goes ahead.
    @Test func oneSignInPerSlotAtATime() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        var first: FileLock? = try FileLock.signIn(try Slot("work"), paths: h.paths)
        let second = await h.run(["login", "work"], sleeper: rig.approving(["email": "bob@example.com"]))
        #expect(second.status == 1)
        #expect(
            second.stderr.contains("a sign-in for work is already in progress (pid \(getpid()))"),
            "\(second.stderr)"
        )
        #expect(!second.stderr.contains("To sign in"), "no code was shown")
        #expect(try h.registry.loadInTest().slots.isEmpty)
        withExtendedLifetime(first) {}
        first = nil
        let after = await h.run(["login", "work"], sleeper: rig.approving(["email": "bob@example.com"]))
        #expect(after.status == 0, "\(after.stderr)")
    }

    /// --json; without SLOT the slot is named after the email's local part.
    @Test func loginJSONDefaultsTheSlotToTheEmail() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        let r = await h.run(
            ["login", "--json"],
            sleeper: rig.approving(
                ["email": "alice.smith@example.com", "plan": "enterprise", "account_id": "acct-42", "fedramp": true])
        )
        #expect(r.status == 0, "\(r.stderr)")
        let j = r.json
        #expect(j["slot"] as? String == "alice.smith")
        #expect(j["provider"] as? String == "openai")
        #expect(j["email"] as? String == "alice.smith@example.com")
        #expect(j["plan"] as? String == "enterprise" && j["plan_name"] as? String == "Enterprise")
        #expect(j["account_id"] as? String == "acct-42")
        #expect(j["fedramp"] as? Bool == true)
        #expect(j["expires_at"] as? String == RFC3339.string(from: h.clock.now() + 3600))
        #expect(
            Set(j.keys) == ["slot", "provider", "email", "plan", "plan_name", "account_id", "fedramp", "expires_at"]
        )
        let credential = try h.fileStore.get(try Slot("alice.smith"))
        #expect(
            !r.stdout.contains(credential.tokens.accessToken)
                && !r.stdout.contains(credential.tokens.refreshToken ?? "-")
        )
        #expect(try h.registry.loadInTest().active?.name == "alice.smith")
    }

    @Test func loginWithTheGenericProvider() async throws {
        let rig = try await LoginRig(withDevice: true)
        let h = rig.h
        let r = await h.run(
            ["login", "lab", "--provider", "test"],
            sleeper: rig.approving(on: rig.device, ["email": "bob@example.com", "plan": "team"])
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Signed bob@example.com (Team) into slot lab.\n")
        let code = try #require(try await rig.device.lastUserCode())
        #expect(r.stderr.contains("To sign in, open \(rig.device.baseURL.absoluteString)/device\n"))
        #expect(
            r.stderr.contains(
                "(or \(rig.device.baseURL.absoluteString)/device?user_code=\(code), with the code filled in)"
            )
        )
        let record = try #require(try h.registry.loadInTest().slots[try Slot("lab")])
        #expect(record.provider == "test" && record.account.plan?.kind == .team)
        #expect(try await rig.device.stat("requests.discovery") == 1)

        // Signing in to the slot again keeps using its provider without --provider.
        let again = await h.run(
            ["login", "lab", "--json"],
            sleeper: rig.approving(on: rig.device, ["email": "bob@example.com"])
        )
        #expect(again.status == 0 && again.json["provider"] as? String == "test")
    }

    struct Failure: Sendable, CustomTestStringConvertible {
        var name: String
        var status: Int32
        var code: String
        var message: String
        var testDescription: String { name }
    }

    static let failures: [Failure] = [
        Failure(name: "deny", status: 1, code: "authorization_denied", message: "authorization denied"),
        Failure(name: "expire", status: 1, code: "expired_device_code", message: "the device code expired"),
        Failure(
            name: "usercode 500",
            status: 6,
            code: "network_failure",
            message: "network failure during sign-in: device code request"
        ),
        Failure(
            name: "exchange 401",
            status: 4,
            code: "token_exchange_refused",
            message: "token endpoint answered HTTP 401"
        ),
        Failure(
            name: "cancel",
            status: 130,
            code: "cancelled_sign_in",
            message: "sign-in cancelled; nothing was stored"
        ),
    ]

    /// Failed sign-ins into a slot that was signed in: the exit status and error code, human and
    /// --json, and the slot as it was.
    @Test(arguments: failures, [false, true])
    func loginFailure(_ failure: Failure, json: Bool) async throws {
        let rig = try await LoginRig()
        let h = rig.h
        #expect(await h.run(["login", "work"], sleeper: rig.approving(["email": "old@example.com"])).status == 0)
        let before = h.storedBytes()
        let old = try h.fileStore.get(try Slot("work"))

        let sleeper: TestSleeper
        switch failure.name {
        case "deny": sleeper = rig.hooking("/_test/deny", at: 2)
        case "expire": sleeper = rig.hooking("/_test/expire", at: 2)
        case "usercode 500":
            try await rig.emulator.hook("/_test/fault", ["endpoint": "usercode", "type": "status", "status": 500])
            sleeper = TestSleeper(clock: h.clock)
        case "exchange 401":
            try await rig.emulator.hook(
                "/_test/fault",
                [
                    "endpoint": "oauth_token", "type": "status", "status": 401,
                    "body": ["error": "invalid_client"],
                ]
            )
            sleeper = rig.approving()
        default:  // cancel: the wait is interrupted as Ctrl-C interrupts it
            sleeper = TestSleeper(clock: h.clock) { n in if n == 2 { throw CancellationError() } }
        }
        let r = await h.run(["login", "work"] + (json ? ["--json"] : []), sleeper: sleeper)
        #expect(r.status == failure.status, "\(r.stdout)\(r.stderr)")
        if json {
            let error = r.json["error"] as? [String: Any]
            #expect(error?["code"] as? String == failure.code)
            #expect((error?["message"] as? String)?.hasPrefix(failure.message) == true, "\(r.stdout)")
        } else {
            #expect(r.stdout.isEmpty)
            #expect(r.stderr.contains("lanyard: \(failure.message)"), "\(r.stderr)")
        }
        #expect(h.storedBytes() == before)
        #expect(try h.fileStore.get(try Slot("work")) == old)
        for token in [old.tokens.accessToken, old.tokens.refreshToken ?? "-"] {
            #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
        }
    }

    /// One 502 (or a dropped connection) while polling does not end the sign-in: the code stays
    /// valid, so login says so, polls again after a backoff and stores the approval (it used to
    /// exit 6 and lose it). On a terminal the retry replaces the countdown line, which is drawn
    /// again below it.
    @Test(arguments: [false, true])
    func aPassingServerErrorDoesNotEndTheSignIn(tty: Bool) async throws {
        let rig = try await LoginRig()
        let h = rig.h
        h.tty = tty
        h.extraEnvironment["NO_COLOR"] = "1"
        try await rig.emulator.hook("/_test/fault", ["endpoint": "deviceauth_token", "type": "status", "status": 502])
        try await rig.emulator.hook("/_test/fault", ["endpoint": "deviceauth_token", "type": "reset", "count": 5])
        // Approved while the retries wait; the polls after them bring the tokens.
        let r = await h.run(
            ["login", "work"],
            sleeper: rig.approving(at: 2, ["email": "alice@example.com", "plan": "pro"])
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Signed alice@example.com (Pro) into slot work.\n")
        #expect(try h.fileStore.get(try Slot("work")).account.email == "alice@example.com")
        let retry = "device code poll: server answered HTTP 502 (injected_fault); retrying in 10 s"
        if tty {
            #expect(
                r.stderr.contains(
                    "Waiting for approval… 15 min left "
                        + "(Ctrl-C cancels)\r\u{1B}[2K\(retry)\n\r\u{1B}[2KWaiting for approval… 14 min left"
                ),
                "\(r.stderr.debugDescription)"
            )
        } else {
            #expect(r.stderr.contains("\n\(retry)\n"), "\(r.stderr)")
            #expect(r.stderr.contains("; retrying in 20 s\n"), "the reset after the 502: \(r.stderr)")
        }
        #expect(try await rig.emulator.stat("faults_injected.deviceauth_token") >= 2)
    }

    /// On a terminal the countdown line is cleared before the error is printed.
    @Test func failureOnATerminalStartsOnACleanLine() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        h.tty = true
        h.extraEnvironment["NO_COLOR"] = "1"
        let r = await h.run(["login", "work"], sleeper: rig.hooking("/_test/deny", at: 2))
        #expect(r.status == 1)
        #expect(r.stderr.contains("\r\u{1B}[2KWaiting for approval…"))
        let last = r.stderr.components(separatedBy: "\r\u{1B}[2K").last ?? ""
        #expect(last.hasPrefix("lanyard: authorization denied"), "\(r.stderr.debugDescription)")
    }

    /// With no store to put the credential in, login fails before requesting a code (nobody
    /// approves a sign-in that would be thrown away).
    @Test func loginRefusesUpFrontWhenTheStoreCannotTakeTheCredential() async throws {
        let emulator = try OAuthTestServer(.chatgptEmulator)
        let h = CLIHarness()
        h.realStores = true
        try h.writeConfig(LoginRig.config(emulator: emulator, device: nil, backend: "file"))
        let sleeper = TestSleeper(clock: h.clock) { n in if n == 1 { try await emulator.hook("/_test/approve") } }

        let missing = await h.run(["login", "work", "--json"], sleeper: sleeper)
        #expect(missing.status == 5)
        #expect((missing.json["error"] as? [String: Any])?["code"] as? String == "store_unavailable")
        #expect(
            ((missing.json["error"] as? [String: Any])?["message"] as? String)?.contains("lanyard store init") == true
        )

        // A passphrase-protected store that is locked.
        let file = EncryptedFileStore(paths: h.paths)
        try file.initialize(passphrase: "correct horse", workFactor: 10)
        file.lock()
        let locked = await h.run(["login", "work"], sleeper: sleeper)
        #expect(locked.status == 5)
        #expect(
            locked.stderr.contains("lanyard: encrypted file is locked: run `lanyard store unlock` first"),
            "\(locked.stderr)"
        )
        #expect(!locked.stderr.contains("enter the code"))

        #expect(try await emulator.stat("requests.usercode") == 0)
        #expect(try h.registry.loadInTest().slots.isEmpty)
    }

    /// Lanyard never raises the keyring's unlock prompt, so a locked collection could not take the
    /// credential: login refuses before a code is requested (the store reports what
    /// SecretServiceStoreTests.lockedCollection sees from a locked gnome-keyring collection).
    @Test func loginRefusesUpFrontWhenTheKeyringIsLocked() async throws {
        let emulator = try OAuthTestServer(.chatgptEmulator)
        let h = CLIHarness()
        h.store.reportsLocked = true
        try h.writeConfig(LoginRig.config(emulator: emulator, device: nil, backend: "secret-service"))
        let sleeper = TestSleeper(clock: h.clock) { n in if n == 1 { try await emulator.hook("/_test/approve") } }
        let locked = await h.run(["login", "work"], sleeper: sleeper)
        #expect(locked.status == 5)
        #expect(locked.stderr.contains("unlock the keyring collection first"), "\(locked.stderr)")
        #expect(try await emulator.stat("requests.usercode") == 0)
        #expect(try h.registry.loadInTest().slots.isEmpty)
    }

    @Test func logoutKeepsTheSlotSignedOut() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        #expect(await h.run(["login", "work"], sleeper: rig.approving()).status == 0)
        let r = await h.runDetached("logout", "work")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Signed out of work. `lanyard login work` signs it in again.\n")
        let slot = try Slot("work")
        #expect(try h.registry.loadInTest().slots[slot]?.state == .signedOut)
        #expect(throws: StoreError.notFound(slot: slot)) { try h.fileStore.get(slot) }
        let j = await h.runDetached("logout", "work", "--json")  // again: still fine, nothing to delete
        #expect(j.status == 0)
        #expect(
            j.json["slot"] as? String == "work" && j.json["state"] as? String == "signed-out"
                && j.json["revoked"] as? Bool == false
        )
        let unknown = await h.runDetached("logout", "nobody")
        #expect(unknown.status == 3 && unknown.stderr.contains("no slot named nobody"))
    }

    /// --revoke against the device server's RFC 7009 endpoint: the refresh token is dead afterwards.
    @Test(arguments: [false, true])
    func logoutRevokeAtTheDeviceServer(json: Bool) async throws {
        let rig = try await LoginRig(withDevice: true)
        let h = rig.h
        #expect(
            await h.run(["login", "lab", "--provider", "test"], sleeper: rig.approving(on: rig.device)).status == 0
        )
        let slot = try Slot("lab")
        let credential = try h.fileStore.get(slot)
        let r = await h.run(
            ["logout", "lab", "--revoke"] + (json ? ["--json"] : []),
            sleeper: TestSleeper(clock: h.clock)
        )
        #expect(r.status == 0, "\(r.stderr)")
        if json {
            #expect(r.json["revoked"] as? Bool == true && r.json["state"] as? String == "signed-out")
        } else {
            #expect(r.stdout == "Signed out of lab. `lanyard login lab` signs it in again.\n")
        }
        #expect(try await rig.device.stat("revocation_requests") == 1)
        #expect(try await rig.device.stat("revocations") >= 1)
        // The revoked refresh token no longer refreshes.
        let provider = try h.accountManager().provider("test")
        let refreshToken = try #require(credential.tokens.refreshToken)
        do {
            _ = try await provider.refresh(refreshToken: refreshToken)
            Issue.record("a revoked refresh token still refreshed")
        } catch {
            #expect(error == .permanent(code: "invalid_grant", status: 400))
        }
        #expect(try h.registry.loadInTest().slots[slot]?.state == .signedOut)
        #expect(throws: StoreError.notFound(slot: slot)) { try h.fileStore.get(slot) }
        #expect(!r.stdout.contains(credential.tokens.refreshToken ?? "-"))

        // Again: nothing left to revoke, and the message does not blame the provider.
        let again = await h.runDetached("logout", "lab", "--revoke")
        #expect(again.status == 0)
        #expect(again.stdout.contains("The slot was already signed out; nothing was revoked."))
        #expect(!again.stdout.contains("no revocation endpoint"))
        #expect(try await rig.device.stat("revocation_requests") == 1)
    }

    /// When the revocation fails, logout fails (exit 6) and keeps the credential, so it can be retried.
    @Test func logoutRevokeFailureKeepsTheCredential() async throws {
        let rig = try await LoginRig(withDevice: true)
        let h = rig.h
        #expect(
            await h.run(["login", "lab", "--provider", "test"], sleeper: rig.approving(on: rig.device)).status == 0
        )
        let before = h.storedBytes()
        try await rig.device.hook("/_test/fault", ["endpoint": "revoke", "type": "status", "status": 503])
        let r = await h.runDetached("logout", "lab", "--revoke", "--json")
        #expect(r.status == 6, "\(r.stdout)")
        #expect((r.json["error"] as? [String: Any])?["code"] as? String == "network_failure")
        let message = (r.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(
            message.hasPrefix("could not revoke lab's refresh token: the revocation failed (")
                && message.contains("HTTP 503"),
            "\(message)"
        )
        #expect(
            message.hasSuffix(
                "nothing was signed out (`lanyard logout lab --revoke --yes` signs out here without revoking)"
            ),
            "\(message)"
        )
        #expect(h.storedBytes() == before)
        #expect(await h.runDetached("logout", "lab", "--revoke").status == 0)
        #expect(try await rig.device.stat("revocation_requests") == 1)  // the faulted one never reached it
    }

    /// With --yes a failed revocation still signs out, and says the token was not revoked.
    @Test func logoutRevokeYesSignsOutWhenTheRevocationFails() async throws {
        let rig = try await LoginRig(withDevice: true)
        let h = rig.h
        #expect(
            await h.run(["login", "lab", "--provider", "test"], sleeper: rig.approving(on: rig.device)).status == 0
        )
        try await rig.device.hook("/_test/fault", ["endpoint": "revoke", "type": "status", "status": 503])
        let r = await h.runDetached("logout", "lab", "--revoke", "--yes", "--json")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.json["revoked"] as? Bool == false && r.json["state"] as? String == "signed-out")
        #expect((r.json["not_revoked"] as? String)?.hasPrefix("the revocation failed (") == true, "\(r.stdout)")
        #expect(try h.registry.loadInTest().slots[try Slot("lab")]?.state == .signedOut)
    }

    /// ChatGPT sign-in has no revocation endpoint: logout --revoke says so before it signs out,
    /// asks on a terminal, needs --yes without one, and with --yes says the token was not revoked.
    @Test func logoutRevokeWithTheEmulatorSaysItCannotRevokeFirst() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        let slot = try Slot("work")
        #expect(await h.run(["login", "work"], sleeper: rig.approving()).status == 0)
        let before = h.storedBytes()

        // No terminal, no --yes: nothing changes, and the error says why and names --yes.
        let refused = await h.runDetached("logout", "work", "--revoke")
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(
            refused.stderr
                == "lanyard: could not revoke work's refresh token: the provider openai has no revocation endpoint; "
                + "nothing was signed out (`lanyard logout work --revoke --yes` signs out here without revoking)\n"
        )
        let refusedJSON = await h.runDetached("logout", "work", "--revoke", "--json")
        #expect((refusedJSON.json["error"] as? [String: Any])?["code"] as? String == "revocation_unavailable")
        #expect(try h.registry.loadInTest().slots[slot]?.state.name == "signed-in" && h.storedBytes() == before)

        // A terminal: it says so first, then asks; "no" changes nothing.
        h.tty = true
        h.input = ["n"]
        let no = await h.runDetached("logout", "work", "--revoke")
        #expect(no.status == 1)
        #expect(
            no.stderr.hasPrefix(
                "Could not revoke work's refresh token: the provider openai has no revocation endpoint.\n"
                    + "Sign out of work here anyway? The refresh token stays valid at the provider. [y/N] "
            ),
            "\(no.stderr)"
        )
        #expect(no.stderr.hasSuffix("Nothing changed: work is still signed in.\n"))
        #expect(no.stdout == "")
        #expect(h.storedBytes() == before)
        h.input = ["y"]
        let yes = await h.runDetached("logout", "work", "--revoke")
        #expect(yes.status == 0, "\(yes.stderr)")
        #expect(
            yes.stdout == "Signed out of work. `lanyard login work` signs it in again.\n"
                + "The refresh token was not revoked: it stays valid at the provider.\n"
        )
        #expect(try h.registry.loadInTest().slots[slot]?.state == .signedOut)

        // --yes: no question, and both things said.
        h.tty = false
        h.input = []
        #expect(await h.run(["login", "work"], sleeper: rig.approving()).status == 0)
        let r = await h.runDetached("logout", "work", "--revoke", "--yes")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            r.stdout == "Could not revoke work's refresh token: the provider openai has no revocation endpoint.\n"
                + "Signed out of work. `lanyard login work` signs it in again.\n"
                + "The refresh token was not revoked: it stays valid at the provider.\n"
        )
        #expect(try h.registry.loadInTest().slots[slot]?.state == .signedOut)
        #expect(await h.run(["login", "work"], sleeper: rig.approving()).status == 0)
        let j = await h.runDetached("logout", "work", "--revoke", "--yes", "--json")
        #expect(
            j.json["revoked"] as? Bool == false
                && j.json["not_revoked"] as? String == "the provider openai has no revocation endpoint"
        )
    }
}

/// `lanyard login` as a real process.
@Suite struct LoginProcessTests {
    struct Running {
        let process: Process
        let stdout: Pipe
        let stderr: Pipe

        /// Reads the output to its end and waits for the exit, on a thread of its own (never
        /// blocking the cooperative pool).
        func finish() async -> (status: Int32, stdout: String, stderr: String) {
            await withCheckedContinuation { continuation in
                final class Box: @unchecked Sendable { var data = Data() }
                let errors = Box()
                let errorsRead = DispatchSemaphore(value: 0)
                Thread {
                    errors.data = stderr.fileHandleForReading.readDataToEndOfFile()
                    errorsRead.signal()
                }.start()
                Thread {
                    let out = stdout.fileHandleForReading.readDataToEndOfFile()
                    errorsRead.wait()
                    process.waitUntilExit()
                    continuation.resume(
                        returning: (
                            process.terminationStatus, String(decoding: out, as: UTF8.self),
                            String(decoding: errors.data, as: UTF8.self)
                        )
                    )
                }.start()
            }
        }
    }

    static func start(_ args: [String], environment: [String: String]) throws -> Running {
        let binary = lanyardBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build lanyard first (\(binary))")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = args
        p.environment = environment
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return Running(process: p, stdout: out, stderr: err)
    }

    /// Waits until a counter of the server's stats reaches `value` (the process's progress as the
    /// server saw it), failing when the process ends first.
    static func waitFor(
        _ server: OAuthTestServer,
        _ stat: String,
        atLeast value: Int,
        while process: Process
    ) async throws {
        try await eventually("\(stat) reaches \(value)") {
            let seen = try await server.stat(stat)
            if seen < value {
                try #require(
                    process.isRunning,
                    "lanyard exited (\(process.terminationStatus)) before \(stat) reached \(value)"
                )
            }
            return seen
        } until: {
            $0 >= value
        }
    }

    /// Ctrl-C while polling: exit 130, the old credential and the registry untouched.
    @Test func sigintWhilePollingCancels() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        #expect(await h.run(["login", "work"], sleeper: rig.approving(["email": "old@example.com"])).status == 0)
        let before = h.storedBytes()
        let old = try h.fileStore.get(try Slot("work"))
        try await rig.emulator.hook("/_test/config", ["interval": 1])
        let pollsBefore = try await rig.emulator.stat("device_polls")

        var environment = h.environment
        environment["PATH"] = "/usr/bin:/bin"
        let running = try Self.start(["login", "work"], environment: environment)
        try await Self.waitFor(rig.emulator, "device_polls", atLeast: pollsBefore + 1, while: running.process)
        kill(running.process.processIdentifier, SIGINT)
        let result = await running.finish()
        #expect(result.status == 130, "\(result.stderr)")
        #expect(result.stderr.contains("lanyard: sign-in cancelled; nothing was stored"))
        #expect(result.stderr.contains("Waiting for approval"))
        #expect(result.stdout.isEmpty)
        #expect(h.storedBytes() == before)
        #expect(try h.fileStore.get(try Slot("work")) == old)
        #expect(try await rig.emulator.stat("code_exchanges") == 1)  // only the first sign-in's
    }

    /// Ctrl-C while a request is in flight (the server is slow to answer a poll) cancels it at once.
    @Test func sigintDuringASlowRequest() async throws {
        let rig = try await LoginRig()
        let h = rig.h
        try await rig.emulator.hook("/_test/config", ["interval": 0])
        try await rig.emulator.hook("/_test/fault", ["endpoint": "deviceauth_token", "type": "delay", "seconds": 30])
        var environment = h.environment
        environment["PATH"] = "/usr/bin:/bin"
        let running = try Self.start(["login", "work", "--json"], environment: environment)
        try await Self.waitFor(rig.emulator, "requests.deviceauth_token", atLeast: 1, while: running.process)
        let sent = Date()
        kill(running.process.processIdentifier, SIGINT)
        let result = await running.finish()
        #expect(result.status == 130, "\(result.stderr)")
        #expect(Date().timeIntervalSince(sent) < 25)  // not after the server's 30 s (a loaded machine has taken 17 s)
        let error =
            (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["error"]
            as? [String: Any]
        #expect(error?["code"] as? String == "cancelled_sign_in")
        #expect(try h.registry.loadInTest().slots.isEmpty)
        #expect(try h.fileStore.list().isEmpty)
    }

    /// `backend = auto` with no Secret Service (no session bus): the slot goes to the file store.
    @Test func autoBackendFallsBackToTheFileStore() async throws {
        let rig = try await LoginRig(backend: nil)
        let h = rig.h
        try await rig.emulator.hook("/_test/config", ["interval": 1])
        var environment = h.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["PATH"] = "/usr/bin:/bin"
        let runtime = try #require(environment["XDG_RUNTIME_DIR"])
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        #expect(!FileManager.default.fileExists(atPath: runtime + "/bus"))

        let running = try Self.start(["login", "--json"], environment: environment)
        try await Self.waitFor(rig.emulator, "usercodes_issued", atLeast: 1, while: running.process)
        try await rig.emulator.hook("/_test/approve", ["email": "fallback@example.com", "plan": "plus"])
        let result = await running.finish()
        #expect(result.status == 0, "\(result.stderr)")
        let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any] ?? [:]
        #expect(json["slot"] as? String == "fallback")
        let slot = try Slot("fallback")
        let record = try #require(try h.registry.loadInTest().slots[slot])
        #expect(record.backend == .file)
        #expect(try h.fileStore.get(slot).account.email == "fallback@example.com")
    }
}
