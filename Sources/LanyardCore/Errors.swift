import FoundationEssentials

/// The documented exit statuses of the `lanyard` command (docs/cli.md). Stable: scripts rely on them.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case ok = 0
    case failure = 1
    case usage = 2
    case notSignedIn = 3
    case reauthenticationRequired = 4
    case storeUnavailable = 5
    case network = 6
    case usageLimit = 7
    case cancelled = 130
}

/// An error Lanyard reports to people and scripts: a stable machine code, an exit status, and a
/// description that names the slot and the failing step but never a token.
public protocol LanyardError: LocalizedError, Sendable {
    /// A stable snake_case code for `--json` output and scripts.
    var code: String { get }
    /// The exit status the CLI uses for this error.
    var exitStatus: ExitStatus { get }
}

/// Failures of a credential backend. None of them deletes or replaces stored data.
public enum StoreError: LanyardError, Equatable {
    /// No backend to talk to (no D-Bus session, no Secret Service, no store file); `hint` says what to do.
    case unavailable(backend: String, hint: String)
    /// The keyring collection or encrypted store is locked.
    case locked(backend: String, hint: String)
    /// The backend did not answer within the configured time.
    case timedOut(backend: String, operation: String, seconds: Double)
    /// Stored data did not decode; it was left as it is.
    case corrupt(source: String, detail: String)
    /// The slot has no stored credential.
    case notFound(slot: String)
    /// A wrong passphrase or identity.
    case wrongPassphrase
    /// A path Lanyard refuses to use (symlink, foreign owner, wrong type).
    case unsafePath(path: String, reason: String)
    /// A file or system call failed.
    case io(path: String, detail: String)

    public var code: String {
        switch self {
        case .unavailable: return "store_unavailable"
        case .locked: return "store_locked"
        case .timedOut: return "store_timed_out"
        case .corrupt: return "store_corrupt"
        case .notFound: return "missing_credential"
        case .wrongPassphrase: return "wrong_passphrase"
        case .unsafePath: return "unsafe_path"
        case .io: return "io_error"
        }
    }

    public var exitStatus: ExitStatus {
        switch self {
        case .unavailable, .locked, .timedOut: return .storeUnavailable
        case .notFound: return .notSignedIn
        default: return .failure
        }
    }

    public var errorDescription: String? {
        switch self {
        case .unavailable(let backend, let hint): return "\(backend) is unavailable: \(hint)"
        case .locked(let backend, let hint): return "\(backend) is locked: \(hint)"
        case .timedOut(let backend, let op, let s):
            return "\(backend) did not answer \(op) within \(Self.seconds(s)) (is a keyring prompt waiting?)"
        case .corrupt(let source, let detail): return "\(source) is corrupt (left untouched): \(detail)"
        case .notFound(let slot): return "slot \(slot) has no stored credential; sign in with `lanyard login \(slot)`"
        case .wrongPassphrase: return "wrong passphrase: the store was not unlocked and nothing changed"
        case .unsafePath(let path, let reason): return "refusing to use \(path): \(reason)"
        case .io(let path, let detail): return "\(path): \(detail)"
        }
    }

    static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(s.saturatingInt) s" : "\((s * 10).rounded() / 10) s"
    }
}

/// Failures reading or changing the registry of slots.
public enum RegistryError: LanyardError, Equatable {
    /// The registry did not parse; it was moved to `movedTo` and is reported, never treated as empty.
    case corrupt(path: String, movedTo: String, detail: String)
    case unknownSlot(String)
    case slotExists(String)
    case noActiveSlot

    public var code: String {
        switch self {
        case .corrupt: return "registry_corrupt"
        case .unknownSlot: return "unknown_slot"
        case .slotExists: return "slot_exists"
        case .noActiveSlot: return "no_active_slot"
        }
    }

    public var exitStatus: ExitStatus {
        switch self {
        case .unknownSlot, .noActiveSlot: return .notSignedIn
        default: return .failure
        }
    }

    public var errorDescription: String? {
        switch self {
        case .corrupt(let path, let moved, let detail):
            return "registry \(path) did not parse (\(detail)); it was moved to \(moved). "
                + "Run `lanyard doctor --repair` to rebuild it from the credential store."
        case .unknownSlot(let s): return "no slot named \(s) (see `lanyard list`)"
        case .slotExists(let s): return "a slot named \(s) already exists"
        case .noActiveSlot: return "no slot is active; sign in with `lanyard login` or choose one with `lanyard switch SLOT`"
        }
    }
}

