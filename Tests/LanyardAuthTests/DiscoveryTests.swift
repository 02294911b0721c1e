import Foundation
import LanyardCore
import LanyardNetwork
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// Every endpoint an OIDC discovery document names passes the check a configured issuer passes:
/// https, or plain http only to this machine. A document served over https could otherwise send
/// the device code and the refresh token across the network in clear.
@Suite struct DiscoveryTests {
    func parse(_ json: String) throws(AuthError) -> DiscoveryAnswer.Endpoints {
        try DiscoveryAnswer.endpoints(try? JSONValue.parse(Data(json.utf8)), step: "OIDC discovery")
    }

    static let fields = [
        "device_authorization_endpoint", "token_endpoint", "authorization_endpoint", "revocation_endpoint",
        "userinfo_endpoint", "introspection_endpoint", "end_session_endpoint", "registration_endpoint", "jwks_uri",
    ]

    @Test func httpsAndLoopbackEndpointsAreTaken() throws {
        let endpoints = try parse(
            #"""
            {"issuer":"https://id.example","device_authorization_endpoint":"https://id.example/device",
             "token_endpoint":"http://127.0.0.1:8080/token","revocation_endpoint":"http://[::1]:9/revoke",
             "userinfo_endpoint":"http://localhost/userinfo","jwks_uri":"https://id.example/jwks",\#
            "end_session_endpoint":null,
             "mtls_endpoint_aliases":{"token_endpoint":"https://mtls.id.example/token"},\#
            "op_policy_uri":"http://id.example/policy"}
            """#
        )
        #expect(
            endpoints
                == DiscoveryAnswer.Endpoints(
                    deviceAuthorization: URL(string: "https://id.example/device"),
                    token: URL(string: "http://127.0.0.1:8080/token"),
                    revocation: URL(string: "http://[::1]:9/revoke")
                )
        )
        #expect(try parse(#"{"issuer":"https://id.example"}"#) == DiscoveryAnswer.Endpoints())
    }

    @Test(arguments: fields)
    func plainHTTPToAnotherMachineIsInvalidNamingTheField(_ field: String) {
        for url in ["http://id.example/x", "HTTP://10.0.0.1/x", "http://127.0.0.1.evil.example/x"] {
            let json = #"{"issuer":"https://id.example","\#(field)":"\#(url)"}"#
            #expect(
                throws: AuthError.invalidResponse(
                    "OIDC discovery: \(field) is plain http to another machine; "
                        + "endpoints must be https (plain http only to localhost, 127.0.0.1, ::1)"
                )
            ) {
                try parse(json)
            }
        }
        for (value, problem) in [
            (#""ftp://id.example/x""#, "is not an http(s) URL"), (#""/relative""#, "is not an http(s) URL"),
            (#""https://""#, "is not an http(s) URL"), ("42", "is not a URL"),
            (#"["https://id.example"]"#, "is not a URL"),
        ] {
            #expect(throws: AuthError.invalidResponse("OIDC discovery: \(field) \(problem)")) {
                try parse(#"{"\#(field)":\#(value)}"#)
            }
        }
    }

    @Test func mTLSAliasesAndFieldNamesFromTheServerAreChecked() {
        #expect(
            throws: AuthError.invalidResponse(
                "OIDC discovery: mtls_endpoint_aliases.token_endpoint is plain http to another machine; "
                    + "endpoints must be https (plain http only to localhost, 127.0.0.1, ::1)"
            )
        ) {
            try parse(#"{"mtls_endpoint_aliases":{"token_endpoint":"http://mtls.id.example/token"}}"#)
        }
        #expect(throws: AuthError.invalidResponse("OIDC discovery: mtls_endpoint_aliases is not an object")) {
            try parse(#"{"mtls_endpoint_aliases":"https://id.example"}"#)
        }
        // A field name with a terminal control in it is shown escaped.
        #expect {
            try parse(#"{"x\u001b]0;owned\u0007_endpoint":"http://id.example/x"}"#)
        } throws: { error in
            guard case .invalidResponse(let message) = error as? AuthError else { return false }
            return !message.contains("\u{1b}") && !message.contains("\u{7}")
                && message.contains("_endpoint is plain http")
        }
        #expect(throws: AuthError.invalidResponse("OIDC discovery: the body is not a JSON object")) { try parse("[]") }
    }

    /// Through the provider, against device_server.py serving a discovery document (over http to
    /// this machine, as a configured issuer may be) whose token endpoint is plain http elsewhere:
    /// the sign-in stops before sending anything there. The control signs in with the real one.
    @Test func theProviderRefusesADocumentThatSendsTokensInClear() async throws {
        let server = try OAuthTestServer(.deviceServer)
        let issuer = server.baseURL.absoluteString
        try await server.hook(
            "/_test/fault",
            [
                "endpoint": "discovery", "type": "status", "status": 200,
                "body": [
                    "issuer": issuer, "device_authorization_endpoint": issuer + "/oauth/device_authorization",
                    "token_endpoint": "http://auth.example.com/oauth/token",
                ],
            ]
        )
        let config = ProviderConfig(
            id: "test",
            kind: .deviceCode,
            issuer: server.baseURL,
            clientID: "lanyard-test-client",
            scopes: ["openid", "email", "offline_access"]
        )
        await #expect(
            throws: AuthError.invalidResponse(
                "OIDC discovery: token_endpoint is plain http to another machine; "
                    + "endpoints must be https (plain http only to localhost, 127.0.0.1, ::1)"
            )
        ) {
            _ = try await GenericDeviceProvider(config: config, transport: URLSessionTransport(timeout: 10)).authorize()
        }
        #expect(try await server.stat("requests.device_authorization") == 0, "nothing was sent after the document")
        let authorization = try await GenericDeviceProvider(config: config, transport: URLSessionTransport(timeout: 10))
            .authorize()
        #expect(!authorization.userCode.isEmpty)
    }
}
