import FoundationEssentials
import LanyardSupport

/// The secret part of a sign-in: access, refresh and id tokens with the access token's expiry.
///
/// `description` never shows a token, so a stray `print` or log line cannot leak one.
package struct TokenSet: Hashable, JSONDocument, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
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

    /// When the access token expires: `expiresAt`, else the token's own `exp` claim when it is a
    /// JWT; nil when neither says.
    package var expiry: Date? { expiresAt ?? (try? JWTClaims(token: accessToken))?.expiresAt }

    package init(json: JSONFields) throws(JSONShapeError) {
        self.init(
            accessToken: try json.token("access_token"),
            refreshToken: try json.optionalToken("refresh_token"),
            idToken: try json.optionalToken("id_token"),
            expiresAt: try json.optionalDate("expires_at")
        )
    }

    public var json: JSONValue {
        JSONValue.object([
            "access_token": .string(accessToken), "refresh_token": .optional(refreshToken),
            "id_token": .optional(idToken), "expires_at": .date(expiresAt),
        ]).droppingNulls
    }

    /// Every token here, for removing from text a server sends back (error bodies may echo them).
    public var secrets: [String] { [accessToken, refreshToken, idToken].compactMap { $0 } }

    public var description: String {
        "TokenSet(access: <redacted>, refresh: \(refreshToken == nil ? "none" : "<redacted>"), "
            + "id: \(idToken == nil ? "none" : "<redacted>"), expiresAt: \(expiresAt.map { "\($0)" } ?? "unknown"))"
    }

    public var debugDescription: String { description }
}
