import FoundationEssentials
import LanyardSupport

/// Where a slot is in its sign-in lifecycle (the six states of the Chappie auth session).
public enum AuthState: Hashable, Sendable, JSONDocument, CustomStringConvertible {
    /// No credential is stored.
    case signedOut
    /// Sign-in has started; the device code is being requested.
    case signingIn
    /// The device code is ready; waiting for the user to approve it in a browser.
    case awaitingDeviceCode(userCode: String, verificationURL: URL)
    /// Signed in; `expiresAt` is the access token's expiry, or nil if unknown.
    case signedIn(expiresAt: Date?)
    /// The refresh token is invalid or missing; the user must sign in again.
    case reauthenticationRequired
    /// An unrecoverable error occurred; the string is a human-readable message.
    case failed(String)

    /// A stable one-word name for scripts and the registry.
    public var name: String {
        switch self {
        case .signedOut: return "signed-out"
        case .signingIn: return "signing-in"
        case .awaitingDeviceCode: return "awaiting-device-code"
        case .signedIn: return "signed-in"
        case .reauthenticationRequired: return "reauthentication-required"
        case .failed: return "failed"
        }
    }

    public var description: String {
        switch self {
        case .signedOut: return "signed out"
        case .signingIn: return "signing in"
        case .awaitingDeviceCode(let code, let url): return "waiting for code \(code) at \(url.absoluteString)"
        case .signedIn: return "signed in"
        case .reauthenticationRequired: return "sign-in required"
        case .failed(let message): return "failed: \(message)"
        }
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        let name = try json.string("state")
        switch name {
        case "signed-out": self = .signedOut
        case "signing-in": self = .signingIn
        case "awaiting-device-code":
            guard let url = URL(string: try json.string("verification_url")) else {
                throw JSONShapeError(path: json.path + ".verification_url", problem: "is not a URL")
            }
            self = .awaitingDeviceCode(userCode: try json.string("user_code"), verificationURL: url)
        case "signed-in": self = .signedIn(expiresAt: try json.optionalDate("expires_at"))
        case "reauthentication-required": self = .reauthenticationRequired
        case "failed": self = .failed(try json.optionalString("message") ?? "")
        default: throw JSONShapeError(path: json.path + ".state", problem: "is not a known auth state")
        }
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["state": .string(name)]
        switch self {
        case .awaitingDeviceCode(let code, let url):
            o["user_code"] = .string(code)
            o["verification_url"] = .string(url.absoluteString)
        case .signedIn(let expiresAt): o["expires_at"] = .date(expiresAt)
        case .failed(let message): o["message"] = .string(message)
        default: break
        }
        return JSONValue.object(o).droppingNulls
    }
}
