import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore

/// Codex's `auth.json` (`$CODEX_HOME/auth.json`, default `~/.codex`), as the Codex CLI reads it:
/// `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token","access_token",
/// "refresh_token","account_id"},"last_refresh":"<RFC 3339>"}`. Codex rewrites it in place when
/// it refreshes, so it may hold newer tokens than the slot it came from.
public struct CodexAuthFile: Equatable, Sendable {
    public var idToken: String
    public var accessToken: String
    public var refreshToken: String
    public var accountID: String?
    public var lastRefresh: Date

    public init(idToken: String, accessToken: String, refreshToken: String, accountID: String?, lastRefresh: Date) {
        self.idToken = idToken
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accountID = accountID
        self.lastRefresh = lastRefresh
    }

    /// The auth.json for a slot's credential; Codex needs an id token and a refresh token.
    public init(credential: Credential, slot: Slot) throws {
        guard let id = credential.tokens.idToken else {
            throw IntegrationError.unsupported("slot \(slot.name) has no id token, which Codex requires")
        }
        guard let refresh = credential.tokens.refreshToken else { throw ClientError.missingRefreshToken(slot: slot.name) }
        self.init(idToken: id, accessToken: credential.tokens.accessToken, refreshToken: refresh,
                  accountID: credential.account.accountID, lastRefresh: credential.lastRefresh ?? Date())
    }

    /// Parses auth.json strictly: `auth_mode` must be `chatgpt`, every token present.
    public static func parse(_ data: Data, path: String) throws -> CodexAuthFile {
        do {
            let json = try JSONFields(try JSONValue.parse(data))
            let mode = try json.optionalString("auth_mode") ?? "chatgpt"
            guard mode.lowercased() == "chatgpt" else { throw JSONShapeError(path: ".auth_mode", problem: "is not chatgpt (an API-key sign-in)") }
            let tokens = try json.object("tokens")
            guard let last = try json.optionalDate("last_refresh") else { throw JSONShapeError(path: ".last_refresh", problem: "is missing") }
            return CodexAuthFile(idToken: try tokens.string("id_token"), accessToken: try tokens.string("access_token"),
                                 refreshToken: try tokens.string("refresh_token"), accountID: try tokens.optionalString("account_id"),
                                 lastRefresh: last)
        } catch let error as JSONSyntaxError {
            throw StoreError.corrupt(source: path, detail: "not valid JSON (\(error.userFacingDescription))")
        } catch let error as JSONShapeError {
            throw StoreError.corrupt(source: path, detail: error.userFacingDescription)
        }
    }

    public var json: JSONValue {
        .object([
            "auth_mode": .string("chatgpt"), "OPENAI_API_KEY": .null,
            "tokens": .object(["id_token": .string(idToken), "access_token": .string(accessToken),
                               "refresh_token": .string(refreshToken), "account_id": .optional(accountID)]),
            "last_refresh": .date(lastRefresh),
        ])
    }

    /// The credential these tokens make for `provider`, with account data from the id token.
    public func credential(provider: String, expiresAt: Date?) -> Credential {
        var account = (try? JWTClaims(token: idToken)).map(AccountInfo.init(openAIClaims:)) ?? AccountInfo()
        if account.accountID == nil { account.accountID = accountID }
        let expiry = expiresAt ?? (try? JWTClaims(token: accessToken))?.expiresAt
        return Credential(provider: provider, tokens: TokenSet(accessToken: accessToken, refreshToken: refreshToken,
                                                               idToken: idToken, expiresAt: expiry),
                          lastRefresh: lastRefresh, account: account)
    }
}

/// Reading and writing a Codex home.
public struct CodexHome: Sendable {
    public let directory: String
    public var authPath: String { directory + "/auth.json" }

    public init(directory: String) { self.directory = directory }

    /// `--codex-home`, else `$CODEX_HOME`, else `~/.codex`.
    public init(explicit: String?, environment: [String: String]) {
        if let explicit { directory = explicit } else if let env = environment["CODEX_HOME"], !env.isEmpty { directory = env } else {
            directory = (environment["HOME"] ?? PathText.passwordDatabaseHome()) + "/.codex"
        }
    }

    /// The live auth.json, or nil when there is none.
    public func read() throws -> CodexAuthFile? {
        guard let data = try SecureFiles.read(authPath) else { return nil }
        return try CodexAuthFile.parse(data, path: authPath)
    }

    /// Writes auth.json atomically at 0600. Codex requires its home to exist already.
    public func write(_ file: CodexAuthFile) throws {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw IntegrationError.unsupported("Codex home \(directory) does not exist (create it, or run Codex once)")
        }
        try SecureFiles.atomicWrite(Data(file.json.serialized(pretty: true).utf8), to: authPath)
    }

    /// Codex processes running now (they keep the account they started with until restarted).
    public static func runningProcesses() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let comm = FileManager.default.contents(atPath: "/proc/\(pid)/comm") else { return false }
            let name = String(decoding: comm, as: UTF8.self).trimmingWhitespaceAndNewlines()
            return name == "codex" || name.hasPrefix("codex-")
        }
    }
}

/// Integration failures.
public enum IntegrationError: LanyardError, Equatable {
    case unsupported(String)
    public var code: String { "integration_unsupported" }
    public var exitStatus: ExitStatus { .failure }
    public var errorDescription: String? {
        switch self { case .unsupported(let m): return m }
    }
}
