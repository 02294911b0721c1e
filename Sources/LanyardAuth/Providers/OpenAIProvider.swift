import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// ChatGPT sign-in as the Codex CLI speaks it: a device code from
/// `/api/accounts/deviceauth/usercode`, polling `/api/accounts/deviceauth/token` (403/404 = pending)
/// for a server-made PKCE pair, then an authorization-code exchange at `/oauth/token` (form), and
/// refresh at `/oauth/token` (JSON) with rotating refresh tokens. Or Codex's browser sign-in:
/// `/oauth/authorize` with PKCE, the redirect to `localhost:1455`, and the same exchange.
package struct OpenAIProvider: BrowserSignInProvider {
    package let config: ProviderConfig
    let transport: any HTTPTransport
    let clock: any WallClock
    /// Codex gives up after 15 minutes.
    package var maximumPollingDuration: TimeInterval = 15 * 60

    package init(config: ProviderConfig, transport: any HTTPTransport, clock: any WallClock = SystemClock()) {
        self.config = config
        self.transport = transport
        self.clock = clock
    }

    func url(_ path: String) -> URL { ProviderSupport.endpoint(config.issuer, path) }

    package func authorize() async throws(AuthError) -> DeviceAuthorization {
        let step = "device code request"
        let response = try await ProviderSupport.send(
            transport,
            .json(url("/api/accounts/deviceauth/usercode"), .object(["client_id": .string(config.clientID)])),
            step: step
        )
        if response.status == 404 { throw .deviceCodeNotEnabled }
        guard response.isSuccess else {
            throw .networkFailure(
                "\(step): server answered HTTP \(response.status) (\(ServerErrorDetail(body: response.body).code))"
            )
        }
        return try DeviceAuthorizationAnswer.chatGPT(
            response.json,
            step: step,
            verificationURL: url("/codex/device"),
            expiresAt: clock.now() + maximumPollingDuration
        )
    }

    package func poll(_ authorization: DeviceAuthorization) async throws(AuthError) -> PollResult {
        let step = "device code poll"
        let response = try await ProviderSupport.send(
            transport,
            .json(
                url("/api/accounts/deviceauth/token"),
                .object([
                    "device_auth_id": .string(authorization.deviceCode), "user_code": .string(authorization.userCode),
                ])
            ),
            step: step
        )
        if response.status == 403 || response.status == 404 { return .pending }
        guard response.isSuccess else {
            let detail = ServerErrorDetail(body: response.body)
            switch detail.code {
            case "access_denied", "authorization_declined", "denied": throw .authorizationDenied(detail.message ?? "")
            case "expired_token", "expired", "device_code_expired": throw .expiredDeviceCode
            default:
                if response.status == 410 { throw .expiredDeviceCode }
                if let passing = ProviderSupport.passingFailure(step, status: response.status, detail) { throw passing }
                throw .tokenExchangeFailed(status: response.status, detail: detail)
            }
        }
        guard let object = response.json?.object else {
            throw .invalidResponse("\(step): the body is not a JSON object")
        }
        guard let code = object["authorization_code"]?.string, let verifier = object["code_verifier"]?.string,
            !code.isEmpty, !verifier.isEmpty
        else {
            throw .invalidResponse("\(step): authorization_code or code_verifier is missing")
        }
        return .approved(
            try await exchange(code: code, verifier: verifier, redirectURI: url("/deviceauth/callback").absoluteString)
        )
    }

    /// The authorization-code exchange both sign-ins end with, as a form (Codex sends it so).
    package func exchange(code: String, verifier: String, redirectURI: String) async throws(AuthError) -> TokenResponse
    {
        try await ProviderSupport.exchangeAuthorizationCode(
            transport,
            at: url("/oauth/token"),
            code: code,
            verifier: verifier,
            redirectURI: redirectURI,
            clientID: config.clientID
        )
    }

    package var offersBrowserSignIn: Bool { true }

    /// Codex's redirect: OpenAI's allow-list for its client holds `http://localhost:1455/auth/callback`
    /// and `:1457` only (another port passes `/oauth/authorize` and fails at the exchange).
    package var callbackAddress: CallbackAddress {
        CallbackAddress(host: "localhost", path: "/auth/callback", ports: [1455, 1457])
    }

    /// Codex's authorize URL, parameter for parameter (codex-rs/login/src/server.rs).
    package func authorizationURL(redirectURI: String, codeChallenge: String, state: String) throws(AuthError) -> URL {
        let query: [(String, String)] = [
            ("response_type", "code"), ("client_id", config.clientID), ("redirect_uri", redirectURI),
            ("scope", "openid profile email offline_access api.connectors.read api.connectors.invoke"),
            ("code_challenge", codeChallenge), ("code_challenge_method", "S256"),
            ("id_token_add_organizations", "true"),
            ("codex_cli_simplified_flow", "true"), ("state", state), ("originator", "codex_cli_rs"),
        ]
        return try ProviderSupport.withQuery(url("/oauth/authorize"), query)
    }

    package func refresh(refreshToken: String) async throws(RefreshFailure) -> TokenResponse {
        try await ProviderSupport.refreshResult(
            transport,
            .json(
                url("/oauth/token"),
                .object([
                    "client_id": .string(config.clientID), "grant_type": .string("refresh_token"),
                    "refresh_token": .string(refreshToken),
                ])
            ),
            refreshToken: refreshToken
        )
    }

    /// ChatGPT sign-in has no package revocation endpoint; signing out is local.
    package func revoke(refreshToken: String) async throws(AuthError) -> Bool { false }

    package func accountInfo(for tokens: TokenResponse) throws(AuthError) -> AccountInfo {
        for token in [tokens.idToken, tokens.accessToken].compactMap({ $0 }) {
            if let claims = try? JWTClaims(token: token) {
                let info = AccountInfo(openAIClaims: claims)
                if info.email != nil || info.accountID != nil {
                    do { return try info.checkedOutsideText(place: "the token's claims") } catch {
                        throw .invalidResponse("token exchange: \(error.userFacingDescription)")
                    }
                }
            }
        }
        return AccountInfo()
    }
}
