import FoundationEssentials
import LanyardCore
import LanyardSupport

/// An OpenID Connect discovery document (`/.well-known/openid-configuration`), parsed apart from
/// the request that fetches it (so the fuzzer reaches it).
///
/// Every endpoint it names passes the check a configured issuer passes (`Loopback.isSecureOrLocal`):
/// https, or plain http only to this machine. A document served over https could otherwise send
/// the device code and the refresh token across the network in clear. Anything else is
/// `.invalidResponse` naming the field.
enum DiscoveryAnswer {
    /// The endpoints the device flow uses; nil when the document names none.
    struct Endpoints: Equatable {
        var deviceAuthorization: URL?
        var token: URL?
        var revocation: URL?
    }

    /// The fields that hold URLs Lanyard may send requests (and tokens) to: every `…_endpoint`
    /// (token, device_authorization, authorization, revocation, userinfo, introspection,
    /// end_session, registration, pushed_authorization_request…), `jwks_uri`, and the values of
    /// `mtls_endpoint_aliases` (RFC 8705). Documentation pages (`op_policy_uri`…) are not requests.
    static func isEndpointField(_ key: String) -> Bool { key.hasSuffix("_endpoint") || key == "jwks_uri" }

    static func endpoints(_ body: JSONValue?, step: String) throws(AuthError) -> Endpoints {
        guard let object = body?.object else { throw .invalidResponse("\(step): the body is not a JSON object") }
        var checked: [String: URL] = [:]
        // In key order, so a document with several bad fields always names the same one.
        for key in object.keys.sorted() where isEndpointField(key) {
            checked[key] = try endpoint(object[key], field: key, step: step)
        }
        switch object["mtls_endpoint_aliases"] {
        case .object(let aliases)?:
            for key in aliases.keys.sorted() {
                _ = try endpoint(aliases[key], field: "mtls_endpoint_aliases." + key, step: step)
            }
        case nil, .null?: break
        default: throw .invalidResponse("\(step): mtls_endpoint_aliases is not an object")
        }
        return Endpoints(
            deviceAuthorization: checked["device_authorization_endpoint"],
            token: checked["token_endpoint"],
            revocation: checked["revocation_endpoint"]
        )
    }

    /// One field's URL: nil when it is absent or null; an error naming the field when it is not an
    /// https URL or an http URL to this machine. The value is not quoted (it is the server's text).
    static func endpoint(_ value: JSONValue?, field: String, step: String) throws(AuthError) -> URL? {
        let name = TerminalText.escaped(String(field.prefix(80)))
        switch value {
        case nil, .null?: return nil
        case .string(let text)?:
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                url.host?.isEmpty == false
            else {
                throw .invalidResponse("\(step): \(name) is not an http(s) URL")
            }
            guard Loopback.isSecureOrLocal(url) else {
                throw .invalidResponse(
                    "\(step): \(name) is plain http to another machine; "
                        + "endpoints must be https (plain http only to localhost, 127.0.0.1, ::1)"
                )
            }
            return url
        default: throw .invalidResponse("\(step): \(name) is not a URL")
        }
    }
}
