import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// The sign-in modes Codex knows (`AuthMode` of codex-rs/app-server-protocol, the values of
/// auth.json's `auth_mode`), and what Lanyard does with each.
package enum CodexAuthMode: String, CaseIterable, Sendable {
    /// An OpenAI API key (`OPENAI_API_KEY`): not an account Lanyard holds.
    case apiKey = "apikey"
    /// ChatGPT OAuth tokens Codex refreshes: what a device-code slot exports.
    case chatgpt
    /// Tokens an embedding app hands Codex, kept in memory only: never in auth.json.
    case chatgptAuthTokens
    /// Backend auth sent as request headers: never in auth.json.
    case headers
    /// A registered agent identity (a JWT or its record): not held by Lanyard.
    case agentIdentity
    /// A personal access token (`at-…`): what an access-token slot exports.
    case personalAccessToken
    /// An Amazon Bedrock bearer token: not a ChatGPT account.
    case bedrockApiKey
    /// Amazon Bedrock access keys: not a ChatGPT account.
    case bedrockAccessKeys

    /// The mode Codex resolves for a file (`AuthDotJson::resolved_mode`): an explicit
    /// `auth_mode` wins; else a `personal_access_token`, a `bedrock_api_key`,
    /// `bedrock_access_keys` or an `OPENAI_API_KEY` that is present (not null) decides, in that
    /// order; else the file is a ChatGPT sign-in.
    static func resolved(_ object: [String: JSONValue]) -> String {
        if let mode = object["auth_mode"], mode != .null { return mode.string ?? "(not a string)" }
        for (key, mode) in [
            ("personal_access_token", CodexAuthMode.personalAccessToken), ("bedrock_api_key", .bedrockApiKey),
            ("bedrock_access_keys", .bedrockAccessKeys), ("OPENAI_API_KEY", .apiKey),
        ]
        where object[key].map({ $0 != .null }) ?? false {
            return mode.rawValue
        }
        return CodexAuthMode.chatgpt.rawValue
    }

    /// Why Lanyard leaves a sign-in of this mode alone (nil for the modes it handles).
    var refusal: String? {
        switch self {
        case .chatgpt, .personalAccessToken: return nil
        case .apiKey: return "an OpenAI API key sign-in (auth_mode apikey), which is not an account Lanyard holds"
        case .agentIdentity: return "an agent identity (auth_mode agentIdentity), which Lanyard does not hold"
        case .bedrockApiKey, .bedrockAccessKeys:
            return "an Amazon Bedrock sign-in (auth_mode \(rawValue)), not a ChatGPT account"
        case .chatgptAuthTokens, .headers:
            return "auth_mode \(rawValue), which Codex keeps in memory only and never reads from auth.json"
        }
    }
}

/// The fields of auth.json this code reads and writes: everything else is kept as it was when
/// Lanyard rewrites the file (fields newer Codex versions add).
private let knownAuthFields: Set<String> = [
    "auth_mode", "OPENAI_API_KEY", "tokens", "last_refresh", "agent_identity", "personal_access_token",
    "bedrock_api_key",
    "bedrock_access_keys",
]

/// Fields Codex keeps beside a ChatGPT sign-in that belong to its account: the agent identity it
/// registered for that account (`agent_identity`, a record). Kept when the same account is
/// written again, dropped when another account replaces it.
private let accountBoundFields: Set<String> = ["agent_identity"]

