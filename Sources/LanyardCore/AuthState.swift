import Foundation

/// Where a slot is in its sign-in lifecycle (the six states of the Chappie auth session).
public enum AuthState: Hashable, Sendable, Codable, CustomStringConvertible {
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

    enum CodingKeys: String, CodingKey { case state, userCode = "user_code", verificationURL = "verification_url", expiresAt = "expires_at", message }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let name = try c.decode(String.self, forKey: .state)
        switch name {
        case "signed-out": self = .signedOut
        case "signing-in": self = .signingIn
        case "awaiting-device-code":
            self = .awaitingDeviceCode(userCode: try c.decode(String.self, forKey: .userCode),
                                       verificationURL: try c.decode(URL.self, forKey: .verificationURL))
        case "signed-in": self = .signedIn(expiresAt: try c.decodeIfPresent(Date.self, forKey: .expiresAt))
        case "reauthentication-required": self = .reauthenticationRequired
        case "failed": self = .failed(try c.decodeIfPresent(String.self, forKey: .message) ?? "")
        default:
            throw DecodingError.dataCorruptedError(forKey: .state, in: c, debugDescription: "unknown auth state \"\(name)\"")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .state)
        switch self {
        case .awaitingDeviceCode(let code, let url):
            try c.encode(code, forKey: .userCode)
            try c.encode(url, forKey: .verificationURL)
        case .signedIn(let expiresAt): try c.encodeIfPresent(expiresAt, forKey: .expiresAt)
        case .failed(let message): try c.encode(message, forKey: .message)
        default: break
        }
    }
}
