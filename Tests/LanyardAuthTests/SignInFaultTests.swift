import Foundation
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// Broken server answers at each step of the sign-in: a typed error, nothing stored, and a slot
/// that was signed in before keeps its old credential and record.
@Suite struct SignInFaultTests {
    enum Step: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// OIDC discovery (generic provider only).
        case discovery
        /// The device-code request.
        case deviceCode
        /// A poll (the one that would have been approved).
        case poll
        /// The authorization-code exchange (openai only).
        case exchange
        var testDescription: String { rawValue }
    }

    enum Fault: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case status500, nonJSON, huge, reset
        var testDescription: String { rawValue }

        var spec: [String: Any] {
            switch self {
            case .status500: return ["type": "status", "status": 500]
            case .nonJSON: return ["type": "non_json"]
            case .huge: return ["type": "huge", "size": 2 * 1024 * 1024]
            // Enough resets that a transparent retry of the request would still see one.
            case .reset: return ["type": "reset", "count": 5]
            }
        }

        /// The error each fault must give, whatever the step.
        func matches(_ error: AuthError?) -> Bool {
            switch (self, error) {
            case (.status500, .networkFailure(let m)?): return m.contains("HTTP 500")
            case (.nonJSON, .invalidResponse?): return true
            case (.huge, .invalidResponse(let m)?): return m.contains("the limit is 1048576")
            case (.reset, .networkFailure?): return true
            default: return false
            }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var kind: SignInRig.Kind
        var step: Step
        var fault: Fault
        var testDescription: String { "\(kind.rawValue) \(step.rawValue) \(fault.rawValue)" }
    }

    static let allCases: [Case] = {
        var all: [Case] = []
        for fault in Fault.allCases {
            for step in [Step.deviceCode, .poll, .exchange] {
                all.append(Case(kind: .openai, step: step, fault: fault))
            }
            for step in [Step.discovery, .deviceCode, .poll] {
                all.append(Case(kind: .device, step: step, fault: fault))
            }
        }
        return all
    }()

    /// Faults a poll (and ChatGPT's exchange, which is part of it) gets over: the code is still
    /// good, so the sign-in polls again.
    static let passing = allCases.filter {
        [.poll, .exchange].contains($0.step) && [.status500, .reset].contains($0.fault)
    }

    /// Faults that end the sign-in: everything before the code is shown, and answers that are
    /// not a passing failure (malformed, too large).
    static let cases = allCases.filter { c in !passing.contains { $0.testDescription == c.testDescription } }

    static func endpoint(_ step: Step, _ kind: SignInRig.Kind) -> String {
        switch (step, kind) {
        case (.discovery, _): return "discovery"
        case (.deviceCode, .openai): return "usercode"
        case (.deviceCode, .device): return "device_authorization"
        case (.poll, .openai): return "deviceauth_token"
        case (.poll, .device): return "token"
        case (.exchange, _): return "oauth_token"
        }
    }

    /// The words each step's error names.
    static func stepName(_ step: Step, _ kind: SignInRig.Kind) -> String {
        switch (step, kind) {
        case (.discovery, _): return "OIDC discovery"
        case (.deviceCode, .openai): return "device code request"
        case (.deviceCode, .device): return "device authorization"
        case (.poll, .openai): return "device code poll"
        case (.poll, .device): return "device token poll"
        case (.exchange, _): return "token exchange"
        }
    }

    @Test(arguments: cases)
    func faultLeavesTheSlotAsItWas(_ c: Case) async throws {
        let rig = try SignInRig.start(c.kind)
        // A slot signed in earlier: a failed re-sign-in must keep its credential and record.
        let (slot, old) = try rig.home.seed("work", provider: rig.providerID)
        let before = try rig.home.snapshot()
        try await rig.fault(["endpoint": Self.endpoint(c.step, c.kind)].merging(c.fault.spec) { $1 })
        // The user approves right away, so the first poll is the one that brings the tokens.
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(
                slot: slot,
                providerID: rig.providerID,
                events: log.record
            )
        }
        #expect(c.fault.matches(error), "got \(String(describing: error))")
        let message = error?.localizedDescription ?? ""
        #expect(message.contains(Self.stepName(c.step, c.kind)), "\(message)")
        #expect(error?.code == .networkFailure || error?.code == .invalidResponse)

        // Nothing stored; the old credential and the registry are byte-for-byte as they were.
        #expect(try rig.home.snapshot() == before)
        #expect(try rig.home.store(.file).getInTest(slot) == old)

        // The state sequence ends in failed(message); the code was shown only if it was issued.
        let shown = c.step == .poll || c.step == .exchange
        var expected: [AuthState] = [.signingIn]
        if shown, let code = log.deviceCode {
            expected.append(
                .awaitingDeviceCode(
                    userCode: code.userCode,
                    verificationURL: code.completeVerificationURL ?? code.verificationURL
                )
            )
        }
        expected.append(.failed(message))
        #expect(log.states == expected)
        #expect((log.deviceCode != nil) == shown)

        // No secret of the sign-in in the message: device code, authorization code, verifier.
        let device = try await rig.server.lastDevice()
        for key in ["device_code", "device_auth_id", "authorization_code"] {
            if let secret = device[key] as? String { #expect(!message.contains(secret), "\(key) leaked") }
        }
        if let code = log.deviceCode { #expect(!message.contains(code.deviceCode)) }
        #expect(try await rig.server.stat("faults_injected.\(Self.endpoint(c.step, c.kind))") >= 1)
    }

    /// A poll that fails in passing (a server error, a dropped connection) does not end the
    /// sign-in: it polls again after a backoff (twice the interval, doubling, shown as a
    /// `retrying` event) and the approval is stored.
    @Test(arguments: passing)
    func aPassingPollFailureIsRetried(_ c: Case) async throws {
        let rig = try SignInRig.start(c.kind)
        try await rig.fault(["endpoint": Self.endpoint(c.step, c.kind)].merging(c.fault.spec) { $1 })
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        let log = EventLog()
        let (slot, credential) = try await rig.manager(sleeper: sleeper).signIn(
            slot: nil,
            providerID: rig.providerID,
            events: log.record
        )
        #expect(try rig.home.store(.file).getInTest(slot) == credential)
        #expect(log.states.last == .signedIn(expiresAt: credential.tokens.expiresAt))

        let retries = log.events.compactMap { event -> (reason: String, after: TimeInterval)? in
            if case .retrying(let reason, let after) = event { return (reason, after) }
            return nil
        }
        // A reset may also be retried by the HTTP stack itself (each such retry takes one of the five).
        let injected = try await rig.server.stat("faults_injected.\(Self.endpoint(c.step, c.kind))")
        #expect(c.fault == .reset ? (1...5).contains(retries.count) : retries.count == 1, "\(retries)")
        #expect(injected >= retries.count)
        for retry in retries {
            #expect(retry.reason.contains(Self.stepName(c.step, c.kind)), "\(retry.reason)")
            if c.fault == .status500 {
                #expect(retry.reason.hasSuffix("server answered HTTP 500 (injected_fault)"), "\(retry.reason)")
            }
        }
        let interval = try #require(log.deviceCode?.interval)
        let backoff = (1...retries.count).map { min(60, max(interval, 1) * pow(2, Double($0))) }
        #expect(retries.map(\.after) == backoff)
        // Each wait is the interval, or the backoff after a failed poll.
        #expect(sleeper.requested == [interval] + backoff, "\(sleeper.requested)")
    }

    /// A server that keeps failing: the sign-in polls (backing off, at most a minute apart) until
    /// the code's time is up, then fails with the server's error, not "the code expired".
    @Test func aServerThatKeepsFailingEndsTheSignInWhenTheCodeRunsOut() async throws {
        let rig = try SignInRig.start(.openai)
        try await rig.fault(["endpoint": rig.pollEndpoint, "type": "status", "status": 503, "count": 1000])
        let sleeper = TestSleeper(clock: rig.home.clock)
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(slot: nil, providerID: rig.providerID, events: { _ in })
        }
        guard case .networkFailure(let message)? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(
            message == "device code poll: server answered HTTP 503 (injected_fault) "
                + "(still failing when the device code expired)",
            "\(message)"
        )
        #expect(sleeper.requested.reduce(0, +) <= 15 * 60)
        #expect(sleeper.requested.max() == 60)
        #expect(try await rig.server.stat("faults_injected.deviceauth_token") == sleeper.requested.count - 1)
        #expect(try rig.home.registry.loadInTest().slots.isEmpty)
    }

    /// A sign-in into a new slot that fails creates no slot and stores nothing.
    @Test(arguments: SignInRig.Kind.allCases)
    func failedSignInCreatesNoSlot(_ kind: SignInRig.Kind) async throws {
        let rig = try SignInRig.start(kind)
        let before = try rig.home.snapshot()
        try await rig.fault(["endpoint": rig.pollEndpoint, "type": "non_json"])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(slot: nil, providerID: rig.providerID, events: { _ in })
        }
        guard case .invalidResponse? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(try rig.home.snapshot() == before)
        #expect(try rig.home.registry.loadInTest().slots.isEmpty)
        #expect(try rig.home.store(.file).listInTest().isEmpty)
    }

    /// 400/401/403 from the token endpoint end in `reauthenticationRequired` (exit 4).
    @Test(arguments: [SignInRig.Kind.openai, .device], [400, 401, 403])
    func tokenEndpointRefusal(_ kind: SignInRig.Kind, status: Int) async throws {
        let rig = try SignInRig.start(kind)
        let (slot, _) = try rig.home.seed("work", provider: rig.providerID)
        let before = try rig.home.snapshot()
        let endpoint = kind == .openai ? "oauth_token" : "token"
        try await rig.fault([
            "endpoint": endpoint, "type": "status", "status": status,
            "body": ["error": "invalid_grant", "error_description": "the grant was refused"],
        ])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(
                slot: slot,
                providerID: rig.providerID,
                events: log.record
            )
        }
        #expect(
            error
                == .tokenExchangeFailed(
                    status: status,
                    detail: ServerErrorDetail(code: "invalid_grant", message: "the grant was refused")
                )
        )
        #expect(error?.requiresReauthentication == true)
        #expect(error?.code == .tokenExchangeRefused && error?.requiresReauthentication == true)
        #expect(log.states.first == .signingIn)
        #expect(log.states.last == .reauthenticationRequired)
        #expect(log.states.count == 3)
        #expect(try rig.home.snapshot() == before)
    }

    /// A token answer without a refresh token, or with a malformed field, is refused without
    /// storing anything, and the tokens it did carry never appear in the error.
    @Test(arguments: [SignInRig.Kind.openai, .device], [false, true])
    func unusableTokenAnswer(_ kind: SignInRig.Kind, malformed: Bool) async throws {
        let rig = try SignInRig.start(kind)
        let before = try rig.home.snapshot()
        let endpoint = kind == .openai ? "oauth_token" : "token"
        let body: [String: Any] =
            malformed
            ? [
                "access_token": "at-SECRET-1234", "refresh_token": "rt-SECRET-5678", "id_token": "id-SECRET-9",
                "expires_in": "soon",
            ]
            : ["access_token": "at-SECRET-1234", "id_token": "id-SECRET-9", "expires_in": 3600]
        try await rig.fault(["endpoint": endpoint, "type": "status", "status": 200, "body": body])
        let sleeper = TestSleeper(clock: rig.home.clock) { call in if call == 1 { try await rig.approve() } }
        let log = EventLog()
        let error = await authError {
            _ = try await rig.manager(sleeper: sleeper).signIn(
                slot: nil,
                providerID: rig.providerID,
                events: log.record
            )
        }
        if malformed {
            guard case .invalidResponse? = error else {
                Issue.record("got \(String(describing: error))")
                return
            }
        } else {
            #expect(error == .missingRefreshToken)
            #expect(log.states.last == .reauthenticationRequired)
        }
        let text = (error?.localizedDescription ?? "") + "\(String(describing: error))" + "\(log.events)"
        for secret in ["at-SECRET-1234", "rt-SECRET-5678", "id-SECRET-9"] { #expect(!text.contains(secret)) }
        #expect(try rig.home.snapshot() == before)
    }
}

