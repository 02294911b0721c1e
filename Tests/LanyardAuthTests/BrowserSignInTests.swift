import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The browser sign-in (`BrowserSignInFlow` through `AccountManager.signIn(method: .browser)`)
/// against the ChatGPT emulator over real HTTP: curl plays the browser, following the emulator's
/// redirect to the sign-in's listener. Each test listens on ports of its own (registered with its
/// emulator), since tests run in parallel; `defaultPortsAreCodexs` proves the real default.
@Suite struct BrowserSignInTests {
    /// An emulator with `ports` registered, a private home, and its manager (real time: the
    /// listener waits for real requests).
    struct Rig {
        let server: OAuthTestServer
        let home: SignInHome
        let ports: [UInt16]

        init(ports count: Int = 1) throws {
            ports = try (0..<count).map { _ in try freeLoopbackPort() }
            server = try OAuthTestServer(.chatgptEmulator, arguments: registeredRedirects(ports))
            home = try SignInHome()
        }

        func manager(sleeper: any Sleeper = TaskSleeper()) -> AccountManager {
            home.manager([Providers.openAI(server)], sleeper: sleeper)
        }

        func signIn(
            slot: String? = "work",
            ports: [UInt16]? = nil,
            pasted: (@Sendable () throws -> String?)? = nil,
            sleeper: any Sleeper = TaskSleeper(),
            log: EventLog
        ) async throws -> (Slot, Credential) {
            try await manager(sleeper: sleeper).signIn(
                slot: try slot.map { try Slot($0) },
                providerID: "openai",
                method: .browser(BrowserSignInOptions(ports: ports ?? self.ports, pastedLine: pasted)),
                events: log.record
            )
        }
    }

    /// The URL the sign-in showed (waits for the event while the sign-in runs).
    final class Shown: @unchecked Sendable {
        let signal = Signal()
        private let lock = NSLock()
        private var auth: BrowserAuthorization?
        func record(_ event: SignInEvent) {
            if case .browserAuthorization(let a) = event {
                lock.withLock { auth = a }
                signal.fire()
            }
        }
        func value() async -> BrowserAuthorization {
            await signal.wait()
            return lock.withLock { auth! }
        }
    }

