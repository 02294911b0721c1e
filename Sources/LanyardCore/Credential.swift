import FoundationEssentials

/// What a backend stores for one slot: one versioned JSON document holding the tokens and the
/// account they belong to. The layout is documented in docs/store-format.md; keep it stable.
public struct Credential: Hashable, JSONDocument, Sendable, CustomStringConvertible {
    /// The layout version this code writes and the newest it reads.
    public static let currentVersion = 1

    public var version: Int
    /// The provider id from config (`openai`, or a configured device-code provider).
    public var provider: String
    public var tokens: TokenSet
    /// When the tokens were last obtained or refreshed.
    public var lastRefresh: Date?
    /// The boot clock at `lastRefresh`: how old the tokens are when the wall clock has jumped since.
    public var lastRefreshBoot: BootInstant?
    public var account: AccountInfo

    public init(provider: String, tokens: TokenSet, lastRefresh: Date?, lastRefreshBoot: BootInstant? = nil, account: AccountInfo) {
        self.version = Credential.currentVersion
        self.provider = provider
        self.tokens = tokens
        self.lastRefresh = lastRefresh
        self.lastRefreshBoot = lastRefreshBoot
        self.account = account
    }

    public init(json: JSONFields) throws(JSONShapeError) {
        version = try json.int("version")
        guard (1...Credential.currentVersion).contains(version) else {
            throw JSONShapeError(path: ".version", problem: "is \(version), newer than this Lanyard reads (\(Credential.currentVersion))")
        }
        provider = try json.string("provider")
        tokens = try TokenSet(json: try json.object("tokens"))
        lastRefresh = try json.optionalDate("last_refresh")
        lastRefreshBoot = try json.optionalBootInstant("last_refresh_boot")
        account = try json.optionalObject("account").map { (f: JSONFields) throws(JSONShapeError) in try AccountInfo(json: f) } ?? AccountInfo()
    }

    public var json: JSONValue {
        JSONValue.object(["version": .number(Double(version)), "provider": .string(provider), "tokens": tokens.json,
                          "last_refresh": .date(lastRefresh),
                          "last_refresh_boot": .optional(lastRefreshBoot?.text), "account": account.json]).droppingNulls
    }

    public var description: String {
        "Credential(provider: \(provider), account: \(account.email ?? "?"), tokens: \(tokens))"
    }
}
