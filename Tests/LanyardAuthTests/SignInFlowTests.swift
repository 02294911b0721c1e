import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// Device-code sign-in through `AccountManager.signIn` into real stores, against the real test
/// servers: what is stored, what the registry says, and how polling behaves.
@Suite struct SignInHappyPathTests {
    @Test func openAIPendingThenApprovedStoresTheCredentialAndTheRecord() async throws {
        let rig = try SignInRig.start(.openai)
        let home = rig.home
        // The user approves after two pending polls (before the third).
        let sleeper = TestSleeper(clock: home.clock) { call in
            if call == 3 {
                try await rig.approve([
                    "email": "alice@example.com", "plan": "pro", "account_id": "acct-alice", "user_id": "user-alice",
                ])
            }
        }
        let log = EventLog()
        let (slot, credential) = try await rig.manager(sleeper: sleeper)
            .signIn(slot: try Slot("work"), providerID: "openai", events: log.record)
        #expect(slot.name == "work")

        // The tokens are the ones the emulator issued for this sign-in.
        let families = try await rig.server.get("/_test/tokens")["families"] as? [[String: Any]] ?? []
        try #require(families.count == 1)
        let issuedRefresh = (families[0]["refresh_tokens"] as? [[String: Any]])?.first?["refresh_token"] as? String
        let issuedAccess = (families[0]["access_tokens"] as? [[String: Any]])?.first?["access_token"] as? String
        #expect(credential.tokens.refreshToken == issuedRefresh && issuedRefresh != nil)
        #expect(credential.tokens.accessToken == issuedAccess)
        let idClaims = try JWTClaims(token: try #require(credential.tokens.idToken))
        #expect(idClaims.email == "alice@example.com")

        let now = home.clock.now()
        #expect(credential.provider == "openai")
        #expect(credential.tokens.expiresAt == now + 3600)
        #expect(credential.lastRefresh == now)
        let expected = AccountInfo(
            email: "alice@example.com",
            userID: "user-alice",
            accountID: "acct-alice",
            plan: Plan(rawValue: "pro"),
            isFedRAMPAccount: false
        )
        #expect(credential.account == expected)

        // Stored in the file store, and the registry has the slot's public half.
        #expect(try home.store(.file).getInTest(slot) == credential)
        let document = try home.registry.loadInTest()
        let record = try #require(document.slots[slot])
        #expect(record.provider == "openai" && record.backend == .file)
        #expect(record.account == expected)
        #expect(record.state == .signedIn(expiresAt: now + 3600))
        #expect(record.lastRefresh == now && record.lastErrorCode == nil && record.createdAt == now)
        #expect(document.active == slot)

        // Polled at the server's interval ("5", a string), twice pending, then approved and exchanged.
        #expect(sleeper.requested == [5, 5, 5])
        #expect(try await rig.server.stat("usercodes_issued") == 1)
        #expect(try await rig.server.stat("device_poll_results.pending") == 2)
        #expect(try await rig.server.stat("device_poll_results.approved") == 1)
        #expect(try await rig.server.stat("code_exchanges") == 1)
        #expect(log.states.last == .signedIn(expiresAt: now + 3600))
    }

    /// RFC 8628 with OIDC discovery; the approval comes from the event handler as soon as the code
    /// is shown (the way a person reacts to the printed code).
    @Test func deviceFlowWithDiscoveryApprovedWhenTheCodeArrives() async throws {
        let rig = try SignInRig.start(.device, arguments: ["--interval", "2"])
        let home = rig.home
        let approved = Signal()
        let log = EventLog { event in
            guard case .deviceCode(let authorization) = event else { return }
            Task {
                try await rig.approve(["user_code": authorization.userCode, "email": "bob@example.com", "plan": "team"])
                approved.fire()
            }
        }
        // The first wait ends only once the approval has landed, so the first poll succeeds.
        let sleeper = TestSleeper(clock: home.clock) { call in if call == 1 { await approved.wait() } }
        let (slot, credential) = try await rig.manager(sleeper: sleeper)
            .signIn(slot: try Slot("lab"), providerID: "test", events: log.record)

        let now = home.clock.now()
        #expect(credential.tokens.accessToken.hasPrefix("at_"))
        #expect(credential.tokens.refreshToken?.hasPrefix("rt_") == true)
        #expect(credential.tokens.expiresAt == now + 3600)
        let claims = try JWTClaims(token: try #require(credential.tokens.idToken))
        #expect(claims.email == "bob@example.com")
        #expect(credential.account.email == "bob@example.com")
        #expect(credential.account.userID == claims.subject && claims.subject?.hasPrefix("user-") == true)
        #expect(credential.account.plan == Plan(rawValue: "team"))
        #expect(credential.provider == "test")

        #expect(try home.store(.file).getInTest(slot) == credential)
        let record = try #require(try home.registry.loadInTest().slots[slot])
        #expect(record.provider == "test" && record.backend == .file && record.account == credential.account)
        #expect(record.state == .signedIn(expiresAt: now + 3600))

        #expect(sleeper.requested == [2])
        #expect(try await rig.server.stat("requests.discovery") == 1)
        #expect(try await rig.server.stat("device_authorizations") == 1)
        #expect(try await rig.server.stat("token_polls") == 1)
        #expect(try await rig.server.stat("poll_results.success") == 1)
        // The state shows the URL with the code filled in.
        let device = try #require(log.deviceCode)
        #expect(
            log.states.contains(
                .awaitingDeviceCode(
                    userCode: device.userCode,
                    verificationURL: try #require(device.completeVerificationURL)
                )
            )
        )
        #expect(device.verificationURL == rig.server.baseURL.appendingPathComponent("device"))
    }

    @Test func deviceFlowIntoTheSecretService() async throws {
        try requireTestKeyring()
        let rig = try SignInRig.start(.device, backend: .secretService)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in
            if call == 2 { try await rig.approve(["email": "carol@example.com"]) }
        }
        let slot = try Slot("t" + String(UInt32.random(in: 0...UInt32.max), radix: 36) + "-ss")
        let (_, credential) = try await rig.manager(sleeper: sleeper).signIn(
            slot: slot,
            providerID: "test",
            events: { _ in }
        )
        defer { try? rig.home.store(.secretService).deleteInTest(slot) }
        #expect(try rig.home.store(.secretService).getInTest(slot) == credential)
        let record = try #require(try rig.home.registry.loadInTest().slots[slot])
        #expect(record.backend == .secretService && record.account.email == "carol@example.com")
        #expect(record.account.plan == Plan(rawValue: "pro"))  // the server's default plan
    }

