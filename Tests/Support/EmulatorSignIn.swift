import Foundation
import LanyardAuth
import LanyardCore

extension OAuthTestServer {
    /// Signs `email` into `slot` through the library's device-code flow, approving on this
    /// server (the ChatGPT emulator) as soon as the code is shown; `events` sees every event.
    @discardableResult
    package func signIn(
        _ manager: AccountManager,
        slot: String,
        email: String,
        plan: String = "plus",
        events: @escaping @Sendable (SignInEvent) -> Void = { _ in }
    ) async throws -> Credential {
        let (_, credential) = try await manager.signIn(slot: try Slot(slot), providerID: "openai") { event in
            if case .deviceCode(let auth) = event {
                Task {
                    _ = try await self.hook(
                        "/_test/approve",
                        ["user_code": auth.userCode, "email": email, "plan": plan]
                    )
                }
            }
            events(event)
        }
        return credential
    }
}
