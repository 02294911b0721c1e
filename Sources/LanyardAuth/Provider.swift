import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// A device code the user approves in a browser.
package struct DeviceAuthorization: Sendable, Hashable {
    /// What the user types.
    package var userCode: String
    /// Where the user types it.
    package var verificationURL: URL
    /// A URL with the code filled in, when the server gives one.
    package var completeVerificationURL: URL?
    /// Seconds between polls (the server's `interval`).
    package var interval: TimeInterval
    /// When the code stops working.
    package var expiresAt: Date
    /// The provider's handle for polling (device code / device auth id). Secret-ish: never shown.
    package var deviceCode: String

    package init(
        userCode: String,
        verificationURL: URL,
        completeVerificationURL: URL? = nil,
        interval: TimeInterval,
        expiresAt: Date,
        deviceCode: String
    ) {
        self.userCode = userCode
        self.verificationURL = verificationURL
        self.completeVerificationURL = completeVerificationURL
        self.interval = interval
        self.expiresAt = expiresAt
        self.deviceCode = deviceCode
    }
}

/// One poll's outcome.
package enum PollResult: Sendable {
    case pending
    /// The server asked to poll less often (RFC 8628 `slow_down`).
    case slowDown
    case approved(TokenResponse)
}

/// Tokens from a token endpoint.
package struct TokenResponse: Sendable, Hashable {
    package var accessToken: String
    package var refreshToken: String?
    package var idToken: String?
    package var expiresIn: TimeInterval?

    package init(
        accessToken: String,
        refreshToken: String? = nil,
        idToken: String? = nil,
        expiresIn: TimeInterval? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresIn = expiresIn
    }

    /// Parses a token endpoint's JSON answer. `access_token` is required.
    package static func parse(_ body: Data, step: String) throws(AuthError) -> TokenResponse {
        let json: JSONFields
        do { json = try JSONFields(try JSONValue.parse(body)) } catch {
            throw .invalidResponse("\(step): the body is not a JSON object")
        }
        do {
            let expires = try json.optionalNumber("expires_in")
            if let expires, expires < 0 || expires.plausibleSeconds == nil {
                throw JSONShapeError(path: ".expires_in", problem: "is not a number of seconds")
            }
            return TokenResponse(
                accessToken: try json.token("access_token"),
                refreshToken: try json.optionalToken("refresh_token"),
                idToken: try json.optionalToken("id_token"),
                expiresIn: expires
            )
        } catch {
            throw .invalidResponse("\(step): \(error.userFacingDescription)")
        }
    }

    /// The access token's expiry: `expires_in` from `now`, else the token's own `exp` claim.
    package func expiresAt(now: Date) -> Date? {
        if let expiresIn { return now + expiresIn }
        return (try? JWTClaims(token: accessToken))?.expiresAt
    }
}

/// Why a refresh failed, sorted by what it means for the slot.
package enum RefreshFailure: Error, Sendable, Equatable {
    /// The refresh token is dead (reused, expired, invalidated, revoked): sign in again.
    case permanent(code: String, status: Int)
    /// Try again later; the credential is still good.
    case transient(String)
}

/// A sign-in provider: device authorization, polling, refresh and revocation.
package protocol DeviceCodeProvider: Sendable {
    var config: ProviderConfig { get }
    /// Requests a device code.
    func authorize() async throws(AuthError) -> DeviceAuthorization
    /// Polls once; on approval returns the tokens (doing any code exchange the protocol needs).
    func poll(_ authorization: DeviceAuthorization) async throws(AuthError) -> PollResult
    /// Exchanges a refresh token for new tokens. Rotating providers return a new refresh token.
    func refresh(refreshToken: String) async throws(RefreshFailure) -> TokenResponse
    /// Revokes a refresh token, when the provider has a revocation endpoint.
    func revoke(refreshToken: String) async throws(AuthError) -> Bool
    /// Who the tokens belong to; `invalidResponse` when a claim holds text that could rewrite a
    /// terminal or break a header (control characters, bidi overrides).
    func accountInfo(for tokens: TokenResponse) throws(AuthError) -> AccountInfo
    /// The longest a sign-in may wait for approval.
    var maximumPollingDuration: TimeInterval { get }
}

