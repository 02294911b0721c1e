import FoundationEssentials
import LanyardCore

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

    public var code: ErrorCode {
        switch self {
        case .streamingTransportReplayDiverged: return .streamingReplayDiverged
        case .responseTerminalFailure: return .responseFailed
        case .missingCredential: return .missingCredential
        case .missingRefreshToken: return .missingRefreshToken
        case .missingAccountID: return .missingAccountID
        case .reauthenticationRequired: return .reauthenticationRequired
        case .usageLimitReached: return .usageLimitReached
        case .httpError: return .httpError
        case .invalidResponse: return .invalidResponse
        case .networkFailure: return .networkFailure
        case .invalidHeader: return .invalidHeader
        }
    }

    public var errorDescription: String? {
        switch self {
        case .missingCredential(let s): return "slot \(s) is not signed in; run `lanyard login \(s)`"
        case .missingRefreshToken(let s): return "slot \(s) has no refresh token; run `lanyard login \(s)`"
        case .missingAccountID(let s): return "slot \(s) has no account id; run `lanyard login \(s)`"
        case .reauthenticationRequired(let s, let reason):
            return "slot \(s) must sign in again (\(reason)); run `lanyard login \(s)`"
        case .usageLimitReached(let limit): return limit.summary
        case .httpError(let status, let detail):
            return "server answered HTTP \(status) (\(detail.code))"
                + (detail.message.map { ": \(Self.clip($0))" } ?? "")
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

extension ClientError: SlotNamingError {
    package var slotName: String? {
        switch self {
        case .missingCredential(let s), .missingRefreshToken(let s), .missingAccountID(let s),
            .reauthenticationRequired(let s, _):
            s
        default: nil
        }
    }
}

/// Failures of the device-code sign-in and of refreshing (the Chappie `AuthError`).
public enum AuthError: LanyardError, Equatable {
    case expiredDeviceCode
    case cancelledSignIn
    case networkFailure(String)
    case pollingTimeout
    case callbackTimeout
    /// Every port the browser sign-in may listen on (on 127.0.0.1 or ::1) is taken.
    case callbackPortInUse(ports: [UInt16])
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

    public var code: ErrorCode {
        switch self {
        case .expiredDeviceCode: return .expiredDeviceCode
        case .cancelledSignIn: return .cancelledSignIn
        case .networkFailure: return .networkFailure
        case .pollingTimeout: return .pollingTimeout
        case .callbackTimeout: return .callbackTimeout
        case .callbackPortInUse: return .callbackPortInUse
        case .authorizationDenied: return .authorizationDenied
        case .tokenExchangeFailed where requiresReauthentication: return .tokenExchangeRefused
        case .tokenExchangeFailed: return .tokenExchangeFailed
        case .missingRefreshToken: return .missingRefreshToken
        case .secureRandomFailed: return .secureRandomFailed
        case .invalidResponse: return .invalidResponse
        case .deviceCodeNotEnabled: return .deviceCodeNotEnabled
        case .unknown: return .unknown
        }
    }

    public var errorDescription: String? {
        switch self {
        case .expiredDeviceCode: return "the device code expired before it was approved; run the sign-in again"
        case .cancelledSignIn: return "sign-in cancelled; nothing was stored"
        case .networkFailure(let m): return "network failure during sign-in: \(m)"
        case .pollingTimeout: return "gave up waiting for the device code to be approved"
        case .callbackTimeout: return "the sign-in callback did not arrive in time"
        case .callbackPortInUse(let ports):
            let names = ports.map(String.init).joined(separator: " and ")
            return "another program listens on 127.0.0.1 or ::1 "
                + "port\(ports.count == 1 ? "" : "s") \(names), where the browser sign-in "
                + "must wait for its callback: most likely another sign-in "
                + "(such as Codex's own `codex login`) is waiting there. "
                + "Finish or cancel that sign-in and run this one again, "
                + "or sign in with a device code: `lanyard login --device`"
        case .authorizationDenied(let m): return "authorization denied" + (m.isEmpty ? "" : ": \(m)")
        case .tokenExchangeFailed(let status, let detail):
            return "token endpoint answered HTTP \(status) (\(detail.code))"
                + (detail.message.map { ": \(ClientError.clip($0))" } ?? "")
        case .missingRefreshToken: return "the server issued no refresh token; sign in again"
        case .secureRandomFailed(let s): return "secure random generation failed (status \(s))"
        case .invalidResponse(let m): return "unexpected response from the authorization server: \(m)"
        case .deviceCodeNotEnabled:
            return "device-code sign-in is not enabled for this account or server; for ChatGPT, turn on device code "
                + "sign-in for Codex in ChatGPT's security settings "
                + "(in a workspace, an admin may have to allow it), then run the sign-in again, "
                + "or sign in through the browser: `lanyard login --browser`"
        case .unknown(let m): return m
        }
    }
}
