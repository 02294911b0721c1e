import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// Any OAuth provider with RFC 8628 device authorization: endpoints from config or from OIDC
/// discovery (`/.well-known/openid-configuration`), form-encoded requests, refresh with rotation;
/// and, when config names an `authorization-endpoint`, the browser sign-in of RFC 8252 (a loopback
/// redirect on any free port, PKCE S256, `state`).
package actor GenericDeviceProvider: BrowserSignInProvider {
    package nonisolated let config: ProviderConfig
    let transport: any HTTPTransport
    let clock: any WallClock
    package nonisolated var maximumPollingDuration: TimeInterval { 30 * 60 }
    private var discovered: Endpoints?

    struct Endpoints {
        /// Nil when neither config nor discovery names one (a provider for browser sign-in only).
        var deviceAuthorization: URL?
        var token: URL
        var revocation: URL?
    }

    package init(config: ProviderConfig, transport: any HTTPTransport, clock: any WallClock = SystemClock()) {
        self.config = config
        self.transport = transport
        self.clock = clock
    }

    func endpoints() async throws(AuthError) -> Endpoints {
        if let discovered { return discovered }
        // Configured endpoints for the sign-in that config allows make discovery unneeded.
        if let token = config.tokenEndpoint,
            config.deviceAuthorizationEndpoint != nil || config.authorizationEndpoint != nil
        {
            discovered = Endpoints(
                deviceAuthorization: config.deviceAuthorizationEndpoint,
                token: token,
                revocation: config.revocationEndpoint
            )
            return discovered!
        }
        let step = "OIDC discovery"
        let response = try await ProviderSupport.send(
            transport,
            HTTPRequest(url: ProviderSupport.endpoint(config.issuer, "/.well-known/openid-configuration")),
            step: step
        )
        guard response.isSuccess else { throw .networkFailure("\(step): server answered HTTP \(response.status)") }
        // Every endpoint the document names is checked as a configured one is (https, or http
        // only to this machine), even one that config.ini overrides.
        let found = try DiscoveryAnswer.endpoints(response.json, step: step)
        let device = config.deviceAuthorizationEndpoint ?? found.deviceAuthorization
        guard let token = config.tokenEndpoint ?? found.token else {
            throw .invalidResponse("\(step): no token_endpoint")
        }
        discovered = Endpoints(
            deviceAuthorization: device,
            token: token,
            revocation: config.revocationEndpoint ?? found.revocation
        )
        return discovered!
    }

    package func authorize() async throws(AuthError) -> DeviceAuthorization {
        let step = "device authorization"
        guard let deviceAuthorization = try await endpoints().deviceAuthorization else {
            throw .invalidResponse(
                "OIDC discovery: no device_authorization_endpoint (set device-authorization-endpoint in config)"
            )
        }
        var fields = [("client_id", config.clientID)]
        if !config.scopes.isEmpty { fields.append(("scope", config.scopes.joined(separator: " "))) }
        let response = try await ProviderSupport.send(transport, .form(deviceAuthorization, fields), step: step)
        guard response.isSuccess else {
            let detail = ServerErrorDetail(body: response.body)
            if response.status >= 500 {
                throw .networkFailure("\(step): server answered HTTP \(response.status) (\(detail.code))")
            }
            throw .tokenExchangeFailed(status: response.status, detail: detail)
        }
        return try DeviceAuthorizationAnswer.rfc8628(response.json, step: step, now: clock.now())
    }

    package func poll(_ authorization: DeviceAuthorization) async throws(AuthError) -> PollResult {
        let step = "device token poll"
        let endpoints = try await endpoints()
        let response = try await ProviderSupport.send(
            transport,
            .form(
                endpoints.token,
                [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                    ("device_code", authorization.deviceCode),
                    ("client_id", config.clientID),
                ]
            ),
            step: step
        )
        if response.isSuccess {
            let tokens = try TokenResponse.parse(response.body, step: step)
            guard tokens.refreshToken?.isEmpty == false else { throw .missingRefreshToken }
            return .approved(tokens)
        }
        let detail = ServerErrorDetail(body: response.body)
        switch detail.code {
        case "authorization_pending": return .pending
        case "slow_down": return .slowDown
        case "access_denied": throw .authorizationDenied(detail.message ?? "")
        case "expired_token": throw .expiredDeviceCode
        default:
            if let passing = ProviderSupport.passingFailure(step, status: response.status, detail) { throw passing }
            throw .tokenExchangeFailed(status: response.status, detail: detail)
        }
    }

    package nonisolated var offersBrowserSignIn: Bool { config.authorizationEndpoint != nil }

    /// RFC 8252 §7.3: `http://127.0.0.1:PORT/callback`, any free port (the server must allow any
    /// port on a loopback redirect, as §7.3 asks).
    package nonisolated var callbackAddress: CallbackAddress {
        CallbackAddress(host: "127.0.0.1", path: "/callback", ports: [0])
    }

    package nonisolated func authorizationURL(
        redirectURI: String,
        codeChallenge: String,
        state: String
    ) throws(AuthError) -> URL {
        guard let endpoint = config.authorizationEndpoint else {
            throw .invalidResponse("provider \(config.id) has no authorization-endpoint in config")
        }
        var query = [("response_type", "code"), ("client_id", config.clientID), ("redirect_uri", redirectURI)]
        if !config.scopes.isEmpty { query.append(("scope", config.scopes.joined(separator: " "))) }
        query += [("state", state), ("code_challenge", codeChallenge), ("code_challenge_method", "S256")]
        return try ProviderSupport.withQuery(endpoint, query)
    }

    /// RFC 6749 §4.1.3 with RFC 7636's verifier, form-encoded, at the token endpoint.
    package func exchange(code: String, verifier: String, redirectURI: String) async throws(AuthError) -> TokenResponse
    {
        let token: URL
        if let configured = config.tokenEndpoint { token = configured } else { token = try await endpoints().token }
        return try await ProviderSupport.exchangeAuthorizationCode(
            transport,
            at: token,
            code: code,
            verifier: verifier,
            redirectURI: redirectURI,
            clientID: config.clientID
        )
    }

    package func refresh(refreshToken: String) async throws(RefreshFailure) -> TokenResponse {
        let endpoints: Endpoints
        do { endpoints = try await self.endpoints() } catch { throw .transient(error.userFacingDescription) }
        return try await ProviderSupport.refreshResult(
            transport,
            .form(
                endpoints.token,
                [
                    ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", config.clientID),
                ]
            ),
            refreshToken: refreshToken
        )
    }

    package func revoke(refreshToken: String) async throws(AuthError) -> Bool {
        let endpoints = try await endpoints()
        guard let revocation = endpoints.revocation else { return false }
        let response = try await ProviderSupport.send(
            transport,
            .form(
                revocation,
                [
                    ("token", refreshToken), ("token_type_hint", "refresh_token"), ("client_id", config.clientID),
                ]
            ),
            step: "revocation"
        )
        guard response.isSuccess else { throw .networkFailure("revocation: server answered HTTP \(response.status)") }
        return true
    }

    package nonisolated func accountInfo(for tokens: TokenResponse) throws(AuthError) -> AccountInfo {
        guard
            let claims = [tokens.idToken, tokens.accessToken].compactMap({ $0 }).lazy.compactMap({
                try? JWTClaims(token: $0)
            }).first
        else {
            return AccountInfo()
        }
        do {
            return try AccountInfo(oidcClaims: claims, planClaim: config.planClaim, accountClaim: config.accountClaim)
                .checkedOutsideText(place: "the token's claims")
        } catch {
            throw .invalidResponse("token exchange: \(error.userFacingDescription)")
        }
    }
}

/// Builds the provider for a config entry.
package func makeProvider(
    _ config: ProviderConfig,
    transport: any HTTPTransport,
    clock: any WallClock = SystemClock()
) -> any DeviceCodeProvider {
    switch config.kind {
    case .openai: return OpenAIProvider(config: config, transport: transport, clock: clock)
    case .deviceCode: return GenericDeviceProvider(config: config, transport: transport, clock: clock)
    }
}