/// A device authorization answer whose user code would drive the terminal (the code is printed
/// for the person to type) is refused, for both kinds of provider.
@Suite struct HostileUserCodeTests {
    @Test(arguments: ["\u{1b}]0;owned\u{7}", "AB\u{1b}[2JCD", "\u{9b}31m", String(repeating: "A", count: 200)])
    func aUserCodeNobodyCouldTypeIsRefused(_ code: String) async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            [
                "endpoint": "usercode", "type": "status", "status": 200, "count": 1,
                "body": ["device_auth_id": "deviceauth_x", "user_code": code, "interval": "0"],
            ]
        )
        var config = ProviderConfig.openAI
        config.issuer = server.baseURL
        do {
            _ = try await OpenAIProvider(config: config, transport: URLSessionTransport()).authorize()
            Issue.record("accepted \(code.debugDescription)")
        } catch {
            guard case .invalidResponse(let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(
                message.contains("user_code")
                    && !message.unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }
            )
        }
        #expect(throws: AuthError.self) {
            _ = try DeviceAuthorizationAnswer.rfc8628(
                .object([
                    "device_code": .string("d"), "user_code": .string(code),
                    "verification_uri": .string("https://example.com/device"),
                ]),
                step: "test",
                now: Date()
            )
        }
    }
}