/// Shared mapping of transport failures and token-endpoint answers.
enum ProviderSupport {
    static func send(
        _ transport: any HTTPTransport,
        _ request: HTTPRequest,
        step: String
    ) async throws(AuthError) -> HTTPResponse {
        do { return try await transport.send(request) } catch let error as TransportError {
            if error.kind == .cancelled { throw .cancelledSignIn }
            if error.kind == .tooLarge { throw .invalidResponse("\(step): \(error.message)") }
            throw .networkFailure("\(step): \(error.message)")
        } catch {
            throw .networkFailure("\(step): \(error.userFacingDescription)")
        }
    }

    /// A refresh request's answer: tokens, or the failure's kind.
    static func refreshResult(
        _ transport: any HTTPTransport,
        _ request: HTTPRequest,
        refreshToken: String
    ) async throws(RefreshFailure) -> TokenResponse {
        let response: HTTPResponse
        do { response = try await transport.send(request) } catch {
            throw .transient("refresh: \(error.userFacingDescription)")
        }
        if response.isSuccess {
            do { return try TokenResponse.parse(response.body, step: "refresh") } catch {
                throw .transient(error.userFacingDescription)
            }
        }
        let detail = ServerErrorDetail(body: response.body, redacting: [refreshToken])
        let permanentCodes: Set<String> = [
            "invalid_grant", "refresh_token_reused", "refresh_token_expired",
            "refresh_token_invalidated", "invalid_token", "unauthorized_client",
        ]
        if [400, 401, 403].contains(response.status) || permanentCodes.contains(detail.code) {
            throw .permanent(
                code: detail.code == "UNKNOWN" ? "http_\(response.status)" : detail.code,
                status: response.status
            )
        }
        throw .transient("token endpoint answered HTTP \(response.status) (\(detail.code))")
    }

    /// A sign-in poll's error answer that passes: a server error, 408 or 429 (after the backoff
    /// transport's own retries). It says nothing about the device code, so the sign-in polls again
    /// (``SignInFlow``); nil for answers that end the sign-in.
    static func passingFailure(_ step: String, status: Int, _ detail: ServerErrorDetail) -> AuthError? {
        guard status >= 500 || status == 408 || status == 429 else { return nil }
        return .networkFailure(
            "\(step): server answered HTTP \(status)"
                + (detail.code == ServerErrorDetail().code ? "" : " (\(detail.code))")
        )
    }

    /// `base` with `query` added, every name and value percent-encoded but the unreserved characters.
    static func withQuery(_ base: URL, _ query: [(String, String)]) throws(AuthError) -> URL {
        let text = query.map { $0.percentEncodedUnreserved() + "=" + $1.percentEncodedUnreserved() }.joined(
            separator: "&"
        )
        let absolute = base.absoluteString
        guard let url = URL(string: absolute + (absolute.contains("?") ? "&" : "?") + text) else {
            throw .invalidResponse("the authorization URL could not be built from \(TerminalText.escaped(absolute))")
        }
        return url
    }

    /// An authorization code exchanged for tokens (RFC 6749 § 4.1.3 with PKCE, a form POST), as
    /// both ChatGPT and generic providers take it; a refresh token is required.
    static func exchangeAuthorizationCode(
        _ transport: any HTTPTransport,
        at tokenEndpoint: URL,
        code: String,
        verifier: String,
        redirectURI: String,
        clientID: String
    ) async throws(AuthError) -> TokenResponse {
        let step = "token exchange"
        let response = try await send(
            transport,
            .form(
                tokenEndpoint,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                    ("client_id", clientID), ("code_verifier", verifier),
                ]
            ),
            step: step
        )
        guard response.isSuccess else {
            let detail = ServerErrorDetail(body: response.body, redacting: [code, verifier])
            if let passing = passingFailure(step, status: response.status, detail) { throw passing }
            throw .tokenExchangeFailed(status: response.status, detail: detail)
        }
        let tokens = try TokenResponse.parse(response.body, step: step)
        guard tokens.refreshToken?.isEmpty == false else { throw .missingRefreshToken }
        return tokens
    }

    static func endpoint(_ base: URL, _ path: String) -> URL {
        var s = base.absoluteString
        while s.hasSuffix("/") { s.removeLast() }
        return URL(string: s + path) ?? base
    }
}