/// Failures reading the configuration file.
public enum ConfigError: LanyardError, Equatable {
    /// The file does not parse; `line` is 1-based when known.
    case malformed(path: String, line: Int?, detail: String)
    /// A key has a value Lanyard cannot use.
    case invalidValue(path: String, group: String, key: String, detail: String)

    public var code: String { "config_invalid" }
    public var exitStatus: ExitStatus { .failure }

    /// Everything in it comes from the file (group and key names, values quoted in the detail):
    /// shown with control characters escaped, for every program that prints it.
    public var errorDescription: String? {
        switch self {
        case .malformed(let path, let line, let detail):
            return TerminalText.escaped("\(path)\(line.map { ":\($0)" } ?? ""): \(detail)")
        case .invalidValue(let path, let group, let key, let detail):
            return TerminalText.escaped("\(path): [\(group)] \(key): \(detail)")
        }
    }
}

/// A server error body in the `{code, message, details}` shape; `code` is "UNKNOWN" when unreadable.
public struct ServerErrorDetail: Hashable, Sendable {
    public var code: String
    public var message: String?
    public var details: [String: String]?

    public init(code: String = "UNKNOWN", message: String? = nil, details: [String: String]? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// Reads `code` from `error.code`, `error` (string), or `code`; `message` from `error.message`,
    /// `error_description` or `message`. Anything else gives code "UNKNOWN", and so does a code
    /// that is not one short line of text (it is stored and shown: control characters would
    /// reach a terminal). Every occurrence of a string in `secrets` (the tokens the request
    /// carried: a server may echo them) is replaced by `<redacted>` in code, message and details.
    public init(body: Data, redacting secrets: [String]) {
        self.init(body: body)
        code = TokenText.redacted(code, removing: secrets)
        message = message.map { TokenText.redacted($0, removing: secrets) }
        details = details?.mapValues { TokenText.redacted($0, removing: secrets) }
    }

    /// Reads `code` from `error.code`, `error` (string), or `code`; `message` from `error.message`,
    /// `error_description` or `message`. Anything else gives code "UNKNOWN", and so does a code
    /// that is not one short line of text.
    public init(body: Data) {
        self.init()
        guard let value = try? JSONValue.parse(body), let object = value.object else { return }
        if let nested = object["error"]?.object {
            code = nested["code"]?.string ?? nested["type"]?.string ?? code
            message = nested["message"]?.string
        } else if let e = object["error"]?.string {
            code = e
        } else if let c = object["code"]?.string {
            code = c
        }
        if TerminalText.lineProblem(code, limit: 128) != nil { code = "UNKNOWN" }
        message = message ?? object["error_description"]?.string ?? object["message"]?.string
        if case .object(let d)? = object["details"] {
            details = d.compactMapValues(\.string)
        }
    }
}

/// Failures of requests made with a slot's credential (the Chappie `ClientError`).
public enum ClientError: LanyardError, Equatable {
    case missingCredential(slot: String)
    case missingRefreshToken(slot: String)
    case missingAccountID(slot: String)
    case reauthenticationRequired(slot: String, reason: String)
    case usageLimitReached(UsageLimit)
    /// The server answered with an error status that maps to nothing more specific.
    case httpError(status: Int, detail: ServerErrorDetail)
    /// The body of a successful answer did not have the expected shape.
    case invalidResponse(String)
    case networkFailure(String)
    /// After a reconnect the server replayed text that contradicts what was already delivered; the
    /// value is the text delivered before the contradiction.
    case streamingTransportReplayDiverged(String)
    /// The stream ended with `response.failed` or `response.incomplete` instead of completing.
    case responseTerminalFailure(StreamResponse)
    /// A request header would carry a control character (a CR or LF would add headers): the
    /// request is refused, not sent with the value dropped.
    case invalidHeader(name: String, problem: String)

    public var code: String {
        switch self {
        case .streamingTransportReplayDiverged: return "streaming_replay_diverged"
        case .responseTerminalFailure: return "response_failed"
        case .missingCredential: return "missing_credential"
        case .missingRefreshToken: return "missing_refresh_token"
        case .missingAccountID: return "missing_account_id"
        case .reauthenticationRequired: return "reauthentication_required"
        case .usageLimitReached: return "usage_limit_reached"
        case .httpError: return "http_error"
        case .invalidResponse: return "invalid_response"
        case .networkFailure: return "network_failure"
        case .invalidHeader: return "invalid_header"
        }
    }

    public var exitStatus: ExitStatus {
        switch self {
        case .missingCredential: return .notSignedIn
        case .missingRefreshToken, .missingAccountID, .reauthenticationRequired: return .reauthenticationRequired
        case .usageLimitReached: return .usageLimit
        case .invalidHeader: return .failure
        case .httpError, .networkFailure, .invalidResponse, .streamingTransportReplayDiverged, .responseTerminalFailure:
            return .network
        }
    }

