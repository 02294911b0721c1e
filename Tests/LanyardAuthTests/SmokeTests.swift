import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardTestSupport
import Testing

@Suite struct EmulatorSmokeTests {
    @Test func openAISignInAgainstTheEmulator() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        var config = ProviderConfig.openAI
        config.issuer = server.baseURL
        let provider = OpenAIProvider(config: config, transport: URLSessionTransport())
        let auth = try await provider.authorize()
        #expect(try await provider.poll(auth).isPending)
        try await server.hook(
            "/_test/approve",
            ["user_code": auth.userCode, "email": "alice@example.com", "plan": "pro", "account_id": "acct-1"]
        )
        guard case .approved(let tokens) = try await provider.poll(auth) else {
            Issue.record("not approved")
            return
        }
        let info = try provider.accountInfo(for: tokens)
        #expect(info.email == "alice@example.com" && info.plan?.kind == .pro && info.accountID == "acct-1")
        let refreshed = try await provider.refresh(refreshToken: tokens.refreshToken!)
        #expect(refreshed.refreshToken != tokens.refreshToken)
        #expect(try await server.stat("refreshes_succeeded") == 1)
    }
}

extension PollResult {
    var isPending: Bool {
        if case .pending = self { return true }
        return false
    }
}