    @Test func pkceIsRFC7636sS256() {
        // RFC 7636 Appendix B.
        #expect(
            PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").challenge
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        )
        let a = PKCE()
        let b = PKCE()
        #expect(a.verifier.count == 86 && a.verifier != b.verifier)  // 64 bytes, base64url without padding
        #expect(a.verifier.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(PKCE.randomState().count == 43 && PKCE.randomState() != PKCE.randomState())
    }

    /// The default redirect is Codex's (port 1455, then 1457) and the authorize URL is Codex's,
    /// parameter for parameter, built without binding anything.
    @Test func defaultPortsAreCodexs() throws {
        let provider = OpenAIProvider(config: .openAI, transport: URLSessionTransport())
        #expect(provider.callbackAddress.ports == [1455, 1457])
        let redirect = provider.callbackAddress.redirectURI(port: provider.callbackAddress.ports[0])
        #expect(redirect == "http://localhost:1455/auth/callback")
        let url = try provider.authorizationURL(redirectURI: redirect, codeChallenge: "CHALLENGE", state: "STATE")
        #expect(
            url.absoluteString
                == "https://auth.openai.com/oauth/authorize?response_type=code&client_id=app_EMoamEEZ73f0CkXaXp7hrann"
                + "&redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback"
                + "&scope=openid%20profile%20email%20offline_access%20api.connectors.read%20api.connectors.invoke"
                + "&code_challenge=CHALLENGE&code_challenge_method=S256&id_token_add_organizations=true"
                + "&codex_cli_simplified_flow=true&state=STATE&originator=codex_cli_rs"
        )
    }

    /// The whole flow: the URL shown, the browser approving and landing on the listener, the code
    /// exchanged and the slot stored; the browser sees the success page; the port is free after.
    @Test func browserApprovesAndTheSlotIsStored() async throws {
        let rig = try Rig()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "alice@example.com", "plan": "pro"])
        async let signedIn = rig.signIn(log: log)
        let auth = await shown.value()
        #expect(auth.redirectURI == "http://localhost:\(rig.ports[0])/auth/callback" && !auth.readsPastedRedirect)
        let visit = try await browse(auth.url.absoluteString)
        let (slot, credential) = try await signedIn
        #expect(visit.status == 200 && visit.body.contains("You can close this tab"))
        #expect(
            slot.name == "work" && credential.account.email == "alice@example.com"
                && credential.account.plan == Plan(rawValue: "pro")
        )
        #expect(log.states == [.signingIn, .signedIn(expiresAt: rig.home.clock.now() + 3600)])
        let record = try #require(try rig.home.registry.loadInTest().slots[slot])
        #expect(record.account == credential.account && record.provider == "openai")
        #expect(try rig.home.store(.file).getInTest(slot) == credential)
        #expect(try await rig.server.stat("authorize_approved") == 1)
        #expect(try await rig.server.stat("code_exchanges") == 1)
        // The listener served the callback once and is gone.
        try await waitUntilFree(rig.ports)
    }

    /// A callback without this sign-in's state is refused (400) and changes nothing, other paths
    /// get 404, and the real callback still completes the sign-in afterwards.
    @Test func aStrangersCallbackChangesNothing() async throws {
        let rig = try Rig()
        try rig.home.seed("work")
        let before = try rig.home.snapshot()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook(
            "/_test/browser",
            ["email": "work@old.example", "account_id": "acct-old", "user_id": "user-old"]
        )
        async let signedIn = rig.signIn(log: log)
        let auth = await shown.value()
        let base = "http://127.0.0.1:\(rig.ports[0])"
        let forged = try await browse(base + "/auth/callback?code=ac_forged&state=not-ours")
        #expect(forged.status == 400 && forged.body.contains("nothing changed"))
        let stateless = try await browse(base + "/auth/callback?code=ac_forged")
        #expect(stateless.status == 400)
        let elsewhere = try await browse(base + "/favicon.ico")
        #expect(elsewhere.status == 404)
        #expect(try rig.home.snapshot() == before)
        #expect(try await rig.server.stat("requests.oauth_token") == 0)  // the forged code was never sent anywhere

        let visit = try await browse(auth.url.absoluteString)
        _ = try await signedIn
        #expect(visit.status == 200)
        let rejections = log.events.compactMap {
            if case .callbackRejected(let r) = $0 { return r }
            return nil
        }
        #expect(rejections.count == 2 && rejections.allSatisfy { $0.contains("state") })
        #expect(try rig.home.snapshot() != before)
    }

    /// An error redirect (the person pressed Cancel) ends the sign-in with `authorization_denied`,
    /// its description escaped, and stores nothing.
    @Test func anErrorRedirectIsADenial() async throws {
        let rig = try Rig()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["action": "deny", "error_description": "no \u{1B}[31mthanks"])
        let before = try rig.home.snapshot()
        let failure = Task { await authError { _ = try await rig.signIn(log: log) } }
        let url = await shown.value().url.absoluteString
        let visit = try await browse(url)
        let error = await failure.value
        #expect(visit.status == 400)
        guard case .authorizationDenied(let message)? = error else {
            Issue.record("not a denial: \(String(describing: error))")
            return
        }
        #expect(message == "access_denied: no \\u{1B}[31mthanks")
        #expect(error?.code == .authorizationDenied)
        #expect(log.states.last == .failed(error!.userFacingDescription))
        #expect(try rig.home.snapshot() == before)
        #expect(try await rig.server.stat("requests.oauth_token") == 0)
    }

    /// Both ports taken (Codex's own login waiting on them): a clear typed error before anything
    /// is shown; with only the first taken, the second is used.
    @Test func busyPorts() async throws {
        let rig = try Rig(ports: 2)
        let before = try rig.home.snapshot()
        let held = try rig.ports.map { try CallbackListener.bind(ports: [$0]) }
        defer { for listener in held { listener.close() } }
        let log = EventLog()
        let refused = await authError { _ = try await rig.signIn(log: log) }
        #expect(refused == .callbackPortInUse(ports: rig.ports))
        #expect(refused?.code == .callbackPortInUse)
        let message = refused?.userFacingDescription ?? ""
        #expect(
            message.contains("\(rig.ports[0]) and \(rig.ports[1])") && message.contains("codex login")
                && message.contains("--device")
        )
        #expect(
            !log.events.contains {
                if case .browserAuthorization = $0 { return true }
                return false
            }
        )
        #expect(log.states == [.signingIn, .failed(message)])
        #expect(try rig.home.snapshot() == before)
    }

    /// With the first port taken the sign-in listens on the second, and the redirect names it.
    @Test func fallsBackToTheSecondPort() async throws {
        let rig = try Rig(ports: 2)
        let held = try CallbackListener.bind(ports: [rig.ports[0]])
        defer { held.close() }
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "bob@example.com"])
        async let signedIn = rig.signIn(slot: nil, log: log)
        let auth = await shown.value()
        #expect(auth.redirectURI == "http://localhost:\(rig.ports[1])/auth/callback")
        #expect(try await browse(auth.url.absoluteString).status == 200)
        #expect(try await signedIn.0.name == "bob")
    }

    /// A browser that resolves `localhost` to ::1 first reaches the sign-in there: the callback
    /// sent to [::1]:PORT completes it.
    @Test func callbackOverIPv6Loopback() async throws {
        guard ipv6LoopbackAvailable() else {
            print("BrowserSignInTests.callbackOverIPv6Loopback skipped: this machine has no IPv6 on loopback")
            return
        }
        let rig = try Rig()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "dana@example.com"])
        async let signedIn = rig.signIn(log: log)
        let auth = await shown.value()
        let location = try #require(try await browse(auth.url.absoluteString, follow: false).location)
        #expect(location.hasPrefix("http://localhost:\(rig.ports[0])/auth/callback?"))
        let visit = try await browse(location.replacingOccurrences(of: "http://localhost:", with: "http://[::1]:"))
        #expect(visit.status == 200 && visit.body.contains("You can close this tab"))
        #expect(try await signedIn.1.account.email == "dana@example.com")
        try await waitUntilFree(rig.ports)
    }

    /// Another program listening on [::1] (and not on 127.0.0.1) at a port: the sign-in does not
    /// share it, where a browser trying ::1 first would hand that program the code. Both ports so
    /// held: `callback_port_in_use`; the second freed: the sign-in listens there.
    @Test func aProgramOnIPv6LoopbackTakesThePort() async throws {
        guard ipv6LoopbackAvailable() else {
            print("BrowserSignInTests.aProgramOnIPv6LoopbackTakesThePort skipped: this machine has no IPv6 on loopback")
            return
        }
        let rig = try Rig(ports: 2)
        let first = try holdIPv6Loopback(rig.ports[0])
        defer { close(first) }
        let second = try holdIPv6Loopback(rig.ports[1])
        // No wait for a callback: a listener that took the port anyway ends in `callback_timeout`.
        let refused = await authError { _ = try await rig.signIn(sleeper: TestSleeper(), log: EventLog()) }
        close(second)
        #expect(refused == .callbackPortInUse(ports: rig.ports))
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "finn@example.com"])
        async let signedIn = rig.signIn(slot: nil, log: log)
        let auth = await shown.value()
        #expect(auth.redirectURI == "http://localhost:\(rig.ports[1])/auth/callback")
        #expect(try await browse(auth.url.absoluteString).status == 200)
        #expect(try await signedIn.0.name == "finn")
    }

    /// Sixty connections opened first and held open, sending nothing, do not keep the callback
    /// out: the sign-in completes within its deadline, made 90 s here (a listener that gave each
    /// connection even 2 s in turn would need 120; the margin is for a loaded machine).
    @Test func idleConnectionsDoNotHoldTheCallbackOut() async throws {
        let rig = try Rig()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "erin@example.com"])
        async let signedIn = rig.signIn(slot: nil, sleeper: CappedSleeper(limit: 90), log: log)
        let auth = await shown.value()
        let location = try #require(try await browse(auth.url.absoluteString, follow: false).location)
        let port = rig.ports[0]
        let idle = try await BlockingExecutor.shared.run { try (0..<60).map { _ in try connectLoopback(port) } }
        defer { for fd in idle { close(fd) } }
        let clock = ContinuousClock()
        let start = clock.now
        let visit = try await browse(location.replacingOccurrences(of: "http://localhost:", with: "http://127.0.0.1:"))
        let (slot, _) = try await signedIn
        print(
            "BrowserSignInTests.idleConnectionsDoNotHoldTheCallbackOut: the callback completed the sign-in "
                + "\(start.duration(to: clock.now)) after 60 idle connections"
        )
        #expect(visit.status == 200 && slot.name == "erin")
    }

    /// No browser here: the address the browser ended on, pasted, completes the sign-in (after a
    /// line that is no address and one of another sign-in); the code is single-use at the emulator.
    @Test func pastedRedirectCompletesIt() async throws {
        let rig = try Rig()
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        let input = TextInput { buffer in read(readEnd, buffer.baseAddress, buffer.count) }
        defer { close(readEnd) }
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        try await rig.server.hook("/_test/browser", ["email": "carol@example.com"])
        async let signedIn = rig.signIn(pasted: { try input.line(maxBytes: 8192) }, log: log)
        let auth = await shown.value()
        #expect(auth.readsPastedRedirect)
        // The browser on another machine is sent to localhost, which does not answer there.
        let visit = try await browse(auth.url.absoluteString, follow: false)
        let location = try #require(visit.location)
        #expect(visit.status == 302 && location.hasPrefix(auth.redirectURI + "?code="))
        let wrongState = location.replacingOccurrences(of: "state=", with: "state=x")
        let lines = "not an address\n\(wrongState)\n  \(location)  \n"
        #expect(lines.withCString { write(writeEnd, $0, strlen($0)) } == lines.utf8.count)
        close(writeEnd)
        let (slot, credential) = try await signedIn
        #expect(slot.name == "work" && credential.account.email == "carol@example.com")
        let rejections = log.events.compactMap {
            if case .callbackRejected(let r) = $0 { return r }
            return nil
        }
        #expect(rejections.count == 2)

        // The code was used: the emulator refuses it a second time, whatever the verifier.
        let code = try #require(CallbackRequest.parameters(String(location.split(separator: "?")[1]))["code"])
        let provider = OpenAIProvider(config: Providers.openAI(rig.server), transport: URLSessionTransport())
        let reuse = await authError {
            _ = try await provider.exchange(code: code, verifier: PKCE().verifier, redirectURI: auth.redirectURI)
        }
        guard case .tokenExchangeFailed(400, let detail)? = reuse else {
            Issue.record("reuse: \(String(describing: reuse))")
            return
        }
        #expect(detail.code == "invalid_grant")
    }

    /// The emulator's /oauth/authorize as OpenAI's: only the registered redirects, only S256, and
    /// a code bound to its verifier and redirect, usable once.
    @Test func emulatorAuthorizeIsStrict() async throws {
        let rig = try Rig()
        let provider = OpenAIProvider(config: Providers.openAI(rig.server), transport: URLSessionTransport())
        let pkce = PKCE()
        let redirect = "http://localhost:\(rig.ports[0])/auth/callback"
        try await rig.server.hook("/_test/config", ["browser_auto_approve": true])
        // Another port is not registered: refused at /oauth/authorize, with no redirect.
        let unregistered = try provider.authorizationURL(
            redirectURI: "http://localhost:1456/auth/callback",
            codeChallenge: pkce.challenge,
            state: "s"
        )
        let refused = try await browse(unregistered.absoluteString, follow: false)
        #expect(refused.status == 400 && refused.location == nil)
        // `plain` is refused (back to the client with invalid_request).
        let plain = try provider.authorizationURL(redirectURI: redirect, codeChallenge: pkce.verifier, state: "s")
            .absoluteString
            .replacingOccurrences(of: "code_challenge_method=S256", with: "code_challenge_method=plain")
        let plainVisit = try await browse(plain, follow: false)
        #expect(plainVisit.status == 302 && plainVisit.location?.contains("error=invalid_request") == true)

        let good = try await browse(
            try provider.authorizationURL(redirectURI: redirect, codeChallenge: pkce.challenge, state: "s")
                .absoluteString,
            follow: false
        )
        let location = try #require(good.location)
        let code = try #require(CallbackRequest.parameters(String(location.split(separator: "?")[1]))["code"])
        func exchange(_ verifier: String, _ redirectURI: String) async -> AuthError? {
            do throws(AuthError) {
                _ = try await provider.exchange(code: code, verifier: verifier, redirectURI: redirectURI)
                return nil
            } catch {
                return error
            }
        }
        func grantError(_ error: AuthError?) -> String? {
            if case .tokenExchangeFailed(400, let detail)? = error { return detail.code }
            return nil
        }
        #expect(grantError(await exchange(PKCE().verifier, redirect)) == "invalid_grant")  // another verifier
        let anotherRedirect = "http://localhost:1455/auth/callback"
        #expect(grantError(await exchange(pkce.verifier, anotherRedirect)) == "invalid_grant")
        #expect(await exchange(pkce.verifier, redirect) == nil)
        #expect(grantError(await exchange(pkce.verifier, redirect)) == "invalid_grant")  // used already
    }

    /// No callback before the deadline: `callback_timeout`, nothing stored, the port released.
    @Test func deadline() async throws {
        let rig = try Rig()
        let before = try rig.home.snapshot()
        let log = EventLog()
        let error = await authError { _ = try await rig.signIn(sleeper: TestSleeper(), log: log) }
        #expect(error == .callbackTimeout)
        #expect(try rig.home.snapshot() == before)
        try await waitUntilFree(rig.ports)
    }

    /// Cancelling (Ctrl-C) while the listener and a paste reader wait: `cancelled_sign_in` at
    /// once, the listener closed, the paste reader left behind.
    @Test func cancellation() async throws {
        let rig = try Rig()
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let readEnd = ends[0]
        let input = TextInput { buffer in read(readEnd, buffer.baseAddress, buffer.count) }
        let task = Task {
            await authError { _ = try await rig.signIn(pasted: { try input.line(maxBytes: 8192) }, log: log) }
        }
        _ = await shown.value()
        task.cancel()
        #expect(await task.value == .cancelledSignIn)
        #expect(log.states.last == .signedOut)
        try await waitUntilFree(rig.ports)
        close(ends[1])  // ends the abandoned read
        close(readEnd)
    }

    /// A generic provider with `authorization-endpoint` signs in as RFC 8252 says (a loopback
    /// redirect on any free port, PKCE S256, `state`) against Authlib's authorization-code grant;
    /// without the key, the browser sign-in is a config error that starts nothing.
    @Test func genericProviderLoopbackOnAnyPort() async throws {
        let server = try OAuthTestServer(.deviceServer)
        let home = try SignInHome()
        var provider = Providers.device(server)
        let plain = home.manager([provider], sleeper: TaskSleeper())
        await #expect(throws: ConfigError.self) {
            _ = try await plain.signIn(
                slot: nil,
                providerID: "test",
                method: .browser(BrowserSignInOptions()),
                events: { _ in }
            )
        }
        provider.authorizationEndpoint = server.baseURL.appendingPathComponent("oauth/authorize")
        let manager = home.manager([provider], sleeper: TaskSleeper())
        #expect(manager.offersBrowserSignIn(providerID: "test"))
        try await server.hook("/_test/browser", ["email": "gina@example.com", "plan": "team"])
        let shown = Shown()
        let log = EventLog(onEvent: shown.record)
        async let signedIn = manager.signIn(
            slot: nil,
            providerID: "test",
            method: .browser(BrowserSignInOptions()),
            events: log.record
        )
        let auth = await shown.value()
        #expect(auth.redirectURI.hasPrefix("http://127.0.0.1:") && auth.redirectURI.hasSuffix("/callback"))
        let query = CallbackRequest.parameters(String(auth.url.absoluteString.split(separator: "?")[1]))
        #expect(
            query["response_type"] == "code" && query["client_id"] == "lanyard-test-client"
                && query["code_challenge_method"] == "S256"
        )
        #expect(query["redirect_uri"] == auth.redirectURI && query["scope"] == "openid email profile offline_access")
        let visit = try await browse(auth.url.absoluteString)
        let (slot, credential) = try await signedIn
        #expect(visit.status == 200)
        #expect(
            slot.name == "gina" && credential.account.email == "gina@example.com"
                && credential.tokens.refreshToken != nil
        )
        #expect(try await server.stat("code_exchanges") == 1)
    }
}

/// Real waiting, at most `limit` seconds at a time: a sign-in's 15-minute deadline made short.
struct CappedSleeper: Sleeper {
    let limit: TimeInterval
    func sleep(seconds: TimeInterval) async throws { try await TaskSleeper().sleep(seconds: min(seconds, limit)) }
}
