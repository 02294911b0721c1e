import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Plan, email, account id and FedRAMP flag of a ChatGPT sign-in, from the emulator's tokens
/// (`email`, and `chatgpt_plan_type`, `chatgpt_account_id`, `chatgpt_account_is_fedramp` in the
/// `https://api.openai.com/auth` claim), as the credential and the registry record carry them.
@Suite struct SignInPlanTests {
    /// One emulator for every case: each case approves its own code by user code. A server that
    /// cannot start fails each case that needs it (it must not end the test process).
    static let sharedServer = Result { try OAuthTestServer(.chatgptEmulator) }

    struct PlanCase: Sendable, CustomTestStringConvertible {
        var raw: String
        var kind: Plan.Kind?
        var display: String
        var fedramp = false
        var testDescription: String { raw }
    }

    static let plans: [PlanCase] = [
        PlanCase(raw: "free", kind: .free, display: "Free"),
        PlanCase(raw: "go", kind: .go, display: "Go"),
        PlanCase(raw: "plus", kind: .plus, display: "Plus"),
        PlanCase(raw: "pro", kind: .pro, display: "Pro"),
        PlanCase(raw: "prolite", kind: .proLite, display: "Pro Lite"),
        PlanCase(raw: "team", kind: .team, display: "Team"),
        PlanCase(
            raw: "self_serve_business_usage_based",
            kind: .selfServeBusinessUsageBased,
            display: "Business (usage-based)"
        ),
        PlanCase(raw: "business", kind: .business, display: "Business"),
        PlanCase(
            raw: "enterprise_cbp_usage_based",
            kind: .enterpriseCBPUsageBased,
            display: "Enterprise (usage-based)",
            fedramp: true
        ),
        PlanCase(raw: "enterprise", kind: .enterprise, display: "Enterprise", fedramp: true),
        PlanCase(raw: "hc", kind: .enterprise, display: "Enterprise"),
        PlanCase(raw: "edu", kind: .edu, display: "Edu"),
        PlanCase(raw: "education", kind: .edu, display: "Edu"),
        PlanCase(raw: "ProLite", kind: .proLite, display: "Pro Lite"),  // case-insensitive
        PlanCase(raw: "galactic_unlimited", kind: nil, display: "galactic_unlimited"),  // unknown: kept raw
    ]

    @Test(arguments: plans)
    func planAndAccountMetadata(_ plan: PlanCase) async throws {
        let server = try Self.sharedServer.get()
        let home = try SignInHome()
        let email = "\(plan.raw.lowercased())-user@example.com"
        let accountID = UUID().uuidString.lowercased()
        let userID = "user-" + plan.raw.lowercased()
        let log = EventLog()
        let sleeper = TestSleeper(clock: home.clock) { call in
            guard call == 1, let code = log.deviceCode?.userCode else { return }
            try await server.hook(
                "/_test/approve",
                [
                    "user_code": code, "email": email, "plan": plan.raw, "account_id": accountID,
                    "user_id": userID, "fedramp": plan.fedramp,
                ]
            )
        }
        let (slot, credential) = try await home.manager([Providers.openAI(server)], sleeper: sleeper)
            .signIn(slot: nil, providerID: "openai", events: log.record)

        let expected = AccountInfo(
            email: email,
            userID: userID,
            accountID: accountID,
            plan: Plan(rawValue: plan.raw),
            isFedRAMPAccount: plan.fedramp
        )
        #expect(credential.account == expected)
        #expect(credential.account.plan?.rawValue == plan.raw)
        #expect(credential.account.plan?.kind == plan.kind)
        #expect(credential.account.plan?.displayName == plan.display)
        #expect(slot.name == "\(plan.raw.lowercased())-user")

        // The registry carries the same public metadata, and keeps the raw plan string.
        let record = try #require(try home.registry.loadInTest().slots[slot])
        #expect(record.account == expected)
        #expect(record.account.plan?.displayName == plan.display)
        #expect(try home.store(.file).getInTest(slot).account == expected)
    }

    /// Accounts registered with the emulator (`--accounts`-style) sign in with their own data; the
    /// access token is used when the id token lacks the account claims.
    @Test func registeredAccountAndItsClaims() async throws {
        let server = try OAuthTestServer(
            .chatgptEmulator,
            arguments: [
                "--accounts",
                """
                [{"email": "erin@corp.example", "plan": "enterprise", \
                "account_id": "acct-corp", "user_id": "user-erin", "fedramp": true}]
                """,
            ]
        )
        let home = try SignInHome()
        let sleeper = TestSleeper(clock: home.clock) { call in if call == 1 { try await server.hook("/_test/approve") }
        }
        let (slot, credential) = try await home.manager([Providers.openAI(server)], sleeper: sleeper)
            .signIn(slot: nil, providerID: "openai", events: { _ in })
        #expect(slot.name == "erin")
        #expect(
            credential.account
                == AccountInfo(
                    email: "erin@corp.example",
                    userID: "user-erin",
                    accountID: "acct-corp",
                    plan: Plan(rawValue: "enterprise"),
                    isFedRAMPAccount: true
                )
        )
        // The claims really are in the tokens the emulator signed.
        let claims = try JWTClaims(token: try #require(credential.tokens.idToken))
        #expect(claims.payload[AccountInfo.openAIAuthClaim]?.object?["chatgpt_account_is_fedramp"]?.bool == true)
    }

    /// The generic provider reads the plan from the configured claim path, and none without one.
    @Test func genericProviderPlanClaim() async throws {
        let server = try OAuthTestServer(.deviceServer, arguments: ["--poll-tolerance", "1000"])
        let home = try SignInHome()
        var noPlan = Providers.device(server)
        noPlan.id = "noplan"
        noPlan.planClaim = nil
        let sleeper = TestSleeper(clock: home.clock) { call in
            try await server.hook("/_test/approve", ["email": "frank@example.com", "plan": "Enterprise"])
        }
        let manager = home.manager([Providers.device(server), noPlan], sleeper: sleeper)
        let (_, withClaim) = try await manager.signIn(slot: try Slot("a"), providerID: "test", events: { _ in })
        #expect(withClaim.account.plan?.kind == .enterprise && withClaim.account.plan?.rawValue == "Enterprise")
        let (_, without) = try await manager.signIn(slot: try Slot("b"), providerID: "noplan", events: { _ in })
        #expect(without.account.plan == nil && without.account.email == "frank@example.com")
    }
}
