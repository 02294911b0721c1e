import FoundationEssentials
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

/// Why `lanyard login --with-access-token` stored nothing.
public enum AccessTokenError: LanyardError, Equatable {
    /// Nothing (or only white space) was read.
    case empty
    /// The text holds white space or control characters inside: not one token.
    case malformed(String)
    /// Not a personal access token (`at-…`): Codex takes any other token for an agent identity,
    /// which Lanyard does not hold.
    case notPersonalAccessToken
    /// The provider is not ChatGPT (only ChatGPT has personal access tokens).
    case providerUnsupported(String)
    /// The server refused the token (HTTP 401 or 403 from the whoami endpoint).
    case rejected(status: Int)

    public var code: ErrorCode {
        switch self {
        case .empty, .malformed: return .usage
        case .notPersonalAccessToken, .providerUnsupported: return .accessTokenUnsupported
        case .rejected: return .accessTokenRejected
        }
    }

    public var errorDescription: String? {
        switch self {
        case .empty:
            return "no access token on standard input (pipe it in: "
                + "`printenv CODEX_ACCESS_TOKEN | lanyard login SLOT --with-access-token`)"
        case .malformed(let problem): return "the access token read from standard input \(problem)"
        case .notPersonalAccessToken:
            return
                "that is not a personal access token (they start with `at-`); Codex reads any other token as an agent "
                + "identity, which Lanyard does not hold: give it to Codex itself (`codex login --with-access-token`)"
        case .providerUnsupported(let id):
            return
                "provider \(TerminalText.escaped(id)) is not ChatGPT: only ChatGPT slots take a personal access token"
        case .rejected(let status):
            return "the server refused the access token (HTTP \(status)): "
                + "it is wrong, revoked or expired; nothing was stored"
        }
    }
}

extension AccountManager {
    /// The endpoint Codex asks who a personal access token belongs to
    /// (`codex-rs/login/src/auth/personal_access_token.rs`: `$CODEX_AUTHAPI_BASE_URL`, by default
    /// `https://auth.openai.com/api/accounts`, plus `/v1/user-auth-credential/whoami`).
    static func whoamiURL(_ config: ProviderConfig) -> URL {
        ProviderSupport.endpoint(config.issuer, "/api/accounts/v1/user-auth-credential/whoami")
    }

    /// Stores a ChatGPT personal access token in `slot` (by default the email's local part): a
    /// credential with no refresh token that nothing ever refreshes. The account is read as
    /// Codex reads it, from the whoami endpoint; a token that is empty, of another kind, or
    /// refused there stores nothing. The same slot rules as any sign-in apply (``storeSignIn``):
    /// one sign-in per slot at a time, the store checked first, another account's sign-in kept in
    /// a slot of its own unless `replacingAnotherAccount`, and a slot shared in a fleet gets the
    /// new credential there too.
    package func signIn(
        slot requested: Slot?,
        providerID: String,
        accessToken raw: String,
        replacingAnotherAccount: Bool = false,
        unlockFileStore: (@Sendable () throws -> Void)? = nil,
        events: @Sendable (SignInEvent) -> Void = { _ in }
    ) async throws -> (Slot, Credential) {
        let token = raw.trimmingWhitespaceAndNewlines()
        guard !token.isEmpty else { throw AccessTokenError.empty }
        if token.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) {
            throw AccessTokenError.malformed("holds white space or control characters: give one token")
        }
        let config = try provider(providerID).config
        guard config.kind == .openai else { throw AccessTokenError.providerUnsupported(providerID) }
        guard token.hasPrefix(Credential.personalAccessTokenPrefix) else {
            throw AccessTokenError.notPersonalAccessToken
        }
        let (signInLock, plannedBackend, plannedStore) = try await prepareSignIn(
            requested,
            replacingAnotherAccount: replacingAnotherAccount,
            unlockFileStore: unlockFileStore
        )
        defer { withExtendedLifetime(signInLock) {} }
        let account = try await whoami(token, config: config)
        let stored = try await BlockingExecutor.shared.run(.toCompletion) {
            let credential = Credential(
                provider: providerID,
                tokens: TokenSet(accessToken: token),
                lastRefresh: self.clock.now(),
                lastRefreshBoot: self.clock.bootInstant(),
                account: account
            )
            return try self.storeSignIn(
                credential,
                requested: requested,
                replacingAnotherAccount: replacingAnotherAccount,
                rotates: false,
                planned: (plannedBackend, plannedStore)
            )
        }
        await announce(stored, events: events)
        return (stored.slot, stored.credential)
    }

    /// The account a personal access token belongs to, from the whoami endpoint (a GET with the
    /// token as bearer, as Codex sends it).
    func whoami(_ token: String, config: ProviderConfig) async throws -> AccountInfo {
        let step = "personal access token lookup"
        let request = HTTPRequest(
            url: Self.whoamiURL(config),
            headers: ["Authorization": "Bearer \(token)", "Accept": "application/json"]
        )
        let response = try await ProviderSupport.send(transport, request, step: step)
        if response.status == 401 || response.status == 403 { throw AccessTokenError.rejected(status: response.status) }
        guard response.isSuccess else {
            throw ClientError.httpError(
                status: response.status,
                detail: ServerErrorDetail(body: response.body, redacting: [token])
            )
        }
        do {
            let json = try JSONFields(try JSONValue.parse(response.body))
            // Codex requires these (its PersonalAccessTokenMetadata); only the email may be null.
            let account = AccountInfo(
                email: try json.optionalString("email"),
                userID: try json.string("chatgpt_user_id"),
                accountID: try json.string("chatgpt_account_id"),
                plan: Plan(rawValue: try json.string("chatgpt_plan_type")),
                isFedRAMPAccount: try json.optionalBool("chatgpt_account_is_fedramp") ?? false
            )
            return try account.checkedOutsideText(place: "\(step)'s answer")
        } catch let error as JSONShapeError {
            throw ClientError.invalidResponse("\(step): \(error.userFacingDescription)")
        } catch {
            throw ClientError.invalidResponse("\(step): the body is not JSON")
        }
    }
}
