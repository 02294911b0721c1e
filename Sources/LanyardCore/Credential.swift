import FoundationEssentials
import LanyardSupport

/// What a backend stores for one slot: one versioned JSON document holding the tokens and the
/// account they belong to. The layout is documented in docs/store-format.md; keep it stable.
package struct Credential: Hashable, JSONDocument, Sendable, CustomStringConvertible {
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
    /// Fingerprints of the refresh tokens this slot rotated away from, newest first (at most
    /// ``spentLimit``): a copy of one found elsewhere (an old auth.json) is stale, never adopted.
    public var spentRefreshTokens: [String] = []
    public var account: AccountInfo

    public static let spentLimit = 4

    public init(
        provider: String,
        tokens: TokenSet,
        lastRefresh: Date?,
        lastRefreshBoot: BootInstant? = nil,
        account: AccountInfo
    ) {
        self.version = Credential.currentVersion
        self.provider = provider
        self.tokens = tokens
        self.lastRefresh = lastRefresh
        self.lastRefreshBoot = lastRefreshBoot
        self.account = account
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        version = try json.int("version")
        guard (1...Credential.currentVersion).contains(version) else {
            throw JSONShapeError(
                path: ".version",
                problem: "is \(version), newer than this Lanyard reads (\(Credential.currentVersion))"
            )
        }
        provider = try json.string("provider")
        tokens = try TokenSet(json: try json.object("tokens"))
        lastRefresh = try json.optionalDate("last_refresh")
        lastRefreshBoot = try json.optionalBootInstant("last_refresh_boot")
        spentRefreshTokens = try json.optionalStrings("spent_refresh_tokens") ?? []
        if let bad = spentRefreshTokens.first(where: {
            $0.utf8.count != 32 || !$0.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        }) {
            throw JSONShapeError(
                path: json.path + ".spent_refresh_tokens",
                problem: "holds \(TerminalText.escaped(String(bad.prefix(40))).debugDescription), "
                    + "not a 32-digit hex fingerprint"
            )
        }
        if spentRefreshTokens.count > Credential.spentLimit {
            throw JSONShapeError(
                path: json.path + ".spent_refresh_tokens",
                problem: "holds more than \(Credential.spentLimit) fingerprints"
            )
        }
        account =
            try json.optionalObject("account").map { (f: JSONFields) throws(JSONShapeError) in try AccountInfo(json: f)
            } ?? AccountInfo()
    }

    public var json: JSONValue {
        JSONValue.object([
            "version": .number(Double(version)), "provider": .string(provider), "tokens": tokens.json,
            "last_refresh": .date(lastRefresh),
            "last_refresh_boot": .optional(lastRefreshBoot?.text),
            "spent_refresh_tokens": spentRefreshTokens.isEmpty
                ? .null : .array(spentRefreshTokens.map(JSONValue.string)),
            "account": account.json,
        ]).droppingNulls
    }

    /// The prefix Codex tells a ChatGPT personal access token by (`codex login --with-access-token`).
    public static let personalAccessTokenPrefix = "at-"

    /// A personal access token (`lanyard login --with-access-token`): an access token with no
    /// refresh token that never rotates, so nothing ever refreshes it. Told apart as Codex tells
    /// one (`classify_codex_access_token`: the `at-` prefix), so the stored layout is unchanged.
    public var isPersonalAccessToken: Bool {
        tokens.refreshToken == nil && tokens.accessToken.hasPrefix(Credential.personalAccessTokenPrefix)
    }

    public var description: String {
        "Credential(provider: \(provider), account: \(account.email ?? "?"), tokens: \(tokens))"
    }
}