    public var errorDescription: String? {
        switch self {
        case .missingCredential(let s): return "slot \(s) is not signed in; run `lanyard login \(s)`"
        case .missingRefreshToken(let s): return "slot \(s) has no refresh token; run `lanyard login \(s)`"
        case .missingAccountID(let s): return "slot \(s) has no account id; run `lanyard login \(s)`"
        case .reauthenticationRequired(let s, let reason): return "slot \(s) must sign in again (\(reason)); run `lanyard login \(s)`"
        case .usageLimitReached(let limit): return limit.summary
        case .httpError(let status, let detail):
            return "server answered HTTP \(status) (\(detail.code))" + (detail.message.map { ": \(Self.clip($0))" } ?? "")
        case .invalidResponse(let what): return "server response could not be read: \(what)"
        case .networkFailure(let what): return "network failure: \(what)"
        case .invalidHeader(let name, let problem): return "refused to send the request: its \(name) header \(problem)"
        case .streamingTransportReplayDiverged(let partial):
            return "the stream was stopped: after reconnecting, the server replayed text that differs from the "
                + "\(partial.utf8.count) bytes already delivered; retry the request"
        case .responseTerminalFailure(let response):
            let reason = response.error.map { " (\($0.code))" + ($0.message.map { ": \(Self.clip($0))" } ?? "") } ?? ""
            return "the response ended with status \(response.status)\(reason)"
        }
    }

    static func clip(_ s: String) -> String { s.count > 200 ? String(s.prefix(200)) + "…" : s }
}

/// Failures of the device-code sign-in and of refreshing (the Chappie `AuthError`).
public enum AuthError: LanyardError, Equatable {
    case expiredDeviceCode
    case cancelledSignIn
    case networkFailure(String)
    case pollingTimeout
    case callbackTimeout
    case authorizationDenied(String)
    case tokenExchangeFailed(status: Int, detail: ServerErrorDetail)
    case missingRefreshToken
    case secureRandomFailed(status: Int32)
    case invalidResponse(String)
    case deviceCodeNotEnabled
    case unknown(String)

    /// True when the only way forward is a fresh sign-in (400/401/403 from the token endpoint,
    /// or no refresh token).
    public var requiresReauthentication: Bool {
        switch self {
        case .missingRefreshToken: return true
        case .tokenExchangeFailed(let status, _): return [400, 401, 403].contains(status)
        default: return false
        }
    }

    public var code: String {
        switch self {
        case .expiredDeviceCode: return "expired_device_code"
        case .cancelledSignIn: return "cancelled_sign_in"
        case .networkFailure: return "network_failure"
        case .pollingTimeout: return "polling_timeout"
        case .callbackTimeout: return "callback_timeout"
        case .authorizationDenied: return "authorization_denied"
        case .tokenExchangeFailed: return "token_exchange_failed"
        case .missingRefreshToken: return "missing_refresh_token"
        case .secureRandomFailed: return "secure_random_failed"
        case .invalidResponse: return "invalid_response"
        case .deviceCodeNotEnabled: return "device_code_not_enabled"
        case .unknown: return "unknown"
        }
    }

    public var exitStatus: ExitStatus {
        switch self {
        case .cancelledSignIn: return .cancelled
        case .networkFailure, .invalidResponse: return .network
        case _ where requiresReauthentication: return .reauthenticationRequired
        case .tokenExchangeFailed: return .network
        default: return .failure
        }
    }

    public var errorDescription: String? {
        switch self {
        case .expiredDeviceCode: return "the device code expired before it was approved; run the sign-in again"
        case .cancelledSignIn: return "sign-in cancelled; nothing was stored"
        case .networkFailure(let m): return "network failure during sign-in: \(m)"
        case .pollingTimeout: return "gave up waiting for the device code to be approved"
        case .callbackTimeout: return "the sign-in callback did not arrive in time"
        case .authorizationDenied(let m): return "authorization denied" + (m.isEmpty ? "" : ": \(m)")
        case .tokenExchangeFailed(let status, let detail):
            return "token endpoint answered HTTP \(status) (\(detail.code))"
                + (detail.message.map { ": \(ClientError.clip($0))" } ?? "")
        case .missingRefreshToken: return "the server issued no refresh token; sign in again"
        case .secureRandomFailed(let s): return "secure random generation failed (status \(s))"
        case .invalidResponse(let m): return "unexpected response from the authorization server: \(m)"
        case .deviceCodeNotEnabled: return "device-code sign-in is not enabled for this account or server"
        case .unknown(let m): return m
        }
    }
}