/// A ChatGPT sign-in in Codex's `auth.json` (`$CODEX_HOME/auth.json`, default `~/.codex`, or
/// Codex's keyring item), as the Codex CLI reads it:
/// `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token","access_token",
/// "refresh_token","account_id"},"last_refresh":"<RFC 3339>"}`. Codex rewrites it in place when
/// it refreshes, so it may hold newer tokens than the slot it came from.
package struct CodexAuthFile: Equatable, Sendable {
    package var idToken: String
    package var accessToken: String
    package var refreshToken: String
    package var accountID: String?
    package var lastRefresh: Date
    /// The file said `auth_mode: "oauth"`, which current Codex refuses: read as the ChatGPT
    /// sign-in it is, and written back as `chatgpt`.
    package var legacyOAuthMode = false

    package init(idToken: String, accessToken: String, refreshToken: String, accountID: String?, lastRefresh: Date) {
        self.idToken = idToken
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accountID = accountID
        self.lastRefresh = lastRefresh
    }

    /// The auth.json for a slot's credential; Codex needs an id token and a refresh token.
    package init(credential: Credential, slot: Slot) throws {
        guard let id = credential.tokens.idToken else {
            throw IntegrationError.unsupported("slot \(slot.name) has no id token, which Codex requires")
        }
        guard let refresh = credential.tokens.refreshToken else {
            throw ClientError.missingRefreshToken(slot: slot.name)
        }
        self.init(
            idToken: id,
            accessToken: credential.tokens.accessToken,
            refreshToken: refresh,
            accountID: credential.account.accountID,
            lastRefresh: credential.lastRefresh ?? Date()
        )
    }

    /// Parses a ChatGPT auth.json strictly (every token present); see ``CodexSignIn/parse(_:path:)``
    /// for any file.
    package static func parse(_ data: Data, path: String) throws -> CodexAuthFile {
        guard case .chatgpt(let file) = try CodexSignIn.parse(data, path: path).signIn else {
            throw StoreError.corrupt(source: path, detail: "holds a personal access token, not ChatGPT tokens")
        }
        return file
    }

    static func parse(_ json: JSONFields, legacyOAuthMode: Bool) throws(JSONShapeError) -> CodexAuthFile {
        let tokens = try json.object("tokens")
        guard let last = try json.optionalDate("last_refresh") else {
            throw JSONShapeError(path: ".last_refresh", problem: "is missing")
        }
        var file = CodexAuthFile(
            idToken: try tokens.token("id_token"),
            accessToken: try tokens.token("access_token"),
            refreshToken: try tokens.token("refresh_token"),
            accountID: try tokens.optionalLine("account_id"),
            lastRefresh: last
        )
        file.legacyOAuthMode = legacyOAuthMode
        // The id token's claims become the slot's account: refused here when their text
        // could rewrite a terminal, so the credential below never carries it.
        if let claims = try? JWTClaims(token: file.idToken) {
            _ = try AccountInfo(openAIClaims: claims).checkedOutsideText(place: ".tokens.id_token's claims")
        }
        return file
    }

    package var json: JSONValue { CodexSignIn(.chatgpt(self)).json }

    /// The credential these tokens make for `provider`, with account data from the id token.
    package func credential(provider: String, expiresAt: Date?) -> Credential {
        var account = (try? JWTClaims(token: idToken)).map(AccountInfo.init(openAIClaims:)) ?? AccountInfo()
        if account.accountID == nil { account.accountID = accountID }
        let expiry = expiresAt ?? (try? JWTClaims(token: accessToken))?.expiresAt
        return Credential(
            provider: provider,
            tokens: TokenSet(
                accessToken: accessToken,
                refreshToken: refreshToken,
                idToken: idToken,
                expiresAt: expiry
            ),
            lastRefresh: lastRefresh,
            account: account
        )
    }
}

