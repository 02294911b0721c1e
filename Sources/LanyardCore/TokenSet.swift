import Foundation

/// The secret part of a sign-in: access, refresh and id tokens with the access token's expiry.
///
/// `description` never shows a token, so a stray `print` or log line cannot leak one.
public struct TokenSet: Codable, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public var accessToken: String
    public var refreshToken: String?
    public var idToken: String?
    /// When the access token expires; nil when neither the server nor the token says.
    public var expiresAt: Date?

    public init(accessToken: String, refreshToken: String? = nil, idToken: String? = nil, expiresAt: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token", refreshToken = "refresh_token", idToken = "id_token"
        case expiresAt = "expires_at"
    }

    public var description: String {
        "TokenSet(access: <redacted>, refresh: \(refreshToken == nil ? "none" : "<redacted>"), "
            + "id: \(idToken == nil ? "none" : "<redacted>"), expiresAt: \(expiresAt.map { "\($0)" } ?? "unknown"))"
    }

    public var debugDescription: String { description }
}
