import FoundationEssentials
import LanyardSupport

/// The payload of a JSON Web Token, decoded without checking its signature.
///
/// Lanyard reads claims only to show who a slot is signed in as and when its token expires; the
/// provider checks signatures. Decoding is strict about shape: every malformed token gets its own
/// ``JWTError``, and no error ever contains the token.
package struct JWTClaims: Sendable {
    /// The payload as a JSON object.
    public let payload: [String: JSONValue]

    public init(token: String) throws(JWTError) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .wrongPartCount(parts.count) }
        guard !parts[1].isEmpty, let data = Base64URL.decode(String(parts[1])) else {
            throw .invalidBase64(part: "payload")
        }
        guard Base64URL.decode(String(parts[0])) != nil else { throw .invalidBase64(part: "header") }
        let value: JSONValue
        do { value = try JSONValue.parse(data) } catch { throw .payloadNotJSON }
        guard case .object(let object) = value else { throw .payloadNotObject }
        payload = object
    }

    /// `exp` as a date, when present and numeric.
    public var expiresAt: Date? { payload["exp"]?.number?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) } }
    /// `iat` as a date, when present and numeric.
    public var issuedAt: Date? { payload["iat"]?.number?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) } }
    public var email: String? { payload["email"]?.string }
    public var subject: String? { payload["sub"]?.string }

    /// `aud`, which RFC 7519 allows as one string or an array of strings.
    public var audience: [String] {
        switch payload["aud"] {
        case .string(let s): return [s]
        case .array(let items): return items.compactMap(\.string)
        default: return []
        }
    }

    /// The value at a dotted claim path; a path segment may itself contain dots when it names a key
    /// that exists (such as `https://api.openai.com/auth`).
    public func value(atPath path: String) -> JSONValue? {
        if let direct = payload[path] { return direct }
        var current: JSONValue = .object(payload)
        var rest = Substring(path)
        while !rest.isEmpty {
            guard case .object(let dict) = current else { return nil }
            // Longest key that prefixes the rest of the path.
            guard
                let key = dict.keys.filter({ rest == $0 || rest.hasPrefix($0 + ".") }).max(by: { $0.count < $1.count })
            else {
                return nil
            }
            current = dict[key]!
            rest = rest.dropFirst(key.count)
            if rest.first == "." { rest = rest.dropFirst() }
        }
        return current
    }
}

/// Why a token's payload could not be read.
package enum JWTError: Error, Equatable, Sendable, LocalizedError {
    case wrongPartCount(Int)
    case invalidBase64(part: String)
    case payloadNotJSON
    case payloadNotObject

    public var errorDescription: String? {
        switch self {
        case .wrongPartCount(let n): return "token has \(n) dot-separated part\(n == 1 ? "" : "s"); a JWT has 3"
        case .invalidBase64(let part): return "token \(part) is not valid base64url"
        case .payloadNotJSON: return "token payload is not JSON"
        case .payloadNotObject: return "token payload is JSON but not an object"
        }
    }
}

/// base64url without padding (RFC 4648 §5), as JWTs use it. Padding is accepted on input.
package enum Base64URL {
    package static func decode(_ text: String) -> Data? {
        var s = text
        while s.hasSuffix("=") { s.removeLast() }
        guard
            s.utf8.allSatisfy({ b in
                (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b == 0x2d
                    || b == 0x5f
            })
        else { return nil }
        guard s.utf8.count % 4 != 1 else { return nil }
        s = String(s.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        s += String(repeating: "=", count: (4 - s.utf8.count % 4) % 4)
        return Data(base64Encoded: s)
    }

    package static func encode(_ data: Data) -> String {
        String(data.base64EncodedString().compactMap { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 == "=" ? nil : $0 })
    }
}