/// Whatever sign-in Codex's auth.json (or keyring item) holds that Lanyard handles: ChatGPT
/// tokens, or a personal access token. Fields Lanyard does not know are kept for the rewrite.
package struct CodexSignIn: Equatable, Sendable {
    package enum Kind: Equatable, Sendable {
        case chatgpt(CodexAuthFile)
        /// `personal_access_token`; Codex writes it with no `auth_mode` (it infers the mode, so
        /// older Codex builds can still read the file).
        case personalAccessToken(String)
    }

    package var signIn: Kind
    /// Top-level fields of the file Lanyard does not know, kept as they were.
    package var preserved: [String: JSONValue] = [:]
    /// Fields Codex keeps for this sign-in's account (see `accountBoundFields`): written back
    /// only for the same account.
    package var accountBound: [String: JSONValue] = [:]

    package init(_ signIn: Kind, preserved: [String: JSONValue] = [:], accountBound: [String: JSONValue] = [:]) {
        self.signIn = signIn
        self.preserved = preserved
        self.accountBound = accountBound
    }

    /// Takes over what `live` (the sign-in being replaced) holds that this code does not write
    /// itself: its unknown fields, and its account's own fields when it is the same account.
    package mutating func keep(from live: CodexSignIn?) {
        guard let live else { return }
        preserved = live.preserved
        if let account = accountID, account == live.accountID { accountBound = live.accountBound }
    }

    /// The sign-in Codex gets for a slot's credential: a personal access token as one, else
    /// ChatGPT tokens.
    package init(credential: Credential, slot: Slot) throws {
        if credential.isPersonalAccessToken {
            self.init(.personalAccessToken(credential.tokens.accessToken))
        } else {
            self.init(.chatgpt(try CodexAuthFile(credential: credential, slot: slot)))
        }
    }

    /// The ChatGPT tokens, when that is what it holds.
    package var chatGPT: CodexAuthFile? {
        if case .chatgpt(let file) = signIn { return file }
        return nil
    }

    /// Parses auth.json as Codex resolves it. A mode Lanyard does not handle is refused by name
    /// (``IntegrationError/codexSignInUnsupported(mode:reason:source:)``); `oauth`, which older
    /// Lanyard versions wrote and current Codex refuses, is read as the ChatGPT sign-in it is.
    package static func parse(_ data: Data, path: String) throws -> CodexSignIn {
        do {
            let json = try JSONFields(try JSONValue.parse(data))
            // A store of several accounts (`version`, `accounts`, `selected_account_id`) is not
            // the single sign-in this code reads and writes: rewriting it would lose the others.
            if ["version", "accounts", "selected_account_id"].contains(where: { json.object[$0] != nil }) {
                throw IntegrationError.codexSignInUnsupported(
                    mode: "multi-account",
                    reason: "a store of several accounts, which this Lanyard does not read or write",
                    source: path
                )
            }
            let preserved = json.object.filter { !knownAuthFields.contains($0.key) }
            let accountBound = json.object.filter { accountBoundFields.contains($0.key) && $0.value != .null }
            let mode = CodexAuthMode.resolved(json.object)
            if mode == "oauth" {
                return CodexSignIn(
                    .chatgpt(try CodexAuthFile.parse(json, legacyOAuthMode: true)),
                    preserved: preserved,
                    accountBound: accountBound
                )
            }
            guard let known = CodexAuthMode(rawValue: mode) else {
                throw IntegrationError.codexSignInUnsupported(
                    mode: mode,
                    reason: "an auth_mode Codex does not know (it would refuse the file)",
                    source: path
                )
            }
            if let reason = known.refusal {
                throw IntegrationError.codexSignInUnsupported(mode: mode, reason: reason, source: path)
            }
            if known == .personalAccessToken {
                let token = try json.token("personal_access_token")
                guard token.hasPrefix(Credential.personalAccessTokenPrefix) else {
                    throw JSONShapeError(path: ".personal_access_token", problem: "does not start with at-")
                }
                return CodexSignIn(.personalAccessToken(token), preserved: preserved)
            }
            return CodexSignIn(
                .chatgpt(try CodexAuthFile.parse(json, legacyOAuthMode: false)),
                preserved: preserved,
                accountBound: accountBound
            )
        } catch let error as JSONSyntaxError {
            throw StoreError.corrupt(source: path, detail: "not valid JSON (\(error.userFacingDescription))")
        } catch let error as JSONShapeError {
            throw StoreError.corrupt(source: path, detail: error.userFacingDescription)
        }
    }

    /// The file as Codex writes it (`OPENAI_API_KEY` always there, null; the other fields only
    /// when set), with the preserved fields.
    package var json: JSONValue {
        var object = preserved
        object["OPENAI_API_KEY"] = .null
        switch signIn {
        case .chatgpt(let file):
            object.merge(accountBound) { _, bound in bound }
            object["auth_mode"] = .string(CodexAuthMode.chatgpt.rawValue)
            object["tokens"] = .object([
                "id_token": .string(file.idToken), "access_token": .string(file.accessToken),
                "refresh_token": .string(file.refreshToken), "account_id": .optional(file.accountID),
            ])
            object["last_refresh"] = .date(file.lastRefresh)
        case .personalAccessToken(let token):
            object["personal_access_token"] = .string(token)
        }
        return .object(object)
    }

    /// The account id the sign-in names (a personal access token names none itself).
    package var accountID: String? { chatGPT?.accountID }

    /// The credential it makes for `provider`; a personal access token's account is unknown here
    /// (Codex asks the server for it).
    package func credential(provider: String) -> Credential {
        switch signIn {
        case .chatgpt(let file): return file.credential(provider: provider, expiresAt: nil)
        case .personalAccessToken(let token):
            return Credential(
                provider: provider,
                tokens: TokenSet(accessToken: token),
                lastRefresh: nil,
                account: AccountInfo()
            )
        }
    }
}

/// Integration failures.
public enum IntegrationError: LanyardError, Equatable {
    case unsupported(String)
    /// `codex import` found no auth.json to adopt (not signed in, as a missing credential is).
    case noCodexSignIn(authPath: String)
    /// Codex's sign-in is of a mode Lanyard does not read or overwrite; nothing was changed.
    case codexSignInUnsupported(mode: String, reason: String, source: String)
    /// Codex keeps its sign-in in the keyring (`cli_auth_credentials_store`) and the keyring
    /// cannot be used; nothing was written.
    case codexKeyringUnavailable(mode: String, problem: String)

    public var code: ErrorCode {
        switch self {
        case .unsupported: return .integrationUnsupported
        case .noCodexSignIn: return .missingCredential
        case .codexSignInUnsupported: return .integrationUnsupported
        case .codexKeyringUnavailable: return .codexKeyringUnavailable
        }
    }

    public var errorDescription: String? {
        switch self {
        case .unsupported(let m): return m
        case .noCodexSignIn(let path):
            return "Codex is not signed in here: \(TerminalText.escaped(path)) does not exist"
        case .codexSignInUnsupported(let mode, let reason, let source):
            return "Codex's sign-in in \(TerminalText.escaped(source)) is "
                + "\(TerminalText.escaped(reason)); Lanyard leaves it as it is "
                + "(mode \(TerminalText.escaped(mode))). To let Lanyard manage Codex's sign-in, "
                + "move it aside (or run `codex logout`) first"
        case .codexKeyringUnavailable(let mode, let problem):
            return "Codex keeps its sign-in in the keyring (cli_auth_credentials_store = \(mode)), "
                + "and \(problem); nothing was "
                + "written (Codex ignores auth.json in this mode). "
                + "Unlock the keyring (log in to the desktop session) and run "
                + "the command again, or set cli_auth_credentials_store = \"file\" in Codex's config.toml"
        }
    }
}
