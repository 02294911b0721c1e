import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// Codex's `auth.json` (`$CODEX_HOME/auth.json`, default `~/.codex`), as the Codex CLI reads it:
/// `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token","access_token",
/// "refresh_token","account_id"},"last_refresh":"<RFC 3339>"}`. Codex rewrites it in place when
/// it refreshes, so it may hold newer tokens than the slot it came from.
package struct CodexAuthFile: Equatable, Sendable {
    package var idToken: String
    package var accessToken: String
    package var refreshToken: String
    package var accountID: String?
    package var lastRefresh: Date

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
        guard let refresh = credential.tokens.refreshToken else { throw ClientError.missingRefreshToken(slot: slot.name) }
        self.init(idToken: id, accessToken: credential.tokens.accessToken, refreshToken: refresh,
                  accountID: credential.account.accountID, lastRefresh: credential.lastRefresh ?? Date())
    }

    /// Parses auth.json strictly: `auth_mode` must be `chatgpt`, every token present.
    package static func parse(_ data: Data, path: String) throws -> CodexAuthFile {
        do {
            let json = try JSONFields(try JSONValue.parse(data))
            let mode = try json.optionalString("auth_mode") ?? "chatgpt"
            guard mode.lowercased() == "chatgpt" else { throw JSONShapeError(path: ".auth_mode", problem: "is not chatgpt (an API-key sign-in)") }
            let tokens = try json.object("tokens")
            guard let last = try json.optionalDate("last_refresh") else { throw JSONShapeError(path: ".last_refresh", problem: "is missing") }
            let file = CodexAuthFile(idToken: try tokens.token("id_token"), accessToken: try tokens.token("access_token"),
                                     refreshToken: try tokens.token("refresh_token"), accountID: try tokens.optionalLine("account_id"),
                                     lastRefresh: last)
            // The id token's claims become the slot's account: refused here when their text
            // could rewrite a terminal, so the credential below never carries it.
            if let claims = try? JWTClaims(token: file.idToken) {
                _ = try AccountInfo(openAIClaims: claims).checkedOutsideText(place: ".tokens.id_token's claims")
            }
            return file
        } catch let error as JSONSyntaxError {
            throw StoreError.corrupt(source: path, detail: "not valid JSON (\(error.userFacingDescription))")
        } catch let error as JSONShapeError {
            throw StoreError.corrupt(source: path, detail: error.userFacingDescription)
        }
    }

    package var json: JSONValue {
        .object([
            "auth_mode": .string("chatgpt"), "OPENAI_API_KEY": .null,
            "tokens": .object(["id_token": .string(idToken), "access_token": .string(accessToken),
                               "refresh_token": .string(refreshToken), "account_id": .optional(accountID)]),
            "last_refresh": .date(lastRefresh),
        ])
    }

    /// The credential these tokens make for `provider`, with account data from the id token.
    package func credential(provider: String, expiresAt: Date?) -> Credential {
        var account = (try? JWTClaims(token: idToken)).map(AccountInfo.init(openAIClaims:)) ?? AccountInfo()
        if account.accountID == nil { account.accountID = accountID }
        let expiry = expiresAt ?? (try? JWTClaims(token: accessToken))?.expiresAt
        return Credential(provider: provider, tokens: TokenSet(accessToken: accessToken, refreshToken: refreshToken,
                                                               idToken: idToken, expiresAt: expiry),
                          lastRefresh: lastRefresh, account: account)
    }
}

/// Integration failures.
public enum IntegrationError: LanyardError, Equatable {
    case unsupported(String)
    /// `codex import` found no auth.json to adopt (not signed in, as a missing credential is).
    case noCodexSignIn(authPath: String)

    public var code: ErrorCode {
        switch self {
        case .unsupported: return .integrationUnsupported
        case .noCodexSignIn: return .missingCredential
        }
    }

    public var errorDescription: String? {
        switch self {
        case .unsupported(let m): return m
        case .noCodexSignIn(let path): return "Codex is not signed in here: \(TerminalText.escaped(path)) does not exist"
        }
    }
}
