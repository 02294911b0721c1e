import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// Any OAuth provider with RFC 8628 device authorization: endpoints from config or from OIDC
/// discovery (`/.well-known/openid-configuration`), form-encoded requests, refresh with rotation.
package actor GenericDeviceProvider: DeviceCodeProvider {
    package nonisolated let config: ProviderConfig
    let transport: any HTTPTransport
    let clock: any WallClock
    package nonisolated var maximumPollingDuration: TimeInterval { 30 * 60 }
    private var discovered: Endpoints?

    struct Endpoints {
        var deviceAuthorization: URL
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
        if let device = config.deviceAuthorizationEndpoint, let token = config.tokenEndpoint {
            discovered = Endpoints(deviceAuthorization: device, token: token, revocation: config.revocationEndpoint)
            return discovered!
        }
        let step = "OIDC discovery"
        let response = try await ProviderSupport.send(
            transport, HTTPRequest(url: ProviderSupport.endpoint(config.issuer, "/.well-known/openid-configuration")), step: step)
        guard response.isSuccess else { throw .networkFailure("\(step): server answered HTTP \(response.status)") }
        // Every endpoint the document names is checked as a configured one is (https, or http
        // only to this machine), even one that config.ini overrides.
        let found = try DiscoveryAnswer.endpoints(response.json, step: step)
        guard let device = config.deviceAuthorizationEndpoint ?? found.deviceAuthorization else {
            throw .invalidResponse("\(step): no device_authorization_endpoint (set device-authorization-endpoint in config)")
        }
        guard let token = config.tokenEndpoint ?? found.token else { throw .invalidResponse("\(step): no token_endpoint") }
        discovered = Endpoints(deviceAuthorization: device, token: token, revocation: config.revocationEndpoint ?? found.revocation)
        return discovered!
    }

    package func authorize() async throws(AuthError) -> DeviceAuthorization {
        let step = "device authorization"
        let endpoints = try await endpoints()
        var fields = [("client_id", config.clientID)]
        if !config.scopes.isEmpty { fields.append(("scope", config.scopes.joined(separator: " "))) }
        let response = try await ProviderSupport.send(transport, .form(endpoints.deviceAuthorization, fields), step: step)
        guard response.isSuccess else {
            let detail = ServerErrorDetail(body: response.body)
            if response.status >= 500 { throw .networkFailure("\(step): server answered HTTP \(response.status) (\(detail.code))") }
            throw .tokenExchangeFailed(status: response.status, detail: detail)
        }
        return try DeviceAuthorizationAnswer.rfc8628(response.json, step: step, now: clock.now())
    }

    package func poll(_ authorization: DeviceAuthorization) async throws(AuthError) -> PollResult {
        let step = "device token poll"
        let endpoints = try await endpoints()
        let response = try await ProviderSupport.send(transport, .form(endpoints.token, [
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", authorization.deviceCode),
            ("client_id", config.clientID),
        ]), step: step)
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

    package func refresh(refreshToken: String) async throws(RefreshFailure) -> TokenResponse {
        let endpoints: Endpoints
        do { endpoints = try await self.endpoints() } catch { throw .transient(error.userFacingDescription) }
        return try await ProviderSupport.refreshResult(transport, .form(endpoints.token, [
            ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", config.clientID),
        ]), refreshToken: refreshToken)
    }

    package func revoke(refreshToken: String) async throws(AuthError) -> Bool {
        let endpoints = try await endpoints()
        guard let revocation = endpoints.revocation else { return false }
        let response = try await ProviderSupport.send(transport, .form(revocation, [
            ("token", refreshToken), ("token_type_hint", "refresh_token"), ("client_id", config.clientID),
        ]), step: "revocation")
        guard response.isSuccess else { throw .networkFailure("revocation: server answered HTTP \(response.status)") }
        return true
    }

    package nonisolated func accountInfo(for tokens: TokenResponse) throws(AuthError) -> AccountInfo {
        guard let claims = [tokens.idToken, tokens.accessToken].compactMap({ $0 }).lazy.compactMap({ try? JWTClaims(token: $0) }).first else {
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
package func makeProvider(_ config: ProviderConfig, transport: any HTTPTransport, clock: any WallClock = SystemClock()) -> any DeviceCodeProvider {
    switch config.kind {
    case .openai: return OpenAIProvider(config: config, transport: transport, clock: clock)
    case .deviceCode: return GenericDeviceProvider(config: config, transport: transport, clock: clock)
    }
}
