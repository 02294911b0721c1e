import FoundationEssentials
import LanyardSupport

/// The answers that start a device-code sign-in, parsed apart from the requests that fetch them
/// (so the fuzzer reaches them). Anything short of a usable answer is `.invalidResponse` naming
/// the field.
enum DeviceAuthorizationAnswer {
    /// ChatGPT's `usercode` answer: `device_auth_id`, `user_code` (or `usercode`) and `interval`
    /// (a string of seconds, or a number).
    static func chatGPT(
        _ body: JSONValue?,
        step: String,
        verificationURL: URL,
        expiresAt: Date
    ) throws(AuthError) -> DeviceAuthorization {
        guard let object = body?.object else { throw .invalidResponse("\(step): the body is not a JSON object") }
        guard let id = object["device_auth_id"]?.string, !id.isEmpty else {
            throw .invalidResponse("\(step): device_auth_id is missing")
        }
        guard let code = (object["user_code"] ?? object["usercode"])?.string, !code.isEmpty else {
            throw .invalidResponse("\(step): user_code is missing")
        }
        try checkUserCode(code, step: step)
        var interval: TimeInterval = 5
        switch object["interval"] {
        case .string(let s)?:
            guard let v = TimeInterval(s.trimmingSpaces()), v >= 0, v.plausibleSeconds != nil else {
                throw .invalidResponse("\(step): interval is not a number of seconds")
            }
            interval = v
        case .number(let n)? where n.plausibleSeconds != nil: interval = max(0, n)
        case nil, .null?: break
        default: throw .invalidResponse("\(step): interval is not a number of seconds")
        }
        return DeviceAuthorization(
            userCode: code,
            verificationURL: verificationURL,
            interval: interval,
            expiresAt: expiresAt,
            deviceCode: id
        )
    }

    /// An RFC 8628 §3.2 device authorization response.
    static func rfc8628(_ value: JSONValue?, step: String, now: Date) throws(AuthError) -> DeviceAuthorization {
        guard let value else { throw .invalidResponse("\(step): the body is not JSON") }
        do {
            let json = try JSONFields(value)
            guard let uri = URL(string: try json.string("verification_uri")) else {
                throw JSONShapeError(path: ".verification_uri", problem: "is not a URL")
            }
            let expiresIn = try json.optionalNumber("expires_in") ?? 1800
            let interval = try json.optionalNumber("interval") ?? 5
            for (key, value) in [("expires_in", expiresIn), ("interval", interval)]
            where value < 0 || value.plausibleSeconds == nil {
                throw JSONShapeError(path: "." + key, problem: "is not a number of seconds")
            }
            let code = try json.string("user_code")
            try checkUserCode(code, step: step)
            return DeviceAuthorization(
                userCode: code,
                verificationURL: uri,
                completeVerificationURL: try json.optionalString("verification_uri_complete").flatMap(
                    URL.init(string:)
                ),
                interval: interval,
                expiresAt: now + expiresIn,
                deviceCode: try json.string("device_code")
            )
        } catch let error as AuthError {
            throw error
        } catch {
            throw .invalidResponse("\(step): \(error.userFacingDescription)")
        }
    }

    /// A user code is something a person reads and types (RFC 8628 §6.1): printable, short. One
    /// with control characters would reach the terminal as commands, so it is refused.
    static func checkUserCode(_ code: String, step: String) throws(AuthError) {
        guard code.utf8.count <= 128,
            !code.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) })
        else {
            throw .invalidResponse(
                "\(step): user_code is not something a person can type "
                    + "(\(code.utf8.count) bytes, or control characters)"
            )
        }
    }
}