    /// `interval` arrives as a string by default; a number works too.
    @Test(arguments: [(true, 7), (false, 3), (true, 0)])
    func openAIIntervalAsStringOrNumber(asString: Bool, interval: Int) async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.server.hook("/_test/config", ["interval_as_string": asString, "interval": interval])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 2 { try await rig.approve() } }
        let (slot, _) = try await rig.manager(sleeper: sleeper).signIn(
            slot: nil,
            providerID: "openai",
            events: { _ in }
        )
        #expect(sleeper.requested == [TimeInterval(interval), TimeInterval(interval)])
        #expect(slot.name == "test.user")  // the emulator's default account, test.user@example.com
    }

    /// Pending answered with 404 instead of 403, and a token answer without `expires_in`: the
    /// expiry comes from the access token's `exp`.
    @Test func pendingAs404AndExpiryFromTheAccessToken() async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.server.hook(
            "/_test/config",
            ["pending_status": 404, "include_expires_in": false, "access_token_lifetime": 1234]
        )
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 3 { try await rig.approve() } }
        let (slot, credential) = try await rig.manager(sleeper: sleeper).signIn(
            slot: nil,
            providerID: "openai",
            events: { _ in }
        )
        #expect(try await rig.server.stat("device_poll_results.pending") == 2)
        let exp = try #require(try JWTClaims(token: credential.tokens.accessToken).expiresAt)
        let issued = try #require(try JWTClaims(token: credential.tokens.accessToken).payload["iat"]?.number)
        #expect(exp == Date(timeIntervalSince1970: issued + 1234))
        #expect(credential.tokens.expiresAt == exp)
        #expect(try rig.home.registry.loadInTest().slots[slot]?.state == .signedIn(expiresAt: exp))
    }

    @Test func theSlotNameDefaultsToTheEmailLocalPart() async throws {
        let rig = try SignInRig.start(.openai)
        let sleeper = TestSleeper(clock: rig.home.clock) { call in
            if call == 1 { try await rig.approve(["email": "Dora.Explorer+work@example.com"]) }
        }
        let (slot, _) = try await rig.manager(sleeper: sleeper).signIn(
            slot: nil,
            providerID: "openai",
            events: { _ in }
        )
        #expect(slot.name == "dora.explorer")
        #expect(try rig.home.registry.loadInTest().slots[slot]?.account.email == "Dora.Explorer+work@example.com")
    }

    /// Two accounts with the same email local part get two slots, the second named with its
    /// domain (then numbered); the same account again reuses its slot.
    @Test func defaultSlotNamesDoNotCollide() async throws {
        let rig = try SignInRig.start(.openai)
        let emails = ["sam@one.example", "sam@two.example", "sam@one.example", "sam@two.other"]
        let sleeper = TestSleeper(clock: rig.home.clock) { call in try await rig.approve(["email": emails[call - 1]]) }
        let manager = rig.manager(sleeper: sleeper)
        var slots: [String] = []
        for _ in emails {
            slots.append(try await manager.signIn(slot: nil, providerID: "openai", events: { _ in }).0.name)
        }
        #expect(slots == ["sam", "sam-two", "sam", "sam-2"])
        let document = try rig.home.registry.loadInTest()
        #expect(document.slots[try Slot("sam")]?.account.email == "sam@one.example")
        #expect(document.slots[try Slot("sam-two")]?.account.email == "sam@two.example")
        #expect(document.slots[try Slot("sam-2")]?.account.email == "sam@two.other")
        #expect(try rig.home.store(.file).listInTest().map(\.name) == ["sam", "sam-2", "sam-two"])
    }

    /// A sign-in into a slot that holds another account keeps that slot as it was and keeps the
    /// approved sign-in too: stored in a new slot named after its email, said by an event and in
    /// the event log. The same account again goes to that slot.
    @Test func anotherAccountIsKeptInANewSlot() async throws {
        let rig = try SignInRig.start(.openai)
        let (work, old) = try rig.home.seed("work")
        let before = try rig.home.snapshot(slots: [work])
        nonisolated(unsafe) let bob: [String: Any] = [
            "email": "bob@corp.example", "account_id": "acct-bob", "plan": "pro",
        ]
        let sleeper = TestSleeper(clock: rig.home.clock) { _ in try await rig.approve(bob) }
        let manager = rig.manager(sleeper: sleeper)
        let log = EventLog()
        let (slot, credential) = try await manager.signIn(slot: work, providerID: "openai", events: log.record)
        #expect(slot.name == "bob")
        #expect(
            log.events.contains(
                .storedInNewSlot(
                    requested: work,
                    holds: "work@old.example, account acct-old",
                    slot: try Slot("bob")
                )
            ),
            "\(log.events)"
        )
        #expect(log.states.last == .signedIn(expiresAt: credential.tokens.expiresAt))
        // work is untouched; bob's slot holds the approved sign-in.
        #expect(try rig.home.store(.file).getInTest(work) == old)
        #expect(try rig.home.registry.loadInTest().slots[work] == before.registry.slots[work])
        #expect(
            try rig.home.store(.file).getInTest(slot) == credential && credential.account.email == "bob@corp.example"
        )
        #expect(try rig.home.registry.loadInTest().slots[slot]?.account.accountID == "acct-bob")
        let logged = LanyardStore.EventLog(paths: rig.home.paths).read().filter { $0["event"]?.string == "new_slot" }
        #expect(logged.count == 1)
        #expect(
            logged.first?["slot"]?.string == "bob" && logged.first?["requested"]?.string == "work"
                && logged.first?["reason"]?.string == "slot_holds_another_account"
        )

        // Bob again into work: his own slot gets the fresh sign-in, no third slot.
        let (again, _) = try await manager.signIn(slot: work, providerID: "openai", events: { _ in })
        #expect(again == slot)
        #expect(try rig.home.registry.loadInTest().slots.keys.map(\.name).sorted() == ["bob", "work"])
        // Asked to replace: work gets bob.
        let (replaced, _) = try await manager.signIn(
            slot: work,
            providerID: "openai",
            replacingAnotherAccount: true,
            events: { _ in }
        )
        #expect(replaced == work)
        #expect(try rig.home.store(.file).getInTest(work).account.email == "bob@corp.example")
    }

    /// A sign-out asked to revoke what cannot be revoked (the emulator, as ChatGPT, has no
    /// revocation endpoint) refuses with nothing changed, or signs out anyway saying why.
    @Test func signOutThatCannotRevokeRefusesOrSaysWhy() async throws {
        let rig = try SignInRig.start(.openai)
        let (work, old) = try rig.home.seed("work")
        let manager = rig.manager(sleeper: TestSleeper(clock: rig.home.clock))
        let before = try rig.home.snapshot(slots: [work])
        await #expect(throws: NotRevokedError(slot: work, reason: .noRevocationEndpoint(provider: "openai"))) {
            try await manager.signOut(slot: work, revoke: true)
        }
        #expect(try rig.home.snapshot(slots: [work]) == before, "nothing changed")
        #expect(try rig.home.store(.file).getInTest(work) == old)
        let outcome = try await manager.signOut(slot: work, revoke: true, ifNotRevoked: .signOutAnyway)
        #expect(
            outcome
                == SignOutOutcome(
                    revoked: false,
                    wasSignedOut: false,
                    notRevoked: .noRevocationEndpoint(provider: "openai")
                )
        )
        #expect(try rig.home.registry.loadInTest().slots[work]?.state == .signedOut)
        // Signed out already: nothing to revoke, nothing refused.
        #expect(
            try await manager.signOut(slot: work, revoke: true) == SignOutOutcome(revoked: false, wasSignedOut: true)
        )
    }

    /// Signing in again to an existing slot, as the same account, replaces its credential (once the
    /// new one is in hand).
    @Test(arguments: SignInRig.Kind.allCases)
    func reSigningInReplacesTheOldCredential(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let (slot, old) = try rig.home.seed("work", provider: rig.providerID)
        // The slot needed a new sign-in after its refresh token died.
        try rig.home.registry.updateInTest { doc in
            doc.slots[slot]?.state = .reauthenticationRequired
            doc.slots[slot]?.lastErrorCode = "refresh_token_reused"
        }
        let createdAt = try rig.home.registry.loadInTest().slots[slot]?.createdAt
        // The seeded account (work@old.example, user-old, acct-old), as each server names it.
        nonisolated(unsafe) let sameAccount: [String: Any] =
            kind == .openai
            ? ["email": "work@old.example", "user_id": "user-old", "account_id": "acct-old", "plan": "plus"]
            : ["email": "work@old.example", "sub": "user-old", "plan": "plus"]
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve(sameAccount) } }
        let (_, credential) = try await rig.manager(sleeper: sleeper).signIn(
            slot: slot,
            providerID: rig.providerID,
            events: { _ in }
        )
        #expect(credential != old)
        #expect(try rig.home.store(.file).getInTest(slot) == credential)
        let record = try #require(try rig.home.registry.loadInTest().slots[slot])
        #expect(record.account.email == "work@old.example" && record.account.plan?.rawValue == "plus")
        #expect(record.state == .signedIn(expiresAt: credential.tokens.expiresAt))
        #expect(record.createdAt == createdAt)  // the slot is the same slot
        #expect(record.lastErrorCode == nil)
    }
}

