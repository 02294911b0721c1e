import Foundation

/// What a backend stores for one slot: one versioned JSON document holding the tokens and the
/// account they belong to. The layout is documented in docs/store-format.md; keep it stable.
public struct Credential: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The layout version this code writes and the newest it reads.
    public static let currentVersion = 1

    public var version: Int
    /// The provider id from config (`openai`, or a configured device-code provider).
    public var provider: String
    public var tokens: TokenSet
    /// When the tokens were last obtained or refreshed.
    public var lastRefresh: Date?
    public var account: AccountInfo

    public init(provider: String, tokens: TokenSet, lastRefresh: Date?, account: AccountInfo) {
        self.version = Credential.currentVersion
        self.provider = provider
        self.tokens = tokens
        self.lastRefresh = lastRefresh
        self.account = account
    }

    enum CodingKeys: String, CodingKey {
        case version, provider, tokens, lastRefresh = "last_refresh", account
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        guard (1...Credential.currentVersion).contains(version) else {
            throw DecodingError.dataCorruptedError(
                forKey: .version, in: c,
                debugDescription: "credential version \(version) is not supported (this Lanyard reads up to \(Credential.currentVersion))")
        }
        provider = try c.decode(String.self, forKey: .provider)
        tokens = try c.decode(TokenSet.self, forKey: .tokens)
        lastRefresh = try c.decodeIfPresent(Date.self, forKey: .lastRefresh)
        account = try c.decodeIfPresent(AccountInfo.self, forKey: .account) ?? AccountInfo()
    }

    /// Encodes with the documented layout (sorted keys, RFC 3339 dates).
    public func jsonData() throws -> Data { try LanyardJSON.encoder().encode(self) }

    /// Decodes the documented layout, or throws a ``DecodeError`` naming the field that is wrong.
    public static func decode(_ data: Data, source: String) throws(DecodeError) -> Credential {
        try LanyardJSON.decode(Credential.self, from: data, source: source)
    }

    public var description: String {
        "Credential(provider: \(provider), account: \(account.email ?? "?"), tokens: \(tokens))"
    }
}