/// The ways a sign-in ends other than success: deny, expiry, slow_down, timeouts.
@Suite struct SignInOutcomeTests {
    @Test(arguments: SignInRig.Kind.allCases)
    func denied(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let (slot, _) = try rig.home.seed("work", provider: rig.providerID)
        let before = try rig.home.snapshot()
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 2 { try await rig.deny() } }
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(
                slot: slot,
                providerID: rig.providerID,
                events: log.record
            )
        }
        guard case .authorizationDenied? = error else {
            Issue.record("expected authorizationDenied, got \(String(describing: error))")
            return
        }
        #expect(error?.code == .authorizationDenied)
        #expect(try rig.home.snapshot() == before)
        #expect(log.states.last == .failed(error!.localizedDescription))
        #expect(try await rig.polls() == 2)
    }

    @Test(arguments: SignInRig.Kind.allCases)
    func expiredOnTheServer(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let (slot, _) = try rig.home.seed("work", provider: rig.providerID)
        let before = try rig.home.snapshot()
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 3 { try await rig.expire() } }
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(slot: slot, providerID: rig.providerID, events: { _ in })
        }
        #expect(error == .expiredDeviceCode)
        #expect(error?.code == .expiredDeviceCode)
        #expect(try rig.home.snapshot() == before)
        #expect(try await rig.polls() == 3)
    }

    /// The code's own `expires_in` ends the wait without another poll.
    @Test func expiredByTheClientsClock() async throws {
        // The server says 12 s but keeps the code for 10 min of real time: the test is about the
        // client's (virtual) clock, not about how long a loaded machine takes for two polls.
        let rig = try SignInRig.start(
            .device,
            arguments: ["--device-code-lifetime", "12", "--device-code-server-lifetime", "600"]
        )
        let sleeper = TestSleeper(clock: rig.home.clock)
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(
                slot: try Slot("x"),
                providerID: "test",
                events: { _ in }
            )
        }
        #expect(error == .expiredDeviceCode)
        // Polls at 5 s and 10 s, then waits only until the code expires at 12 s: no poll after it.
        #expect(sleeper.requested == [5, 5, 2])
        #expect(try await rig.polls() == 2)
    }

    /// slow_down makes the flow wait longer each time (by the configured increment, matching the
    /// server's) and the sign-in still succeeds.
    @Test func slowDownGrowsTheIntervalAndStillSucceeds() async throws {
        let server = try OAuthTestServer(.deviceServer, arguments: ["--interval", "60", "--slow-down-increment", "60"])
        let home = try SignInHome()
        // Virtual time advances, but real polls come well within a minute of each other, even on a
        // loaded machine: from the second poll on, each is "too fast", so the server answers
        // slow_down until the approval.
        let sleeper = TestSleeper(clock: home.clock) { call in if call == 4 { try await server.hook("/_test/approve") }
        }
        let log = EventLog()
        let (_, credential) = try await home.manager([Providers.device(server)], sleeper: sleeper)
            .signIn(slot: try Slot("slow"), providerID: "test", flow: { $0.slowDownIncrement = 60 }, events: log.record)
        #expect(credential.tokens.refreshToken != nil)
        #expect(sleeper.requested == [60, 60, 120, 180])
        #expect(log.slowDowns == [120, 180])
        #expect(try await server.stat("poll_results.slow_down") == 2)
        #expect(try await server.stat("poll_results.authorization_pending") == 1)
        #expect(try await server.stat("poll_results.success") == 1)
        // The server's idea of the interval grew the same way.
        #expect(try await server.lastDevice()["interval"] as? Int == 180)
    }

    @Test(arguments: SignInRig.Kind.allCases)
    func pollingTimeout(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let before = try rig.home.snapshot()
        let sleeper = TestSleeper(clock: rig.home.clock)
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper)
                .signIn(slot: nil, providerID: rig.providerID, flow: { $0.maximumDuration = 12 }, events: log.record)
        }
        #expect(error == .pollingTimeout)
        // Polls at 5 s and 10 s, then waits only until the limit at 12 s and gives up.
        #expect(sleeper.requested == [5, 5, 2])
        #expect(try await rig.polls() == 2)
        #expect(try rig.home.snapshot() == before)
        #expect(log.states.last == .failed(AuthError.pollingTimeout.localizedDescription))
    }

    /// A 429 on the device-code request is retried after `Retry-After` (virtual time).
    @Test func rateLimitedDeviceCodeRequestIsRetried() async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.fault(["endpoint": "usercode", "type": "rate_limit", "retry_after": 2])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 2 { try await rig.approve() } }
        _ = try await rig.manager(sleeper: sleeper).signIn(slot: nil, providerID: "openai", events: { _ in })
        #expect(sleeper.requested == [2, 5])
        #expect(try await rig.server.stat("requests.usercode") == 2)
        #expect(try await rig.server.stat("usercodes_issued") == 1)
    }

    /// Signing in is refused when ChatGPT has device sign-in switched off.
    @Test func deviceSignInDisabled() async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.server.hook("/_test/config", ["device_signin_enabled": false])
        let before = try rig.home.snapshot()
        let error = await authError {
            _ = try await rig.manager(sleeper: TestSleeper()).signIn(slot: nil, providerID: "openai", events: { _ in })
        }
        #expect(error == .deviceCodeNotEnabled)
        #expect(
            error?.localizedDescription.contains("ChatGPT's security settings") == true,
            "the message says where to turn it on"
        )
        #expect(try rig.home.snapshot() == before)
    }
}
